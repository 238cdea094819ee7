"""The one run session (dbmatrix.run.session.execute) on a scripted host: the order of the topology's
hooks, and every failure path: a hook that raises, sysbench failing, a failed stop, an interrupt, an
open-loop cell without its twin, a TPC-C check that fails, and the live per-second callback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dbmatrix.hosts.remote import CommandResult, RunInterrupted
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.parse import sysbench
from dbmatrix.record import RunRecord
from dbmatrix.run.session import WINDOW_MODE_ENV, RunFailed, RunSession, execute, window_mode
from dbmatrix.run.topology import Topology
from dbmatrix.spec.experiment import Experiment, PlannedRun, parse_experiment
from dbmatrix.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysbench"
RUN_OUT = (FIXTURES / "run_oltp_read_write_innodb_t2_5s.stdout").read_text()
HOOKS = ("prepare", "start", "after_warmup", "before_window", "monitors", "open_window", "close_window",
         "after_window", "check_results", "stop")


def experiment(**extra: Any) -> Experiment:
    spec = {"experiment": "session-unit", "seed": 7, "repetitions": 1, "warmup_s": 2, "measure_s": 5,
            "workload": {"name": "oltp_read_write", "tables": 1, "table_size": 1000},
            "factors": {"cache_pct": [25, 100]}}
    spec.update(extra)
    return parse_experiment(spec)


class Monitor:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def start(self) -> None:
        self.log.append("monitor.start")

    def stop(self) -> None:
        self.log.append("monitor.stop")


class RecordingTopology(Topology):
    """A topology whose hooks only record that they ran, and can fail at one of them."""

    kind = "recording"
    overhead_s = 0.0

    def __init__(self, host: ScriptedHost, fail_at: str | None = None, stop_fails: bool = False) -> None:
        self.client_host = self.measured_host = host
        self.collect_dir = "/tmp/dbmatrix-unit/collect"
        self.client_prefix = []
        self.measured_pid = 4242
        self.calls: list[str] = []
        self.fail_at, self.stop_fails = fail_at, stop_fails

    def _hook(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_at:
            raise RunFailed(f"{name} broke")

    def start_record(self) -> RunRecord:
        raise NotImplementedError  # session() builds the record

    def prepare(self, s: RunSession) -> None:
        self._hook("prepare")

    def start(self, s: RunSession) -> None:
        self._hook("start")

    def sockets(self) -> list[str]:
        return ["/tmp/dbmatrix-unit/s.sock"]

    def after_warmup(self, s: RunSession) -> None:
        self._hook("after_warmup")

    def before_window(self, s: RunSession) -> None:
        self._hook("before_window")

    def monitors(self, s: RunSession) -> list[Any]:
        self._hook("monitors")
        return [Monitor(self.calls)]

    def open_window(self, s: RunSession) -> None:
        self._hook("open_window")

    def close_window(self, s: RunSession, result: CommandResult) -> None:
        self._hook("close_window")

    def after_window(self, s: RunSession) -> None:
        self._hook("after_window")

    def check_results(self, s: RunSession, parsed: sysbench.SysbenchOutput) -> None:
        self._hook("check_results")

    def stop(self, s: RunSession) -> None:
        self._hook("stop")

    def stop_after_failure(self, s: RunSession) -> None:
        self.calls.append("stop_after_failure")
        if self.stop_fails:
            s.record.stop_error = "server would not stop"

    def abort(self) -> None:
        self.calls.append("abort")

    def save_outputs(self, s: RunSession) -> None:
        self.calls.append("save_outputs")
        s.save("topology.log", "\n".join(self.calls))


def bench_host(run_out: str = RUN_OUT, exit_code: int = 0, raises: BaseException | None = None) -> ScriptedHost:
    host = ScriptedHost()
    host.on(r"^sysbench .* --time=2 ", stdout=run_out)  # warm-up
    host.on(r"^sysbench .* --time=5 ", stdout=run_out, exit_code=exit_code, raises=raises)  # measured
    return host


def session(tmp_path: Path, exp: Experiment | None = None, run: PlannedRun | None = None,
            on_interval: Any = None) -> RunSession:
    exp = exp or experiment()
    run = run or exp.plan()[0]
    store = ResultStore(tmp_path / "results")
    record = RunRecord(run_id=run.run_id, experiment=exp.name, cell_id=run.cell.cell_id, cell=run.cell.levels(),
                       repetition=run.repetition, host="localhost")
    return RunSession(store, exp, run, record, "restore", on_interval)


def test_a_run_calls_the_hooks_in_order_and_commits_an_ok_manifest(tmp_path: Path) -> None:
    host = bench_host()
    topo = RecordingTopology(host)
    s = session(tmp_path)
    m = execute(s, topo)
    assert m.status == "ok" and m.error is None
    assert [c for c in topo.calls if not c.startswith("monitor.")] == [*HOOKS, "save_outputs"]
    # The monitors run around the measured window only, and the collectors' window brackets sysbench.
    assert topo.calls.index("monitor.start") < topo.calls.index("open_window")
    assert topo.calls.index("close_window") < topo.calls.index("monitor.stop") < topo.calls.index("after_window")
    assert list(m.steps) == ["restore", "warmup", "measure", "stop"]
    assert m.summary["tps"] == pytest.approx(sysbench.parse_output(RUN_OUT).summary["tps"])
    assert m.sysbench["exit_code"] == 0 and "--histogram=on" in m.sysbench["command"]
    assert "--histogram=off" in m.sysbench_warmup["command"]
    raw = s.store.raw / s.run.run_id
    assert (raw / "sysbench.out").read_text() == RUN_OUT and (raw / "warmup.out").is_file()
    assert s.store.status(s.run.run_id) == "ok"
    # The committed manifest is the record's current-version JSON, read back equal and byte for byte.
    text = (raw / "manifest.json").read_text()
    assert text == m.to_json() and RunRecord.from_json(text) == m and RunRecord.from_json(text).to_json() == text
    # One warm-up and one measured sysbench, both over the topology's socket.
    assert host.count(r"^sysbench ") == 2 and all("--mysql-socket=/tmp/dbmatrix-unit/s.sock" in c
                                                   for c in host.matching(r"^sysbench "))


@pytest.mark.parametrize("hook,step", [("prepare", "restore"), ("start", "restore"), ("after_warmup", "warmup"),
                                       ("before_window", "warmup"), ("monitors", "measure"),
                                       ("open_window", "measure"), ("close_window", "measure"),
                                       ("after_window", "measure"), ("check_results", "measure"),
                                       ("stop", "stop")])
def test_a_failing_hook_is_recorded_with_its_step_and_everything_is_stopped(tmp_path: Path, hook: str,
                                                                             step: str) -> None:
    topo = RecordingTopology(bench_host(), fail_at=hook)
    s = session(tmp_path)
    m = execute(s, topo)
    assert m.status == "failed" and m.failed_step == step
    assert m.error == f"RunFailed: {hook} broke"
    assert topo.calls[-2:] == ["stop_after_failure", "save_outputs"]
    assert topo.calls.count("monitor.start") == topo.calls.count("monitor.stop") or "monitor.stop" in topo.calls
    raw = s.store.raw / s.run.run_id
    assert "RunFailed: " + hook in (raw / "traceback.txt").read_text()
    assert (raw / "topology.log").is_file()  # logs are kept for a failed run too
    assert s.store.status(s.run.run_id) == "failed"


def test_sysbench_failing_fails_the_run_at_measure_with_its_message(tmp_path: Path) -> None:
    out = (FIXTURES / "fail_no_tables.stdout").read_text()
    host = bench_host()
    host.on(r"^sysbench .* --time=5 ", stdout=out, stderr=(FIXTURES / "fail_no_tables.stderr").read_text(),
            exit_code=1)
    topo = RecordingTopology(host)
    m = execute(session(tmp_path), topo)
    assert m.status == "failed" and m.failed_step == "measure"
    assert m.error.startswith("RunFailed: sysbench exited 1")
    assert "check_results" not in topo.calls and "stop_after_failure" in topo.calls


def test_a_failed_warm_up_stops_before_the_window(tmp_path: Path) -> None:
    host = bench_host()
    host.on(r"^sysbench .* --time=2 ", stderr="FATAL: error 2002: Can't connect", exit_code=1)
    topo = RecordingTopology(host)
    m = execute(session(tmp_path), topo)
    assert m.failed_step == "warmup" and "warm-up sysbench exited 1" in m.error
    assert "before_window" not in topo.calls and host.count(r"^sysbench ") == 1


def test_a_stop_error_after_a_failure_keeps_the_first_error(tmp_path: Path) -> None:
    topo = RecordingTopology(bench_host(), fail_at="start", stop_fails=True)
    m = execute(session(tmp_path), topo)
    assert m.error == "RunFailed: start broke" and m.stop_error == "server would not stop"


def test_an_interrupt_discards_the_run_and_stops_everything(tmp_path: Path) -> None:
    topo = RecordingTopology(bench_host(raises=RunInterrupted("signal 2")))
    s = session(tmp_path)
    with pytest.raises(RunInterrupted):
        execute(s, topo)
    assert "abort" in topo.calls and "monitor.stop" in topo.calls
    assert s.store.status(s.run.run_id) is None and not s.staging.exists()


def test_an_open_loop_cell_without_its_closed_loop_twin_fails_before_starting(tmp_path: Path) -> None:
    exp = experiment(factors={"rate_fraction": ["closed", 0.5]})
    open_run = next(r for r in exp.plan() if r.cell.open_loop)
    topo = RecordingTopology(bench_host())
    m = execute(session(tmp_path, exp, open_run), topo)
    assert m.failed_step == "restore" and "no completed closed-loop run" in m.error
    assert topo.calls == ["stop_after_failure", "save_outputs"]


def test_a_failed_tpcc_consistency_check_fails_the_run(tmp_path: Path) -> None:
    exp = experiment(workload={"name": "tpcc", "warehouses": 1, "tables": 1}, factors={})
    host = bench_host()
    tpcc_out = (Path(__file__).resolve().parents[1] / "fixtures" / "tpcc")
    host.on(r"tpcc\.lua .* run", stdout=RUN_OUT)
    host.on(r"tpcc\.lua .* check", stdout=(tpcc_out / "check_innodb_corrupted.stdout").read_text(), exit_code=1)
    topo = RecordingTopology(host)
    topo.tpcc_script = "/tmp/dbmatrix-unit/lua/tpcc.lua"
    m = execute(session(tmp_path, exp), topo)
    assert m.status == "failed" and m.failed_step == "consistency"
    assert "consistency conditions" in m.error and m.tpcc_consistency["passed"] is False


def test_the_live_callback_gets_each_per_second_row_of_the_measured_window(tmp_path: Path) -> None:
    rows: list[tuple[str, dict[str, Any]]] = []
    s = session(tmp_path, on_interval=lambda run_id, row: rows.append((run_id, row)))
    execute(s, RecordingTopology(bench_host()))
    expected = sysbench.parse_intervals(RUN_OUT)
    assert [r for _, r in rows] == expected and {rid for rid, _ in rows} == {s.run.run_id}


# ------------------------------------------------------------------ one process: warm-up and window in one sysbench

CKPT_OUT = (FIXTURES / "run_oltp_read_write_checkpoint2_5s.stdout").read_text()  # --report-checkpoints=2


def one_process_session(tmp_path: Path, on_interval: Any = None) -> RunSession:
    s = session(tmp_path, on_interval=on_interval)
    s.record.versions = {"sysbench": "1.0.20"}
    return s


def one_process_host(run_out: str = CKPT_OUT, exit_code: int = 0) -> ScriptedHost:
    host = ScriptedHost()
    host.on(r"^sysbench .* --time=7 ", stdout=run_out, exit_code=exit_code)  # 2 s warm-up + 5 s window
    return host


def test_window_mode_follows_the_sysbench_version_unless_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WINDOW_MODE_ENV, raising=False)
    assert window_mode("1.0.20", 5) == "one_process" and window_mode("1.1.0-df89d34", 5) == "one_process"
    assert window_mode("0.5", 5) == "two_process" and window_mode(None, 5) == "two_process"
    assert window_mode("1.0.20", 0) == "measure_only"
    monkeypatch.setenv(WINDOW_MODE_ENV, "two_process")
    assert window_mode("1.0.20", 5) == "two_process"
    monkeypatch.setenv(WINDOW_MODE_ENV, "both")
    with pytest.raises(ValueError, match="DBMATRIX_WINDOW_MODE='both' is not one of: one_process, two_process"):
        window_mode("1.0.20", 5)


def test_one_process_run_opens_the_window_at_the_checkpoint(tmp_path: Path) -> None:
    host = one_process_host()
    topo = RecordingTopology(host)
    rows: list[dict[str, Any]] = []
    s = one_process_session(tmp_path, on_interval=lambda run_id, row: rows.append(row))
    m = execute(s, topo)
    assert m.status == "ok" and m.window_mode == "one_process"
    (cmd,) = host.matching(r"^sysbench ")
    assert "--report-checkpoints=2" in cmd and "--histogram=on" in cmd
    # Monitors (and collectors) start before the one sysbench; the window's hooks fire at its checkpoint.
    calls = [c for c in topo.calls if c != "monitor.stop"]
    assert calls[:5] == ["prepare", "start", "monitors", "monitor.start", "before_window"]
    assert calls[5:7] == ["open_window", "after_warmup"]
    assert list(m.steps) == ["restore", "warmup", "open_window", "measure", "stop"]
    assert set(m.window) == {"checkpoint_s", "start_epoch", "line_late_s", "counters_late_s", "hooks_late_s"}
    assert 0 <= m.window["counters_late_s"] <= m.window["hooks_late_s"]
    parsed = sysbench.parse_output(CKPT_OUT)
    assert m.summary["tps"] == 750.24 and m.warmup_summary["transactions"] == 1482
    assert not m.sysbench_warmup and not (s.store.raw / s.run.run_id / "warmup.out").exists()
    # The live view gets the window's seconds only, re-based to 1.
    assert rows == parsed.intervals and [r["t_s"] for r in rows] == [1, 2, 3]


def test_a_topology_whose_window_opens_idle_runs_two_processes(tmp_path: Path) -> None:
    host = one_process_host()
    topo = RecordingTopology(host)
    topo.window_opens_idle = True  # as Galera: several servers' counters must bracket the same work
    m = execute(one_process_session(tmp_path), topo)
    assert m.window_mode == "two_process" and "must agree" in str(m.window_mode_reason)
    assert not any("--report-checkpoints" in c for c in host.matching(r"^sysbench "))
    calls = [c for c in topo.calls if c != "monitor.stop"]
    assert calls.index("after_warmup") < calls.index("before_window") < calls.index("open_window")


def test_one_process_run_dying_in_the_warm_up_fails_at_warmup(tmp_path: Path) -> None:
    out = CKPT_OUT.split("[ 2s ] Checkpoint report:")[0] + "FATAL: mysql_drv_query() returned error 2013\n"
    topo = RecordingTopology(one_process_host(out, exit_code=1))
    m = execute(one_process_session(tmp_path), topo)
    assert m.status == "failed" and m.failed_step == "warmup"
    assert "sysbench (warm-up) exited 1: FATAL: mysql_drv_query()" in m.error
    assert "open_window" not in topo.calls and "monitor.stop" in topo.calls


@pytest.mark.parametrize("hook,step", [("before_window", "open_window"), ("open_window", "open_window"),
                                       ("after_warmup", "open_window"), ("close_window", "measure")])
def test_one_process_hook_failing_at_the_checkpoint_fails_the_run(tmp_path: Path, hook: str, step: str) -> None:
    topo = RecordingTopology(one_process_host(), fail_at=hook)
    m = execute(one_process_session(tmp_path), topo)
    assert m.status == "failed" and m.failed_step == step and m.error == f"RunFailed: {hook} broke"
    assert topo.calls[-2:] == ["stop_after_failure", "save_outputs"]


def test_one_process_run_without_a_checkpoint_report_fails(tmp_path: Path) -> None:
    topo = RecordingTopology(one_process_host(RUN_OUT))  # a sysbench that ignored --report-checkpoints
    m = execute(one_process_session(tmp_path), topo)
    assert m.status == "failed" and "no checkpoint report at 2 s" in m.error
