"""Run a study's pending runs on every host of the inventory at once.

One worker thread per host takes the next run from a shared queue in plan order, so a host is
exclusive while it measures (one run at a time) and prepares its own datasets and media. Results land
in the one result store on the controller. A host that drops out (its connection or shell stops
answering) is retired: the run it was measuring is recorded as failed with step "host", the event is
logged in ``fleet-events.jsonl``, and the other hosts take the rest of the queue. Runs nobody could
take stay pending, so a rerun resumes them.

Closed-loop runs all finish before open-loop runs start (the open-loop --rate comes from the closed-loop
twin, which another host may still be measuring). Ctrl-C stops every host's in-flight command; the
unfinished runs are discarded as in a single-host run.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import Host, RunInterrupted
from dbmatrix.run.session import record_early_failure
from dbmatrix.spec.experiment import Experiment, PlannedRun
from dbmatrix.store import ResultStore, utc_now

HEALTH_TIMEOUT_S = 20.0


@dataclass
class Worker:
    """One host of the fleet: its connection, its context (made lazily in its thread), its tally."""

    spec: HostSpec
    host: Host | None = None
    ctx: Any = None  # run.context.HostContext once connected
    datasets: dict[str, Any] = field(default_factory=dict)
    peers: dict[str, Any] = field(default_factory=dict)  # other nodes' hosts of a spread Galera cluster
    lost: str | None = None  # why the host was retired
    done: int = 0
    busy_s: float = 0.0


def host_alive(host: Host) -> bool:
    """Does the host still run a trivial command? (After a failed run: was it the host or the run?)"""
    try:
        return host.run("true", check=False, timeout=HEALTH_TIMEOUT_S).ok
    except Exception:  # noqa: BLE001 - any error means the host is not usable
        return False


class Fleet:
    """The hosts of one study; `run(runs)` spreads runs over them and returns when all are done."""

    def __init__(self, specs: list[HostSpec], exp: Experiment, store: ResultStore,
                 connect: Callable[[Worker], Any], execute: Callable[[Worker, PlannedRun], dict[str, Any]],
                 on_result: Callable[[Worker, dict[str, Any]], None] | None = None):
        self.workers = [Worker(s) for s in specs]
        self.exp, self.store = exp, store
        self._connect, self._execute = connect, execute
        self._on_result = on_result or (lambda w, m: None)
        self._lock = threading.Lock()
        self._stop = threading.Event()

    # -- events -----------------------------------------------------------------------------------
    def log_event(self, worker: Worker, event: str, **details: Any) -> None:
        line = json.dumps({"utc": utc_now(), "host": worker.spec.name, "event": event, **details},
                          sort_keys=True)
        with self._lock:
            self.store.root.mkdir(parents=True, exist_ok=True)
            with open(self.store.root / "fleet-events.jsonl", "a") as f:
                f.write(line + "\n")

    def _retire(self, worker: Worker, why: str, run_id: str | None = None) -> None:
        worker.lost = why
        self.log_event(worker, "host_lost", reason=why, run_id=run_id)

    # -- scheduling -------------------------------------------------------------------------------
    def alive(self) -> list[Worker]:
        return [w for w in self.workers if w.lost is None]

    def run(self, runs: list[PlannedRun]) -> list[PlannedRun]:
        """Measure `runs` across the live hosts; returns the runs no host could take (all lost)."""
        queue = deque(runs)
        if len(self.alive()) == 1:  # one host: run in this thread (Ctrl-C works as in a plain run)
            self._work(self.alive()[0], queue)
            return list(queue)
        threads = [threading.Thread(target=self._work, args=(w, queue), name=f"fleet-{w.spec.name}",
                                    daemon=True) for w in self.alive()]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)  # short joins keep the main thread responsive to Ctrl-C
        except (KeyboardInterrupt, RunInterrupted):
            self._stop.set()
            for w in self.workers:
                if w.host is not None:
                    w.host.interrupt()
            for t in threads:
                t.join(timeout=60)
            raise
        return list(queue)

    def _next(self, queue: deque[PlannedRun]) -> PlannedRun | None:
        with self._lock:
            return queue.popleft() if queue and not self._stop.is_set() else None

    def _work(self, worker: Worker, queue: deque[PlannedRun]) -> None:
        try:
            self._work_on(worker, queue)
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:
            self._retire(worker, f"worker error: {type(exc).__name__}: {exc}")
            if threading.current_thread() is threading.main_thread():
                raise

    def _work_on(self, worker: Worker, queue: deque[PlannedRun]) -> None:
        if worker.ctx is None and worker.lost is None:
            try:
                self._connect(worker)
                self.log_event(worker, "host_ready", port=getattr(worker.ctx, "port", None))
            except (KeyboardInterrupt, RunInterrupted):
                raise
            except Exception as exc:  # noqa: BLE001 - a host that cannot be prepared drops out
                self._retire(worker, f"setup failed: {type(exc).__name__}: {exc}")
                return
        while worker.lost is None and (run := self._next(queue)) is not None:
            t0 = time.monotonic()
            try:
                manifest = self._execute(worker, run)
            except (KeyboardInterrupt, RunInterrupted):
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the connection broke outside a run step
                manifest = self._record_host_failure(worker, run, exc)
            worker.busy_s += time.monotonic() - t0
            if self._stop.is_set() and manifest.get("status") != "ok":
                # Interrupted by Ctrl-C on the controller: discard, as a single-host run would.
                self.store.forget(run.run_id)
                return
            worker.done += 1
            self._on_result(worker, manifest)
            if manifest.get("status") != "ok" and worker.host is not None and not host_alive(worker.host):
                self._retire(worker, "stopped answering after a failed run", run.run_id)
                self._mark_host_lost(run.run_id, worker.spec.name)

    def _record_host_failure(self, worker: Worker, run: PlannedRun, exc: Exception) -> dict[str, Any]:
        return record_early_failure(self.store, self.exp, run, worker.spec.name, "host", exc)

    def _mark_host_lost(self, run_id: str, host: str) -> None:
        """Say in the failed run's manifest that its host dropped out (so a reader knows why)."""
        m = self.store.manifest(run_id)
        if m is not None and m.get("status") == "failed":
            m["host_lost"] = True
            m["error"] = f"host {host} dropped out: {m.get('error')}"
            self.store.rewrite_manifest(run_id, m)

    def summary(self) -> dict[str, Any]:
        return {w.spec.name: {"runs": w.done, "busy_s": round(w.busy_s, 1), "lost": w.lost}
                for w in self.workers}

    def close(self) -> None:
        for w in self.workers:
            if w.host is not None:
                try:
                    w.host.close()
                except Exception:  # noqa: BLE001 - closing a dead connection
                    traceback.print_exc()
