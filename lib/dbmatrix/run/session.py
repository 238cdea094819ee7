"""One measured run as a session: the skeleton every topology shares.

A :class:`RunSession` owns the bookkeeping of one run: the staging directory its outputs are written to,
its record (the manifest), the step clock, failure recording, interrupt shielding and the final commit into the
result store. :func:`execute` is the one run loop; a :class:`~dbmatrix.run.topology.Topology` (one
server, a Galera cluster, several instances) supplies the hooks that differ::

    prepare -> start (restore, caches, servers, variables) -> [monitors, collectors, one sysbench that
    warms up then measures; at its checkpoint report: counters, before_window, open_window, after_warmup]
    -> close_window -> after_window -> check_results -> TPC-C consistency -> stop

That is the ``one_process`` window mode (sysbench ``--report-checkpoints``: the measured histogram,
counters and tps cover only the window). Where the client's sysbench lacks it, ``two_process`` runs a
separate warm-up sysbench, then before_window, then the window (monitors, collectors, open_window,
counters, sysbench). The record's ``window_mode`` says which ran, ``window`` how late after the
checkpoint the window's snapshots were taken. The session and the topologies write the run's
:class:`~dbmatrix.record.RunRecord` (``s.record``), committed as ``manifest.json``.

Whatever happens, the run ends committed (status ``ok`` or ``failed`` with its step, error, traceback
and every log the topology can fetch), or, on Ctrl-C/SIGTERM, discarded with every server stopped.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dbmatrix.hosts import collect
from dbmatrix.hosts.remote import CommandResult, Host, RunInterrupted
from dbmatrix.parse import sysbench
from dbmatrix.parse.system_counters import counter_deltas
from dbmatrix.paths import git_state
from dbmatrix.record import RunRecord
from dbmatrix.run.topology import Topology
from dbmatrix.spec.experiment import Cell, Experiment, PlannedRun
from dbmatrix.store import ResultStore, utc_now, write_text_atomic
from dbmatrix.workload.commands import check_consistency

# TPC-C consistency condition 4 scans all of ORDER_LINE (~300k rows per warehouse): after every run only
# up to this many warehouses; larger datasets check conditions 1-3 (the manifest says which ran).
TPCC_FULL_CHECK_MAX_WAREHOUSES = 50

IntervalCallback = Callable[[str, dict[str, Any]], None]

WINDOW_MODES = ("one_process", "two_process")
WINDOW_MODE_ENV = "DBMATRIX_WINDOW_MODE"  # forces a mode (benchmarks compare them); the manifest records it
WINDOW_HOOKS_TIMEOUT_S = 300.0  # after sysbench ended, how long the checkpoint's hooks may still take


def window_mode(sysbench_version: str | None, warmup_s: int) -> str:
    """How the warm-up and the window run: ``one_process`` where sysbench has ``--report-checkpoints``
    with counters reset at the checkpoint (1.0 and later; checked on 1.0.20), else ``two_process``;
    ``measure_only`` without a warm-up. $DBMATRIX_WINDOW_MODE forces one of :data:`WINDOW_MODES`."""
    if warmup_s <= 0:
        return "measure_only"
    forced = os.environ.get(WINDOW_MODE_ENV)
    if forced:
        if forced not in WINDOW_MODES:
            raise ValueError(f"${WINDOW_MODE_ENV}={forced!r} is not one of: {', '.join(WINDOW_MODES)}")
        return forced
    m = re.match(r"(\d+)\.(\d+)", sysbench_version or "")
    return "one_process" if m and (int(m[1]), int(m[2])) >= (1, 0) else "two_process"


class RunFailed(RuntimeError):
    """A run step failed in a way the session records (the matrix goes on)."""


# ------------------------------------------------------------------------------------ signals

@contextmanager
def _signal_handlers(handler: Any) -> Iterator[None]:
    """Install `handler` for SIGINT and SIGTERM (main thread only), restoring the old ones after."""
    try:
        old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not in the main thread
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _raise_interrupted(signum: int, frame: object) -> None:
    raise RunInterrupted(f"signal {signum}")


def interrupts_stop_cleanly() -> Any:
    """Ctrl-C and SIGTERM raise RunInterrupted: the running command is killed, the servers are stopped,
    the unfinished run is discarded, and completed runs stay."""
    return _signal_handlers(_raise_interrupted)


def shielded() -> Any:
    """Ignore further Ctrl-C while we clean up after the first one."""
    return _signal_handlers(signal.SIG_IGN)


# ------------------------------------------------------------------------------------ manifests

def sysbench_seed(spec_seed: int, run_id: str) -> int:
    """A distinct, reproducible --rand-seed per run (sysbench wants 1..2^31-1; 0 means the clock)."""
    return zlib.crc32(f"{spec_seed}:{run_id}".encode()) % (2**31 - 1) + 1


def base_record(exp: Experiment, run: PlannedRun, host: str) -> RunRecord:
    """What every run's record says about the run, whether it was measured or failed before starting."""
    return RunRecord(
        run_id=run.run_id, experiment=exp.name, spec_digest=exp.digest(), spec=exp.to_dict(),
        cell_id=run.cell.cell_id, cell=run.cell.levels(), repetition=run.repetition,
        block=run.block, order=run.order, adaptive=run.adaptive, campaign=run.campaign,
        host=host, git=git_state(), started_utc=utc_now(),
    )


