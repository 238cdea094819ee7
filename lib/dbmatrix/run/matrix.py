"""Execute a study's plan: datasets, runs in their seeded order, failure isolation and resume.

Each run goes through the one run session (:mod:`dbmatrix.run.session`) with the spec's topology
(:class:`~dbmatrix.run.standalone.Standalone` or :class:`~dbmatrix.run.galera.Galera`): restore the
dataset snapshot -> drop OS caches -> start the server(s) -> warm up -> measure with sysbench -> stop ->
keep every raw output. A failing run is recorded (status "failed", its step, error and logs) and the
matrix goes on; a rerun skips completed runs and retries failed ones. Ctrl-C stops the servers first.
The runs of a study spread over the inventory's hosts through :mod:`dbmatrix.run.fleet`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import RunInterrupted
from dbmatrix.run.context import HostContext, connect_host
from dbmatrix.run.datasets import DatasetInfo, prepare_dataset
from dbmatrix.run.fleet import Fleet, Worker
from dbmatrix.run.galera import Galera
from dbmatrix.run.ports import PORTS_PER_HOST, release_port
from dbmatrix.run.session import IntervalCallback, RunSession, execute, interrupts_stop_cleanly, record_early_failure
from dbmatrix.run.standalone import Standalone
from dbmatrix.run.topology import Topology
from dbmatrix.spec.experiment import DatasetKey, Experiment, PlannedRun, SpecError
from dbmatrix.store import ResultStore, utc_now, write_json_atomic
from dbmatrix.study import Study

# Rough fixed costs measured on a 2-vCPU VM (restore + start + stop + bookkeeping; init + load).
DATASET_OVERHEAD_S = 8.0
LOAD_ROWS_PER_S = 150_000.0
TPCC_LOAD_S_PER_WAREHOUSE = 10.0  # one warehouse (~140-240 MiB) with parallel loaders, 2 vCPUs, loaded
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

    overhead = topology_class(exp).overhead_s
    est = (len(runs) * (exp.warmup_s + exp.measure_s + overhead)
           + sum(DATASET_OVERHEAD_S + load_s(k) for k in keys))
    return PlanSummary(runs, sorted(k.name for k in keys), est)


def format_duration(seconds: float) -> str:
    s = round(seconds)
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


def topology_class(exp: Experiment) -> type[Topology]:
    """The topology strategy of the spec's ``topology.kind``."""
    return Galera if exp.topology.galera else Standalone


def topology_for(ctx: HostContext, exp: Experiment, run: PlannedRun, dataset: DatasetInfo,
                 peers: dict[str, HostContext]) -> tuple[Topology, dict[str, Any]]:
    """The run's topology and its manifest's start; `ctx` is the worker's host (node 1's for a cluster),
    `peers` the other hosts of a cluster spread over the inventory."""
    if exp.topology.galera:
        nodes = [ctx if not exp.topology.hosts or h == ctx.spec.name else peers[h]
                 for h in (exp.topology.hosts or (ctx.spec.name,) * exp.topology.nodes)]
        return Galera(nodes, exp, run, dataset), Galera.manifest(nodes, exp, run, dataset)
    return Standalone(ctx, exp, run, dataset), Standalone.manifest(ctx, exp, run, dataset)


def run_or_record(ctx: HostContext, exp: Experiment, run: PlannedRun, store: ResultStore,
                  datasets: dict[str, DatasetInfo | Exception], peers: dict[str, HostContext] | None = None,
                  on_interval: IntervalCallback | None = None) -> dict[str, Any]:
    """Measure a run through its topology, or record why it could not start (its medium or dataset
    failed); the dataset is prepared on first use per host."""
    for name in {run.cell.medium, run.cell.log_medium} - {"same"}:
        state = ctx.media[name]
        if isinstance(state, Exception):
            return record_early_failure(store, exp, run, ctx.host.name, "medium", state)
    key = exp.dataset_key(run.cell).name
    if key not in datasets:
        try:
            info = prepare_dataset(ctx.host, ctx.spec.workdir, exp, run.cell, ctx.user, ctx.port,
                                   script=ctx.tpcc_script)
            datasets[key] = info
            write_json_atomic(store.dataset_file(ctx.host.name, key), info.to_dict())
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:  # noqa: BLE001 - the dataset's runs are recorded as failed
            datasets[key] = exc
    ds = datasets[key]
    if isinstance(ds, Exception):
        return record_early_failure(store, exp, run, ctx.host.name, "prepare_dataset", ds)
    topo, manifest = topology_for(ctx, exp, run, ds, peers or {})
    return execute(RunSession(store, exp, run, manifest, topo.first_step, on_interval), topo)


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
              host_name: str | None = None, on_interval: IntervalCallback | None = None) -> dict[str, Any]:
    """Run every pending run of the study's plan on the inventory's hosts (in parallel when there are
    several; see :mod:`dbmatrix.run.fleet`); returns counts. Safe to call again to resume.
    `on_interval(run_id, row)` receives each per-second sysbench row of a measured window as it comes."""
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
        return run_or_record(w.ctx, exp, run, store, w.datasets, w.peers, on_interval)

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


def adaptive_runs(store: ResultStore, exp: Experiment) -> list[PlannedRun]:
    """The next round of the adaptive mode: one more repetition of every cell whose CI is still too wide
    (until the cap); empty when every cell meets the target or reached the cap."""
    from dbmatrix.analyse.stats import adaptive_additions

    runs = store.load_runs()
    target, cap = exp.noise.target_halfwidth_pct, exp.noise.max_repetitions
    if runs.empty or target is None or cap is None:
        return []
    more = adaptive_additions(runs, target, cap)
    cells = exp.cells()
    by_id = {c.cell_id: c for c in cells}
    done = runs.groupby("cell_id")["repetition"].max().to_dict()
    manifests = list(store.iter_manifests())
    attempted = {m["run_id"] for m in manifests}
    first_order = len(cells) * exp.repetitions + sum(bool(m.get("adaptive")) for m in manifests) + 1
    extra: list[PlannedRun] = []
    for cell_id in sorted(more):
        if more[cell_id] <= 0 or cell_id not in by_id:
            continue
        rep = int(done.get(cell_id, exp.repetitions)) + 1
        while f"{cell_id}-r{rep}" in attempted:
            rep += 1  # a failed adaptive attempt is not retried forever: move on to the next number
        if rep > cap:
            continue
        extra.append(PlannedRun(by_id[cell_id], rep, rep, first_order + len(extra), adaptive=True))
    return extra


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
