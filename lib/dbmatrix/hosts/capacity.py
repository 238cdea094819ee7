"""How much a medium or a host directory can hold: from the medium's recipe where it says (tmpfs ``size``,
a loop file's ``size`` x ``partition_pct``), else from the host's file system (``df``). Pure except
:func:`df_sections`' commands, which the caller runs in its own round trip."""

from __future__ import annotations

import shlex

from dbmatrix.hosts.inventory import Medium, human_size
from dbmatrix.spec.sizing import Capacity

# What df is asked for a path that may not exist yet: its nearest existing parent's file system.
_DF = ('p={path}; while [ ! -e "$p" ]; do p=$(dirname "$p"); done; '
       'df -B1 --output=size,target "$p" | tail -n 1')


def recipe_capacity(m: Medium) -> Capacity | None:
    """The capacity the inventory states for a medium, or None when only the host knows (dir, blockdev,
    mdraid, pmem without a size)."""
    if m.kind == "throttled" and m.base is not None:
        return recipe_capacity(m.base)
    size = m.options.get("size")
    if not size:
        return None
    pct = m.options.get("partition_pct")
    n = int(size * (pct or 100) / 100)
    how = f"{m.kind} size={human_size(int(size))}" + (f" x partition_pct {pct}" if pct else "")
    return Capacity(n, f"medium {m.name}: {how} in the inventory")


def df_command(path: str) -> str:
    return _DF.format(path=shlex.quote(path))


def parse_df(text: str, path: str) -> Capacity | None:
    """The last ``size target`` line of :func:`df_command` -> a Capacity (None if df said nothing)."""
    lines = [ln.split(None, 1) for ln in text.strip().splitlines() if ln.strip()]
    if not lines or len(lines[-1]) != 2 or not lines[-1][0].isdigit():
        return None
    size, target = lines[-1]
    return Capacity(int(size), f"size of the file system at {target.strip()} holding {path} (df)", target.strip())
