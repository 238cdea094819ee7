"""Inventories: the hosts a study runs on and the storage media each offers.

Pure: YAML in, frozen dataclasses out, with errors that name the field and the allowed values. The
recipes that build the media (mkfs, mount, loop devices, cgroups) are in :mod:`dbmatrix.hosts.media`.

A medium is declared per host as ``media: {name: {kind: ..., path: ..., emulates: ...,
description: ..., <kind-specific options>}}``. Parsing fills every default in, so
:meth:`Medium.to_dict` records the complete recipe and parses back to the same medium.

An inventory may say where the fleet gets its hosts: ``scheduler: static`` (the default: the hosts are
the study's) or ``scheduler: slurm`` with a ``slurm:`` section (:class:`SlurmSection`; the leaser is
:mod:`dbmatrix.run.slurm`).

Kinds and their options are in :mod:`dbmatrix.hosts.medium_recipes`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dbmatrix.hosts.builds import SYSTEM_BUILD, ServerBuild, parse_builds
from dbmatrix.hosts.medium_recipes import (  # noqa: F401 - re-exported: the inventory's media API
    BLOCK_KINDS,
    EMULATES,
    FSTYPES,
    KIND_OPTIONS,
    MEDIUM_KINDS,
    XFS_MIN_BYTES,
    Medium,
    abs_path,
    human_size,
    kind_options,
    parse_medium,
    parse_size,
    positive_int,
    str_list,
)
from dbmatrix.hosts.remote import Host, LocalHost, SSHHost, SSHTarget, check_ssh_access
from dbmatrix.spec.experiment import SpecError

DEFAULT_CONNECT_TIMEOUT_S = 15.0


def default_workdir() -> str:
    """Where servers, datadirs and snapshots live on a host (never inside the repository)."""
    return os.environ.get("DBMATRIX_WORKDIR", "/var/tmp/dbmatrix")


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
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    source: str | None = field(default=None, compare=False)  # the inventory file, for messages
    host_class: str | None = None  # the inventory's ``class``: hosts of one class are alike (claims per class)
    # server builds (the server_build factor's levels; hosts.builds): always "system", the installed server
    builds: dict[str, ServerBuild] = field(default_factory=lambda: {SYSTEM_BUILD.name: SYSTEM_BUILD})

    @property
    def is_local(self) -> bool:
        return self.address == "local"

    def ssh_target(self) -> SSHTarget:
        return SSHTarget(self.name, self.address, self.port, self.user, self.key_file, self.known_hosts,
                         self.connect_timeout, f"inventory.hosts[{self.name}]", self.source)

    def check_access(self) -> None:
        """Before connecting: key file readable, host key in known_hosts (nothing to check for local).
        Raises :class:`~dbmatrix.hosts.remote.HostConfigError` naming the host, field and fix."""
        if not self.is_local:
            check_ssh_access(self.ssh_target())

    def connect(self) -> Host:
        if self.is_local:
            return LocalHost(self.name)
        t = self.ssh_target()
        return SSHHost(self.name, self.address, user=self.user, port=self.port, key_file=self.key_file,
                       known_hosts=self.known_hosts, connect_timeout=self.connect_timeout, field=t.field,
                       inventory=self.source)


SCHEDULERS = ("static", "slurm")
SLURM_KEYS = ("partition", "account", "time_limit", "time_margin_pct", "min_time_limit", "features", "nodes",
              "conf", "grant_timeout_s")
_SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*\Z")
_SLURM_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?\Z")


@dataclass(frozen=True)
class SlurmSection:
    """The inventory's ``slurm:`` section (``scheduler: slurm``): where and how to ask Slurm for hosts.

    ``features`` maps a medium name or a host class to the Slurm node feature that offers it (a block
    asks ``--constraint`` for the features of the media its runs use); ``nodes`` maps a Slurm node name
    to the inventory host (its SSH details) when the two names differ. ``time_limit`` is ``auto`` (the
    plan's estimate for the block, plus ``time_margin_pct``, at least ``min_time_limit``) or a fixed
    limit in seconds. ``conf`` is the ``SLURM_CONF`` the Slurm clients are run with (None: theirs)."""

    partition: str | None = None
    account: str | None = None
    time_limit: int | None = None  # seconds; None: auto
    time_margin_pct: float = 50.0
    min_time_limit: int = 300
    features: Mapping[str, str] = field(default_factory=dict, hash=False)
    nodes: Mapping[str, str] = field(default_factory=dict, hash=False)  # Slurm node -> inventory host
    conf: str | None = None
    grant_timeout_s: float = 3600.0  # how long a block may wait in the queue

    def host_of_node(self, node: str) -> str:
        return self.nodes.get(node, node)

    def node_of_host(self, host: str) -> str:
        for node, h in self.nodes.items():
            if h == host:
                return node
        return host


def parse_slurm_time(value: Any, where: str) -> int:
    """Seconds from a Slurm time (``minutes``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``) or an int of
    seconds."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    m = _SLURM_TIME.fullmatch(str(value).strip())
    if not m or isinstance(value, bool):
        raise SpecError(f"{where}: {value!r} must be seconds (an integer) or a Slurm time: minutes, MM:SS, "
                        "HH:MM:SS or D-HH:MM:SS")
    d, a, b, c = m.groups()
    if d is not None:  # D-HH[:MM[:SS]]
        secs = int(d) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    elif c is not None:
        secs = int(a) * 3600 + int(b) * 60 + int(c)
    elif b is not None:
        secs = int(a) * 60 + int(b)
    else:
        secs = int(a) * 60
    if secs <= 0:
        raise SpecError(f"{where}: {value!r} must be a positive time")
    return secs


def parse_slurm_section(raw: Any, host_names: list[str], source: str | None = None) -> SlurmSection:
    """The ``slurm:`` section, every field checked (errors name the field and the allowed values)."""
    where = "inventory.slurm"
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: must be a mapping with keys {', '.join(SLURM_KEYS)}")
    unknown = set(raw) - set(SLURM_KEYS)
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; allowed: "
                        f"{', '.join(SLURM_KEYS)}")
    names: dict[str, str | None] = {}
    for key in ("partition", "account"):
        v = raw.get(key)
        if v is not None and not _SLURM_NAME.fullmatch(str(v)):
            raise SpecError(f"{where}.{key}: {v!r} must be a Slurm {key} name (letters, digits, '_', '.', '-')")
        names[key] = None if v is None else str(v)
    tl = raw.get("time_limit", "auto")
    time_limit = None if tl == "auto" else parse_slurm_time(tl, f"{where}.time_limit (or auto)")
    margin = raw.get("time_margin_pct", 50)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin <= 1000:
        raise SpecError(f"{where}.time_margin_pct: {margin!r} must be a number in [0, 1000]")
    min_tl = parse_slurm_time(raw.get("min_time_limit", 300), f"{where}.min_time_limit")
    maps: dict[str, dict[str, str]] = {}
    for key in ("features", "nodes"):
        v = raw.get(key) or {}
        if not isinstance(v, Mapping) or not all(_SLURM_NAME.fullmatch(str(k)) and _SLURM_NAME.fullmatch(str(x))
                                                 for k, x in v.items()):
            what = ("medium or host class -> Slurm feature" if key == "features"
                    else "Slurm node name -> inventory host name")
            raise SpecError(f"{where}.{key}: {v!r} must map names to names ({what})")
        maps[key] = {str(k): str(x) for k, x in v.items()}
    for node, host in maps["nodes"].items():
        if host not in host_names:
            raise SpecError(f"{where}.nodes.{node}: {host!r} is not an inventory host; hosts: "
                            f"{', '.join(host_names)}")
    if len(set(maps["nodes"].values())) < len(maps["nodes"]):
        raise SpecError(f"{where}.nodes: two Slurm nodes map to one inventory host")
    floats: dict[str, float] = {}
    for key, default in (("grant_timeout_s", 3600.0),):
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise SpecError(f"{where}.{key}: {v!r} must be a positive number of seconds")
        floats[key] = float(v)
    conf = raw.get("conf")
    return SlurmSection(names["partition"], names["account"], time_limit, float(margin), min_tl,
                        maps["features"], maps["nodes"], _local_path(str(conf), source) if conf else None,
                        floats["grant_timeout_s"])


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[HostSpec, ...]
    scheduler: str = "static"  # where the fleet gets its hosts: SCHEDULERS
    slurm: SlurmSection | None = None  # with scheduler slurm

    def host(self, name: str) -> HostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise SpecError(f"inventory: no host {name!r}; hosts: {', '.join(h.name for h in self.hosts)}")

    def check_access(self) -> None:
        """:meth:`HostSpec.check_access` of every host, in inventory order (the first problem raises)."""
        for h in self.hosts:
            h.check_access()


