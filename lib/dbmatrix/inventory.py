"""Inventories: the hosts a study runs on and the storage media each offers.

Localhost with one directory medium (`disk`, on the root file system) is the default inventory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .remote import Host, LocalHost, SSHHost
from .spec import SpecError

MEDIUM_KINDS = ("dir",)


def default_workdir() -> str:
    """Where servers, datadirs and snapshots live on a host (never inside the repository)."""
    return os.environ.get("DBMATRIX_WORKDIR", "/var/tmp/dbmatrix")


@dataclass(frozen=True)
class Medium:
    name: str
    kind: str
    path: str
    emulates: str | None = None
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "path": self.path,
                "emulates": self.emulates, "description": self.description}


@dataclass(frozen=True)
class HostSpec:
    name: str
    address: str = "local"  # "local" or an SSH address
    user: str | None = None
    port: int = 22
    key_file: str | None = None
    known_hosts: str | None = None
    workdir: str = field(default_factory=default_workdir)
    media: dict[str, Medium] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        return self.address == "local"

    def connect(self) -> Host:
        if self.is_local:
            return LocalHost(self.name)
        return SSHHost(self.name, self.address, user=self.user, port=self.port,
                       key_file=self.key_file, known_hosts=self.known_hosts)


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[HostSpec, ...]

    def host(self, name: str) -> HostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise SpecError(f"inventory: no host {name!r}; hosts: {', '.join(h.name for h in self.hosts)}")


def localhost_inventory(workdir: str | None = None) -> Inventory:
    wd = workdir or default_workdir()
    disk = Medium("disk", "dir", f"{wd}/media/disk",
                  description="directory on the root file system")
    return Inventory((HostSpec("localhost", workdir=wd, media={"disk": disk}),))


def _medium(host: str, name: str, raw: Any, workdir: str) -> Medium:
    where = f"inventory.hosts[{host}].media.{name}"
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: must be a mapping with kind and path")
    kind = raw.get("kind", "dir")
    if kind not in MEDIUM_KINDS:
        raise SpecError(f"{where}.kind: unknown kind {kind!r}; allowed: {', '.join(MEDIUM_KINDS)}")
    path = str(raw.get("path") or f"{workdir}/media/{name}")
    if not path.startswith("/"):
        raise SpecError(f"{where}.path: {path!r} must be an absolute path")
    return Medium(name, kind, path, raw.get("emulates"), str(raw.get("description", "")))


def parse_inventory(raw: Mapping[str, Any]) -> Inventory:
    hosts_raw = raw.get("hosts") if isinstance(raw, Mapping) else None
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise SpecError("inventory.hosts: must be a non-empty list of hosts")
    hosts: list[HostSpec] = []
    allowed = {"name", "address", "user", "port", "key_file", "known_hosts", "workdir", "media"}
    for i, h in enumerate(hosts_raw):
        if not isinstance(h, Mapping) or not h.get("name"):
            raise SpecError(f"inventory.hosts[{i}]: each host needs a name")
        unknown = set(h) - allowed
        if unknown:
            raise SpecError(f"inventory.hosts[{h['name']}]: unknown key(s) {', '.join(sorted(unknown))}; "
                            f"allowed: {', '.join(sorted(allowed))}")
        name = str(h["name"])
        if name in {x.name for x in hosts}:
            raise SpecError(f"inventory.hosts: host name {name!r} appears twice")
        workdir = str(h.get("workdir") or default_workdir())
        media_raw = h.get("media") or {"disk": {"kind": "dir"}}
        media = {m: _medium(name, m, v, workdir) for m, v in media_raw.items()}
        port = h.get("port", 22)
        if not isinstance(port, int) or not 0 < port < 65536:
            raise SpecError(f"inventory.hosts[{name}].port: {port!r} must be a TCP port number")
        hosts.append(HostSpec(name, str(h.get("address", "local")), h.get("user"), port,
                              h.get("key_file"), h.get("known_hosts"), workdir, media))
    return Inventory(tuple(hosts))


def load_inventory(path: str | Path | None) -> Inventory:
    if path is None:
        return localhost_inventory()
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"inventory: file {str(p)!r} does not exist")
    return parse_inventory(yaml.safe_load(p.read_text()) or {})
