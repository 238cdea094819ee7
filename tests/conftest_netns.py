"""Pytest plugin: two throwaway test hosts, each a network namespace with its own address and a real sshd.

``netns_hosts`` (session scope) gives :class:`NetnsHosts`: two :class:`NetnsHost` (``h1``, ``h2``)
reachable from the root namespace, where pytest runs, at 10.201.N.2 port 22 as ``root`` with a key
made at test time, and the helpers to write an inventory for both (:meth:`NetnsHosts.inventory_yaml`).

Per host: ``ip netns add dbmx-hK-<tag>``; a veth pair, root side 10.201.N.1/30, namespace side
10.201.N.2/30 (N picked at random among the /30 blocks of 10.201.0.0/16 no interface or route uses,
under a lock so concurrent sessions never pick the same); loopback up inside (a mariadbd there
listens on the namespace's own 127.0.0.1, so both hosts can use the same port); ``sshd -D -e``
started with ``ip netns exec`` with its own host key and config in a 0700 directory.

What the namespaces share and what they do not: the file system is shared (so each host has its own
``workdir``), processes are visible across, but network (addresses, ports, abstract unix sockets)
is not; and ``ip netns exec`` gives sshd its own mount namespace, so file systems mounted over SSH on
a test host are visible to that host only and vanish with it.

The two hosts reach each other, as the hosts of a Galera cluster spread over an inventory must: a
second veth pair joins the namespaces directly, with a /32 route in each to the other's address (no
forwarding in the root namespace, no other address involved).

Teardown (also after failures, and after a failed setup): sshd is stopped by PID, every process
left in the namespace (a test's mariadbd or sysbench) is TERMed then KILLed (found with
``ip netns pids``: they can only be ours), the namespace and the root-side veth are deleted. sshd
has PR_SET_PDEATHSIG, and a small reaper process (its own session, waiting on a pipe from pytest)
does the same cleanup should pytest be killed without running its teardown.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUBNET = ipaddress.ip_network("10.201.0.0/16")
LOCK_FILE = "/run/lock/dbmx-netns.lock"
SSHD = "/usr/sbin/sshd"
IP = "ip"
READY_TIMEOUT_S = 10.0
KILL_GRACE_S = 5.0  # a TERMed mariadbd shuts down cleanly in 1-2 s


# ---------------------------------------------------------------- cleanup (stdlib only: the reaper runs it too)

def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check, stdin=subprocess.DEVNULL)


def namespace_exists(ns: str) -> bool:
    return os.path.exists(f"/run/netns/{ns}")


def namespace_pids(ns: str) -> list[int]:
    if not namespace_exists(ns):
        return []
    return [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split() if p.isdigit()]


def kill_namespace_processes(ns: str, grace_s: float = KILL_GRACE_S) -> list[int]:
    """TERM every process in namespace `ns`, KILL what is left after `grace_s`; the PIDs found."""
    found = namespace_pids(ns)
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        pids = namespace_pids(ns)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and namespace_pids(ns):
            time.sleep(0.05)
    return found


def remove_namespace(ns: str, veth_root: str) -> None:
    """Kill what runs in `ns`, delete it and the root end of its veth (no error if already gone)."""
    kill_namespace_processes(ns)
    if namespace_exists(ns):
        _ip("netns", "del", ns, check=False)
    if os.path.exists(f"/sys/class/net/{veth_root}"):
        _ip("link", "del", veth_root, check=False)


def _reap(argv: list[str]) -> None:  # pragma: no cover - runs in the reaper process
    """Wait until pytest closes the pipe (or dies), then remove the namespaces still there."""
    sys.stdin.buffer.read()
    for ns, veth in zip(argv[0::2], argv[1::2]):
        if namespace_exists(ns) or os.path.exists(f"/sys/class/net/{veth}"):
            print(f"reaper: removing {ns} and {veth} left behind", flush=True)
            remove_namespace(ns, veth)


if __name__ == "__main__":  # the reaper: python conftest_netns.py --reap NS VETH [NS VETH ...]
    if sys.argv[1:2] == ["--reap"]:
        _reap(sys.argv[2:])
    sys.exit(0)


# ---------------------------------------------------------------- the plugin proper

import pytest  # the reaper above needs only the standard library

try:
    from tests.conftest_sshd import (
        _die_with_parent,
        _keygen,
        _log_tail,
        _stop,
        _wait_listening,
        write_sshd_config,
    )
except ImportError:  # loaded as a top-level module (tests/ on sys.path)
    from conftest_sshd import (  # type: ignore
        _die_with_parent,
        _keygen,
        _log_tail,
        _stop,
        _wait_listening,
        write_sshd_config,
    )


@dataclass(frozen=True)
class NetnsHost:
    """One test host: a namespace with its own address, a real sshd, and a workdir of its own."""

    name: str  # "h1", "h2": also the inventory host name
    namespace: str  # dbmx-h1-<tag>
    address: str  # namespace side, where sshd listens (10.201.N.2)
    gateway: str  # root side of the veth (10.201.N.1)
    veth: str  # root-side interface name
    port: int
    user: str  # "root"
    key_file: str  # client private key (authorized on both hosts)
    known_hosts: str  # both hosts' right keys (like a user's ~/.ssh/known_hosts)
    wrong_known_hosts: str  # this host's address with another key: a "changed" host key
    empty_known_hosts: str  # exists, knows no host: an "unknown" host key
    host_pubkey: str  # "ssh-ed25519 AAAA..."
    workdir: str  # <tmp>/h1-work: datadirs, sockets, media of this host (the file system is shared)
    sshd_pid: int
    log_file: str  # sshd's stderr (-e)
    sshd_config: str  # its configuration, to start it again (sshd rewrites its /proc cmdline)

    def processes(self, *names: str) -> list[int]:
        """PIDs of the processes running in this host's namespace, only those named `names` if given
        (by /proc/PID/comm, e.g. "mariadbd", "sysbench", "sshd")."""
        pids = []
        for pid in namespace_pids(self.namespace):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:  # gone meanwhile
                continue
            if not names or comm in names:
                pids.append(pid)
        return pids

    def start_sshd_again(self, timeout_s: float = READY_TIMEOUT_S) -> int:
        """Start this host's sshd again after a test killed it (a dropped-out host coming back); wait
        until it listens. The namespace teardown stops it. Returns its PID."""
        proc = _start_sshd(self.namespace, Path(self.sshd_config), Path(self.log_file))
        if not _wait_listening(proc, self.address, self.port, timeout_s):
            raise RuntimeError(f"sshd of {self.name} did not listen again; log:\n{_log_tail(Path(self.log_file))}")
        return proc.pid

    def medium_paths(self, media: Mapping[str, Any] | Callable[[NetnsHost], Mapping[str, Any]] | None
                     ) -> dict[str, Any]:
        """`media` for this host: a mapping (``{workdir}``/``{name}`` in string values are filled
        in), a function of the host, or None for ``{"disk": {"kind": "dir", "path": <workdir>/media/disk}}``."""
        if media is None:
            return {"disk": {"kind": "dir", "path": f"{self.workdir}/media/disk"}}
        if callable(media):
            return dict(media(self))

        def fill(v: Any) -> Any:
            if isinstance(v, str):
                return v.replace("{workdir}", self.workdir).replace("{name}", self.name)
            if isinstance(v, Mapping):
                return {k: fill(x) for k, x in v.items()}
            if isinstance(v, list):
                return [fill(x) for x in v]
            return v

        return {k: fill(v) for k, v in media.items()}

    def inventory_entry(self, media: Any = None) -> dict[str, Any]:
        """This host in the inventory format of :mod:`dbmatrix.hosts.inventory`."""
        return {"name": self.name, "address": self.address, "user": self.user, "port": self.port,
                "key_file": self.key_file, "known_hosts": self.known_hosts, "workdir": self.workdir,
                "media": self.medium_paths(media)}

    def host_spec(self, media: Any = None):  # -> dbmatrix.hosts.inventory.HostSpec
        from dbmatrix.hosts.inventory import parse_inventory

        return parse_inventory({"hosts": [self.inventory_entry(media)]}).hosts[0]

    def connect(self):  # -> dbmatrix.hosts.remote.SSHHost, through HostSpec.connect() as a study does
        return self.host_spec().connect()


@dataclass(frozen=True)
class NetnsHosts:
    """The two test hosts (index by position or name) and inventory helpers for both."""

    hosts: tuple[NetnsHost, ...]
    directory: str  # the session's directory: keys, configs, logs, workdirs, inventories

    def __iter__(self) -> Iterator[NetnsHost]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __getitem__(self, key: int | str) -> NetnsHost:
        if isinstance(key, str):
            for h in self.hosts:
                if h.name == key:
                    return h
            raise KeyError(f"no test host {key!r}; hosts: {', '.join(h.name for h in self.hosts)}")
        return self.hosts[key]

    def inventory_dict(self, media: Any = None) -> dict[str, Any]:
        """``{"hosts": [...]}`` for both hosts; `media` as in :meth:`NetnsHost.medium_paths`."""
        return {"hosts": [h.inventory_entry(media) for h in self.hosts]}

    def inventory_yaml(self, path: str | os.PathLike[str] | None = None, media: Any = None) -> str:
        """Write :meth:`inventory_dict` as YAML (default ``<directory>/inventory.yaml``); its path."""
        import yaml

        target = Path(path) if path is not None else Path(self.directory) / "inventory.yaml"
        target.write_text(yaml.safe_dump(self.inventory_dict(media), sort_keys=False))
        return str(target)

    def inventory(self, media: Any = None):  # -> dbmatrix.hosts.inventory.Inventory
        from dbmatrix.hosts.inventory import parse_inventory

        return parse_inventory(self.inventory_dict(media))


def _used_networks() -> list[ipaddress.IPv4Network]:
    """IPv4 networks of the root namespace's addresses and routes (other sessions' veths included)."""
    nets = []
    for line in _ip("-o", "-4", "addr", "show").stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    for line in _ip("-4", "route", "show", "table", "all").stdout.splitlines():
        dest = line.split()[0] if line.split() else ""
        if dest and dest[0].isdigit():
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.ip_network(dest, strict=False))
    return nets


def pick_free_blocks(count: int, used: list[ipaddress.IPv4Network], rng: random.Random) -> list[ipaddress.IPv4Network]:
    """`count` distinct /30 blocks of :data:`SUBNET` (not the first) overlapping none of `used`."""
    blocks = list(SUBNET.subnets(new_prefix=30))[1:]
    free = [b for b in rng.sample(blocks, min(len(blocks), 64 * count))
            if not any(b.overlaps(u) and u.prefixlen > 0 for u in used)]
    if len(free) < count:
        raise RuntimeError(f"no {count} free /30 blocks in {SUBNET}")
    return free[:count]


def _sshd_config(d: Path, name: str, address: str, port: int, host_key: Path, authorized: Path) -> Path:
    return write_sshd_config(d / f"sshd_config-{name}", address, port, host_key, d / f"sshd-{name}.pid",
                             authorized)


def _skip_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if not os.path.exists(SSHD):
        return f"{SSHD} not found: install openssh-server"
    try:
        if _ip("netns", "list", check=False).returncode != 0:
            return "`ip netns` is not available (iproute2)"
    except FileNotFoundError:
        return "`ip` not found: install iproute2"
    return None


def _add_host_network(ns: str, veth_root: str, veth_ns: str, block: ipaddress.IPv4Network,
                      cleanup: contextlib.ExitStack) -> tuple[str, str]:
    gw, addr = (str(a) for a in list(block.hosts())[:2])
    cleanup.callback(remove_namespace, ns, veth_root)  # registered first: runs even if a step fails
    r = _ip("netns", "add", ns, check=False)
    if r.returncode != 0:
        if "not permitted" in r.stderr.lower() or "permission denied" in r.stderr.lower():
            pytest.skip(f"cannot create network namespaces here: {r.stderr.strip()}")
        raise RuntimeError(f"ip netns add {ns} failed: {r.stderr.strip()}")
    _ip("link", "add", veth_root, "type", "veth", "peer", "name", veth_ns)
    _ip("link", "set", veth_ns, "netns", ns)
    _ip("addr", "add", f"{gw}/{block.prefixlen}", "dev", veth_root)
    _ip("link", "set", veth_root, "up")
    _ip("-n", ns, "addr", "add", f"{addr}/{block.prefixlen}", "dev", veth_ns)
    _ip("-n", ns, "link", "set", veth_ns, "up")
    _ip("-n", ns, "link", "set", "lo", "up")
    return gw, addr


def _link_hosts(ns1: str, ns2: str, addr1: str, addr2: str, veth: str, cleanup: contextlib.ExitStack) -> None:
    """A direct veth link between two namespaces, and a route in each to the other's address over it."""
    a, b = f"{veth}1", f"{veth}2"
    cleanup.callback(lambda: os.path.exists(f"/sys/class/net/{a}") and _ip("link", "del", a, check=False))
    _ip("link", "add", a, "type", "veth", "peer", "name", b)
    _ip("link", "set", a, "netns", ns1)
    _ip("link", "set", b, "netns", ns2)
    for ns, dev, mine, other in ((ns1, a, addr1, addr2), (ns2, b, addr2, addr1)):
        _ip("-n", ns, "link", "set", dev, "up")
        _ip("-n", ns, "route", "add", f"{other}/32", "dev", dev, "src", mine)


