"""Inventories: the hosts a study runs on and the storage media each offers.

Pure: YAML in, frozen dataclasses out, with errors that name the field and the allowed values. The
recipes that build the media (mkfs, mount, loop devices, cgroups) are in :mod:`dbmatrix.hosts.media`.

A medium is declared per host as ``media: {name: {kind: ..., path: ..., emulates: ...,
description: ..., <kind-specific options>}}``. Parsing fills every default in, so
:meth:`Medium.to_dict` records the complete recipe and parses back to the same medium.

An inventory may say where the fleet gets its hosts: ``scheduler: static`` (the default: the hosts are
the study's) or ``scheduler: slurm`` with a ``slurm:`` section (:class:`SlurmSection`; the leaser is
:mod:`dbmatrix.run.slurm`).

Kinds and their options (sizes take an integer number of bytes or ``4G``/``256M``/``512K`` in
binary units; ``sunit``/``swidth`` are in 512-byte sectors, as ``mkfs.xfs -d sunit=,swidth=``):

- ``dir``: an existing directory (created if missing). No options.
- ``tmpfs``: ``size`` (required), ``mount_options``.
- ``loop``: a file-backed block device. ``size`` (required), ``backing_file`` (default
  ``<workdir>/media-backing/<name>.img``), ``direct_io`` (default true: no double caching in the
  host page cache), ``partition_pct`` (partition to this share of the device: over-provisioning),
  plus the file-system options ``fstype`` (xfs|ext4), ``block_size``, ``sunit``, ``swidth``,
  ``mkfs_options``, ``mount_options`` (default ``[noatime]``).
- ``ram-block``: a loop device over a file on its own tmpfs (RAM behind the block layer).
  ``size`` (required), ``backing_dir`` (the tmpfs mount; default ``<workdir>/media-backing/<name>``),
  ``direct_io`` (default false), ``partition_pct`` and the file-system options.
- ``blockdev``: a real device. ``device`` (required), ``partition_pct``, file-system options.
- ``mdraid``: RAID0 over ``devices`` (>= 2) with ``chunk`` (default 512K), ``level`` (0),
  ``partition_pct`` (applied to every member), file-system options; XFS ``sunit``/``swidth``
  default to the chunk and chunk x devices.
- ``pmem``: ``mode`` (fsdax|sector|devdax, required), ``namespace`` (reconfigured with
  ``ndctl create-namespace --force --reconfig``; default ``namespace0.0``), ``size``, ``align``
  (fsdax/devdax), ``map`` (fsdax), ``sector_size`` (sector), file-system options (not for devdax;
  fsdax mounts with ``dax`` by default).
- ``nvmeof``: an NVMe namespace reached over a fabric (NVMe-oF, seed 001's pooled remote NVMe):
  ``transport`` (tcp|rdma, required), ``address`` (the target's address, required), ``service_id``
  (default 4420), ``nqn`` (the subsystem's NQN, required), ``host_nqn`` (optional), ``namespace``
  (default 1), plus the file-system options. Ensure loads ``nvme-<transport>``, runs ``nvme connect``
  and formats and mounts the namespace; teardown unmounts and runs ``nvme disconnect``.
- ``throttled``: a block-backed medium under blkio/io cgroup limits. ``base`` (a mapping with the
  ``kind`` of the wrapped medium, one of loop/ram-block/blockdev/mdraid/pmem, and its options;
  it is built at this medium's path and named after it), ``read_iops``, ``write_iops``,
  ``read_bps``, ``write_bps`` (at least one), ``cgroup`` (auto|v1|v2).
"""

from __future__ import annotations

import copy
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dbmatrix.hosts.remote import Host, LocalHost, SSHHost, SSHTarget, check_ssh_access
from dbmatrix.spec.experiment import SpecError

