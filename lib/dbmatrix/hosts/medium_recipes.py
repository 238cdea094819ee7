"""Storage media as data (pure): the :class:`Medium` recipe, its validation and defaults, and the value
parsers the inventory shares. The commands that build media are in :mod:`dbmatrix.hosts.media`.

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
- ``nbd``: a network block device (seed 001's remote storage, as a stand-in): ``nbdkit`` serves a backing
  file, ``nbdfuse`` exposes the export as a file, a loop device (direct I/O) and a file system sit on that.
  ``size`` (required), ``backing_file`` (the server's; default ``<workdir>/media-backing/<name>.img``),
  ``transport``: ``tcp`` (the server runs in its own network namespace ``dbmatrix-<name>``, reached over a
  veth pair: a real TCP path through the kernel's network stack) or ``unix`` (a unix socket in the host's
  namespace: the same nbdkit and FUSE path without the network, the control), ``subnet`` (tcp: the veth
  pair's /30; default ``10.213.x.y/30`` derived from the name), ``port`` (10809), ``rate`` (tcp: ``tc htb``
  shaping of both directions, e.g. ``10gbit``), ``delay_ms`` (nbdkit's delay filter on every read and
  write, whole milliseconds), ``connections`` (nbdfuse's NBD connections, default 4), ``run_dir`` (pid
  files, logs, the socket and the FUSE mount; default ``<workdir>/media-backing/<name>.nbd``),
  ``direct_io`` (the loop device's, default true) and the file-system options.
- ``throttled``: a block-backed medium under blkio/io cgroup limits. ``base`` (a mapping with the
  ``kind`` of the wrapped medium, one of loop/ram-block/blockdev/mdraid/pmem, and its options;
  it is built at this medium's path and named after it), ``read_iops``, ``write_iops``,
  ``read_bps``, ``write_bps`` (at least one), ``cgroup`` (auto|v1|v2).
"""

from __future__ import annotations

import copy
import posixpath
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.spec.experiment import SpecError

MEDIUM_KINDS = ("dir", "tmpfs", "loop", "ram-block", "blockdev", "mdraid", "pmem", "nvmeof", "nbd", "throttled")
NBD_TRANSPORTS = ("tcp", "unix")
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
    "nbd": ("size", "backing_file", "transport", "subnet", "port", "rate", "delay_ms", "connections", "run_dir",
            "direct_io", *_FS_KEYS),
    "throttled": ("base", *THROTTLE_LIMITS, "cgroup"),
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_DEV = re.compile(r"/dev/[A-Za-z0-9._:/-]+\Z")
_MOUNT_OPT = re.compile(r"[A-Za-z0-9_.:/+-]+(=[A-Za-z0-9_.:/+-]*)?\Z")
_NAMESPACE = re.compile(r"namespace(\d+)\.(\d+)\Z")
_SIZE = re.compile(r"(\d+)\s*(?:([KMGT])(?:iB)?)?\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


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


def positive_int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"{where}: {value!r} must be a positive integer")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where}: {value!r} must be true or false")
    return value


def abs_path(value: Any, where: str) -> str:
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


def str_list(value: Any, where: str, *, split_commas: bool = False) -> list[str]:
    if isinstance(value, str) and split_commas:
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise SpecError(f"{where}: {value!r} must be a list of strings")
    return [v.strip() for v in value]


def _mount_options(value: Any, where: str) -> list[str]:
    opts = str_list(value, where, split_commas=True)
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
    path = abs_path(path, f"{where}.path")
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
        backing_key: abs_path(backing, f"{where}.{backing_key}"),
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
            out[key] = positive_int(v, f"{where}.{key}")
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
        "service_id": positive_int(raw.get("service_id", 4420), f"{where}.service_id"),
    }
    for key in ("nqn", "host_nqn"):
        v = raw.get(key)
        if v is None and key == "host_nqn":
            out[key] = None
            continue
        if not isinstance(v, str) or not _NQN.match(v):
            raise SpecError(f"{where}.{key}: {v!r} is not an NVMe qualified name (nqn.YYYY-MM.reverse.domain:...)")
        out[key] = v
    out["namespace"] = positive_int(raw.get("namespace", 1), f"{where}.namespace")
    out.update(_fs_options(raw, where, "nvmeof"))
    return out


_RATE = re.compile(r"[1-9]\d*(k|m|g)?bit\Z")
_SUBNET = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/30\Z")


