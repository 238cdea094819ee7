"""dbmatrix.workload.tpcc and the TPC-C side of dbmatrix.workload.sysbench, on outputs captured from real runs
(tests/fixtures/tpcc), plus the Lua script's own selftest run by the real sysbench (no server)."""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.parse import tpcc as tpcc_output
from dbmatrix.parse.sysbench import parse_output
from dbmatrix.workload import tpcc
from dbmatrix.workload.sysbench import RunOptions, SysbenchCommand, Target, command_string

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tpcc"
INNODB_RUN = "run_innodb_w1_t2_5s.stdout"
MYROCKS_RUN = "run_myrocks_rr_w1_t16_5s.stdout"
# One process, --report-checkpoints=2 of 5 s: the report covers the 3 s window only, like sysbench's counters.
CHECKPOINT_RUN = "run_innodb_w1_t2_checkpoint2_5s.stdout"
RUNS = [INNODB_RUN, MYROCKS_RUN, CHECKPOINT_RUN]
SOCK = "/tmp/tp/s.sock"
SCRIPT = "/w/lua/tpcc.lua"
RUN_FIELDS = {"time_s", "rand_type", "rate", "report_interval", "histogram", "percentile", "checkpoint_s"}


def build(workload: str, phase: str, socket: str, **flat) -> list[str]:
    """The argv of a SysbenchCommand given flat keywords (run options picked out)."""
    run = RunOptions(**{k: flat.pop(k) for k in RUN_FIELDS & set(flat)})
    return SysbenchCommand(workload, phase, Target(socket), run=run, **flat).argv()


def text(name: str) -> str:
    return (FIX / name).read_text()


# ----------------------------------------------------------------------------- run report


@pytest.mark.parametrize("name", RUNS)
def test_every_event_is_one_completed_transaction(name):
    out = parse_output(text(name))
    rep = out.summary["tpcc"]
    completed = sum(v["committed"] + v["rolled_back"] for v in rep["transactions"].values())
    # sysbench counts one event per completed TPC-C transaction; retried attempts are not events ...
    assert completed == out.summary["transactions"] == out.summary["events"]
    # ... they are sysbench's ignored errors, each of which restarted exactly one attempt.
    assert sum(v["retried"] for v in rep["transactions"].values()) == out.summary["ignored_errors"]
    assert rep["committed"] == completed - sum(v["rolled_back"] for v in rep["transactions"].values())


@pytest.mark.parametrize("name", RUNS)
def test_tpmc_is_new_order_commits_per_minute_of_measured_time(name):
    out = parse_output(text(name))
    rep = out.summary["tpcc"]
    assert out.summary["tpmC"] == rep["tpmC"]
    # measured time is printed to 0.1 ms: equal within that rounding
    assert rep["tpmC"] == pytest.approx(rep["new_order_committed"] / rep["measured_time_s"] * 60, rel=2e-5)
    assert rep["measured_time_s"] == pytest.approx(out.summary["total_time_s"], abs=0.1)


def test_one_process_report_covers_the_window_only():
    out = parse_output(text(CHECKPOINT_RUN))
    rep = out.summary["tpcc"]
    assert out.checkpoint_s == 2 and out.warmup_summary["transactions"] == 521
    assert rep["measured_time_s"] == pytest.approx(3.0, abs=0.05)  # not the whole 5 s run
    completed = sum(v["committed"] + v["rolled_back"] for v in rep["transactions"].values())
    assert completed == out.summary["transactions"] == 863


@pytest.mark.parametrize("name", RUNS)
def test_all_types_run_in_the_standard_mix(name):
    rep = tpcc_output.parse_tpcc_report(text(name))
    assert list(rep["transactions"]) == list(tpcc.TXN_TYPES)
    assert all(v["committed"] > 0 and v["avg_ms"] > 0 for v in rep["transactions"].values())
    for t, pct in tpcc.MIX_PCT.items():
        assert abs(rep["mix_pct"][t] - pct) < 5, (t, rep["mix_pct"][t])
    assert sum(rep["mix_pct"].values()) == pytest.approx(100)
    # the 1 % business rollbacks are New-Orders only
    assert rep["transactions"]["new_order"]["rolled_back"] > 0
    assert all(v["rolled_back"] == 0 for t, v in rep["transactions"].items() if t != "new_order")


def test_innodb_report_values():
    rep = tpcc_output.parse_tpcc_report(text(INNODB_RUN))
    assert rep["transactions"]["new_order"] == {"committed": 883, "rolled_back": 8, "retried": 0,
                                                "avg_ms": 6.691}
    assert rep["transactions"]["delivery"]["avg_ms"] == 20.807
    assert rep["delivery_skipped_districts"] == 0
    assert rep["measured_time_s"] == 5.0174 and rep["tpmC"] == 10559.35
    assert rep["run"] == {"table_sets": 1, "warehouses": 1, "isolation": "RC", "engine": "innodb",
                          "mix": "45/43/4/4/4"}


