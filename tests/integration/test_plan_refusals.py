"""Specs that cannot run are refused by `dbmatrix plan` (and `run`) before anything runs, as a new user
meets them: a misspelt server option, a value mariadbd does not take, a value with a newline, a dataset
that cannot fit its medium, a design that aliases a contrast one of the study's claims needs
(tests/fixtures/specs/). The host's own mariadbd judges the options (locally
and over SSH to a test host); the message names the field, the exit code is 2, there is no traceback,
and no results directory, snapshot or server was made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dbmatrix import paths

pytestmark = pytest.mark.integration

SPECS = paths.repo_root() / "tests" / "fixtures" / "specs"
REFUSALS = {
    "bad-option-name.yaml": ("server_options.innodb_bufer_pool_instancez: not an option of mariadbd ",
                             "unknown variable 'innodb-bufer-pool-instancez=4'; did you mean innodb_buffer_pool_"),
    "bad-option-value.yaml": ("server_options.max_connections: 'lots' is refused by mariadbd ",
                              "allowed: a whole number, optionally with a K, M, G, T, P or E suffix"),
    "option-value-newline.yaml": ("server_options.innodb_flush_method: 'O_DIRECT\\nfsync' contains a control "
                                  "character, newline (U+000A)", "allowed: one line of printable text"),
    "aliased-claim.yaml": ("tpcc-aliased: claim ", "which the crossed design does not identify: "),
    "dataset-too-large.yaml": ("workload.table_size: dataset innodb-b16k-none-oltp-64x1000000000 needs at least "
                               "17.5 TiB on medium 'tmpfs' of host 'localhost'", "which holds 4.0 GiB"),
}


def dbmatrix(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib"), "DBMATRIX_CACHE_DIR": str(cwd / "cache"),
           "DBMATRIX_WORKDIR": str(cwd / "w")}
    r = subprocess.run([sys.executable, "-m", "dbmatrix", *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=120)
    print(f"$ dbmatrix {' '.join(args)}  (exit {r.returncode})\n{r.stdout}{r.stderr}", end="")  # shown with -s
    return r


def refused(r: subprocess.CompletedProcess[str], cwd: Path) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert not (cwd / "res").exists()  # no results directory
    assert not (cwd / "w" / "snapshots").exists() and not (cwd / "w" / "run").exists()  # nothing started
    return r.stderr


@pytest.mark.parametrize("spec", sorted(REFUSALS))
def test_plan_and_run_refuse_a_spec_that_cannot_run(spec: str, tmp_path: Path) -> None:
    first, then = REFUSALS[spec]
    for command in ("plan", "run"):
        err = refused(dbmatrix(tmp_path, command, "--profile", "smoke", "--spec", str(SPECS / spec),
                               "--results", "res"), tmp_path)
        assert err.startswith(f"dbmatrix: {first}"), err
        assert then in err
        assert f"(spec {SPECS / spec}; nothing was run)" in err or "control character" in err


def _write_spec(tmp: Path, **over: object) -> Path:
    raw = yaml.safe_load((SPECS / "bad-option-value.yaml").read_text())
    raw.update(over)
    p = tmp / "spec.yaml"
    p.write_text(yaml.safe_dump(raw))
    return p


def test_every_bad_option_is_named_at_once_with_plugins_loaded(tmp_path: Path) -> None:
    """MyRocks options are judged with ha_rocksdb.so loaded; a plugin's bad value (mariadbd exits 0 and
    disables the plugin), a boolean it would ignore and a number it would clamp are refused too."""
    spec = _write_spec(tmp_path, experiment="several", factors={
        "engine": ["innodb", "myrocks"], "cache_pct": 100, "block_size": "16k", "compression": "none",
        "medium": "disk", "threads": 2}, server_options={
        "rocksdb_max_open_files": "x", "innodb_doublewrite": "maybe", "max_connections": 99999999,
        "rocksdb_flush_log_at_trx_commit": 1, "innodb_flush_method": "O_DIRECT"})
    err = refused(dbmatrix(tmp_path, "plan", "--profile", "smoke", "--spec", str(spec), "--results", "res"),
                  tmp_path)
    lines = [ln.removeprefix("dbmatrix: ") for ln in err.splitlines()]
    assert len(lines) == 4, err  # three options, each named once, and the spec
    assert any(ln.startswith("server_options.rocksdb_max_open_files: 'x' is refused by mariadbd")
               and "(with the MyRocks plugin)" in ln for ln in lines), err
    assert any(ln.startswith("server_options.innodb_doublewrite: 'maybe' is refused") and "ON or OFF" in ln
               for ln in lines), err
    assert any(ln.startswith("server_options.max_connections: '99999999' is refused") and "adjusted to 100000"
               in ln for ln in lines), err
    assert not any("rocksdb_flush_log_at_trx_commit" in ln or "innodb_flush_method" in ln for ln in lines)
    assert (tmp_path / "cache" / "mariadbd-options").is_dir()  # the option lists, for the close matches


def test_a_good_spec_is_planned_and_says_what_was_checked(tmp_path: Path) -> None:
    r = dbmatrix(tmp_path, "plan", "--profile", "smoke", "--results", "res")
    assert r.returncode == 0, r.stderr
    assert "checked: 5 server option setting(s) accepted by mariadbd 10." in r.stdout
    assert "datasets fit their media" in r.stdout
    assert not (tmp_path / "res").exists()


def test_options_are_judged_by_the_remote_hosts_mariadbd(tmp_path: Path, netns_hosts) -> None:
    h1 = netns_hosts["h1"]
    (tmp_path / "hosts.yaml").write_text(yaml.safe_dump({"hosts": [h1.inventory_entry()]}, sort_keys=False))
    spec = _write_spec(tmp_path, server_options={"max_connections": "lots"})
    err = refused(dbmatrix(tmp_path, "plan", "--profile", "smoke", "--spec", str(spec), "--inventory", "hosts.yaml",
                           "--results", "res"), tmp_path)
    assert err.startswith("dbmatrix: server_options.max_connections: 'lots' is refused by mariadbd 10."), err
    assert "on host h1" in err