MEDIUM_KINDS = ("dir", "tmpfs", "loop", "ram-block", "blockdev", "mdraid", "pmem", "nvmeof", "throttled")
NVMEOF_TRANSPORTS = ("tcp", "rdma")
# What an emulating medium stands in for; figures and the paper say "emulated" next to these.
EMULATES = ("pmem-fsdax", "pmem-sector", "pmem-devdax", "nvme", "remote-nvme", "cloud-block", "ssd", "hdd")
FSTYPES = ("xfs", "ext4")
BLOCK_SIZES = {"xfs": (1024, 2048, 4096, 8192, 16384, 32768, 65536), "ext4": (1024, 2048, 4096)}
PMEM_MODES = ("fsdax", "sector", "devdax")
PMEM_ALIGNS = ("4K", "2M", "1G")
PMEM_MAPS = ("mem", "dev")
PMEM_SECTOR_SIZES = (512, 4096)
RAID_LEVELS = (0,)
CGROUP_VERSIONS = ("auto", "v1", "v2")
THROTTLE_LIMITS = ("read_iops", "write_iops", "read_bps", "write_bps")
BLOCK_KINDS = ("loop", "ram-block", "blockdev", "mdraid", "pmem")  # what `throttled` can wrap
XFS_MIN_BYTES = 300 * 2**20  # mkfs.xfs (xfsprogs 6) refuses smaller file systems
DEFAULT_CONNECT_TIMEOUT_S = 15.0

