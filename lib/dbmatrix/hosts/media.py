"""Storage media recipes: plan -> apply -> verify -> teardown, idempotent.

The recipe of a medium is data (:class:`dbmatrix.hosts.inventory.Medium`); this module turns it into
shell commands and runs them through :class:`dbmatrix.hosts.remote.Host`, so the same code works here
and over SSH (commands go through ``sudo -n`` when the login is not root).

- :func:`plan` / :func:`teardown_plan` (pure): the exact commands, e.g. ``mkfs.xfs -q -b size=4096
  -d sunit=512,swidth=1024 …``, ``parted -s -a optimal … mkpart primary 0% 60%``, ``mdadm --create
  … --level=0 --chunk=256``, ``ndctl create-namespace --force --reconfig=namespace0.0 --mode=fsdax``,
  cgroup writes. Devices whose names the kernel picks (loop devices) appear as lookups from the
  deterministic backing file, ``"$(losetup -nO NAME -j <file>)"``, so every command stands alone.
- :func:`ensure`: verify; if not in place, check prerequisites (tools, devices, PMEM, MD, cgroup
  controller) and fail early naming what is missing; then apply the steps not yet done and verify.
  A second call with everything in place runs no mkfs/mount (``MediumState.commands == ()``).
- :func:`verify`: one round trip gathers ``findmnt``/sysfs/``xfs_info``/cgroup facts; a pure
  evaluation compares them with the recipe and raises :class:`MediaError` listing what is wrong
  (not mounted, wrong file system or geometry, size, partition share, DAX requested but the kernel
  mounted ``dax=never``, throttle limits missing…).
- :func:`teardown`: unmount, detach loop devices, remove backing files and cgroups; safe when
  already torn down. ``blockdev``/``mdraid``/``pmem`` keep their partition tables, file systems,
  RAID superblocks and namespace modes (a later ensure reuses them); only the mount goes.

Names are derived from the medium name: backing files ``<workdir>/media-backing/<name>.img``
(``ram-block``: a tmpfs mounted at ``<workdir>/media-backing/<name>`` holding ``<name>.img``), the
tmpfs source ``dbmatrix-<name>``, the array ``/dev/md/dbmatrix-<name>`` and the cgroup
``<hierarchy>/dbmatrix/<name>``.

Throttling (kind ``throttled``): blk-throttle limits attach to a whole disk (major:minor of the
base medium's loop/md/pmem/real disk; the kernel refuses partitions) in a cgroup. They apply to the
processes in that cgroup, so the runner starts mariadbd through :func:`launch_prefix`, a
``sh -c`` wrapper that writes its own PID into ``cgroup.procs`` and then ``exec``s the server
(same PID). With cgroup v1 (``blkio.throttle.*``, this machine) only direct I/O and reads are
throttled: buffered writeback is issued by kernel flushers outside the cgroup (InnoDB data files
use O_DIRECT, so its data I/O is covered). cgroup v2 (``io.max``) also throttles writeback. When
the login is not root, ensure hands ``cgroup.procs`` to the login user so the prefix works without
sudo (v2 additionally needs a delegated subtree; run as root there).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dbmatrix.hosts.inventory import Medium, parse_medium
from dbmatrix.hosts.mounts import Mount, parse_findmnt_json, visible_mount
from dbmatrix.hosts.remote import CommandResult, Host
from dbmatrix.hosts.sections import parse_sections as split_sections
from dbmatrix.hosts.sections import sections_script
from dbmatrix.spec.experiment import SpecError

q = shlex.quote

MiB = 2**20
STEP_TIMEOUT_S = 3600.0  # mkfs with discard or an md resync on big devices takes a while
CGROUP_PARENT = "dbmatrix"
V1_BLKIO_ROOT = "/sys/fs/cgroup/blkio"
V2_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
# Mount options whose presence /proc/self/mounts reliably shows (others are applied, not checked).
VERIFIABLE_MOUNT_OPTIONS = ("noatime", "nodiratime", "relatime", "ro", "sync", "dirsync", "discard")
V1_LIMIT_FILES = {"read_iops": "blkio.throttle.read_iops_device",
                  "write_iops": "blkio.throttle.write_iops_device",
                  "read_bps": "blkio.throttle.read_bps_device",
                  "write_bps": "blkio.throttle.write_bps_device"}
V2_LIMIT_KEYS = {"read_iops": "riops", "write_iops": "wiops", "read_bps": "rbps", "write_bps": "wbps"}
TOOL_PACKAGES = {"mkfs.xfs": "xfsprogs", "xfs_info": "xfsprogs", "mkfs.ext4": "e2fsprogs",
                 "tune2fs": "e2fsprogs", "parted": "parted", "ndctl": "ndctl", "mdadm": "mdadm",
                 "losetup": "util-linux", "findmnt": "util-linux", "blkid": "util-linux",
                 "lsblk": "util-linux", "mount": "mount", "fallocate": "util-linux",
                 "truncate": "coreutils", "nvme": "nvme-cli", "modprobe": "kmod", "udevadm": "udev"}


class MediaError(RuntimeError):
    """A medium cannot be built or is not what its recipe says; the message says what is wrong.

    `applied`: the commands a failed :func:`ensure`/:func:`teardown` had already run before the failing
    step (they are not rolled back; :func:`teardown` removes what ensure built)."""

    def __init__(self, message: str, applied: Sequence[str] = ()):
        super().__init__(message)
        self.applied = tuple(applied)


@dataclass(frozen=True)
class CgroupLayout:
    """Where blk-throttle limits are set on a host: cgroup v1 ``blkio`` or v2 with ``io``."""

    version: int  # 1 or 2
    root: str  # the hierarchy's mount point

    def group(self, medium_name: str) -> str:
        return f"{self.root}/{CGROUP_PARENT}/{medium_name}"


V1_DEFAULT = CgroupLayout(1, V1_BLKIO_ROOT)
V2_DEFAULT = CgroupLayout(2, V2_ROOTS[0])


@dataclass(frozen=True)
class Step:
    """One apply/teardown command; `done` is a shell test that exits 0 when its effect is in place."""

    what: str
    command: str
    done: str | None = None
    privileged: bool = True


@dataclass(frozen=True)
class MediumState:
    """What :func:`verify` found. `device` is the kernel name of the block device holding the file
    system (``loop3p1``), `disk` its whole disk (``loop3``: what iostat/diskstats and throttling
    use); both None on tmpfs. `commands` lists what :func:`ensure` ran (empty: already in place)."""

    name: str
    kind: str
    path: str
    emulates: str | None
    source: str | None
    device: str | None
    disk: str | None
    fstype: str | None
    mount_options: tuple[str, ...]
    size_bytes: int | None
    dax: bool | None
    throttle: Mapping[str, Any] | None
    checks: tuple[str, ...]
    commands: tuple[str, ...] = ()
    base_kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "base_kind": self.base_kind, "path": self.path,
                "emulates": self.emulates, "source": self.source, "device": self.device,
                "disk": self.disk, "fstype": self.fstype, "mount_options": list(self.mount_options),
                "size_bytes": self.size_bytes, "dax": self.dax,
                "throttle": dict(self.throttle) if self.throttle is not None else None,
                "checks": list(self.checks), "commands": list(self.commands)}


# ---------------------------------------------------------------- recipes (pure)

def checked(medium: Medium) -> Medium:
    """The medium re-validated (a Medium built by hand gets the same errors as an inventory)."""
    try:
        return parse_medium(medium.to_dict(), host="?", name=medium.name, workdir=None)
    except SpecError as exc:
        raise MediaError(f"medium {medium.name!r}: {exc}") from None


def _fs_medium(medium: Medium) -> Medium:
    """The medium that carries the file system (the base of a throttled medium)."""
    return medium.base if medium.kind == "throttled" else medium  # type: ignore[return-value]


def loop_file(medium: Medium) -> str:
    """The backing file of a loop or ram-block medium."""
    m = _fs_medium(medium)
    if m.kind == "loop":
        return str(m.options["backing_file"])
    if m.kind == "ram-block":
        return f"{m.options['backing_dir']}/{m.name}.img"
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


def _loop_lookup(file: str) -> str:
    return f"$(losetup -nO NAME -j {q(file)})"


def _loop_lookup_all(file: str) -> str:
    """Every loop device on `file`, also when the file is gone (``losetup -j`` needs it to exist)."""
    return (f"$({{ losetup -nO NAME -j {q(file)} 2>/dev/null; losetup -nO NAME,BACK-FILE | "
            f"awk -v f=\"$(readlink -m {q(file)})\" '$2 == f {{print $1}}'; }} | sort -u)")


def nvmeof_lookup(nqn: str, namespace: int) -> str:
    """Shell that prints the block device (/dev/nvmeXnY) of namespace `namespace` of the connected NVMe
    subsystem `nqn` (the kernel numbers controllers as they connect, so the name is looked up each time);
    prints nothing when it is not connected."""
    return (f"for s in /sys/class/nvme-subsystem/*; do [ \"$(cat \"$s/subsysnqn\" 2>/dev/null)\" = {q(nqn)} ] || "
            f"continue; for d in \"$s\"/nvme*n{namespace}; do [ -e \"$d\" ] && echo \"/dev/${{d##*/}}\"; done; "
            "done | head -n 1")


def disk_expr(medium: Medium) -> str:
    """A shell word that expands to the whole-disk device of a block-backed medium."""
    m = _fs_medium(medium)
    o = m.options
    if m.kind == "nvmeof":
        return f'"$({nvmeof_lookup(o["nqn"], o["namespace"])})"'
    if m.kind in ("loop", "ram-block"):
        return f'"{_loop_lookup(loop_file(m))}"'
    if m.kind == "blockdev":
        return q(o["device"])
    if m.kind == "mdraid":
        return q(md_device(m))
    if m.kind == "pmem":
        return q(pmem_device(o["namespace"], o["mode"]))
    raise MediaError(f"medium {medium.name!r} of kind {m.kind} has no block device")


def target_expr(medium: Medium) -> str:
    """A shell word for the device that gets the file system (a partition when partition_pct)."""
    m = _fs_medium(medium)
    o = m.options
    if m.kind in ("loop", "ram-block") and o["partition_pct"]:
        return f'"{_loop_lookup(loop_file(m))}p1"'
    if m.kind == "blockdev" and o["partition_pct"]:
        return q(partition_path(o["device"]))
    return disk_expr(m)


def _pct(p: int | float) -> str:
    return f"{p:g}%"


def _parted(dev: str, pct: int | float) -> str:
    return f"parted -s -a optimal {dev} mklabel gpt mkpart primary 0% {_pct(pct)}"


def mkfs_command(medium: Medium) -> str:
    m = _fs_medium(medium)
    o = m.options
    bs = o["block_size"]
    if o["fstype"] == "xfs":
        args = ["mkfs.xfs", "-q", "-b", f"size={bs}"]
        if o["sunit"]:
            args += ["-d", f"sunit={o['sunit']},swidth={o['swidth']}"]
        if (m.kind == "pmem" and o["mode"] == "fsdax"
                and not any("reflink" in x for x in o["mkfs_options"])):
            args += ["-m", "reflink=0"]  # kernels before 6.x refuse DAX on reflink-capable XFS
    else:
        args = ["mkfs.ext4", "-q", "-b", str(bs)]
        if o["sunit"]:
            args += ["-E", f"stride={o['sunit'] * 512 // bs},stripe_width={o['swidth'] * 512 // bs}"]
    return f"{shlex.join([*args, *o['mkfs_options']])} {target_expr(m)}"


def mount_command(medium: Medium) -> str:
    m = _fs_medium(medium)
    o = m.options
    opts = f" -o {q(','.join(o['mount_options']))}" if o["mount_options"] else ""
    return f"mkdir -p {q(medium.path)} && mount -t {o['fstype']}{opts} {target_expr(m)} {q(medium.path)}"


def _mounted(path: str) -> str:
    return f"mountpoint -q {q(path)}"


def _has_fs(target: str) -> str:
    return f'[ -n "$(blkid -p -o value -s TYPE {target})" ]'


def _fs_steps(medium: Medium) -> list[Step]:
    target = target_expr(medium)
    return [Step("make the file system", mkfs_command(medium), _has_fs(target)),
            Step("mount the file system", mount_command(medium), _mounted(medium.path))]


def _chown(path: str, owner: str | None) -> list[Step]:
    if owner is None:
        return []
    return [Step(f"hand {path} to {owner}", f"chown {q(owner)} {q(path)}",
                 f"[ \"$(stat -c %u:%g {q(path)})\" = {q(owner)} ]")]


def _steps_dir(m: Medium) -> list[Step]:
    return [Step("create the directory", f"mkdir -p {q(m.path)}", f"test -d {q(m.path)}", privileged=False)]


def _steps_tmpfs(m: Medium) -> list[Step]:
    o = m.options
    opts = ",".join([f"size={o['size']}", *o["mount_options"]])
    cmd = f"mkdir -p {q(m.path)} && mount -t tmpfs -o {q(opts)} {q('dbmatrix-' + m.name)} {q(m.path)}"
    return [Step("mount the tmpfs", cmd, _mounted(m.path))]


def _loop_steps(m: Medium) -> list[Step]:
    o = m.options
    file = loop_file(m)
    steps: list[Step] = []
    if m.kind == "ram-block":
        bdir = o["backing_dir"]
        # The image plus room for tmpfs rounding; the image never grows beyond `size`.
        tsize = o["size"] + MiB
        steps.append(Step("mount the backing tmpfs",
                          f"mkdir -p {q(bdir)} && mount -t tmpfs -o size={tsize},mode=0700 "
                          f"{q('dbmatrix-' + m.name + '-backing')} {q(bdir)}", _mounted(bdir)))
        steps.append(Step("create the sparse backing file", f"truncate -s {o['size']} {q(file)}",
                          f"test -f {q(file)}"))
    else:
        steps.append(Step("create the backing file",
                          f"mkdir -p {q(posixpath.dirname(file))} && fallocate -l {o['size']} {q(file)}",
                          f"test -f {q(file)}"))
    flags = ["--find", "--show"] + (["-P"] if o["partition_pct"] else []) + (
        ["--direct-io=on"] if o["direct_io"] else [])
    steps.append(Step("attach the loop device", f"losetup {' '.join(flags)} {q(file)}",
                      f'[ -n "{_loop_lookup(file)}" ]'))
    if o["partition_pct"]:
        steps.append(Step("partition the device", _parted(disk_expr(m), o["partition_pct"]),
                          f"test -b {target_expr(m)}"))
    return steps + _fs_steps(m)


def nvme_connect_command(m: Medium) -> str:
    o = m.options
    args = ["nvme", "connect", "-t", o["transport"], "-a", o["address"], "-s", str(o["service_id"]), "-n", o["nqn"]]
    if o["host_nqn"]:
        args += ["--hostnqn", o["host_nqn"]]
    return " ".join(q(a) for a in args)


def _steps_nvmeof(m: Medium) -> list[Step]:
    o = m.options
    module = f"nvme-{o['transport']}"
    connected = f'[ -n "$({nvmeof_lookup(o["nqn"], o["namespace"])})" ]'
    return [Step(f"load {module}", f"modprobe {module}", f"[ -d /sys/module/nvme_{o['transport']} ]"),
            Step(f"connect to {o['nqn']} at {o['address']}:{o['service_id']} over {o['transport']}",
                 f"{nvme_connect_command(m)} && udevadm settle", connected),
            *_fs_steps(m)]


def _steps_blockdev(m: Medium) -> list[Step]:
    o = m.options
    steps = []
    if o["partition_pct"]:
        steps.append(Step("partition the device", _parted(q(o["device"]), o["partition_pct"]),
                          f"test -b {target_expr(m)}"))
    return steps + _fs_steps(m)


def md_members(m: Medium) -> list[str]:
    o = m.options
    return [partition_path(d) for d in o["devices"]] if o["partition_pct"] else list(o["devices"])


def _steps_mdraid(m: Medium) -> list[Step]:
    o = m.options
    steps = []
    if o["partition_pct"]:
        for d in o["devices"]:
            steps.append(Step(f"partition {d}", _parted(q(d), o["partition_pct"]),
                              f"test -b {q(partition_path(d))}"))
    members = " ".join(q(d) for d in md_members(m))
    md = q(md_device(m))
    create = (f"mdadm --create {md} --run --metadata=1.2 --level={o['level']} --chunk={o['chunk'] // 1024} "
              f"--raid-devices={len(o['devices'])} {members}")
    steps.append(Step("assemble or create the RAID0 array",
                      f"mdadm --assemble {md} {members} || {create}", f"test -b {md}"))
    return steps + _fs_steps(m)


def ndctl_command(m: Medium) -> str:
    o = m.options
    args = ["ndctl", "create-namespace", "--force", f"--reconfig={o['namespace']}", f"--mode={o['mode']}"]
    if o["mode"] == "fsdax":
        args.append(f"--map={o['map']}")
    if o["mode"] == "sector":
        args.append(f"--sector-size={o['sector_size']}")
    if o.get("align"):
        args.append(f"--align={o['align']}")
    if o.get("size"):
        args.append(f"--size={o['size']}")
    return shlex.join(args)


def _steps_pmem(m: Medium) -> list[Step]:
    o = m.options
    ns = q(o["namespace"])
    steps = [Step(f"put {o['namespace']} in {o['mode']} mode", ndctl_command(m),
                  f"ndctl list -n {ns} | grep -q '\"mode\":\"{o['mode']}\"'")]
    if o["mode"] == "devdax":
        return steps
    return steps + _fs_steps(m)


def _throttle_steps(m: Medium, layout: CgroupLayout, owner: str | None) -> list[Step]:
    o = m.options
    cg = layout.group(m.name)
    devnum = f'$(cat /sys/class/block/"$(basename "$(readlink -f {disk_expr(m)})")"/dev)'
    steps: list[Step] = []
    if layout.version == 1:
        steps.append(Step("create the blkio cgroup", f"mkdir -p {q(cg)}", f"test -d {q(cg)}"))
        for key, fname in V1_LIMIT_FILES.items():
            if o[key] is not None:
                steps.append(Step(f"set {key}", f'echo "{devnum} {o[key]}" > {q(cg + "/" + fname)}'))
        procs = [f"{cg}/cgroup.procs", f"{cg}/tasks"]
    else:
        parent = f"{layout.root}/{CGROUP_PARENT}"
        for d in (layout.root, parent):
            if d != layout.root:
                steps.append(Step(f"create {d}", f"mkdir -p {q(d)}", f"test -d {q(d)}"))
            ctl = f"{d}/cgroup.subtree_control"
            steps.append(Step(f"enable the io controller below {d}", f"echo +io > {q(ctl)}",
                              f"grep -qw io {q(ctl)}"))
        steps.append(Step("create the io cgroup", f"mkdir -p {q(cg)}", f"test -d {q(cg)}"))
        limits = " ".join(f"{V2_LIMIT_KEYS[k]}={o[k]}" for k in V2_LIMIT_KEYS if o[k] is not None)
        steps.append(Step("set io.max", f'echo "{devnum} {limits}" > {q(cg + "/io.max")}'))
        procs = [f"{cg}/cgroup.procs"]
    if owner is not None:
        steps.append(Step(f"let {owner} join the cgroup", f"chown {q(owner)} {' '.join(q(p) for p in procs)}"))
    return steps


def cgroup_layout_for(medium: Medium, layout: CgroupLayout | None = None) -> CgroupLayout:
    """The layout a throttled medium's plan uses: the host's (from :func:`detect_cgroup_layout`)
    when given, else the standard mount of the version the recipe names (``auto``: v2)."""
    if layout is not None:
        return layout
    return V1_DEFAULT if medium.options.get("cgroup") == "v1" else V2_DEFAULT


def apply_steps(medium: Medium, *, layout: CgroupLayout | None = None, owner: str | None = None) -> list[Step]:
    """The steps of :func:`plan` with their done-tests; `owner` (uid:gid) gets the mount point."""
    m = checked(medium)
    fs = _fs_medium(m)
    builders = {"dir": _steps_dir, "tmpfs": _steps_tmpfs, "loop": _loop_steps, "ram-block": _loop_steps,
                "blockdev": _steps_blockdev, "mdraid": _steps_mdraid, "pmem": _steps_pmem,
                "nvmeof": _steps_nvmeof}
    steps = builders[fs.kind](fs)
    if fs.kind != "dir" and not (fs.kind == "pmem" and fs.options["mode"] == "devdax"):
        steps += _chown(m.path, owner)
    if m.kind == "throttled":
        steps += _throttle_steps(m, cgroup_layout_for(m, layout), owner)
    return steps


def plan(medium: Medium, *, layout: CgroupLayout | None = None) -> list[str]:
    """The exact shell commands that build `medium` (as root; ensure adds ``sudo -n`` otherwise)."""
    return [s.command for s in apply_steps(medium, layout=layout)]


def candidate_groups(medium: Medium) -> list[str]:
    """Every cgroup directory a throttled medium may use (v2 mounts first, as detection prefers)."""
    version = medium.options.get("cgroup", "auto")
    v2 = [CgroupLayout(2, r).group(medium.name) for r in V2_ROOTS]
    v1 = [V1_DEFAULT.group(medium.name)]
    return {"v1": v1, "v2": v2}.get(version, v2 + v1)


def teardown_steps(medium: Medium) -> list[Step]:
    m = checked(medium)
    fs = _fs_medium(m)
    o = fs.options
    steps: list[Step] = []
    if m.kind == "throttled":
        for cg in candidate_groups(m):
            steps.append(Step(f"remove the cgroup {cg}", f"rmdir {q(cg)}", f"[ ! -d {q(cg)} ]"))
            parent = posixpath.dirname(cg)
            steps.append(Step(f"remove {parent} if unused", f"rmdir {q(parent)} 2>/dev/null || true",
                              f"[ ! -d {q(parent)} ]"))
    if fs.kind == "dir":
        return steps
    if not (fs.kind == "pmem" and o["mode"] == "devdax"):
        steps.append(Step("unmount", f"umount {q(m.path)}", f"! {_mounted(m.path)}"))
        steps.append(Step("remove the mount point", f"rmdir --ignore-fail-on-non-empty {q(m.path)}",
                          f"[ ! -d {q(m.path)} ]"))
    if fs.kind in ("loop", "ram-block"):
        file = loop_file(fs)
        every = _loop_lookup_all(file)
        steps.append(Step("detach the loop device", f'for d in {every}; do losetup -d "$d"; done',
                          f'[ -z "{every}" ]'))
        steps.append(Step("remove the backing file", f"rm -f {q(file)}", f"[ ! -e {q(file)} ]"))
    if fs.kind == "ram-block":
        bdir = o["backing_dir"]
        steps.append(Step("unmount the backing tmpfs", f"umount {q(bdir)}", f"! {_mounted(bdir)}"))
        steps.append(Step("remove the backing mount point", f"rmdir --ignore-fail-on-non-empty {q(bdir)}",
                          f"[ ! -d {q(bdir)} ]"))
    if fs.kind == "mdraid":
        md = q(md_device(fs))
        steps.append(Step("stop the RAID array", f"mdadm --stop {md}", f"[ ! -e {md} ]"))
    if fs.kind == "nvmeof":
        steps.append(Step(f"disconnect from {o['nqn']}", f"nvme disconnect -n {q(o['nqn'])}",
                          f'[ -z "$({nvmeof_lookup(o["nqn"], o["namespace"])})" ]'))
    return steps


def teardown_plan(medium: Medium) -> list[str]:
    return [s.command for s in teardown_steps(medium)]


def limit_command(throttle: Mapping[str, Any], key: str, value: int) -> str:
    """The shell command that sets one limit (read_iops, write_iops, read_bps, write_bps) of a throttled
    medium's cgroup on its disk, from the state :func:`verify` recorded; it takes effect at once for the
    processes already in the cgroup."""
    if key not in V1_LIMIT_FILES:
        raise MediaError(f"throttle limit {key!r}; allowed: {', '.join(V1_LIMIT_FILES)}")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MediaError(f"throttle limit {key}={value!r}: must be a positive integer")
    dev, cg = throttle.get("device"), throttle.get("cgroup")
    if not dev or not cg:
        raise MediaError(f"throttle state without a device or cgroup ({dict(throttle)}): run media.ensure first")
    if throttle.get("version") == 2:
        return f'echo "{dev} {V2_LIMIT_KEYS[key]}={value}" > {q(cg + "/io.max")}'
    return f'echo "{dev} {value}" > {q(cg + "/" + V1_LIMIT_FILES[key])}'


def read_limit(throttle: Mapping[str, Any], key: str, text: str) -> int | None:
    """The limit `key` on the medium's disk from the text of its cgroup file (v1 ``blkio.throttle.*`` or
    v2 ``io.max``); None when unset."""
    dev = str(throttle.get("device"))
    if throttle.get("version") == 2:
        return parse_io_max(text).get(dev, {}).get(V2_LIMIT_KEYS[key])
    return parse_v1_limits(text).get(dev)


def set_throttle_limit(host: Host, state: MediumState, key: str, value: int) -> MediumState:
    """Set one limit of a throttled medium on `host` and read it back; the state with the new value."""
    if not state.throttle:
        raise MediaError(f"medium {state.name}: not throttled (kind {state.kind}), no limit to set")
    t = state.throttle
    host.run(limit_command(t, key, value))
    path = f"{t['cgroup']}/io.max" if t.get("version") == 2 else f"{t['cgroup']}/{V1_LIMIT_FILES[key]}"
    got = read_limit(t, key, host.run(f"cat {q(path)}").stdout)
    if got != value:
        raise MediaError(f"medium {state.name}: set {key}={value} on {t.get('device')} but {path} reads {got}")
    return replace(state, throttle={**t, key: value})


def launch_prefix(medium: Medium, state: MediumState | None = None) -> list[str]:
    """Argv to put before the server command so it runs inside the medium's throttle cgroup.

    ``sh -c '…; echo $$ > <cgroup>/cgroup.procs; exec "$@"' dbmatrix-throttle mariadbd …``: the
    shell joins the cgroup and execs the server, which keeps the PID (and everything it starts is
    throttled too). Empty for media without throttling. It tries the cgroup directories the
    medium may use (or exactly the one in `state`) and fails with exit 125 when none exists.
    """
    m = checked(medium)
    if m.kind != "throttled":
        return []
    groups = [state.throttle["cgroup"]] if state is not None and state.throttle else candidate_groups(m)
    script = (f"for g in {' '.join(q(g) for g in groups)}; do "
              'if [ -d "$g" ]; then echo $$ > "$g/cgroup.procs" || exit 125; exec "$@"; fi; done; '
              f"echo 'dbmatrix: no throttle cgroup for medium {m.name} (run media.ensure first)' >&2; "
              "exit 125")
    return ["sh", "-c", script, "dbmatrix-throttle"]


# ---------------------------------------------------------------- facts and checks (pure)

def dax_mode(options: str) -> str | None:
    """The DAX mode a mount shows in ``findmnt -no OPTIONS``: always, never, inode or None.

    Old kernels print a bare ``dax`` (= always)."""
    for opt in options.strip().split(","):
        if opt == "dax":
            return "always"
        if opt.startswith("dax="):
            return opt[4:]
    return None


def dax_problem(options: str) -> str | None:
    """Why DAX is not really active on a mount that asked for it (None when it is).

    ``mount -o dax`` exits 0 on a device without DAX support: XFS then mounts ``dax=never``
    ("DAX unsupported by block device. Turning off DAX."), so only the options tell."""
    mode = dax_mode(options)
    if mode == "always":
        return None
    if mode == "never":
        return ("DAX requested but the kernel mounted dax=never (the block device does not support "
                "DAX; mount -o dax succeeded anyway)")
    if mode == "inode":
        return "DAX requested but mounted dax=inode (only files with the DAX flag use it)"
    return "DAX requested but the mount options show no dax"


def parse_sections(text: str) -> dict[str, str]:
    """Split facts-script output at ``@@name [rc]`` lines into {name: text} (see :mod:`dbmatrix.hosts.sections`)."""
    return {name: sec.text for name, sec in split_sections(text).items()}


def parse_findmnt(text: str) -> Mount | None:
    """The visible (last) mount of ``findmnt -J -b -o TARGET,SOURCE,FSTYPE,OPTIONS,SIZE`` (None: none, or not JSON)."""
    try:
        return visible_mount(parse_findmnt_json(text))
    except ValueError:
        return None


def parse_kv(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def parse_xfs_info(text: str) -> dict[str, int]:
    """bsize and data sunit/swidth (in file-system blocks) from ``xfs_info``."""
    m = re.search(r"^data\s+=.*?bsize=(\d+).*?\n\s*=\s*sunit=(\d+)\s+swidth=(\d+)\s+blks", text,
                  re.MULTILINE | re.DOTALL)
    if not m:
        return {}
    return {"bsize": int(m.group(1)), "sunit": int(m.group(2)), "swidth": int(m.group(3))}


def parse_tune2fs(text: str) -> dict[str, int]:
    """Block size and RAID stride/stripe width (in blocks) from ``tune2fs -l``."""
    out = {}
    for key, name in (("Block size", "bsize"), ("RAID stride", "stride"), ("RAID stripe width", "stripe_width")):
        m = re.search(rf"^{key}:\s+(\d+)", text, re.MULTILINE)
        if m:
            out[name] = int(m.group(1))
    return out


def parse_v1_limits(text: str) -> dict[str, int]:
    """{major:minor: value} from a ``blkio.throttle.*_device`` file."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def parse_io_max(text: str) -> dict[str, dict[str, int | None]]:
    """{major:minor: {riops: 300, wbps: None (max), …}} from a cgroup v2 ``io.max`` file."""
    out: dict[str, dict[str, int | None]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        vals: dict[str, int | None] = {}
        for kv in parts[1:]:
            k, _, v = kv.partition("=")
            vals[k] = None if v == "max" else int(v)
        out[parts[0]] = vals
    return out


def choose_cgroup_layout(mounts: str, controllers: Mapping[str, str], want: str = "auto") -> CgroupLayout:
    """The hierarchy to throttle in, from /proc/self/mounts and each cgroup2 mount's controllers.

    ``auto`` prefers v2 with the io controller (it throttles writeback too), then v1 blkio."""
    v1 = v2 = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup" and "blkio" in parts[3].split(",") and v1 is None:
            v1 = CgroupLayout(1, parts[1])
        if parts[2] == "cgroup2" and "io" in controllers.get(parts[1], "").split() and v2 is None:
            v2 = CgroupLayout(2, parts[1])
    chosen = {"v1": v1, "v2": v2}.get(want, v2 or v1)
    if chosen is None:
        have = [f"{p.split()[2]} at {p.split()[1]}" for p in mounts.splitlines()
                if len(p.split()) > 2 and p.split()[2] in ("cgroup", "cgroup2")]
        need = {"v1": "cgroup v1 blkio hierarchy", "v2": "cgroup2 hierarchy with the io controller"}
        raise MediaError(f"no {need.get(want, 'blkio (v1) or io (v2) cgroup controller')} for throttling; "
                         f"cgroup mounts: {', '.join(have) or 'none'}")
    return chosen


def facts_sections(medium: Medium, layout: CgroupLayout | None = None) -> tuple[str, dict[str, str]]:
    """The prelude and the sections (name -> command) gathering every fact :func:`evaluate` needs.

    The prelude sets ``$src`` (the mount's source) for the sections that read it. The ``block``
    section prints nothing when the source is not a block device (:func:`evaluate` reads no block
    facts then)."""
    m = checked(medium)
    fs = _fs_medium(m)
    o = fs.options
    p = q(m.path)
    where = f"-T {p}" if fs.kind == "dir" else f"--mountpoint {p}"
    prelude = f"src=$(findmnt -rno SOURCE {where} | tail -n 1)"
    sec = {"mount": f"findmnt -J -b -o TARGET,SOURCE,FSTYPE,OPTIONS,SIZE {where}"}
    if fs.kind == "dir":
        sec["dir"] = f"[ -d {p} ] && echo isdir; [ -w {p} ] && echo writable"
    sec["block"] = "\n".join([
        'if [ -b "$src" ]; then',
        ' dev=$(basename "$(readlink -f "$src")"); sys=$(readlink -f "/sys/class/block/$dev")',
        ' echo "device=$dev"; echo "sectors=$(cat "$sys/size")"',
        ' if [ -e "$sys/partition" ]; then disk=$(basename "$(dirname "$sys")"); echo "start=$(cat "$sys/start")";'
        ' else disk=$dev; fi',
        ' echo "disk=$disk"; echo "disk_sectors=$(cat /sys/class/block/$disk/size)"',
        ' echo "devnum=$(cat /sys/class/block/$disk/dev)"; echo "dax=$(cat /sys/block/$disk/queue/dax 2>/dev/null)"',
        ' echo "loop_backing=$(cat /sys/block/$disk/loop/backing_file 2>/dev/null)"',
        ' echo "loop_dio=$(cat /sys/block/$disk/loop/dio 2>/dev/null)"',
        ' for f in level chunk_size raid_disks; do echo "md_$f=$(cat /sys/block/$disk/md/$f 2>/dev/null)"; done',
        "fi",
    ])
    if fs.kind not in ("dir", "tmpfs") and not (fs.kind == "pmem" and o["mode"] == "devdax"):
        sec["expected"] = f'echo "target=$(basename "$(readlink -f {target_expr(fs)})")"'
        if o["fstype"] == "xfs":
            sec["xfs_info"] = f"[ -n \"$src\" ] && xfs_info {p} 2>&1"
        else:
            sec["tune2fs"] = '[ -b "$src" ] && tune2fs -l "$src" 2>&1'
    if fs.kind in ("loop", "ram-block"):
        f = q(loop_file(fs))
        sec["backing"] = f"[ -f {f} ] && echo \"real=$(readlink -f {f})\" && echo \"bytes=$(stat -c %s {f})\""
    if fs.kind == "ram-block":
        sec["backing_mount"] = f"findmnt -J -b -o TARGET,SOURCE,FSTYPE,OPTIONS,SIZE --mountpoint {q(o['backing_dir'])}"
    if fs.kind == "nvmeof":
        sec["nvmeof"] = (f"for s in /sys/class/nvme-subsystem/*; do [ \"$(cat \"$s/subsysnqn\" 2>/dev/null)\" = "
                         f"{q(o['nqn'])} ] || continue; echo found=yes; for c in \"$s\"/nvme[0-9]*; do "
                         "[ -e \"$c/transport\" ] || continue; echo \"transport=$(cat \"$c/transport\")\"; "
                         "echo \"state=$(cat \"$c/state\")\"; echo \"address=$(cat \"$c/address\" | tr -d '\\n')\"; "
                         "done; done")
    if fs.kind == "pmem":
        sec["ndctl"] = f"ndctl list -n {q(o['namespace'])} 2>&1"
        if o["mode"] == "devdax":
            sec["chardev"] = f"[ -c {q(pmem_device(o['namespace'], 'devdax'))} ] && echo yes"
    if m.kind == "throttled":
        cg = cgroup_layout_for(m, layout).group(m.name)
        sec["cgroup"] = f"[ -d {q(cg)} ] && echo exists"
        if cgroup_layout_for(m, layout).version == 1:
            for key, fname in V1_LIMIT_FILES.items():
                sec[f"limit:{key}"] = f"cat {q(cg + '/' + fname)} 2>/dev/null"
        else:
            sec["io.max"] = f"cat {q(cg + '/io.max')} 2>/dev/null"
    return prelude, sec


def facts_script(medium: Medium, layout: CgroupLayout | None = None) -> str:
    """One shell script printing, in ``@@name rc`` sections, every fact :func:`evaluate` needs."""
    prelude, sec = facts_sections(medium, layout)
    return sections_script(sec, prelude=prelude)


class _Checks:
    def __init__(self) -> None:
        self.ok: list[str] = []
        self.problems: list[str] = []

    def expect(self, cond: bool, ok: str, problem: str) -> bool:
        (self.ok if cond else self.problems).append(ok if cond else problem)
        return cond


def evaluate(medium: Medium, sections: Mapping[str, str], layout: CgroupLayout | None = None,
             host: str = "?") -> MediumState:
    """Compare gathered facts with the recipe; raise MediaError listing every difference."""
    m = checked(medium)
    fs = _fs_medium(m)
    o = fs.options
    c = _Checks()
    mnt = parse_findmnt(sections.get("mount", ""))
    block = parse_kv(sections.get("block", "")) if "block" in sections else {}
    state = MediumState(m.name, m.kind, m.path, m.emulates, None, None, None, None, (), None, None, None, (),
                        base_kind=fs.kind if m.kind == "throttled" else None)
    if fs.kind == "pmem" and o["mode"] == "devdax":
        state = _check_devdax(fs, sections, c, state)
    elif fs.kind == "dir":
        flags = sections.get("dir", "").split()
        c.expect("isdir" in flags, f"directory {m.path} exists", f"{m.path} is not a directory")
        c.expect("writable" in flags, "directory is writable", f"{m.path} is not writable")
        if mnt:
            state = _with_mount(state, mnt, block)
    elif mnt is None:
        c.problems.append(f"nothing is mounted at {m.path}")
    else:
        c.ok.append(f"mounted at {m.path}")
        state = _with_mount(state, mnt, block)
        if fs.kind == "tmpfs":
            _check_tmpfs(fs, mnt, c)
        else:
            state = _check_block_fs(fs, mnt, block, sections, c, state)
    if m.kind == "throttled" and not c.problems:
        state = replace(state, throttle=_check_throttle(m, block, sections, cgroup_layout_for(m, layout), c))
    if c.problems:
        raise MediaError(f"{m.kind} medium {m.name!r} on host {host}: " + "; ".join(c.problems))
    return replace(state, checks=tuple(c.ok))


def _with_mount(state: MediumState, mnt: Mount, block: Mapping[str, str]) -> MediumState:
    size = mnt.size
    return replace(state, source=mnt.source, fstype=mnt.fstype,
                   mount_options=tuple((mnt.options or "").split(",")),
                   size_bytes=int(size) if size is not None else None,
                   device=block.get("device") or None, disk=block.get("disk") or None)


def _check_tmpfs(m: Medium, mnt: Mount, c: _Checks) -> None:
    c.expect(mnt.fstype == "tmpfs", "file system tmpfs", f"file system is {mnt.fstype}, not tmpfs")
    size = int(mnt.size or 0)
    want = m.options["size"]
    c.expect(size == want, f"size {want} bytes", f"size is {size} bytes, the recipe says {want}")
    _check_mount_options(m, mnt, c)


def _check_mount_options(m: Medium, mnt: Mount, c: _Checks) -> None:
    shown = (mnt.options or "").split(",")
    for opt in m.options["mount_options"]:
        if opt in VERIFIABLE_MOUNT_OPTIONS:
            c.expect(opt in shown, f"mount option {opt}", f"mount option {opt} is missing ({','.join(shown)})")


def _check_block_fs(m: Medium, mnt: Mount, block: Mapping[str, str], sections: Mapping[str, str],
                    c: _Checks, state: MediumState) -> MediumState:
    o = m.options
    c.expect(mnt.fstype == o["fstype"], f"file system {o['fstype']}",
             f"file system is {mnt.fstype}, the recipe says {o['fstype']}")
    expected = parse_kv(sections.get("expected", "")).get("target", "")
    if not c.expect(bool(block) and block.get("device") == expected,
                    f"mounted from {block.get('device')}",
                    f"mounted from {mnt.source}, expected the device {expected or '(not present)'}"):
        return state
    _check_mount_options(m, mnt, c)
    _check_geometry(m, sections, c)
    if m.kind in ("loop", "ram-block"):
        _check_loop(m, block, sections, c)
    if o.get("partition_pct") and m.kind in ("loop", "ram-block", "blockdev"):
        _check_partition(o["partition_pct"], block, c)
    if m.kind == "mdraid":
        _check_md(m, block, c)
    if m.kind == "nvmeof":
        nv = parse_kv(sections.get("nvmeof", ""))
        if c.expect(nv.get("found") == "yes", f"subsystem {o['nqn']} connected",
                    f"subsystem {o['nqn']} is not connected (nvme list-subsys shows it not)"):
            c.expect(nv.get("transport") == o["transport"], f"over {o['transport']}",
                     f"connected over {nv.get('transport')}, the recipe says {o['transport']}")
            c.expect(nv.get("state") == "live", "controller live",
                     f"controller state {nv.get('state')!r} (want live)")
            c.expect(f"traddr={o['address']}" in nv.get("address", ""), f"target {o['address']}",
                     f"connected to {nv.get('address')!r}, the recipe says {o['address']}")
    if m.kind == "pmem":
        mode = _ndctl_mode(sections.get("ndctl", ""))
        c.expect(mode == o["mode"], f"namespace {o['namespace']} in {o['mode']} mode",
                 f"namespace {o['namespace']} is in mode {mode}, the recipe says {o['mode']}")
    requested = [x for x in o["mount_options"] if x in ("dax", "dax=always")]
    options = mnt.options or ""
    if requested:
        problem = dax_problem(options)
        c.expect(problem is None, f"DAX active (dax={dax_mode(options)})", problem or "")
        c.expect(block.get("dax") != "0", "block device supports DAX",
                 f"the block device {block.get('disk')} does not support DAX (/sys/block/{block.get('disk')}"
                 "/queue/dax = 0)")
    return replace(state, dax=dax_mode(options) == "always")


def _check_geometry(m: Medium, sections: Mapping[str, str], c: _Checks) -> None:
    o = m.options
    if o["fstype"] == "xfs":
        g = parse_xfs_info(sections.get("xfs_info", ""))
        if not c.expect(bool(g), "xfs_info read", "xfs_info gave no geometry"):
            return
        c.expect(g["bsize"] == o["block_size"], f"block size {o['block_size']}",
                 f"block size is {g['bsize']}, the recipe says {o['block_size']}")
        if o["sunit"]:
            su, sw = g["sunit"] * g["bsize"] // 512, g["swidth"] * g["bsize"] // 512
            c.expect((su, sw) == (o["sunit"], o["swidth"]),
                     f"xfs sunit={o['sunit']} swidth={o['swidth']} sectors ({g['sunit']}/{g['swidth']} blocks)",
                     f"xfs stripe is sunit={su} swidth={sw} sectors, the recipe says "
                     f"sunit={o['sunit']} swidth={o['swidth']}")
    else:
        g = parse_tune2fs(sections.get("tune2fs", ""))
        if not c.expect("bsize" in g, "tune2fs read", "tune2fs -l gave no block size"):
            return
        c.expect(g["bsize"] == o["block_size"], f"block size {o['block_size']}",
                 f"block size is {g['bsize']}, the recipe says {o['block_size']}")
        if o["sunit"]:
            want = (o["sunit"] * 512 // g["bsize"], o["swidth"] * 512 // g["bsize"])
            got = (g.get("stride"), g.get("stripe_width"))
            c.expect(got == want, f"ext4 stride={want[0]} stripe_width={want[1]} blocks",
                     f"ext4 stride/stripe_width are {got}, the recipe says {want}")


def _check_loop(m: Medium, block: Mapping[str, str], sections: Mapping[str, str], c: _Checks) -> None:
    o = m.options
    backing = parse_kv(sections.get("backing", ""))
    c.expect(block.get("loop_backing") == backing.get("real"), f"loop device backed by {loop_file(m)}",
             f"the loop device's backing file is {block.get('loop_backing') or '(none)'}, not {loop_file(m)}")
    size = int(backing.get("bytes") or 0)
    c.expect(size == o["size"], f"backing file {o['size']} bytes",
             f"the backing file has {size} bytes, the recipe says {o['size']} (teardown to rebuild)")
    if o["direct_io"]:
        c.expect(block.get("loop_dio") == "1", "loop direct I/O on", "loop direct I/O is off")
    if m.kind == "ram-block":
        bm = parse_findmnt(sections.get("backing_mount", ""))
        c.expect(bm is not None and bm.fstype == "tmpfs", f"backing file on tmpfs {o['backing_dir']}",
                 f"{o['backing_dir']} is not a tmpfs mount")


def partition_share(block: Mapping[str, str]) -> float | None:
    """Where the partition ends, as a percentage of its disk (None when not a partition)."""
    if not block.get("start"):
        return None
    end = int(block["start"]) + int(block["sectors"])
    return 100.0 * end / int(block["disk_sectors"])


def _check_partition(pct: float, block: Mapping[str, str], c: _Checks) -> None:
    share = partition_share(block)
    if not c.expect(share is not None, "partitioned", f"{block.get('device')} is not a partition"):
        return
    disk = int(block["disk_sectors"])
    # parted aligns the end down to 1 MiB and GPT keeps 33 sectors at the end of the disk.
    tol = max(4096 / disk * 100, 0.5)
    c.expect(abs(share - pct) <= tol,  # type: ignore[operator]
             f"partition ends at {share:.2f} % of {block.get('disk')} (recipe {pct:g} %)",
             f"partition ends at {share:.2f} % of {block.get('disk')}, the recipe says {pct:g} %")


def _check_md(m: Medium, block: Mapping[str, str], c: _Checks) -> None:
    o = m.options
    got = (block.get("md_level"), block.get("md_chunk_size"), block.get("md_raid_disks"))
    want = (f"raid{o['level']}", str(o["chunk"]), str(len(o["devices"])))
    c.expect(got == want, f"md {want[0]} chunk {o['chunk']} over {want[2]} devices",
             f"md array is level/chunk/devices {got}, the recipe says {want}")


def _ndctl_mode(text: str) -> str | None:
    m = re.search(r'"mode"\s*:\s*"([a-z]+)"', text)
    return m.group(1) if m else None


def _check_devdax(m: Medium, sections: Mapping[str, str], c: _Checks, state: MediumState) -> MediumState:
    o = m.options
    dev = pmem_device(o["namespace"], "devdax")
    mode = _ndctl_mode(sections.get("ndctl", ""))
    c.expect(mode == "devdax", f"namespace {o['namespace']} in devdax mode",
             f"namespace {o['namespace']} is in mode {mode}, the recipe says devdax")
    c.expect(sections.get("chardev", "").strip() == "yes", f"{dev} exists", f"{dev} does not exist")
    return replace(state, source=dev, device=posixpath.basename(dev), dax=True)


def _check_throttle(m: Medium, block: Mapping[str, str], sections: Mapping[str, str], layout: CgroupLayout,
                    c: _Checks) -> dict[str, Any]:
    o = m.options
    cg = layout.group(m.name)
    devnum = block.get("devnum", "")
    info: dict[str, Any] = {"cgroup": cg, "version": layout.version, "device": devnum,
                            **{k: o[k] for k in V1_LIMIT_FILES}}
    if not c.expect(sections.get("cgroup", "").strip() == "exists", f"cgroup {cg}", f"cgroup {cg} does not exist"):
        return info
    if layout.version == 1:
        for key in V1_LIMIT_FILES:
            got = parse_v1_limits(sections.get(f"limit:{key}", "")).get(devnum)
            if o[key] is not None:
                c.expect(got == o[key], f"{key}={o[key]} on {devnum}",
                         f"{key} on {devnum} is {got}, the recipe says {o[key]}")
    else:
        limits = parse_io_max(sections.get("io.max", "")).get(devnum, {})
        for key, short in V2_LIMIT_KEYS.items():
            if o[key] is not None:
                c.expect(limits.get(short) == o[key], f"{short}={o[key]} on {devnum}",
                         f"io.max {short} on {devnum} is {limits.get(short)}, the recipe says {o[key]}")
    return info


# ---------------------------------------------------------------- prerequisites (pure)

def required_tools(medium: Medium) -> list[str]:
    fs = _fs_medium(checked(medium))
    o = fs.options
    tools = ["findmnt"]
    if fs.kind == "dir":
        return tools
    tools += ["mount"]
    if fs.kind in ("loop", "ram-block"):
        tools += ["losetup", "truncate" if fs.kind == "ram-block" else "fallocate"]
    if fs.kind == "mdraid":
        tools.append("mdadm")
    if fs.kind == "pmem":
        tools.append("ndctl")
    if fs.kind == "nvmeof":
        tools += ["nvme", "modprobe", "udevadm"]
    if o.get("partition_pct"):
        tools.append("parted")
    if "fstype" in o:
        tools += ["blkid", f"mkfs.{o['fstype']}", "xfs_info" if o["fstype"] == "xfs" else "tune2fs"]
    return tools


def prerequisite_script(medium: Medium) -> str:
    """Prints one line per missing prerequisite (``tool X``, ``device D``, ``in-use D M``, …)."""
    m = checked(medium)
    fs = _fs_medium(m)
    o = fs.options
    lines = [f"for t in {' '.join(required_tools(m))}; do command -v $t >/dev/null 2>&1 || echo \"tool $t\"; done"]
    devices = [o["device"]] if fs.kind == "blockdev" else list(o.get("devices", [])) if fs.kind == "mdraid" else []
    for d in devices:
        lines.append(f"if [ -b {q(d)} ]; then lsblk -nrpo NAME,MOUNTPOINT {q(d)} | "
                     f"awk -v p={q(m.path)} '$2 != \"\" && $2 != p {{print \"in-use \" $1 \" \" $2}}'; "
                     f"else echo 'device {d}'; fi")
    if fs.kind == "mdraid":
        lines.append("[ -e /proc/mdstat ] || echo no-md")
    if fs.kind == "nvmeof":
        t = o["transport"]
        lines.append(f"[ -d /sys/module/nvme_{t} ] || modprobe -n nvme-{t} >/dev/null 2>&1 || echo no-nvmeof-{t}")
    if fs.kind == "pmem":
        ns = q(o["namespace"])
        lines.append(
            "if command -v ndctl >/dev/null 2>&1; then\n"
            "  if ! ndctl list -RN 2>/dev/null | grep -q '\"dev\"'; then echo no-pmem\n"
            f"  elif [ -z \"$(ndctl list -n {ns} 2>/dev/null)\" ]; then\n"
            "    echo \"no-namespace $(ndctl list -N 2>/dev/null"
            " | sed -n 's/.*\"dev\":\"\\(namespace[^\"]*\\)\".*/\\1/p' | tr '\\n' ' ')\"\n"
            "  fi\n"
            "fi")
    return "\n".join(lines)


def prerequisite_problems(medium: Medium, output: str, host: str) -> list[str]:
    """Readable messages from :func:`prerequisite_script` output (empty: all present)."""
    m = checked(medium)
    fs = _fs_medium(m)
    tag = fs.kind
    out: list[str] = []
    if "no-md" in output.split():
        out.append(f"mdraid: no MD RAID on host {host}: /proc/mdstat is missing (kernel without the md "
                   "driver); RAID0 cannot be built here")
    if "no-pmem" in output.split():
        out.append(f"pmem: no PMEM namespace/region on host {host}: `ndctl list -RN` shows none (no "
                   "persistent memory here); emulate it with a tmpfs medium (emulates: pmem-fsdax) or a "
                   "ram-block medium (emulates: pmem-sector)")
    for ln in output.split():
        if ln.startswith("no-nvmeof-"):
            t = ln[len("no-nvmeof-"):]
            out.append(f"nvmeof: this kernel on host {host} cannot load nvme-{t} (no /sys/module/nvme_{t}, "
                       f"`modprobe -n nvme-{t}` fails): NVMe over Fabrics needs the nvme-{t} module and nvme-cli; "
                       "the medium cannot be connected here")
    for ln in output.splitlines():
        if ln.startswith("no-namespace"):
            have = ln[len("no-namespace"):].strip() or "none"
            out.append(f"pmem: no namespace {fs.options['namespace']} on host {host}; namespaces: {have}")
    tools = [ln.split()[1] for ln in output.splitlines() if ln.startswith("tool ")]
    if tools:
        pk = ", ".join(f"{t} (package {TOOL_PACKAGES.get(t, t)})" for t in tools)
        out.append(f"{tag}: missing tools on host {host}: {pk}; install them (dbmatrix setup)")
    devs = [ln.split(" ", 1)[1] for ln in output.splitlines() if ln.startswith("device ")]
    if devs:
        out.append(f"{tag}: block device(s) missing on host {host}: {', '.join(devs)}")
    used = [ln.split(" ", 2)[1:] for ln in output.splitlines() if ln.startswith("in-use ")]
    if used:
        where = ", ".join(f"{d} is mounted at {p}" for d, p in used)
        out.append(f"{tag}: refusing to partition/format devices in use on host {host}: {where}")
    return out


# ---------------------------------------------------------------- side effects (through Host)

@dataclass
class _Ctx:
    host: Host
    root: bool
    owner: str | None = None  # uid:gid of a non-root login, who gets mount points and cgroup.procs
    _sudo_ok: bool | None = field(default=None, repr=False)

    @classmethod
    def of(cls, host: Host) -> _Ctx:
        root = host.is_root()
        owner = None if root else host.run("echo $(id -u):$(id -g)").stdout.strip()
        return cls(host, root, owner)

    def run(self, cmd: str, *, privileged: bool = True, check: bool = False,
            timeout: float | None = STEP_TIMEOUT_S) -> CommandResult:
        if privileged:
            cmd = self.host.privileged(cmd, root=self.root)
        return self.host.run(cmd, check=check, timeout=timeout)

    def need_root(self, medium: Medium) -> None:
        if self.root or _fs_medium(medium).kind == "dir":
            return
        if self._sudo_ok is None:
            self._sudo_ok = self.host.run("sudo -n true", check=False).ok
        if not self._sudo_ok:
            raise MediaError(f"{medium.kind} medium {medium.name!r} on host {self.host.name}: building it "
                             "needs root or passwordless sudo")


def detect_cgroup_layout(host: Host, want: str = "auto") -> CgroupLayout:
    """The host's throttling hierarchy (see :func:`choose_cgroup_layout`)."""
    sec = host.run_sections({
        "mounts": "cat /proc/self/mounts",
        # one line per cgroup2 mount: its path, then its controllers
        "controllers": "for d in $(awk '$3 == \"cgroup2\" {print $2}' /proc/self/mounts); do "
                       'echo "$d $(cat "$d/cgroup.controllers")"; done',
    }, check=True)
    mounts = sec["mounts"].text if "mounts" in sec else ""
    controllers = {}
    for line in (sec["controllers"].text if "controllers" in sec else "").splitlines():
        path, _, names = line.partition(" ")
        if path:
            controllers[path] = names
    try:
        return choose_cgroup_layout(mounts, controllers, want)
    except MediaError as exc:
        raise MediaError(f"throttled: {exc} on host {host.name}") from None


def _layout(host: Host, m: Medium) -> CgroupLayout | None:
    return detect_cgroup_layout(host, m.options["cgroup"]) if m.kind == "throttled" else None


def _verify(ctx: _Ctx, m: Medium, layout: CgroupLayout | None) -> MediumState:
    privileged = _fs_medium(m).kind != "dir"
    prelude, sec = facts_sections(m, layout)
    got = ctx.host.run_sections(sec, prelude=prelude, privileged=privileged, root=ctx.root, timeout=120)
    return evaluate(m, {name: s.text for name, s in got.items()}, layout, ctx.host.name)


def verify(host: Host, medium: Medium) -> MediumState:
    """The medium as it is on `host`; MediaError says what differs from the recipe."""
    m = checked(medium)
    ctx = _Ctx.of(host)
    return _verify(ctx, m, _layout(host, m))


def _prereqs(ctx: _Ctx, m: Medium) -> None:
    ctx.need_root(m)
    out = ctx.run(prerequisite_script(m), privileged=_fs_medium(m).kind != "dir", timeout=120).stdout
    problems = prerequisite_problems(m, out, ctx.host.name)
    if problems:
        raise MediaError("; ".join(problems))


def _run_steps(ctx: _Ctx, m: Medium, steps: Sequence[Step]) -> list[str]:
    ran: list[str] = []
    for s in steps:
        if s.done and ctx.run(s.done, privileged=s.privileged, timeout=120).ok:
            continue
        r = ctx.run(s.command, privileged=s.privileged)
        if not r.ok:
            tail = (r.stderr or r.stdout).strip()[-1500:]
            done = f"\nalready applied (teardown removes them): {'; '.join(ran)}" if ran else ""
            raise MediaError(f"{m.kind} medium {m.name!r} on host {ctx.host.name}: {s.what} failed "
                             f"(exit {r.exit_code}): {s.command}\n{tail}{done}", applied=ran)
        ran.append(s.command)
    return ran


def ensure(host: Host, medium: Medium) -> MediumState:
    """Make `medium` exist as its recipe says and return what verify found.

    Already in place: nothing runs (``commands == ()``). Otherwise prerequisites are checked first
    (MediaError naming what is missing), then only the steps whose done-test fails run."""
    m = checked(medium)
    ctx = _Ctx.of(host)
    layout = _layout(host, m)
    try:
        return _verify(ctx, m, layout)
    except MediaError:
        pass
    _prereqs(ctx, m)
    ran = _run_steps(ctx, m, apply_steps(m, layout=layout, owner=ctx.owner))
    try:
        state = _verify(ctx, m, layout)
    except MediaError as exc:
        hint = " (teardown, then ensure again, to rebuild it)" if ran == [] else ""
        raise MediaError(f"{exc}{hint}") from None
    return replace(state, commands=tuple(ran))


def teardown(host: Host, medium: Medium) -> None:
    """Unmount, detach, remove backing files and cgroups; nothing to do is fine."""
    m = checked(medium)
    ctx = _Ctx.of(host)
    if _fs_medium(m).kind == "dir":
        return
    ctx.need_root(m)
    if m.kind == "throttled":
        for cg in candidate_groups(m):
            r = ctx.run(f"cat {q(cg + '/cgroup.procs')} 2>/dev/null", timeout=60)
            pids = r.stdout.split()
            if pids:
                raise MediaError(f"throttled medium {m.name!r} on host {host.name}: processes still in "
                                 f"{cg}: {' '.join(pids)}; stop them before teardown")
    _run_steps(ctx, m, teardown_steps(m))
