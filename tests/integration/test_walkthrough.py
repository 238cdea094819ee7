"""docs/hosts.md's "Two hosts, step by step", followed step by step on the two SSH test hosts (network
namespaces with their own sshd, tests/conftest_netns.py): the commands and the inventory are read from the
page itself, the example addresses, user and workdir replaced by the test hosts', and every command runs
through the CLI in a subprocess from a temporary current directory with relative paths.

What the test cannot do as a user would: step 1 makes and authorises a key (`ssh-keygen`,
`ssh-copy-id`); here the fixture's client key, already authorised on both hosts, is copied to the path the
page names instead."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from dbmatrix import paths

pytestmark = pytest.mark.integration

SECTION = ("### Two hosts, step by step", "**When a host is not right**")
EXAMPLE = {"db1": "db1.example.org", "db2": "db2.example.org"}
EXAMPLE_USER, EXAMPLE_WORKDIR = "bench", "/var/tmp/dbmatrix"


def readme_walkthrough() -> tuple[list[str], str]:
    """The shell commands (in order) and the inventory YAML of the walk-through in docs/hosts.md."""
    text = (paths.repo_root() / "docs" / "hosts.md").read_text()
    start, end = text.index(SECTION[0]), text.index(SECTION[1])
    blocks = re.findall(r"^( *)```(sh|yaml)\n(.*?)^\1```", text[start:end], re.MULTILINE | re.DOTALL)
    commands = [line.strip() for indent, kind, body in blocks if kind == "sh"
                for line in textwrap.dedent(body).splitlines() if line.strip()]
    inventories = [textwrap.dedent(body) for _, kind, body in blocks if kind == "yaml"]
    assert len(inventories) == 1, inventories
    return commands, inventories[0]


def _substitute(command: str, netns_hosts) -> str:
    for name, example in EXAMPLE.items():
        command = command.replace(example, netns_hosts[EXAMPLE_NAMES[name]].address)
    return command.replace(f"{EXAMPLE_USER}@", "root@")


EXAMPLE_NAMES = {"db1": "h1", "db2": "h2"}  # README host -> test host


def _dbmatrix(cwd: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib")}
    args = shlex.split(command)
    assert args[0] == "dbmatrix", command
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "dbmatrix", *args[1:]], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=600)
    print(f"$ {command}  (exit {r.returncode}, {time.monotonic() - t0:.1f} s)\n{r.stdout}{r.stderr}", end="")
    assert r.returncode == 0, (command, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _tree(root: Path, subdirs: tuple[str, ...]) -> dict[Path, int]:
    """Files under root/<subdir> with their modification times (to show nothing there was written)."""
    return {p: p.stat().st_mtime_ns for d in subdirs if (root / d).is_dir() for p in (root / d).rglob("*")
            if p.is_file()}


def test_readme_walkthrough_on_two_hosts(tmp_path: Path, netns_hosts) -> None:
    started = time.monotonic()
    commands, inventory_yaml = readme_walkthrough()
    lab = tmp_path / "lab"
    lab.mkdir()
    h1, h2 = netns_hosts["h1"], netns_hosts["h2"]
    repo_outputs = {p: p.stat().st_mtime_ns for d in ("figures", "paper/generated")
                    for p in (paths.repo_root() / d).glob("*") if p.is_file()}

    # 1. the key: the fixture's (authorised on both hosts) where the README makes one
    keygen, *copy_ids = [c for c in commands if c.startswith(("ssh-keygen -t", "ssh-copy-id"))]
    assert keygen == "ssh-keygen -t ed25519 -N '' -f keys/id_ed25519" and len(copy_ids) == 2
    (lab / "keys").mkdir(mode=0o700)
    shutil.copyfile(h1.key_file, lab / "keys" / "id_ed25519")
    (lab / "keys" / "id_ed25519").chmod(0o600)
    shutil.copyfile(h1.key_file + ".pub", lab / "keys" / "id_ed25519.pub")

    # 2. the hosts' keys, fetched with ssh-keyscan as the README says; the fingerprints are the hosts' own
    keyscan = next(c for c in commands if c.startswith("ssh-keyscan"))
    r = subprocess.run(_substitute(keyscan, netns_hosts), shell=True, cwd=lab, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    known = (lab / "known_hosts").read_text().splitlines()
    assert sorted(line.split()[0] for line in known) == sorted([h1.address, h2.address])
    for nh in (h1, h2):
        assert f"{nh.address} {nh.host_pubkey}" in known
    assert "ssh-keygen -lf known_hosts" in commands
    fps = subprocess.run(["ssh-keygen", "-lf", "known_hosts"], cwd=lab, capture_output=True, text=True, check=True)
    assert len(fps.stdout.splitlines()) == 2

    # 3. the inventory as the README shows it, with the test hosts' addresses, user and workdirs
    raw = yaml.safe_load(inventory_yaml)
    assert [h["name"] for h in raw["hosts"]] == ["db1", "db2"]
    for h in raw["hosts"]:
        nh = netns_hosts[EXAMPLE_NAMES[h["name"]]]
        assert h["address"] == EXAMPLE[h["name"]] and h["user"] == EXAMPLE_USER
        assert h["key_file"] == "keys/id_ed25519" and h["known_hosts"] == "known_hosts"
        assert set(h["media"]) == {"disk"}  # the smoke spec's medium level
        h.update(address=nh.address, user="root", workdir=nh.workdir)
        h["media"]["disk"]["path"] = h["media"]["disk"]["path"].replace(EXAMPLE_WORKDIR, nh.workdir)
    (lab / "hosts.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))

    steps = [c for c in commands if c.startswith("dbmatrix ")]
    assert [s.split()[1] for s in steps] == ["setup", "plan", "run", "status", "analyse", "figures", "paper"]
    results, out = lab / "results" / "smoke", lab / "out"
    outputs: dict[str, str] = {}
    # What other tests of the session left in the output root must stay as it is.
    root_before = _tree(paths.output_root(), ("figures", "paper"))
    for step in steps:
        verb = step.split()[1]
        if verb == "paper" and shutil.which("latexmk") is None:
            pytest.fail("latexmk missing: `dbmatrix setup --roles paper` installs it")
        outputs[verb] = _dbmatrix(lab, _substitute(step, netns_hosts)).stdout

    # 4. setup: per host, the state and the versions read back
    for name in ("db1", "db2"):
        assert re.search(rf"^{name} \(debian\): all packages present$", outputs["setup"], re.MULTILINE)
    assert len(re.findall(r"^  mariadb-server \S+$", outputs["setup"], re.MULTILINE)) == 2
    assert len(re.findall(r"^  sysbench 1\.0\.\S+$", outputs["setup"], re.MULTILINE)) == 2
    # 5. plan: the hosts as checked, 2 runs on both, the results directory relative to the lab
    for name, nh in (("db1", h1), ("db2", h2)):
        assert (f"host {name}: root@{nh.address} port 22, key {lab / 'keys' / 'id_ed25519'}, host key in "
                f"{lab / 'known_hosts'} (workdir {nh.workdir}; media disk)") in outputs["plan"]
    assert "= 2 runs on db1, db2" in outputs["plan"] and f"results in {results})" in outputs["plan"]
    # 6. run: both runs ok
    counts = json.loads(outputs["run"].strip().splitlines()[-1])
    assert counts["ok"] == 2 and counts["failed"] == 0, counts
    manifests = [json.loads(p.read_text()) for p in results.glob("raw/*/manifest.json")]
    assert len(manifests) == 2 and {m["host"] for m in manifests} <= {"db1", "db2"}
    # 7. status, analyse, figures, paper
    assert "\ncache-sweep-smoke: 2/2 runs done, 0 failed, 0 not started;" in outputs["status"]
    assert outputs["status"].startswith("cache-sweep-smoke: figures and paper read ")  # the data choice first
    assert outputs["analyse"].strip() == f"cache-sweep-smoke: 2 runs analysed -> {results / 'processed'}"
    assert (results / "processed" / "analysis.json").is_file()
    assert f"figures in {out / 'figures'}, paper inputs in {out / 'paper' / 'generated'}" in outputs["figures"]
    assert re.search(r"^figure \S+ <- cache-sweep-smoke$", outputs["figures"], re.MULTILINE)
    assert list((out / "figures").glob("*.pdf")) and (out / "paper" / "generated" / "macros.tex").is_file()
    pdf = out / "paper" / "main.pdf"
    assert outputs["paper"].strip() == str(pdf) and pdf.read_bytes().startswith(b"%PDF")
    # the paper of a smoke study alone (what test_pipeline.py built from its own study before)
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert pdf.stat().st_size > 20_000 and "cache-sweep-smoke" in text and "cache share" in text
    # nothing outside the lab was written: not the repository's tracked outputs, not the output root's
    assert repo_outputs == {p: p.stat().st_mtime_ns for p in repo_outputs}
    assert _tree(paths.output_root(), ("figures", "paper")) == root_before
    print(f"walk-through: {time.monotonic() - started:.1f} s")