_COMMON_KEYS = ("kind", "path", "emulates", "description")
_FS_KEYS = ("fstype", "block_size", "sunit", "swidth", "mkfs_options", "mount_options")
KIND_OPTIONS: dict[str, tuple[str, ...]] = {
    "dir": (),
    "tmpfs": ("size", "mount_options"),
    "loop": ("size", "backing_file", "direct_io", "partition_pct", *_FS_KEYS),
    "ram-block": ("size", "backing_dir", "direct_io", "partition_pct", *_FS_KEYS),
    "blockdev": ("device", "partition_pct", *_FS_KEYS),
    "mdraid": ("devices", "level", "chunk", "partition_pct", *_FS_KEYS),
    "pmem": ("mode", "namespace", "size", "align", "map", "sector_size", *_FS_KEYS),
    "nvmeof": ("transport", "address", "service_id", "nqn", "host_nqn", "namespace", *_FS_KEYS),
    "throttled": ("base", *THROTTLE_LIMITS, "cgroup"),
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_DEV = re.compile(r"/dev/[A-Za-z0-9._:/-]+\Z")
_MOUNT_OPT = re.compile(r"[A-Za-z0-9_.:/+-]+(=[A-Za-z0-9_.:/+-]*)?\Z")
_NAMESPACE = re.compile(r"namespace(\d+)\.(\d+)\Z")
_SIZE = re.compile(r"(\d+)\s*(?:([KMGT])(?:iB)?)?\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def default_workdir() -> str:
    """Where servers, datadirs and snapshots live on a host (never inside the repository)."""
    return os.environ.get("DBMATRIX_WORKDIR", "/var/tmp/dbmatrix")


@dataclass(frozen=True)
class Medium:
    """One storage medium of a host; `options` holds the kind-specific recipe, defaults filled in."""

    name: str
    kind: str
    path: str
    emulates: str | None = None
    description: str = ""
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def emulated(self) -> bool:
        return self.emulates is not None

    @property
    def base(self) -> Medium | None:
        """The wrapped block-backed medium of a `throttled` medium (same name and path), else None."""
        if self.kind != "throttled":
            return None
        opts = dict(self.options["base"])
        kind = opts.pop("kind")
        return Medium(self.name, kind, self.path, None, "", opts)

    def to_dict(self) -> dict[str, Any]:
        """Everything that defines the medium, in the inventory's own format (parses back to it)."""
        return {"name": self.name, "kind": self.kind, "path": self.path, "emulates": self.emulates,
                "description": self.description, **copy.deepcopy(dict(self.options))}


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
    """This machine with a directory on the root file system, two RAM media that stand in for PMEM and a
    throttled RAM block device for slow Galera followers (only the media a spec names are ever built, so
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
    }
    media = {n: parse_medium(r, host="localhost", name=n, workdir=wd) for n, r in raw.items()}
    return Inventory((HostSpec("localhost", workdir=wd, media=media),))


# ---------------------------------------------------------------- value parsers (pure)

def parse_size(value: Any, where: str) -> int:
    """Bytes from an int or a string such as 4G, 256M, 512KiB (binary units)."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int):
        if value <= 0:
            raise SpecError(f"{where}: {value!r} must be positive")
        return value
    m = _SIZE.match(value.strip()) if isinstance(value, str) else None
    if not m:
        raise SpecError(f"{where}: {value!r} is not a size; allowed: a number of bytes or a number "
                        "with K, M, G or T (binary units, e.g. 4G = 4 GiB, 256M, 512K)")
    n = int(m.group(1)) * _UNITS[(m.group(2) or "").upper()]
    if n <= 0:
        raise SpecError(f"{where}: {value!r} must be positive")
    return n


def human_size(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{unit}"
    return str(n)


def _choice(value: Any, allowed: tuple[Any, ...], where: str) -> Any:
    if value not in allowed or isinstance(value, bool) != any(isinstance(a, bool) for a in allowed):
        raise SpecError(f"{where}: {value!r} is not allowed; allowed: {', '.join(map(str, allowed))}")
    return value


def _positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"{where}: {value!r} must be a positive integer")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where}: {value!r} must be true or false")
    return value


def _abs_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise SpecError(f"{where}: {value!r} must be an absolute path")
    norm = posixpath.normpath(value)
    if norm == "/" or ".." in value.split("/") or any(c.isspace() for c in value):
        raise SpecError(f"{where}: {value!r} must be an absolute path below / without '..' or spaces")
    return norm


def _device(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _DEV.match(value):
        raise SpecError(f"{where}: {value!r} must be a block device path such as /dev/nvme0n1")
    return value


def _str_list(value: Any, where: str, *, split_commas: bool = False) -> list[str]:
    if isinstance(value, str) and split_commas:
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise SpecError(f"{where}: {value!r} must be a list of strings")
    return [v.strip() for v in value]


def _mount_options(value: Any, where: str) -> list[str]:
    opts = _str_list(value, where, split_commas=True)
    for o in opts:
        if not _MOUNT_OPT.match(o):
            raise SpecError(f"{where}: {o!r} is not a mount option (name or name=value)")
    return opts


# ---------------------------------------------------------------- media (pure)

def parse_medium(raw: Any, *, host: str, name: str, workdir: str | None) -> Medium:
    """Validate one medium and fill in its defaults. `workdir` locates default backing files.

    Idempotent: ``parse_medium(m.to_dict(), ...)`` returns `m` again (no workdir needed then).
    """
    where = f"inventory.hosts[{host}].media.{name}"
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: must be a mapping with kind and path")
    if not _NAME.match(str(name)):
        raise SpecError(f"{where}: medium name {name!r} must be 1-64 letters, digits, '_', '.' or '-' "
                        "(it names backing files and cgroups)")
    raw = {k: v for k, v in raw.items() if k != "name"}
    kind = raw.get("kind", "dir")
    if kind not in MEDIUM_KINDS:
        raise SpecError(f"{where}.kind: unknown kind {kind!r}; allowed: {', '.join(MEDIUM_KINDS)}")
    path = raw.get("path")
    if path is None:
        if workdir is None:
            raise SpecError(f"{where}.path: required (no workdir to derive <workdir>/media/{name} from)")
        path = f"{workdir}/media/{name}"
    path = _abs_path(path, f"{where}.path")
    emulates = raw.get("emulates")
    if emulates is not None:
        _choice(emulates, EMULATES, f"{where}.emulates")
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise SpecError(f"{where}.description: {description!r} must be a string")
    options = {k: v for k, v in raw.items() if k not in _COMMON_KEYS}
    opts = kind_options(kind, options, where=where, name=str(name), workdir=workdir)
    return Medium(str(name), kind, path, emulates, description, opts)


def kind_options(kind: str, raw: Mapping[str, Any], *, where: str, name: str,
                 workdir: str | None) -> dict[str, Any]:
    """The normalised kind-specific options of a medium (defaults filled in)."""
    allowed = KIND_OPTIONS[kind]
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        allowed_s = ", ".join((*_COMMON_KEYS, *allowed))
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)} for kind {kind}; allowed: {allowed_s}")
    return _KIND_PARSERS[kind](dict(raw), where, name, workdir)