def record_early_failure(store: ResultStore, exp: Experiment, run: PlannedRun, host: str, step: str,
                         exc: BaseException, boot_id: str | None = None) -> RunRecord:
    """Commit a failed run that never started (its medium, dataset or host failed first)."""
    staging = store.begin_run(run.run_id)
    write_text_atomic(staging / "traceback.txt", "".join(traceback.format_exception(exc)))
    rec = base_record(exp, run, host)
    rec.boot_id = boot_id
    rec.fail(step, f"{type(exc).__name__}: {exc}")
    rec.finish(utc_now())
    store.commit_run(staging, rec)
    return rec


def open_loop_rate(store: ResultStore, cell: Cell, campaign: int = 1) -> tuple[int, float]:
    """--rate for an open-loop cell: its fraction of the mean tps measured by its closed-loop twin in
    the same campaign."""
    twin = cell.closed_loop_twin().cell_id
    tps = [m.summary["tps"] for m in store.records()
           if m.ok and m.cell_id == twin and (m.summary or {}).get("tps") and m.campaign == campaign]
    if not tps:
        raise RunFailed(f"open loop: no completed closed-loop run of {twin} to take the peak throughput from")
    peak = sum(tps) / len(tps)
    return max(1, round(cell.rate_fraction * peak)), peak


class StepClock:
    """Seconds per step of a run, written into `steps` as each step ends; `step` is the one under way."""

    def __init__(self, steps: dict[str, float], first: str) -> None:
        self.steps, self.step, self._t = steps, first, time.monotonic()

    def mark(self, next_step: str) -> None:
        self.steps[self.step] = round(time.monotonic() - self._t, 3)
        self.step, self._t = next_step, time.monotonic()


def tsv(pairs: dict[str, str]) -> str:
    return "".join(f"{k}\t{v}\n" for k, v in sorted(pairs.items()))


# ------------------------------------------------------------------------------------ the session

