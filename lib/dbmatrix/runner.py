"""Execute a study's plan: datasets, runs in their seeded order, failure isolation and resume.

Per run: restore the dataset snapshot onto the cell's medium -> drop OS caches -> start mariadbd with
the cell's options -> warm up -> measure with sysbench -> stop -> keep every raw output.
A failing run is recorded (status "failed", its step, error and logs) and the matrix goes on;
a rerun skips completed runs and retries failed ones. Ctrl-C stops the server before leaving.
"""

from __future__ import annotations

import json
import shlex
import signal
import time
import traceback
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from . import sysbench
from .datasets import DatasetInfo, drop_os_caches, prepare_dataset, restore
from .hostinfo import collect_facts
from .inventory import HostSpec
from .mysqld import (MariaDBServer, ServerPaths, cache_bytes, render_options, requested_cache_bytes,
                     server_user)
from .paths import git_state
from .remote import Host, RunInterrupted
from .spec import Experiment, PlannedRun, SpecError
from .store import ResultStore, utc_now, write_json_atomic, write_text_atomic
from .study import Study

BASE_PORT = 13306
# Rough fixed costs measured on a 2-vCPU VM (restore + start + stop + bookkeeping; init + load).
RUN_OVERHEAD_S = 8.0
DATASET_OVERHEAD_S = 8.0
LOAD_ROWS_PER_S = 150_000.0


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


def free_port(host: Host, start: int = BASE_PORT) -> int:
    used = parse_listening_ports(host.run("ss -Htln", check=False).stdout)
    port = start
    while port in used:
        port += 1
    return port


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
    keys = sorted({exp.dataset_key(r.cell).name for r in runs} - (prepared or set()))
    rows = exp.workload.tables * exp.workload.table_size
    est = (len(runs) * (exp.warmup_s + exp.measure_s + RUN_OVERHEAD_S)
           + len(keys) * (DATASET_OVERHEAD_S + rows / LOAD_ROWS_PER_S))
    return PlanSummary(runs, keys, est)


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
        "block": run.block, "order": run.order, "host": host, "git": git_state(), "started_utc": utc_now(),
    }


def execute_run(
    host: Host,
    hostspec: HostSpec,
    exp: Experiment,
    run: PlannedRun,
    dataset: DatasetInfo,
    store: ResultStore,
    facts: dict[str, Any],
    port: int,
    user: str,
) -> dict[str, Any]:
    """Measure one run; always returns a committed manifest (ok or failed) unless interrupted."""
    cell = run.cell
    medium = hostspec.media[cell.medium]
    datadir = f"{medium.path}/datadir"
    paths = ServerPaths.under(f"{hostspec.workdir}/run", datadir, "bench", port)
    cache = cache_bytes(cell, dataset.data_physical_bytes)
    options = render_options(cell, paths, user=user, cache=cache, constants=exp.server_options)
    server = MariaDBServer(host, paths, options)
    w = exp.workload
    seed = sysbench_seed(exp.seed, run.run_id)

    def bench(time_s: int, histogram: bool) -> list[str]:
        return sysbench.build_command(
            w.name, "run", socket=paths.socket, tables=w.tables, table_size=w.table_size,
            threads=cell.threads, time_s=time_s, rand_type=w.rand_type, seed=seed, histogram=histogram)

    staging = store.begin_run(run.run_id)
    requested = requested_cache_bytes(cell, dataset.data_physical_bytes)
    manifest: dict[str, Any] = {
        **base_manifest(exp, run, host.name), "host_facts": facts, "medium": medium.to_dict(),
        "versions": {"mariadb": facts.get("mariadb_version"), "sysbench": facts.get("sysbench_version")},
        "dataset": dataset.to_dict(), "cache_pct": cell.cache_pct, "cache_bytes": cache,
        "cache_bytes_requested": requested, "cache_clamped_to_minimum": cache > requested,
        "sysbench_seed": seed, "steps": {},
        "server": {"command": server.command, "options": options},
    }
    step = "restore"
    t_step = time.monotonic()

    def mark(next_step: str) -> None:
        nonlocal step, t_step
        manifest["steps"][step] = round(time.monotonic() - t_step, 3)
        step, t_step = next_step, time.monotonic()

    def save(name: str, text: str) -> None:
        write_text_atomic(staging / name, text)

    def save_tsv(name: str, pairs: dict[str, str]) -> None:
        save(name, "".join(f"{k}\t{v}\n" for k, v in sorted(pairs.items())))

    t0 = time.monotonic()
    try:
        restore(host, dataset, datadir)
        mark("drop_caches")
        manifest["os_cache_dropped"] = drop_os_caches(host)
        mark("start")
        server.start()
        manifest["server"]["start_s"] = round(server.started_s or 0, 3)
        mark("variables")
        variables = server.global_variables()
        save_tsv("variables.tsv", variables)
        key = "innodb_buffer_pool_size" if cell.engine == "innodb" else "rocksdb_block_cache_size"
        manifest["cache_bytes_effective"] = int(variables.get(key, 0) or 0)
        if exp.warmup_s > 0:
            mark("warmup")
            cmd = sysbench.command_string(bench(exp.warmup_s, False))
            r = host.run(cmd, check=False, timeout=exp.warmup_s + 300)
            save("warmup.out", r.stdout)
            save("warmup.err", r.stderr)
            manifest["sysbench_warmup"] = {"command": cmd, "exit_code": r.exit_code}
            if not r.ok:
                raise RunFailed(f"warm-up sysbench exited {r.exit_code}: {(r.stderr or r.stdout)[-500:]}")
        mark("status_before")
        save_tsv("status-before.tsv", server.global_status())
        mark("measure")
        cmd = sysbench.command_string(bench(exp.measure_s, True))
        r = host.run(cmd, check=False, timeout=exp.run_timeout_s or exp.measure_s + 600)
        save("sysbench.out", r.stdout)
        save("sysbench.err", r.stderr)
        manifest["sysbench"] = {"command": cmd, "exit_code": r.exit_code}
        parsed = sysbench.parse_output(r.stdout, r.stderr)
        if not r.ok or not parsed.complete:
            raise RunFailed(f"sysbench exited {r.exit_code}: {'; '.join(parsed.fatal) or r.stderr[-500:]}")
        manifest["summary"] = {k: parsed.summary.get(k) for k in ("tps", "qps", "lat_pct_ms", "ignored_errors")}
        mark("status_after")
        save_tsv("status-after.tsv", server.global_status())
        mark("stop")
        server.stop()
        manifest["server"].update(stop_s=round(server.stop_s or 0, 3), clean_shutdown=server.clean_shutdown)
        mark("done")
        manifest["status"] = "ok"
        manifest["error"] = None
    except (KeyboardInterrupt, RunInterrupted):
        with _shielded():
            server.stop()
            store.discard(staging)
        raise
    except Exception as exc:
        manifest["status"] = "failed"
        manifest["failed_step"] = step
        manifest["error"] = f"{type(exc).__name__}: {exc}"
        save("traceback.txt", traceback.format_exc())
        try:
            server.stop()
        except Exception as stop_exc:  # keep the first error; note the second
            manifest["stop_error"] = f"{type(stop_exc).__name__}: {stop_exc}"
    finally:
        if server.pid is None and step != "restore" and staging.is_dir():
            _fetch(host, paths.error_log, staging / "mariadbd.err")
    manifest["finished_utc"] = utc_now()
    manifest["duration_s"] = round(time.monotonic() - t0, 3)
    store.commit_run(staging, manifest)
    return manifest


