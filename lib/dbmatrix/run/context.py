"""What every run on one host shares: the connection, its run guard, facts, server user, the media's
states and the installed workload scripts; made once per host and study."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.hosts import builds, media
from dbmatrix.hosts.facts import collect_facts
from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import Host, RunInterrupted
from dbmatrix.record import RunRecord
from dbmatrix.run.datasets import DatasetInfo, cache_sizing
from dbmatrix.run.guard import Guard
from dbmatrix.run.mysqld import constants_for, server_user
from dbmatrix.run.ports import Owner, this_process
from dbmatrix.run.session import base_record, sysbench_seed
from dbmatrix.spec.experiment import Experiment, PlannedRun
from dbmatrix.store import ResultStore, utc_now, write_json_atomic
from dbmatrix.workload import commands as workloads


@dataclass
class HostContext:
    """What every run on one host shares: facts, the server user, and the media's states; its guard kills
    what our runs started there if this process dies, and owns the ports leased there."""

    host: Host
    spec: HostSpec
    facts: dict[str, Any]
    user: str
    port: int | None  # where port leases start (None: DBMATRIX_BASE_PORT or 13306); no port is held
    media: dict[str, Any]  # medium name -> media.MediumState, or the exception that made it unusable
    tpcc_script: str | None = None  # our TPC-C Lua script on this host, when the plan uses it
    guard: Guard | None = None
    # server build name -> builds.BuildState, or the exception that made it unusable (the plan's builds only)
    builds: dict[str, Any] = field(default_factory=dict)

    def owner(self) -> Owner:
        """Who leases ports on this host: the guard, or this process on a local host without one."""
        if self.guard is not None and self.guard.owner is not None:
            return self.guard.owner
        return this_process(self.host)

    def close(self) -> None:
        """After every server of the study has stopped: tear down the nbd media built for it (their nbdkit and
        nbdfuse processes would outlive the study), then stop the guard; the host stays open."""
        for name, state in self.media.items():
            if isinstance(state, media.MediumState) and state.kind == "nbd":
                try:
                    media.teardown(self.host, self.spec.media[name])
                except Exception as exc:  # noqa: BLE001 - the study's data are safe; say what is left running
                    print(f"medium {name} on {self.host.name}: teardown failed ({exc}); `dbmatrix hosts "
                          "teardown` stops its nbdkit and nbdfuse", flush=True)
        if self.guard is not None:
            self.guard.close()


def host_facts(host: Host, store: ResultStore) -> dict[str, Any]:
    facts = collect_facts(host)
    facts["collected_utc"] = utc_now()
    write_json_atomic(store.hosts / f"{host.name}.json", facts)
    return facts


def media_used(exp: Experiment) -> list[str]:
    """Media the plan needs: the data media, any separate log media and the Galera followers' media."""
    return sorted({*exp.factors["medium"], *(m for m in exp.factors["log_medium"] if m != "same"),
                   *(m for m in exp.factors["follower_medium"] if m != "same")})


def ensure_each(names: Iterable[str], ensure: Callable[[str], Any]) -> dict[str, Any]:
    """`ensure` of each name: its state, or the exception that made it unusable, so its runs are recorded as
    failed and the rest of the matrix goes on (an interrupt stops everything)."""
    states: dict[str, Any] = {}
    for name in names:
        try:
            states[name] = ensure(name)
        except (KeyboardInterrupt, RunInterrupted):
            raise
        except Exception as exc:  # noqa: BLE001 - kept as the state and reported per run
            states[name] = exc
    return states


def prepare_media(host: Host, hostspec: HostSpec, exp: Experiment) -> dict[str, Any]:
    """Apply and verify every medium the plan uses (a medium that fails is kept as its exception)."""
    return ensure_each(media_used(exp), lambda name: media.ensure(host, hostspec.media[name]))


def prepare_builds(host: Host, hostspec: HostSpec, exp: Experiment) -> dict[str, Any]:
    """Unpack (once) and verify every server build the plan uses (a build that fails is kept as its exception)."""
    return ensure_each(sorted(set(exp.factors["server_build"])),
                       lambda name: builds.ensure(host, hostspec.builds[name]))


def connect_host(hostspec: HostSpec, exp: Experiment, store: ResultStore, port_start: int | None = None
                 ) -> HostContext:
    """Connect, start the host's run guard, record its facts, and apply/verify the media the plan uses."""
    host = hostspec.connect()
    guard = Guard(host, f"{hostspec.workdir}/run")
    try:
        guard.start()
        ctx = HostContext(host, hostspec, host_facts(host, store), server_user(host), port_start, {}, guard=guard)
        ctx.media.update(prepare_media(host, hostspec, exp))
        ctx.builds.update(prepare_builds(host, hostspec, exp))
        ctx.tpcc_script = workloads.install_scripts(host, hostspec.workdir, exp)
    except BaseException:
        guard.close()
        host.close()
        raise
    return ctx


def run_record(exp: Experiment, run: PlannedRun, ctx: HostContext, dataset: DatasetInfo,
               media_state: dict[str, Any]) -> RunRecord:
    """What every measured run's record starts with, whatever its topology (`ctx` is the host of the
    server, or of node 1): identity, host facts, medium, dataset, cache sizing, server constants, CPU
    placement and the sysbench seed; `steps` is filled by the session's step clock."""
    cell = run.cell
    placement = exp.cpu_placement
    rec = base_record(exp, run, ctx.host.name)
    build = ctx.builds.get(cell.server_build)
    version = build.version if isinstance(build, builds.BuildState) else ctx.facts.get("mariadb_version")
    rec.set(
        boot_id=ctx.facts.get("boot_id"), host_facts=ctx.facts,
        medium=ctx.spec.media[cell.medium].to_dict(), media_state=media_state,
        versions={"mariadb": version, "sysbench": ctx.facts.get("sysbench_version")},
        dataset=dataset.to_dict(), **cache_sizing(cell, dataset, exp.cache_basis),
        server_constants=constants_for(cell, exp.server_options),
        cpu_placement={"tool": placement.tool, "server": placement.server, "client": placement.client},
        sysbench_seed=sysbench_seed(exp.seed, run.run_id), host_class=ctx.spec.host_class or None,
    )
    return rec
