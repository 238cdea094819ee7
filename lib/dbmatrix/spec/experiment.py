"""Experiment specs: validation with clear errors, and expansion into cells and a seeded run order.

Pure logic: no files are read here except through :func:`load_spec` (YAML text in, dataclasses out).

The parts live beside it: :mod:`.cells` (cells, runs, datasets), :mod:`.designs` (full, fractional
and crossed designs), :mod:`.topology` (standalone, Galera, instances, CPU placement) and :mod:`.options`
(server options); their public names, and the factor registry's, stay importable from here, where most of
the code imports them from.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from dbmatrix import engines

# The spec's public names stay importable from here (most of the code imports them from this module).
from dbmatrix.spec.cells import (
    WHY_NOT,  # noqa: F401
    Cell,
    DatasetKey,
    PlannedRun,
    Workload,
    check_combination,
)
from dbmatrix.spec.designs import (
    DESIGNS,
    FRACTION_GENERATORS,
    check_crossed,
    check_fractional,
    crossed_design_info,
    design_text,  # noqa: F401
    fractional_runs,
    half_fraction_runs,
    resolution,
)
from dbmatrix.spec.errors import SpecError, positive_int
from dbmatrix.spec.factors import (  # noqa: F401 (re-exported)
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
from dbmatrix.spec.options import HARNESS_OPTIONS, check_option_text, option_value
from dbmatrix.spec.sentinel import Sentinel, parse_sentinel, sentinel_cell_index
from dbmatrix.spec.topology import (  # noqa: F401
    CALIBRATION_LIMITS,
    MAX_GALERA_NODES,
    MAX_INSTANCES_PER_HOST,
    PLACEMENT_TOOLS,
    SST_METHODS,
    TOPOLOGIES,
    Calibration,
    CpuPlacement,
    Topology,
    check_builds,
    check_host_cpus,
    check_media,
    check_topology,
    instances_per_host,
    parse_placement,
    parse_topology,
)

# Workloads that share a table schema share prepared datasets.
# TPC-C a-strings: random (clause 4.3.2.2; lz4 cannot shrink them) or compressible (slices of one fixed
# string, see workload/lua/tpcc_lib.lua: lz4 about 3x, as seed 003's data compressed about 4x).
STRING_MODES = ("random", "compressible")
WORKLOAD_SCHEMAS = {**{w: "oltp" for w in WORKLOADS}, "tpcc": "tpcc"}
# Transaction isolation levels of the TPC-C workload (sysbench option --trx_level); the seed used RC.
ISOLATION_LEVELS = ("RC", "RR", "SER", "RU")
RAND_TYPES = ("uniform", "gaussian", "special", "pareto")
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
# When a study loads its datasets: "reuse" (the snapshot a host holds for the dataset key serves every later
# campaign: one load per host) or "per_campaign" (each campaign loads its datasets afresh, so campaigns share no
# snapshot: what independent replications need; the campaign record says which it was).
DATASET_LOADS = ("reuse", "per_campaign")
DEFAULT_DATASET_LOAD = "reuse"
TOP_LEVEL_KEYS = (
    "experiment", "description", "workload", "factors", "repetitions", "seed", "warmup_s",
    "measure_s", "server_options", "baseline", "run_timeout_s", "design", "comparisons", "noise",
    "cpu_placement", "topology", "stop_mode", "cache_basis", "claims", "dataset_load", "campaigns",
)


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


# Campaigns as looks (issue 39): a study whose design runs campaigns at an allocation (spec ``campaigns:``) is
# judged after every campaign at the level of the exact group-sequential boundary of its look, alpha spent over
# at most this many campaigns (the registered rule: dbmatrix.analyse.claims.verdicts.RULE["looks"]). Here, so that
# the runner's campaign choice and the rule read one number.
MAX_CAMPAIGNS = 6
# A run measured at least this long is a long run: a soak study's (analyse.soak), judged within the run, and
# bracketed by the platform probe (run.probes), since nothing is randomised within one run.
LONG_RUN_S = 600


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
    # the claim ids the study is meant to decide (empty: every registry claim its kind and levels can test);
    # checked against the registry by dbmatrix.analyse.claims.needs.claims_for
    claims: tuple[str, ...] = ()
    dataset_load: str = DEFAULT_DATASET_LOAD
    # runs per cell in every campaign after the first (``campaigns: {repetitions: N}``); None: ``repetitions``.
    # The first campaign is the pilot whose variance components set this allocation (Kalibera-Jones,
    # dbmatrix.analyse.allocation); how many runs a campaign repeats does not change what a run measures, so
    # it stays out of the digest and a reference can go on with its next campaign.
    campaign_repetitions: int | None = None
    # the A/A sentinel run at the start and end of every campaign (``campaigns: {sentinel: ...}``,
    # dbmatrix.spec.sentinel); outside the design and the digest, like the repetitions above
    campaign_sentinel: Sentinel | None = None

    def sentinel_cell(self, campaign: int) -> Cell | None:
        """The cell `campaign`'s sentinel runs (None: the spec has none, or not yet in this campaign)."""
        s = self.campaign_sentinel
        if s is None or not s.runs_in(campaign):
            return None
        cells = self.cells()
        return cells[sentinel_cell_index(s, cells, self.varied_factors(), self.factors)]

    @property
    def campaign_maximum(self) -> int | None:
        """The registered maximum of campaigns, for a study judged by campaign looks (None: no such limit)."""
        return MAX_CAMPAIGNS if self.campaign_repetitions is not None else None

    def repetitions_in(self, campaign: int) -> int:
        """Runs per cell of `campaign`: the spec's ``repetitions`` in the first (the pilot), its
        ``campaigns.repetitions`` in every later one."""
        return self.repetitions if campaign <= 1 or self.campaign_repetitions is None else self.campaign_repetitions

    @property
    def fresh_datasets(self) -> bool:
        """Each campaign loads its datasets afresh (``dataset_load: per_campaign``)."""
        return self.dataset_load == "per_campaign"

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
                          self.workload.strings if schema == "tpcc" else "random", cell.server_build)

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
            for block in range(1, self.repetitions_in(campaign) + 1):
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
        if self.claims:
            d["claims"] = list(self.claims)
        else:
            del d["claims"]
        if self.dataset_load == DEFAULT_DATASET_LOAD:  # added with per-campaign loads: digests stay the same
            del d["dataset_load"]
        del d["campaign_repetitions"], d["campaign_sentinel"]
        campaigns: dict[str, Any] = {}
        if self.campaign_repetitions is not None:
            campaigns["repetitions"] = self.campaign_repetitions
        if self.campaign_sentinel is not None:
            campaigns["sentinel"] = self.campaign_sentinel.to_dict()
        if campaigns:
            d["campaigns"] = campaigns
        return d

    def digest(self) -> str:
        """The spec's digest, which binds results to it; which claims the study decides and how many runs
        later campaigns repeat do not change what is measured, so they are left out."""
        d = {k: v for k, v in self.to_dict().items() if k not in ("claims", "campaigns")}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def _levels(name: str, raw: Any) -> tuple[Any, ...]:
    """The levels of factor `name` (one level or a list), each checked and normalised by the factor's
    registry entry (dbmatrix.spec.factors); none, or one listed twice, is an error. Checks across factors
    (block sizes and compressions per engine, Galera-only factors, open-loop levels) are made on the whole
    spec: :func:`check_combination`, :func:`check_topology`, :func:`parse_experiment`."""
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
    tables = positive_int(raw, "tables", 1 if tpcc_only else 4, where="workload.")
    size = positive_int(raw, "table_size", 100_000, where="workload.")
    warehouses = positive_int(raw, "warehouses", 1, where="workload.")
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
        check_fractional(factors)
    if design == "crossed":
        check_crossed(factors)
    repetitions = positive_int(raw, "repetitions", 3)
    exp = Experiment(
        name=name,
        description=str(raw.get("description", "")),
        workload=workload,
        factors=factors,
        repetitions=repetitions,
        seed=seed,
        warmup_s=positive_int(raw, "warmup_s", 10, minimum=0),
        measure_s=positive_int(raw, "measure_s", 30),
        server_options={str(k).replace("-", "_"): option_value(v) for k, v in options.items()},
        baseline=baseline,
        run_timeout_s=None if timeout is None else positive_int(raw, "run_timeout_s", None),
        design=design,
        comparisons=_parse_comparisons(raw.get("comparisons"), factors),
        noise=_parse_noise(raw.get("noise"), repetitions),
        cpu_placement=parse_placement(raw.get("cpu_placement")),
        topology=parse_topology(raw.get("topology")),
        stop_mode=_parse_stop_mode(raw.get("stop_mode", DEFAULT_STOP_MODE)),
        cache_basis=_parse_cache_basis(raw.get("cache_basis", DEFAULT_CACHE_BASIS)),
        claims=_parse_claims(raw.get("claims")),
        dataset_load=_parse_dataset_load(raw.get("dataset_load", DEFAULT_DATASET_LOAD)),
        campaign_repetitions=_parse_campaigns(raw.get("campaigns")),
        campaign_sentinel=parse_sentinel((raw.get("campaigns") or {}).get("sentinel")),
    )
    check_topology(exp)
    check_group_commit(exp)
    if "tpcc" in factors["workload"]:
        check_isolation(workload.isolation, factors["engine"])
    exp.cells()  # impossible combinations fail here, at plan time
    exp.sentinel_cell(exp.campaign_sentinel.from_campaign if exp.campaign_sentinel else 1)  # and the sentinel
    return exp