def localhost_inventory(workdir: str | None = None) -> Inventory:
    """This machine with a directory on the root file system, two RAM media that stand in for PMEM, a
    throttled RAM block device for slow Galera followers and a network block device with its local control
    (only the media a spec names are ever built, so
    the unused ones cost nothing)."""
    wd = workdir or default_workdir()
    raw = {
        "disk": {"kind": "dir", "description": "directory on the root file system"},
        "tmpfs": {"kind": "tmpfs", "size": "4G", "emulates": "pmem-fsdax",
                  "description": "RAM file system (tmpfs) standing in for PMEM in fsdax mode"},
        "ramblock": {"kind": "ram-block", "size": "4G", "fstype": "xfs", "block_size": 4096,
                     "emulates": "pmem-sector",
                     "description": "XFS on a loop device over a tmpfs file: RAM behind the block "
                                    "layer, standing in for PMEM in sector mode"},
        "slow": {"kind": "throttled", "base": {"kind": "ram-block", "size": "1G", "fstype": "xfs",
                                               "block_size": 4096},
                 "write_iops": 1000,
                 "description": "XFS on a RAM-backed loop device under a blkio write-IOPS limit (the Galera "
                                "study's calibration sets the limit): the followers' slow disk"},
        "remote": {"kind": "nbd", "size": "2G", "transport": "tcp", "rate": "10gbit", "emulates": "remote-nvme",
                   "description": "XFS on a network block device: nbdkit serving a file from its own network "
                                  "namespace over TCP (a veth pair shaped to 10 Gbit/s each way), nbdfuse and a "
                                  "loop device on this side, standing in for NVMe pooled over a network"},
        "nbdlocal": {"kind": "nbd", "size": "2G", "transport": "unix", "emulates": "nvme",
                     "description": "the remote medium's control: the same nbdkit, nbdfuse and loop device over a "
                                    "unix socket, without the network, standing in for the local drive"},
    }
    media = {n: parse_medium(r, host="localhost", name=n, workdir=wd) for n, r in raw.items()}
    builds = parse_builds(LOCAL_BUILDS, host="localhost", workdir=wd)
    return Inventory((HostSpec("localhost", workdir=wd, media=media, builds=builds),))