def nbd_default_subnet(name: str) -> str:
    """A /30 in 10.213.0.0/16 derived from the medium's name (stable across runs and hosts)."""
    h = zlib.crc32(name.encode())
    return f"10.213.{h % 256}.{(h >> 8) % 64 * 4}/30"


def _subnet(value: Any, where: str) -> str:
    m = _SUBNET.match(value) if isinstance(value, str) else None
    if not m or any(int(g) > 255 for g in m.groups()) or int(m.group(4)) % 4:
        raise SpecError(f"{where}: {value!r} must be an IPv4 /30 network such as 10.213.7.0/30 (the veth "
                        "pair's two addresses are its .1 and .2)")
    return value


def _opts_nbd(raw: dict[str, Any], where: str, name: str, workdir: str | None) -> dict[str, Any]:
    if "size" not in raw:
        raise SpecError(f"{where}.size: required for kind nbd (e.g. 2G)")
    size = _page_size(raw["size"], f"{where}.size")
    transport = _choice(raw.get("transport", "tcp"), NBD_TRANSPORTS, f"{where}.transport")
    for key in ("subnet", "rate", "port"):
        if transport == "unix" and raw.get(key) is not None:
            raise SpecError(f"{where}.{key}: only for transport tcp (a unix socket has no link to address or shape)")
    rate = raw.get("rate")
    if rate is not None and (not isinstance(rate, str) or not _RATE.match(rate)):
        raise SpecError(f"{where}.rate: {rate!r} must be a tc rate in bits per second such as 10gbit, 500mbit")
    delay = raw.get("delay_ms", 0)
    if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= 1000:
        raise SpecError(f"{where}.delay_ms: {delay!r} must be whole milliseconds in 0..1000 (nbdkit's delay "
                        "filter counts in ms; 0: no filter)")
    out: dict[str, Any] = {
        "size": size,
        "backing_file": abs_path(raw.get("backing_file") or _backing_default(workdir, f"{name}.img",
                                                                              f"{where}.backing_file"),
                                  f"{where}.backing_file"),
        "transport": transport,
        "subnet": (_subnet(raw.get("subnet") or nbd_default_subnet(name), f"{where}.subnet")
                   if transport == "tcp" else None),
        "port": positive_int(raw.get("port", 10809), f"{where}.port") if transport == "tcp" else None,
        "rate": rate,
        "delay_ms": delay,
        "connections": positive_int(raw.get("connections", 4), f"{where}.connections"),
        "run_dir": abs_path(raw.get("run_dir") or _backing_default(workdir, f"{name}.nbd", f"{where}.run_dir"),
                             f"{where}.run_dir"),
        "direct_io": _bool(raw.get("direct_io", True), f"{where}.direct_io"),
    }
    if out["port"] is not None and out["port"] > 65535:
        raise SpecError(f"{where}.port: {out['port']} is not a TCP port (1-65535)")
    out.update(_fs_options(raw, where, "nbd"))
    _check_fs_size(out, size, where)
    return out


_KIND_PARSERS = {"dir": _opts_dir, "tmpfs": _opts_tmpfs, "loop": _opts_loop, "ram-block": _opts_ram_block,
                 "blockdev": _opts_blockdev, "mdraid": _opts_mdraid, "pmem": _opts_pmem,
                 "nvmeof": _opts_nvmeof, "nbd": _opts_nbd, "throttled": _opts_throttled}


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
        sunit = positive_int(sunit, f"{where}.sunit")
        swidth = positive_int(swidth, f"{where}.swidth")
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
        "mkfs_options": str_list(raw.get("mkfs_options", []), f"{where}.mkfs_options"),
        "mount_options": _mount_options(raw.get("mount_options", default_mount or ["noatime"]),
                                        f"{where}.mount_options"),
    }


def _check_fs_size(opts: Mapping[str, Any], size: int, where: str) -> None:
    fs_bytes = size * (opts.get("partition_pct") or 100) / 100
    if opts["fstype"] == "xfs" and fs_bytes < XFS_MIN_BYTES:
        pct = f" x {opts['partition_pct']} %" if opts.get("partition_pct") else ""
        raise SpecError(f"{where}.size: {human_size(size)}{pct} leaves {fs_bytes / 2**20:.0f} MiB for XFS, "
                        f"which needs at least {XFS_MIN_BYTES // 2**20} MiB; allowed: a larger size "
                        "(loop files are sparse) or fstype ext4")
