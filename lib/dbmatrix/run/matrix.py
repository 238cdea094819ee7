"""Execute a study's plan: datasets, runs in their seeded order, failure isolation and resume.

Each run goes through the one run session (:mod:`dbmatrix.run.session`) with the spec's topology
(:class:`~dbmatrix.run.standalone.Standalone`, :class:`~dbmatrix.run.galera.Galera` or
:class:`~dbmatrix.run.instances.Instances`): restore the
dataset snapshot -> drop OS caches -> start the server(s) -> warm up -> measure with sysbench -> stop ->
keep every raw output. A failing run is recorded (status "failed", its step, error and logs) and the
matrix goes on; a rerun skips completed runs and retries failed ones. Ctrl-C stops the servers first.
The runs of a study spread over the inventory's hosts through :mod:`dbmatrix.run.fleet`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.campaign_state import platforms_by_campaign
from dbmatrix.hosts import cpulimit, media
from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import RunInterrupted
from dbmatrix.paths import git_state
from dbmatrix.platform_facts import platform_changes, platform_summary
from dbmatrix.record import RunRecord
from dbmatrix.run import calibration
from dbmatrix.run.campaigns import (
    CampaignOption,
    CampaignState,
    Choice,
    choose,
    merge_record,
)
from dbmatrix.run.context import HostContext, connect_host, prepare_media
from dbmatrix.run.datasets import OS_CACHE_ENV, DatasetInfo, fresh_token, os_cache_policy, prepare_dataset
from dbmatrix.run.fleet import Fleet, Worker
from dbmatrix.run.galera import Galera
from dbmatrix.run.instances import Instances
from dbmatrix.run.platform_probe import PROBE_S, probe_line
from dbmatrix.run.probes import brackets, measure_bracketed, probe_after_sentinel
from dbmatrix.run.progress import RunProgress, format_duration, outcome_of
from dbmatrix.run.reports import RunReport, StudyStatus
from dbmatrix.run.sentinel_runs import END, START, sentinel_due, sentinel_runs_left, sentinel_store
from dbmatrix.run.session import IntervalCallback, interrupts_stop_cleanly, measure, record_early_failure
from dbmatrix.run.slurm import block_request, leaser_for
from dbmatrix.run.standalone import Standalone
from dbmatrix.run.topology import Topology
from dbmatrix.spec.assignment import assign_blocks, assign_runs, assignment_notes, host_of
from dbmatrix.spec.experiment import DatasetKey, Experiment, PlannedRun, SpecError
from dbmatrix.store import ResultStore, utc_now, write_json_atomic
from dbmatrix.study import Study, campaign_states_of

# Rough fixed costs measured on a 2-vCPU VM (restore + start + stop + bookkeeping; init + load).
DATASET_OVERHEAD_S = 8.0
LOAD_ROWS_PER_S = 150_000.0
TPCC_LOAD_S_PER_WAREHOUSE = 10.0  # one warehouse (~140-240 MiB) with parallel loaders, 2 vCPUs, loaded
@dataclass(frozen=True)
class PlanSummary:
    """A plan's runs, datasets and time estimates. With several hosts each host measures its own
    replicate blocks and prepares its own datasets: ``estimated_s`` is the machine time summed over the
    hosts, ``estimated_wall_s`` the wall-clock time (the busiest host's), ``estimated_s_per_host`` and
    ``runs_per_host`` each host's share. With one host all three times are the same number."""

    runs: list[PlannedRun]
    datasets: list[str]
    estimated_s: float
    hosts: tuple[str, ...] = ()
    run_hosts: dict[str, str] = field(default_factory=dict)  # run_id -> host (several hosts only)
    estimated_s_per_host: dict[str, float] = field(default_factory=dict)
    runs_per_host: dict[str, int] = field(default_factory=dict)
    estimated_wall_s: float = 0.0
    notes: tuple[str, ...] = ()

    def table(self) -> list[dict[str, Any]]:
        multi = len(self.hosts) > 1
        return [{"order": r.order, "block": r.block, **({"host": self.run_hosts.get(r.run_id)} if multi else {}),
                 "run_id": r.run_id, **r.cell.levels()} for r in self.runs]

    def as_dict(self) -> dict[str, Any]:
        """What a command line prints: counts and estimates (seconds), per host and in all."""
        return {"runs": len(self.runs), "datasets": list(self.datasets), "hosts": list(self.hosts),
                "runs_per_host": dict(self.runs_per_host),
                "estimated_s_per_host": dict(self.estimated_s_per_host),
                "estimated_wall_s": self.estimated_wall_s, "estimated_machine_s": self.estimated_s,
                "notes": list(self.notes)}


def summarize_plan(exp: Experiment, pending: list[PlannedRun] | None = None,
                   prepared: set[str] | None = None, hosts: Sequence[str] | None = None,
                   block_hosts: Mapping[int, str] | None = None) -> PlanSummary:
    """The runs (all, or `pending`), the datasets to prepare and the estimated time; over `hosts` (each
    measuring its replicate blocks, :mod:`dbmatrix.spec.assignment`; `block_hosts` overrides the seeded
    assignment, e.g. the one recorded in plan.json), per host and as wall-clock time."""
    runs = exp.plan() if pending is None else pending
    w = exp.workload

    def load_s(key: DatasetKey) -> float:
        if key.schema == "tpcc":
            return w.tables * w.warehouses * TPCC_LOAD_S_PER_WAREHOUSE
        return w.tables * w.table_size / LOAD_ROWS_PER_S

    overhead = topology_class(exp).overhead_s

    cal = exp.topology.calibrate
    # a calibration before the campaign: at most one short run per candidate (worst case: all of them)
    calibration_s = len(cal.candidates) * (cal.warmup_s + cal.measure_s + overhead) if cal and runs else 0.0

    def estimate(rs: list[PlannedRun]) -> tuple[float, set[DatasetKey]]:
        keys = {exp.dataset_key(r.cell) for r in rs}
        keys = {k for k in keys if k.name not in (prepared or set())}
        return (len(rs) * (exp.warmup_s + exp.measure_s + overhead) + (calibration_s if rs else 0.0)
                + sum(DATASET_OVERHEAD_S + load_s(k) for k in keys)), keys

    names = tuple(hosts or ())
    if len(names) <= 1:
        est, keys = estimate(runs)
        per = {names[0]: est} if names else {}
        return PlanSummary(runs, sorted(k.name for k in keys), est, names, {}, per,
                           {names[0]: len(runs)} if names else {}, est)
    bh = dict(block_hosts) if block_hosts else assign_blocks(range(1, exp.repetitions + 1), names, exp.seed)
    run_hosts = assign_runs(runs, bh, names)
    per_host: dict[str, float] = {}
    all_keys: set[DatasetKey] = set()
    for h in names:
        per_host[h], keys = estimate([r for r in runs if run_hosts[r.run_id] == h])  # 0 s for an idle host
        all_keys |= keys
    counts = {h: sum(1 for v in run_hosts.values() if v == h) for h in names}
    notes = tuple(assignment_notes({b: h for b, h in bh.items() if b <= exp.repetitions}, names))
    return PlanSummary(runs, sorted(k.name for k in all_keys), sum(per_host.values()), names, run_hosts,
                       per_host, counts, max(per_host.values()), notes)


def plan_hosts(study: Study, host_name: str | None = None) -> list[str]:
    """The hosts the plan's blocks are dealt to: the inventory's (the first node's host of a Galera
    cluster spread over hosts, which then needs all of them for every run). `--host` runs one host's
    share, it does not change the assignment."""
    if study.experiment.topology.hosts:
        return [study.experiment.topology.hosts[0]]
    return [h.name for h in study.inventory.hosts]


def study_assignment(study: Study, hosts: Sequence[str] | None = None) -> dict[int, str]:
    """Block -> host: the one recorded in the study's plan.json for these hosts (with any blocks moved off
    lost hosts), else the seeded assignment."""
    exp = study.experiment
    hosts = list(hosts or plan_hosts(study))
    path = study.store.root / "plan.json"
    if path.is_file() and len(hosts) > 1:
        rec = json.loads(path.read_text())
        if rec.get("hosts") == hosts and rec.get("block_hosts"):
            return {int(b): str(h) for b, h in rec["block_hosts"].items()}
    return assign_blocks(range(1, exp.repetitions + 1), hosts, exp.seed)


def summarize_study(study: Study, pending: list[PlannedRun] | None = None) -> PlanSummary:
    """:func:`summarize_plan` over the study's hosts and their recorded assignment."""
    hosts = plan_hosts(study)
    return summarize_plan(study.experiment, pending, hosts=hosts, block_hosts=study_assignment(study, hosts))


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


def record_assignment(store: ResultStore, exp: Experiment, hosts: Sequence[str], block_hosts: Mapping[int, str],
                      moves: Sequence[Mapping[str, Any]] = ()) -> None:
    """Write the host of every block (and of every run in ``order``) into plan.json, with the blocks moved
    off lost hosts. Only with several hosts: a one-host plan.json stays as it always was."""
    if len(hosts) <= 1:
        return
    path = store.root / "plan.json"
    plan = json.loads(path.read_text())
    new = {"hosts": list(hosts), "block_hosts": {str(b): h for b, h in sorted(block_hosts.items())},
           "assignment": "whole replicate blocks per host (dbmatrix.spec.assignment)"}
    if all(plan.get(k) == v for k, v in new.items()) and not moves:
        return
    plan.update(new)
    plan["blocks_moved"] = [*plan.get("blocks_moved", []), *({**m, "utc": utc_now()} for m in moves)]
    runs = {r.run_id: r for r in exp.plan()}
    for o in plan.get("order", []):
        r = runs.get(o["run_id"])
        if r is not None:
            o["host"] = host_of(r, block_hosts, hosts)
    write_json_atomic(path, plan)


def topology_class(exp: Experiment) -> type[Topology]:
    """The topology strategy of the spec's ``topology.kind``."""
    if exp.topology.instances:
        return Instances
    return Galera if exp.topology.galera else Standalone


def topology_for(ctx: HostContext, exp: Experiment, run: PlannedRun, dataset: DatasetInfo,
                 peers: dict[str, HostContext]) -> Topology:
    """The run's topology; `ctx` is the worker's host (node 1's for a cluster), `peers` the other hosts of
    a cluster spread over the inventory."""
    if exp.topology.galera:
        nodes = [ctx if not exp.topology.hosts or h == ctx.spec.name else peers[h]
                 for h in (exp.topology.hosts or (ctx.spec.name,) * exp.topology.nodes)]
        return Galera(nodes, exp, run, dataset)
    if exp.topology.instances:
        ctxs = {ctx.spec.name: ctx, **{h: peers[h] for h in exp.topology.hosts if h != ctx.spec.name and h in peers}}
        return Instances(ctxs, exp, run, dataset)
    return Standalone(ctx, exp, run, dataset)


def run_or_record(ctx: HostContext, exp: Experiment, run: PlannedRun, store: ResultStore,
                  datasets: dict[str, DatasetInfo | Exception], peers: dict[str, HostContext] | None = None,
                  on_interval: IntervalCallback | None = None, fresh_for: str | None = None) -> RunRecord:
    """Measure a run through its topology, or record why it could not start (its medium or dataset
    failed); the dataset is prepared on first use per host (`fresh_for`: loaded afresh for that campaign
    unless the host's snapshot was loaded for it, see :func:`dataset_token`)."""
    for name in {run.cell.medium, run.cell.log_medium, run.cell.follower_medium} - {"same"}:
        state = ctx.media[name]
        if isinstance(state, Exception):
            return record_early_failure(store, exp, run, ctx.host.name, "medium", state, ctx.facts.get("boot_id"))
    build = ctx.builds.get(run.cell.server_build)
    if isinstance(build, Exception):
        return record_early_failure(store, exp, run, ctx.host.name, "server_build", build, ctx.facts.get("boot_id"))
    key = exp.dataset_key(run.cell).name
    if key not in datasets:
        try:
            info = prepare_dataset(ctx.host, ctx.spec.workdir, exp, run.cell, ctx.user, None,
                                   script=ctx.tpcc_script, fresh_for=fresh_for,
                                   build=ctx.spec.builds[run.cell.server_build])
            datasets[key] = info
            write_json_atomic(store.dataset_file(ctx.host.name, key), info.to_dict())
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:  # noqa: BLE001 - the dataset's runs are recorded as failed
            datasets[key] = exc
    ds = datasets[key]
    if isinstance(ds, Exception):
        return record_early_failure(store, exp, run, ctx.host.name, "prepare_dataset", ds, ctx.facts.get("boot_id"))
    return measure(store, exp, run, topology_for(ctx, exp, run, ds, peers or {}), on_interval)


def dataset_token(exp: Experiment, store: ResultStore, campaign: int) -> str | None:
    """The mark of the snapshots loaded for `campaign` of this study (None: the spec reuses snapshots)."""
    return fresh_token(str(store.root.resolve()), exp.name, campaign) if exp.fresh_datasets else None


def fleet_hosts(study: Study, host_name: str | None) -> list[HostSpec]:
    """The hosts that take runs: one named host (its share of the blocks), the first node's host of a
    Galera cluster spread over hosts (the cluster then needs all of them for every run), or every host of
    the inventory."""
    inv = study.inventory
    if host_name:
        return [inv.host(host_name)]
    return [inv.host(n) for n in plan_hosts(study)]


def choose_campaign(study: Study, option: CampaignOption = "last") -> Choice:
    """The campaign `option` (auto, new, last or a number; :mod:`dbmatrix.run.campaigns`) selects in the
    study's results directory."""
    try:
        return choose(option, campaign_states_of(study.store, study.experiment), study.experiment.campaign_maximum)
    except ValueError as exc:
        raise SpecError(f"{exc} (results in {study.store.root})") from None


def _campaign_started(store: ResultStore, campaign: int) -> str | None:
    """When a campaign without a record began: its earliest run (campaign 1 of a directory measured
    before campaigns were recorded)."""
    starts = [str(m.started_utc) for m in store.records() if m.campaign == campaign and m.started_utc]
    return min(starts) if starts else None


def _record_campaign(study: Study, campaign: int, session_started: str, fleet: Fleet | None,
                     registration: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write campaigns/<k>.json: at the campaign's start (`fleet` None), and after each session with the
    hosts' boot ids, kernels and the datasets used; finished_utc once every planned run of the campaign is
    ok; the claims' `registration` as the campaign's first record has it."""
    exp, store = study.experiment, study.store
    states = {s.number: s for s in campaign_states_of(store, exp)}
    state = states.get(campaign) or CampaignState(campaign, len(exp.plan(campaign)), 0)
    hosts: dict[str, str | None] = {}
    kernels: dict[str, str | None] = {}
    datasets: list[dict[str, Any]] = []
    for w in (fleet.workers if fleet else []):
        for c in [w.ctx, *w.peers.values()]:
            if c is not None:
                hosts[c.spec.name] = c.facts.get("boot_id")
                kernels[c.spec.name] = c.facts.get("kernel")
        datasets += [d.to_dict() for d in w.datasets.values() if isinstance(d, DatasetInfo)]
    rec = merge_record(store.campaign_record(campaign), campaign=campaign, experiment=exp.name,
                       campaign_started_utc=_campaign_started(store, campaign) or session_started,
                       session_started_utc=session_started, now_utc=utc_now(), hosts=hosts, datasets=datasets,
                       git=git_state(), spec_digest=exp.digest(), state=state, session=fleet is not None,
                       kernels=kernels, registration=registration, dataset_load=exp.dataset_load)
    if fleet is not None and fleet.leases:  # the scheduler's allocations of this session (run.leasing)
        rec["leases"] = [*rec.get("leases", []), *fleet.leases]
    store.write_campaign_record(rec)
    return rec


def run_study(study: Study, *, progress: bool = True, max_runs: int | None = None,
              host_name: str | None = None, on_interval: IntervalCallback | None = None,
              allow_lost_hosts: bool = False, campaign: CampaignOption = "last",
              registration: Mapping[str, Any] | None = None,
              next_round: Callable[[int], list[PlannedRun]] | None = None) -> RunReport:
    """Run every pending run of the study's plan on the inventory's hosts (in parallel when there are
    several, each host its own replicate blocks; see :mod:`dbmatrix.run.fleet` and
    :mod:`dbmatrix.spec.assignment`); returns its counts (a :class:`RunReport`). Safe to call again to resume.

    A host that cannot be set up or stops answering stops the line (no further run starts) and is named
    in ``lost_hosts``; the caller fails (``dbmatrix run`` exits 4). With `allow_lost_hosts` the other
    hosts go on, taking the lost host's whole blocks not yet started; ``not_run`` lists what was not
    measured and why. `on_interval(run_id, row)` receives each per-second sysbench row of a measured
    window as it comes.

    `campaign` (:mod:`dbmatrix.run.campaigns`): ``last`` continues the latest campaign (nothing to run
    when it is complete), ``auto`` starts a new one when the latest is complete, ``new`` always starts one,
    a number continues that campaign. Only the chosen campaign's runs are pending; the line saying which
    campaign and why is printed and returned as ``campaign_reason``. `registration` (the claims'
    definitions and verdict code digests, given by ``dbmatrix run`` and :func:`dbmatrix.steps.run_matrix`)
    goes into a new campaign's record: what the claims were before its data. `next_round(campaign)`: after
    the planned runs, the runs of the next round until it returns none (``--until-decided``:
    :class:`dbmatrix.decide.UntilDecided`); default: the adaptive mode's rounds, if the spec has one."""
    exp, store = study.experiment, study.store
    keep_os_cache = os_cache_policy() == "keep"  # a bad $DBMATRIX_OS_CACHE stops here, before any run
    specs = fleet_hosts(study, host_name)
    if next_round is None and exp.noise.adaptive:
        next_round = lambda k: adaptive_runs(store, exp, k)  # noqa: E731
    hosts = plan_hosts(study)
    record_plan(store, exp)
    store.clean_staging()
    choice = choose_campaign(study, campaign)
    print(f"{exp.name}: {choice.line()}", flush=True)
    if keep_os_cache:
        print(f"{exp.name}: the page cache is kept between runs (${OS_CACHE_ENV}=keep; every record says "
              "os_cache_dropped: false): runs read warm files, not numbers to quote", flush=True)
    work = _session_work(study, choice, hosts, host_name, max_runs)
    counts = work.counts
    est = summarize_plan(exp, work.pending, hosts=[s.name for s in specs],
                         block_hosts=work.block_hosts).estimated_wall_s
    report = RunProgress(exp.name, planned=len(work.plan), already_done=counts.already_done,
                         to_run=len(work.pending), campaign=choice.number, hosts=len(specs),
                         estimate_s=est if work.pending else None)
    report.start()
    if not work.pending and next_round is None:
        return counts
    session_started = utc_now()
    if store.campaign_record(choice.number) is None:  # a started campaign is visible at once
        _record_campaign(study, choice.number, session_started, None, registration)
    session = _StudySession(study, specs, choice.number, work, report, on_interval,
                            _progress_bar(exp.name, len(work.pending), progress, est, len(specs)))
    fleet = Fleet(specs, exp, store, session.connect, session.execute, session.on_result,
                  allow_lost=allow_lost_hosts, leaser=leaser_for(study.inventory),
                  lease_request=session.lease_request, on_lease=session.on_lease)
    with interrupts_stop_cleanly():
        try:
            left = session.rounds(fleet, next_round if max_runs is None else None)
        finally:
            session.bar.close()
            _close_fleet(fleet)
            if fleet.moves:
                moved = {int(m["block"]): str(m["to"]) for m in fleet.moves}
                record_assignment(store, exp, hosts, {**work.block_hosts, **moved}, fleet.moves)
            rec = _record_campaign(study, choice.number, session_started, fleet, registration)
    counts.campaign_complete = rec["complete"]
    counts.not_attempted = len(left)
    report.finish(not_run=len(left))
    _tally(counts, fleet, left, several_hosts=len(specs) > 1, allow_lost_hosts=allow_lost_hosts)
    return counts


@dataclass
class _SessionWork:
    """What one session of :func:`run_study` measures: the campaign's plan, the runs still to measure (this
    host's share with ``--host``, at most ``max_runs``), each run's host and each block's, and the counts."""

    plan: list[PlannedRun]
    pending: list[PlannedRun]
    assignment: dict[str, str]  # run_id -> host
    block_hosts: dict[int, str]
    counts: RunReport


def _session_work(study: Study, choice: Choice, hosts: list[str], host_name: str | None,
                  max_runs: int | None) -> _SessionWork:
    """The chosen campaign's plan, its blocks dealt to `hosts` (recorded in plan.json) and its runs not yet
    ok: all of them, one host's share, or the first `max_runs`."""
    exp, store = study.experiment, study.store
    plan = exp.plan(choice.number)
    block_hosts = study_assignment(study, hosts)
    record_assignment(store, exp, hosts, block_hosts)
    assignment = assign_runs(plan, block_hosts, hosts)
    pending = [r for r in plan if store.status(r.run_id) != "ok"]
    counts = RunReport(campaign=choice.number, campaign_reason=choice.line(), planned=len(plan),
                       already_done=len(plan) - len(pending))
    if host_name and len(hosts) > 1:  # one host's share of the blocks
        counts.other_hosts_runs = sum(assignment[r.run_id] != host_name for r in pending)
        pending = [r for r in pending if assignment[r.run_id] == host_name]
    if max_runs is not None:
        pending = pending[:max_runs]
    return _SessionWork(plan, pending, assignment, block_hosts, counts)


def _progress_bar(name: str, total: int, progress: bool, estimate_s: float, hosts: int) -> Any:
    from tqdm.auto import tqdm

    bar = tqdm(total=total, disable=not progress, unit="run", desc=name,
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}] {postfix}")
    bar.set_postfix_str(f"plan ~{format_duration(estimate_s)} on {hosts} host(s)")
    return bar


class _StudySession:
    """What one session of :func:`run_study` gives its fleet (connect a worker's hosts and calibrate, measure
    a run, count a result, a lease per block, the media again on a new lease) and the rounds it runs."""

    def __init__(self, study: Study, specs: Sequence[HostSpec], campaign: int, work: _SessionWork,
                 report: RunProgress, on_interval: IntervalCallback | None, bar: Any) -> None:
        self.study, self.exp, self.store = study, study.experiment, study.store
        self.specs, self.campaign, self.work = specs, campaign, work
        self.report, self.on_interval, self.bar = report, on_interval, bar
        self.lock = threading.Lock()
        self.fresh_for = dataset_token(self.exp, self.store, campaign)

    def connect(self, w: Worker) -> None:
        exp, store = self.exp, self.store
        w.ctx = connect_host(w.spec, exp, store)
        w.host = w.ctx.host
        if exp.topology.hosts:  # the other nodes' hosts of a cluster spread over the inventory
            w.peers = {n: connect_host(self.study.inventory.host(n), exp, store)
                       for n in dict.fromkeys(exp.topology.hosts[1:]) if n != w.spec.name}
        if exp.topology.calibrate is not None:
            calibrate_followers(w, exp, store, self.campaign)

    def execute(self, w: Worker, run: PlannedRun) -> RunRecord:
        self.bar.set_postfix_str(f"{run.run_id} @ {w.spec.name}" if len(self.specs) > 1 else run.run_id)

        def measure() -> RunRecord:
            return run_or_record(w.ctx, self.exp, run, self.store, w.datasets, w.peers, self.on_interval,
                                 fresh_for=self.fresh_for)

        return measure_bracketed(w.ctx, run, self.store, measure) if brackets(self.exp) else measure()

    def on_result(self, w: Worker, m: RunRecord) -> None:
        with self.lock:
            self.work.counts.count(m.status)
            self.work.counts.adaptive += m.adaptive
            self.bar.update(1)
            self.report.run_done(outcome_of(m))

    def lease_request(self, w: Worker, block: int) -> Any:  # one allocation per block (run.leasing)
        mine = [r for r in self.work.pending if r.block == block]
        return block_request(self.exp, self.study.inventory, block, w.spec.name,
                             summarize_plan(self.exp, mine, hosts=[w.spec.name]).estimated_s if mine else 0.0)

    def on_lease(self, w: Worker) -> None:
        """A new lease of a host set up before: its media again (a scheduler's epilog may unmount them)."""
        for c in [w.ctx, *w.peers.values()]:
            c.media.update(prepare_media(c.host, c.spec, self.exp))

    def sentinel(self, fleet: Fleet, position: str) -> None:
        """The campaign's opening or closing A/A sentinel run, when due (:mod:`dbmatrix.run.sentinel_runs`),
        on the first live host; its runs are kept apart from the design and never stop the matrix."""
        run = sentinel_due(self.exp, self.store, self.campaign, position, self.work.plan)
        if run is None or fleet.halted:
            return
        if fleet.leased:
            print(f"{self.exp.name}: sentinel {position}: not run (hosts leased per block)", flush=True)
            return
        fleet.connect_all()
        live = fleet.alive()
        if not live or live[0].ctx is None:
            return
        w = live[0]
        try:
            m = run_or_record(w.ctx, self.exp, run, sentinel_store(self.store, self.campaign), w.datasets,
                              w.peers, fresh_for=self.fresh_for)
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:  # noqa: BLE001 - the sentinel is a check beside the design, never its end
            print(f"{self.exp.name}: sentinel {position} ({run.cell.cell_id}) failed: {type(exc).__name__}: {exc}",
                  flush=True)
            return
        tps = (m.summary or {}).get("tps") if m.ok else None
        print(f"{self.exp.name}: sentinel {position} ({run.cell.cell_id}) {m.status}"
              + (f" {float(tps):.1f} tps" if tps is not None else f": {m.error}"), flush=True)
        if m.ok:  # the server has stopped: the platform alone, the same fixed work at both ends
            probe = probe_after_sentinel(w.ctx, run, sentinel_store(self.store, self.campaign))
            print(f"{self.exp.name}: sentinel {position}: {probe_line(probe)}", flush=True)

    def rounds(self, fleet: Fleet, next_round: Callable[[int], list[PlannedRun]] | None) -> list[PlannedRun]:
        """The campaign's opening sentinel run (if due), the pending closed-loop runs, then the open-loop
        ones (they need the closed-loop rates), then the rounds `next_round` adds while every run so far was
        measured, then the closing sentinel run (if due); returns the runs not measured."""
        self.sentinel(fleet, START)
        left = self._design_rounds(fleet, next_round)
        if not left:
            self.sentinel(fleet, END)
        return left

    def _design_rounds(self, fleet: Fleet, next_round: Callable[[int], list[PlannedRun]] | None
                       ) -> list[PlannedRun]:
        pending, assignment = self.work.pending, self.work.assignment
        left = fleet.run([r for r in pending if not r.cell.open_loop], assignment)
        if not fleet.halted:
            left += fleet.run([r for r in pending if r.cell.open_loop], assignment)
        if next_round is None or left or fleet.halted:
            return left
        while (live := [w.spec.name for w in fleet.alive()]) and (extra := next_round(self.campaign)):
            self.bar.total += len(extra)
            self.bar.refresh()
            self.report.add_runs(len(extra))
            left += fleet.run(extra, assign_runs(extra, {}, live))
            if left:
                break
        return left


def _close_fleet(fleet: Fleet) -> None:
    """Close every worker's host connections (its cluster peers' too), then the fleet."""
    for w in fleet.workers:
        for c in [w.ctx, *w.peers.values()]:
            if c is not None:
                c.close()
        for peer in w.peers.values():
            peer.host.close()
    fleet.close()


def _tally(counts: RunReport, fleet: Fleet, left: list[PlannedRun], *, several_hosts: bool,
           allow_lost_hosts: bool) -> None:
    """The session's end in the counts: the runs not measured and why, the hosts lost, the blocks moved and,
    with several hosts or a lost one, each host's tally."""
    if left:
        counts.not_run = {r.run_id: fleet.not_run.get(r.run_id, "not attempted") for r in left}
    lost = {w.spec.name: str(w.lost) for w in fleet.workers if w.lost}
    if lost:
        counts.lost_hosts = lost
        counts.lost_hosts_allowed = allow_lost_hosts
    if fleet.moves:
        counts.blocks_moved = list(fleet.moves)
    if several_hosts or lost:
        counts.hosts = fleet.summary()


def calibrate_followers(w: Worker, exp: Experiment, store: ResultStore, campaign: int) -> dict[str, Any]:
    """The campaign's calibration of the followers' throttled medium on the worker's hosts
    (:mod:`dbmatrix.run.calibration`): its runs go through the study's own run path."""
    cal = exp.topology.calibrate
    assert cal is not None

    def set_limit(value: int) -> None:
        if cal.cpu:  # every follower's own cgroup, on every host of the cluster (run.galera joins them)
            names = [cpulimit.follower_group(i) for i in range(2, exp.topology.nodes + 1)]
            for c in [w.ctx, *w.peers.values()]:
                cpulimit.set_cpu_limit(c.host, cpulimit.detect_cpu_layout(c.host), names, value)
            return
        for c in [w.ctx, *w.peers.values()]:
            state = c.media.get(cal.medium)
            if state is None:
                continue
            if isinstance(state, Exception):
                raise state
            c.media[cal.medium] = media.set_throttle_limit(c.host, state, cal.limit, value)

    def run(cexp: Experiment, planned: PlannedRun, sub: ResultStore) -> RunRecord:
        return run_or_record(w.ctx, cexp, planned, sub, w.datasets, w.peers,
                             fresh_for=dataset_token(exp, store, campaign))

    return calibration.calibrate(exp, store, campaign, w.ctx.media, set_limit, run)


def lost_hosts_message(counts: RunReport) -> str | None:
    """The line a command prints when hosts were lost (None: none was), naming them and what to do."""
    lost = counts.lost_hosts
    if not lost:
        return None
    names = ", ".join(f"{h} ({why})" for h, why in sorted(lost.items()))
    left = counts.not_attempted
    if counts.lost_hosts_allowed:
        return (f"lost host(s): {names}; allowed (--allow-lost-hosts): {len(counts.blocks_moved)} "
                f"whole block(s) moved to other hosts, {left} run(s) not run")
    return (f"lost host(s): {names}; the line stopped with {left} run(s) not run. Fix the host and run again "
            "(completed runs are kept), or pass --allow-lost-hosts to let the other hosts take its whole "
            "blocks")


def adaptive_runs(store: ResultStore, exp: Experiment, campaign: int = 1) -> list[PlannedRun]:
    """The next round of the adaptive mode within `campaign`: one more repetition of every cell whose CI
    (over that campaign's runs) is still too wide (until the cap); empty when every cell meets the target
    or reached the cap."""
    from dbmatrix.analyse.stats import adaptive_additions

    runs = store.load_runs()
    if not runs.empty:
        runs = runs[runs["campaign"] == campaign]
    target, cap = exp.noise.target_halfwidth_pct, exp.noise.max_repetitions
    if runs.empty or target is None or cap is None:
        return []
    more = adaptive_additions(runs, target, cap)
    cells = exp.cells()
    by_id = {c.cell_id: c for c in cells}
    done = runs.groupby("cell_id")["repetition"].max().to_dict()
    manifests = [m for m in store.records() if m.campaign == campaign]
    attempted = {m.run_id for m in manifests}
    first_order = len(cells) * exp.repetitions + sum(m.adaptive for m in manifests) + 1
    extra: list[PlannedRun] = []
    for cell_id in sorted(more):
        if more[cell_id] <= 0 or cell_id not in by_id:
            continue
        rep = int(done.get(cell_id, exp.repetitions)) + 1
        while PlannedRun(by_id[cell_id], rep, rep, 0, campaign=campaign).run_id in attempted:
            rep += 1  # a failed adaptive attempt is not retried forever: move on to the next number
        if rep > cap:
            continue
        extra.append(PlannedRun(by_id[cell_id], rep, rep, first_order + len(extra), adaptive=True,
                                campaign=campaign))
    return extra


def time_accounting(store: ResultStore) -> dict[str, float]:
    """Seconds spent per step over all recorded runs (failed ones too) and dataset preparation:
    how much of the wall time was measurement."""
    steps: dict[str, float] = {}
    for m in store.records():
        for step, secs in m.steps.items():
            steps[step] = steps.get(step, 0.0) + float(secs)
    ds = store.root / "datasets"
    prepare = sum(json.loads(p.read_text()).get("prepare_s", 0.0) for p in ds.glob("*/*.json")) \
        if ds.is_dir() else 0.0
    total = sum(steps.values()) + prepare
    out = {f"{k}_s": round(v, 3) for k, v in sorted(steps.items())}
    out.update(prepare_datasets_s=round(prepare, 3), total_s=round(total, 3),
               measure_fraction=round(steps.get("measure", 0.0) / total, 4) if total else 0.0)
    return out


def lost_hosts(store: ResultStore) -> dict[str, str]:
    """Hosts whose last fleet event is ``host_lost`` (host -> reason): lost in the last run command and
    not seen ready since."""
    path = store.root / "fleet-events.jsonl"
    state: dict[str, str | None] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "host_ready":
                state[e.get("host")] = None
            elif e.get("event") == "host_lost":
                state[e.get("host")] = str(e.get("reason"))
    return {h: why for h, why in sorted(state.items()) if why is not None and h}


def campaign_table(store: ResultStore, states: Sequence[CampaignState]) -> list[dict[str, Any]]:
    """One row per campaign: its runs, completeness, boots and times (from its record, when it has one)."""
    recs = {int(r["campaign"]): r for r in store.campaigns()}
    return [{"campaign": s.number, "complete": s.complete, "planned": s.planned, "ok": s.ok, "failed": s.failed,
             "boot_ids": list(s.boot_ids) or list(recs.get(s.number, {}).get("boot_ids") or []),
             "started_utc": recs.get(s.number, {}).get("started_utc"),
             "finished_utc": recs.get(s.number, {}).get("finished_utc"), "recorded": s.number in recs}
            for s in states]


def campaign_lines(study: Study, plan_note: bool = False) -> list[str]:
    """What `dbmatrix plan` and `status` print about the campaigns of the study's results directory
    (`plan_note`: say that the run ids of the plan printed above are campaign 1's)."""
    states = campaign_states_of(study.store, study.experiment)
    lines = [f"  {s.describe()}" for s in states] or ["  no campaign yet"]
    note = (" (run ids above are campaign 1's; campaign k >= 2 appends -camp<k> and shuffles with its own "
            "seed)") if plan_note else ""
    exp = study.experiment
    auto = choose("auto", states, exp.campaign_maximum)
    later = []
    sentinels = len(sentinel_runs_left(exp, study.store, auto.number))
    with_sentinel = f" ({sentinels} of them the A/A sentinel's)" if sentinels else ""
    if exp.repetitions_in(auto.number) != exp.repetitions:
        n, runs, est = next_campaign(study)
        later = [f"  campaign {n} runs {exp.repetitions_in(n)} per cell (campaigns.repetitions; the pilot ran "
                 f"{exp.repetitions}): {runs} runs{with_sentinel}, estimated {format_duration(est)}"]
    elif sentinels:
        later = [f"  campaign {auto.number} adds {sentinels} A/A sentinel run(s) to its design runs"]
    changes = platform_changes(platforms_by_campaign(states))
    if changes:
        lines += [f"  {c}" for c in changes]
    elif len(states) > 1 and (same := platform_summary(platforms_by_campaign(states))):
        lines.append(f"  platform: the same in every campaign ({same})")
    return [f"campaigns in {study.store.root}{note}:", *lines,
            f"  --campaign auto would run {auto.line()}",
            f"  --campaign last would run {choose('last', states).line()}", *later]


def next_campaign(study: Study) -> tuple[int, int, float]:
    """The campaign ``--campaign auto`` would run: its number, its runs still to do and their estimated wall
    time (a later campaign runs ``campaigns.repetitions`` per cell, the first the spec's ``repetitions``)."""
    exp, store = study.experiment, study.store
    n = choose("auto", campaign_states_of(store, exp), exp.campaign_maximum).number
    pending = [r for r in exp.plan(n) if store.status(r.run_id) != "ok"]
    sentinels = sentinel_runs_left(exp, store, n)
    probes = len(sentinels) + (2 * len(pending) if brackets(exp) else 0)  # after a sentinel run; around a long one
    pending += sentinels
    est = summarize_study(study, pending).estimated_wall_s if pending else 0.0
    return n, len(pending), est + PROBE_S * probes


def study_status(study: Study) -> StudyStatus:
    """Counts of done/failed/pending runs of the latest campaign and the estimated time left, in total and
    per host (see :class:`StudyStatus`)."""
    exp, store = study.experiment, study.store
    states = campaign_states_of(store, exp)
    current = choose("last", states)
    plan = exp.plan(current.number)
    statuses = {r.run_id: store.status(r.run_id) for r in plan}
    pending = [r for r in plan if statuses[r.run_id] != "ok"]
    failed = sorted(k for k, v in statuses.items() if v == "failed")
    summary = summarize_study(study, pending) if pending else None
    hosts = plan_hosts(study)
    assignment = assign_runs(plan, study_assignment(study, hosts), hosts)
    ran_on: dict[str, str] = {}
    busy: dict[str, float] = {}
    for m in store.records():
        if m.campaign != current.number:
            continue
        h = str(m.host)
        ran_on[m.run_id] = h
        busy[h] = busy.get(h, 0.0) + float(m.duration_s or sum(m.steps.values()))
    per_host: dict[str, dict[str, Any]] = {}
    for h in dict.fromkeys([*hosts, *sorted(busy)]):
        mine = [r.run_id for r in plan if ran_on.get(r.run_id, assignment.get(r.run_id)) == h]
        per_host[h] = {
            "planned": sum(assignment.get(r) == h for r in statuses),
            "ok": sum(statuses[r] == "ok" for r in mine), "failed": sum(statuses[r] == "failed" for r in mine),
            "pending": sum(statuses[r] is None for r in mine), "busy_s": round(busy.get(h, 0.0), 1),
            "estimated_remaining_s": (summary.estimated_s_per_host.get(h, 0.0) if summary else 0.0),
        }
    lost = lost_hosts(store)
    return StudyStatus(
        results_dir=str(store.root), experiment=exp.name, campaign=current.number,
        campaigns=campaign_table(store, states),
        next_auto=choose("auto", states, exp.campaign_maximum).line(),
        planned=len(plan),
        ok=sum(v == "ok" for v in statuses.values()), failed=failed,
        pending=sum(v is None for v in statuses.values()),
        estimated_remaining_s=summary.estimated_wall_s if summary else 0.0,
        estimated_remaining_machine_s=summary.estimated_s if summary else 0.0,
        hosts=hosts, per_host=per_host,
        busy_s_total=round(sum(busy.values()), 1), lost_hosts=lost,
        host_check=_host_check_line(store),
    )


def _host_check_line(store: ResultStore) -> str | None:
    """The host check of the last analysis (processed/hosts.csv), as one line; None without one."""
    path = store.processed / "hosts.csv"
    if not path.is_file() or path.stat().st_size <= 1:
        return None
    import pandas as pd

    from dbmatrix.analyse.hosts import host_check_line

    return host_check_line(pd.read_csv(path))
