"""Galera clusters of our own `mariadbd` nodes: placement, options, status parsing (pure) and the
cluster lifecycle through :class:`~dbmatrix.hosts.remote.Host` (bootstrap, join, wait Synced, sample, stop).

Facts this module relies on (MariaDB 10.11 with galera-4 26.4, checked on this machine):

* Node options as in FIELD-NOTES: ``--wsrep-on=ON --wsrep-provider=… --wsrep-cluster-address=gcomm://…
  --wsrep-node-address=… --wsrep-provider-options=base_host=…;base_port=G;gmcast.listen_addr=tcp://…:G;
  ist.recv_addr=…:I --wsrep-sst-receive-address=…:S --wsrep-sst-method=rsync --binlog-format=ROW
  --innodb-autoinc-lock-mode=2``, and ``--wsrep-new-cluster`` on the bootstrap node only.
* rsync SST fails when nodes run as root (the joiner's rsync drops to nobody): as root we start the nodes
  as ``mysql`` through ``setpriv --reuid=mysql --regid=mysql --init-groups --`` and chown their
  directories; ``setpriv`` execs, so the PID we get is mariadbd's. ``wsrep_sst_method=skip`` with
  copied datadirs hangs joiners: a joiner starts from an empty datadir and receives a full SST.
* ``FLUSH LOCAL STATUS`` resets the "since the last flush" wsrep figures: the averages and extremes of the
  send/receive queues, ``wsrep_flow_control_paused`` (a fraction), ``wsrep_flow_control_sent/recv``,
  ``wsrep_cert_deps_distance``, ``wsrep_apply_window``, ``wsrep_commit_window``, ``wsrep_cert_interval``.
  It does not reset ``wsrep_flow_control_paused_ns`` nor ``wsrep_replicated``, ``wsrep_received``,
  ``wsrep_local_commits``, ``wsrep_last_committed`` and the byte counters. So the measured window starts
  with ``FLUSH LOCAL STATUS`` on every node, then a status snapshot; window figures are deltas of the
  counters between that snapshot and one at the end, and the "since flush" averages read at the end.
* ``wsrep_slave_threads`` (10.11 has no ``wsrep_applier_threads``) is a start option here; the status
  ``wsrep_applier_thread_count`` shows the appliers actually running.
"""

from __future__ import annotations

import re
import shlex
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import CommandError, Host
from dbmatrix.parse.wsrep import CLOCK_KEY, SAMPLED, sync_problem
from dbmatrix.run.mysqld import (
    MariaDBServer,
    ServerPaths,
    client_command,
    parse_tsv_pairs,
    render_options,
)
from dbmatrix.spec.experiment import Cell, SpecError, Topology

GALERA_PROVIDER = "/usr/lib/galera/libgalera_smm.so"
GALERA_USER = "mysql"  # the OS user nodes run as when we are root (rsync SST refuses root)
PORTS_PER_NODE = 4  # mysql, gcomm (group communication), IST, SST


class GaleraError(RuntimeError):
    """The cluster could not be formed, did not sync, or lost a node."""


# =============================================================================== placement (pure)

@dataclass(frozen=True)
class NodePorts:
    mysql: int
    gcomm: int
    ist: int
    sst: int


@dataclass(frozen=True)
class NodePlan:
    """Where node `index` (1-based) lives and how the others reach it."""

    index: int
    host: str  # inventory host name
    address: str  # the address the other nodes reach it at
    ports: NodePorts
    paths: ServerPaths
    rundir: str

    @property
    def name(self) -> str:
        return f"node{self.index}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["name"] = self.name
        return d


def port_block(base: int, index: int) -> NodePorts:
    """The four ports of node `index` (1-based): consecutive, starting at base + 4 (index - 1)."""
    p = base + PORTS_PER_NODE * (index - 1)
    return NodePorts(p, p + 1, p + 2, p + 3)


