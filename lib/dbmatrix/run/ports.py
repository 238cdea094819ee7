"""TCP ports for servers that need them (Galera nodes; a client on another host), leased machine-wide.

A standalone server reached over its unix socket listens on no port (``--skip-networking``). Where
ports are needed, a block of them is *leased* on every host that will listen: one lease file per port
in :data:`LEASE_DIR` on that host, holding the owner's pid and start time (``/proc/PID/stat`` field 22,
so a reused pid is no owner). The owner is a process on that host that lives exactly as long as the
dbmatrix process using the ports (the host's run guard, :mod:`dbmatrix.run.guard`; locally this process
when there is no guard). A lease whose owner is gone is stale and is taken over. Claims are a
compare-and-set under ``flock`` on the lease directory, so two dbmatrix processes on one machine never
get the same port; a port something else listens on (``ss``) is skipped too. A bind that still fails
(a process outside dbmatrix took the port meanwhile) is recognised in the error log
(:func:`bind_failed`), and the caller retries once with another block.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dbmatrix.hosts.remote import Host

BASE_PORT = 13306
PORTS_PER_HOST = 40  # a block per host context: one server, or the 4 ports of each of up to 9 Galera nodes
LEASE_DIR = "/tmp/dbmatrix-ports"  # machine-wide, on the host that listens; 1777 like /tmp
PORT_LIMIT = 65535
SEARCH_SPAN = 2000  # ports tried above the start before giving up

# Ports handed out by this process, per machine: the workers of a fleet look for ports at the same time,
# and two inventory hosts may be one machine (two "local" hosts with their own workdirs).
_RESERVED_PORTS: dict[str, set[int]] = {}
_PORT_LOCK = threading.Lock()


class PortError(RuntimeError):
    """No block of free ports could be leased."""


# ------------------------------------------------------------------------------------ pure parts

def parse_listening_ports(ss_output: str) -> set[int]:
    """TCP ports in LISTEN state from `ss -Htln` output."""
    ports = set()
    for line in ss_output.splitlines():
        fields = line.split()
        if len(fields) >= 4 and ":" in fields[3]:
            tail = fields[3].rsplit(":", 1)[1]
            if tail.isdigit():
                ports.add(int(tail))
    return ports


def proc_start_time(stat: str) -> str | None:
    """Field 22 (start time in clock ticks since boot) of a ``/proc/PID/stat`` line; None if malformed.
    The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'."""
    _, sep, rest = stat.rpartition(")")
    fields = rest.split()
    return fields[19] if sep and len(fields) >= 20 and fields[19].isdigit() else None


@dataclass(frozen=True)
class Owner:
    """A process on the leasing host: its pid and its start time (together unique across pid reuse)."""

    pid: int
    start: str

    def text(self) -> str:
        return f"{self.pid} {self.start}"


def parse_owner(text: str) -> Owner | None:
    """A lease file's content ("PID START [anything]") -> its owner; None if it is not one."""
    fields = text.split()
    if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
        return Owner(int(fields[0]), fields[1])
    return None


@dataclass(frozen=True)
class Lease:
    """A lease file found on a host: its content and the current start time of the pid it names
    (None when that pid does not exist)."""

    port: int
    content: str
    pid_start_now: str | None

    @property
    def stale(self) -> bool:
        """Its owner is gone: the file names no process, no live one, or a newer process with the same pid."""
        owner = parse_owner(self.content)
        return owner is None or self.pid_start_now != owner.start


def survey_script(lease_dir: str = LEASE_DIR) -> str:
    """One round trip: the listening ports (``ss``) and every lease file with its owner's start time now."""
    d = shlex.quote(lease_dir)
    return (f"ss -Htln 2>/dev/null; "
            f"for f in {d}/[0-9]*; do [ -f \"$f\" ] || continue; c=$(head -c 200 \"$f\" 2>/dev/null | head -n 1); "
            "p=${c%% *}; case \"$p\" in ''|*[!0-9]*) s=;; *) s=$(cat /proc/$p/stat 2>/dev/null);; esac; "
            "printf 'lease %s\\t%s\\t%s\\n' \"${f##*/}\" \"$c\" \"$s\"; done; true")


