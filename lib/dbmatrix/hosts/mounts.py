"""The one parser of ``findmnt -J`` output, shared by host facts, media checks and collectors.

``findmnt -J`` prints ``{"filesystems": [...]}``: a tree (children under their parent mount) without
``-T``/``--mountpoint``, a flat list with them. :func:`parse_findmnt_json` flattens either into
:class:`Mount` records in findmnt's order; the helpers pick the mount a caller wants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: Kernel-internal file systems (host facts leave them out; tmpfs, devtmpfs and hugetlbfs stay).
PSEUDO_FSTYPES = frozenset({
    "proc", "sysfs", "cgroup", "cgroup2", "devpts", "mqueue", "debugfs", "tracefs", "securityfs",
    "pstore", "bpf", "configfs", "fusectl", "binfmt_misc", "autofs", "nsfs", "efivarfs", "rpc_pipefs",
    "selinuxfs",
})

#: File systems without a block device of their own (iostat and diskstats cannot see their IO).
VIRTUAL_FSTYPES = frozenset({"tmpfs", "ramfs", "overlay", "proc", "sysfs", "devtmpfs", "devpts", "cgroup",
                             "cgroup2", "nfs", "nfs4", "cifs", "fuse", "9p", "virtiofs", "squashfuse"})


@dataclass(frozen=True)
class Mount:
    """One mount as findmnt shows it; a column not asked for (``-o``) is None.

    ``size`` is bytes with ``findmnt -b`` (findmnt prints it as a JSON number or string)."""

    target: str | None
    source: str | None
    fstype: str | None
    options: str | None
    size: int | None = None

    @property
    def option_list(self) -> tuple[str, ...]:
        """The mount options split at commas (empty when none were shown)."""
        return tuple(self.options.split(",")) if self.options else ()

    @property
    def block_source(self) -> str | None:
        """The device path of the source, or None for a virtual source.

        ``/dev/vda`` -> ``/dev/vda``; ``/dev/vda2[/@home]`` -> ``/dev/vda2`` (the bracket is a
        subvolume or bind-mount root); tmpfs, overlay, fuse.*, ``host:/x`` (nfs) -> None."""
        source = (self.source or "").split("[", 1)[0]
        fstype = self.fstype or ""
        if fstype in VIRTUAL_FSTYPES or fstype.startswith("fuse") or not source.startswith("/dev/"):
            return None
        return source

    def as_fact(self) -> dict[str, str | None]:
        """The record host facts write for a mount (hosts/<host>.json ``mounts``)."""
        return {"target": self.target, "source": self.source, "fstype": self.fstype, "options": self.options}


def _size(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _walk(items: Iterable[dict[str, Any]]) -> Iterator[Mount]:
    for fs in items:
        yield Mount(fs.get("target"), fs.get("source"), fs.get("fstype"), fs.get("options"), _size(fs.get("size")))
        yield from _walk(fs.get("children") or [])


def parse_findmnt_json(text: str) -> list[Mount]:
    """Every mount in ``findmnt -J`` output, flattened in findmnt's order (parents before children).

    Empty or blank text (findmnt found nothing: it prints nothing and exits 1) -> []. Text that is
    not findmnt JSON raises ValueError (json.JSONDecodeError is one)."""
    if not text.strip():
        return []
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("findmnt -J output is not a JSON object")
    return list(_walk(doc.get("filesystems") or []))


def real_mounts(mounts: Iterable[Mount]) -> list[Mount]:
    """`mounts` without the kernel-internal file systems (:data:`PSEUDO_FSTYPES`)."""
    return [m for m in mounts if m.fstype not in PSEUDO_FSTYPES]


def visible_mount(mounts: Sequence[Mount]) -> Mount | None:
    """The mount a path shows (the last one: a later mount on the same target hides the earlier)."""
    return mounts[-1] if mounts else None


def mount_of(mounts: Sequence[Mount], target: str) -> Mount | None:
    """The visible mount at exactly `target` (None when nothing is mounted there)."""
    return visible_mount([m for m in mounts if m.target == target])
