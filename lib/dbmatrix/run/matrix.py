"""Execute a study's plan: datasets, runs in their seeded order, failure isolation and resume.

Per run: restore the dataset snapshot onto the cell's medium -> drop OS caches -> start mariadbd with
the cell's options -> warm up -> measure with sysbench -> stop -> keep every raw output.
A failing run is recorded (status "failed", its step, error and logs) and the matrix goes on;
a rerun skips completed runs and retries failed ones. Ctrl-C stops the server before leaving.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import traceback
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from dbmatrix.hosts import collect, media
from dbmatrix.workload import sysbench, commands as workloads
from dbmatrix.run.datasets import DatasetInfo, drop_os_caches, prepare_dataset, restore
from dbmatrix.hosts.facts import collect_facts
from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.run.mysqld import (MariaDBServer, ServerPaths, cache_bytes, constants_for, render_options,
                     requested_cache_bytes, server_user)
from dbmatrix.paths import git_state
from dbmatrix.hosts.remote import Host, RunInterrupted
from dbmatrix.spec.experiment import Cell, DatasetKey, Experiment, PlannedRun, SpecError
from dbmatrix.store import ResultStore, utc_now, write_json_atomic, write_text_atomic
from dbmatrix.study import Study

BASE_PORT = 13306
# Rough fixed costs measured on a 2-vCPU VM (restore + start + stop + bookkeeping; init + load).
RUN_OVERHEAD_S = 5.0
DATASET_OVERHEAD_S = 8.0
LOAD_ROWS_PER_S = 150_000.0
TPCC_LOAD_S_PER_WAREHOUSE = 10.0  # one warehouse (~140-240 MiB) with parallel loaders, 2 vCPUs, loaded
# TPC-C consistency condition 4 scans all of ORDER_LINE (~300k rows per warehouse): after every run only
# up to this many warehouses; larger datasets check conditions 1-3 (the manifest says which ran).
TPCC_FULL_CHECK_MAX_WAREHOUSES = 50


class RunFailed(RuntimeError):
    pass


def parse_listening_ports(ss_output: str) -> set[int]:
    """TCP ports in LISTEN state from `ss -Htln` output."""
    ports = set()
    for line in ss_output.splitlines():
        fields = line.split()
        if len(fields) >= 4 and ":" in fields[3]:
            tail = fields[3].rsplit(":", 1)[1]
            if tail.isdigit():
                ports.add(int(tail))
    return ports


def base_port() -> int:
    """First port tried for servers: DBMATRIX_BASE_PORT, else 13306 (lets concurrent sessions use own ranges)."""
    env = os.environ.get("DBMATRIX_BASE_PORT", "")
    return int(env) if env.isdigit() else BASE_PORT


# Ports handed out by this process, per machine: the workers of a fleet look for ports at the same time,
# and two inventory hosts may be one machine (two "local" hosts with their own workdirs).
_RESERVED_PORTS: dict[str, set[int]] = {}
_PORT_LOCK = threading.Lock()
PORTS_PER_HOST = 40  # a block per host context: one server, or the 4 ports of each of up to 9 Galera nodes


def free_port(host: Host, start: int | None = None, block: int = 1) -> int:
    """The first port from `start` such that `block` consecutive ports are neither listening on the host
    nor handed out by this process before."""
    if start is None:
        start = base_port()
    machine = "local" if host.is_local else host.name
    used = parse_listening_ports(host.run("ss -Htln", check=False).stdout)
    with _PORT_LOCK:
        taken = used | _RESERVED_PORTS.setdefault(machine, set())
        port = start
        while any(p in taken for p in range(port, port + block)):
            port += 1
        _RESERVED_PORTS[machine].update(range(port, port + block))
    return port


def release_port(host: Host, port: int, block: int = 1) -> None:
    with _PORT_LOCK:
        _RESERVED_PORTS.get("local" if host.is_local else host.name, set()).difference_update(
            range(port, port + block))


def sysbench_seed(spec_seed: int, run_id: str) -> int:
    """A distinct, reproducible --rand-seed per run (sysbench wants 1..2^31-1; 0 means the clock)."""
    return zlib.crc32(f"{spec_seed}:{run_id}".encode()) % (2**31 - 1) + 1


@dataclass(frozen=True)
class PlanSummary:
    runs: list[PlannedRun]
    datasets: list[str]
    estimated_s: float

    def table(self) -> list[dict[str, Any]]:
        return [{"order": r.order, "block": r.block, "run_id": r.run_id, **r.cell.levels()} for r in self.runs]


def summarize_plan(exp: Experiment, pending: list[PlannedRun] | None = None,
                   prepared: set[str] | None = None) -> PlanSummary:
    runs = exp.plan() if pending is None else pending
    keys = {exp.dataset_key(r.cell) for r in runs}
    keys = {k for k in keys if k.name not in (prepared or set())}
    w = exp.workload

    def load_s(key: DatasetKey) -> float:
        if key.schema == "tpcc":
            return w.tables * w.warehouses * TPCC_LOAD_S_PER_WAREHOUSE
        return w.tables * w.table_size / LOAD_ROWS_PER_S

    overhead = RUN_OVERHEAD_S
    if exp.topology.galera:
        from dbmatrix.run.galera import GALERA_RUN_OVERHEAD_S  # galera_run imports this module

        overhead = GALERA_RUN_OVERHEAD_S
    est = (len(runs) * (exp.warmup_s + exp.measure_s + overhead)
           + sum(DATASET_OVERHEAD_S + load_s(k) for k in keys))
    return PlanSummary(runs, sorted(k.name for k in keys), est)


def format_duration(seconds: float) -> str:
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def record_plan(store: ResultStore, exp: Experiment) -> None:
    """Bind a results directory to one spec: resuming with a changed spec would mix incomparable runs."""
    path = store.root / "plan.json"
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("spec_digest") != exp.digest():
            raise SpecError(
                f"spec: the results in {store.root} were measured with a different spec "
                f"(digest {old.get('spec_digest')} != {exp.digest()}); use another results directory "
                "or move the old one away"
            )
        return
    write_json_atomic(path, {
        "experiment": exp.name, "spec_digest": exp.digest(), "spec": exp.to_dict(), "seed": exp.seed,
        "order": [{"order": r.order, "block": r.block, "run_id": r.run_id} for r in exp.plan()],
        "created_utc": utc_now(),
    })


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
    """Ctrl-C and SIGTERM raise RunInterrupted: the running command is killed, the server is stopped
    cleanly, the unfinished run is discarded, and completed runs stay."""
    return _signal_handlers(_raise_interrupted)


def _shielded() -> Any:
    """Ignore further Ctrl-C while we clean up after the first one."""
    return _signal_handlers(signal.SIG_IGN)


def host_facts(host: Host, store: ResultStore) -> dict[str, Any]:
    facts = collect_facts(host)
    facts["collected_utc"] = utc_now()
    write_json_atomic(store.hosts / f"{host.name}.json", facts)
    return facts


def base_manifest(exp: Experiment, run: PlannedRun, host: str) -> dict[str, Any]:
    """What every manifest says about the run, whether it was measured or failed before starting."""
    return {
        "run_id": run.run_id, "experiment": exp.name, "spec_digest": exp.digest(), "spec": exp.to_dict(),
        "cell_id": run.cell.cell_id, "cell": run.cell.levels(), "repetition": run.repetition,
        "block": run.block, "order": run.order, "adaptive": run.adaptive, "host": host, "git": git_state(),
        "started_utc": utc_now(),
    }


@dataclass
class HostContext:
    """What every run on one host shares: facts, the server user, a port, and the media's states."""

    host: Host
    spec: HostSpec
    facts: dict[str, Any]
    user: str
    port: int
    media: dict[str, Any]  # medium name -> media.MediumState, or the exception that made it unusable
    tpcc_script: str | None = None  # our TPC-C Lua script on this host, when the plan uses it


