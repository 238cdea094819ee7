"""Several mariadbd instances per run (the scale-out study of seed 000, as a topology of the run session).

Per run: plan the instances (instance i on ``topology.hosts[i % len(hosts)]``, all on the run's host when
the spec lists none), each with its own datadir restored from the dataset snapshot, socket, tmpdir, pid
file, error log and optional CPU set -> restore every datadir -> drop OS caches -> start every instance ->
check their variables -> warm up -> [window: SHOW GLOBAL STATUS and /proc/PID/stat of every instance
before and after one sysbench whose threads spread over all instances] -> stop every instance.

The client runs on ``topology.client`` (the first host by default). When every instance is on the
client's host, sysbench reaches them over their unix sockets (``--mysql-socket=a,b,...``) and the servers
have no TCP listener. Otherwise it connects over TCP to every host's address: sysbench pairs each host
of ``--mysql-host`` with each port of ``--mysql-port`` (hosts vary fastest), so every host runs its
instances on the same ports (the spec's instance counts are multiples of the host count) and a user
``bench`` is created on every instance for the remote client.

Per instance the manifest keeps the window's Questions and Com_select deltas, its share of all queries,
and its mysqld CPU seconds (utime+stime from /proc/PID/stat), with the window's elapsed time.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from dbmatrix import engines
from dbmatrix.hosts import media
from dbmatrix.hosts.remote import CommandResult, Host
from dbmatrix.parse.sysbench import SysbenchOutput
from dbmatrix.record import RunRecord
from dbmatrix.run.context import HostContext, run_record
from dbmatrix.run.datasets import DatasetInfo, cache_sizing, drop_os_caches, prepare_dataset, restore
from dbmatrix.run.mysqld import MariaDBServer, ServerPaths, render_options
from dbmatrix.run.ports import PortBlock, lease_block
from dbmatrix.run.session import RunFailed, RunSession
from dbmatrix.run.topology import Topology
from dbmatrix.spec.experiment import Experiment, PlannedRun, SpecError, check_host_cpus
from dbmatrix.workload import commands as workloads
from dbmatrix.workload import sysbench

BENCH_USER = "bench"
BENCH_PASSWORD = "bench"  # a throwaway user on throwaway datadirs, for the remote client only
STATUS_KEYS = ("Questions", "Com_select", "Threads_connected", "Uptime")


# ------------------------------------------------------------------------------------ pure planning

@dataclass(frozen=True)
class InstancePlan:
    """Where one instance runs and what it uses."""

    index: int  # 1-based over the whole run
    host: str  # inventory host name
    address: str  # how the client reaches its host over TCP (unused over sockets)
    paths: ServerPaths
    cpus: str | None = None  # its CPU list (None: no CPU set)
    numa_node: int | None = None

    @property
    def name(self) -> str:
        return f"i{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "host": self.host, "address": self.address, **asdict(self.paths),
                "tmpdir": self.paths.tmpdir, "cpus": self.cpus, "numa_node": self.numa_node}


def cpulist(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    out: list[str] = []
    for c in sorted(set(cpus)):
        if out and "-" not in out[-1].split(",")[-1] and int(out[-1]) == c - 1:
            out[-1] = f"{out[-1]}-{c}"
        elif out and "-" in out[-1] and int(out[-1].split("-")[1]) == c - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)


def cpu_sets(pinning: str, count: int, cpus: list[int], numa: list[list[int]] | None = None
             ) -> list[tuple[str | None, int | None]]:
    """(CPU list, NUMA node) for each of `count` instances on a host with online `cpus`.

    ``none``: no CPU set. ``instance``: the CPUs split into `count` contiguous sets of (nearly) equal
    size, one per instance (needs count <= CPUs). ``numa``: instance j on node j % nodes, with all of
    that node's CPUs (the seed's grouping: the instances of one node share its CPUs)."""
    if pinning == "none":
        return [(None, None)] * count
    if pinning == "instance":
        n = len(cpus)
        if count > n:
            raise SpecError(f"factors.pinning: 'instance' needs a CPU per instance; {count} instances on "
                            f"{n} CPU(s)")
        return [(cpulist(cpus[j * n // count:(j + 1) * n // count]), None) for j in range(count)]
    if pinning == "numa":
        nodes = [c for c in (numa or []) if c] or [cpus]
        return [(cpulist(nodes[j % len(nodes)]), j % len(nodes)) for j in range(count)]
    raise SpecError(f"factors.pinning: unknown level {pinning!r}; allowed: none, instance, numa")


def placement_prefix(tool: str, cpus: str | None, numa_node: int | None) -> list[str]:
    """The wrapper that execs mariadbd on its CPU set (same PID): taskset, or numactl (with the memory
    of its NUMA node when grouped per node)."""
    if cpus is None:
        return []
    if tool == "numactl":
        if numa_node is not None:
            return ["numactl", f"--cpunodebind={numa_node}", f"--membind={numa_node}"]
        return ["numactl", f"--physcpubind={cpus}"]
    return ["taskset", "-c", cpus]


def deal(instances: int, hosts: list[str]) -> list[str]:
    """The host of each instance: round robin over `hosts`."""
    return [hosts[i % len(hosts)] for i in range(instances)]


def tcp_argv(argv: list[str], addresses: list[str], ports: list[int], user: str, password: str) -> list[str]:
    """A socket sysbench argv turned into a TCP one over every host x port pair."""
    out: list[str] = []
    for a in argv:
        if a.startswith("--mysql-socket="):
            out += [f"--mysql-host={','.join(addresses)}", f"--mysql-port={','.join(map(str, ports))}"]
        elif a.startswith("--mysql-user="):
            out += [f"--mysql-user={user}", f"--mysql-password={password}"]
        else:
            out.append(a)
    return out


def parse_proc_stat(text: str) -> dict[str, Any]:
    """Output of :func:`proc_stat_command`: clock ticks per second, uptime, and per pid utime+stime in
    ticks (None for a pid that is gone)."""
    out: dict[str, Any] = {"clk_tck": None, "uptime_s": None, "ticks": {}}
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if parts[0] == "clk" and len(parts) > 1:
            out["clk_tck"] = int(parts[1])
        elif parts[0] == "uptime" and len(parts) > 1:
            out["uptime_s"] = float(parts[1])
        elif parts[0] == "pid" and len(parts) > 1:
            rest = parts[2] if len(parts) > 2 else ""
            fields = rest.rsplit(")", 1)[-1].split() if ")" in rest else []
            # after "pid (comm)": state is field 3 -> index 0; utime (14) -> 11, stime (15) -> 12
            out["ticks"][int(parts[1])] = int(fields[11]) + int(fields[12]) if len(fields) > 12 else None
    return out


def proc_stat_command(pids: list[int]) -> str:
    lines = ["echo clk $(getconf CLK_TCK)", "echo uptime $(cut -d' ' -f1 /proc/uptime)"]
    lines += [f"echo pid {p} $(cat /proc/{p}/stat 2>/dev/null)" for p in pids]
    return "; ".join(lines)


def window_figures(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]],
                   cpu_before: dict[str, float | None], cpu_after: dict[str, float | None],
                   elapsed_s: float) -> dict[str, dict[str, Any]]:
    """Per instance: Questions and Com_select deltas over the window, its share of all Questions, queries
    per second over the elapsed time, and mysqld CPU seconds and % of one CPU."""
    deltas = {}
    for name in before:
        d = {k: int(after[name].get(k, 0) or 0) - int(before[name].get(k, 0) or 0) for k in ("Questions", "Com_select")}
        deltas[name] = d
    total = sum(d["Questions"] for d in deltas.values())
    out: dict[str, dict[str, Any]] = {}
    for name, d in deltas.items():
        cb, ca = cpu_before.get(name), cpu_after.get(name)
        cpu_s = None if cb is None or ca is None else round(ca - cb, 3)
        out[name] = {"questions": d["Questions"], "com_select": d["Com_select"],
                     "share": round(d["Questions"] / total, 6) if total else None,
                     "qps_status": round(d["Questions"] / elapsed_s, 3) if elapsed_s > 0 else None,
                     "cpu_s": cpu_s,
                     "cpu_pct": round(100 * cpu_s / elapsed_s, 2) if cpu_s is not None and elapsed_s > 0 else None}
    return out


# ------------------------------------------------------------------------------------ the topology

@dataclass
class _HostGroup:
    ctx: HostContext
    plans: list[InstancePlan] = field(default_factory=list)
    servers: list[MariaDBServer] = field(default_factory=list)
    dataset: DatasetInfo | None = None


class Instances(Topology):
    """`ctxs` maps every host of the run (the worker's first) to its context; the dataset was prepared on
    the worker's host (the others prepare theirs on first use)."""

    kind = "instances"
    # Measured on the 2-vCPU VM with 2 instances and a 10 MB datadir: restore ~0.1 s each, start
    # ~0.3 s each, drop caches ~0.4 s, variables and snapshots ~0.2 s, parallel clean shutdown ~2 s.
    # (the quick reference: 2.0 s median gap between run starts minus the window)
    overhead_s = 3.0
    first_step = "plan"

    def __init__(self, ctxs: dict[str, HostContext], exp: Experiment, run: PlannedRun, dataset: DatasetInfo) -> None:
        if not exp.topology.instances:
            raise SpecError("topology: the instances topology needs topology: {kind: instances}")
        self.ctxs, self.exp, self.run, self.dataset = ctxs, exp, run, dataset
        worker = next(iter(ctxs.values()))
        self.host_names = list(exp.topology.hosts or (worker.spec.name,))
        missing = [h for h in self.host_names if h not in ctxs]
        if missing:
            raise SpecError(f"topology.hosts: no connection to {', '.join(missing)} (not in the inventory?)")
        client = exp.topology.client or self.host_names[0]
        self.client_ctx = ctxs[client]
        self.client_host = self.measured_host = self.client_ctx.host
        self.client_prefix = exp.cpu_placement.prefix("client")
        self.collect_dir = f"{self.client_ctx.spec.workdir}/run/collect"
        self.tpcc_script = None
        self.groups: dict[str, _HostGroup] = {h: _HostGroup(ctxs[h]) for h in self.host_names}
        self.groups[worker.spec.name].dataset = dataset
        self.plans: list[InstancePlan] = []
        self.tcp = any(h != client for h in self.host_names)
        self.ports: list[int] = []
        self.block: PortBlock | None = None
        self.before: dict[str, dict[str, str]] = {}
        self.after: dict[str, dict[str, str]] = {}
        self.cpu_before: dict[str, float | None] = {}
        self.cpu_after: dict[str, float | None] = {}
        self.t_open = self.t_close = 0.0
        self.state = worker.media.get(run.cell.medium)

    def start_record(self) -> RunRecord:
        worker = next(iter(self.ctxs.values()))
        to_dict = getattr(self.state, "to_dict", None)
        m = run_record(self.exp, self.run, worker, self.dataset, {self.run.cell.medium: to_dict()} if to_dict else {})
        m.set(log_dir=None, topology={"kind": "instances", "hosts": self.host_names,
                                         "client": self.client_ctx.spec.name},
                 instances={}, instances_window={})
        return m

    # -------------------------------------------------------------------------------- before the window
    def prepare(self, s: RunSession) -> None:
        cell, exp = s.cell, self.exp
        for name, g in self.groups.items():
            st = g.ctx.media.get(cell.medium)
            if isinstance(st, Exception) or st is None:
                raise RunFailed(f"medium {cell.medium!r} on host {name} is not usable: {st}")
            check_host_cpus(exp, name, int(g.ctx.facts.get("online_cpus") or 0))
            if cell.pinning != "none" and exp.cpu_placement.tool == "numactl" and \
                    not g.ctx.host.run("command -v numactl", check=False).ok:
                raise RunFailed(f"factors.pinning: {cell.pinning!r} with cpu_placement.tool numactl, but host {name} "
                                "has no numactl; install it (apt-get install numactl) or use tool: taskset")
        hosts = deal(cell.instances, self.host_names)
        per_host = {h: hosts.count(h) for h in self.host_names}
        if self.tcp and len(set(per_host.values())) > 1:
            raise RunFailed(f"factors.instances: {cell.instances} instances over {len(self.host_names)} hosts; "
                            "a remote client needs the same number on every host (a multiple of the host count)")
        base = 0
        if self.tcp:  # the same ports on every host, leased machine-wide there (run.ports)
            starts = [g.ctx.port for g in self.groups.values() if g.ctx.port is not None]
            self.block = lease_block([(g.ctx.host, g.ctx.owner()) for g in self.groups.values()],
                                     max(per_host.values()), start=min(starts) if starts else None)
            base = self.block.base
        cache = cache_sizing(cell, self.dataset, self.exp.cache_basis)["cache_bytes"]
        for h, g in self.groups.items():
            spec = g.ctx.spec
            cpus = [int(c) for c in (g.ctx.facts.get("online_cpu_list") or [])] or \
                list(range(int(g.ctx.facts.get("online_cpus") or 1)))
            numa = [list(n.get("cpus") or []) for n in (g.ctx.facts.get("numa") or [])]
            sets = cpu_sets(cell.pinning, per_host[h], cpus, numa)
            address = "127.0.0.1" if not self.tcp else _address(spec)
            root = spec.media[cell.medium].path
            for j in range(per_host[h]):
                index = [i for i, x in enumerate(hosts) if x == h][j] + 1
                port = base + j if self.tcp else None  # over sockets only: no TCP at all
                rundir = f"{spec.workdir}/run/instances"
                paths = ServerPaths.under(rundir, f"{root}/instances/i{index}", f"i{index}", port)
                plan = InstancePlan(index, h, address, paths, *sets[j])
                options = render_options(cell, paths, user=g.ctx.user, cache=cache, constants=exp.server_options)
                options = _network_options(options, address if self.tcp else None)
                prefix = [*placement_prefix(exp.cpu_placement.tool, plan.cpus, plan.numa_node),
                          *media.launch_prefix(spec.media[cell.medium])]
                g.plans.append(plan)
                g.servers.append(MariaDBServer(g.ctx.host, paths, options, prefix=prefix))
        self.plans = sorted((p for g in self.groups.values() for p in g.plans), key=lambda p: p.index)
        if self.tcp:
            self.ports = sorted({p.paths.port for p in self.plans if p.paths.port is not None})
        m = s.record
        m.client = {"host": self.client_ctx.spec.name, "transport": "tcp" if self.tcp else "socket",
                       "sockets": [] if self.tcp else self.sockets(),
                       "addresses": self._addresses() if self.tcp else [], "ports": self.ports}
        m.instances = {p.name: {**p.to_dict(), "command": sv.command, "options": sv.options}
                          for g in self.groups.values() for p, sv in zip(g.plans, g.servers)}
        first = self.groups[self.host_names[0]].servers[0]
        m.server = {"command": first.command, "options": first.options}

    def sockets(self) -> list[str]:
        return [p.paths.socket for p in self.plans]

    def _addresses(self) -> list[str]:
        return list(dict.fromkeys(p.address for p in self.plans))

    def devices(self) -> list[str]:
        device = getattr(self.state, "device", None)
        return [device] if device else []

    def bench_command(self, s: RunSession, time_s: int, histogram: bool, checkpoint_s: int | None = None) -> str:
        argv = workloads.command(s.exp, s.cell, "run", socket=",".join(self.sockets()), threads=s.cell.threads,
                                 time_s=time_s, seed=s.seed, histogram=histogram, rate=s.rate,
                                 checkpoint_s=checkpoint_s)
        if self.tcp:
            argv = tcp_argv(argv, self._addresses(), self.ports, BENCH_USER, BENCH_PASSWORD)
        return sysbench.command_string([*self.client_prefix, *argv])

    def start(self, s: RunSession) -> None:
        m = s.record
        s.mark("restore")
        for g in self.groups.values():
            if g.dataset is None:  # another host of the run: its own snapshot, prepared once
                c = g.ctx
                g.dataset = prepare_dataset(c.host, c.spec.workdir, self.exp, s.cell, c.user, None)
            g.ctx.host.run("mkdir -p " + shlex.join(sorted({p.paths.socket.rsplit('/', 1)[0] for p in g.plans})))
            for p in g.plans:
                restore(g.ctx.host, g.dataset, p.paths.datadir)
        m.datasets = {n: g.dataset.key for n, g in self.groups.items() if g.dataset is not None}
        s.mark("drop_caches")
        m.os_cache_dropped = all(drop_os_caches(g.ctx.host) for g in self.groups.values())
        s.mark("start")
        t0 = time.monotonic()
        for g in self.groups.values():
            for p, sv in zip(g.plans, g.servers):
                sv.start()
                m.instances[p.name].update(pid=sv.pid, start_s=round(sv.started_s or 0, 3))
                if p.cpus is not None:
                    affinity = g.ctx.host.run(f"taskset -cp {sv.pid}", check=False).stdout.strip()
                    m.instances[p.name]["affinity"] = affinity
        m.instances_start_s = round(time.monotonic() - t0, 3)
        first = self.groups[self.client_ctx.spec.name].servers
        self.measured_pid = first[0].pid if first else None
        m.server["pid"] = self.measured_pid
        s.mark("variables")
        for g in self.groups.values():
            for p, sv in zip(g.plans, g.servers):
                v = sv.global_variables()
                s.save_tsv(f"variables-{p.name}.tsv", v)
                if p.index == 1:
                    key = engines.engine(s.cell.engine).cache_variable
                    m.cache_bytes_effective = int(v.get(key, 0) or 0)
                if self.tcp:
                    sv.sql(f"CREATE USER IF NOT EXISTS '{BENCH_USER}'@'%' IDENTIFIED BY '{BENCH_PASSWORD}'; "
                           f"GRANT ALL ON sbtest.* TO '{BENCH_USER}'@'%'")

    def after_warmup(self, s: RunSession) -> None:
        dead = self._dead()
        if dead:
            raise RunFailed(f"instance(s) {', '.join(dead)} died during the warm-up")

    # -------------------------------------------------------------------------------- the window
    def open_window(self, s: RunSession) -> None:
        self.before = self._status()
        self.cpu_before = self._cpu_seconds()
        self.t_open = time.monotonic()

    def close_window(self, s: RunSession, result: CommandResult) -> None:
        self.t_close = time.monotonic()
        dead = self._dead()
        if dead:
            raise RunFailed(f"instance(s) {', '.join(dead)} died during the measured window "
                            f"(sysbench exit {result.exit_code})")
        self.cpu_after = self._cpu_seconds()
        self.after = self._status()

    def after_window(self, s: RunSession) -> None:
        for name in self.before:
            s.save_tsv(f"status-before-{name}.tsv", self.before[name])
            s.save_tsv(f"status-after-{name}.tsv", self.after.get(name, {}))
        elapsed = self.t_close - self.t_open
        figures = window_figures(self.before, self.after, self.cpu_before, self.cpu_after, elapsed)
        s.record.instances_window = {"elapsed_s": round(elapsed, 3), "per_instance": figures}

    def check_results(self, s: RunSession, parsed: SysbenchOutput) -> None:
        # sysbench deals its connections round robin over the sockets: with fewer threads than instances the
        # last instances get none (expected, recorded). Questions counts our own SHOW STATUS: use Com_select.
        idle = [n for n, f in s.record.instances_window["per_instance"].items()
                if not f["com_select"] and int(n[1:]) <= s.cell.threads]
        if idle and s.cell.workload in ("oltp_point_select", "oltp_read_only", "oltp_read_write"):
            raise RunFailed(idle_instances_reason(idle, (s.record.window or {}).get("hooks_late_s"),
                                                  s.exp.measure_s))

    # -------------------------------------------------------------------------------- stopping
    def _stop_all(self, mode: str = "clean") -> list[str]:
        """Stop every instance (`mode` as MariaDBServer.stop; a clean shutdown runs a host's instances in
        parallel) and give the leased ports back; returns the errors."""
        errors = []
        for g in self.groups.values():
            live = [sv for sv in g.servers if sv.pid is not None]
            if live and mode == "clean":
                cmds = [shlex.join(["mariadb-admin", "--no-defaults", "-uroot", f"--socket={sv.paths.socket}",
                                    "shutdown"]) + " &" for sv in live]
                g.ctx.host.run(" ".join(cmds) + " wait", check=False, timeout=600)
            for sv in live:
                try:
                    sv.stop(mode=mode)
                except Exception as exc:  # noqa: BLE001 - stop the others; report every failure
                    errors.append(f"{sv.paths.socket}: {type(exc).__name__}: {exc}")
        if self.block is not None:
            self.block.release()
            self.block = None
        return errors

    def stop(self, s: RunSession) -> None:
        m = s.record
        t0 = time.monotonic()
        errors = self._stop_all(self.exp.stop_mode)  # the datadirs are restored afresh by the next run
        m.instances_stop_s = round(time.monotonic() - t0, 3)
        for g in self.groups.values():
            for p, sv in zip(g.plans, g.servers):
                m.instances[p.name].update(stop_s=round(sv.stop_s or 0, 3), clean_shutdown=sv.clean_shutdown,
                                              stop_mode=sv.stop_mode)
        m.server.update(stop_s=m.instances_stop_s, stop_mode=self.exp.stop_mode,
                        clean_shutdown=all(m.instances[p.name].get("clean_shutdown") for p in self.plans))
        if errors:
            m.stop_error = errors

    def stop_after_failure(self, s: RunSession) -> None:
        try:
            errors = self._stop_all()
        except Exception as exc:  # noqa: BLE001 - keep the first error; note the second
            errors = [f"{type(exc).__name__}: {exc}"]
        if errors:
            s.record.stop_error = errors

    def abort(self) -> None:
        self._stop_all()

    def save_outputs(self, s: RunSession) -> None:
        if s.step in ("plan", "restore"):
            return
        for g in self.groups.values():
            for p in g.plans:
                s.fetch(g.ctx.host, p.paths.error_log, f"mariadbd-{p.name}.err")

    # -------------------------------------------------------------------------------- helpers
    def _each(self) -> list[tuple[InstancePlan, MariaDBServer, Host]]:
        return [(p, sv, g.ctx.host) for g in self.groups.values() for p, sv in zip(g.plans, g.servers)]

    def _dead(self) -> list[str]:
        return [p.name for p, sv, h in self._each()
                if sv.pid is None or not h.run(f"kill -0 {sv.pid}", check=False).ok]

    def _status(self) -> dict[str, dict[str, str]]:
        return {p.name: sv.global_status() for p, sv, _ in self._each()}

    def _cpu_seconds(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for g in self.groups.values():
            pids = [sv.pid for sv in g.servers if sv.pid is not None]
            parsed = parse_proc_stat(g.ctx.host.run(proc_stat_command(pids), check=False).stdout)
            tck = parsed["clk_tck"] or 100
            for p, sv in zip(g.plans, g.servers):
                ticks = parsed["ticks"].get(sv.pid) if sv.pid is not None else None
                out[p.name] = None if ticks is None else ticks / tck
        return out


def _address(spec: Any) -> str:
    if spec.is_local:
        raise SpecError(f"topology.hosts: host {spec.name!r} has address 'local', which a client on another host "
                        "cannot reach; give its network address in the inventory")
    return str(spec.address)


def _network_options(options: list[str], bind: str | None) -> list[str]:
    """Over sockets only: no TCP listener (no port to race for); over TCP: listen on the host's address."""
    if bind is None:
        return options if "--skip-networking" in options else [*options, "--skip-networking"]
    return [f"--bind-address={bind}" if o.startswith("--bind-address=") else o for o in options]


def idle_instances_reason(idle: list[str], hooks_late_s: float | None, measure_s: float) -> str:
    """Why instances show no SELECT in the window. Usually the client left them without a connection; but
    when the snapshot at the window's start came late (a saturated host can starve the status client for
    tens of seconds: the system collectors then miss their samples too), the counters cover only the
    window's tail, or nothing, and the client is not to blame."""
    names = ", ".join(idle)
    if hooks_late_s is not None and hooks_late_s > 0.25 * measure_s:
        return (f"instance(s) {names} answered no SELECT between the per-instance snapshots, the first of "
                f"which came {hooks_late_s:.1f} s after the window opened (a {measure_s:g} s window): the host "
                "starved the status client, so the instances' counters do not cover the window")
    return (f"instance(s) {names} answered no SELECT in the window: the client did not spread its threads over "
            "every instance")