def test_myrocks_rr_run_has_retries():
    rep = tpcc_output.parse_tpcc_report(text(MYROCKS_RUN))
    assert rep["run"]["isolation"] == "RR" and rep["run"]["engine"] == "rocksdb"
    assert rep["transactions"]["new_order"]["retried"] == 380
    assert rep["transactions"]["payment"]["retried"] == 180


@pytest.mark.parametrize("name", RUNS)
def test_run_constants_follow_the_c_last_delta_rule(name):
    (c,) = tpcc_output.parse_tpcc_report(text(name))["constants"]
    assert c["set"] == 1
    assert c["delta"] == abs(c["c_last_run"] - c["c_last_load"])
    assert 65 <= c["delta"] <= 119 and c["delta"] not in (96, 112)
    assert 0 <= c["c_id"] <= 1023 and 0 <= c["ol_i_id"] <= 8191


@pytest.mark.parametrize("name", RUNS)
def test_sysbench_parts_still_parse(name):
    out = parse_output(text(name))
    assert out.complete and out.fatal == []
    seconds = [1, 2, 3] if name == CHECKPOINT_RUN else [1, 2, 3, 4, 5]  # the window, re-based
    assert [iv["t_s"] for iv in out.intervals] == seconds
    assert sum(n for _, n in out.histogram) == out.summary["transactions"]


def test_no_report_in_other_workloads_or_cut_runs():
    oltp = (Path(__file__).resolve().parents[1] / "fixtures" / "sysbench"
            / "run_oltp_read_write_innodb_t2_5s.stdout").read_text()
    assert tpcc_output.parse_tpcc_report(oltp) == {}
    summary = parse_output(oltp).summary
    assert "tpcc" not in summary and "tpmC" not in summary
    cut = text(INNODB_RUN).split("TPC-C statistics:")[0]
    assert tpcc_output.parse_tpcc_report(cut) == {}
    assert tpcc_output.parse_tpcc_report("") == {}


def test_damaged_report_names_the_missing_lines():
    damaged = "\n".join(l for l in text(INNODB_RUN).splitlines() if not l.strip().startswith(("payment:", "tpmC")))
    with pytest.raises(ValueError, match="payment.*tpmC"):
        tpcc_output.parse_tpcc_report(damaged)


# ----------------------------------------------------------------------------- check


def test_parse_check_pass():
    conds = tpcc_output.parse_check(text("check_innodb_all_pass.stdout"))
    assert [c["condition"] for c in conds] == list(tpcc.CONDITIONS)
    assert all(c["passed"] and c["violations"] == 0 for c in conds)
    assert conds[0] == {"condition": 1, "passed": True, "checked": 1, "violations": 0,
                        "description": "W_YTD = sum(D_YTD) per warehouse"}
    assert [c["checked"] for c in conds[1:4]] == [10, 10, 10]  # districts of one warehouse


def test_parse_check_after_corruption():
    # captured after UPDATE warehouse1 SET w_ytd = w_ytd + 1 and deleting one NEW_ORDER row mid-range
    conds = tpcc_output.parse_check(text("check_innodb_corrupted.stdout"))
    assert [c["condition"] for c in conds if not c["passed"]] == [1, 3, 5, 8]
    assert all(c["violations"] == 1 for c in conds if not c["passed"])
    assert tpcc_output.overall_result(text("check_innodb_corrupted.stdout")) is False


def test_parse_check_when_not_loaded():
    assert tpcc_output.parse_check(text("check_not_loaded.stdout")) == []
    assert "table set 2 is not loaded" in text("check_not_loaded.stdout")


# ----------------------------------------------------------------------------- options


@pytest.mark.parametrize("given, code", [("RC", "RC"), ("rr", "RR"), ("read committed", "RC"),
                                         ("REPEATABLE-READ", "RR"), ("ser", "SER"), ("READ_UNCOMMITTED", "RU")])
def test_isolation_codes_and_names(given, code):
    assert tpcc.validate_isolation(given) == code


def test_isolation_errors_name_the_allowed_values():
    with pytest.raises(ValueError, match="isolation='snapshot'.*RC, RR, RU, SER"):
        tpcc.validate_isolation("snapshot")
    for level in ("SER", "RU", "serializable"):
        with pytest.raises(ValueError, match="MyRocks; allowed: RC, RR"):
            tpcc.validate_isolation(level, "rocksdb")
    assert tpcc.validate_isolation("RR", "ROCKSDB") == "RR"
    assert tpcc.validate_isolation("SER", "InnoDB PAGE_COMPRESSED=1") == "SER"


