"""Where a medium's devices are, as shell words (pure): backing files and loop lookups, partitions,
the MD array, PMEM namespaces' devices and connected NVMe-oF namespaces; the whole disk and the device
that gets the file system.
"""

from __future__ import annotations

import re

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import MediaError, fs_medium, q


def loop_file(medium: Medium) -> str:
    """The backing file of the loop device of a loop, ram-block or nbd medium."""
    m = fs_medium(medium)
    if m.kind == "loop":
        return str(m.options["backing_file"])
    if m.kind == "ram-block":
        return f"{m.options['backing_dir']}/{m.name}.img"
    if m.kind == "nbd":  # the loop device sits on nbdfuse's file of the export
        return f"{m.options['run_dir']}/fuse/disk"
    raise MediaError(f"medium {medium.name!r} of kind {m.kind} has no backing file")


def partition_path(device: str) -> str:
    """The first partition of a device: nvme0n1 -> nvme0n1p1, sdb -> sdb1, by-id names -> -part1."""
    if device.startswith("/dev/disk/by-"):
        return f"{device}-part1"
    return f"{device}p1" if device[-1].isdigit() else f"{device}1"


def md_device(medium: Medium) -> str:
    return f"/dev/md/dbmatrix-{medium.name}"


def pmem_device(namespace: str, mode: str) -> str:
    """Kernel naming: namespaceX.Y -> pmemX (Y = 0) or pmemX.Y, +s in sector mode, daxX.Y."""
    m = re.fullmatch(r"namespace(\d+)\.(\d+)", namespace)
    if not m:
        raise MediaError(f"pmem: {namespace!r} is not a namespace name such as namespace0.0")
    region, idx = m.groups()
    if mode == "devdax":
        return f"/dev/dax{region}.{idx}"
    base = f"pmem{region}" if idx == "0" else f"pmem{region}.{idx}"
    return f"/dev/{base}{'s' if mode == 'sector' else ''}"


def loop_lookup(file: str) -> str:
    return f"$(losetup -nO NAME -j {q(file)})"


def loop_lookup_all(file: str) -> str:
    """Every loop device on `file`, also when the file is gone (``losetup -j`` needs it to exist)."""
    return (f"$({{ losetup -nO NAME -j {q(file)} 2>/dev/null; losetup -nO NAME,BACK-FILE | "
            f"awk -v f=\"$(readlink -m {q(file)} 2>/dev/null || printf %s {q(file)})\" '$2 == f {{print $1}}'; }} "
            "| sort -u)")


def nvmeof_lookup(nqn: str, namespace: int) -> str:
    """Shell that prints the block device (/dev/nvmeXnY) of namespace `namespace` of the connected NVMe
    subsystem `nqn` (the kernel numbers controllers as they connect, so the name is looked up each time);
    prints nothing when it is not connected."""
    return (f"for s in /sys/class/nvme-subsystem/*; do [ \"$(cat \"$s/subsysnqn\" 2>/dev/null)\" = {q(nqn)} ] || "
            f"continue; for d in \"$s\"/nvme*n{namespace}; do [ -e \"$d\" ] && echo \"/dev/${{d##*/}}\"; done; "
            "done | head -n 1")


def disk_expr(medium: Medium) -> str:
    """A shell word that expands to the whole-disk device of a block-backed medium."""
    m = fs_medium(medium)
    o = m.options
    if m.kind == "nvmeof":
        return f'"$({nvmeof_lookup(o["nqn"], o["namespace"])})"'
    if m.kind in ("loop", "ram-block", "nbd"):
        return f'"{loop_lookup(loop_file(m))}"'
    if m.kind == "blockdev":
        return q(o["device"])
    if m.kind == "mdraid":
        return q(md_device(m))
    if m.kind == "pmem":
        return q(pmem_device(o["namespace"], o["mode"]))
    raise MediaError(f"medium {medium.name!r} of kind {m.kind} has no block device")


def target_expr(medium: Medium) -> str:
    """A shell word for the device that gets the file system (a partition when partition_pct)."""
    m = fs_medium(medium)
    o = m.options
    if m.kind in ("loop", "ram-block") and o["partition_pct"]:
        return f'"{loop_lookup(loop_file(m))}p1"'
    if m.kind == "blockdev" and o["partition_pct"]:
        return q(partition_path(o["device"]))
    return disk_expr(m)