def open_loop_rate(store: ResultStore, cell: Cell) -> tuple[int, float]:
    """--rate for an open-loop cell: its fraction of the mean tps measured by its closed-loop twin."""
    twin = cell.closed_loop_twin().cell_id
    tps = [m["summary"]["tps"] for m in store.iter_manifests()
           if m.get("status") == "ok" and m.get("cell_id") == twin and (m.get("summary") or {}).get("tps")]
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


def run_manifest(exp: Experiment, run: PlannedRun, ctx: HostContext, dataset: DatasetInfo,
                 media_state: dict[str, Any]) -> dict[str, Any]:
    """What every measured run's manifest starts with, a single server's or a cluster's (`ctx` is the
    host of the server, or of node 1): identity, host facts, medium, dataset, cache sizing, server
    constants, CPU placement and the sysbench seed; `steps` is filled by a :class:`StepClock`."""
    cell = run.cell
    cache = cache_bytes(cell, dataset.data_physical_bytes)
    requested = requested_cache_bytes(cell, dataset.data_physical_bytes)
    placement = exp.cpu_placement
    return {
        **base_manifest(exp, run, ctx.host.name), "host_facts": ctx.facts,
        "medium": ctx.spec.media[cell.medium].to_dict(), "media_state": media_state,
        "versions": {"mariadb": ctx.facts.get("mariadb_version"),
                     "sysbench": ctx.facts.get("sysbench_version")},
        "dataset": dataset.to_dict(), "cache_pct": cell.cache_pct, "cache_bytes": cache,
        "cache_bytes_requested": requested, "cache_clamped_to_minimum": cache > requested,
        "server_constants": constants_for(cell, exp.server_options),
        "cpu_placement": {"tool": placement.tool, "server": placement.server, "client": placement.client},
        "sysbench_seed": sysbench_seed(exp.seed, run.run_id), "steps": {}, "adaptive": run.adaptive,
    }