class RunSession:
    """The bookkeeping of one run: staging, its record, steps, saved outputs and the final commit."""

    def __init__(self, store: ResultStore, exp: Experiment, run: PlannedRun, record: RunRecord,
                 first_step: str, on_interval: IntervalCallback | None = None) -> None:
        self.store, self.exp, self.run, self.cell = store, exp, run, run.cell
        self.record = record
        self.clock = StepClock(self.record.steps, first_step)
        self.staging = store.begin_run(run.run_id)
        self.seed = sysbench_seed(exp.seed, run.run_id)
        self.on_interval = on_interval
        self.rate: int | None = None

    @property
    def step(self) -> str:
        return self.clock.step

    def mark(self, next_step: str) -> None:
        self.clock.mark(next_step)

    def save(self, name: str, text: str) -> None:
        if self.staging.is_dir():
            write_text_atomic(self.staging / name, text)

    def save_tsv(self, name: str, pairs: dict[str, str]) -> None:
        self.save(name, tsv(pairs))

    def fetch(self, host: Host, remote: str, name: str) -> None:
        """Copy a file from the host into the run's outputs, if it exists (error logs)."""
        if self.staging.is_dir() and host.exists(remote):
            host.get(remote, str(self.staging / name))

    def live(self, checkpoint_s: int | None = None) -> Callable[[str], None] | None:
        """A line callback that hands each per-second sysbench line to `on_interval` as it arrives; with a
        checkpoint (one-process run) the warm-up's lines are skipped and the window's re-based to 1 s."""
        if self.on_interval is None:
            return None
        callback, run_id, c = self.on_interval, self.run.run_id, checkpoint_s or 0

        def on_line(line: str) -> None:
            for row in sysbench.parse_intervals(line):
                if row["t_s"] > c:
                    callback(run_id, {**row, "t_s": row["t_s"] - c})
        return on_line

    def fail(self, exc: BaseException) -> None:
        self.record.fail(self.clock.step, f"{type(exc).__name__}: {exc}")
        self.save("traceback.txt", traceback.format_exc())

    def discard(self) -> None:
        self.store.discard(self.staging)

    def commit(self, t0: float) -> RunRecord:
        self.record.finish(utc_now(), round(time.monotonic() - t0, 3))
        self.store.commit_run(self.staging, self.record)
        return self.record


def _sysbench_failure(r: CommandResult, parsed: sysbench.SysbenchOutput | None, what: str) -> RunFailed:
    detail = "; ".join(parsed.fatal) if parsed is not None and parsed.fatal else (r.stderr or r.stdout)[-500:]
    return RunFailed(f"{what} exited {r.exit_code}: {detail}")


def _warm_up(s: RunSession, topo: Topology) -> None:
    """Two-process mode: a separate warm-up sysbench."""
    s.mark("warmup")
    exp = s.exp
    cmd = topo.bench_command(s, exp.warmup_s, histogram=False)
    r = topo.client_host.run(cmd, check=False, timeout=exp.warmup_s + 300)
    s.save("warmup.out", r.stdout)
    s.save("warmup.err", r.stderr)
    s.record.sysbench_warmup = {"command": cmd, "exit_code": r.exit_code}
    if not r.ok:
        raise RunFailed(f"warm-up sysbench exited {r.exit_code}: {(r.stderr or r.stdout)[-500:]}")
    topo.after_warmup(s)


def _start_monitors(s: RunSession, topo: Topology, monitors: list[Any]) -> collect.CollectorSet:
    monitors.extend(topo.monitors(s))
    for m in monitors:
        m.start()
    collectors = collect.CollectorSet(topo.measured_host, topo.collect_dir, interval_s=1, devices=topo.devices(),
                                      pid=topo.measured_pid)
    monitors.append(collectors)
    collectors.start()
    return collectors


class _WindowOpener:
    """Opens the measured window of a one-process run when sysbench prints its checkpoint report: the
    line callback only notes the time and starts a thread (sysbench's output keeps being read), the
    thread snapshots the counters and runs the topology's window hooks."""

    def __init__(self, s: RunSession, topo: Topology, checkpoint_s: int) -> None:
        self.s, self.topo, self.checkpoint_s = s, topo, checkpoint_s
        self.spawned = time.monotonic()
        self.seen: float | None = None
        self.thread: threading.Thread | None = None
        self.before: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.timing: dict[str, Any] = {"checkpoint_s": checkpoint_s}

    def on_line(self, line: str) -> None:
        if self.thread is None and sysbench.split_checkpoint(line) is not None:
            self.seen = time.monotonic()
            self.timing["start_epoch"] = round(time.time(), 3)  # the controller's clock
            self.thread = threading.Thread(target=self._open, name="window-opener", daemon=True)
            self.thread.start()

    def _since_line(self) -> float:
        return round(time.monotonic() - (self.seen or 0), 3)

    def _open(self) -> None:
        s, topo, t = self.s, self.topo, self.timing
        # Process start to checkpoint line, less the warm-up: sysbench's start-up plus the line's delay.
        t["line_late_s"] = round((self.seen or 0) - self.spawned - self.checkpoint_s, 3)
        try:
            s.mark("open_window")
            self.before = collect.snapshot_counters(topo.measured_host, pid=topo.measured_pid, devices=topo.devices())
            t["counters_late_s"] = self._since_line()
            topo.before_window(s)
            topo.open_window(s)
            t["hooks_late_s"] = self._since_line()
            topo.after_warmup(s)
            s.mark("measure")
        except BaseException as exc:  # noqa: BLE001 - raised again by the session's thread
            self.error = exc

    def wait(self) -> dict[str, Any]:
        """The counters at the window's start, once the hooks are done; their error, raised here."""
        if self.thread is None:
            raise RunFailed(f"sysbench printed no checkpoint report at {self.checkpoint_s} s")
        self.thread.join(WINDOW_HOOKS_TIMEOUT_S)
        if self.thread.is_alive():
            raise RunFailed(f"the window's hooks did not finish within {WINDOW_HOOKS_TIMEOUT_S:g} s of the checkpoint")
        if self.error is not None:
            raise self.error
        assert self.before is not None
        return self.before


