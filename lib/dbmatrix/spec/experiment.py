"""Experiment specs: validation with clear errors, and expansion into cells and a seeded run order.

Pure logic: no files are read here except through :func:`load_spec` (YAML text in, dataclasses out).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from dbmatrix.spec.errors import SpecError

# The factors and their allowed levels live in the registry (dbmatrix.spec.factors); these names stay
# importable from here, where most of the code imports them from.
from dbmatrix.spec.factors import (  # noqa: F401 (re-exported: ENGINES, MAX_RATE_FRACTION, WORKLOAD_TAGS)
    BLOCK_SIZES,
    COMPRESSIONS,
    ENGINES,
    FACTOR_DEFAULTS,
    FACTORS,
    GALERA_FACTORS,
    INSTANCES_FACTORS,
    MAX_RATE_FRACTION,
    WORKLOAD_TAGS,
    WORKLOADS,
    block_size_bytes,
    cell_id,
)
from dbmatrix.spec.factors import factor as registry_factor

WHY_NOT = {
    ("innodb", "zstd"): "MariaDB 10.11 InnoDB page compression has no zstd provider",
    ("innodb", "snappy"): "InnoDB page compression with snappy needs the provider_snappy plugin, "
                          "which Debian does not package",
    ("myrocks", "row_compressed"): "ROW_FORMAT=COMPRESSED is an InnoDB table format",
}
# Workloads that share a table schema share prepared datasets.
# TPC-C a-strings: random (clause 4.3.2.2; lz4 cannot shrink them) or compressible (slices of one fixed
# string, see workload/lua/tpcc_lib.lua: lz4 about 3x, as seed 003's data compressed about 4x).
STRING_MODES = ("random", "compressible")
WORKLOAD_SCHEMAS = {**{w: "oltp" for w in WORKLOADS}, "tpcc": "tpcc"}
# Transaction isolation levels of the TPC-C workload (sysbench option --trx_level); the seed used RC.
ISOLATION_LEVELS = ("RC", "RR", "SER", "RU")
MYROCKS_ISOLATION = ("RC", "RR")
TOPOLOGIES = ("standalone", "galera", "instances")
SST_METHODS = ("rsync", "mariabackup")
MAX_GALERA_NODES = 9
MAX_INSTANCES_PER_HOST = 32  # one TCP port each within a host's block of 40 (run.ports.PORTS_PER_HOST)
RAND_TYPES = ("uniform", "gaussian", "special", "pareto")
DESIGNS = ("full", "fractional", "crossed")
PLACEMENT_TOOLS = ("taskset", "numactl")
# How a measured run's servers stop: "clean" (mariadb-admin shutdown) or "kill" (SIGKILL: the datadir is
# thrown away after the run, so a clean shutdown's flushing is wasted time). Measured on the quick matrix's
# tmpfs cells, 8 ABBA pairs (benchmarks/bench_stop.py): stop 1.86 s -> 0.02 s, run wall time x0.90,
# tps kill/clean 1.05 [0.97, 1.14]: the results agree, so kill is the default.
STOP_MODES = ("clean", "kill")
DEFAULT_STOP_MODE = "kill"
# What a cell's cache_pct is a percentage of: the tables' logical (uncompressed) size, which is what the
# InnoDB buffer pool and the RocksDB block cache hold, or their physical (du) size on the medium.
# Results recorded before this key existed used "physical" (a manifest without cache_basis means that), so
# the digest leaves the key out at "physical": old results stay bound to physical-basis specs, and a spec at
# the new default gets a new digest instead of resuming (and mixing with) physical-basis runs.
CACHE_BASES = ("logical", "physical")
DEFAULT_CACHE_BASIS = "logical"
LEGACY_CACHE_BASIS = "physical"

# Server options set by a factor or by the harness itself: a spec may not hold them constant.
HARNESS_OPTIONS = frozenset({
    "innodb_buffer_pool_size", "innodb_page_size", "innodb_compression_algorithm",
    "rocksdb_block_cache_size", "rocksdb_block_size", "rocksdb_default_cf_options", "datadir",
    "socket", "port", "bind_address", "skip_networking", "pid_file", "log_error", "tmpdir", "user", "no_defaults",
    "innodb_buffer_pool_load_at_startup", "innodb_buffer_pool_dump_at_shutdown", "plugin_load_add",
    "innodb_log_group_home_dir", "rocksdb_wal_dir",
    "wsrep_on", "wsrep_provider", "wsrep_cluster_address", "wsrep_node_address", "wsrep_provider_options",
    "wsrep_sst_receive_address", "wsrep_sst_method", "wsrep_slave_threads", "wsrep_cluster_name",
    "wsrep_node_name", "binlog_format", "innodb_autoinc_lock_mode",
})

TOP_LEVEL_KEYS = (
    "experiment", "description", "workload", "factors", "repetitions", "seed", "warmup_s",
    "measure_s", "server_options", "baseline", "run_timeout_s", "design", "comparisons", "noise",
    "cpu_placement", "topology", "stop_mode", "cache_basis",
)


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

    @property
    def name(self) -> str:
        scale = f"{self.table_size}w" if self.schema == "tpcc" else f"{self.table_size}"
        kind = self.schema + ("" if self.strings == "random" else f"-{self.strings}")
        return f"{self.engine}-b{self.block_size}-{self.compression}-{kind}-{self.tables}x{scale}"


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


@dataclass(frozen=True)
class Comparison:
    """Level `a` against level `b` of `factor` (ratio a/b), separately within each combination of `within`."""

    factor: str
    a: Any
    b: Any
    within: tuple[str, ...] = ()


@dataclass(frozen=True)
class Noise:
    """Noise policy: cells with a CV above `max_cv_pct` are flagged; with a target, the adaptive mode adds
    repetitions until the 95 % CI half-width is under `target_halfwidth_pct` of the mean or `max_repetitions`."""

    max_cv_pct: float = 10.0
    target_halfwidth_pct: float | None = None
    max_repetitions: int | None = None

    @property
    def adaptive(self) -> bool:
        return self.target_halfwidth_pct is not None


@dataclass(frozen=True)
class CpuPlacement:
    """CPU lists for the server and the client (sysbench), applied with taskset or numactl."""

    server: str | None = None
    client: str | None = None
    tool: str = "taskset"

    def prefix(self, who: str) -> list[str]:
        cpus = self.server if who == "server" else self.client
        if not cpus:
            return []
        if self.tool == "numactl":
            return ["numactl", f"--physcpubind={cpus}"]
        return ["taskset", "-c", cpus]


@dataclass(frozen=True)
class Calibration:
    """A Galera study's calibration of its followers' throttled medium: before a campaign's runs, one short
    run per candidate limit (mildest first, one applier, followers on `medium`) until flow control pauses the
    cluster at least `target_fc_paused_pct` % of the window; that limit then holds for the campaign."""

    medium: str
    limit: str  # read_iops | write_iops | read_bps | write_bps
    candidates: tuple[int, ...]
    target_fc_paused_pct: float = 30.0
    warmup_s: int = 3
    measure_s: int = 8


@dataclass(frozen=True)
class Topology:
    """Standalone servers (one per run), a Galera cluster of `nodes` nodes per run, or several server
    instances per run (``instances``: the count is the factor of that name).

    Galera: `hosts` places node i on inventory host hosts[i]; empty: every node on the run's host.
    Instances: instance i runs on hosts[i % len(hosts)] (empty: all on the run's host); `client` names
    the host sysbench runs on (empty: the first host)."""

    kind: str = "standalone"
    nodes: int = 1
    hosts: tuple[str, ...] = ()
    sst_method: str = "rsync"
    client: str = ""
    calibrate: Calibration | None = None

    @property
    def galera(self) -> bool:
        return self.kind == "galera"

    @property
    def instances(self) -> bool:
        return self.kind == "instances"


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
    design: str = "full"
    comparisons: tuple[Comparison, ...] = ()
    noise: Noise = field(default_factory=Noise)
    cpu_placement: CpuPlacement = field(default_factory=CpuPlacement)
    topology: Topology = field(default_factory=Topology)
    stop_mode: str = DEFAULT_STOP_MODE
    cache_basis: str = DEFAULT_CACHE_BASIS

    def cells(self) -> list[Cell]:
        """The design's cells in spec order (the last factor varies fastest): every combination of the
        levels for a full design, a resolution-V fraction of them for a fractional one, the half fraction of
        the two-level factors crossed with every level of the others for a crossed one."""
        combos: list[dict[str, Any]] = [{}]
        for name in FACTORS:
            combos = [{**c, name: level} for c in combos for level in self.factors[name]]
        if self.design == "fractional":
            keep = {tuple(sorted(run.items())) for run in fractional_runs(
                {f: self.factors[f] for f in self.varied_factors()})}
            varied = self.varied_factors()
            combos = [c for c in combos if tuple(sorted((f, c[f]) for f in varied)) in keep]
        elif self.design == "crossed":
            two = self.two_level_factors()
            keep = {tuple(sorted(run.items())) for run in half_fraction_runs({f: self.factors[f] for f in two})}
            combos = [c for c in combos if tuple(sorted((f, c[f]) for f in two)) in keep]
        cells = [Cell(**c) for c in combos]
        for c in cells:
            check_combination(c)
        return cells

    def dataset_key(self, cell: Cell) -> DatasetKey:
        schema = WORKLOAD_SCHEMAS.get(cell.workload, cell.workload)
        size = self.workload.warehouses if schema == "tpcc" else self.workload.table_size
        return DatasetKey(cell.engine, cell.block_size, cell.compression, self.workload.tables, size, schema,
                          self.workload.strings if schema == "tpcc" else "random")

    def plan(self, campaign: int = 1) -> list[PlannedRun]:
        """Replicate blocks, each a seeded shuffle of all cells (the order is part of the design).

        Open-loop cells need their closed-loop twin's measured peak, so their blocks come after all
        closed-loop blocks. Campaign k >= 2 shuffles with its own seed string (campaign 1's order is the
        one every study had before campaigns)."""
        if campaign < 1:
            raise ValueError(f"plan: campaign must be >= 1, got {campaign}")
        cells = self.cells()
        runs: list[PlannedRun] = []
        camp = "" if campaign == 1 else f"camp{campaign}:"
        for phase, group in (("", [c for c in cells if not c.open_loop]),
                             ("open:", [c for c in cells if c.open_loop])):
            for block in range(1, self.repetitions + 1):
                order = list(group)
                random.Random(f"{self.seed}:{camp}{phase}{block}").shuffle(order)
                for cell in order:
                    runs.append(PlannedRun(cell, block, block, len(runs) + 1, campaign=campaign))
        return runs

    def baseline_cell(self, cell: Cell) -> Cell:
        """The cell this one is compared with: same levels except those the baseline fixes."""
        return Cell(**{**cell.levels(), **self.baseline})

    def varied_factors(self) -> list[str]:
        return [f for f in FACTORS if len(self.factors[f]) > 1]

    def two_level_factors(self) -> list[str]:
        return [f for f in self.varied_factors() if len(self.factors[f]) == 2]

    def design_info(self) -> dict[str, Any]:
        """What the design is: full, or the fraction's generators and resolution (and, for a crossed
        design, the factors crossed with the fraction and every alias the model leans on)."""
        varied = self.varied_factors()
        if self.design == "full":
            return {"design": "full", "factors": varied, "cells": len(self.cells())}
        if self.design == "crossed":
            return crossed_design_info(varied, self.two_level_factors(), len(self.cells()))
        gens = FRACTION_GENERATORS[len(varied)]
        letters = "ABCDEFGHJK"
        return {"design": "fractional", "factors": varied, "cells": len(self.cells()),
                "letters": dict(zip(varied, letters)),
                "generators": [f"{letters[g]}={''.join(letters[i] for i in word)}" for g, word in gens],
                "resolution": resolution(len(varied), gens),
                "fraction": f"2^({len(varied)}-{len(gens)})"}

    def to_dict(self) -> dict[str, Any]:
        """The spec as data. Keys added after the first studies are left out at their defaults, so the
        digest of a spec that does not use them (and the results bound to it) stays the same."""
        d = asdict(self)
        d["factors"] = {k: list(v) for k, v in self.factors.items()
                        if not (registry_factor(k).digest_omits_default and list(v) == [FACTOR_DEFAULTS[k]])}
        if self.topology.galera:
            d["topology"]["hosts"] = list(self.topology.hosts)
            del d["topology"]["client"]  # added with the instances topology: galera digests stay the same
            if self.topology.calibrate is None:  # added with calibration: digests without it stay the same
                del d["topology"]["calibrate"]
            else:
                d["topology"]["calibrate"]["candidates"] = list(self.topology.calibrate.candidates)
        elif self.topology.instances:
            d["topology"] = {"kind": "instances", "hosts": list(self.topology.hosts), "client": self.topology.client}
        else:
            del d["topology"]
        if "tpcc" not in self.factors["workload"]:
            del d["workload"]["warehouses"], d["workload"]["isolation"]
        if self.workload.strings == "random":  # added with compressible TPC-C strings: digests stay the same
            del d["workload"]["strings"]
        if self.stop_mode == DEFAULT_STOP_MODE:  # how servers stop does not change what is measured
            del d["stop_mode"]
        if self.cache_basis == LEGACY_CACHE_BASIS:  # what results without the key measured (see CACHE_BASES)
            del d["cache_basis"]
        return d

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]


# Regular two-level fractions of resolution V or more (every main effect and two-way interaction
# estimable, aliased only with three-way or higher interactions), by number of varied factors:
# (index of the generated factor, indexes of the base factors whose product gives it).
# Standard minimum-aberration generators (Montgomery, Design and Analysis of Experiments, table 8.14);
# their resolution is recomputed by `resolution` and checked by the unit tests.
FRACTION_GENERATORS: dict[int, list[tuple[int, tuple[int, ...]]]] = {
    5: [(4, (0, 1, 2, 3))],  # 2^(5-1)_V: E = ABCD
    6: [(5, (0, 1, 2, 3, 4))],  # 2^(6-1)_VI: F = ABCDE
    7: [(6, (0, 1, 2, 3, 4, 5))],  # 2^(7-1)_VII: G = ABCDEF
    8: [(6, (0, 1, 2, 3)), (7, (0, 1, 4, 5))],  # 2^(8-2)_V: G = ABCD, H = ABEF
    9: [(7, (0, 2, 3, 5, 6)), (8, (1, 2, 4, 5, 6))],  # 2^(9-2)_VI: H = ACDFG, J = BCEFG
}


def resolution(k: int, generators: list[tuple[int, tuple[int, ...]]]) -> int:
    """Length of the shortest word in the defining relation of a 2^(k-p) fraction."""
    words = [frozenset((g, *base)) for g, base in generators]
    shortest = k
    for mask in range(1, 2 ** len(words)):
        w: frozenset[int] = frozenset()
        for i, word in enumerate(words):
            if mask >> i & 1:
                w = w ^ word
        shortest = min(shortest, len(w))
    return shortest


def fractional_runs(factors: Mapping[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The runs of the resolution-V fraction for these two-level factors (first level coded -1)."""
    names = list(factors)
    k = len(names)
    gens = FRACTION_GENERATORS[k]
    base = k - len(gens)
    runs = []
    for bits in range(2 ** base):
        code = [1 if bits >> (base - 1 - i) & 1 else -1 for i in range(base)] + [0] * len(gens)
        for g, word in gens:
            prod = 1
            for i in word:
                prod *= code[i]
            code[g] = prod
        runs.append({n: factors[n][0 if c < 0 else 1] for n, c in zip(names, code)})
    return runs