def node_address(spec: HostSpec, single_host: bool) -> str:
    """127.0.0.1 when every node shares one host; else the inventory address of the node's host."""
    if single_host:
        return "127.0.0.1"
    if spec.is_local:
        raise SpecError(f"topology.hosts: host {spec.name!r} has address 'local', which the nodes on other "
                        "hosts cannot reach; give its network address in the inventory")
    return spec.address


def plan_nodes(topology: Topology, hostspecs: Sequence[HostSpec], data_roots: Sequence[str],
               base_port: int) -> list[NodePlan]:
    """Placement of every node: `hostspecs[i]` and `data_roots[i]` (a directory on the cell's medium of
    that host) belong to node i+1. Datadirs are ``<data_root>/galera/nodeK``, sockets, pid files and
    error logs in ``<workdir>/run/galera/nodeK``."""
    n = topology.nodes
    if len(hostspecs) != n or len(data_roots) != n:
        raise SpecError(f"topology: {n} nodes need {n} hosts and data directories, got {len(hostspecs)} "
                        f"and {len(data_roots)}")
    single = len({h.name for h in hostspecs}) == 1
    plans = []
    for i, (spec, root) in enumerate(zip(hostspecs, data_roots), start=1):
        ports = port_block(base_port, i)
        rundir = f"{spec.workdir}/run/galera/node{i}"
        paths = ServerPaths(f"{root}/galera/node{i}", f"{rundir}/bench.sock", f"{rundir}/bench.pid",
                            f"{rundir}/bench.err", ports.mysql)
        plans.append(NodePlan(i, spec.name, node_address(spec, single), ports, paths, rundir))
    return plans


def client_sockets(nodes: Sequence[NodePlan], write_to: str) -> list[str]:
    """The sockets sysbench connects to: node K's for ``nodeK``, every node's for ``all`` (sysbench spreads
    its threads round robin). The client runs on node 1's host and connects over unix sockets, so the
    nodes it writes to must live there."""
    if write_to == "all":
        targets = list(nodes)
    else:
        k = int(write_to.removeprefix("node"))
        if not 1 <= k <= len(nodes):
            raise SpecError(f"factors.write_to: {write_to!r} is not a node of this {len(nodes)}-node cluster")
        targets = [nodes[k - 1]]
    remote = [t.name for t in targets if t.host != nodes[0].host]
    if remote:
        raise SpecError(f"factors.write_to: {write_to!r} needs a client connection to {', '.join(remote)} on "
                        f"another host than node1 ({nodes[0].host}); the client connects over unix sockets on "
                        "node1's host only: place those nodes there or write to node1")
    return [t.paths.socket for t in targets]


def cluster_name(run_id: str, base_port: int) -> str:
    """A name of its own per run, so a node can never join another session's cluster."""
    return f"dbmatrix-{zlib.crc32(f'{run_id}:{base_port}'.encode()):08x}"


def launcher_prefix(run_as: str | None) -> list[str]:
    """Argv that starts mariadbd as `run_as` (we are root) and execs it, keeping the PID."""
    if not run_as:
        return []
    return ["setpriv", f"--reuid={run_as}", f"--regid={run_as}", "--init-groups", "--"]


def wsrep_options(nodes: Sequence[NodePlan], index: int, *, name: str, sst_method: str, slave_threads: int,
                  bootstrap: bool, provider: str = GALERA_PROVIDER) -> list[str]:
    """The wsrep part of node `index`'s command line."""
    me = nodes[index - 1]
    members = ",".join(f"{n.address}:{n.ports.gcomm}" for n in nodes)
    provider_opts = ";".join([
        f"base_host={me.address}", f"base_port={me.ports.gcomm}",
        f"gmcast.listen_addr=tcp://{me.address}:{me.ports.gcomm}",
        f"ist.recv_addr={me.address}:{me.ports.ist}",
    ])
    opts = [
        "--wsrep-on=ON",
        f"--wsrep-provider={provider}",
        f"--wsrep-cluster-name={name}",
        f"--wsrep-cluster-address=gcomm://{members}",
        f"--wsrep-node-name={me.name}",
        f"--wsrep-node-address={me.address}",
        f"--wsrep-provider-options={provider_opts}",
        f"--wsrep-sst-receive-address={me.address}:{me.ports.sst}",
        f"--wsrep-sst-method={sst_method}",
        f"--wsrep-slave-threads={slave_threads}",
        "--binlog-format=ROW",
        "--innodb-autoinc-lock-mode=2",
    ]
    if bootstrap:
        opts.append("--wsrep-new-cluster")
    return opts


