"""Topologies in a spec (pure): standalone servers, a Galera cluster (with its followers' calibration)
or several instances per run, CPU placement, and the checks of a topology against the factors and a
host's CPUs and media.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dbmatrix import engines
from dbmatrix.spec.errors import SpecError, positive_int
from dbmatrix.spec.factors import FACTOR_DEFAULTS, GALERA_FACTORS, INSTANCES_FACTORS

if TYPE_CHECKING:
    from dbmatrix.spec.experiment import Experiment


TOPOLOGIES = ("standalone", "galera", "instances")
SST_METHODS = ("rsync", "mariabackup")
MAX_GALERA_NODES = 9
MAX_INSTANCES_PER_HOST = 32  # one TCP port each within a host's block of 40 (run.ports.PORTS_PER_HOST)
PLACEMENT_TOOLS = ("taskset", "numactl")


@dataclass(frozen=True)
class CpuPlacement:
    """CPU lists for the server and the client (sysbench), applied with taskset or numactl."""

    server: str | None = None
    client: str | None = None
    tool: str = "taskset"

    def prefix(self, who: str) -> list[str]:
        cpus = self.server if who == "server" else self.client
        if not cpus:
            return []
        if self.tool == "numactl":
            return ["numactl", f"--physcpubind={cpus}"]
        return ["taskset", "-c", cpus]


@dataclass(frozen=True)
class Calibration:
    """A Galera study's calibration of its followers' bottleneck: before a campaign's runs, one short run per
    candidate limit (mildest first, one applier) until flow control pauses the cluster at least
    `target_fc_paused_pct` % of the window; that limit then holds for the campaign. An I/O limit throttles
    the followers' medium `medium`; ``cpu_max`` limits each follower's mariadbd to a share of one CPU (cgroup
    cpu.max, candidates in % of one CPU; `medium` is then empty)."""

    medium: str
    limit: str  # read_iops | write_iops | read_bps | write_bps | cpu_max
    candidates: tuple[int, ...]
    target_fc_paused_pct: float = 30.0
    warmup_s: int = 3
    measure_s: int = 8

    @property
    def cpu(self) -> bool:
        """The followers are limited in CPU (cgroup cpu.max), not through a throttled medium."""
        return self.limit in CPU_LIMITS


@dataclass(frozen=True)
class Topology:
    """Standalone servers (one per run), a Galera cluster of `nodes` nodes per run, or several server
    instances per run (``instances``: the count is the factor of that name).

    Galera: `hosts` places node i on inventory host hosts[i]; empty: every node on the run's host.
    Instances: instance i runs on hosts[i % len(hosts)] (empty: all on the run's host); `client` names
    the host sysbench runs on (empty: the first host)."""

    kind: str = "standalone"
    nodes: int = 1
    hosts: tuple[str, ...] = ()
    sst_method: str = "rsync"
    client: str = ""
    calibrate: Calibration | None = None

    @property
    def galera(self) -> bool:
        return self.kind == "galera"

    @property
    def instances(self) -> bool:
        return self.kind == "instances"


def parse_topology(raw: Any) -> Topology:
    if raw is None:
        return Topology()
    if isinstance(raw, str):
        raw = {"kind": raw}
    allowed = ("kind", "nodes", "hosts", "sst_method", "client", "calibrate")
    if not isinstance(raw, Mapping) or set(raw) - set(allowed):
        raise SpecError(f"topology: must be a mapping with keys among {', '.join(allowed)}")
    kind = raw.get("kind", "standalone")
    if kind not in TOPOLOGIES:
        raise SpecError(f"topology.kind: unknown {kind!r}; allowed: {', '.join(TOPOLOGIES)}")
    if kind == "standalone":
        if set(raw) - {"kind"}:
            raise SpecError(f"topology: {', '.join(sorted(set(raw) - {'kind'}))} only apply to kind: galera "
                            "or instances")
        return Topology()
    if kind == "instances":
        if "calibrate" in raw:
            raise SpecError("topology.calibrate: only applies to kind: galera (it calibrates the followers' medium)")
        return _parse_instances_topology(raw)
    if "client" in raw:
        raise SpecError("topology.client: only applies to kind: instances (a Galera client runs on node 1's host)")
    nodes = raw.get("nodes", 3)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 2 <= nodes <= MAX_GALERA_NODES:
        raise SpecError(f"topology.nodes: {nodes!r} must be an integer from 2 to {MAX_GALERA_NODES} "
                        "(3 is the usual cluster)")
    hosts = raw.get("hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise SpecError("topology.hosts: must be a list of inventory host names, one per node (or left out: "
                        "every node on the run's host)")
    if hosts and len(hosts) != nodes:
        raise SpecError(f"topology.hosts: {len(hosts)} host(s) listed for {nodes} nodes; list one per node")
    sst = raw.get("sst_method", "rsync")
    if sst not in SST_METHODS:
        raise SpecError(f"topology.sst_method: unknown {sst!r}; allowed: {', '.join(SST_METHODS)}")
    return Topology("galera", nodes, tuple(hosts), sst, calibrate=_parse_calibration(raw.get("calibrate")))


IO_LIMITS = ("read_iops", "write_iops", "read_bps", "write_bps")
CPU_LIMITS = ("cpu_max",)  # % of one CPU per follower mariadbd (cgroup v2 cpu.max / v1 cpu.cfs_quota_us)
CALIBRATION_LIMITS = IO_LIMITS + CPU_LIMITS
MAX_CPU_PCT = 6400  # 64 CPUs' worth


def _parse_calibration(raw: Any) -> Calibration | None:
    if raw is None:
        return None
    keys = ("medium", "limit", "candidates", "target_fc_paused_pct", "warmup_s", "measure_s")
    if not isinstance(raw, Mapping) or set(raw) - set(keys):
        raise SpecError(f"topology.calibrate: must be a mapping with keys among {', '.join(keys)}")
    limit = raw.get("limit", "write_iops")
    if limit not in CALIBRATION_LIMITS:
        raise SpecError(f"topology.calibrate.limit: unknown {limit!r}; allowed: {', '.join(CALIBRATION_LIMITS)}")
    medium = raw.get("medium")
    if limit in CPU_LIMITS:
        if medium is not None:
            raise SpecError(f"topology.calibrate.medium: not used with limit {limit} (it limits the followers' "
                            "CPU, not a medium); remove it, or calibrate an I/O limit "
                            f"({', '.join(IO_LIMITS)}) of a throttled medium")
        medium = ""
    elif not isinstance(medium, str) or not medium:
        raise SpecError("topology.calibrate.medium: required, the name of the throttled medium of the followers "
                        "(a level of factors.follower_medium)")
    cands = raw.get("candidates")
    if not isinstance(cands, list) or not cands or not all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in cands):
        raise SpecError("topology.calibrate.candidates: required, a list of positive integer limits, mildest "
                        "first (e.g. [2000, 1000, 500, 250])")
    if limit in CPU_LIMITS and max(cands) > MAX_CPU_PCT:
        raise SpecError(f"topology.calibrate.candidates: {max(cands)} is not a CPU limit; cpu_max candidates are "
                        f"percentages of one CPU per follower, from 1 to {MAX_CPU_PCT} (e.g. [100, 50, 25])")
    if list(cands) != sorted(cands, reverse=True) or len(set(cands)) != len(cands):
        raise SpecError(f"topology.calibrate.candidates: {cands} must be distinct and in decreasing order "
                        "(mildest limit first: the calibration stops at the first that reaches the target)")
    target = raw.get("target_fc_paused_pct", 30.0)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target < 100:
        raise SpecError(f"topology.calibrate.target_fc_paused_pct: {target!r} must be a percentage in (0, 100)")
    return Calibration(medium, limit, tuple(cands), float(target),
                       positive_int(raw, "warmup_s", 3, minimum=0, where="topology.calibrate."),
                       positive_int(raw, "measure_s", 8, where="topology.calibrate."))


def _parse_instances_topology(raw: Mapping[str, Any]) -> Topology:
    extra = sorted(set(raw) - {"kind", "hosts", "client"})
    if extra:
        raise SpecError(f"topology: {', '.join(extra)} only apply to kind: galera; kind: instances takes "
                        "hosts and client (the instance count is factors.instances)")
    hosts = raw.get("hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise SpecError("topology.hosts: must be a list of inventory host names the instances are dealt over "
                        "(instance i on hosts[i % len(hosts)]), or left out: every instance on the run's host")
    if len(set(hosts)) != len(hosts):
        raise SpecError(f"topology.hosts: {hosts} lists a host twice; list each host once")
    client = raw.get("client") or ""
    if not isinstance(client, str) or (hosts and client and client not in hosts):
        raise SpecError(f"topology.client: {client!r} must be one of topology.hosts ({', '.join(hosts)}), "
                        "or left out (the first host)")
    return Topology("instances", 1, tuple(hosts), "rsync", client or (hosts[0] if hosts else ""))


def check_build_topology(exp: Experiment) -> None:
    """Builds other than the installed server run in the standalone topology only (one server per run)."""
    if list(exp.factors["server_build"]) != [FACTOR_DEFAULTS["server_build"]] and exp.topology.kind != "standalone":
        raise SpecError(f"factors.server_build: builds other than the installed server run in the standalone "
                        f"topology only (this spec's is {exp.topology.kind}); allowed here: system")


def check_topology(exp: Experiment) -> None:
    """Galera-only factors need a galera topology, instances-only factors the instances topology; a galera
    cluster needs InnoDB and a shared log medium; instances keep the log with the data."""
    f = exp.factors
    check_build_topology(exp)
    if not exp.topology.instances:
        for name in INSTANCES_FACTORS:
            if list(f[name]) != [FACTOR_DEFAULTS[name]]:
                raise SpecError(f"factors.{name}: only applies to several server instances per run; add "
                                "topology: {kind: instances} or remove the factor")
    else:
        most = max(instances_per_host(exp, n) for n in f["instances"])
        if most > MAX_INSTANCES_PER_HOST:
            raise SpecError(f"factors.instances: {most} instances on one host; allowed: up to "
                            f"{MAX_INSTANCES_PER_HOST} per host (list more hosts in topology.hosts)")
        if list(f["log_medium"]) != ["same"]:
            raise SpecError("factors.log_medium: the instances topology keeps each redo log with its data; "
                            "allowed: same")
        if any(w == "tpcc" for w in f["workload"]):
            raise SpecError("factors.workload: tpcc is not supported by the instances topology (its consistency "
                            "check reads one server); allowed: the oltp_* workloads")
        for name in GALERA_FACTORS:
            if list(f[name]) != [FACTOR_DEFAULTS[name]]:
                raise SpecError(f"factors.{name}: only applies to a Galera cluster")
        return
    if not exp.topology.galera:
        for name in GALERA_FACTORS:
            if list(f[name]) != [FACTOR_DEFAULTS[name]]:
                raise SpecError(f"factors.{name}: only applies to a Galera cluster; add topology: "
                                "{kind: galera, nodes: 3} or remove the factor")
        return
    if not all(engines.engine(e).galera for e in f["engine"]):
        replicated = [e for e in engines.engines() if e.galera]
        raise SpecError(f"factors.engine: a Galera cluster replicates {' and '.join(e.title for e in replicated)} "
                        f"only; allowed: {', '.join(e.name for e in replicated)}")
    if list(f["log_medium"]) != ["same"]:
        raise SpecError("factors.log_medium: a Galera topology keeps the redo log with the data; allowed: same")
    cal = exp.topology.calibrate
    if cal is not None and not cal.cpu and cal.medium not in f["follower_medium"]:
        raise SpecError(f"topology.calibrate.medium: {cal.medium!r} is not a level of factors.follower_medium "
                        f"({', '.join(f['follower_medium'])}); calibrate the medium the followers use")
    for w in f["write_to"]:
        if w != "all" and int(w[4:]) > exp.topology.nodes:
            raise SpecError(f"factors.write_to: {w!r} is not a node of this {exp.topology.nodes}-node cluster; "
                            f"allowed: {', '.join(f'node{i}' for i in range(1, exp.topology.nodes + 1))}, all")


def _cpu_list(where: str, v: Any) -> str | None:
    if v is None:
        return None
    text = str(v)
    parts = text.split(",")
    ok = bool(text) and all(p.isdigit() or (p.count("-") == 1 and all(x.isdigit() for x in p.split("-")))
                            for p in parts)
    if not ok:
        raise SpecError(f"{where}: {v!r} is not a CPU list; allowed: numbers and ranges such as '0', '0-3' "
                        "or '0,2'")
    return text


def parse_placement(raw: Any) -> CpuPlacement:
    if raw is None:
        return CpuPlacement()
    if not isinstance(raw, Mapping) or set(raw) - {"server", "client", "tool"}:
        raise SpecError("cpu_placement: must be a mapping with keys server, client (CPU lists) and tool")
    tool = raw.get("tool", "taskset")
    if tool not in PLACEMENT_TOOLS:
        raise SpecError(f"cpu_placement.tool: unknown {tool!r}; allowed: {', '.join(PLACEMENT_TOOLS)}")
    return CpuPlacement(_cpu_list("cpu_placement.server", raw.get("server")),
                        _cpu_list("cpu_placement.client", raw.get("client")), tool)


def instances_per_host(exp: Experiment, instances: int, host: str | None = None) -> int:
    """How many of `instances` run on `host` (the most on any host when None): dealt round robin over
    ``topology.hosts`` (all on the run's host when it lists none)."""
    hosts = exp.topology.hosts or (host or "",)
    counts = [len(range(i, instances, len(hosts))) for i in range(len(hosts))]
    if host is None or host not in hosts:
        return max(counts)
    return counts[hosts.index(host)]


def check_host_cpus(exp: Experiment, host: str, cpus: int, numa_nodes: int = 1) -> None:
    """Plan-time checks of the instances topology against a host's CPUs: one CPU set per instance needs
    at least one CPU per instance on the host; per-NUMA-node grouping needs a NUMA node for it."""
    if not exp.topology.instances or cpus <= 0:
        return
    for n in exp.factors["instances"]:
        k = instances_per_host(exp, n, host)
        if "instance" in exp.factors["pinning"] and k > cpus:
            raise SpecError(f"factors.pinning: 'instance' gives each of the {k} instances on host {host!r} "
                            f"(factors.instances {n}) its own CPU set, but the host has {cpus} CPU(s); "
                            f"allowed: instances up to {cpus * max(1, len(exp.topology.hosts))}, or pinning none/numa")
    if "numa" in exp.factors["pinning"] and numa_nodes < 1:
        raise SpecError(f"factors.pinning: 'numa' needs NUMA nodes on host {host!r}; allowed: none, instance")


def check_builds(exp: Experiment, build_names: Iterable[str], host: str) -> None:
    """Every level of factors.server_build is a build of the host (``system`` always is)."""
    names = sorted(build_names)
    for b in exp.factors["server_build"]:
        if b not in names:
            raise SpecError(f"factors.server_build: {b!r} is not a build of host {host!r}; its builds are: "
                            f"{', '.join(names)} (inventory.hosts[{host}].builds)")


def check_media(exp: Experiment, media_names: Iterable[str], host: str) -> None:
    names = sorted(media_names)
    for factor, levels in (("medium", exp.factors["medium"]),
                           ("log_medium", [m for m in exp.factors["log_medium"] if m != "same"]),
                           ("follower_medium", [m for m in exp.factors["follower_medium"] if m != "same"])):
        for m in levels:
            if m not in names:
                raise SpecError(f"factors.{factor}: {m!r} is not defined on host {host!r}; "
                                f"its media are: {', '.join(names) or '(none)'}")
