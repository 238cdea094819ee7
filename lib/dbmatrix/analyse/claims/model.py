"""The claim registry's types: a seed's claim, the premises it depended on, and the evidence a study offers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
from dbmatrix.analyse.hosts import hosts_of, pooling_allowed

# The equivalence margin of "no effect" per metric, declared before the data: a ratio within 1/(1+m) .. 1+m,
# a difference (points) within -m .. m: the closed zone Z of the verdict rule. A claim of an effect claims only
# the part of its band beyond Z (an interval inside Z disagrees with it), and a "no effect" claim's band is Z.
# Sizes are measured, not sampled: a tight margin.
MARGINS: dict[str, float] = {
    "tps": 0.05, "p95_ms": 0.05, "read_kb_per_txn": 0.05, "write_kb_per_txn": 0.05, "tps_ratio": 0.05,
    "lat_avg_ratio": 0.05, "lat_p95_ratio": 0.05, "data_physical_bytes": 0.005, "fc_paused_pct_points": 5.0,
    "steady": 0.0, "scale_saturation": 0.05, "scale_p95_doubling": 0.05, "scale_peak_16_8": 0.05,
    "scale_stability": 0.05, "p99_ms": 0.05, "mysqld_cpu_us_per_txn": 0.05, "host_iowait_pct": 2.0,
}
DEFAULT_MARGIN = 0.05
BOUNDS = ("", "upper", "lower")  # Claim.bound
COMBINES = ("all", "any", "largest", "primary")  # Claim.combine


def no_effect(metric: str, kind: str = "ratio") -> tuple[float, float]:
    """The band of "no effect" for `metric`: the equivalence zone of its margin."""
    m = MARGINS.get(metric, DEFAULT_MARGIN)
    return (-m, m) if kind == "difference" else (round(1 / (1 + m), 6), 1 + m)


def about(value: float, tolerance: float, kind: str = "ratio") -> tuple[float, float]:
    """The band of "about `value`": the effect (value - 1 for a ratio, the value itself for a difference)
    plus or minus `tolerance` in the same units (0.05 = 5 points of a ratio's effect)."""
    return (value - tolerance, value + tolerance)


@dataclass(frozen=True)
class Premise:
    """A condition the seed's result depended on, checked from our data: `kind` names a registered check
    (:data:`dbmatrix.analyse.claims.premises.PREMISES`, where each kind says what it measures)."""

    kind: str
    threshold: float
    text: str  # what the seed had, in words (plain text)


@dataclass(frozen=True)
class PremiseCheck:
    """A premise measured on the data: ``met`` True/False when its interval lies on one side of the
    threshold, None when the data cannot tell; ``uncertain`` (with ``met`` None) when the interval
    straddles the threshold. A premise not met or uncertain leaves the claim "not tested"
    (:func:`dbmatrix.analyse.claims.verdicts.with_premises`)."""

    met: bool | None  # None: the data cannot tell (said in `value`)
    value: str  # the measured value, in words
    uncertain: bool = False

    @property
    def state(self) -> str:
        """met / not met / uncertain / not checked."""
        if self.met is True:
            return "met"
        if self.met is False:
            return "not met"
        return "uncertain" if self.uncertain else "not checked"


@dataclass(frozen=True)
class SeedConditions:
    """The conditions the seed's result was measured under, as the seed states them (data, not prose: a
    claim's digest covers them, :mod:`.registration`), and how this repository reproduces them.

    ``cache_pct``: the seed's cache as a percentage of its data, as a range over its datasets (None: not
    said, or no cache involved); ``threads``: the seed's client threads (lowest, highest); ``threads_here``:
    that range scaled to this repository's 2-vCPU machine, by the rule in ``thread_scaling``;
    ``reproduction``: how the paper profile reproduces the conditions, or why it cannot (our note, not the
    seed's: left out of the digest)."""

    workload: str  # what the seed ran: "sysbench-TPCC, 5000 warehouses, read committed"
    engine: str  # "MyRocks (Percona Server 5.7.22)"
    access: str  # the key distribution: sysbench --rand-type (uniform, pareto, special), or "" when not said
    cache: str  # the cache against the data, in the seed's numbers
    cache_pct: tuple[float, float] | None  # the cache as % of the data (lowest, highest over the datasets)
    durability: str  # binlog, sync settings, as stated
    threads: tuple[int, int]  # the seed's client threads (lowest, highest)
    threads_here: tuple[int, int]  # scaled to this machine
    thread_scaling: str  # the rule: "threads per logical CPU kept: 48 on 48 -> 2 on 2"
    hardware: str  # the seed's machine(s), short
    bottleneck: str  # what limited the seed's result, as the seed says (or "not said")
    reproduction: str  # how this repository reproduces it, or why it cannot (our note)


@dataclass(frozen=True)
class Claim:
    id: str  # letters only: used in macro names (claim<Id>Verdict ...)
    seed: str  # "003"
    where: str  # "slide 13"
    text: str  # the seed's claim, short, in English
    metric: str
    band: tuple[float, float]  # the values of the estimate the claim asserts
    # "direction": an effect on one side of the null, "up to" band[1]; "about": two-sided around a value
    # (band = value -+ the declared tolerance); "within": no (or a bounded) effect, the band is the claim
    test: str = "direction"
    kind: str = "ratio"  # "ratio" (a/b) | "difference" (a - b) | "share"
    factor: str | None = None
    a: Any = None  # level, or "min", "max", "second-max", "emulated:pmem", "native"
    b: Any = None
    at: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ("storage",)  # study kinds that can test it, preferred first
    stand_in: str = ""  # what stands in for the seed's condition (said in the table)
    not_tested: str = ""  # set: never testable here, for this reason
    premises: tuple[Premise, ...] = ()
    # factors the claim is judged at every level of (fixed in the registry, never chosen by the data); the
    # factors neither in `at` nor here are averaged over, and only where the design identifies that. A factor
    # in `per` that is also the compared factor, or held in `at`, with a family of levels ("emulated:pmem":
    # every PMEM mode) is judged at every level of that family only (slide 15's "persistent memory": fsdax
    # and sector mode, each against NVMe)
    per: tuple[str, ...] = ()
    margin: float | None = None  # equivalence margin of no effect; None: the metric's (catalogue.MARGINS)
    # a stand-in that bounds the real thing: "upper" (the stand-in's ratio is at least the real one: RAM for
    # PMEM, faster than PMEM), "lower" (at most), "" (none): a one-sided verdict (verdicts.verdict_reason)
    bound: str = ""
    # how the conditions (the levels of `per`, a measured quantity's pairs) combine into one verdict: "all",
    # "any", "largest" (the seed's "up to X" over its conditions) or "primary" (`primary`'s verdict, the
    # others as sensitivity); verdicts.combine
    combine: str = "all"
    primary: Any = None  # the level of the `per` factor that is primary (combine "primary")
    # the seed's own words, verbatim and short, in the seed's language (the registry's source: docs/registry.md)
    quote: str = ""
    conditions: SeedConditions | None = None  # as the seed had them (None: a further finding of ours)
    # a trend of the ratio a/b along another factor, (factor, high level, low level): the estimate is the
    # ratio a/b at the high level over the ratio at the low level (:mod:`dbmatrix.analyse.trend`); None: a/b
    trend: tuple[str, Any, Any] | None = None

    def __post_init__(self) -> None:
        if self.bound not in BOUNDS:
            raise ValueError(f"claim {self.id}: bound {self.bound!r}; allowed: {', '.join(map(repr, BOUNDS))}")
        if self.combine not in COMBINES:
            raise ValueError(f"claim {self.id}: combine {self.combine!r}; allowed: {', '.join(COMBINES)}")
        if (self.combine == "primary") != (self.primary is not None):
            raise ValueError(f"claim {self.id}: combine 'primary' and a primary level go together")

    @property
    def null(self) -> float:
        return 0.0 if self.kind == "difference" else 1.0

    @property
    def equivalence(self) -> float:
        """The claim's equivalence margin of no effect (declared, else the metric's)."""
        return self.margin if self.margin is not None else MARGINS.get(self.metric, DEFAULT_MARGIN)


@dataclass
class Evidence:
    """What a study offers the claims: its processed runs (with a ``campaign`` column when it has several
    campaigns), for Galera its effect table and runs, for scale-out its own tables, and per campaign the
    tables that are not recomputed from the runs here (``campaign_extra[k]``)."""

    experiment: str
    kind: str
    runs: pd.DataFrame
    level_order: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    replication: pd.DataFrame | None = None
    host_check: pd.DataFrame | None = None  # processed/hosts.csv (several hosts only)
    extra: Mapping[str, pd.DataFrame] = field(default_factory=dict)  # a scale-out study's own tables
    design: Mapping[str, Any] | None = None  # Experiment.design_info()
    host_cpus: Mapping[str, int] = field(default_factory=dict)  # host -> logical CPUs
    campaign_extra: Mapping[int, Mapping[str, pd.DataFrame]] = field(default_factory=dict)
    campaign_records: Sequence[Mapping[str, Any]] = ()  # processed/campaigns.json (analyse.campaign_records)
    campaign_looks: bool = False  # judged after every campaign at its look's level (verdicts.RULE["looks"])
    registered: tuple[str, ...] = ()  # the claims its spec names (claims:): it judges them before studies that could

    def hosts(self) -> list[str]:
        return hosts_of(self.runs)

    def campaigns(self) -> list[int]:
        return campaigns_of(self.runs)

    def campaign(self, k: int) -> Evidence:
        """The evidence of campaign `k` alone."""
        runs = self.runs[campaign_column(self.runs) == k] if not self.runs.empty else self.runs
        extra = {**self.extra, **self.campaign_extra.get(k, {})}
        repl = extra.get("replication-effects", self.replication)
        return replace(self, runs=runs, extra=extra, replication=repl, campaign_extra={})

    def for_claims(self) -> tuple[Evidence, str]:
        """The runs claims are judged on, and what the claims table says about the hosts: all runs
        ("pooled: h1, h2") when the host check allows pooling (:mod:`dbmatrix.analyse.hosts`), else the
        runs of one host class ("class big: h1"; the class with the most runs, ties by name; a host
        without a declared class is its own class). One host: all runs, ""."""
        hosts = self.hosts()
        if len(hosts) < 2:
            return self, ""
        if pooling_allowed(self.host_check if self.host_check is not None else pd.DataFrame()):
            return self, "pooled: " + ", ".join(hosts)
        cls = (self.runs["host_class"].where(self.runs["host_class"].notna(), self.runs["host"]).astype(str)
               if "host_class" in self.runs.columns else self.runs["host"].astype(str))
        sizes = cls.value_counts()
        best = sorted(sizes.index, key=lambda c: (-int(sizes[c]), c))[0]
        runs = self.runs[cls == best]
        members = ", ".join(sorted(str(h) for h in runs["host"].unique()))
        return replace(self, runs=runs, host_check=None), f"class {best}: {members}"


