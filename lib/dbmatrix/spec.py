"""Experiment specs: validation with clear errors, and expansion into cells and a seeded run order.

Pure logic: no files are read here except through :func:`load_spec` (YAML text in, dataclasses out).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml


class SpecError(ValueError):
    """A spec or inventory is invalid; the message names the field and what is allowed."""


ENGINES = ("innodb", "myrocks")
BLOCK_SIZES = {
    "innodb": ("4k", "8k", "16k", "32k", "64k"),
    "myrocks": ("4k", "8k", "16k", "32k", "64k"),
}
COMPRESSIONS = {
    "innodb": ("none", "lz4", "zlib", "row_compressed"),
    "myrocks": ("none", "lz4", "zlib", "zstd", "snappy"),
}
WHY_NOT = {
    ("innodb", "zstd"): "MariaDB 10.11 InnoDB page compression has no zstd provider",
    ("innodb", "snappy"): "InnoDB page compression with snappy needs the provider_snappy plugin, "
                          "which Debian does not package",
    ("myrocks", "row_compressed"): "ROW_FORMAT=COMPRESSED is an InnoDB table format",
}
WORKLOADS = ("oltp_read_write", "oltp_read_only", "oltp_point_select", "oltp_write_only")
RAND_TYPES = ("uniform", "gaussian", "special", "pareto")

# Factor name -> default single level when a spec does not vary it.
FACTOR_DEFAULTS: dict[str, Any] = {
    "engine": "innodb",
    "cache_pct": 100,
    "block_size": "16k",
    "compression": "none",
    "medium": "disk",
    "threads": 4,
}
FACTORS = tuple(FACTOR_DEFAULTS)

# Server options set by a factor or by the harness itself: a spec may not hold them constant.
HARNESS_OPTIONS = frozenset({
    "innodb_buffer_pool_size", "innodb_page_size", "innodb_compression_algorithm",
    "rocksdb_block_cache_size", "rocksdb_block_size", "rocksdb_default_cf_options", "datadir",
    "socket", "port", "bind_address", "pid_file", "log_error", "user", "no_defaults",
    "innodb_buffer_pool_load_at_startup", "innodb_buffer_pool_dump_at_shutdown", "plugin_load_add",
})

TOP_LEVEL_KEYS = (
    "experiment", "description", "workload", "factors", "repetitions", "seed", "warmup_s",
    "measure_s", "server_options", "baseline", "run_timeout_s",
)


def block_size_bytes(level: str) -> int:
    return int(level[:-1]) * 1024


@dataclass(frozen=True)
class Workload:
    """A sysbench workload and the size of its schema."""

    name: str = "oltp_read_write"
    tables: int = 4
    table_size: int = 100_000
    rand_type: str = "uniform"


@dataclass(frozen=True)
class Cell:
    """One combination of factor levels; measured `repetitions` times."""

    engine: str
    cache_pct: float
    block_size: str
    compression: str
    medium: str
    threads: int

    @property
    def cell_id(self) -> str:
        pct = f"{self.cache_pct:g}".replace(".", "p")
        return (f"{self.engine}-c{pct}-b{self.block_size}-{self.compression}-"
                f"{self.medium}-t{self.threads}")

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

    @property
    def name(self) -> str:
        return f"{self.engine}-b{self.block_size}-{self.compression}-oltp-{self.tables}x{self.table_size}"


@dataclass(frozen=True)
class PlannedRun:
    """One independent repetition of a cell, at its place in the randomised order."""

    cell: Cell
    repetition: int  # 1-based
    block: int  # replicate block (1-based): every cell once per block
    order: int  # 1-based position in the whole plan

    @property
    def run_id(self) -> str:
        return f"{self.cell.cell_id}-r{self.repetition}"


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    workload: Workload
    factors: dict[str, tuple[Any, ...]]
    repetitions: int
    seed: int
    warmup_s: int
    measure_s: int
    server_options: dict[str, str] = field(default_factory=dict)
    baseline: dict[str, Any] = field(default_factory=dict)
    run_timeout_s: int | None = None

    def cells(self) -> list[Cell]:
        """All combinations of factor levels, in spec order (the last factor varies fastest)."""
        combos: list[dict[str, Any]] = [{}]
        for name in FACTORS:
            combos = [{**c, name: level} for c in combos for level in self.factors[name]]
        cells = [Cell(**c) for c in combos]
        for c in cells:
            check_combination(c)
        return cells

    def dataset_key(self, cell: Cell) -> DatasetKey:
        return DatasetKey(cell.engine, cell.block_size, cell.compression,
                          self.workload.tables, self.workload.table_size)

    def plan(self) -> list[PlannedRun]:
        """Replicate blocks, each a seeded shuffle of all cells (the order is part of the design)."""
        cells = self.cells()
        runs: list[PlannedRun] = []
        for block in range(1, self.repetitions + 1):
            order = list(cells)
            random.Random(f"{self.seed}:{block}").shuffle(order)
            for cell in order:
                runs.append(PlannedRun(cell, block, block, len(runs) + 1))
        return runs

    def baseline_cell(self, cell: Cell) -> Cell:
        """The cell this one is compared with: same levels except those the baseline fixes."""
        return Cell(**{**cell.levels(), **self.baseline})

    def varied_factors(self) -> list[str]:
        return [f for f in FACTORS if len(self.factors[f]) > 1]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["factors"] = {k: list(v) for k, v in self.factors.items()}
        return d

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


def check_combination(cell: Cell) -> None:
    """Reject a level combination the engine cannot run, saying why."""
    if cell.compression not in COMPRESSIONS[cell.engine]:
        why = WHY_NOT.get((cell.engine, cell.compression), "not supported")
        raise SpecError(
            f"factors.compression: {cell.compression!r} is not possible with engine {cell.engine!r}: "
            f"{why}; allowed for {cell.engine}: {', '.join(COMPRESSIONS[cell.engine])}"
        )
    if cell.block_size not in BLOCK_SIZES[cell.engine]:
        raise SpecError(
            f"factors.block_size: {cell.block_size!r} is not allowed for {cell.engine}; "
            f"allowed: {', '.join(BLOCK_SIZES[cell.engine])}"
        )
    if (cell.engine == "innodb" and cell.compression == "row_compressed"
            and block_size_bytes(cell.block_size) > 16384):
        raise SpecError(
            f"factors: compression 'row_compressed' with block_size {cell.block_size!r} is impossible: "
            "InnoDB ROW_FORMAT=COMPRESSED needs innodb_page_size of 16k or less"
        )


def _levels(name: str, raw: Any) -> tuple[Any, ...]:
    levels = raw if isinstance(raw, list) else [raw]
    if not levels:
        raise SpecError(f"factors.{name}: needs at least one level")
    out: list[Any] = []
    for lv in levels:
        if name == "engine":
            if lv not in ENGINES:
                raise SpecError(f"factors.engine: unknown level {lv!r}; allowed: {', '.join(ENGINES)}")
        elif name == "cache_pct":
            if isinstance(lv, bool) or not isinstance(lv, (int, float)) or not 0 <= lv <= 100:
                raise SpecError(f"factors.cache_pct: {lv!r} is not a percentage; allowed: numbers from "
                                "0 (the smallest cache the engine allows) to 100")
            lv = int(lv) if float(lv).is_integer() else float(lv)
        elif name == "block_size":
            lv = str(lv).lower()
            allowed = sorted(set().union(*BLOCK_SIZES.values()), key=block_size_bytes)
            if lv not in allowed:
                raise SpecError(f"factors.block_size: unknown level {lv!r}; allowed: {', '.join(allowed)}")
        elif name == "compression":
            allowed = sorted(set().union(*COMPRESSIONS.values()))
            if lv not in allowed:
                raise SpecError(f"factors.compression: unknown level {lv!r}; allowed: {', '.join(allowed)}")
        elif name == "medium":
            if not isinstance(lv, str) or not lv:
                raise SpecError(f"factors.medium: {lv!r} must be the name of a medium in the inventory")
        elif name == "threads":
            if isinstance(lv, bool) or not isinstance(lv, int) or lv < 1:
                raise SpecError(f"factors.threads: {lv!r} must be a positive integer")
        if lv in out:
            raise SpecError(f"factors.{name}: level {lv!r} is listed twice")
        out.append(lv)
    return tuple(out)


def _positive_int(d: Mapping[str, Any], key: str, default: int | None, minimum: int = 1,
                  where: str = "") -> int:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{where}{key}: {value!r} must be an integer >= {minimum}")
    return value


def parse_workload(raw: Any) -> Workload:
    if raw is None:
        return Workload()
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        raise SpecError("workload: must be a workload name or a mapping with name, tables, table_size, rand_type")
    unknown = set(raw) - {"name", "tables", "table_size", "rand_type"}
    if unknown:
        raise SpecError(f"workload: unknown key(s) {', '.join(sorted(unknown))}; "
                        "allowed: name, tables, table_size, rand_type")
    name = raw.get("name", "oltp_read_write")
    if name not in WORKLOADS:
        raise SpecError(f"workload.name: unknown workload {name!r}; allowed: {', '.join(WORKLOADS)}")
    rand = raw.get("rand_type", "uniform")
    if rand not in RAND_TYPES:
        raise SpecError(f"workload.rand_type: unknown {rand!r}; allowed: {', '.join(RAND_TYPES)}")
    tables = _positive_int(raw, "tables", 4, where="workload.")
    size = _positive_int(raw, "table_size", 100_000, where="workload.")
    return Workload(name, tables, size, rand)


def parse_experiment(raw: Mapping[str, Any]) -> Experiment:
    """Validate a spec mapping (as loaded from YAML) into an :class:`Experiment`."""
    if not isinstance(raw, Mapping):
        raise SpecError("spec: must be a mapping at the top level")
    unknown = set(raw) - set(TOP_LEVEL_KEYS)
    if unknown:
        raise SpecError(f"spec: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(TOP_LEVEL_KEYS)}")
    name = raw.get("experiment")
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise SpecError(f"experiment: {name!r} must be a name of letters, digits, '-' and '_'")
    factors_raw = raw.get("factors") or {}
    if not isinstance(factors_raw, dict):
        raise SpecError("factors: must be a mapping of factor name to a level or a list of levels")
    unknown = set(factors_raw) - set(FACTORS)
    if unknown:
        raise SpecError(f"factors: unknown factor(s) {', '.join(sorted(unknown))}; allowed: {', '.join(FACTORS)}")
    factors = {f: _levels(f, factors_raw.get(f, FACTOR_DEFAULTS[f])) for f in FACTORS}
    options = raw.get("server_options") or {}
    if not isinstance(options, dict):
        raise SpecError("server_options: must be a mapping of MariaDB option name to value")
    baseline = dict(raw.get("baseline") or {})
    for k in list(baseline):
        if k not in FACTORS:
            raise SpecError(f"baseline.{k}: not a factor; allowed: {', '.join(FACTORS)}")
        try:
            baseline[k] = _levels(k, baseline[k])[0]
        except SpecError as exc:
            raise SpecError(f"baseline.{k}: {exc}") from None
        v = baseline[k]
        if v not in factors[k]:
            raise SpecError(f"baseline.{k}: {v!r} is not one of the spec's levels {list(factors[k])}")
    for k in options:
        if str(k).replace("-", "_") in HARNESS_OPTIONS:
            raise SpecError(f"server_options.{k}: set by a factor or by the harness, so it cannot be held "
                            "constant; remove it from server_options")
    seed = raw.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SpecError(f"seed: {seed!r} must be an integer")
    timeout = raw.get("run_timeout_s")
    exp = Experiment(
        name=name,
        description=str(raw.get("description", "")),
        workload=parse_workload(raw.get("workload")),
        factors=factors,
        repetitions=_positive_int(raw, "repetitions", 3),
        seed=seed,
        warmup_s=_positive_int(raw, "warmup_s", 10, minimum=0),
        measure_s=_positive_int(raw, "measure_s", 30),
        server_options={str(k).replace("-", "_"): _option_value(v) for k, v in options.items()},
        baseline=baseline,
        run_timeout_s=None if timeout is None else _positive_int(raw, "run_timeout_s", None),
    )
    exp.cells()  # impossible combinations fail here, at plan time
    return exp


def _option_value(v: Any) -> str:
    if isinstance(v, bool):
        return "ON" if v else "OFF"
    return str(v)


def load_spec(path: str | Path) -> Experiment:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"spec: file {str(p)!r} does not exist")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(f"spec: {p} is not valid YAML: {exc}") from None
    return parse_experiment(raw or {})


def check_media(exp: Experiment, media_names: Iterable[str], host: str) -> None:
    names = sorted(media_names)
    for m in exp.factors["medium"]:
        if m not in names:
            raise SpecError(f"factors.medium: {m!r} is not defined on host {host!r}; "
                            f"its media are: {', '.join(names) or '(none)'}")
