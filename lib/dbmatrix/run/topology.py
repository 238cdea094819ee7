"""Topologies: how a run's servers are laid out, as strategies of the one run session.

:func:`dbmatrix.run.session.execute` calls the hooks below in order; a topology holds the servers it
started and answers where the client runs, which sockets it uses, which process and devices the
system collectors watch. To add a topology (e.g. several instances per host), subclass
:class:`Topology`, implement the abstract hooks, and return it from :func:`dbmatrix.run.matrix.topology_for`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from dbmatrix.hosts.remote import CommandResult, Host
from dbmatrix.parse.sysbench import SysbenchOutput
from dbmatrix.record import RunRecord
from dbmatrix.workload import commands as workloads
from dbmatrix.workload import sysbench

if TYPE_CHECKING:  # the session calls the hooks; the hooks only read and write its fields
    from dbmatrix.run.session import RunSession


class Topology(ABC):
    """The hooks of one run; the defaults do nothing."""

    kind: ClassVar[str]
    # Fixed cost of a run beyond warm-up and measurement (restore, start, stop, bookkeeping), measured on
    # the 2-vCPU VM; the plan's time estimate uses it.
    overhead_s: ClassVar[float]
    first_step: ClassVar[str] = "restore"
    # True when the window's opening snapshots of several servers must agree with each other (Galera: node
    # 1's replicated write sets against the others' received ones): read under load, one after the other,
    # they would not. Such a topology runs its warm-up as a separate sysbench and opens the window idle.
    window_opens_idle: ClassVar[bool] = False

    client_host: Host  # where sysbench runs
    measured_host: Host  # where the system collectors and counters run
    measured_pid: int | None = None  # the server process the collectors watch
    collect_dir: str  # where the collectors keep their files on measured_host
    tpcc_script: str | None = None  # our TPC-C Lua script on client_host, when the plan uses it
    client_prefix: list[str]

    @abstractmethod
    def start_record(self) -> RunRecord:
        """What the run's record says before anything runs (identity, host facts, media, dataset, sizing)."""

    @abstractmethod
    def prepare(self, s: RunSession) -> None:
        """Plan the servers (paths, ports, options) and describe them in the record."""

    @abstractmethod
    def start(self, s: RunSession) -> None:
        """Restore the dataset, drop caches, start the servers and check their variables (marks steps)."""

    @abstractmethod
    def sockets(self) -> list[str]:
        """The sockets the client spreads its threads over (sysbench takes a comma-separated list)."""

    def devices(self) -> list[str]:
        """Block devices the collectors watch (none when the medium is not a block device)."""
        return []

    def bench_command(self, s: RunSession, time_s: int, histogram: bool, checkpoint_s: int | None = None) -> str:
        argv = workloads.command(s.exp, s.cell, "run", socket=",".join(self.sockets()), threads=s.cell.threads,
                                 script=self.tpcc_script, time_s=time_s, seed=s.seed, histogram=histogram,
                                 rate=s.rate, checkpoint_s=checkpoint_s)
        return sysbench.command_string([*self.client_prefix, *argv])

    # In a one-process run (sysbench --report-checkpoints) after_warmup, before_window and open_window
    # run on a helper thread at the checkpoint, while sysbench goes on measuring: keep them short, and
    # let them only read the servers and write the session's record and files.
    def after_warmup(self, s: RunSession) -> None:
        """Check the servers survived the warm-up."""

    def before_window(self, s: RunSession) -> None:
        """At the start of the measured window (e.g. the status snapshot of a single server)."""

    def monitors(self, s: RunSession) -> list[Any]:
        """Samplers (objects with start/stop) running during the window besides the system collectors."""
        return []

    def open_window(self, s: RunSession) -> None:
        """After the collectors started, as the window opens (e.g. FLUSH STATUS and snapshots)."""

    def close_window(self, s: RunSession, result: CommandResult) -> None:
        """Right after sysbench, before the monitors stop (e.g. check nodes, snapshot status)."""

    def after_window(self, s: RunSession) -> None:
        """After the monitors stopped: per-server figures of the window into the record."""

    def check_results(self, s: RunSession, parsed: SysbenchOutput) -> None:
        """After a complete sysbench report: status after the run, cluster intact, …"""

    @abstractmethod
    def stop(self, s: RunSession) -> None:
        """Stop the servers after a measured run and record how they stopped."""

    @abstractmethod
    def stop_after_failure(self, s: RunSession) -> None:
        """Stop whatever runs after a failed step; record (never raise) what went wrong in stopping."""

    @abstractmethod
    def abort(self) -> None:
        """Stop everything on Ctrl-C (the run is discarded)."""

    def save_outputs(self, s: RunSession) -> None:
        """Keep logs and samples of the run (called whether it succeeded or failed)."""
