"""One server per run: restore the snapshot onto the cell's medium, start mariadbd with the cell's
options, measure, stop (the standalone topology of the run session)."""

from __future__ import annotations

from dbmatrix import engines
from dbmatrix.hosts import media
from dbmatrix.parse import sysbench
from dbmatrix.record import RunRecord
from dbmatrix.run.context import HostContext, run_record
from dbmatrix.run.datasets import DatasetInfo, cache_sizing, drop_os_caches, restore
from dbmatrix.run.mysqld import MariaDBServer, ServerPaths, render_options
from dbmatrix.run.session import RunSession
from dbmatrix.run.topology import Topology
from dbmatrix.spec.experiment import Experiment, PlannedRun


class Standalone(Topology):
    """A single mariadbd on the run's host; the client runs on the same host, over its unix socket, so
    the server listens on no TCP port (``--skip-networking``)."""

    kind = "standalone"
    # restore + start + stop + bookkeeping on the 2-vCPU VM: measured 2.0 s (median gap between run starts
    # minus the window, the quick reference's first campaigns, 80 runs); more for a larger datadir to restore
    overhead_s = 3.5

    def __init__(self, ctx: HostContext, exp: Experiment, run: PlannedRun, dataset: DatasetInfo) -> None:
        cell, hostspec = run.cell, ctx.spec
        self.ctx, self.exp, self.run, self.dataset = ctx, exp, run, dataset
        self.client_host = self.measured_host = ctx.host
        self.tpcc_script = ctx.tpcc_script
        self.medium = hostspec.media[cell.medium]
        self.datadir = f"{self.medium.path}/datadir"
        self.log_dir = None if cell.log_medium == "same" else f"{hostspec.media[cell.log_medium].path}/logdir"
        self.paths = ServerPaths.under(f"{hostspec.workdir}/run", self.datadir, "bench")
        build = hostspec.builds[cell.server_build]
        self.options = render_options(cell, self.paths, user=ctx.user,
                                      cache=cache_sizing(cell, dataset, exp.cache_basis)["cache_bytes"],
                                      constants=exp.server_options, log_dir=self.log_dir, build=build)
        placement = exp.cpu_placement
        self.server = MariaDBServer(ctx.host, self.paths, self.options,
                                    prefix=[*placement.prefix("server"), *media.launch_prefix(self.medium)],
                                    binary=build.server)
        self.client_prefix = placement.prefix("client")
        self.collect_dir = f"{hostspec.workdir}/run/collect"
        self.states = {n: ctx.media[n] for n in {cell.medium, cell.log_medium} - {"same"}}

    def start_record(self) -> RunRecord:
        states = {n: st.to_dict() for n, st in sorted(self.states.items())}
        return run_record(self.exp, self.run, self.ctx, self.dataset, states)

    def prepare(self, s: RunSession) -> None:
        build = self.ctx.builds.get(s.cell.server_build)
        s.record.set(log_dir=self.log_dir, server={"command": self.server.command, "options": self.options,
                                                   "build": build.to_dict() if build is not None else None})

    def sockets(self) -> list[str]:
        return [self.paths.socket]

    def devices(self) -> list[str]:
        return sorted({st.device for st in self.states.values() if st.device})

    def start(self, s: RunSession) -> None:
        host, m = self.ctx.host, s.record
        restore(host, self.dataset, self.datadir, self.log_dir)
        s.mark("drop_caches")
        m.os_cache_dropped = drop_os_caches(host)
        s.mark("start")
        self.server.start()
        self.measured_pid = self.server.pid
        m.server["start_s"] = round(self.server.started_s or 0, 3)
        m.server["pid"] = self.server.pid
        if s.exp.cpu_placement.server:
            m.cpu_placement["server_affinity"] = host.run(f"taskset -cp {self.server.pid}",
                                                          check=False).stdout.strip()
        s.mark("variables")
        variables = self.server.global_variables()
        s.save_tsv("variables.tsv", variables)
        key = engines.engine(s.cell.engine).cache_variable
        m.cache_bytes_effective = int(variables.get(key, 0) or 0)

    def before_window(self, s: RunSession) -> None:
        s.mark("status_before")
        s.save_tsv("status-before.tsv", self.server.global_status())

    def check_results(self, s: RunSession, parsed: sysbench.SysbenchOutput) -> None:
        s.mark("status_after")
        s.save_tsv("status-after.tsv", self.server.global_status())

    def stop(self, s: RunSession) -> None:
        """The spec's stop mode: the datadir is replaced by the next run's restore, nothing reads it."""
        self.server.stop(mode=self.exp.stop_mode)
        s.record.server.update(stop_s=round(self.server.stop_s or 0, 3), stop_mode=self.server.stop_mode,
                               clean_shutdown=self.server.clean_shutdown)

    def stop_after_failure(self, s: RunSession) -> None:
        try:
            self.server.stop()
        except Exception as stop_exc:  # noqa: BLE001 - keep the first error; note the second
            s.record.stop_error = f"{type(stop_exc).__name__}: {stop_exc}"

    def abort(self) -> None:
        self.server.stop()

    def save_outputs(self, s: RunSession) -> None:
        if self.server.pid is None and s.step != "restore":
            s.fetch(self.ctx.host, self.paths.error_log, "mariadbd.err")