def parse_survey(text: str) -> tuple[set[int], dict[int, Lease]]:
    """:func:`survey_script` output -> (listening ports, leases by port): ``lease`` lines, the rest ``ss``'s."""
    ss_lines, leases = [], {}
    for line in text.splitlines():
        if not line.startswith("lease "):
            ss_lines.append(line)
        else:
            parts = line[6:].split("\t")
            if len(parts) == 3 and parts[0].isdigit():
                leases[int(parts[0])] = Lease(int(parts[0]), parts[1], proc_start_time(parts[2]) if parts[2] else None)
    return parse_listening_ports("\n".join(ss_lines)), leases


def block_free(base: int, size: int, listening: set[int], leases: Mapping[int, Lease]) -> bool:
    """No port of the block listens or is held by a live lease."""
    return all(p not in listening and (p not in leases or leases[p].stale) for p in range(base, base + size))


def pick_block(start: int, size: int, surveys: Sequence[tuple[set[int], Mapping[int, Lease]]],
               skip: set[int] = frozenset(), span: int = SEARCH_SPAN) -> int:  # type: ignore[assignment]
    """The lowest base >= `start` whose `size` ports are free on every surveyed host and not in `skip`."""
    for base in range(start, min(start + span, PORT_LIMIT - size + 1)):
        if any(p in skip for p in range(base, base + size)):
            continue
        if all(block_free(base, size, listening, leases) for listening, leases in surveys):
            return base
    raise PortError(f"no block of {size} free ports in {start}..{start + span} (listening, or leased by "
                    f"another dbmatrix process: see {LEASE_DIR})")


def claim_script(ports: Mapping[int, str], ours: str, lease_dir: str = LEASE_DIR, mine: Sequence[str] = ()) -> str:
    """Compare-and-set under flock: every port's lease file must still hold what the survey saw
    (`ports[p]`, "" for none) or one of `mine` (this attempt's claims on another inventory host that is
    the same machine, e.g. two network namespaces), then all become `ours`; else nothing is written and
    it exits 3."""
    d = shlex.quote(lease_dir)

    def holds(p: int, seen: str) -> str:
        cur = f"\"$(head -n 1 {d}/{p} 2>/dev/null)\""
        return "{ " + " || ".join(f"[ {cur} = {shlex.quote(ok)} ]" for ok in dict.fromkeys([seen, *mine])) + "; }"

    checks = " && ".join(holds(p, seen) for p, seen in sorted(ports.items()))
    writes = "; ".join(f"printf '%s\\n' {shlex.quote(ours)} > {d}/{p}.$$ && mv -f {d}/{p}.$$ {d}/{p}"
                       for p in sorted(ports))
    inner = f"if {checks}; then {writes}; else exit 3; fi"
    return (f"mkdir -p {d} 2>/dev/null; chmod 1777 {d} 2>/dev/null; "
            f"flock -w 30 {d} sh -c {shlex.quote(inner)}")


def release_script(ports: Sequence[int], ours: str, lease_dir: str = LEASE_DIR) -> str:
    """Remove the lease files of `ports` that are still ours (under flock, like claims)."""
    d = shlex.quote(lease_dir)
    inner = "; ".join(f"[ \"$(head -n 1 {d}/{p} 2>/dev/null)\" = {shlex.quote(ours)} ] && rm -f {d}/{p}"
                      for p in sorted(ports)) + "; true"
    return f"[ -d {d} ] && flock -w 30 {d} sh -c {shlex.quote(inner)}; true"


_BIND_ERROR = re.compile(r"Bind on TCP/IP port|errno:? 98\b|error:? 98\b|Address already in use", re.IGNORECASE)


def bind_failed(error_log: str) -> bool:
    """A server (or Galera's gcomm/IST/SST listener) could not bind its port: "Can't start server:
    Bind on TCP/IP port. Got error: 98: Address already in use" and the like."""
    return bool(_BIND_ERROR.search(error_log))


# ------------------------------------------------------------------------------------ side effects

def listening_ports(host: Host) -> set[int]:
    return parse_listening_ports(host.run("ss -Htln", check=False).stdout)


