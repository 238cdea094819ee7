"""How much room a dataset needs on its medium, as a lower bound (pure), so that a plan whose dataset
cannot fit is refused before any run instead of failing once per cell.

The bound is deliberately low (a plan is refused only when even the smallest size measured here cannot
fit): bytes per row are the smallest measured on this machine (MariaDB 10.11, sysbench 1.0.20 tables of
4 x 50 000 and 4 x 100 000 rows; data/reference/*/datasets/ and FIELD-NOTES), rounded down; the datadir
adds the redo log when it lives with the data (``innodb_log_file_size``, 96 MiB by default) and a few MiB of
system tables. The snapshot the runs restore from needs the same room in the host's workdir.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dbmatrix import engines
from dbmatrix.spec.errors import SpecError

MiB = 2**20
# Smallest measured bytes per sysbench row (physical size of the tables' files) and of one TPC-C warehouse:
# each engine's `oltp_bytes_per_row` and `tpcc_bytes_per_warehouse` (dbmatrix.engines).
SYSTEM_BYTES = 16 * MiB  # ibdata1, undo, mysql.* tables: datadir minus data minus redo, smallest measured 17 MiB
DEFAULT_REDO_BYTES = 96 * MiB  # innodb_log_file_size of MariaDB 10.11
_SIZE = re.compile(r"\s*(\d+)\s*([KMGTPE]?)\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}


def parse_server_size(value: str) -> int | None:
    """A mariadbd size (``96M``, ``6G``, ``100663296``) in bytes; None if it is not one."""
    m = _SIZE.match(str(value))
    return int(m.group(1)) * _UNITS[m.group(2).upper()] if m else None


def human_bytes(n: float) -> str:
    for unit, size in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 2**10:.1f} KiB"


@dataclass(frozen=True)
class SizeBound:
    """A lower bound of a datadir's size and how it was reckoned (said in the error)."""

    data_bytes: int
    datadir_bytes: int
    how: str


def datadir_lower_bound(engine: str, compression: str, schema: str, tables: int, size: int,
                        redo_bytes: int) -> SizeBound:
    """`size` is rows per table (oltp) or warehouses per table set (tpcc); `redo_bytes` the redo log kept
    in the datadir (0 when it lives on another medium)."""
    e = engines.engine(engine)
    per_row = e.oltp_bytes_per_row.get(compression, e.oltp_bytes_per_row["none"])
    if schema == "tpcc":
        ratio = per_row / e.oltp_bytes_per_row["none"]
        per_wh = int(e.tpcc_bytes_per_warehouse * ratio)
        data = tables * size * per_wh
        how = f"{tables} x {size} warehouse(s) x >= {human_bytes(per_wh)} per warehouse for {engine}/{compression}"
    else:
        data = tables * size * per_row
        how = f"{tables} tables x {size} rows x >= {per_row} bytes per row for {engine}/{compression}"
    extra = f" + {human_bytes(redo_bytes)} redo log" if redo_bytes else ""
    return SizeBound(data, data + redo_bytes + SYSTEM_BYTES,
                     f"{how}{extra} + {human_bytes(SYSTEM_BYTES)} system tables; the smallest sizes measured")


@dataclass(frozen=True)
class Capacity:
    """The room on a medium (or a host's workdir), in bytes, and where the number comes from."""

    bytes: int
    source: str  # e.g. "tmpfs size=4G", "file system of /var/tmp (df)"
    mount: str | None = None  # the file system's mount point when known (df): media sharing it add up


def check_capacity(needs: Mapping[str, SizeBound], capacity: Capacity, *, where: str,
                   what: str, copies: int = 1) -> None:
    """Refuse when the largest dataset that lives there (`needs`: dataset name -> bound) cannot fit.

    `copies`: datasets held there at once (a snapshot and a run's copy share a file system)."""
    if not needs:
        return
    name, bound = max(needs.items(), key=lambda kv: kv[1].datadir_bytes)
    need = bound.datadir_bytes * copies
    if need <= capacity.bytes:
        return
    twice = (f" ({copies} x {human_bytes(bound.datadir_bytes)}: the snapshot and a run's copy share the file "
             "system)") if copies > 1 else ""
    raise SpecError(
        f"{where}: dataset {name} needs at least {human_bytes(need)}{twice} on {what} ({bound.how}), which "
        f"holds {human_bytes(capacity.bytes)} ({capacity.source}); allowed: fewer rows (workload.tables x "
        f"workload.table_size), or a medium with more room")