def _run_window(s: RunSession, topo: Topology) -> tuple[CommandResult, str, dict[str, Any], dict[str, Any]]:
    """One sysbench that warms up and measures (monitors and collectors already run): its result,
    command and the counters at the window's start and end."""
    exp, host = s.exp, topo.measured_host
    cmd = topo.bench_command(s, exp.warmup_s + exp.measure_s, histogram=True, checkpoint_s=exp.warmup_s)
    opener = _WindowOpener(s, topo, exp.warmup_s)
    live = s.live(exp.warmup_s)

    def on_line(line: str) -> None:
        opener.on_line(line)
        if live is not None:
            live(line)
    timeout = exp.run_timeout_s or exp.measure_s + 600
    r = topo.client_host.run(cmd, check=False, timeout=exp.warmup_s + timeout, on_output=on_line)
    after = collect.snapshot_counters(host, pid=topo.measured_pid, devices=topo.devices())
    s.save("sysbench.out", r.stdout)
    s.save("sysbench.err", r.stderr)
    s.record.window = opener.timing
    s.record.sysbench = {"command": cmd, "exit_code": r.exit_code}
    if opener.thread is None and not r.ok:
        raise _sysbench_failure(r, sysbench.parse_output(r.stdout, r.stderr), "sysbench (warm-up)")
    before = opener.wait()
    return r, cmd, before, after


def _measure(s: RunSession, topo: Topology, monitors: list[Any]) -> sysbench.SysbenchOutput:
    """The measured window: monitors and collectors around sysbench; counters bracket the window exactly.

    Two-process mode: the collectors start, then open_window, then the window's own sysbench. One-process
    mode: monitors and collectors start before the one sysbench (so nothing is spawned inside the window;
    their samples before ``window.start_epoch`` are the warm-up's), the hooks run at its checkpoint."""
    exp, host = s.exp, topo.measured_host
    mode = s.record.window_mode
    if mode == "one_process":
        s.mark("warmup")
        collectors = _start_monitors(s, topo, monitors)
        s.record.collectors_started_epoch = collectors.started_at
        r, cmd, before, after = _run_window(s, topo)
    else:
        s.mark("measure")
        collectors = _start_monitors(s, topo, monitors)
        topo.open_window(s)
        # Counters bracket the measured sysbench only (not the collectors' start and stop).
        before = collect.snapshot_counters(host, pid=topo.measured_pid, devices=topo.devices())
        cmd = topo.bench_command(s, exp.measure_s, histogram=True)
        r = topo.client_host.run(cmd, check=False, timeout=exp.run_timeout_s or exp.measure_s + 600,
                                 on_output=s.live())
        after = collect.snapshot_counters(host, pid=topo.measured_pid, devices=topo.devices())
        s.save("sysbench.out", r.stdout)
        s.save("sysbench.err", r.stderr)
        s.record.sysbench = {"command": cmd, "exit_code": r.exit_code}  # one-process: _run_window wrote it
    topo.close_window(s, r)
    for m in monitors:
        m.stop()
    s.record.system = counter_deltas(before, after)
    s.record.collectors = {"devices": topo.devices(), "errors": collectors.errors}
    topo.after_window(s)
    parsed = sysbench.parse_output(r.stdout, r.stderr)
    if not r.ok or not parsed.complete:
        raise _sysbench_failure(r, parsed, "sysbench")
    summary = {k: parsed.summary.get(k) for k in ("tps", "qps", "lat_pct_ms", "ignored_errors")}
    if s.cell.workload == "tpcc":
        summary["tpmC"] = parsed.summary.get("tpmC")
        s.record.tpcc = parsed.summary.get("tpcc") or {}
    s.record.summary = summary
    if parsed.checkpoint_s is not None:
        s.record.warmup_summary = {k: parsed.warmup_summary.get(k)
                                        for k in ("tps", "transactions", "ignored_errors", "total_time_s")}
    return parsed