def design_text(info: Mapping[str, Any]) -> str:
    """The design in words (plain text), from :meth:`Experiment.design_info`."""
    if info["design"] == "fractional":
        return f"{info['fraction']} fraction, resolution {info['resolution']} ({', '.join(info['generators'])})"
    if info["design"] == "crossed":
        letters = ", ".join(f"{k}={v}" for k, v in info["letters"].items())
        return (f"{info['fraction']} half fraction ({', '.join(info['generators'])}; {letters}) crossed with "
                f"every level of {', '.join(info['crossed_with'])}; aliased: {'; '.join(info['aliases'])}")
    return "full factorial"


def half_fraction_runs(factors: Mapping[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The half fraction of these two-level factors whose last factor is the product of the others (first
    level coded -1): defining relation I = ABC... (resolution = the number of factors)."""
    names = list(factors)
    k = len(names)
    runs = []
    for bits in range(2 ** (k - 1)):
        code = [1 if bits >> (k - 2 - i) & 1 else -1 for i in range(k - 1)]
        last = 1
        for c in code:
            last *= c
        runs.append({n: factors[n][0 if c < 0 else 1] for n, c in zip(names, [*code, last])})
    return runs


def crossed_design_info(varied: list[str], two: list[str], cells: int) -> dict[str, Any]:
    """A crossed design's description: the half fraction 2^(k-1) of the `two`-level factors (I = the word of
    all of them) crossed with every level of the other varied factors. Aliases: each effect S of the
    two-level factors with its complement in the word (S x W), and so each interaction of a crossed factor M
    with S with M x (S x W). With the crossed factors' interactions with each two-level factor in the model,
    the two-level factors' interactions with each other are the aliased ones left out."""
    letters = dict(zip(two, "ABCDEFGHJK"))
    word = "".join(letters[f] for f in two)
    others = [f for f in varied if f not in two]
    aliases = [f"{letters[f]}={word.replace(letters[f], '')}" for f in two]
    aliases += [f"{m} x {letters[f]} = {m} x {word.replace(letters[f], '')}" for m in others for f in two]
    return {"design": "crossed", "factors": varied, "cells": cells, "letters": letters,
            "generators": [f"{word[-1]}={word[:-1]}"], "resolution": len(two),
            "fraction": f"2^({len(two)}-1)", "crossed_with": others, "aliases": aliases}


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
    """The levels of factor `name` (one level or a list), each checked and normalised by the factor's
    registry entry (dbmatrix.spec.factors); none, or one listed twice, is an error. Checks across factors
    (block sizes and compressions per engine, Galera-only factors, open-loop levels) are made on the whole
    spec: :func:`check_combination`, :func:`_check_topology`, :func:`parse_experiment`."""
    check = registry_factor(name).check
    levels = raw if isinstance(raw, list) else [raw]
    if not levels:
        raise SpecError(f"factors.{name}: needs at least one level")
    out: list[Any] = []
    for lv in levels:
        lv = check(lv)
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
    keys = ("name", "tables", "table_size", "rand_type", "warehouses", "isolation", "strings")
    unknown = set(raw) - set(keys)
    if unknown:
        raise SpecError(f"workload: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(keys)}")
    name = raw.get("name", "oltp_read_write")
    names = name if isinstance(name, list) else [name]
    if not names:
        raise SpecError("workload.name: needs at least one workload")
    for n in names:
        if n not in WORKLOADS:
            raise SpecError(f"workload.name: unknown workload {n!r}; allowed: {', '.join(WORKLOADS)}")
    rand = raw.get("rand_type", "uniform")
    if rand not in RAND_TYPES:
        raise SpecError(f"workload.rand_type: unknown {rand!r}; allowed: {', '.join(RAND_TYPES)}")
    tpcc_only = "tpcc" in names and all(n == "tpcc" for n in names)
    tables = _positive_int(raw, "tables", 1 if tpcc_only else 4, where="workload.")
    size = _positive_int(raw, "table_size", 100_000, where="workload.")
    warehouses = _positive_int(raw, "warehouses", 1, where="workload.")
    isolation = str(raw.get("isolation", "RC")).upper()
    if isolation not in ISOLATION_LEVELS:
        raise SpecError(f"workload.isolation: unknown {raw.get('isolation')!r}; allowed: {', '.join(ISOLATION_LEVELS)}")
    strings = str(raw.get("strings", "random"))
    if strings not in STRING_MODES:
        raise SpecError(f"workload.strings: unknown {raw.get('strings')!r}; allowed: {', '.join(STRING_MODES)}")
    if strings != "random" and not tpcc_only:
        raise SpecError(f"workload.strings: {strings!r} is a TPC-C option (its a-strings); sysbench's oltp "
                        "tables have fixed random-digit strings; allowed for oltp workloads: random")
    return Workload(names[0], tables, size, rand, warehouses, isolation, strings)


def _workload_levels(raw: Mapping[str, Any], factors_raw: Mapping[str, Any]) -> Any:
    """Workload levels come from factors.workload, or from workload.name (a name or a list)."""
    w = raw.get("workload")
    name = w.get("name") if isinstance(w, dict) else w
    if "workload" in factors_raw:
        if isinstance(name, list):
            raise SpecError("factors.workload: workloads are listed both here and in workload.name; "
                            "list them in one place")
        return factors_raw["workload"]
    return name if name is not None else FACTOR_DEFAULTS["workload"]


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
    workload = parse_workload(raw.get("workload"))  # its errors first: factors.workload builds on it
    levels_raw = {**{f: factors_raw.get(f, FACTOR_DEFAULTS[f]) for f in FACTORS},
                  "workload": _workload_levels(raw, factors_raw)}
    topo_raw = raw.get("topology")
    topo_kind = topo_raw.get("kind") if isinstance(topo_raw, Mapping) else topo_raw
    w_raw = raw.get("workload")
    named = isinstance(w_raw, str) or (isinstance(w_raw, Mapping) and "name" in w_raw)
    if topo_kind == "instances" and not named and "workload" not in factors_raw:
        # The scale-out study's default (seed 000): primary-key lookups.
        workload = replace(workload, name="oltp_point_select")
        levels_raw["workload"] = "oltp_point_select"
    factors = {f: _levels(f, levels_raw[f]) for f in FACTORS}
    if any(f > 0 for f in factors["rate_fraction"]) and 0 not in factors["rate_fraction"]:
        raise SpecError("factors.rate_fraction: open-loop levels need the closed-loop level too ('closed'), "
                        "whose measured peak throughput sets each open-loop cell's --rate")
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
    for k, v in options.items():
        check_option_text(k, v)
        if str(k).replace("-", "_") in HARNESS_OPTIONS:
            raise SpecError(f"server_options.{k}: set by a factor or by the harness, so it cannot be held "
                            "constant; remove it from server_options")
    seed = raw.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SpecError(f"seed: {seed!r} must be an integer")
    timeout = raw.get("run_timeout_s")
    design = raw.get("design", "full")
    if design not in DESIGNS:
        raise SpecError(f"design: unknown design {design!r}; allowed: {', '.join(DESIGNS)}")
    if design == "fractional":
        _check_fractional(factors)
    if design == "crossed":
        _check_crossed(factors)
    repetitions = _positive_int(raw, "repetitions", 3)
    exp = Experiment(
        name=name,
        description=str(raw.get("description", "")),
        workload=workload,
        factors=factors,
        repetitions=repetitions,
        seed=seed,
        warmup_s=_positive_int(raw, "warmup_s", 10, minimum=0),
        measure_s=_positive_int(raw, "measure_s", 30),
        server_options={str(k).replace("-", "_"): _option_value(v) for k, v in options.items()},
        baseline=baseline,
        run_timeout_s=None if timeout is None else _positive_int(raw, "run_timeout_s", None),
        design=design,
        comparisons=_parse_comparisons(raw.get("comparisons"), factors),
        noise=_parse_noise(raw.get("noise"), repetitions),
        cpu_placement=_parse_placement(raw.get("cpu_placement")),
        topology=_parse_topology(raw.get("topology")),
        stop_mode=_parse_stop_mode(raw.get("stop_mode", DEFAULT_STOP_MODE)),
        cache_basis=_parse_cache_basis(raw.get("cache_basis", DEFAULT_CACHE_BASIS)),
    )
    _check_topology(exp)
    if ("tpcc" in factors["workload"] and "myrocks" in factors["engine"]
            and workload.isolation not in MYROCKS_ISOLATION):
        raise SpecError(f"workload.isolation: {workload.isolation} is not supported by MyRocks; allowed with "
                        f"engine myrocks: {', '.join(MYROCKS_ISOLATION)}")
    exp.cells()  # impossible combinations fail here, at plan time
    return exp


def _parse_stop_mode(raw: Any) -> str:
    if raw not in STOP_MODES:
        raise SpecError(f"stop_mode: {raw!r} is not a stop mode; allowed: {', '.join(STOP_MODES)} (kill: SIGKILL "
                        "the servers after the measured window, their datadirs are thrown away anyway)")
    return str(raw)


def _parse_cache_basis(raw: Any) -> str:
    if raw not in CACHE_BASES:
        raise SpecError(f"cache_basis: {raw!r} is not a cache basis; allowed: {', '.join(CACHE_BASES)} (logical: "
                        "cache_pct of the tables' uncompressed size, what the buffer pool or block cache holds; "
                        "physical: of their du size on the medium)")
    return str(raw)


def _parse_topology(raw: Any) -> Topology:
    if raw is None:
        return Topology()
    if isinstance(raw, str):
        raw = {"kind": raw}
    allowed = ("kind", "nodes", "hosts", "sst_method", "client", "calibrate")
    if not isinstance(raw, Mapping) or set(raw) - set(allowed):
        raise SpecError(f"topology: must be a mapping with keys among {', '.join(allowed)}")
    kind = raw.get("kind", "standalone")
    if kind not in TOPOLOGIES:
        raise SpecError(f"topology.kind: unknown {kind!r}; allowed: {', '.join(TOPOLOGIES)}")
    if kind == "standalone":
        if set(raw) - {"kind"}:
            raise SpecError(f"topology: {', '.join(sorted(set(raw) - {'kind'}))} only apply to kind: galera "
                            "or instances")
        return Topology()
    if kind == "instances":
        if "calibrate" in raw:
            raise SpecError("topology.calibrate: only applies to kind: galera (it calibrates the followers' medium)")
        return _parse_instances_topology(raw)
    if "client" in raw:
        raise SpecError("topology.client: only applies to kind: instances (a Galera client runs on node 1's host)")
    nodes = raw.get("nodes", 3)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 2 <= nodes <= MAX_GALERA_NODES:
        raise SpecError(f"topology.nodes: {nodes!r} must be an integer from 2 to {MAX_GALERA_NODES} "
                        "(3 is the usual cluster)")
    hosts = raw.get("hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise SpecError("topology.hosts: must be a list of inventory host names, one per node (or left out: "
                        "every node on the run's host)")
    if hosts and len(hosts) != nodes:
        raise SpecError(f"topology.hosts: {len(hosts)} host(s) listed for {nodes} nodes; list one per node")
    sst = raw.get("sst_method", "rsync")
    if sst not in SST_METHODS:
        raise SpecError(f"topology.sst_method: unknown {sst!r}; allowed: {', '.join(SST_METHODS)}")
    return Topology("galera", nodes, tuple(hosts), sst, calibrate=_parse_calibration(raw.get("calibrate")))


CALIBRATION_LIMITS = ("read_iops", "write_iops", "read_bps", "write_bps")


def _parse_calibration(raw: Any) -> Calibration | None:
    if raw is None:
        return None
    keys = ("medium", "limit", "candidates", "target_fc_paused_pct", "warmup_s", "measure_s")
    if not isinstance(raw, Mapping) or set(raw) - set(keys):
        raise SpecError(f"topology.calibrate: must be a mapping with keys among {', '.join(keys)}")
    medium = raw.get("medium")
    if not isinstance(medium, str) or not medium:
        raise SpecError("topology.calibrate.medium: required, the name of the throttled medium of the followers "
                        "(a level of factors.follower_medium)")
    limit = raw.get("limit", "write_iops")
    if limit not in CALIBRATION_LIMITS:
        raise SpecError(f"topology.calibrate.limit: unknown {limit!r}; allowed: {', '.join(CALIBRATION_LIMITS)}")
    cands = raw.get("candidates")
    if not isinstance(cands, list) or not cands or not all(
            isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in cands):
        raise SpecError("topology.calibrate.candidates: required, a list of positive integer limits, mildest "
                        "first (e.g. [2000, 1000, 500, 250])")
    if list(cands) != sorted(cands, reverse=True) or len(set(cands)) != len(cands):
        raise SpecError(f"topology.calibrate.candidates: {cands} must be distinct and in decreasing order "
                        "(mildest limit first: the calibration stops at the first that reaches the target)")
    target = raw.get("target_fc_paused_pct", 30.0)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target < 100:
        raise SpecError(f"topology.calibrate.target_fc_paused_pct: {target!r} must be a percentage in (0, 100)")
    return Calibration(medium, limit, tuple(cands), float(target),
                       _positive_int(raw, "warmup_s", 3, minimum=0, where="topology.calibrate."),
                       _positive_int(raw, "measure_s", 8, where="topology.calibrate."))


def _parse_instances_topology(raw: Mapping[str, Any]) -> Topology:
    extra = sorted(set(raw) - {"kind", "hosts", "client"})
    if extra:
        raise SpecError(f"topology: {', '.join(extra)} only apply to kind: galera; kind: instances takes "
                        "hosts and client (the instance count is factors.instances)")
    hosts = raw.get("hosts") or []
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise SpecError("topology.hosts: must be a list of inventory host names the instances are dealt over "
                        "(instance i on hosts[i % len(hosts)]), or left out: every instance on the run's host")
    if len(set(hosts)) != len(hosts):
        raise SpecError(f"topology.hosts: {hosts} lists a host twice; list each host once")
    client = raw.get("client") or ""
    if not isinstance(client, str) or (hosts and client and client not in hosts):
        raise SpecError(f"topology.client: {client!r} must be one of topology.hosts ({', '.join(hosts)}), "
                        "or left out (the first host)")
    return Topology("instances", 1, tuple(hosts), "rsync", client or (hosts[0] if hosts else ""))


def _check_topology(exp: Experiment) -> None:
    """Galera-only factors need a galera topology, instances-only factors the instances topology; a galera
    cluster needs InnoDB and a shared log medium; instances keep the log with the data."""
    f = exp.factors
    if not exp.topology.instances:
        for name in INSTANCES_FACTORS:
            if list(f[name]) != [FACTOR_DEFAULTS[name]]:
                raise SpecError(f"factors.{name}: only applies to several server instances per run; add "
                                "topology: {kind: instances} or remove the factor")
    else:
        most = max(instances_per_host(exp, n) for n in f["instances"])
        if most > MAX_INSTANCES_PER_HOST:
            raise SpecError(f"factors.instances: {most} instances on one host; allowed: up to "
                            f"{MAX_INSTANCES_PER_HOST} per host (list more hosts in topology.hosts)")
        if list(f["log_medium"]) != ["same"]:
            raise SpecError("factors.log_medium: the instances topology keeps each redo log with its data; "
                            "allowed: same")
        if any(w == "tpcc" for w in f["workload"]):
            raise SpecError("factors.workload: tpcc is not supported by the instances topology (its consistency "
                            "check reads one server); allowed: the oltp_* workloads")
        for name in GALERA_FACTORS:
            if list(f[name]) != [FACTOR_DEFAULTS[name]]:
                raise SpecError(f"factors.{name}: only applies to a Galera cluster")
        return
    if not exp.topology.galera:
        for name in GALERA_FACTORS:
            if list(f[name]) != [FACTOR_DEFAULTS[name]]:
                raise SpecError(f"factors.{name}: only applies to a Galera cluster; add topology: "
                                "{kind: galera, nodes: 3} or remove the factor")
        return
    if set(f["engine"]) != {"innodb"}:
        raise SpecError("factors.engine: a Galera cluster replicates InnoDB only; allowed: innodb")
    if list(f["log_medium"]) != ["same"]:
        raise SpecError("factors.log_medium: a Galera topology keeps the redo log with the data; allowed: same")
    cal = exp.topology.calibrate
    if cal is not None and cal.medium not in f["follower_medium"]:
        raise SpecError(f"topology.calibrate.medium: {cal.medium!r} is not a level of factors.follower_medium "
                        f"({', '.join(f['follower_medium'])}); calibrate the medium the followers use")
    for w in f["write_to"]:
        if w != "all" and int(w[4:]) > exp.topology.nodes:
            raise SpecError(f"factors.write_to: {w!r} is not a node of this {exp.topology.nodes}-node cluster; "
                            f"allowed: {', '.join(f'node{i}' for i in range(1, exp.topology.nodes + 1))}, all")


def _check_fractional(factors: Mapping[str, tuple[Any, ...]]) -> None:
    varied = [f for f in FACTORS if len(factors[f]) > 1]
    for f in varied:
        if len(factors[f]) != 2:
            raise SpecError(f"factors.{f}: a fractional design needs exactly two levels per varied factor; "
                            f"{f} has {len(factors[f])}; use design: full")
    if "rate_fraction" in varied:
        raise SpecError("factors.rate_fraction: open-loop cells need their closed-loop twin in the design; "
                        "use design: full with open-loop levels")
    if len(varied) not in FRACTION_GENERATORS:
        lo, hi = min(FRACTION_GENERATORS), max(FRACTION_GENERATORS)
        raise SpecError(f"design: fractional needs {lo} to {hi} varied two-level factors (fewer have no "
                        f"resolution-V fraction smaller than the full design); this spec varies {len(varied)}"
                        f" ({', '.join(varied) or 'none'}); use design: full")


def _check_crossed(factors: Mapping[str, tuple[Any, ...]]) -> None:
    varied = [f for f in FACTORS if len(factors[f]) > 1]
    two = [f for f in varied if len(factors[f]) == 2]
    multi = [f for f in varied if len(factors[f]) > 2]
    if "rate_fraction" in varied:
        raise SpecError("factors.rate_fraction: open-loop cells need their closed-loop twin in the design; "
                        "use design: full with open-loop levels")
    if not 3 <= len(two) <= 6:
        raise SpecError(f"design: crossed halves the two-level factors and needs 3 to 6 of them; this spec "
                        f"varies {len(two)} ({', '.join(two) or 'none'}); use design: full")
    if not multi:
        raise SpecError("design: crossed needs at least one varied factor with three or more levels to cross "
                        "the fraction with; with two-level factors only use design: fractional or full")


def _parse_comparisons(raw: Any, factors: Mapping[str, tuple[Any, ...]]) -> tuple[Comparison, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError("comparisons: must be a list of {factor, levels: [a, b], within: [factors]}")
    out = []
    for i, c in enumerate(raw):
        where = f"comparisons[{i}]"
        if not isinstance(c, Mapping) or set(c) - {"factor", "levels", "within"}:
            raise SpecError(f"{where}: must be a mapping with keys factor, levels, within")
        f = c.get("factor")
        if f not in FACTORS:
            raise SpecError(f"{where}.factor: {f!r} is not a factor; allowed: {', '.join(FACTORS)}")
        levels = c.get("levels")
        if not isinstance(levels, list) or len(levels) != 2:
            raise SpecError(f"{where}.levels: must be two levels [a, b] of {f} (a is compared with b)")
        try:
            a, b = (_levels(f, lv)[0] for lv in levels)
        except SpecError as exc:
            raise SpecError(f"{where}.levels: {exc}") from None
        for lv in (a, b):
            if lv not in factors[f]:
                raise SpecError(f"{where}.levels: {lv!r} is not one of the spec's levels of {f} "
                                f"{list(factors[f])}")
        if a == b:
            raise SpecError(f"{where}.levels: the two levels must differ")
        within = c.get("within") or []
        within = [within] if isinstance(within, str) else within
        for w in within:
            if w not in FACTORS or w == f:
                raise SpecError(f"{where}.within: {w!r} is not allowed; allowed: the other factors "
                                f"({', '.join(x for x in FACTORS if x != f)})")
        out.append(Comparison(f, a, b, tuple(within)))
    return tuple(out)


def _parse_noise(raw: Any, repetitions: int) -> Noise:
    if raw is None:
        return Noise()
    allowed = ("max_cv_pct", "target_halfwidth_pct", "max_repetitions")
    if not isinstance(raw, Mapping) or set(raw) - set(allowed):
        raise SpecError(f"noise: must be a mapping with keys among {', '.join(allowed)}")
    cv = raw.get("max_cv_pct", 10.0)
    if isinstance(cv, bool) or not isinstance(cv, (int, float)) or not 0 < cv <= 100:
        raise SpecError(f"noise.max_cv_pct: {cv!r} must be a percentage in (0, 100]")
    target = raw.get("target_halfwidth_pct")
    cap = raw.get("max_repetitions")
    if target is not None:
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 100:
            raise SpecError(f"noise.target_halfwidth_pct: {target!r} must be a percentage in (0, 100]")
        if cap is None:
            raise SpecError("noise.max_repetitions: the adaptive mode (target_halfwidth_pct) needs a cap")
    if cap is not None:
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < repetitions:
            raise SpecError(f"noise.max_repetitions: {cap!r} must be an integer >= repetitions ({repetitions})")
        if target is None:
            raise SpecError("noise.max_repetitions: only meaningful with noise.target_halfwidth_pct")
    return Noise(float(cv), None if target is None else float(target), cap)


def _cpu_list(where: str, v: Any) -> str | None:
    if v is None:
        return None
    text = str(v)
    parts = text.split(",")
    ok = bool(text) and all(p.isdigit() or (p.count("-") == 1 and all(x.isdigit() for x in p.split("-")))
                            for p in parts)
    if not ok:
        raise SpecError(f"{where}: {v!r} is not a CPU list; allowed: numbers and ranges such as '0', '0-3' "
                        "or '0,2'")
    return text


def _parse_placement(raw: Any) -> CpuPlacement:
    if raw is None:
        return CpuPlacement()
    if not isinstance(raw, Mapping) or set(raw) - {"server", "client", "tool"}:
        raise SpecError("cpu_placement: must be a mapping with keys server, client (CPU lists) and tool")
    tool = raw.get("tool", "taskset")
    if tool not in PLACEMENT_TOOLS:
        raise SpecError(f"cpu_placement.tool: unknown {tool!r}; allowed: {', '.join(PLACEMENT_TOOLS)}")
    return CpuPlacement(_cpu_list("cpu_placement.server", raw.get("server")),
                        _cpu_list("cpu_placement.client", raw.get("client")), tool)


_OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def _control_char(text: str) -> str | None:
    """The first control character of `text` as words (``newline (U+000A)``), or None."""
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            name = {"\n": "newline", "\r": "carriage return", "\t": "tab"}.get(ch, unicodedata.name(ch, "control"))
            return f"{name.lower()} (U+{ord(ch):04X})"
    return None


def check_option_text(name: Any, value: Any) -> None:
    """A server option's name and value as text mariadbd can take on one command line: a name of letters,
    digits, '_' and '-'; a value without control characters (a newline would end the option, or the
    command). Pure: what the host's mariadbd says of them is checked at plan time (run/preflight)."""
    if not isinstance(name, str) or not _OPTION_NAME.match(name):
        raise SpecError(f"server_options.{name}: {name!r} is not an option name; allowed: letters, digits, "
                        "'_' and '-', starting with a letter (e.g. innodb_flush_method)")
    if isinstance(value, (dict, list)) or value is None:
        raise SpecError(f"server_options.{name}: {value!r} must be one value (a number, a word, ON/OFF or a "
                        "string)")
    bad = _control_char(str(value))
    if bad:
        raise SpecError(f"server_options.{name}: {str(value)!r} contains a control character, {bad}; allowed: "
                        "one line of printable text")


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


def instances_per_host(exp: Experiment, instances: int, host: str | None = None) -> int:
    """How many of `instances` run on `host` (the most on any host when None): dealt round robin over
    ``topology.hosts`` (all on the run's host when it lists none)."""
    hosts = exp.topology.hosts or (host or "",)
    counts = [len(range(i, instances, len(hosts))) for i in range(len(hosts))]
    if host is None or host not in hosts:
        return max(counts)
    return counts[hosts.index(host)]


def check_host_cpus(exp: Experiment, host: str, cpus: int, numa_nodes: int = 1) -> None:
    """Plan-time checks of the instances topology against a host's CPUs: one CPU set per instance needs
    at least one CPU per instance on the host; per-NUMA-node grouping needs a NUMA node for it."""
    if not exp.topology.instances or cpus <= 0:
        return
    for n in exp.factors["instances"]:
        k = instances_per_host(exp, n, host)
        if "instance" in exp.factors["pinning"] and k > cpus:
            raise SpecError(f"factors.pinning: 'instance' gives each of the {k} instances on host {host!r} "
                            f"(factors.instances {n}) its own CPU set, but the host has {cpus} CPU(s); "
                            f"allowed: instances up to {cpus * max(1, len(exp.topology.hosts))}, or pinning none/numa")
    if "numa" in exp.factors["pinning"] and numa_nodes < 1:
        raise SpecError(f"factors.pinning: 'numa' needs NUMA nodes on host {host!r}; allowed: none, instance")


def check_media(exp: Experiment, media_names: Iterable[str], host: str) -> None:
    names = sorted(media_names)
    for factor, levels in (("medium", exp.factors["medium"]),
                           ("log_medium", [m for m in exp.factors["log_medium"] if m != "same"]),
                           ("follower_medium", [m for m in exp.factors["follower_medium"] if m != "same"])):
        for m in levels:
            if m not in names:
                raise SpecError(f"factors.{factor}: {m!r} is not defined on host {host!r}; "
                                f"its media are: {', '.join(names) or '(none)'}")