def execute_run(ctx: HostContext, exp: Experiment, run: PlannedRun, dataset: DatasetInfo,
                store: ResultStore) -> dict[str, Any]:
    """Measure one run; always returns a committed manifest (ok or failed) unless interrupted."""
    host, hostspec = ctx.host, ctx.spec
    cell = run.cell
    medium = hostspec.media[cell.medium]
    datadir = f"{medium.path}/datadir"
    log_dir = None if cell.log_medium == "same" else f"{hostspec.media[cell.log_medium].path}/logdir"
    paths = ServerPaths.under(f"{hostspec.workdir}/run", datadir, "bench", ctx.port)
    cache = cache_bytes(cell, dataset.data_physical_bytes)
    options = render_options(cell, paths, user=ctx.user, cache=cache, constants=exp.server_options,
                             log_dir=log_dir)
    placement = exp.cpu_placement
    server = MariaDBServer(host, paths, options,
                           prefix=[*placement.prefix("server"), *media.launch_prefix(medium)])
    client_prefix = placement.prefix("client")
    seed = sysbench_seed(exp.seed, run.run_id)

    def bench(time_s: int, histogram: bool, rate: int | None = None) -> str:
        argv = workloads.command(exp, cell, "run", socket=paths.socket, threads=cell.threads,
                                 script=ctx.tpcc_script, time_s=time_s, seed=seed, histogram=histogram,
                                 rate=rate)
        return sysbench.command_string([*client_prefix, *argv])

    staging = store.begin_run(run.run_id)
    states = {n: ctx.media[n] for n in {cell.medium, cell.log_medium} - {"same"}}
    manifest = run_manifest(exp, run, ctx, dataset, {n: st.to_dict() for n, st in sorted(states.items())})
    manifest.update(log_dir=log_dir, server={"command": server.command, "options": options})
    devices = sorted({st.device for st in states.values() if st.device})
    clock = StepClock(manifest["steps"], "restore")
    mark = clock.mark

    def save(name: str, text: str) -> None:
        write_text_atomic(staging / name, text)

    def save_tsv(name: str, pairs: dict[str, str]) -> None:
        save(name, "".join(f"{k}\t{v}\n" for k, v in sorted(pairs.items())))

    t0 = time.monotonic()
    collectors: collect.CollectorSet | None = None
    try:
        rate = None
        if cell.open_loop:
            rate, peak = open_loop_rate(store, cell)
            manifest.update(rate_tps=rate, closed_loop_peak_tps=round(peak, 3))
        restore(host, dataset, datadir, log_dir)
        mark("drop_caches")
        manifest["os_cache_dropped"] = drop_os_caches(host)
        mark("start")
        server.start()
        manifest["server"]["start_s"] = round(server.started_s or 0, 3)
        manifest["server"]["pid"] = server.pid
        if placement.server:
            manifest["cpu_placement"]["server_affinity"] = host.run(
                f"taskset -cp {server.pid}", check=False).stdout.strip()
        mark("variables")
        variables = server.global_variables()
        save_tsv("variables.tsv", variables)
        key = "innodb_buffer_pool_size" if cell.engine == "innodb" else "rocksdb_block_cache_size"
        manifest["cache_bytes_effective"] = int(variables.get(key, 0) or 0)
        if exp.warmup_s > 0:
            mark("warmup")
            cmd = bench(exp.warmup_s, False, rate)
            r = host.run(cmd, check=False, timeout=exp.warmup_s + 300)
            save("warmup.out", r.stdout)
            save("warmup.err", r.stderr)
            manifest["sysbench_warmup"] = {"command": cmd, "exit_code": r.exit_code}
            if not r.ok:
                raise RunFailed(f"warm-up sysbench exited {r.exit_code}: {(r.stderr or r.stdout)[-500:]}")
        mark("status_before")
        save_tsv("status-before.tsv", server.global_status())
        mark("measure")
        cmd = bench(exp.measure_s, True, rate)
        collectors = collect.CollectorSet(host, f"{hostspec.workdir}/run/collect", interval_s=1,
                                          devices=devices, pid=server.pid)
        collectors.start()
        # Counters bracket the measured sysbench only (not the collectors' start and stop).
        before = collect.snapshot_counters(host, pid=server.pid, devices=devices)
        r = host.run(cmd, check=False, timeout=exp.run_timeout_s or exp.measure_s + 600)
        after = collect.snapshot_counters(host, pid=server.pid, devices=devices)
        collectors.stop()
        manifest["system"] = collect.counter_deltas(before, after)
        manifest["collectors"] = {"devices": devices, "errors": collectors.errors}
        save("sysbench.out", r.stdout)
        save("sysbench.err", r.stderr)
        manifest["sysbench"] = {"command": cmd, "exit_code": r.exit_code}
        parsed = sysbench.parse_output(r.stdout, r.stderr)
        if not r.ok or not parsed.complete:
            raise RunFailed(f"sysbench exited {r.exit_code}: {'; '.join(parsed.fatal) or r.stderr[-500:]}")
        manifest["summary"] = {k: parsed.summary.get(k) for k in ("tps", "qps", "lat_pct_ms", "ignored_errors")}
        if cell.workload == "tpcc":
            manifest["summary"]["tpmC"] = parsed.summary.get("tpmC")
            manifest["tpcc"] = parsed.summary.get("tpcc")
        mark("status_after")
        save_tsv("status-after.tsv", server.global_status())
        if cell.workload == "tpcc":
            mark("consistency")
            check = tpcc_check(host, exp, paths.socket, ctx.tpcc_script)
            manifest["tpcc_consistency"] = check.to_dict()
            if not check.passed:
                raise RunFailed(f"TPC-C consistency conditions {check.failed} failed after the run")
        mark("stop")
        server.stop()
        manifest["server"].update(stop_s=round(server.stop_s or 0, 3), clean_shutdown=server.clean_shutdown)
        mark("done")
        manifest["status"] = "ok"
        manifest["error"] = None
    except (KeyboardInterrupt, RunInterrupted):
        with _shielded():
            if collectors is not None:
                collectors.stop()
            server.stop()
            store.discard(staging)
        raise
    except Exception as exc:
        manifest["status"] = "failed"
        manifest["failed_step"] = clock.step
        manifest["error"] = f"{type(exc).__name__}: {exc}"
        save("traceback.txt", traceback.format_exc())
        if collectors is not None:
            collectors.stop()
        try:
            server.stop()
        except Exception as stop_exc:  # keep the first error; note the second
            manifest["stop_error"] = f"{type(stop_exc).__name__}: {stop_exc}"
    finally:
        if collectors is not None and staging.is_dir():
            for name, text in collectors.texts.items():
                save(f"{name}.txt", text)
        if server.pid is None and clock.step != "restore" and staging.is_dir():
            _fetch(host, paths.error_log, staging / "mariadbd.err")
    manifest["finished_utc"] = utc_now()
    manifest["duration_s"] = round(time.monotonic() - t0, 3)
    store.commit_run(staging, manifest)
    return manifest