def _tpcc_consistency(s: RunSession, topo: Topology) -> None:
    """TPC-C consistency conditions 1-4 after the run (a failed condition fails the run)."""
    s.mark("consistency")
    if not topo.tpcc_script:
        raise RunFailed("tpcc: the Lua script was not installed on the host")
    w = s.exp.workload
    conditions = (1, 2, 3, 4) if w.tables * w.warehouses <= TPCC_FULL_CHECK_MAX_WAREHOUSES else (1, 2, 3)
    check = check_consistency(topo.client_host, socket=topo.sockets()[0], script=topo.tpcc_script,
                              tables=w.tables, scale=w.warehouses, conditions=conditions)
    s.record.tpcc_consistency = check.to_dict()
    if not check.passed:
        raise RunFailed(f"TPC-C consistency conditions {check.failed} failed after the run")


def measure(store: ResultStore, exp: Experiment, run: PlannedRun, topo: Topology,
            on_interval: IntervalCallback | None = None) -> RunRecord:
    """A new session for `run` through `topo`, executed: the committed record."""
    return execute(RunSession(store, exp, run, topo.start_record(), topo.first_step, on_interval), topo)


def execute(s: RunSession, topo: Topology) -> RunRecord:
    """Measure one run through its topology; always returns a committed record (ok or failed) unless
    interrupted, in which case every server is stopped and the unfinished run discarded."""
    t0 = time.monotonic()
    monitors: list[Any] = []

    def stop_monitors() -> None:
        for m in monitors:
            m.stop()

    try:
        if s.cell.open_loop:
            s.rate, peak = open_loop_rate(s.store, s.cell, s.run.campaign)
            s.record.set(rate_tps=s.rate, closed_loop_peak_tps=round(peak, 3))
        mode = window_mode((s.record.versions or {}).get("sysbench"), s.exp.warmup_s)
        if mode == "one_process" and topo.window_opens_idle and not os.environ.get(WINDOW_MODE_ENV):
            mode = "two_process"
            s.record.window_mode_reason = (f"the {topo.kind} topology reads counters of several servers that "
                                                "must agree: its window opens while no client runs")
        s.record.window_mode = mode
        topo.prepare(s)
        topo.start(s)
        if s.record.window_mode != "one_process":
            if s.exp.warmup_s > 0:
                _warm_up(s, topo)
            topo.before_window(s)
        parsed = _measure(s, topo, monitors)
        topo.check_results(s, parsed)
        if s.cell.workload == "tpcc":
            _tpcc_consistency(s, topo)
        s.mark("stop")
        topo.stop(s)
        s.mark("done")
        s.record.succeed()
    except (KeyboardInterrupt, RunInterrupted):
        with shielded():
            stop_monitors()
            topo.abort()
            s.discard()
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is recorded with its step; the matrix goes on
        s.fail(exc)
        stop_monitors()
        topo.stop_after_failure(s)
    finally:
        if s.staging.is_dir():
            collectors = next((m for m in monitors if isinstance(m, collect.CollectorSet)), None)
            if collectors is not None:
                for name, text in collectors.texts.items():
                    s.save(f"{name}.txt", text)
            topo.save_outputs(s)
    return s.commit(t0)


__all__ = ["WINDOW_MODES", "WINDOW_MODE_ENV", "RunFailed", "RunSession", "StepClock", "base_record", "execute",
           "interrupts_stop_cleanly", "measure", "open_loop_rate", "record_early_failure", "shielded",
           "sysbench_seed", "tsv", "window_mode"]