def _opts_dir(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    return {}


def _opts_tmpfs(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    if "size" not in raw:
        raise SpecError(f"{where}.size: required for kind tmpfs (e.g. 4G)")
    return {"size": _page_size(raw["size"], f"{where}.size"),
            "mount_options": _mount_options(raw.get("mount_options", []), f"{where}.mount_options")}


def _page_size(value: Any, where: str) -> int:
    n = parse_size(value, where)
    if n % 4096:
        raise SpecError(f"{where}: {value!r} must be a multiple of 4K")
    return n


def _backing_default(workdir: str | None, suffix: str, where: str) -> str:
    if workdir is None:
        raise SpecError(f"{where}: required (no workdir to derive it from)")
    return f"{workdir}/media-backing/{suffix}"


def _opts_file_backed(raw: dict[str, Any], where: str, name: str, workdir: str | None, *, kind: str,
                      backing_key: str, backing_name: str, direct_io: bool) -> dict[str, Any]:
    """loop and ram-block: a sized backing file (or a tmpfs holding it), a loop device, a file system."""
    if "size" not in raw:
        raise SpecError(f"{where}.size: required for kind {kind} (e.g. 2G)")
    size = _page_size(raw["size"], f"{where}.size")
    backing = raw.get(backing_key) or _backing_default(workdir, backing_name, f"{where}.{backing_key}")
    out: dict[str, Any] = {
        "size": size,
        backing_key: _abs_path(backing, f"{where}.{backing_key}"),
        "direct_io": _bool(raw.get("direct_io", direct_io), f"{where}.direct_io"),
        "partition_pct": _partition_pct(raw.get("partition_pct"), f"{where}.partition_pct"),
    }
    out.update(_fs_options(raw, where, kind))
    _check_fs_size(out, size, where)
    return out


def _opts_loop(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    # Direct I/O on the backing file by default: no second copy in the host's page cache.
    return _opts_file_backed(raw, where, name, workdir, kind="loop", backing_key="backing_file",
                             backing_name=f"{name}.img", direct_io=True)


def _opts_ram_block(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    return _opts_file_backed(raw, where, name, workdir, kind="ram-block", backing_key="backing_dir",
                             backing_name=name, direct_io=False)


def _opts_blockdev(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    if "device" not in raw:
        raise SpecError(f"{where}.device: required for kind blockdev (e.g. /dev/nvme0n1)")
    out: dict[str, Any] = {
        "device": _device(raw["device"], f"{where}.device"),
        "partition_pct": _partition_pct(raw.get("partition_pct"), f"{where}.partition_pct"),
    }
    out.update(_fs_options(raw, where, "blockdev"))
    return out


def _opts_mdraid(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    devs = raw.get("devices")
    if not isinstance(devs, list) or len(devs) < 2:
        raise SpecError(f"{where}.devices: {devs!r} must be a list of at least 2 block devices for RAID0")
    devices = [_device(d, f"{where}.devices[{i}]") for i, d in enumerate(devs)]
    if len(set(devices)) != len(devices):
        raise SpecError(f"{where}.devices: {devices!r} lists a device twice")
    chunk = parse_size(raw.get("chunk", "512K"), f"{where}.chunk")
    if chunk < 4096 or chunk & (chunk - 1):
        raise SpecError(f"{where}.chunk: {raw.get('chunk')!r} must be a power of two of at least 4K "
                        "(e.g. 64K, 256K, 512K)")
    fs_raw = dict(raw)
    if fs_raw.get("fstype", "xfs") == "xfs" and "sunit" not in raw and "swidth" not in raw:
        # Stripe geometry from the array: unit = chunk, width = chunk x data devices (seed 004).
        fs_raw["sunit"] = chunk // 512
        fs_raw["swidth"] = chunk // 512 * len(devices)
    out: dict[str, Any] = {
        "devices": devices,
        "level": _choice(raw.get("level", 0), RAID_LEVELS, f"{where}.level"),
        "chunk": chunk,
        "partition_pct": _partition_pct(raw.get("partition_pct"), f"{where}.partition_pct"),
    }
    out.update(_fs_options(fs_raw, where, "mdraid"))
    return out


def _opts_pmem(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    if "mode" not in raw:
        raise SpecError(f"{where}.mode: required for kind pmem; allowed: {', '.join(PMEM_MODES)}")
    mode = _choice(raw["mode"], PMEM_MODES, f"{where}.mode")
    ns = raw.get("namespace", "namespace0.0")
    if not isinstance(ns, str) or not _NAMESPACE.match(ns):
        raise SpecError(f"{where}.namespace: {ns!r} must be an ndctl namespace name such as namespace0.0")
    out: dict[str, Any] = {"mode": mode, "namespace": ns,
                           "size": parse_size(raw["size"], f"{where}.size") if raw.get("size") else None}
    rules = (("align", ("fsdax", "devdax")), ("map", ("fsdax",)), ("sector_size", ("sector",)))
    for key, modes in rules:
        if raw.get(key) is not None and mode not in modes:
            raise SpecError(f"{where}.{key}: only for mode {' or '.join(modes)} (mode is {mode})")
    if mode in ("fsdax", "devdax"):
        align = raw.get("align")
        out["align"] = None if align is None else _choice(align, PMEM_ALIGNS, f"{where}.align")
    if mode == "fsdax":
        out["map"] = _choice(raw.get("map", "mem"), PMEM_MAPS, f"{where}.map")
    if mode == "sector":
        out["sector_size"] = _choice(raw.get("sector_size", 4096), PMEM_SECTOR_SIZES, f"{where}.sector_size")
    if mode == "devdax":
        fs_keys = sorted(set(raw) & set(_FS_KEYS))
        if fs_keys:
            raise SpecError(f"{where}.{fs_keys[0]}: devdax is a character device without a file system; "
                            "file-system options are only for mode fsdax or sector")
        return out
    fs = _fs_options(raw, where, "pmem", default_mount=["noatime", "dax"] if mode == "fsdax" else None)
    if mode == "sector" and any(_is_dax_option(o) and o != "dax=never" for o in fs["mount_options"]):
        raise SpecError(f"{where}.mount_options: dax is not possible in sector mode (BTT); "
                        "use mode fsdax for DAX")
    out.update(fs)
    return out


def _opts_throttled(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    base = raw.get("base")
    if not isinstance(base, Mapping) or "kind" not in base:
        raise SpecError(f"{where}.base: required mapping with the kind of the throttled medium; "
                        f"allowed kinds: {', '.join(BLOCK_KINDS)} (throttling needs a block device)")
    bkind = base["kind"]
    if bkind not in BLOCK_KINDS:
        raise SpecError(f"{where}.base.kind: {bkind!r} cannot be throttled (no block device of its own); "
                        f"allowed: {', '.join(BLOCK_KINDS)}")
    own = sorted(set(base) & {"path", "emulates", "description", "name"})
    if own:
        raise SpecError(f"{where}.base.{own[0]}: set it on the throttled medium itself, not on its base")
    bopts = kind_options(bkind, {k: v for k, v in base.items() if k != "kind"},
                         where=f"{where}.base", name=name, workdir=workdir)
    if bkind == "pmem" and bopts["mode"] == "devdax":
        raise SpecError(f"{where}.base.mode: devdax has no block device to throttle; allowed: fsdax, sector")
    out: dict[str, Any] = {"base": {"kind": bkind, **bopts}}
    for key in THROTTLE_LIMITS:
        v = raw.get(key)
        if v is None:
            out[key] = None
        elif key.endswith("_iops"):
            out[key] = _positive_int(v, f"{where}.{key}")
        else:
            out[key] = parse_size(v, f"{where}.{key}")
    if all(out[k] is None for k in THROTTLE_LIMITS):
        raise SpecError(f"{where}: a throttled medium needs at least one of {', '.join(THROTTLE_LIMITS)}")
    out["cgroup"] = _choice(raw.get("cgroup", "auto"), CGROUP_VERSIONS, f"{where}.cgroup")
    return out


_NQN = re.compile(r"nqn\.\d{4}-\d{2}\.[A-Za-z0-9.-]+(:[A-Za-z0-9._:-]+)?\Z")
_ADDRESS = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:-]*\Z")


def _opts_nvmeof(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    for key in ("transport", "address", "nqn"):
        if key not in raw:
            raise SpecError(f"{where}.{key}: required for kind nvmeof (transport tcp|rdma, the target's address, "
                            "the subsystem NQN as `nvme discover` lists it)")
    address = str(raw["address"])
    if not _ADDRESS.match(address):
        raise SpecError(f"{where}.address: {address!r} is not a host name or IP address")
    out: dict[str, Any] = {
        "transport": _choice(raw["transport"], NVMEOF_TRANSPORTS, f"{where}.transport"),
        "address": address,
        "service_id": _positive_int(raw.get("service_id", 4420), f"{where}.service_id"),
    }
    for key in ("nqn", "host_nqn"):
        v = raw.get(key)
        if v is None and key == "host_nqn":
            out[key] = None
            continue
        if not isinstance(v, str) or not _NQN.match(v):
            raise SpecError(f"{where}.{key}: {v!r} is not an NVMe qualified name (nqn.YYYY-MM.reverse.domain:...)")
        out[key] = v
    out["namespace"] = _positive_int(raw.get("namespace", 1), f"{where}.namespace")
    out.update(_fs_options(raw, where, "nvmeof"))
    return out


_KIND_PARSERS = {"dir": _opts_dir, "tmpfs": _opts_tmpfs, "loop": _opts_loop, "ram-block": _opts_ram_block,
                 "blockdev": _opts_blockdev, "mdraid": _opts_mdraid, "pmem": _opts_pmem,
                 "nvmeof": _opts_nvmeof, "throttled": _opts_throttled}


def _partition_pct(value: Any, where: str) -> int | float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 100:
        raise SpecError(f"{where}: {value!r} must be a percentage in (0, 100] (e.g. 60 leaves 40 % of "
                        "the device unused: over-provisioning)")
    return value


def _is_dax_option(opt: str) -> bool:
    return opt == "dax" or opt.startswith("dax=")


def _fs_options(raw: Mapping[str, Any], where: str, kind: str,
                default_mount: list[str] | None = None) -> dict[str, Any]:
    fstype = _choice(raw.get("fstype", "xfs"), FSTYPES, f"{where}.fstype")
    bs = _choice(raw.get("block_size", 4096), BLOCK_SIZES[fstype], f"{where}.block_size")
    sunit, swidth = raw.get("sunit"), raw.get("swidth")
    if (sunit is None) != (swidth is None):
        missing = "swidth" if swidth is None else "sunit"
        raise SpecError(f"{where}.{missing}: sunit and swidth go together (both in 512-byte sectors)")
    if sunit is not None:
        sunit = _positive_int(sunit, f"{where}.sunit")
        swidth = _positive_int(swidth, f"{where}.swidth")
        if (sunit * 512) % bs:
            raise SpecError(f"{where}.sunit: {sunit} sectors ({sunit * 512} bytes) must be a multiple of "
                            f"the block size {bs}")
        if swidth % sunit:
            raise SpecError(f"{where}.swidth: {swidth} must be a multiple of sunit {sunit}")
    return {
        "fstype": fstype,
        "block_size": bs,
        "sunit": sunit,
        "swidth": swidth,
        "mkfs_options": _str_list(raw.get("mkfs_options", []), f"{where}.mkfs_options"),
        "mount_options": _mount_options(raw.get("mount_options", default_mount or ["noatime"]),
                                        f"{where}.mount_options"),
    }


def _check_fs_size(opts: Mapping[str, Any], size: int, where: str) -> None:
    fs_bytes = size * (opts["partition_pct"] or 100) / 100
    if opts["fstype"] == "xfs" and fs_bytes < XFS_MIN_BYTES:
        pct = f" x {opts['partition_pct']} %" if opts["partition_pct"] else ""
        raise SpecError(f"{where}.size: {human_size(size)}{pct} leaves {fs_bytes / 2**20:.0f} MiB for XFS, "
                        f"which needs at least {XFS_MIN_BYTES // 2**20} MiB; allowed: a larger size "
                        "(loop files are sparse) or fstype ext4")


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
               "connect_timeout", "class"}
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
        workdir = _abs_path(str(h.get("workdir") or default_workdir()), f"inventory.hosts[{name}].workdir")
        media_raw = h.get("media") or {"disk": {"kind": "dir"}}
        if not isinstance(media_raw, Mapping):
            raise SpecError(f"inventory.hosts[{name}].media: must be a mapping of medium name to recipe")
        media = {str(m): _medium(name, str(m), v, workdir) for m, v in media_raw.items()}
        _check_distinct_paths(name, media)
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
                              workdir, media, float(timeout), source, host_class))
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
