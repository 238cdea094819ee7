"""TCP ports for servers: what a host listens on, and blocks handed out per machine by this process."""

from __future__ import annotations

import os
import threading

from dbmatrix.hosts.remote import Host

BASE_PORT = 13306
PORTS_PER_HOST = 40  # a block per host context: one server, or the 4 ports of each of up to 9 Galera nodes

# Ports handed out by this process, per machine: the workers of a fleet look for ports at the same time,
# and two inventory hosts may be one machine (two "local" hosts with their own workdirs).
_RESERVED_PORTS: dict[str, set[int]] = {}
_PORT_LOCK = threading.Lock()


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


def listening_ports(host: Host) -> set[int]:
    return parse_listening_ports(host.run("ss -Htln", check=False).stdout)


def base_port() -> int:
    """First port tried for servers: DBMATRIX_BASE_PORT, else 13306 (lets concurrent sessions use own ranges)."""
    env = os.environ.get("DBMATRIX_BASE_PORT", "")
    return int(env) if env.isdigit() else BASE_PORT


def _machine(host: Host) -> str:
    return "local" if host.is_local else host.name


def free_port(host: Host, start: int | None = None, block: int = 1) -> int:
    """The first port from `start` such that `block` consecutive ports are neither listening on the host
    nor handed out by this process before."""
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