def _parse_campaigns(raw: Any) -> int | None:
    """``campaigns: {repetitions: N, sentinel: ...}``: the runs per cell of every campaign after the first
    (the sentinel: :func:`dbmatrix.spec.sentinel.parse_sentinel`)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw or not set(raw) <= {"repetitions", "sentinel"}:
        raise SpecError(f"campaigns: {raw!r} must be a mapping with the keys repetitions (runs per cell in every "
                        "campaign after the first, the pilot, which runs `repetitions`) and/or sentinel (an A/A "
                        "cell run at the start and end of every campaign)")
    if "repetitions" not in raw:
        return None
    return positive_int(raw, "repetitions", None, where="campaigns.")


def check_group_commit(exp: Experiment) -> None:
    """A group-commit wait only means something with the binary log on (``server_options.log_bin``)."""
    binlog = str(exp.server_options.get("log_bin", "")).strip().upper() not in ("", "0", "OFF")
    if any(exp.factors["group_commit"]) and not binlog:
        raise SpecError("factors.group_commit: a wait above 0 groups binary-log commits, but the binary log is "
                        "off; set server_options.log_bin (and sync_binlog: 1, as seed 001) or keep group_commit 0")


def check_isolation(isolation: str, engine_levels: Sequence[str]) -> None:
    """Every engine of the spec runs the TPC-C workload's isolation level (each engine's `tpcc_isolation`)."""
    for name in engine_levels:
        e = engines.engine(name)
        if e.tpcc_isolation is not None and isolation not in e.tpcc_isolation:
            raise SpecError(f"workload.isolation: {isolation} is not supported by {e.title}; allowed with "
                            f"engine {e.name}: {', '.join(e.tpcc_isolation)}")


def _choice(raw: Any, field: str, what: str, allowed: Sequence[str], meaning: str) -> str:
    """A top-level key taking one of `allowed` words; the error names the field, the values and what they mean."""
    if raw not in allowed:
        raise SpecError(f"{field}: {raw!r} is not {what}; allowed: {', '.join(allowed)} ({meaning})")
    return str(raw)


def _parse_stop_mode(raw: Any) -> str:
    return _choice(raw, "stop_mode", "a stop mode", STOP_MODES, "kill: SIGKILL the servers after the measured "
                   "window, their datadirs are thrown away anyway")


def _parse_claims(raw: Any) -> tuple[str, ...]:
    """The spec's ``claims:``: a list of claim ids (checked against the registry at plan time, by
    dbmatrix.analyse.claims.needs.claims_for: the spec layer does not know the claims)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw or not all(isinstance(c, str) and c for c in raw):
        raise SpecError(f"claims: {raw!r} must be a non-empty list of claim ids (the claim registry's, e.g. "
                        "lzFourTps), or left out: every claim the study's kind and levels can test")
    dupes = sorted({c for c in raw if raw.count(c) > 1})
    if dupes:
        raise SpecError(f"claims: {', '.join(dupes)} listed twice")
    return tuple(raw)


def _parse_cache_basis(raw: Any) -> str:
    return _choice(raw, "cache_basis", "a cache basis", CACHE_BASES, "logical: cache_pct of the tables' "
                   "uncompressed size, what the buffer pool or block cache holds; physical: of their du size on "
                   "the medium")


def _parse_dataset_load(raw: Any) -> str:
    return _choice(raw, "dataset_load", "allowed", DATASET_LOADS, "reuse: a host's snapshot of a dataset serves every "
                   "campaign; per_campaign: each campaign loads its datasets afresh")


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


def load_spec(path: str | Path) -> Experiment:
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"spec: file {str(p)!r} does not exist")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(f"spec: {p} is not valid YAML: {exc}") from None
    return parse_experiment(raw or {})