def node_options(cell: Cell, nodes: Sequence[NodePlan], index: int, *, user: str, cache: int | None,
                 constants: Mapping[str, str] | None, name: str, sst_method: str) -> list[str]:
    """The full mariadbd command line of node `index`: the cell's options (as a standalone server of
    that cell would get them) plus the wsrep options; node 1 bootstraps the cluster."""
    me = nodes[index - 1]
    opts = render_options(cell, me.paths, user=user, cache=cache, constants=constants)
    return opts + wsrep_options(nodes, index, name=name, sst_method=sst_method,
                                slave_threads=cell.slave_threads, bootstrap=index == 1)


# =============================================================================== commands (pure)

def parse_status(text: str) -> dict[str, str]:
    """Batch-mode ``name<TAB>value`` lines (SHOW GLOBAL STATUS, with the clock line) -> {name: value}."""
    return parse_tsv_pairs(text)


def status_query(like: str | None = None) -> str:
    """One client call: the server's clock (µs) and then SHOW GLOBAL STATUS (optionally LIKE `like`)."""
    show = "SHOW GLOBAL STATUS" + (f" LIKE '{like}'" if like else "")
    return f"SELECT '{CLOCK_KEY}', UNIX_TIMESTAMP(NOW(6)); {show}"


def sampler_script(nodes: Sequence[tuple[str, str]], out_path: str, stop_path: str, interval_s: float = 1.0) -> str:
    """A POSIX shell loop that appends ``<epoch s> <node> <variable> <value>`` lines for the
    :data:`SAMPLED` variables of every ``(node name, socket)`` each `interval_s` until `stop_path`
    exists. Each round's queries run in the background, so a slow query does not shift the cadence."""
    names = ", ".join(f"'{v}'" for v in SAMPLED)
    sql = f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})"
    q = shlex.quote
    per_node = []
    for name, socket in nodes:
        cmd = shlex.join(["mariadb", "--no-defaults", "-uroot", f"--socket={socket}", "--connect-timeout=2",
                          "-N", "-B", "-e", sql])
        per_node.append(f"{cmd} 2>/dev/null | sed \"s/^/$t {name} /\" >> {q(out_path)}")
    round_ = "t=$(date +%s.%N); " + "; ".join(per_node)
    return "\n".join([
        f": > {q(out_path)}",
        f"while [ ! -e {q(stop_path)} ]; do",
        f"  ( {round_} ) &",
        f"  sleep {interval_s:g}",
        "done",
        "wait",
    ]) + "\n"


# =============================================================================== side effects

def run_as_user(host: Host) -> str | None:
    """The OS user the nodes run as: ``mysql`` when we are root (rsync SST refuses root), else None
    (we run them as ourselves, which rsync accepts)."""
    if not host.is_root():
        return None
    if not host.run(f"id -u {GALERA_USER}", check=False).ok:
        raise GaleraError(f"[{host.name}] user {GALERA_USER!r} does not exist; it comes with the mariadb-server "
                          "package (rsync SST cannot run the nodes as root)")
    return GALERA_USER


