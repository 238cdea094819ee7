"""The media package's shared core: errors, the cgroup layout, a step, what verify found, the
recipe re-validation and the small shell tests every family's steps use.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbmatrix.hosts.inventory import Medium, parse_medium
from dbmatrix.hosts.mounts import Mount, parse_findmnt_json, visible_mount
from dbmatrix.hosts.sections import parse_sections as split_sections
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


def checked(medium: Medium) -> Medium:
    """The medium re-validated (a Medium built by hand gets the same errors as an inventory)."""
    try:
        return parse_medium(medium.to_dict(), host="?", name=medium.name, workdir=None)
    except SpecError as exc:
        raise MediaError(f"medium {medium.name!r}: {exc}") from None


def fs_medium(medium: Medium) -> Medium:
    """The medium that carries the file system (the base of a throttled medium)."""
    return medium.base if medium.kind == "throttled" else medium  # type: ignore[return-value]


def mounted(path: str) -> str:
    return f"mountpoint -q {q(path)}"


def in_mount_table(path: str) -> str:
    """A shell test: something is mounted at `path`, read from the mount table, never by stat'ing it (a FUSE
    mount whose daemon died, or a file system over a dead device, fails stat: mountpoint(1) calls it unmounted)."""
    return f"awk -v p={q(path)} '$2 == p {{found=1}} END {{exit !found}}' /proc/self/mounts"


def has_fs(target: str) -> str:
    return f'[ -n "$(blkid -p -o value -s TYPE {target})" ]'


def chown(path: str, owner: str | None) -> list[Step]:
    if owner is None:
        return []
    return [Step(f"hand {path} to {owner}", f"chown {q(owner)} {q(path)}",
                 f"[ \"$(stat -c %u:%g {q(path)})\" = {q(owner)} ]")]


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


class Checks:
    def __init__(self) -> None:
        self.ok: list[str] = []
        self.problems: list[str] = []

    def expect(self, cond: bool, ok: str, problem: str) -> bool:
        (self.ok if cond else self.problems).append(ok if cond else problem)
        return cond