def base_port() -> int:
    """First port tried for servers: DBMATRIX_BASE_PORT, else 13306 (lets concurrent sessions use own ranges)."""
    env = os.environ.get("DBMATRIX_BASE_PORT", "")
    return int(env) if env.isdigit() else BASE_PORT


def owner_of(host: Host, pid: int) -> Owner:
    """`pid` on `host` as a lease owner (its start time read there)."""
    start = proc_start_time(host.run(f"cat /proc/{int(pid)}/stat").stdout)
    if start is None:
        raise PortError(f"[{host.name}] cannot read the start time of process {pid}")
    return Owner(pid, start)


def this_process(host: Host) -> Owner:
    """This process as the owner of leases on the local host (when no run guard runs there)."""
    if not host.is_local:
        raise PortError(f"[{host.name}] ports on a remote host are leased by its run guard; none runs there")
    with open(f"/proc/{os.getpid()}/stat") as f:
        start = proc_start_time(f.read())
    assert start is not None
    return Owner(os.getpid(), start)


@dataclass
class PortBlock:
    """`size` consecutive ports from `base`, leased on every host in `holders` ((host, owner) pairs)."""

    base: int
    size: int
    holders: list[tuple[Host, Owner]]

    @property
    def ports(self) -> range:
        return range(self.base, self.base + self.size)

    def release(self) -> None:
        """Give the ports back (idempotent; never raises: a lease left behind goes stale with its owner)."""
        holders, self.holders = self.holders, []
        for host, owner in holders:
            try:
                host.run(release_script(list(self.ports), owner.text()), check=False, timeout=60)
            except Exception:  # noqa: BLE001 - best effort
                pass


def _distinct(holders: Sequence[tuple[Host, Owner]]) -> list[tuple[Host, Owner]]:
    """One holder per machine (nodes of a cluster on one host share its lease)."""
    out: dict[str, tuple[Host, Owner]] = {}
    for host, owner in holders:
        out.setdefault("local" if host.is_local else host.name, (host, owner))
    return list(out.values())


def lease_block(holders: Sequence[tuple[Host, Owner]], size: int, start: int | None = None,
                skip: set[int] | None = None, attempts: int = 20) -> PortBlock:
    """Lease the first block of `size` ports from `start` that is free on every host of `holders`
    (listening nowhere, leased by no live owner) and not in `skip` (e.g. a block whose bind failed)."""
    start = base_port() if start is None else start
    skip = set(skip or ())
    hosts = _distinct(holders)
    for _ in range(attempts):
        surveys = [parse_survey(h.run(survey_script(), check=False, timeout=60).stdout) for h, _ in hosts]
        base = pick_block(start, size, surveys, skip)
        got: list[tuple[Host, Owner]] = []
        for (host, owner), (_, leases) in zip(hosts, surveys):
            seen = {p: leases[p].content if p in leases else "" for p in range(base, base + size)}
            r = host.run(claim_script(seen, owner.text(), mine=[o.text() for _, o in got]), check=False, timeout=60)
            if not r.ok:
                break
            got.append((host, owner))
        block = PortBlock(base, size, got)
        if len(got) == len(hosts):
            return block
        block.release()  # another process claimed a port between survey and claim: survey again
        time.sleep(0.05)
    raise PortError(f"could not lease {size} ports from {start} after {attempts} attempts (contended)")


def _machine(host: Host) -> str:
    return "local" if host.is_local else host.name


def free_port(host: Host, start: int | None = None, block: int = 1) -> int:
    """The first port from `start` such that `block` consecutive ports are neither listening on the host
    nor handed out by this process before (within one process only: tests and tools that start a server
    by hand; runs lease their ports with :func:`lease_block`)."""
    if start is None:
        start = base_port()
    used = listening_ports(host)
    with _PORT_LOCK:
        taken = used | _RESERVED_PORTS.setdefault(_machine(host), set())
        port = start
        while any(p in taken for p in range(port, port + block)):
            port += 1
        _RESERVED_PORTS[_machine(host)].update(range(port, port + block))
    return port


def release_port(host: Host, port: int, block: int = 1) -> None:
    with _PORT_LOCK:
        _RESERVED_PORTS.get(_machine(host), set()).difference_update(range(port, port + block))