def check_sst_method(host: Host, method: str) -> None:
    tool = {"rsync": "rsync", "mariabackup": "mariabackup"}[method]
    if host.which(tool) is None or host.which(f"wsrep_sst_{method}") is None:
        pkg = {"rsync": "rsync", "mariabackup": "mariadb-backup"}[method]
        raise GaleraError(f"[{host.name}] topology.sst_method {method!r} needs {tool} and wsrep_sst_{method}; "
                          f"install the {pkg} package")


def process_alive(host: Host, pid: int) -> bool:
    """The process exists and is not a zombie (a killed node whose parent does not reap it is dead)."""
    r = host.run(f"sed -n 's/^.*) \\(.\\).*$/\\1/p' /proc/{int(pid)}/stat", check=False)
    return r.ok and r.stdout.strip() not in ("", "Z", "X")


class GaleraCluster:
    """The nodes of one run's cluster. Nodes are :class:`MariaDBServer` objects on their hosts; node 1
    bootstraps from whatever its datadir holds, the others join with a full state transfer."""

    def __init__(self, hosts: Sequence[Host], nodes: Sequence[NodePlan], options: Sequence[list[str]],
                 run_as: Sequence[str | None], prefixes: Sequence[Sequence[str]] | None = None):
        """`prefixes[i]`: wrappers that exec node i+1's server (a throttle cgroup join, taskset), put before
        the switch to the nodes' user."""
        prefixes = prefixes or [() for _ in nodes]
        if not (len(hosts) == len(nodes) == len(options) == len(run_as) == len(prefixes)):
            raise ValueError("hosts, nodes, options, run_as and prefixes need one entry per node")
        self.hosts = list(hosts)
        self.nodes = list(nodes)
        self.run_as = list(run_as)
        self.servers = [MariaDBServer(h, n.paths, o, prefix=[*p, *launcher_prefix(u)])
                        for h, n, o, u, p in zip(hosts, nodes, options, run_as, prefixes)]
        self.join_s: dict[str, float] = {}
        self.stop_errors: dict[str, str] = {}

    @property
    def size(self) -> int:
        return len(self.nodes)

    # -- directories
    def prepare_dirs(self) -> None:
        """Fresh, empty datadirs and run directories owned by the nodes' user (node 1's datadir is then
        filled by the caller, e.g. datasets.restore, and handed over with :meth:`chown_datadir`)."""
        for host, node, user in zip(self.hosts, self.nodes, self.run_as):
            q = shlex.quote
            d, r, t = node.paths.datadir, node.rundir, node.paths.tmpdir
            host.run(f"rm -rf {q(d)} {q(t)} && mkdir -p {q(d)} {q(r)} {q(t)}")
            if user:
                host.run(f"chown {q(user)}: {q(d)} {q(r)} {q(t)}")
            self._check_reachable(host, node, user)

    def chown_datadir(self, index: int) -> None:
        user = self.run_as[index - 1]
        if user:
            datadir = self.nodes[index - 1].paths.datadir
            self.hosts[index - 1].run(f"chown -R {shlex.quote(user)}: {shlex.quote(datadir)}")

    @staticmethod
    def _check_reachable(host: Host, node: NodePlan, user: str | None) -> None:
        if not user:
            return
        probe = " && ".join(f"test -w {shlex.quote(p)} -a -x {shlex.quote(p)}"
                            for p in (node.paths.datadir, node.rundir))
        r = host.run(shlex.join([*launcher_prefix(user), "sh", "-c", probe]), check=False)
        if not r.ok:
            raise GaleraError(
                f"[{host.name}] {node.name}: user {user!r} cannot enter or write {node.paths.datadir} or "
                f"{node.rundir}; a parent directory is not searchable by others (e.g. a 0700 temporary "
                "directory): put the workdir and the media under a directory others may traverse, such as "
                "/var/tmp")

    # -- lifecycle
    def start_node(self, index: int, timeout_s: float = 600.0) -> float:
        """Start node `index` and wait until it answers (a joiner answers after its state transfer)."""
        server = self.servers[index - 1]
        t0 = time.monotonic()
        server.start(timeout_s=timeout_s)
        return time.monotonic() - t0

    def status(self, index: int, like: str | None = "wsrep%") -> dict[str, str]:
        s = self.servers[index - 1]
        return parse_status(s.host.run(client_command(s.paths.socket, status_query(like)), timeout=60).stdout)

    def wait_synced(self, indexes: Sequence[int] | None = None, timeout_s: float = 600.0,
                    size: int | None = None) -> dict[str, dict[str, str]]:
        """Poll until every node in `indexes` reports Synced in a Primary cluster of `size` nodes; a node
        that died or a timeout raises GaleraError naming the node, its state and its error log tail."""
        idx = list(indexes or range(1, self.size + 1))
        want = size or self.size
        t0 = time.monotonic()
        last: dict[int, str] = {}
        while True:
            statuses: dict[str, dict[str, str]] = {}
            for i in idx:
                self._check_alive(i)
                try:
                    st = self.status(i)
                except CommandError as exc:  # the client cannot connect yet; the timeout will tell
                    last[i] = f"no answer ({type(exc).__name__})"
                    continue
                statuses[self.nodes[i - 1].name] = st
                problem = sync_problem(st, want)
                if problem:
                    last[i] = problem
                else:
                    last.pop(i, None)
            if not last and len(statuses) == len(idx):
                return statuses
            if time.monotonic() - t0 > timeout_s:
                i = min(last)
                raise GaleraError(f"{self.nodes[i - 1].name} not synced after {timeout_s:.0f}s ({last[i]}); "
                                  f"error log tail:\n{self.error_tail(i)}")
            time.sleep(0.2)

    def _check_alive(self, index: int) -> None:
        s = self.servers[index - 1]
        if s.pid is None or not process_alive(s.host, s.pid):
            raise GaleraError(f"{self.nodes[index - 1].name} (pid {s.pid}) is not running; error log tail:\n"
                              f"{self.error_tail(index)}")

    def dead_nodes(self) -> list[str]:
        """Names of the started nodes whose mariadbd is gone."""
        out = []
        for i, s in enumerate(self.servers, start=1):
            if s.pid is not None and not process_alive(s.host, s.pid):
                out.append(self.nodes[i - 1].name)
        return out

    def error_tail(self, index: int, lines: int = 30) -> str:
        s = self.servers[index - 1]
        return s.host.run(f"tail -n {lines} {shlex.quote(s.paths.error_log)}", check=False).stdout

    def bootstrap(self, timeout_s: float = 600.0) -> float:
        """Start node 1 with --wsrep-new-cluster and wait until it is a synced one-node primary cluster."""
        t = self.start_node(1, timeout_s)
        self.wait_synced([1], timeout_s, size=1)
        return t

    def join(self, index: int, timeout_s: float = 600.0) -> float:
        """Start node `index`, let it receive a full state transfer, wait until it is Synced with all the
        nodes started so far; returns the seconds from launch to Synced."""
        t0 = time.monotonic()
        self.start_node(index, timeout_s)
        self.wait_synced(list(range(1, index + 1)), max(1.0, timeout_s - (time.monotonic() - t0)), size=index)
        self.join_s[self.nodes[index - 1].name] = round(time.monotonic() - t0, 3)
        return time.monotonic() - t0

    def start(self, timeout_s: float = 600.0) -> dict[str, float]:
        """Bootstrap node 1, join the others one by one; returns the seconds of each phase."""
        out = {"bootstrap_s": round(self.bootstrap(timeout_s), 3)}
        for i in range(2, self.size + 1):
            self.join(i, timeout_s)
        out.update({f"join_{k}_s": v for k, v in self.join_s.items()})
        return out

    def sql_all(self, query: str) -> dict[str, str]:
        return {n.name: s.sql(query) for n, s in zip(self.nodes, self.servers) if s.pid is not None}

    def stop(self, mode: str = "clean") -> None:
        """Stop every node (`mode` as :meth:`MariaDBServer.stop`), the joiners first (last joined first) and
        node 1 last; never raises, errors are kept in :attr:`stop_errors`. A node that already died is just
        forgotten."""
        for i in range(self.size, 0, -1):
            s = self.servers[i - 1]
            if s.pid is not None and not process_alive(s.host, s.pid):
                s.pid = None  # died (maybe an unreaped zombie, which kill -0 would still find): nothing to stop
                continue
            try:
                s.stop(mode=mode)
            except Exception as exc:  # noqa: BLE001 - stop the others anyway
                self.stop_errors[self.nodes[i - 1].name] = f"{type(exc).__name__}: {exc}"
                if s.pid is not None:
                    s.host.run(f"kill -KILL {s.pid}", check=False)
                    s.pid = None