@pytest.mark.parametrize("kw, field", [
    ({"scale": 0, "tables": 1}, "scale"), ({"scale": 1, "tables": 0}, "tables"),
    ({"scale": 1.5, "tables": 1}, "scale"), ({"scale": True, "tables": 1}, "scale"),
    ({"scale": 1, "tables": 1, "use_fk": True, "storage_engine": "rocksdb"}, "use_fk"),
    ({"scale": 1, "tables": 1, "isolation": "RX"}, "isolation"),
])
def test_validate_options(kw, field):
    with pytest.raises(ValueError, match=field):
        tpcc.validate_options(**kw)


def test_validate_options_accepts_innodb_foreign_keys():
    tpcc.validate_options(scale=2, tables=3, isolation="SER", storage_engine="InnoDB", use_fk=True)


def test_conditions_option():
    assert tpcc.conditions_option((4, 1, 2, 3, 3)) == "1,2,3,4"
    assert tpcc.conditions_option("all") == "all"
    for bad in ([], [0], [10], "1-4", [True]):
        with pytest.raises(ValueError, match="conditions"):
            tpcc.conditions_option(bad)


def test_table_names():
    names = tpcc.table_names(2)
    assert len(names) == 18 and names[0] == "warehouse1" and names[-1] == "stock2"
    assert "orders1" in names and "item2" in names and "order_line2" in names


# ----------------------------------------------------------------------------- commands


def test_tpcc_run_command():
    argv = build("tpcc", "run", socket=SOCK, tables=2, table_size=1, scale=3, script=SCRIPT, threads=4,
                         time_s=60, rand_type="pareto", seed=3, isolation="read committed",
                         storage_engine="rocksdb")
    assert command_string(argv) == (
        "sysbench /w/lua/tpcc.lua --db-driver=mysql --mysql-socket=/tmp/tp/s.sock --mysql-user=root "
        "--mysql-db=sbtest --tables=2 --scale=3 --threads=4 --trx_level=RC --mysql-storage-engine=rocksdb "
        "--rand-seed=3 --time=60 --rand-type=pareto --report-interval=1 --percentile=95 --histogram=on run"
    )


def test_tpcc_prepare_and_check_commands():
    prep = build("tpcc", "prepare", socket=SOCK, tables=1, scale=2, script=SCRIPT, threads=2, time_s=9,
                         storage_engine="InnoDB PAGE_COMPRESSED=1")
    assert prep[1] == SCRIPT and prep[-1] == "prepare" and "--scale=2" in prep
    assert not any(a.startswith(("--time", "--rand-type", "--histogram", "--table-size", "--trx")) for a in prep)
    chk = build("tpcc", "check", socket=SOCK, tables=1, scale=2, script=SCRIPT, threads=1,
                        extra={"conditions": "all"})
    assert chk[-2:] == ["--conditions=all", "check"]


@pytest.mark.parametrize("kw, field", [
    ({"script": None, "scale": 1}, "script"),
    ({"script": SCRIPT, "scale": None}, "scale"),
    ({"script": SCRIPT, "scale": 0}, "scale"),
    ({"script": SCRIPT, "scale": 1, "isolation": "SER", "storage_engine": "rocksdb"}, "isolation"),
    ({"script": SCRIPT, "scale": 1, "extra": {"scale": "5"}}, "scale"),
])
def test_tpcc_command_errors(kw, field):
    with pytest.raises(ValueError, match=field):
        build("tpcc", "run", socket=SOCK, tables=1, threads=1, **kw)


@pytest.mark.parametrize("kw, field", [
    ({"script": SCRIPT}, "script"), ({"scale": 2}, "scale"), ({"isolation": "RC"}, "isolation"),
    ({"table_size": None}, "table_size"),
])
def test_oltp_refuses_tpcc_options(kw, field):
    base = {"socket": SOCK, "tables": 1, "table_size": 100, "threads": 1}
    base.update(kw)
    with pytest.raises(ValueError, match=field):
        build("oltp_read_write", "run", **base)
    with pytest.raises(ValueError, match="check"):
        build("oltp_read_write", "check", socket=SOCK, tables=1, table_size=100, threads=1)


# ----------------------------------------------------------------------------- installation


def _inodes(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in d.iterdir()}


