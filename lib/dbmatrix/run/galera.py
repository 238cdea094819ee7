"""A Galera cluster per run (the galera topology of the run session).

Per run: plan the nodes (ports, directories) -> restore the dataset snapshot onto node 1 (cold) -> drop
OS caches -> bootstrap node 1 -> join the other nodes one by one (full state transfer) and wait until all
are Synced -> check every node's variables -> warm up -> FLUSH LOCAL STATUS on every node and snapshot ->
measure with sysbench (wsrep sampler on every node, system collectors on node 1's host) -> snapshot ->
stop every node (node 1 last) -> keep every raw output and every node's error log. Any failure, a node
dying included, is recorded as a failed run with its step; all nodes are stopped.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import asdict
from typing import Any

from dbmatrix import engines
from dbmatrix.hosts import cpulimit, media
from dbmatrix.hosts.remote import CommandResult, Host
from dbmatrix.parse import sysbench
from dbmatrix.parse.wsrep import parse_samples, summarize_samples, wsrep_deltas
from dbmatrix.record import RunRecord
from dbmatrix.run.context import HostContext, run_record
from dbmatrix.run.datasets import DatasetInfo, cache_sizing, drop_os_caches, restore
from dbmatrix.run.galera_cluster import (
    PORTS_PER_NODE,
    GaleraCluster,
    GaleraError,
    NodePlan,
    WsrepSampler,
    check_sst_method,
    client_sockets,
    cluster_name,
    node_options,
    parse_sst_seconds,
    plan_nodes,
    run_as_user,
)
from dbmatrix.run.mysqld import PortInUse
from dbmatrix.run.ports import PortBlock, bind_failed, lease_block
from dbmatrix.run.session import RunFailed, RunSession
from dbmatrix.run.topology import Topology
from dbmatrix.spec.experiment import Experiment, PlannedRun, SpecError

# Bytes per second a state transfer is assumed to reach at worst when sizing the sync timeout.
SST_MIN_BPS = 20 * 1024 * 1024
SYNC_TIMEOUT_MIN_S = 300.0


def sync_timeout_s(dataset: DatasetInfo) -> float:
    """How long a node may take to start and sync: enough for a slow state transfer of the whole datadir."""
    return round(max(SYNC_TIMEOUT_MIN_S, dataset.datadir_physical_bytes / SST_MIN_BPS), 1)


def split_samples(text: str, start_epoch: float) -> tuple[str, str]:
    """(lines sampled before `start_epoch`, the rest) of wsrep sampler output (lines start with epoch s)."""
    before: list[str] = []
    after: list[str] = []
    for line in text.splitlines(keepends=True):
        head = line.split(maxsplit=1)[0] if line.strip() else ""
        try:
            early = float(head) < start_epoch
        except ValueError:
            early = False
        (before if early else after).append(line)
    return "".join(before), "".join(after)


def _hosts_of(ctxs: list[HostContext]) -> dict[str, Host]:
    """Distinct hosts by name, in node order."""
    out: dict[str, Host] = {}
    for c in ctxs:
        out.setdefault(c.host.name, c.host)
    return out


class Galera(Topology):
    """`ctxs[i]` is the context of node i+1's host (the same context N times on one host); the dataset
    was prepared on node 1's host, where the client and the system collectors run."""

    kind = "galera"
    window_opens_idle = True  # the wsrep deltas of all nodes must bracket the same write sets
    # Measured on the 2-vCPU VM with 3 nodes and a 160 MB datadir: restore ~0.5-1 s, bootstrap ~0.5 s,
    # two joins with rsync SST ~10-14 s, the window's snapshots, sampler and collectors ~3 s, stop ~6 s.
    # (the quick reference: 16 s median gap between run starts minus the window)
    overhead_s = 18.0
    first_step = "plan"

    def __init__(self, ctxs: list[HostContext], exp: Experiment, run: PlannedRun, dataset: DatasetInfo) -> None:
        topo = exp.topology
        if not topo.galera or len(ctxs) != topo.nodes:
            raise SpecError(f"topology: a galera run of {topo.nodes} nodes needs one host context per node, "
                            f"got {len(ctxs)}")
        self.ctxs, self.exp, self.run, self.dataset = ctxs, exp, run, dataset
        ctx1 = ctxs[0]
        self.client_host = self.measured_host = ctx1.host
        self.tpcc_script = ctx1.tpcc_script
        self.client_prefix = exp.cpu_placement.prefix("client")
        self.collect_dir = f"{ctx1.spec.workdir}/run/collect"
        self.timeout = sync_timeout_s(dataset)
        self.cluster: GaleraCluster | None = None
        self.nodes: list[NodePlan] = []
        self._sockets: list[str] = []
        self.samplers: list[WsrepSampler] = []
        self.before: dict[str, dict[str, str]] = {}
        self.after: dict[str, dict[str, str]] = {}
        self.block: PortBlock | None = None  # the ports leased for this run on every node's host
        self.run_as_by_host: dict[str, str | None] = {}
        self.cpu_layouts: dict[str, cpulimit.CpuLayout] = {}  # hosts of CPU-limited followers (calibrate cpu_max)
        self._cpu_before: dict[str, dict[str, int]] = {}

    def node_medium(self, index: int) -> str:
        """The medium of node `index` (1-based): node 1 on the cell's medium, the followers on
        ``follower_medium`` unless it is 'same'."""
        cell = self.run.cell
        return cell.medium if index == 1 or cell.follower_medium == "same" else cell.follower_medium

    def _media_states(self) -> dict[str, Any]:
        out = {}
        for i, c in enumerate(self.ctxs, start=1):
            name = self.node_medium(i)
            to_dict = getattr(c.media.get(name), "to_dict", None)
            if to_dict is not None and name not in out:
                out[name] = to_dict()
        return out

    def start_record(self) -> RunRecord:
        m = run_record(self.exp, self.run, self.ctxs[0], self.dataset, self._media_states())
        m.set(log_dir=None, topology={**asdict(self.exp.topology), "hosts": [c.spec.name for c in self.ctxs]},
                 cluster={"sync_timeout_s": self.timeout}, nodes={}, wsrep={})
        return m

    # -------------------------------------------------------------------------------- before the window
    def prepare(self, s: RunSession) -> None:
        topo, ctxs = self.exp.topology, self.ctxs
        for i, c in enumerate(ctxs, start=1):
            name = self.node_medium(i)
            state = c.media.get(name)
            if isinstance(state, Exception) or state is None:
                raise RunFailed(f"medium {name!r} of node{i} on host {c.host.name} is not usable: {state}")
        hosts = _hosts_of(ctxs)
        self.run_as_by_host = {name: run_as_user(h) for name, h in hosts.items()}
        for h in hosts.values():
            check_sst_method(h, topo.sst_method)
        if self.cpu_limited:
            self.cpu_layouts = {name: cpulimit.detect_cpu_layout(h) for name, h in hosts.items()}
            s.record.cluster["follower_cpu"] = {
                f"node{i}": {"cgroup": self.cpu_layouts[c.host.name].group(cpulimit.follower_group(i)),
                             "cpu_pct": cpulimit.read_cpu_limit(c.host, self.cpu_layouts[c.host.name],
                                                                cpulimit.follower_group(i))}
                for i, c in enumerate(ctxs, start=1) if i > 1}
        self._plan(s)

    @property
    def cpu_limited(self) -> bool:
        """The followers run in their own cgroups under the campaign's calibrated CPU limit."""
        cal = self.exp.topology.calibrate
        return cal is not None and cal.cpu

    def _cpu_prefix(self, index: int, host: str) -> list[str]:
        if index == 1 or not self.cpu_limited:
            return []
        return cpulimit.join_prefix(self.cpu_layouts[host], cpulimit.follower_group(index))

    def _plan(self, s: RunSession, skip: set[int] | None = None) -> None:
        """Lease a block of ports on every node's host (machine-wide, see run.ports) and plan the nodes on it."""
        cell, topo, ctxs = s.cell, self.exp.topology, self.ctxs
        self.block = lease_block([(c.host, c.owner()) for c in ctxs], PORTS_PER_NODE * topo.nodes,
                                 start=ctxs[0].port, skip=skip)
        base = self.block.base
        self.nodes = plan_nodes(topo, [c.spec for c in ctxs],
                                [c.spec.media[self.node_medium(i)].path for i, c in enumerate(ctxs, start=1)], base)
        self._sockets = client_sockets(self.nodes, cell.write_to)
        self.name = cluster_name(s.run.run_id, base)
        run_as = [self.run_as_by_host[c.host.name] for c in ctxs]
        cache = cache_sizing(cell, self.dataset, self.exp.cache_basis)["cache_bytes"]
        options = [node_options(cell, self.nodes, n.index, user=run_as[n.index - 1] or ctxs[n.index - 1].user,
                                cache=cache, constants=self.exp.server_options, name=self.name,
                                sst_method=topo.sst_method) for n in self.nodes]
        placement = self.exp.cpu_placement
        prefixes = [[*media.launch_prefix(c.spec.media[self.node_medium(i)]), *placement.prefix("server"),
                     *self._cpu_prefix(i, c.host.name)] for i, c in enumerate(ctxs, start=1)]
        self.cluster = GaleraCluster([c.host for c in ctxs], self.nodes, options, run_as, prefixes)
        m = s.record
        m.cluster.update(name=self.name, base_port=base, run_as=run_as)
        m.client = {"write_to": cell.write_to, "sockets": self._sockets, "host": self.client_host.name}
        m.nodes = {n.name: {**n.to_dict(), "command": sv.command, "options": o}
                      for n, sv, o in zip(self.nodes, self.cluster.servers, options)}
        m.server = {"command": self.cluster.servers[0].command, "options": options[0]}

    def sockets(self) -> list[str]:
        return self._sockets

    def devices(self) -> list[str]:
        """Node 1's device and, when the followers have their own medium, theirs (on node 1's host)."""
        names = dict.fromkeys([self.node_medium(1), self.node_medium(2)])
        found = [getattr(self.ctxs[0].media.get(n), "device", None) for n in names]
        return [d for d in dict.fromkeys(found) if d]

    def start(self, s: RunSession) -> None:
        """Start the cluster; if a node could not bind one of its ports (something outside dbmatrix took it
        after the lease), stop, lease another block and start once more."""
        try:
            self._start(s)
        except (PortInUse, GaleraError) as exc:
            if not bind_failed(str(exc)) or self.block is None:
                raise
            failed = set(self.block.ports)
            s.record.cluster["port_retry"] = {"failed_base": self.block.base, "error": str(exc)[-500:]}
            self._cluster().stop()
            self._release()
            self._plan(s, skip=failed)
            self._start(s)

    def _start(self, s: RunSession) -> None:
        cluster, nodes, m = self._cluster(), self.nodes, s.record
        s.mark("restore")
        cluster.prepare_dirs()
        restore(self.ctxs[0].host, self.dataset, nodes[0].paths.datadir)
        cluster.chown_datadir(1)
        s.mark("drop_caches")
        m.os_cache_dropped = all(drop_os_caches(h) for h in _hosts_of(self.ctxs).values())
        s.mark("bootstrap")
        t_cluster = time.monotonic()
        m.cluster["bootstrap_s"] = round(cluster.bootstrap(self.timeout), 3)
        m.nodes["node1"]["pid"] = cluster.servers[0].pid
        s.mark("join")
        for n in nodes[1:]:
            cluster.join(n.index, self.timeout)
            sv = cluster.servers[n.index - 1]
            log = sv.host.run(f"cat {shlex.quote(sv.paths.error_log)}", check=False).stdout
            m.nodes[n.name].update(pid=sv.pid, join_s=cluster.join_s[n.name], sst_s=parse_sst_seconds(log))
        m.cluster["start_s"] = round(time.monotonic() - t_cluster, 3)
        m.server["pid"] = self.measured_pid = cluster.servers[0].pid
        s.mark("variables")
        for n, sv in zip(nodes, cluster.servers):
            v = sv.global_variables()
            s.save_tsv(f"variables-{n.name}.tsv", v)
            problems = [f"{k}={v.get(k)!r} (want {want!r})" for k, want in
                        (("wsrep_on", "ON"), ("wsrep_slave_threads", str(s.cell.slave_threads)),
                         ("wsrep_cluster_name", self.name)) if v.get(k) != want]
            if problems:
                raise RunFailed(f"{n.name}: {', '.join(problems)}")
            if n.index == 1:
                m.cache_bytes_effective = int(v.get(engines.engine(s.cell.engine).cache_variable, 0) or 0)

    def after_warmup(self, s: RunSession) -> None:
        dead = self._cluster().dead_nodes()
        if dead:
            raise RunFailed(f"{', '.join(dead)} died during the warm-up")

    # -------------------------------------------------------------------------------- the window
    def monitors(self, s: RunSession) -> list[Any]:
        hosts = _hosts_of(self.ctxs)
        workdirs = {c.host.name: c.spec.workdir for c in reversed(self.ctxs)}
        self.samplers = [WsrepSampler(h, [n for n in self.nodes if n.host == hname], f"{workdirs[hname]}/run/galera")
                         for hname, h in hosts.items()]
        return list(self.samplers)

    def _cpu_stats(self) -> dict[str, dict[str, int]]:
        """Each CPU-limited follower's cgroup cpu.stat (periods, throttled periods and time)."""
        if not self.cpu_limited:
            return {}
        return {f"node{i}": cpulimit.read_stat(c.host, self.cpu_layouts[c.host.name], cpulimit.follower_group(i))
                for i, c in enumerate(self.ctxs, start=1) if i > 1}

    def open_window(self, s: RunSession) -> None:
        """FLUSH LOCAL STATUS on every node, then a snapshot with each node's clock."""
        cluster = self._cluster()
        self._cpu_before = self._cpu_stats()
        cluster.sql_all("FLUSH LOCAL STATUS")
        self.before = {n.name: cluster.status(n.index, None) for n in self.nodes}
        for n in self.nodes:
            s.save_tsv(f"status-before-{n.name}.tsv", self.before[n.name])

    def close_window(self, s: RunSession, result: CommandResult) -> None:
        cluster = self._cluster()
        dead = cluster.dead_nodes()
        if dead:
            raise RunFailed(f"{', '.join(dead)} died during the measured window (sysbench exit {result.exit_code})")
        self.after = {n.name: cluster.status(n.index, None) for n in self.nodes}
        for node, after in self._cpu_stats().items():  # how often the CPU limit held each follower back
            s.record.cluster["follower_cpu"][node]["window"] = cpulimit.stat_delta(self._cpu_before[node], after)

    def after_window(self, s: RunSession) -> None:
        for n in self.nodes:
            s.save_tsv(f"status-after-{n.name}.tsv", self.after[n.name])
            s.record.wsrep[n.name] = wsrep_deltas(self.before[n.name], self.after[n.name])

    def check_results(self, s: RunSession, parsed: sysbench.SysbenchOutput) -> None:
        degraded = [f"{k}: cluster_size={d['cluster_size']}, state={d['state']}"
                    for k, d in s.record.wsrep.items()
                    if d["cluster_size"] != self.exp.topology.nodes or d["state"] != "Synced"]
        if degraded:
            raise RunFailed(f"the cluster was not intact at the end of the window ({'; '.join(degraded)})")

    # -------------------------------------------------------------------------------- stopping
    def stop(self, s: RunSession) -> None:
        cluster, m = self._cluster(), s.record
        cluster.stop(mode=self.exp.stop_mode)  # the datadirs are made afresh by the next run's prepare_dirs
        for n, sv in zip(self.nodes, cluster.servers):
            m.nodes[n.name].update(stop_s=round(sv.stop_s or 0, 3), clean_shutdown=sv.clean_shutdown,
                                      stop_mode=sv.stop_mode)
        m.server.update(stop_s=m.nodes["node1"]["stop_s"], stop_mode=m.nodes["node1"]["stop_mode"],
                        clean_shutdown=m.nodes["node1"]["clean_shutdown"])
        if cluster.stop_errors:
            m.stop_error = cluster.stop_errors
        self._release()

    def _release(self) -> None:
        if self.block is not None:
            self.block.release()
            self.block = None

    def stop_after_failure(self, s: RunSession) -> None:
        if self.cluster is not None:
            s.record.dead_nodes = self.cluster.dead_nodes()
            self.cluster.stop()
            if self.cluster.stop_errors:
                s.record.stop_error = self.cluster.stop_errors
        self._release()

    def abort(self) -> None:
        for sampler in self.samplers:
            sampler.stop()
        if self.cluster is not None:
            self.cluster.stop()
        self._release()

    def save_outputs(self, s: RunSession) -> None:
        if self.samplers:
            text = "".join(sm.text for sm in self.samplers)
            start = s.record.window.get("start_epoch")
            if start is not None:  # one-process run: the samplers ran through the warm-up too
                warm, text = split_samples(text, start)
                s.save("wsrep-samples-warmup.txt", warm)
            s.save("wsrep-samples.txt", text)
            s.record.wsrep_samples = {
                "interval_s": self.samplers[0].interval_s,
                "errors": {sm.host.name: sm.error for sm in self.samplers if sm.error},
                "nodes": summarize_samples(parse_samples(text))}
        if self.cluster is not None and s.step != "plan":
            for n, h in zip(self.nodes, self.cluster.hosts):
                s.fetch(h, n.paths.error_log, f"mariadbd-{n.name}.err")

    def _cluster(self) -> GaleraCluster:
        if self.cluster is None:
            raise RunFailed("the cluster was not planned")
        return self.cluster