# Debian 12's previous MariaDB 10.11 point release, which its archive still serves beside the installed (security)
# one: a second real build on this machine, for the server_build factor's A/A check (specs/quick-builds.yaml).
PREVIOUS_MARIADB = "1:10.11.18-0+deb12u1"
LOCAL_BUILDS = {
    "mariadb10_11_18": {
        "packages": [f"mariadb-server-core={PREVIOUS_MARIADB}", f"mariadb-client-core={PREVIOUS_MARIADB}",
                     f"mariadb-plugin-rocksdb={PREVIOUS_MARIADB}"],
        "version": "10.11.18",
        "description": "Debian 12's MariaDB 10.11.18 (the point release before the installed 10.11.19), its "
                       "server, install script, client tools and MyRocks plugin unpacked from the archive's "
                       "packages under the workdir",
    },
}


# ---------------------------------------------------------------- inventory files

def _medium(host: str, name: str, raw: Any, workdir: str) -> Medium:
    return parse_medium(raw, host=host, name=name, workdir=workdir)


def parse_inventory(raw: Mapping[str, Any], source: str | None = None) -> Inventory:
    """Hosts from an inventory mapping; `source` (the file) is named in connection errors."""
    hosts_raw = raw.get("hosts") if isinstance(raw, Mapping) else None
    if not isinstance(hosts_raw, list) or not hosts_raw:
        raise SpecError("inventory.hosts: must be a non-empty list of hosts")
    hosts: list[HostSpec] = []
    allowed = {"name", "address", "user", "port", "key_file", "known_hosts", "workdir", "media",
               "connect_timeout", "class", "builds"}
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
        workdir = abs_path(str(h.get("workdir") or default_workdir()), f"inventory.hosts[{name}].workdir")
        media_raw = h.get("media") or {"disk": {"kind": "dir"}}
        if not isinstance(media_raw, Mapping):
            raise SpecError(f"inventory.hosts[{name}].media: must be a mapping of medium name to recipe")
        media = {str(m): _medium(name, str(m), v, workdir) for m, v in media_raw.items()}
        _check_distinct_paths(name, media)
        builds = parse_builds(h.get("builds"), host=name, workdir=workdir)
        port = h.get("port", 22)
        if not isinstance(port, int) or not 0 < port < 65536:
            raise SpecError(f"inventory.hosts[{name}].port: {port!r} must be a TCP port number")
        timeout = h.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
            raise SpecError(f"inventory.hosts[{name}].connect_timeout: {timeout!r} must be a number of seconds "
                            "in (0, 600]")
        for key in ("user", "key_file", "known_hosts"):
            if h.get(key) is not None and not isinstance(h[key], str):
                raise SpecError(f"inventory.hosts[{name}].{key}: {h[key]!r} must be a string")
        host_class = h.get("class")
        if host_class is not None and (not isinstance(host_class, str)
                                       or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", host_class)):
            raise SpecError(f"inventory.hosts[{name}].class: {host_class!r} must be a name (letters, digits, "
                            "'_', '.', '-'), e.g. big")
        hosts.append(HostSpec(name, str(h.get("address", "local")), h.get("user"), port,
                              _local_path(h.get("key_file"), source), _local_path(h.get("known_hosts"), source),
                              workdir, media, float(timeout), source, host_class, builds))
    scheduler = raw.get("scheduler", "static")
    if scheduler not in SCHEDULERS:
        raise SpecError(f"inventory.scheduler: {scheduler!r} is not allowed; allowed: {', '.join(SCHEDULERS)}")
    if "slurm" in raw and scheduler != "slurm":
        raise SpecError("inventory.slurm: only with scheduler: slurm (the inventory says scheduler: "
                        f"{scheduler})")
    slurm = parse_slurm_section(raw.get("slurm"), [h.name for h in hosts], source) if scheduler == "slurm" else None
    return Inventory(tuple(hosts), str(scheduler), slurm)


def _local_path(value: str | None, source: str | None) -> str | None:
    """A controller-side file of the inventory (key_file, known_hosts): ``~`` expanded; a relative path is
    relative to the inventory file's directory (like an ssh_config's), else to the current directory."""
    if not value:
        return None
    p = Path(value).expanduser()
    if not p.is_absolute():
        p = (Path(source).parent if source else Path.cwd()) / p
    return str(p.resolve())


def _check_distinct_paths(host: str, media: Mapping[str, Medium]) -> None:
    """Two media on one path, or one mounted inside another, would hide each other's data."""
    items = sorted(media.values(), key=lambda m: m.path)
    for a in items:
        for b in items:
            if a is b:
                continue
            if a.path == b.path and a.name < b.name:
                raise SpecError(f"inventory.hosts[{host}].media.{b.name}.path: {b.path!r} is also the path "
                                f"of medium {a.name!r}")
            if b.path.startswith(a.path + "/") and a.kind != "dir":
                raise SpecError(f"inventory.hosts[{host}].media.{b.name}.path: {b.path!r} is inside medium "
                                f"{a.name!r} ({a.path}); each medium needs its own path")


def load_inventory(path: str | Path | None) -> Inventory:
    if path is None:
        return localhost_inventory()
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"inventory: file {str(p)!r} does not exist")
    return parse_inventory(yaml.safe_load(p.read_text()) or {}, source=str(p.resolve()))
