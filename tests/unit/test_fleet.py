"""The fleet scheduler: every run measured once, hosts exclusive, parallel, lost hosts retired.

Execution is a function here (the real run path is covered by tests/integration/test_fleet_matrix.py);
what is tested is the scheduling: queue, threads, host loss, events and what stays pending.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.record import RunRecord
from dbmatrix.run.fleet import Fleet, Worker
from dbmatrix.run.session import record_early_failure
from dbmatrix.spec.assignment import assign_blocks, assign_runs
from dbmatrix.spec.experiment import PlannedRun, parse_experiment
from dbmatrix.store import ResultStore


def unreachable_host(name: str) -> ScriptedHost:
    """A host whose connection is gone: every command and copy fails the way a dropped SSH link does."""
    host = ScriptedHost(name, is_local=False)
    host.on(r"", raises=EOFError(f"{name}: connection closed"))
    return host


EXP = parse_experiment({"experiment": "fleet-unit", "factors": {"cache_pct": [25, 50, 75, 100],
                                                                 "threads": [1, 2]},
                        "repetitions": 2, "warmup_s": 0, "measure_s": 1})


class Recorder:
    def __init__(self, store: ResultStore, dead: set[str] = frozenset(), slow_s: float = 0.05):
        self.store, self.dead, self.slow_s = store, dead, slow_s
        self.calls: list[tuple[str, str]] = []
        self.active: dict[str, int] = {}
        self.max_parallel = 0
        self.lock = threading.Lock()

    def connect(self, w: Worker) -> None:
        if w.spec.name == "refuses":
            raise ConnectionRefusedError("no route to host")
        w.host = unreachable_host(w.spec.name) if w.spec.name in self.dead else LocalHost(w.spec.name)
        w.ctx = object()

    def execute(self, w: Worker, run: PlannedRun) -> dict[str, Any]:
        with self.lock:
            self.calls.append((w.spec.name, run.run_id))
            self.active[w.spec.name] = self.active.get(w.spec.name, 0) + 1
            assert self.active[w.spec.name] == 1, "a host measured two runs at once"
            self.max_parallel = max(self.max_parallel, sum(self.active.values()))
        time.sleep(self.slow_s)
        with self.lock:
            self.active[w.spec.name] -= 1
        if w.spec.name in self.dead:
            return record_early_failure(self.store, EXP, run, w.spec.name, "measure",
                                         EOFError("connection closed"))
        staging = self.store.begin_run(run.run_id)
        return self._commit(staging, run, w)

    def _commit(self, staging: Path, run: PlannedRun, w: Worker) -> RunRecord:
        m = RunRecord(run_id=run.run_id, experiment=EXP.name, cell_id=run.cell.cell_id, cell=run.cell.levels(),
                      repetition=run.repetition, host=w.spec.name, status="ok")
        self.store.commit_run(staging, m)
        return m


def _fleet(tmp_path: Path, names: list[str], rec: Recorder, allow_lost: bool = True) -> Fleet:
    specs = [HostSpec(n, workdir=str(tmp_path / n)) for n in names]
    return Fleet(specs, EXP, rec.store, rec.connect, rec.execute, allow_lost=allow_lost)


def test_runs_spread_over_hosts_each_once_and_in_parallel(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store)
    fleet = _fleet(tmp_path, ["h1", "h2"], rec)
    runs = EXP.plan()
    left = fleet.run(runs)
    assert left == []
    assert sorted(r for _, r in rec.calls) == sorted(r.run_id for r in runs)
    per_host = {h: sum(1 for x, _ in rec.calls if x == h) for h in ("h1", "h2")}
    assert per_host["h1"] > 0 and per_host["h2"] > 0
    assert rec.max_parallel == 2
    assert all(store.status(r.run_id) == "ok" for r in runs)
    assert {e["event"] for e in _events(store)} == {"host_ready"}


def test_host_that_cannot_be_reached_at_setup_drops_out(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store)
    fleet = _fleet(tmp_path, ["refuses", "h2"], rec)
    assert fleet.run(EXP.plan()) == []
    assert {h for h, _ in rec.calls} == {"h2"}
    lost = [e for e in _events(store) if e["event"] == "host_lost"]
    assert lost[0]["host"] == "refuses" and "ConnectionRefusedError" in lost[0]["reason"]
    assert fleet.summary()["refuses"]["lost"].startswith("setup failed")


def test_host_lost_mid_matrix_is_retired_and_its_run_marked(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store, dead={"h1"})
    fleet = _fleet(tmp_path, ["h1", "h2"], rec)
    runs = EXP.plan()
    assert fleet.run(runs) == []
    h1_runs = [r for h, r in rec.calls if h == "h1"]
    assert len(h1_runs) == 1  # retired after its first failed run: the health check failed
    m = store.record(h1_runs[0])
    assert m is not None and m.failed and m.host_lost and str(m.error).startswith("host h1 dropped out")
    ok = [r.run_id for r in runs if store.status(r.run_id) == "ok"]
    assert len(ok) == len(runs) - 1
    assert [e["run_id"] for e in _events(store) if e["event"] == "host_lost"] == h1_runs


def test_when_every_host_is_lost_the_rest_stays_pending(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store, dead={"h1", "h2"})
    fleet = _fleet(tmp_path, ["h1", "h2"], rec)
    runs = EXP.plan()
    left = fleet.run(runs)
    assert len(left) == len(runs) - 2
    assert not fleet.alive()
    assert all(store.status(r.run_id) is None for r in left)


def test_one_host_runs_in_the_calling_thread(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    seen = []
    rec = Recorder(store, slow_s=0)
    orig = rec.execute

    def execute(w: Worker, run: PlannedRun) -> dict[str, Any]:
        seen.append(threading.current_thread() is threading.main_thread())
        return orig(w, run)

    fleet = Fleet([HostSpec("solo", workdir=str(tmp_path))], EXP, store, rec.connect, execute)
    fleet.run(EXP.plan()[:3])
    assert seen == [True, True, True]


EXP4 = parse_experiment({"experiment": "fleet-unit4", "factors": {"cache_pct": [25, 100], "threads": [1, 2]},
                         "repetitions": 4, "warmup_s": 0, "measure_s": 1})


def _assignment(hosts: list[str], exp=EXP4) -> tuple[dict[int, str], dict[str, str]]:
    blocks = assign_blocks(range(1, exp.repetitions + 1), hosts, exp.seed)
    return blocks, assign_runs(exp.plan(), blocks, hosts)


def test_each_host_measures_only_its_own_blocks_in_plan_order(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store, slow_s=0.01)
    fleet = _fleet(tmp_path, ["h1", "h2"], rec, allow_lost=False)
    blocks, assignment = _assignment(["h1", "h2"])
    runs = EXP4.plan()
    assert fleet.run(runs, assignment) == []
    by_id = {r.run_id: r for r in runs}
    for h in ("h1", "h2"):
        mine = [by_id[r] for x, r in rec.calls if x == h]
        assert {r.block for r in mine} == {b for b, x in blocks.items() if x == h}
        assert [r.order for r in mine] == sorted(r.order for r in mine)  # the seeded order, block after block
        assert len(mine) == 8  # two whole blocks of four cells each
    assert rec.max_parallel == 2


def test_a_host_lost_at_setup_stops_the_line_before_any_run(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store)
    fleet = _fleet(tmp_path, ["refuses", "h2"], rec, allow_lost=False)
    _, assignment = _assignment(["refuses", "h2"])
    runs = EXP4.plan()
    left = fleet.run(runs, assignment)
    assert rec.calls == [] and len(left) == len(runs) and fleet.halted
    assert set(fleet.not_run) == {r.run_id for r in runs}
    events = [e["event"] for e in _events(store)]
    assert "host_lost" in events and "line_stopped" in events
    assert fleet.summary()["refuses"]["lost"].startswith("setup failed: ConnectionRefusedError")


def test_allowed_lost_host_at_setup_hands_its_whole_blocks_to_the_others(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store, slow_s=0.01)
    fleet = _fleet(tmp_path, ["refuses", "h2"], rec, allow_lost=True)
    blocks, assignment = _assignment(["refuses", "h2"])
    assert fleet.run(EXP4.plan(), assignment) == []
    assert {h for h, _ in rec.calls} == {"h2"} and len(rec.calls) == 16
    assert sorted(m["block"] for m in fleet.moves) == sorted(b for b, h in blocks.items() if h == "refuses")
    assert all(m["from"] == "refuses" and m["to"] == "h2" for m in fleet.moves)
    assert [e["block"] for e in _events(store) if e["event"] == "block_moved"] == [m["block"] for m in fleet.moves]


def test_allowed_host_lost_mid_block_keeps_the_started_block_and_moves_the_unstarted(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    rec = Recorder(store, dead={"h1"}, slow_s=0.01)
    fleet = _fleet(tmp_path, ["h1", "h2"], rec, allow_lost=True)
    blocks, assignment = _assignment(["h1", "h2"])
    runs = EXP4.plan()
    left = fleet.run(runs, assignment)
    h1_blocks = sorted(b for b, h in blocks.items() if h == "h1")
    first = next(r for r in runs if r.block in h1_blocks)  # the block h1 started and lost
    assert [r for h, r in rec.calls if h == "h1"] == [first.run_id]
    assert {r.block for r in left} == {first.block} and len(left) == 3  # the rest of the half-done block
    assert all("started on lost host h1" in fleet.not_run[r.run_id] for r in left)
    assert [m["block"] for m in fleet.moves] == [b for b in h1_blocks if b != first.block]
    assert len([r for h, r in rec.calls if h == "h2"]) == 12  # its own two blocks and the moved one


def test_a_host_lost_mid_matrix_stops_the_line_unless_allowed(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "res")
    # h2's runs take long enough that h1's loss reaches the line before h2 starts a third one, on a loaded
    # machine too (at 0.05 s a run, three xdist workers beside servers let h2 start three)
    rec = Recorder(store, dead={"h1"}, slow_s=0.3)
    fleet = _fleet(tmp_path, ["h1", "h2"], rec, allow_lost=False)
    _, assignment = _assignment(["h1", "h2"])
    runs = EXP4.plan()
    left = fleet.run(runs, assignment)
    assert fleet.halted and fleet.summary()["h1"]["lost"]
    assert len([1 for h, _ in rec.calls if h == "h2"]) <= 2  # h2 finished what it was measuring, then stopped
    assert len(left) == len(runs) - len(rec.calls)
    assert all(store.status(r.run_id) is None for r in left)


def _events(store: ResultStore) -> list[dict[str, Any]]:
    p = store.root / "fleet-events.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines()] if p.is_file() else []


@pytest.fixture(autouse=True)
def _no_leftover_threads():
    before = set(threading.enumerate())
    yield
    assert not [t for t in threading.enumerate() if t not in before and t.name.startswith("fleet-")]