def tpcc_check(host: Host, exp: Experiment, socket: str, script: str | None) -> Any:
    """TPC-C consistency conditions 1-4 on the server after a run (a failed condition fails the run)."""
    from dbmatrix.workload.commands import check_consistency

    if not script:
        raise RunFailed("tpcc: the Lua script was not installed on the host")
    w = exp.workload
    conditions = (1, 2, 3, 4) if w.tables * w.warehouses <= TPCC_FULL_CHECK_MAX_WAREHOUSES else (1, 2, 3)
    return check_consistency(host, socket=socket, script=script, tables=w.tables, scale=w.warehouses,
                                  conditions=conditions)


def _fetch(host: Host, remote: str, local: Path) -> None:
    if host.exists(remote):
        host.get(remote, str(local))


def media_used(exp: Experiment) -> list[str]:
    """Media the plan needs: the data media and any separate log media."""
    return sorted({*exp.factors["medium"], *(m for m in exp.factors["log_medium"] if m != "same")})


def prepare_media(host: Host, hostspec: HostSpec, exp: Experiment) -> dict[str, Any]:
    """Apply and verify every medium the plan uses; a medium that fails is kept as its exception,
    so its runs are recorded as failed and the rest of the matrix goes on."""
    states: dict[str, Any] = {}
    for name in media_used(exp):
        try:
            states[name] = media.ensure(host, hostspec.media[name])
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:
            states[name] = exc
    return states


