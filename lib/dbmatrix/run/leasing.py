"""Where the fleet gets its hosts: a *leaser* lends the hosts of one replicate block and takes them back.

The fleet (:mod:`dbmatrix.run.fleet`) asks its leaser for the hosts of a block before the block's first
run (one host, or every host of a cluster spread over hosts, at once), checks between runs that the
lease still holds, and gives the hosts back when the block is done or the command ends.

- :class:`StaticLeaser` (the default): the inventory's hosts are the study's alone; a lease is the block's
  planned host(s), granted at once, never lost, and leaves no trace in the records (today's behaviour).
- :class:`dbmatrix.run.slurm.SlurmLeaser` (``scheduler: slurm`` in the inventory): each block is one
  allocation of whole nodes from a lab's Slurm pool; a lease is lost when Slurm ends the job (cancelled,
  preempted, time limit) or takes its node out of service (drained, down).

A lease's record (:func:`lease_record`) goes into every manifest of a run measured under it, under the one
field ``lease`` (:class:`dbmatrix.record.Lease`, :func:`with_lease`), and into the campaign record's ``leases``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dbmatrix.record import Lease as LeaseRecord
from dbmatrix.record import RunRecord
from dbmatrix.store import ResultStore


@dataclass(frozen=True)
class LeaseRequest:
    """What one block asks for: its planned hosts (node 1's first), the features every host must have,
    the time limit the block needs and the job's name."""

    block: int
    hosts: tuple[str, ...]
    features: tuple[str, ...] = ()
    time_limit_s: float = 0.0
    name: str = ""


@dataclass
class Lease:
    """Hosts lent for one block; `record` is what the manifests carry (None: nothing to record)."""

    request: LeaseRequest
    hosts: tuple[str, ...]
    record: dict[str, Any] | None = None
    job_id: str | None = None
    run_ids: list[str] = field(default_factory=list)  # runs measured under this lease

    @property
    def block(self) -> int:
        return self.request.block


class LeaseFailed(RuntimeError):
    """The hosts could not be leased (refused, timed out, cancelled while waiting)."""


class Leaser(Protocol):
    scheduler: str

    def lease(self, request: LeaseRequest) -> Lease:
        """Block until the request's hosts are lent; raises :class:`LeaseFailed`."""
        ...

    def lost(self, lease: Lease) -> str | None:
        """Why the lease no longer holds (None: it holds): the job ended or a node left service."""
        ...

    def ended(self, lease: Lease) -> bool:
        """Did the lease end under the runs (the host was not exclusive throughout), not merely leave
        service afterwards?"""
        ...

    def release(self, lease: Lease) -> None:
        """Give the hosts back; updates ``lease.record`` with the final accounting."""
        ...

    def cancel_all(self) -> None:
        """Cancel every lease this leaser asked for, granted or still waiting (Ctrl-C)."""
        ...

    def describe(self, request: LeaseRequest) -> str:
        """The request as the scheduler will see it (``dbmatrix plan``)."""
        ...


class StaticLeaser:
    """The inventory's hosts, dedicated to the study: every lease is granted at once and never lost."""

    scheduler = "static"

    def lease(self, request: LeaseRequest) -> Lease:
        return Lease(request, request.hosts)

    def lost(self, lease: Lease) -> str | None:
        return None

    def ended(self, lease: Lease) -> bool:
        return False

    def release(self, lease: Lease) -> None:
        return None

    def cancel_all(self) -> None:
        return None

    def describe(self, request: LeaseRequest) -> str:
        return f"block {request.block}: {', '.join(request.hosts)} (static inventory)"


def lease_record(scheduler: str, job_id: str | None, nodes: Sequence[str], partition: str | None,
                 account: str | None, sacct: Mapping[str, Any] | None) -> dict[str, Any]:
    """The one shape of a lease in the records (the RunRecord's ``lease`` sub-record has these fields)."""
    return {"scheduler": scheduler, "job_id": job_id, "nodes": list(nodes), "partition": partition,
            "account": account, "sacct": dict(sacct) if sacct is not None else {}}


def with_lease(record: RunRecord, lease: Mapping[str, Any] | None) -> RunRecord:
    """The run record with its lease (a static host's run gets none)."""
    if lease is not None:
        record.lease = LeaseRecord.from_dict(lease)
    return record


def record_lease(store: ResultStore, run_id: str, lease: Mapping[str, Any] | None) -> None:
    """Write the lease into a committed run's record (at the run, and again with the final ``sacct``)."""
    if lease is None:
        return
    r = store.record(run_id)
    if r is not None:
        store.rewrite_record(with_lease(r, lease))
