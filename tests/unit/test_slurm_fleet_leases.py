"""The fleet with a leaser (run.leasing): one lease per replicate block, hosts set up under their lease,
leases given back, a lost lease is a lost host, Ctrl-C cancels every lease. A fake leaser stands in for
Slurm (the real one: tests/integration/test_slurm_fleet.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.record import RunRecord
from dbmatrix.run.fleet import Fleet, Worker
from dbmatrix.run.leasing import Lease, LeaseFailed, LeaseRequest, lease_record
from dbmatrix.spec.assignment import assign_runs
from dbmatrix.spec.experiment import PlannedRun, parse_experiment
from dbmatrix.store import ResultStore

EXP = parse_experiment({"experiment": "lease-unit", "factors": {"cache_pct": [50, 100]}, "repetitions": 4,
                        "warmup_s": 0, "measure_s": 1})


class FakeLeaser:
    scheduler = "fake"

    def __init__(self, refuse: set[str] = frozenset(), lose_after: dict[int, str] | None = None,
                 end_during: set[int] = frozenset()):
        self.refuse, self.lose_after, self.end_during = refuse, lose_after or {}, end_during
        self.events: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.cancelled = 0
        self.checks: dict[int, int] = {}

    def lease(self, request: LeaseRequest) -> Lease:
        with self.lock:
            self.events.append(("lease", request.block))
        if request.hosts[0] in self.refuse:  # e.g. the node lacks a feature
            raise LeaseFailed("refused")
        return Lease(request, request.hosts, lease_record("fake", f"j{request.block}", request.hosts, "p", "a",
                                                          {"State": "RUNNING"}), job_id=f"j{request.block}")

    def lost(self, lease: Lease) -> str | None:
        with self.lock:
            self.checks[lease.block] = n = self.checks.get(lease.block, 0) + 1
        if lease.block in self.end_during:  # the first check: after the block's first run
            return "job CANCELLED"
        return self.lose_after.get(lease.block) if n >= 2 else None

    def ended(self, lease: Lease) -> bool:
        return lease.block in self.end_during

    def release(self, lease: Lease) -> None:
        with self.lock:
            self.events.append(("release", lease.block))
        assert lease.record is not None
        lease.record["sacct"] = {"State": "CANCELLED"}

    def cancel_all(self) -> None:
        self.cancelled += 1

    def describe(self, request: LeaseRequest) -> str:
        return f"fake block {request.block}"


class Runner:
    def __init__(self, store: ResultStore, leaser: FakeLeaser, interrupt_at: str | None = None):
        self.store, self.leaser, self.interrupt_at = store, leaser, interrupt_at
        self.connected: list[tuple[str, list[tuple[str, int]]]] = []
        self.calls: list[tuple[str, str]] = []

    def connect(self, w: Worker) -> None:
        self.connected.append((w.spec.name, list(self.leaser.events)))
        w.host, w.ctx = LocalHost(w.spec.name), object()

    def execute(self, w: Worker, run: PlannedRun) -> RunRecord:
        if run.run_id == self.interrupt_at:
            raise KeyboardInterrupt
        self.calls.append((w.spec.name, run.run_id))
        m = RunRecord(run_id=run.run_id, experiment=EXP.name, cell_id=run.cell.cell_id, cell=run.cell.levels(),
                      repetition=run.repetition, host=w.spec.name, block=run.block, status="ok")
        self.store.commit_run(self.store.begin_run(run.run_id), m)
        return m


def _fleet(tmp_path: Path, leaser: FakeLeaser, names=("h1", "h2"), allow_lost=False, interrupt_at=None):
    store = ResultStore(tmp_path / "res")
    runner = Runner(store, leaser, interrupt_at)
    specs = [HostSpec(n, workdir=str(tmp_path / n)) for n in names]
    fleet = Fleet(specs, EXP, store, runner.connect, runner.execute, allow_lost=allow_lost, leaser=leaser,
                  lease_request=lambda w, b: LeaseRequest(b, (w.spec.name,), (), 60, f"dbmatrix-x-b{b}"))
    runs = EXP.plan()
    return fleet, runner, store, runs, assign_runs(runs, {1: "h1", 2: "h2", 3: "h1", 4: "h2"}, list(names))


def test_one_lease_per_block_hosts_set_up_under_it_and_given_back(tmp_path: Path) -> None:
    leaser = FakeLeaser()
    fleet, runner, store, runs, assignment = _fleet(tmp_path, leaser)
    left = fleet.run(runs, assignment)
    fleet.close()
    assert left == [] and len(runner.calls) == 8
    assert sorted(b for e, b in leaser.events if e == "lease") == [1, 2, 3, 4]
    assert sorted(b for e, b in leaser.events if e == "release") == [1, 2, 3, 4]
    for name, seen in runner.connected:  # set up only once it held its first lease
        assert ("lease", 1 if name == "h1" else 2) in seen
    for m in store.records():  # every run carries its block's lease with the final accounting
        assert m.lease is not None and m.lease.job_id == f"j{m.block}" and m.lease.sacct == {"State": "CANCELLED"}
    assert sorted(x["block"] for x in fleet.leases) == [1, 2, 3, 4]
    assert leaser.cancelled == 1  # close() cancels anything still waiting


def test_a_lease_lost_between_runs_stops_the_line(tmp_path: Path) -> None:
    leaser = FakeLeaser(lose_after={2: "Slurm node h2 is draining"})
    fleet, runner, store, runs, assignment = _fleet(tmp_path, leaser)
    left = fleet.run(runs, assignment)
    fleet.close()
    assert fleet.halted and fleet.summary()["h2"]["lost"] == "lease lost: Slurm node h2 is draining"
    assert ("release", 2) in leaser.events
    ran = [h for h, _ in runner.calls]
    assert ran.count("h2") == 1 and left  # the run under way counts (ok), nothing more started on h2
    assert all(m.ok for m in store.records())


def test_an_allocation_that_ended_during_a_run_fails_the_run(tmp_path: Path) -> None:
    leaser = FakeLeaser(end_during={2})
    fleet, _runner, store, runs, assignment = _fleet(tmp_path, leaser, allow_lost=True)
    fleet.run(runs, assignment)
    fleet.close()
    failed = [m for m in store.records() if not m.ok]
    assert len(failed) == 1 and failed[0].failed_step == "lease" and failed[0].host_lost
    assert failed[0].host == "h2" and "allocation ended during the run" in str(failed[0].error)
    assert fleet.moves == [{"block": 4, "from": "h2", "to": "h1"}]  # its unstarted block moved


def test_a_refused_lease_is_a_lost_host_whose_unstarted_blocks_move_when_allowed(tmp_path: Path) -> None:
    leaser = FakeLeaser(refuse={"h2"})
    fleet, runner, _store, runs, assignment = _fleet(tmp_path, leaser, allow_lost=True)
    left = fleet.run(runs, assignment)
    fleet.close()
    assert left == [] and {h for h, _ in runner.calls} == {"h1"}
    assert "no lease for block 2: refused" in str(fleet.summary()["h2"]["lost"])
    assert sorted(m["block"] for m in fleet.moves) == [2, 4]


def test_ctrl_c_cancels_the_leases(tmp_path: Path) -> None:
    leaser = FakeLeaser()
    runs = EXP.plan()
    fleet, _runner, _store, runs, _assignment = _fleet(tmp_path, leaser, names=("h1",),
                                                    interrupt_at=runs[1].run_id)
    with pytest.raises(KeyboardInterrupt):
        try:
            fleet.run(runs, {r.run_id: "h1" for r in runs})
        finally:
            fleet.close()
    assert ("release", 1) in leaser.events and leaser.cancelled >= 1