def connect_host(hostspec: HostSpec, exp: Experiment, store: ResultStore, port_start: int | None = None
                 ) -> HostContext:
    """Connect, record the host's facts, pick a free port, and apply/verify the media the plan uses."""
    host = hostspec.connect()
    try:
        ctx = HostContext(host, hostspec, host_facts(host, store), server_user(host),
                          free_port(host, port_start, block=PORTS_PER_HOST), {})
        ctx.media.update(prepare_media(host, hostspec, exp))
        ctx.tpcc_script = workloads.install_scripts(host, hostspec.workdir, exp)
    except BaseException:
        host.close()
        raise
    return ctx


def fleet_hosts(study: Study, host_name: str | None) -> list[HostSpec]:
    """The hosts that take runs: one named host, the first node's host of a Galera cluster spread over
    hosts (the cluster then needs all of them for every run), or every host of the inventory."""
    inv = study.inventory
    if host_name:
        return [inv.host(host_name)]
    if study.experiment.topology.hosts:
        return [inv.host(study.experiment.topology.hosts[0])]
    return list(inv.hosts)


def run_study(study: Study, *, progress: bool = True, max_runs: int | None = None,
              host_name: str | None = None) -> dict[str, Any]:
    """Run every pending run of the study's plan on the inventory's hosts (in parallel when there are
    several; see :mod:`dbmatrix.run.fleet`); returns counts. Safe to call again to resume."""
    from dbmatrix.run.fleet import Fleet, Worker

    exp, store = study.experiment, study.store
    specs = fleet_hosts(study, host_name)
    record_plan(store, exp)
    store.clean_staging()
    plan = exp.plan()
    pending = [r for r in plan if store.status(r.run_id) != "ok"]
    counts: dict[str, Any] = {"planned": len(plan), "already_done": len(plan) - len(pending), "ok": 0,
                              "failed": 0, "adaptive": 0, "not_attempted": 0}
    if max_runs is not None:
        pending = pending[:max_runs]
    if not pending and not exp.noise.adaptive:
        return counts
    from tqdm.auto import tqdm

    bar = tqdm(total=len(pending), disable=not progress, unit="run", desc=exp.name,
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")
    est = summarize_plan(exp, pending).estimated_s / max(1, len(specs))
    bar.set_postfix_str(f"plan ~{format_duration(est)} on {len(specs)} host(s)")
    lock = threading.Lock()

    def connect(w: Worker) -> None:
        w.ctx = connect_host(w.spec, exp, store)
        w.host = w.ctx.host
        if exp.topology.hosts:  # the other nodes' hosts of a cluster spread over the inventory
            w.peers = {n: connect_host(study.inventory.host(n), exp, store)
                       for n in dict.fromkeys(exp.topology.hosts[1:]) if n != w.spec.name}

    def execute(w: Worker, run: PlannedRun) -> dict[str, Any]:
        bar.set_postfix_str(f"{run.run_id} @ {w.spec.name}" if len(specs) > 1 else run.run_id)
        return _run_or_record(w.ctx, exp, run, store, w.datasets, w.peers)

    def on_result(w: Worker, m: dict[str, Any]) -> None:
        with lock:
            counts[m["status"]] += 1
            counts["adaptive"] += bool(m.get("adaptive"))
            bar.update(1)

    fleet = Fleet(specs, exp, store, connect, execute, on_result)
    with interrupts_stop_cleanly():
        try:
            left = fleet.run([r for r in pending if not r.cell.open_loop])
            left += fleet.run([r for r in pending if r.cell.open_loop])
            if exp.noise.adaptive and max_runs is None and not left:
                while fleet.alive() and (extra := adaptive_runs(store, exp)):
                    bar.total += len(extra)
                    bar.refresh()
                    left += fleet.run(extra)
                    if left:
                        break
        finally:
            bar.close()
            for w in fleet.workers:
                for c in [w.ctx, *w.peers.values()]:
                    if c is not None:
                        release_port(c.host, c.port, PORTS_PER_HOST)
                for peer in w.peers.values():
                    peer.host.close()
            fleet.close()
    counts["not_attempted"] = len(left)
    if len(specs) > 1 or any(w.lost for w in fleet.workers):
        counts["hosts"] = fleet.summary()
    return counts


def _run_or_record(ctx: HostContext, exp: Experiment, run: PlannedRun, store: ResultStore,
                   datasets: dict[str, DatasetInfo | Exception],
                   peers: dict[str, HostContext] | None = None) -> dict[str, Any]:
    """Measure a run, or record why it could not start (its medium or dataset failed)."""
    for name in {run.cell.medium, run.cell.log_medium} - {"same"}:
        state = ctx.media[name]
        if isinstance(state, Exception):
            return _record_early_failure(store, exp, run, ctx.host.name, "medium", state)
    key = exp.dataset_key(run.cell).name
    if key not in datasets:
        try:
            datasets[key] = prepare_dataset(ctx.host, ctx.spec.workdir, exp, run.cell, ctx.user, ctx.port,
                                            script=ctx.tpcc_script)
            write_json_atomic(store.dataset_file(ctx.host.name, key), datasets[key].to_dict())
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:
            datasets[key] = exc
    ds = datasets[key]
    if isinstance(ds, Exception):
        return _record_early_failure(store, exp, run, ctx.host.name, "prepare_dataset", ds)
    if exp.topology.galera:
        from dbmatrix.run.galera import execute_galera_run

        peers = peers or {}
        nodes = [ctx if not exp.topology.hosts or h == ctx.spec.name else peers[h]
                 for h in (exp.topology.hosts or (ctx.spec.name,) * exp.topology.nodes)]
        return execute_galera_run(nodes, exp, run, ds, store)
    return execute_run(ctx, exp, run, ds, store)


def adaptive_runs(store: ResultStore, exp: Experiment) -> list[PlannedRun]:
    """The next round of the adaptive mode: one more repetition of every cell whose CI is still too wide
    (until the cap); empty when every cell meets the target or reached the cap."""
    from dbmatrix.analyse.stats import adaptive_additions

    runs = store.load_runs()
    if runs.empty:
        return []
    more = adaptive_additions(runs, exp.noise.target_halfwidth_pct, exp.noise.max_repetitions)
    cells = exp.cells()
    by_id = {c.cell_id: c for c in cells}
    done = runs.groupby("cell_id")["repetition"].max().to_dict()
    manifests = list(store.iter_manifests())
    attempted = {m["run_id"] for m in manifests}
    first_order = len(cells) * exp.repetitions + sum(bool(m.get("adaptive")) for m in manifests) + 1
    extra = []
    for cell_id in sorted(more):
        if more[cell_id] <= 0 or cell_id not in by_id:
            continue
        rep = int(done.get(cell_id, exp.repetitions)) + 1
        while f"{cell_id}-r{rep}" in attempted:
            rep += 1  # a failed adaptive attempt is not retried forever: move on to the next number
        if rep > exp.noise.max_repetitions:
            continue
        extra.append(PlannedRun(by_id[cell_id], rep, rep, first_order + len(extra), adaptive=True))
    return extra


def _record_early_failure(store: ResultStore, exp: Experiment, run: PlannedRun, host: str, step: str,
                          exc: Exception) -> dict[str, Any]:
    staging = store.begin_run(run.run_id)
    write_text_atomic(staging / "traceback.txt", "".join(traceback.format_exception(exc)))
    manifest = {**base_manifest(exp, run, host), "status": "failed", "failed_step": step,
                "error": f"{type(exc).__name__}: {exc}", "finished_utc": utc_now()}
    store.commit_run(staging, manifest)
    return manifest


def time_accounting(store: ResultStore) -> dict[str, float]:
    """Seconds spent per step over all recorded runs (failed ones too) and dataset preparation:
    how much of the wall time was measurement."""
    steps: dict[str, float] = {}
    for m in store.iter_manifests():
        for step, secs in (m.get("steps") or {}).items():
            steps[step] = steps.get(step, 0.0) + float(secs)
    ds = store.root / "datasets"
    prepare = sum(json.loads(p.read_text()).get("prepare_s", 0.0) for p in ds.glob("*/*.json")) \
        if ds.is_dir() else 0.0
    total = sum(steps.values()) + prepare
    out = {f"{k}_s": round(v, 3) for k, v in sorted(steps.items())}
    out.update(prepare_datasets_s=round(prepare, 3), total_s=round(total, 3),
               measure_fraction=round(steps.get("measure", 0.0) / total, 4) if total else 0.0)
    return out


def study_status(study: Study) -> dict[str, Any]:
    """Counts of done/failed/pending runs and the estimated time left."""
    exp, store = study.experiment, study.store
    plan = exp.plan()
    statuses = {r.run_id: store.status(r.run_id) for r in plan}
    pending = [r for r in plan if statuses[r.run_id] != "ok"]
    failed = sorted(k for k, v in statuses.items() if v == "failed")
    return {
        "results_dir": str(store.root), "experiment": exp.name, "planned": len(plan),
        "ok": sum(v == "ok" for v in statuses.values()), "failed": failed,
        "pending": sum(v is None for v in statuses.values()),
        "estimated_remaining_s": summarize_plan(exp, pending).estimated_s if pending else 0.0,
    }