def test_install_script_is_idempotent(tmp_path):
    """On the real LocalHost. A copy lands under a temporary name and is renamed over the target, so
    a file keeps its inode exactly when it was not copied again."""
    host = LocalHost()
    dest = tmp_path / "deep" / "lua"
    path = tpcc.install_script(host, str(dest))
    assert path == f"{dest}/tpcc.lua"
    assert sorted(p.name for p in dest.iterdir()) == sorted(tpcc.LUA_FILES)
    for name in tpcc.LUA_FILES:
        assert (dest / name).read_bytes() == (tpcc.SCRIPT_DIR / name).read_bytes()
    first = _inodes(dest)
    assert tpcc.install_script(host, str(dest)) == path
    assert _inodes(dest) == first  # nothing copied again
    (dest / "tpcc_txn.lua").write_text("-- stale\n")  # in place: same inode
    assert _inodes(dest) == first
    tpcc.install_script(host, str(dest))
    after = _inodes(dest)
    assert sorted(after) == sorted(tpcc.LUA_FILES)  # no temporary file left
    assert [n for n in tpcc.LUA_FILES if after[n] != first[n]] == ["tpcc_txn.lua"]
    assert (dest / "tpcc_txn.lua").read_bytes() == (tpcc.SCRIPT_DIR / "tpcc_txn.lua").read_bytes()


def test_install_script_copies_through_a_temporary_name_and_only_what_changed():
    """The commands install_script sends, on a ScriptedHost keeping the files in memory."""
    host = ScriptedHost("db1", is_local=False, strict=True)
    dest = "/srv/deep/lua"

    def sha256sum(command: str) -> str:
        argv = shlex.split(command)
        assert argv[:4] == ["cd", dest, "&&", "sha256sum"] and argv[-1] == "2>/dev/null"
        return "".join(f"{hashlib.sha256(host.files[f'{dest}/{n}']).hexdigest()}  {n}\n"
                       for n in argv[4:-1] if f"{dest}/{n}" in host.files)

    def mv(command: str) -> int:
        _, _, src, dst = shlex.split(command)
        host.files[dst] = host.files.pop(src)
        return 0

    host.on(r"^mkdir -p /srv/deep/lua$")
    host.on(r"^cd /srv/deep/lua && sha256sum ", stdout=sha256sum)
    host.on(r"^mv -f ", exit_code=mv)
    assert tpcc.install_script(host, dest) == f"{dest}/tpcc.lua"
    assert host.matching(r"^put ") == [f"put {dest}/{n}.tmp" for n in tpcc.LUA_FILES]
    assert host.files == {f"{dest}/{n}": (tpcc.SCRIPT_DIR / n).read_bytes() for n in tpcc.LUA_FILES}
    host.commands.clear()
    tpcc.install_script(host, dest)
    assert not host.ran(r"^(put|mv) ")
    host.files[f"{dest}/tpcc_txn.lua"] = b"-- stale\n"
    tpcc.install_script(host, dest)
    assert host.matching(r"^put ") == [f"put {dest}/tpcc_txn.lua.tmp"]
    assert host.files[f"{dest}/tpcc_txn.lua"] == (tpcc.SCRIPT_DIR / "tpcc_txn.lua").read_bytes()


def test_packaged_script_lists_every_lua_file():
    assert sorted(p.name for p in tpcc.SCRIPT_DIR.glob("*.lua")) == sorted(tpcc.LUA_FILES)
    assert tpcc.script_path().is_file()


# ----------------------------------------------------------------------------- Lua selftest (real sysbench)

needs_sysbench = pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench not installed")


def _selftest(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sysbench", str(script), "--rand-seed=3", "selftest"], check=False, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


@needs_sysbench
def test_lua_selftest_passes_from_any_directory(tmp_path):
    r = _selftest(tpcc.script_path(), tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TPC-C selftest: PASS" in r.stdout


@needs_sysbench
@pytest.mark.parametrize("old, new, what", [
    ('"BAR", "OUGHT", "ABLE"', '"BAR", "ABLE", "OUGHT"', "last_name"),
    ("M.MIX = { 45, 43, 4, 4, 4 }", "M.MIX = { 47, 41, 4, 4, 4 }", "share"),
    ("return d >= 65 and d <= 119 and d ~= 96 and d ~= 112", "return d >= 65 and d <= 119", "delta 96/112"),
    ("if uniform(1, 10) == 1 then", "if uniform(1, 4) == 1 then", "ORIGINAL"),
])
def test_lua_selftest_catches_a_broken_rule(tmp_path, old, new, what):
    for name in tpcc.LUA_FILES:
        shutil.copy(tpcc.SCRIPT_DIR / name, tmp_path / name)
    lib = tmp_path / "tpcc_lib.lua"
    src = lib.read_text()
    assert old in src
    lib.write_text(src.replace(old, new, 1))
    r = _selftest(tmp_path / "tpcc.lua", tmp_path)
    assert r.returncode == 1
    assert "TPC-C selftest: FAIL" in r.stdout and what in r.stdout
