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
from dbmatrix.run.fleet import Fleet, Worker
from dbmatrix.run.session import record_early_failure
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
        return {"run_id": run.run_id, "status": "ok", **self._commit(staging, run, w)}

    def _commit(self, staging: Path, run: PlannedRun, w: Worker) -> dict[str, Any]:
        m = {"run_id": run.run_id, "status": "ok", "host": w.spec.name}
        self.store.commit_run(staging, m)
        return m


def _fleet(tmp_path: Path, names: list[str], rec: Recorder) -> Fleet:
    specs = [HostSpec(n, workdir=str(tmp_path / n)) for n in names]
    return Fleet(specs, EXP, rec.store, rec.connect, rec.execute)


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
    m = store.manifest(h1_runs[0])
    assert m["status"] == "failed" and m["host_lost"] and m["error"].startswith("host h1 dropped out")
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


def _events(store: ResultStore) -> list[dict[str, Any]]:
    p = store.root / "fleet-events.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines()] if p.is_file() else []


@pytest.fixture(autouse=True)
def _no_leftover_threads():
    before = set(threading.enumerate())
    yield
    assert not [t for t in threading.enumerate() if t not in before and t.name.startswith("fleet-")]