def _fetch(host: Host, remote: str, local: Path) -> None:
    if host.exists(remote):
        host.get(remote, str(local))


def run_study(study: Study, *, progress: bool = True, max_runs: int | None = None,
              host_name: str | None = None) -> dict[str, Any]:
    """Run every pending run of the study's plan; returns counts. Safe to call again to resume."""
    exp, store = study.experiment, study.store
    if len(study.inventory.hosts) > 1 and host_name is None:
        raise SpecError("inventory: several hosts given; parallel fleet runs are not implemented yet, "
                        "pick one with host_name=…")
    hostspec = study.inventory.host(host_name) if host_name else study.inventory.hosts[0]
    record_plan(store, exp)
    store.clean_staging()
    plan = exp.plan()
    pending = [r for r in plan if store.status(r.run_id) != "ok"]
    if max_runs is not None:
        pending = pending[:max_runs]
    counts = {"planned": len(plan), "already_done": len(plan) - len(pending), "ok": 0, "failed": 0}
    if not pending:
        return counts
    from tqdm.auto import tqdm

    with interrupts_stop_cleanly(), hostspec.connect() as host:
        facts = host_facts(host, store)
        user = server_user(host)
        for m in hostspec.media.values():
            host.run(f"mkdir -p {shlex.quote(m.path)}")
        port = free_port(host)
        datasets: dict[str, DatasetInfo | Exception] = {}
        est = summarize_plan(exp, pending).estimated_s
        bar = tqdm(total=len(pending), disable=not progress, unit="run", desc=exp.name,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")
        bar.set_postfix_str(f"plan ~{format_duration(est)}")
        try:
            for run in pending:
                bar.set_postfix_str(run.run_id)
                key = exp.dataset_key(run.cell).name
                if key not in datasets:
                    try:
                        datasets[key] = prepare_dataset(host, hostspec.workdir, exp, run.cell, user, port)
                        write_json_atomic(store.dataset_file(host.name, key), datasets[key].to_dict())
                    except (KeyboardInterrupt, RunInterrupted):
                        raise
                    except Exception as exc:
                        datasets[key] = exc
                ds = datasets[key]
                if isinstance(ds, Exception):
                    m = _record_prepare_failure(store, exp, run, host.name, ds)
                else:
                    m = execute_run(host, hostspec, exp, run, ds, store, facts, port, user)
                counts[m["status"]] += 1
                bar.update(1)
        finally:
            bar.close()
    return counts


def _record_prepare_failure(store: ResultStore, exp: Experiment, run: PlannedRun, host: str,
                            exc: Exception) -> dict[str, Any]:
    staging = store.begin_run(run.run_id)
    write_text_atomic(staging / "traceback.txt", "".join(traceback.format_exception(exc)))
    manifest = {**base_manifest(exp, run, host), "status": "failed", "failed_step": "prepare_dataset",
                "error": f"{type(exc).__name__}: {exc}", "finished_utc": utc_now()}
    store.commit_run(staging, manifest)
    return manifest


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
