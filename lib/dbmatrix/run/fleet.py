"""Run a study's pending runs on every host of the inventory at once.

One worker thread per host takes its own runs (the host's replicate blocks,
:mod:`dbmatrix.spec.assignment`) in plan order, so a host is exclusive while it measures (one run at a
time) and prepares its own datasets and media. Results land in the one result store on the controller.

A host that cannot be set up, or drops out (its connection or shell stops answering), is lost: the run
it was measuring is recorded as failed with step "host", the event is logged in ``fleet-events.jsonl``,
and, unless lost hosts are allowed, the line stops (no host starts another run; the command fails and
names the host). With lost hosts allowed, the lost host's whole blocks not yet started move to the live
hosts; the rest of a half-done block is reported as not run. Runs not measured stay pending, so a rerun
resumes them.

Hosts come from a leaser (:mod:`dbmatrix.run.leasing`): the static inventory by default (every host
connected and set up at the start, as always), or a lab's Slurm pool (:mod:`dbmatrix.run.slurm`), where
a worker leases its block's host(s) before the block's first run (one allocation per block), sets the
host up under the lease, checks between runs that the lease holds, and gives it back when it moves on to
another block or the command ends. A lease that ends or whose node leaves service is a lost host, as
above; a run during which the allocation ended is recorded as failed (its host was not exclusive
throughout). Every run measured under a lease carries it in its manifest's ``lease``.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import Host, RunInterrupted
from dbmatrix.record import RunRecord
from dbmatrix.run.leasing import Lease, LeaseFailed, Leaser, LeaseRequest, StaticLeaser, record_lease
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
    lease: Lease | None = None  # the hosts of the block under way (leaser.lease)
    done: int = 0
    ok: int = 0
    failed: int = 0
    busy_s: float = 0.0


def host_alive(host: Host) -> bool:
    """Does the host still run a trivial command? (After a failed run: was it the host or the run?)"""
    try:
        return host.run("true", check=False, timeout=HEALTH_TIMEOUT_S).ok
    except Exception:  # noqa: BLE001 - any error means the host is not usable
        return False


class Fleet:
    """The hosts of one study; `run(runs, assignment)` measures runs on their assigned hosts (or, without
    an assignment, on whichever host is free) and returns when all are done or the line stopped.

    Every host is connected and set up first (in parallel). A host that cannot be set up or stops
    answering is *lost*: with ``allow_lost=False`` (the default) the line stops: no host starts another
    run, the lost host is named in ``fleet-events.jsonl`` and in :meth:`summary`, and what is left is
    returned (and listed in ``not_run`` with the reason). With ``allow_lost=True`` the lost host's whole
    blocks that no run of has started move to the live hosts (:func:`dbmatrix.spec.assignment.reassign_blocks`),
    and the rest of a half-done block is reported as not run, so every host still measures whole blocks."""

    def __init__(self, specs: list[HostSpec], exp: Experiment, store: ResultStore,
                 connect: Callable[[Worker], Any], execute: Callable[[Worker, PlannedRun], RunRecord],
                 on_result: Callable[[Worker, RunRecord], None] | None = None, *,
                 allow_lost: bool = False, leaser: Leaser | None = None,
                 lease_request: Callable[[Worker, int], LeaseRequest] | None = None,
                 on_lease: Callable[[Worker], None] | None = None):
        self.workers = [Worker(s) for s in specs]
        self.leaser: Leaser = leaser or StaticLeaser()
        self._lease_request = lease_request or (lambda w, b: LeaseRequest(b, (w.spec.name,)))
        self._on_lease = on_lease or (lambda w: None)
        self.leases: list[dict[str, Any]] = []  # every lease's record (block, hosts, the scheduler's record)
        self.exp, self.store = exp, store
        self._connect, self._execute = connect, execute
        self._on_result = on_result or (lambda w, m: None)
        self.allow_lost = allow_lost
        self._lock = threading.Lock()
        self._stop = threading.Event()  # Ctrl-C: discard unfinished runs
        self._halt = threading.Event()  # a host was lost and that is not allowed: start no further run
        self._taken_blocks: set[int] = set()
        self.not_run: dict[str, str] = {}  # run_id -> why it was not run
        self.moves: list[dict[str, Any]] = []  # whole blocks moved off lost hosts

    # -- events -----------------------------------------------------------------------------------
    def log_event(self, worker: Worker | None, event: str, **details: Any) -> None:
        line = json.dumps({"utc": utc_now(), "host": worker.spec.name if worker else None, "event": event,
                           **details}, sort_keys=True)
        with self._lock:
            self.store.root.mkdir(parents=True, exist_ok=True)
            with open(self.store.root / "fleet-events.jsonl", "a") as f:
                f.write(line + "\n")

    def _retire(self, worker: Worker, why: str, run_id: str | None = None) -> None:
        worker.lost = why
        self.log_event(worker, "host_lost", reason=why, run_id=run_id)
        if not self.allow_lost and not self._halt.is_set():
            self._halt.set()
            self.log_event(worker, "line_stopped", reason=f"host {worker.spec.name} lost and lost hosts are "
                                                          "not allowed (--allow-lost-hosts)")

    # -- scheduling -------------------------------------------------------------------------------
    def alive(self) -> list[Worker]:
        return [w for w in self.workers if w.lost is None]

    def lost(self) -> list[Worker]:
        return [w for w in self.workers if w.lost is not None]

    @property
    def halted(self) -> bool:
        """The line stopped: a host was lost and lost hosts are not allowed."""
        return self._halt.is_set()

    def connect_all(self) -> None:
        """Connect and set up every host not yet connected (in parallel); a host that fails is lost."""
        todo = [w for w in self.workers if w.ctx is None and w.lost is None]
        if len(todo) <= 1:
            for w in todo:
                self._setup(w)
            return
        self._threads(todo, self._setup)

    def _setup(self, worker: Worker) -> None:
        try:
            self._connect(worker)
            self.log_event(worker, "host_ready", port=getattr(worker.ctx, "port", None))
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:  # noqa: BLE001 - a host that cannot be prepared drops out
            self._retire(worker, f"setup failed: {type(exc).__name__}: {exc}")

    def _threads(self, workers: list[Worker], target: Callable[..., None], *args: Any) -> None:
        threads = [threading.Thread(target=target, args=(w, *args), name=f"fleet-{w.spec.name}", daemon=True)
                   for w in workers]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)  # short joins keep the main thread responsive to Ctrl-C
        except (KeyboardInterrupt, RunInterrupted):
            self._stop.set()
            self._cancel_leases()  # a salloc still waiting in the queue returns
            for w in self.workers:
                if w.host is not None:
                    w.host.interrupt()
            for t in threads:
                t.join(timeout=60)
            raise

    def run(self, runs: list[PlannedRun], assignment: Mapping[str, str] | None = None) -> list[PlannedRun]:
        """Measure `runs` (each on its host of `assignment`, run_id -> host name; without one, on any
        host); returns the runs not measured (their reasons in ``not_run``)."""
        if not self.leased:  # leased hosts are set up under their lease, in their worker
            self.connect_all()
        if self._halt.is_set():
            self._not_run(runs, "not started: the line stopped (a host was lost)")
            return list(runs)
        if assignment is None:
            queue = deque(runs)
            self._round({w.spec.name: queue for w in self.alive()})
            left = list(queue)
            self._not_run(left, "no live host left" if not self.alive() else "the line stopped")
            return left
        names = {w.spec.name for w in self.workers}
        queues = {n: deque(r for r in runs if assignment.get(r.run_id) == n) for n in names}
        orphans = [r for r in runs if assignment.get(r.run_id) not in names]
        self._not_run(orphans, "assigned to a host that is not in the fleet")
        while True:
            self._round({w.spec.name: queues[w.spec.name] for w in self.alive() if queues[w.spec.name]})
            stranded = {w.spec.name: queues[w.spec.name] for w in self.lost() if queues[w.spec.name]}
            if not stranded or self._halt.is_set() or self._stop.is_set() or not self.alive():
                break
            if not self._move_blocks(stranded, queues):
                break
        left = [r for r in runs if any(r in q for q in queues.values())] + orphans
        lost = {w.spec.name: w.lost for w in self.lost()}
        for r in left:
            host = assignment.get(r.run_id)
            if r.run_id in self.not_run:
                continue
            if host in lost:
                self.not_run[r.run_id] = f"host {host} lost ({lost[host]})"
            else:
                self.not_run[r.run_id] = "not started: the line stopped (a host was lost)"
        return left

    def _not_run(self, runs: list[PlannedRun], why: str) -> None:
        for r in runs:
            self.not_run.setdefault(r.run_id, why)

    def _move_blocks(self, stranded: dict[str, deque[PlannedRun]], queues: dict[str, deque[PlannedRun]]) -> bool:
        """Move the lost hosts' whole unstarted blocks to live hosts; report the rest of a started block
        as not run. True if some block moved (another round is due)."""
        from dbmatrix.spec.assignment import reassign_blocks

        started = {int(m.block) for m in self.store.records() if m.block is not None}
        started |= self._taken_blocks
        block_hosts: dict[int, str] = {}
        for name, q in queues.items():
            for r in q:
                block_hosts.setdefault(r.block, name)
        live = [w.spec.name for w in self.alive()]
        _, moves, stuck = reassign_blocks(block_hosts, set(stranded), started, live)
        for name, q in stranded.items():
            keep: deque[PlannedRun] = deque()
            for r in q:
                if r.block in moves:
                    queues[moves[r.block]].append(r)
                else:
                    keep.append(r)
                    if r.block in stuck:
                        self.not_run[r.run_id] = (f"block {r.block} was started on lost host {name}: its other "
                                                  "runs stay there so the block is not split over hosts")
            queues[name] = keep
            for b, to in sorted(moves.items()):
                if block_hosts.get(b) == name:
                    self.moves.append({"block": b, "from": name, "to": to})
                    self.log_event(None, "block_moved", block=b, to=to, **{"from": name})
        for q in queues.values():  # keep each host's runs in plan order
            ordered = sorted(q, key=lambda r: r.order)
            q.clear()
            q.extend(ordered)
        return bool(moves)

    def _round(self, queues: dict[str, deque[PlannedRun]]) -> None:
        """One pass: each live worker takes runs from its queue until it is empty or the line stops."""
        workers = [w for w in self.alive() if w.spec.name in queues]
        if not workers:
            return
        if len(workers) == 1:  # one host: run in this thread (Ctrl-C works as in a plain run)
            self._work(workers[0], queues[workers[0].spec.name])
            return
        self._threads(workers, lambda w: self._work(w, queues[w.spec.name]))

    def _next(self, queue: deque[PlannedRun]) -> PlannedRun | None:
        with self._lock:
            if not queue or self._stop.is_set() or self._halt.is_set():
                return None
            run = queue.popleft()
            self._taken_blocks.add(run.block)
            return run

    def _work(self, worker: Worker, queue: deque[PlannedRun]) -> None:
        try:
            self._work_on(worker, queue)
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:
            self._retire(worker, f"worker error: {type(exc).__name__}: {exc}")
            if threading.current_thread() is threading.main_thread():
                raise

    # -- leases -----------------------------------------------------------------------------------
    @property
    def leased(self) -> bool:
        """Do the hosts come from a scheduler (not the static inventory)?"""
        return self.leaser.scheduler != "static"

    def _hold_lease(self, worker: Worker, block: int) -> bool:
        """The worker holds a live lease for `block` (asked for now if it holds another or none), and its
        host is set up; False: the host is lost (retired)."""
        if not self.leased:
            return True
        lease = worker.lease
        if lease is not None and lease.block == block:
            why = self.leaser.lost(lease)
            if why:
                self._lease_lost(worker, why)
                return False
            return True
        self._release(worker)
        request = self._lease_request(worker, block)
        self.log_event(worker, "lease_requested", block=block, request=self.leaser.describe(request))
        try:
            worker.lease = lease = self.leaser.lease(request)
        except LeaseFailed as exc:
            self._retire(worker, f"no lease for block {block}: {exc}")
            return False
        self.log_event(worker, "lease_granted", block=block, hosts=list(lease.hosts), job_id=lease.job_id,
                       nodes=(lease.record or {}).get("nodes"))
        if lease.hosts[:1] != (worker.spec.name,):
            self._lease_lost(worker, f"the lease for block {block} gave {', '.join(lease.hosts)}, not "
                                     f"{worker.spec.name}")
            return False
        if worker.ctx is None:
            self._setup(worker)
        else:
            try:
                self._on_lease(worker)
            except (KeyboardInterrupt, RunInterrupted):
                raise
            except Exception as exc:  # noqa: BLE001 - the host cannot take the block: lost
                self._retire(worker, f"setup under the lease failed: {type(exc).__name__}: {exc}")
        if worker.lost is not None:
            self._release(worker)
        return worker.lost is None

    def _release(self, worker: Worker) -> None:
        """Give the worker's lease back; its runs' manifests get the final accounting record."""
        lease, worker.lease = worker.lease, None
        if lease is None:
            return
        try:
            self.leaser.release(lease)
        finally:
            for run_id in lease.run_ids:
                record_lease(self.store, run_id, lease.record)
            rec = {"block": lease.block, "host": worker.spec.name, "hosts": list(lease.hosts),
                   "runs": list(lease.run_ids), **(lease.record or {})}
            with self._lock:
                self.leases.append(rec)
            self.log_event(worker, "lease_released", block=lease.block, job_id=lease.job_id,
                           sacct=(lease.record or {}).get("sacct"))

    def _lease_lost(self, worker: Worker, why: str, run_id: str | None = None) -> None:
        self._retire(worker, f"lease lost: {why}", run_id)
        self._release(worker)

    def _cancel_leases(self) -> None:
        try:
            self.leaser.cancel_all()
        except Exception:  # noqa: BLE001 - cancelling is best effort while stopping
            traceback.print_exc()

    def _check_after_run(self, worker: Worker, run: PlannedRun, record: RunRecord) -> RunRecord:
        """Record the lease in the run's record; if the lease was lost meanwhile, retire the host, and
        if the allocation ended under the run, record the run as failed (it was not exclusive)."""
        lease = worker.lease
        if lease is None or lease.record is None:
            return record
        lease.run_ids.append(run.run_id)
        why = self.leaser.lost(lease)
        if why and self.leaser.ended(lease) and record.ok:
            r = self.store.record(run.run_id) or record
            r.set(status="failed", failed_step="lease", host_lost=True,
                  error=f"host {worker.spec.name}: the allocation ended during the run ({why})")
            self.store.rewrite_record(r)
            record = r
        record_lease(self.store, run.run_id, lease.record)
        if why:
            self._lease_lost(worker, why, run.run_id)
        return self.store.record(run.run_id) or record

    def _peek_block(self, queue: deque[PlannedRun]) -> int | None:
        with self._lock:
            if not queue or self._stop.is_set() or self._halt.is_set():
                return None
            return queue[0].block

    def _work_on(self, worker: Worker, queue: deque[PlannedRun]) -> None:
        if worker.ctx is None and worker.lost is None and not self.leased:
            self._setup(worker)
        while worker.lost is None:
            block = self._peek_block(queue)
            if block is None or not self._hold_lease(worker, block):
                return
            run = self._next(queue)
            if run is None:
                return
            if run.block != block and not self._hold_lease(worker, run.block):  # a queue shared by workers
                self._record_host_failure(worker, run, RuntimeError(worker.lost))
                return
            t0 = time.monotonic()
            try:
                manifest = self._execute(worker, run)
            except (KeyboardInterrupt, RunInterrupted):
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. the connection broke outside a run step
                manifest = self._record_host_failure(worker, run, exc)
            manifest = self._check_after_run(worker, run, manifest)
            worker.busy_s += time.monotonic() - t0
            if self._stop.is_set() and not manifest.ok:
                # Interrupted by Ctrl-C on the controller: discard, as a single-host run would.
                self.store.forget(run.run_id)
                return
            worker.done += 1
            if manifest.ok:
                worker.ok += 1
            else:
                worker.failed += 1
            self._on_result(worker, manifest)
            if not manifest.ok and worker.lost is None and worker.host is not None \
                    and not host_alive(worker.host):
                self._retire(worker, "stopped answering after a failed run", run.run_id)
                self._mark_host_lost(run.run_id, worker.spec.name)

    def _record_host_failure(self, worker: Worker, run: PlannedRun, exc: Exception) -> RunRecord:
        return record_early_failure(self.store, self.exp, run, worker.spec.name, "host", exc)

    def _mark_host_lost(self, run_id: str, host: str) -> None:
        """Say in the failed run's manifest that its host dropped out (so a reader knows why)."""
        m = self.store.record(run_id)
        if m is not None and m.failed:
            m.mark_host_lost(host)
            self.store.rewrite_record(m)

    def summary(self) -> dict[str, Any]:
        """Per host: runs measured (ok, failed), busy seconds (this host's own clock, not summed over
        hosts), and why it was lost (None: it was not)."""
        return {w.spec.name: {"runs": w.done, "ok": w.ok, "failed": w.failed, "busy_s": round(w.busy_s, 1),
                              "lost": w.lost} for w in self.workers}

    def close(self) -> None:
        """Give every lease back (and cancel any still waiting), then close the connections."""
        for w in self.workers:
            try:
                self._release(w)
            except Exception:  # noqa: BLE001 - the others are still released
                traceback.print_exc()
        if self.leased:
            self._cancel_leases()
        for w in self.workers:
            if w.host is not None:
                try:
                    w.host.close()
                except Exception:  # noqa: BLE001 - closing a dead connection
                    traceback.print_exc()