class WsrepSampler:
    """:func:`sampler_script` running in the background on one host for the nodes placed there."""

    def __init__(self, host: Host, nodes: Sequence[NodePlan], remote_dir: str, interval_s: float = 1.0):
        self.host = host
        self.nodes = list(nodes)
        self.out_path = f"{remote_dir}/wsrep-samples.txt"
        self.stop_path = f"{remote_dir}/wsrep-samples.stop"
        self.script_path = f"{remote_dir}/wsrep-sampler.sh"
        self.interval_s = interval_s
        self.pid: int | None = None
        self.text = ""
        self.error: str | None = None

    def start(self) -> None:
        q = shlex.quote
        d = self.script_path.rsplit("/", 1)[0]
        self.host.run(f"mkdir -p {q(d)} && rm -f {q(self.stop_path)} {q(self.out_path)}")
        self.host.write_text(self.script_path, sampler_script(
            [(n.name, n.paths.socket) for n in self.nodes], self.out_path, self.stop_path, self.interval_s))
        r = self.host.run(f"cd /; setsid nohup sh {q(self.script_path)} > /dev/null 2>&1 < /dev/null & echo $!")
        self.pid = int(r.stdout.strip().splitlines()[-1])

    def stop(self, timeout_s: float = 5.0) -> str:
        """Ask the loop to finish its round, wait, kill its process group if it will not; read the text.
        Idempotent; never raises."""
        if self.pid is None:
            return self.text
        pid, self.pid = self.pid, None
        q = shlex.quote
        rounds = max(1, int(timeout_s / 0.1))
        script = (f"touch {q(self.stop_path)}; i=0; while kill -0 {pid} 2>/dev/null && [ $i -lt {rounds} ]; "
                  f"do sleep 0.1; i=$((i+1)); done; if kill -0 {pid} 2>/dev/null; then "
                  f"kill -TERM -- -{pid} 2>/dev/null; echo killed; fi")
        try:
            r = self.host.run(script, check=False, timeout=timeout_s + 30)
            if "killed" in r.stdout:
                self.error = f"sampler did not stop within {timeout_s:g}s; killed"
            self.text = self.host.run(f"cat {q(self.out_path)}", check=False).stdout
        except Exception as exc:  # noqa: BLE001 - a missing series must never lose a measured run
            self.error = f"{type(exc).__name__}: {exc}"
        return self.text


_SST_MARK = r"WSREP_SST: \[INFO\] .*?SST {what} on joiner \((\d{{8}} \d\d:\d\d:\d\d\.\d+)\)"


def parse_sst_seconds(error_log: str) -> float | None:
    """Seconds between the SST script's "SST started on joiner" and "SST completed on joiner" lines
    of a joiner's error log (their timestamps carry milliseconds); None when either is missing."""
    found = []
    for what in ("started", "completed"):
        m = re.findall(_SST_MARK.format(what=what), error_log)
        if not m:
            return None
        found.append(datetime.strptime(m[-1], "%Y%m%d %H:%M:%S.%f"))
    return round((found[1] - found[0]).total_seconds(), 3)