def _start_sshd(ns: str, config: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as logf:
        return subprocess.Popen(
            [IP, "netns", "exec", ns, SSHD, "-D", "-e", "-f", str(config)],  # ip execs sshd: same PID
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
            preexec_fn=_die_with_parent,
        )


@pytest.fixture(scope="session")
def netns_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsHosts]:
    """Two SSH test hosts in their own network namespaces (see the module docstring)."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)

    started = time.monotonic()
    base = tmp_path_factory.mktemp("netns")
    keys = base / "keys"
    keys.mkdir(mode=0o700)
    tag = secrets.token_hex(2)
    labels = ("h1", "h2")
    names = {h: (f"dbmx-{h}-{tag}", f"dbmx{tag}{h}r", f"dbmx{tag}{h}n") for h in labels}  # ns, veths (<=15)

    with contextlib.ExitStack() as cleanup:
        # The reaper first: from here on, even a killed pytest leaves no namespace behind.
        reaper_log = open(base / "reaper.log", "ab")
        cleanup.callback(reaper_log.close)
        reaper = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--reap",
             *[x for h in labels for x in names[h][:2]]],
            stdin=subprocess.PIPE, stdout=reaper_log, stderr=reaper_log, start_new_session=True,
        )

        def stop_reaper() -> None:
            assert reaper.stdin is not None
            reaper.stdin.close()
            try:
                reaper.wait(timeout=30)
            except subprocess.TimeoutExpired:
                reaper.kill()
                reaper.wait()

        cleanup.callback(stop_reaper)  # runs last: after our own cleanup it finds nothing to do

        client_key, other_key = keys / "client_ed25519", keys / "other_ed25519"
        _keygen(client_key, "dbmatrix-netns-client")
        _keygen(other_key, "dbmatrix-netns-wrong-host")
        authorized = keys / "authorized_keys"
        authorized.write_text(client_key.with_suffix(".pub").read_text())
        authorized.chmod(0o600)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
        Path(LOCK_FILE).parent.mkdir(parents=True, exist_ok=True)

        addrs: dict[str, tuple[str, str]] = {}
        with open(LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # pick and configure addresses atomically across sessions
            blocks = pick_free_blocks(len(labels), _used_networks(), random.Random(secrets.randbits(64)))
            for h, block in zip(labels, blocks):
                ns, veth_root, veth_ns = names[h]
                addrs[h] = _add_host_network(ns, veth_root, veth_ns, block, cleanup)

        _link_hosts(names["h1"][0], names["h2"][0], addrs["h1"][1], addrs["h2"][1], f"dbmx{tag}x", cleanup)

        port = 22
        procs: dict[str, subprocess.Popen[bytes]] = {}
        for h in labels:
            ns = names[h][0]
            host_key = keys / f"host_{h}_ed25519"
            _keygen(host_key, f"dbmatrix-netns-{h}")
            config = _sshd_config(keys, h, addrs[h][1], port, host_key, authorized)
            procs[h] = _start_sshd(ns, config, keys / f"sshd-{h}.log")
            cleanup.callback(_stop, procs[h])  # by PID; runs before the namespace removal
        for h in labels:
            if not _wait_listening(procs[h], addrs[h][1], port, READY_TIMEOUT_S):
                pytest.fail(f"sshd in {names[h][0]} did not listen on {addrs[h][1]}:{port}; log:\n"
                            f"{_log_tail(keys / f'sshd-{h}.log')}")

        def pub(path: Path) -> str:
            return " ".join(path.read_text().split()[:2])

        known = keys / "known_hosts"
        known.write_text("".join(f"{addrs[h][1]} {pub(keys / f'host_{h}_ed25519.pub')}\n" for h in labels))
        empty = keys / "known_hosts.empty"
        empty.write_text("")
        hosts = []
        for h in labels:
            wrong = keys / f"known_hosts.wrong-{h}"
            wrong.write_text(f"{addrs[h][1]} {pub(other_key.with_suffix('.pub'))}\n")
            workdir = base / f"{h}-work"
            workdir.mkdir()
            hosts.append(NetnsHost(
                name=h, namespace=names[h][0], address=addrs[h][1], gateway=addrs[h][0], veth=names[h][1],
                port=port, user="root", key_file=str(client_key), known_hosts=str(known),
                wrong_known_hosts=str(wrong), empty_known_hosts=str(empty),
                host_pubkey=pub(keys / f"host_{h}_ed25519.pub"), workdir=str(workdir),
                sshd_pid=procs[h].pid, log_file=str(keys / f"sshd-{h}.log"),
                sshd_config=str(keys / f"sshd_config-{h}"),
            ))
        info = NetnsHosts(tuple(hosts), str(base))
        (base / "timing.txt").write_text(f"setup_s {time.monotonic() - started:.3f}\n")
        try:
            yield info
        finally:
            t0 = time.monotonic()
            cleanup.close()
            with open(base / "timing.txt", "a") as f:
                f.write(f"teardown_s {time.monotonic() - t0:.3f}\n")
            left = [n for h in labels for n in names[h][:1] if namespace_exists(n)]
            assert not left, f"network namespaces left behind: {left}"
