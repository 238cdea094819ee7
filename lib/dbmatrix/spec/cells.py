"""Cells and runs (pure): a workload, one combination of factor levels (:class:`Cell`), the dataset a cell
needs, one planned repetition, and the check that an engine can run a combination.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from dbmatrix import engines
from dbmatrix.spec.errors import SpecError
from dbmatrix.spec.factors import cell_id

# (engine, compression) -> why the engine cannot run it (each engine's `why_not`, dbmatrix.engines)
WHY_NOT = {(e.name, c): why for e in engines.engines() for c, why in e.why_not.items()}


@dataclass(frozen=True)
class Workload:
    """A sysbench workload and the size of its schema."""

    name: str = "oltp_read_write"
    tables: int = 4  # TPC-C: table sets
    table_size: int = 100_000
    rand_type: str = "uniform"
    warehouses: int = 1  # TPC-C scale: warehouses per table set
    isolation: str = "RC"  # TPC-C transaction isolation (--trx_level)
    strings: str = "random"  # TPC-C a-strings: random (the standard, incompressible) or compressible


@dataclass(frozen=True)
class Cell:
    """One combination of factor levels; measured `repetitions` times.

    One field per factor of the registry (dbmatrix.spec.factors), in its order and with its defaults."""

    engine: str
    cache_pct: float
    block_size: str
    compression: str
    medium: str
    threads: int
    workload: str = "oltp_read_write"
    log_medium: str = "same"
    rate_fraction: float = 0
    slave_threads: int = 1
    write_to: str = "node1"
    follower_medium: str = "same"
    instances: int = 1
    pinning: str = "none"
    group_commit: int = 0
    index_cache: str = "cache"
    server_build: str = "system"

    @property
    def cell_id(self) -> str:
        """Each factor's tag (the registry's ``cell_tag``) joined by '-'; tags of defaults added late are
        left out, so ids of earlier cells stay the same: innodb-c25-b16k-none-disk-t4."""
        return cell_id(asdict(self))

    @property
    def open_loop(self) -> bool:
        return self.rate_fraction > 0

    def closed_loop_twin(self) -> Cell:
        """The closed-loop cell whose measured peak sets this open-loop cell's --rate."""
        return replace(self, rate_fraction=0)

    def levels(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DatasetKey:
    """What a prepared dataset depends on; runs of cells with the same key share a snapshot."""

    engine: str
    block_size: str
    compression: str
    tables: int
    table_size: int
    schema: str = "oltp"
    strings: str = "random"  # TPC-C: what its a-strings are made of (Workload.strings)
    server_build: str = "system"  # each build loads its own (a datadir is made by one server's version)

    @property
    def name(self) -> str:
        scale = f"{self.table_size}w" if self.schema == "tpcc" else f"{self.table_size}"
        kind = self.schema + ("" if self.strings == "random" else f"-{self.strings}")
        build = "" if self.server_build == "system" else f"-{self.server_build}"
        return f"{self.engine}-b{self.block_size}-{self.compression}-{kind}-{self.tables}x{scale}{build}"


@dataclass(frozen=True)
class PlannedRun:
    """One independent repetition of a cell, at its place in the randomised order."""

    cell: Cell
    repetition: int  # 1-based
    block: int  # replicate block (1-based): every cell once per block
    order: int  # 1-based position in the whole plan
    adaptive: bool = False  # added by the adaptive mode beyond the spec's repetitions
    campaign: int = 1  # the run of the whole matrix it belongs to (dbmatrix.run.campaigns)

    @property
    def run_id(self) -> str:
        """``<cell_id>-r<rep>``; campaign k >= 2 appends ``-camp<k>`` (campaign 1 keeps the old ids)."""
        base = f"{self.cell.cell_id}-r{self.repetition}"
        return base if self.campaign == 1 else f"{base}-camp{self.campaign}"


def check_combination(cell: Cell) -> None:
    """Reject a level combination the engine cannot run, saying why (the engine's own words)."""
    e = engines.engine(cell.engine)
    if cell.compression not in e.compressions:
        why = e.why_not.get(cell.compression, "not supported")
        raise SpecError(
            f"factors.compression: {cell.compression!r} is not possible with engine {cell.engine!r}: "
            f"{why}; allowed for {cell.engine}: {', '.join(e.compressions)}"
        )
    if cell.block_size not in e.block_sizes:
        raise SpecError(
            f"factors.block_size: {cell.block_size!r} is not allowed for {cell.engine}; "
            f"allowed: {', '.join(e.block_sizes)}"
        )
    if cell.index_cache != "cache" and e.index_cache_option is None:
        raise SpecError(f"factors.index_cache: {cell.index_cache!r} is a MyRocks setting; engine {cell.engine!r} "
                        "allows only cache (the default)")
    impossible = e.check_levels(cell.block_size, cell.compression)
    if impossible:
        raise SpecError(impossible)
