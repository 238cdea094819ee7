"""The seeds' claims beside what our runs measured: one registry, one verdict rule for the whole paper.

Each :class:`Claim` names a seed, a short paraphrase of what it says, and what to compare: a metric, a
factor's two levels (``a`` against ``b``, in the direction the seed states its result), the levels of other
factors the seed held (``at``), the band of values the claim asserts for the estimate (a ratio a/b, a
difference a - b in points, or a share), and its **premises**: the conditions the seed's result depended on,
checked from our data (:class:`Premise`). The estimate and its 95 % CI come from the data (:func:`estimate`):

1. runs restricted to the claim's conditions, if only the compared factor still varies there: the two
   cells' repetitions, Welch's t on log values (ratio of geometric means);
2. otherwise the factorial model of log(metric) (main effects + two-way interactions; :mod:`contrasts`):
   the contrast at the claim's conditions. A factor the claim leaves free is averaged over only when its
   interaction with the compared factor is not significant; otherwise the claim is judged per level of that
   factor (:class:`dbmatrix.analyse.contrasts.DependsOn`). The basis says what a fractional design aliases;
3. dataset sizes (one dataset per engine x page x compression): the geometric mean of the matched pairs'
   ratios, the "interval" being their range; shares (tested runs shown stable by the steady-state test,
   :func:`dbmatrix.analyse.contrasts.steady_share`): a Wilson interval widened to bound the undetermined runs;
   the replication study (Galera) and the scale-out study: their own estimators.

**Campaigns** (one run of a study's matrix on one boot): every claim is estimated within each campaign and,
with two or more, pooled so that the interval contains the variation between campaigns (campaign-level cell
means for the model contrasts, a two-stage t interval with K-1 df otherwise; :mod:`dbmatrix.analyse.campaigns`).
With one campaign the basis says "within one campaign": such an interval leaves out the variation between
runs of the matrix.

**Verdict rule** (:func:`verdict`, :func:`judge`), with [L, U] the 95 % CI, e the estimate, [lo, hi] the
claimed band and the null value 1 for ratios, 0 for differences:

- **premise not met**: a premise of the claim fails on our data (the measured value is given); the estimate
  is still shown, but it does not test the seed's result.
- ``direction`` claims (an effect in a direction, "up to" / "about" a size): **agree** when [L, U] excludes
  the null on the claimed side *and* e lies inside the band; **disagree** when [L, U] misses the band
  entirely; **inconclusive** otherwise.
- ``within`` claims (no or a bounded effect): **agree** when [L, U] lies inside the band; **disagree** when it
  misses the band entirely; **inconclusive** otherwise.
- with two or more campaigns, **agree** also needs every campaign's own estimate inside the band, and
  **disagree** every campaign's own estimate outside it; else **inconclusive** ("campaigns differ").
- **not tested**: no study of the build varies the factor at the needed levels, or the hardware the claim
  is about does not exist here (the reason is given).

Multiplicity: each claim is a separate question fixed in advance by a seed; each is judged by its own 95 %
interval, without a correction across claims (a reader should expect about one in twenty intervals to miss
its true value).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.campaign_model import ONE_CAMPAIGN, alias_note, campaign_column, campaigns_of
from dbmatrix.analyse.campaigns import pool_campaign_estimates
from dbmatrix.analyse.contrasts import (
    DependsOn,
    Estimate,
    NotTestable,
    dataset_ratio,
    ratio_estimate,
    replication_estimate,
    steady_share,
)
from dbmatrix.analyse.hosts import hosts_of, pooling_allowed
from dbmatrix.analyse.replication import pressured_setting, setting_runs
from dbmatrix.analyse.scaleout import (
    doubling_estimate,
    peak_ratio_estimate,
    saturation_estimate,
    stability_estimate,
)

VERDICTS = ("agree", "disagree", "inconclusive", "premise not met", "not tested")


@dataclass(frozen=True)
class Premise:
    """A condition the seed's result depended on, checked from our data.

    kinds: ``fc_paused`` (flow control paused the nodes >= threshold % of the time at the lowest applier
    level), ``compresses`` (the claim's engine's dataset under lz4 is at most 1/threshold of the
    uncompressed one), ``saturated`` (the host's CPUs >= threshold busy at the lower compared thread level),
    ``cache_below_data`` (at the claim's lowest cache level the cache holds less than the logical data:
    with uniform access the working set is all of it)."""

    kind: str
    threshold: float
    text: str  # what the seed had, in words (plain text)


@dataclass(frozen=True)
class PremiseCheck:
    met: bool | None  # None: the data cannot tell (said in `value`)
    value: str  # the measured value, in words


@dataclass(frozen=True)
class Claim:
    id: str  # letters only: used in macro names (claim<Id>Verdict ...)
    seed: str  # "003"
    where: str  # "slide 13"
    text: str  # the seed's claim, short, in English
    metric: str
    band: tuple[float, float]  # the values of the estimate the claim asserts
    test: str = "direction"  # "direction" | "within"
    kind: str = "ratio"  # "ratio" (a/b) | "difference" (a - b) | "share"
    factor: str | None = None
    a: Any = None  # level, or "min", "max", "second-max", "emulated:pmem", "native"
    b: Any = None
    at: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ("storage",)  # study kinds that can test it, preferred first
    stand_in: str = ""  # what stands in for the seed's condition (said in the table)
    not_tested: str = ""  # set: never testable here, for this reason
    premises: tuple[Premise, ...] = ()

    @property
    def null(self) -> float:
        return 0.0 if self.kind == "difference" else 1.0


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


# ============================================================================ premises

FC_PAUSED = Premise("fc_paused", 20.0, "flow control paused the nodes at least 20 % of the time with one "
                    "applier (the seed: 64 %)")
COMPRESSES = Premise("compresses", 2.0, "the data compresses at least 2x under lz4 (the seed: about 4x)")
SATURATED = Premise("saturated", 0.90, "the host is saturated (CPUs at least 90 % busy) at the lower compared "
                    "thread count")
CACHE_BELOW = Premise("cache_below_data", 1.0, "the cache at the low level is smaller than the working set "
                      "(uniform access: all the data)")


# ============================================================================ the claims

CLAIMS: tuple[Claim, ...] = (
    Claim("blockSmallCache", "003", "slide 13",
          "4\\,KB blocks give up to 10\\,\\% more throughput than 16\\,KB on PMEM without a block cache",
          "tps", (1.0, 1.10), factor="block_size", a="4k", b="16k",
          at={"engine": "myrocks", "cache_pct": "min", "medium": "emulated:pmem-fsdax"}, sources=("tpcc", "storage"),
          stand_in="lowest cache level for a disabled block cache", premises=(CACHE_BELOW,)),
    Claim("blockLargeCache", "003", "slide 13",
          "with the block cache enabled, 4\\,KB and 16\\,KB blocks differ negligibly",
          "tps", (0.95, 1.05), test="within", factor="block_size", a="4k", b="16k",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage")),
    Claim("blockSize", "003", "slide 13", "4\\,KB blocks may grow the dataset by up to 10\\,\\%",
          "data_physical_bytes", (1.0, 1.10), factor="block_size", a="4k", b="16k", at={"engine": "myrocks"},
          sources=("tpcc", "storage")),
    Claim("lzFourTps", "003", "slide 14", "lz4 costs almost no throughput (PMEM)",
          "tps", (0.95, 1.05), test="within", factor="compression", a="lz4", b="none",
          at={"engine": "myrocks", "medium": "emulated:pmem-fsdax"}, sources=("tpcc", "storage"),
          premises=(COMPRESSES,)),
    Claim("lzFourSize", "003", "slide 14", "the lz4 dataset is 4$\\times$ smaller than the uncompressed one",
          "data_physical_bytes", (3.0, 5.0), test="within", factor="compression", a="none", b="lz4",
          at={"engine": "myrocks"}, sources=("tpcc", "storage")),
    Claim("lzFourReads", "003", "slide 14", "lz4 cuts the read rate by up to 2.5$\\times$",
          "read_kb_per_txn", (1.0, 2.5), factor="compression", a="none", b="lz4",
          at={"engine": "myrocks"}, sources=("tpcc", "storage"), premises=(COMPRESSES,),
          stand_in="device KiB read per transaction (media without a block device, tmpfs, have no reads to "
                   "count)"),
    Claim("lzFourWrites", "003", "slide 14", "lz4 cuts the write rate by up to 2.5$\\times$",
          "write_kb_per_txn", (1.0, 2.5), factor="compression", a="none", b="lz4", at={"engine": "myrocks"},
          sources=("tpcc", "storage"), premises=(COMPRESSES,)),
    Claim("pmemNoCache", "003", "slide 15",
          "without a block cache, PMEM (fsdax) outperforms NVMe by up to 4$\\times$",
          "tps", (1.0, 4.0), factor="medium", a="emulated:pmem-fsdax", b="native",
          at={"engine": "myrocks", "cache_pct": "min"}, sources=("tpcc", "storage"),
          stand_in="tmpfs (RAM) for PMEM in fsdax mode, the root disk for NVMe, the engine's minimum cache "
                   "for no block cache", premises=(CACHE_BELOW,)),
    Claim("pmemCache", "003", "slide 15",
          "with the block cache enabled, PMEM's (fsdax) advantage over NVMe is up to 25\\,\\%",
          "tps", (1.0, 1.25), factor="medium", a="emulated:pmem-fsdax", b="native",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage"),
          stand_in="tmpfs (RAM) for PMEM in fsdax mode, the root disk for NVMe"),
    Claim("sectorNoCache", "003", "slide 15",
          "without a block cache, PMEM in sector mode outperforms NVMe by up to 4$\\times$",
          "tps", (1.0, 4.0), factor="medium", a="emulated:pmem-sector", b="native",
          at={"engine": "myrocks", "cache_pct": "min"}, sources=("tpcc", "storage"),
          stand_in="XFS on a RAM-backed loop device for PMEM in sector mode (a block device with 4 KiB "
                   "sectors), the root disk for NVMe, the engine's minimum cache for no block cache",
          premises=(CACHE_BELOW,)),
    Claim("sectorCache", "003", "slide 15",
          "with the block cache enabled, PMEM's (sector mode) advantage over NVMe is up to 25\\,\\%",
          "tps", (1.0, 1.25), factor="medium", a="emulated:pmem-sector", b="native",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage"),
          stand_in="XFS on a RAM-backed loop device for PMEM in sector mode, the root disk for NVMe"),
    Claim("bufferPool", "001", "section 3",
          "throughput grows with the InnoDB buffer pool share of the data (25 to 100\\,\\%)",
          "tps", (1.0, math.inf), factor="cache_pct", a="max", b="min", at={"engine": "innodb"},
          sources=("threads", "storage"), premises=(CACHE_BELOW,)),
    Claim("threadsScale", "001", "section 3", "throughput rises with client threads (8 to 128)",
          "tps", (1.0, math.inf), factor="threads", a="max", b="min", sources=("threads",)),
    Claim("remoteNvme", "001", "section 3.1",
          "NVMe pooled over InfiniBand outperforms local NVMe, less so at high concurrency",
          "tps", (1.0, math.inf),
          not_tested="no network block storage here (no nvme-tcp/rdma, nbd, iSCSI target, NFS server or netem; "
                     "FUSE over SSH would measure itself); inventories/seed001-remote.yaml runs it on real hosts"),
    Claim("applierPause", "002", "flow-control charts",
          "16 applier threads cut flow-control pauses (from 64\\,\\% to 20\\,\\% of the time)",
          "fc_paused_pct_points", (-100.0, 0.0), kind="difference", factor="slave_threads", a="max", b="min",
          sources=("galera",), premises=(FC_PAUSED,)),
    Claim("applierTps", "002", "throughput chart", "16 applier threads give about 11\\,\\% more throughput",
          "tps_ratio", (1.0, 1.25), factor="slave_threads", a="max", b="min", sources=("galera",),
          premises=(FC_PAUSED,)),
    Claim("applierLatency", "002", "latency chart",
          "one applier thread has 27\\,\\% higher average latency than 16",
          "lat_avg_ratio", (1.0, 1.0 / 0.7), factor="slave_threads", a="min", b="max", sources=("galera",),
          premises=(FC_PAUSED,)),
    Claim("steadyRuns", "000", "per-second charts",
          "after warm-up, per-second throughput is stable over the run", "steady", (0.90, 1.0),
          test="within", kind="share", sources=("storage", "threads", "tpcc")),
    Claim("saturationTps", "000", "single-server scaling",
          "past saturation, more client threads add no throughput", "tps", (0.0, 1.05), test="within",
          factor="threads", a="max", b="second-max", at={"cache_pct": "max"}, sources=("threads",),
          stand_in="the largest cache level (the seed's data lived in memory)", premises=(SATURATED,)),
    Claim("saturationLatency", "000", "p95 latency chart", "past saturation, p95 latency grows with clients",
          "p95_ms", (1.0, math.inf), factor="threads", a="max", b="second-max", at={"cache_pct": "max"},
          sources=("threads",), stand_in="the largest cache level (the seed's data lived in memory)",
          premises=(SATURATED,)),
    # Seed 000 (NDB Cluster in a box), answered by the scale-out study with MariaDB instances standing in for
    # the seed's SQL front-ends (no NDB data nodes: each instance holds its own copy of the data).
    Claim("scaleSaturation", "000", "single-server scaling",
          "one front-end saturates: past its peak, more client threads add no throughput",
          "scale_saturation", (0.0, 1.05), test="within", sources=("scaleout",),
          stand_in="one MariaDB instance for one SQL node; premise: the tested thread counts go past the peak "
                   "(the saturation point is below the largest thread count)"),
    Claim("scaleDoubling", "000", "p95 latency chart",
          "doubling the front-ends doubles the clients that keep p95 under 0.5\\,ms",
          "scale_p95_doubling", (1.8, 2.2), sources=("scaleout",),
          stand_in="MariaDB instances for SQL nodes; premise: at both instance counts some but not all thread "
                   "counts keep the merged p95 under 0.5 ms (the interval comes from the neighbouring levels)"),
    Claim("scaleSixteen", "000", "multi-server scaling",
          "from 8 to 16 front-ends, peak throughput no longer doubles",
          "scale_peak_16_8", (0.0, 1.8), test="within", sources=("scaleout",),
          stand_in="MariaDB instances for SQL nodes; premise: 8 and 16 instances measured on a host with CPUs "
                   "for them (a 2-vCPU host stops at 2)"),
    Claim("scaleStable", "000", "per-second charts",
          "at the best setting, per-second throughput stays flat over the run",
          "scale_stability", (0.95, 1.05), test="within", sources=("scaleout",),
          stand_in="second-half over first-half per-second QPS of the best cell's runs; premise: the runs are "
                   "long enough for two halves of several seconds"),
    Claim("overProvisioning", "004", "tablespace file systems",
          "leaving 40\\,\\% of each NVMe unpartitioned keeps write throughput; a full drive halves it",
          "tps", (1.0, math.inf),
          not_tested="no NVMe here: loop devices have no flash translation layer to over-provision"),
    Claim("raidChunk", "004", "log file system",
          "RAID0 of two NVMe with 256\\,KB chunks carries 2--3\\,GB/s of sequential log writes",
          "tps", (1.0, math.inf),
          not_tested="no NVMe, and this kernel has no MD RAID (mdadm cannot create an array)"),
)


# ============================================================================ premise checks

MiB = 1024 * 1024


def _pct(x: float) -> str:
    return f"{x:.1f} %" if x < 10 else f"{x:.0f} %"


def _num_col(df: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(df[name], errors="coerce") if name in df.columns else pd.Series(np.nan, index=df.index)


def _level(ev: Evidence, factor: str, spec: Any) -> Any:
    from dbmatrix.analyse.contrasts import resolve_level

    return resolve_level(ev.runs, factor, spec)


def _at_runs(claim: Claim, ev: Evidence, **extra: Any) -> pd.DataFrame:
    """The runs at the claim's conditions (and the extra factor levels given)."""
    from dbmatrix.analyse.contrasts import resolve_level
    from dbmatrix.analyse.stats import level_key

    runs = ev.runs
    for f, v in {**claim.at, **extra}.items():
        if f not in runs.columns:
            continue
        lv = resolve_level(runs, f, v)
        runs = runs[runs[f].map(level_key) == level_key(lv)]
    return runs


def check_premise(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    """One premise of `claim` on the evidence it is judged on (never raises)."""
    try:
        return _check(p, claim, ev)
    except NotTestable as exc:
        return PremiseCheck(None, f"not checked: {exc}")


def _check(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    if p.kind == "fc_paused":
        runs = ev.extra.get("replication-runs")
        if runs is None or runs.empty or "fc_paused_pct" not in runs.columns:
            raise NotTestable("the replication study's runs table is missing")
        setting = _pressured(ev)
        runs = setting_runs(runs, setting)
        level = pd.to_numeric(runs["slave_threads"], errors="coerce")
        low = runs[level == level.min()]
        paused = float(_num_col(low, "fc_paused_pct").mean())
        where = "" if setting == "all" else f" ({setting.replace('_', ' ')})"
        return PremiseCheck(paused >= p.threshold,
                            f"flow control paused {_pct(paused)} of the time with {int(level.min())} "
                            f"applier{'s' if level.min() != 1 else ''}{where} (needs {p.threshold:g} %)")
    if p.kind == "compresses":
        engine = claim.at.get("engine")
        est = dataset_ratio(ev.runs, "compression", "lz4", "none", {"engine": engine} if engine else {})
        factor = 1 / est.estimate if est.estimate > 0 else math.inf
        return PremiseCheck(factor >= p.threshold,
                            f"lz4 shrinks the data {factor:.2f}x (needs {p.threshold:g}x)")
    if p.kind == "saturated":
        if claim.factor != "threads":
            raise NotTestable("the saturation premise needs a thread comparison")
        lv = [_level(ev, "threads", s) for s in (claim.a, claim.b)]
        lower = min(lv, key=float)
        runs = _at_runs(claim, ev, threads=lower)
        cpus = runs["host"].map(lambda h: ev.host_cpus.get(str(h), math.nan)) if "host" in runs else None
        if cpus is None or runs.empty or cpus.isna().all():
            raise NotTestable("the host's CPU count or the runs' CPU time is missing")
        busy = (_num_col(runs, "host_cpu_busy_s") / _num_col(runs, "window_s") / cpus.astype(float)).mean()
        if not np.isfinite(busy):
            raise NotTestable("no CPU time over the window in the runs")
        return PremiseCheck(bool(busy >= p.threshold),
                            f"CPUs {busy * 100:.0f} % busy at {lower} threads (needs {p.threshold * 100:.0f} %)")
    if p.kind == "cache_below_data":
        specs = (claim.a, claim.b) if claim.factor == "cache_pct" else (claim.at.get("cache_pct", "min"),)
        level = min((_level(ev, "cache_pct", s) for s in specs), key=float)  # the claim's low cache level
        runs = _at_runs(claim, ev, cache_pct=level)
        share = (_num_col(runs, "cache_bytes_effective") / _num_col(runs, "data_logical_bytes")).mean()
        if not np.isfinite(share):
            raise NotTestable("cache bytes or the logical data size are missing from the runs")
        logical = float(_num_col(runs, "data_logical_bytes").median()) / MiB
        return PremiseCheck(bool(share < p.threshold),
                            f"cache {level} % = {share * 100:.0f} % of the {logical:.0f} MiB of logical data "
                            "(needs under 100 %)")
    raise ValueError(f"premise kind {p.kind!r}; allowed: fc_paused, compresses, saturated, cache_below_data")


# ============================================================================ estimates


def estimate(claim: Claim, ev: Evidence, *, refuse_interacting: bool = True) -> Estimate:
    """The claim's estimate from one study's evidence (all its campaigns pooled when it has several;
    raises NotTestable with the reason, DependsOn when an interacting factor would be averaged over and
    `refuse_interacting`: the pooled estimate decides whether a claim is split, each campaign's own
    estimate follows it)."""
    if claim.kind == "share":
        return steady_share(ev.runs)
    if ev.kind == "galera" and claim.metric in ("fc_paused_pct_points", "tps_ratio", "lat_avg_ratio",
                                                "lat_p95_ratio"):
        if ev.replication is None or ev.replication.empty:
            raise NotTestable("the replication study's effect table is missing")
        est = replication_estimate(ev.replication, claim.metric, _pressured(ev))
        return _orient(claim, est) if claim.a == "min" else est
    if ev.kind == "scaleout" and claim.metric.startswith("scale_"):
        return _scaleout_estimate(claim.metric, ev.extra)
    if claim.factor is None:
        raise NotTestable("no factor to compare")
    if claim.metric == "data_physical_bytes":
        return dataset_ratio(ev.runs, claim.factor, claim.a, claim.b, claim.at)
    runs = ev.runs
    if "rate_fraction" in runs.columns:
        runs = runs[pd.to_numeric(runs["rate_fraction"], errors="coerce").fillna(0) == 0]
    return ratio_estimate(runs, claim.metric, claim.factor, claim.a, claim.b, claim.at,
                          level_order=ev.level_order, design=ev.design, refuse_interacting=refuse_interacting)


def _pressured(ev: Evidence) -> str:
    """The Galera setting the seed's claims are judged at: where flow control paused most with one applier
    (:func:`dbmatrix.analyse.replication.pressured_setting`)."""
    runs = ev.extra.get("replication-runs")
    return pressured_setting(runs) if runs is not None else "all"


def _orient(claim: Claim, est: Estimate) -> Estimate:
    """The replication table compares the highest level with the lowest; a claim stated the other way
    round gets the reciprocal (ratios) or the negation (differences)."""
    if claim.kind == "difference":
        return replace(est, estimate=-est.estimate, ci_lo=-est.ci_hi, ci_hi=-est.ci_lo,
                       compared=_swap(est.compared))
    inv = [1 / x if x else math.inf for x in (est.estimate, est.ci_hi, est.ci_lo)]
    return replace(est, estimate=inv[0], ci_lo=inv[1], ci_hi=inv[2], compared=_swap(est.compared))


def _swap(compared: str) -> str:
    head, _, levels = compared.rpartition(" ")
    a, _, b = levels.partition("/")
    return f"{head} {b}/{a}".strip() if b else compared


def _scaleout_estimate(metric: str, tables: Mapping[str, pd.DataFrame]) -> Estimate:
    if metric == "scale_saturation":
        return saturation_estimate(tables, 1)
    if metric == "scale_p95_doubling":
        return doubling_estimate(tables)
    if metric == "scale_peak_16_8":
        return peak_ratio_estimate(tables, 16, 8)
    if metric == "scale_stability":
        return stability_estimate(tables)
    raise NotTestable(f"unknown scale-out metric {metric!r}")


def _models_campaigns(claim: Claim, ev: Evidence) -> bool:
    """Whether :func:`estimate` on several campaigns' runs pools them itself: the model contrasts
    (campaign-level cell means), dataset sizes and the steady share; the Galera and scale-out
    estimators are pooled in two stages instead."""
    if ev.kind == "galera" and claim.metric in ("fc_paused_pct_points", "tps_ratio", "lat_avg_ratio",
                                                "lat_p95_ratio"):
        return False
    return not (ev.kind == "scaleout" and claim.metric.startswith("scale_"))


# ============================================================================ verdicts


def verdict(ci_lo: float, ci_hi: float, band: tuple[float, float], test: str = "direction",
            null: float = 1.0, estimate: float | None = None) -> str:
    """The rule of the module docstring for one interval (without premises and campaigns). `estimate`
    defaults to the middle of the interval (geometric for ratios)."""
    if test not in ("direction", "within"):
        raise ValueError(f"test: {test!r}; allowed: direction, within")
    if not (np.isfinite(ci_lo) and np.isfinite(ci_hi)):
        return "inconclusive"
    lo, hi = band
    if not (ci_lo <= hi and ci_hi >= lo):
        return "disagree"
    if test == "within":
        return "agree" if lo <= ci_lo and ci_hi <= hi else "inconclusive"
    if estimate is None or not np.isfinite(estimate):
        estimate = math.sqrt(ci_lo * ci_hi) if null == 1.0 and ci_lo > 0 else (ci_lo + ci_hi) / 2
    up = (lo + hi) / 2 > null if np.isfinite(hi) else lo >= null
    excludes_null = ci_lo > null if up else ci_hi < null
    return "agree" if excludes_null and lo <= estimate <= hi else "inconclusive"


def in_band(value: float, band: tuple[float, float]) -> bool:
    return bool(np.isfinite(value) and band[0] <= value <= band[1])


def judge(claim: Claim, pooled: Estimate, per_campaign: Sequence[Estimate | None],
          premises: Sequence[PremiseCheck] = ()) -> tuple[str, str]:
    """The verdict of the module docstring and its reason ("" when the interval speaks for itself)."""
    v = verdict(pooled.ci_lo, pooled.ci_hi, claim.band, claim.test, claim.null, pooled.estimate)
    reason = "" if np.isfinite(pooled.ci_lo) else "no interval (too few repetitions)"
    ests = [e.estimate for e in per_campaign if e is not None]
    if len(per_campaign) > 1 and v in ("agree", "disagree"):
        inside = [in_band(x, claim.band) for x in ests]
        if len(ests) < len(per_campaign) or not all(inside if v == "agree" else [not i for i in inside]):
            shown = ", ".join(f"C{k + 1} {_fmt(e.estimate) if e is not None else '--'}"
                              for k, e in enumerate(per_campaign))
            v, reason = "inconclusive", f"campaigns differ ({shown}): the pooled interval says {v}"
    failed = [c for c in premises if c.met is False]
    if failed:
        reason = "; ".join(c.value for c in failed)
        return "premise not met", reason
    return v, reason


def _fmt(x: float) -> str:
    return f"{x:.3g}" if np.isfinite(x) else "--"


# ============================================================================ the table

VERDICT_COLUMNS = ("id", "seed", "where", "claim", "metric", "kind", "test", "band_lo", "band_hi", "study",
                   "compared", "basis", "n", "estimate", "ci_lo", "ci_hi", "verdict", "reason", "stand_in",
                   "premise", "premise_value", "premise_met", "campaigns")
CAMPAIGN_FIELDS = ("estimate", "ci_lo", "ci_hi", "verdict")


def campaign_columns(k: int) -> list[str]:
    return [f"c{k}_{f}" for f in CAMPAIGN_FIELDS]


def campaign_numbers(table: pd.DataFrame) -> list[int]:
    """The campaigns a claims table has columns for (c<k>_verdict), in order."""
    return sorted(int(c[1:-len("_verdict")]) for c in table.columns
                  if c.startswith("c") and c.endswith("_verdict") and c[1:-len("_verdict")].isdigit())


MAX_SPLIT_DEPTH = 3  # nested interactions judged per combination of levels, at most this deep


def _split(claim: Claim, ev: Evidence, exc: DependsOn, depth: int = 1
           ) -> list[tuple[dict[str, Any], Estimate | None, list[Estimate | None], str]]:
    """The claim judged at each level of the factor it depends on (recursively when the effect at a level
    depends on a further factor): (the levels held, pooled estimate or None, per-campaign estimates,
    note)."""
    out: list[tuple[dict[str, Any], Estimate | None, list[Estimate | None], str]] = []
    for level in exc.per_level:
        sub = replace(claim, at={**claim.at, exc.factor: level})
        held = {exc.factor: level}
        try:
            est, per, _ = _estimate_all(sub, ev)
            out.append((held, est, per, ""))
        except DependsOn as inner:
            if depth >= MAX_SPLIT_DEPTH:
                out.append((held, None, [], str(inner)))
                continue
            out += [({**held, **h}, e, p, n) for h, e, p, n in _split(sub, ev, inner, depth + 1)]
        except NotTestable as inner:
            out.append((held, None, [], str(inner)))
    return out


def _depends_verdict(claim: Claim, ev: Evidence, exc: DependsOn,
                     checks: Sequence[PremiseCheck]) -> tuple[str, str, int, list[str]]:
    """The verdict shared by every combination of levels the effect depends on (else inconclusive), the
    per-level estimates and verdicts in words, and the runs behind them."""
    from dbmatrix.spec.factors import factor_unit, factor_word

    parts, verdicts, n = [], [], 0
    leaves = _split(claim, ev, exc)
    per_camp: list[list[str]] = [[] for _ in ev.campaigns()]
    camp_checks = [_campaign_checks(claim, ev, k, checks) for k in ev.campaigns()]
    for held, e, per, note in leaves:
        for k in range(len(per_camp)):
            pk = per[k] if len(per) == len(per_camp) else None
            per_camp[k].append(judge(claim, pk, [], camp_checks[k])[0] if pk is not None else "inconclusive")
        where = ", ".join(f"{factor_word(f)} {v}{factor_unit(f)}" for f, v in held.items())
        if e is None:
            verdicts.append("inconclusive")
            parts.append(f"{where}: not estimable ({note})")
            continue
        v, _ = judge(claim, e, per if len(per) > 1 else [], checks)
        verdicts.append(v)
        n += e.n
        parts.append(f"{where}: {_fmt(e.estimate)} [{_fmt(e.ci_lo)}, {_fmt(e.ci_hi)}] {v}")
    common = verdicts[0] if verdicts and all(v == verdicts[0] for v in verdicts) else "inconclusive"
    within = "; within one campaign" if len(ev.campaigns()) < 2 else f"; {len(ev.campaigns())} campaigns pooled"
    aliased = alias_note(dict(ev.design)) if ev.design else ""
    within += f"; {aliased}" if aliased else ""
    camp_v = [vs[0] if vs and all(v == vs[0] for v in vs) else "inconclusive" for vs in per_camp]
    return common, (f"depends on {factor_word(exc.factor)} (interaction p = {exc.p:.2g}), judged per level: "
                    + "; ".join(parts) + within), n, camp_v


def _estimate_all(claim: Claim, ev: Evidence) -> tuple[Estimate, list[Estimate | None], list[str]]:
    """Pooled estimate (raises NotTestable / DependsOn) and each campaign's own (None where it cannot
    be estimated; the notes say why)."""
    ks = ev.campaigns()
    per: list[Estimate | None] = []
    notes: list[str] = []
    for k in ks:
        try:
            per.append(estimate(claim, ev.campaign(k), refuse_interacting=False))
        except NotTestable as exc:
            per.append(None)
            notes.append(f"C{k}: {exc}")
    if len(ks) == 1:
        if per[0] is None:
            return estimate(claim, ev), per, notes  # raises with the reason
        return replace(per[0], basis=f"{per[0].basis}; {ONE_CAMPAIGN}"), per, notes
    if _models_campaigns(claim, ev):
        return estimate(claim, ev), per, notes
    got = [e for e in per if e is not None]
    if len(got) < 2:
        texts = [n.split(": ", 1)[1] for n in notes]
        if texts and len(set(texts)) == 1 and len(texts) == len(ks):  # every campaign, the same reason
            raise NotTestable(texts[0])
        raise NotTestable("; ".join(notes) or "fewer than two campaigns give an estimate")
    return pool_campaign_estimates(got, scale="linear" if claim.kind == "difference" else "log"), per, notes


def evaluate(evidence: Sequence[Evidence], claims: Sequence[Claim] = CLAIMS) -> pd.DataFrame:
    """One row per claim: the first study (in the claim's preferred order of study kinds, then the order
    given) that can test it, its pooled estimate with the 95 % CI, each campaign's estimate and verdict,
    the premises with their measured values, and the verdict; else "not tested" and why."""
    rows = []
    several = any(len(e.hosts()) > 1 for e in evidence)
    n_camp = max([len(e.campaigns()) for e in evidence if not e.runs.empty] or [1])
    for c in claims:
        row: dict[str, Any] = {"id": c.id, "seed": c.seed, "where": c.where, "claim": c.text, "metric": c.metric,
                               "kind": c.kind, "test": c.test, "band_lo": c.band[0], "band_hi": c.band[1],
                               "study": "", "compared": "", "basis": "", "n": 0, "estimate": math.nan,
                               "ci_lo": math.nan, "ci_hi": math.nan, "verdict": "not tested", "reason": "",
                               "stand_in": c.stand_in, "premise": "; ".join(p.text for p in c.premises),
                               "premise_value": "", "premise_met": "", "campaigns": 0,
                               **{col: (math.nan if not col.endswith("verdict") else "")
                                  for k in range(1, n_camp + 1) for col in campaign_columns(k)},
                               **({"hosts": ""} if several else {})}
        if c.not_tested:
            row["reason"] = c.not_tested
            rows.append(row)
            continue
        pool = [e for k in c.sources for e in evidence if e.kind == k]
        if c.kind == "share":  # stability is a property of every standalone run of the build
            pool = [Evidence("+".join(e.experiment for e in pool), "pooled",
                             pd.concat([e.runs for e in pool], ignore_index=True))] if pool else []
        reasons = []
        for ev in pool:
            ev, hosts = ev.for_claims()
            checks = [check_premise(p, c, ev) for p in c.premises]
            try:
                est, per, notes = _estimate_all(c, ev)
            except DependsOn as exc:
                v, text, n, camp_v = _depends_verdict(c, ev, exc, checks)
                failed = [ch.value for ch in checks if ch.met is False]
                if len(camp_v) > 1:
                    row.update({f"c{k}_verdict": cv for k, cv in zip(ev.campaigns(), camp_v) if k <= n_camp})
                row.update(study=ev.experiment, compared=exc.compared, basis=text, n=n,
                           verdict="premise not met" if failed else v, reason="; ".join(failed),
                           campaigns=len(ev.campaigns()))
                _premise_cols(row, checks)
                break
            except NotTestable as exc:
                reasons.append(f"{ev.experiment}: {exc}")
                continue
            v, why = judge(c, est, per if len(per) > 1 else [], checks)
            row.update(study=ev.experiment, compared=est.compared, basis=est.basis, n=est.n,
                       estimate=est.estimate, ci_lo=est.ci_lo, ci_hi=est.ci_hi, verdict=v,
                       reason="; ".join([why, *notes]).strip("; "), campaigns=len(ev.campaigns()))
            for k, e in zip(ev.campaigns(), per):
                if e is None or k > n_camp:
                    continue
                row.update({f"c{k}_estimate": e.estimate, f"c{k}_ci_lo": e.ci_lo, f"c{k}_ci_hi": e.ci_hi,
                            f"c{k}_verdict": judge(c, e, [], _campaign_checks(c, ev, k, checks))[0]})
            _premise_cols(row, checks)
            if several:
                row["hosts"] = hosts
            break
        else:
            row["reason"] = "; ".join(reasons) if reasons else (
                "needs a " + " or ".join(c.sources) + " study; none in this build")
        rows.append(row)
    columns = [*VERDICT_COLUMNS, *[col for k in range(1, n_camp + 1) for col in campaign_columns(k)],
               *(["hosts"] if several else [])]
    return pd.DataFrame(rows, columns=columns)


def _campaign_checks(c: Claim, ev: Evidence, k: int, pooled: Sequence[PremiseCheck]) -> list[PremiseCheck]:
    """The premises on campaign `k`'s own runs (a premise can hold in one campaign and not in another;
    where a campaign alone cannot tell, the pooled check stands)."""
    if len(ev.campaigns()) < 2:
        return list(pooled)
    own = [check_premise(p, c, ev.campaign(k)) for p in c.premises]
    return [o if o.met is not None else q for o, q in zip(own, pooled)]


def _premise_cols(row: dict[str, Any], checks: Sequence[PremiseCheck]) -> None:
    row["premise_value"] = "; ".join(ch.value for ch in checks)
    row["premise_met"] = ("" if not checks else "no" if any(ch.met is False for ch in checks)
                          else "yes" if all(ch.met for ch in checks) else "unknown")


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    return {v: int((table["verdict"] == v).sum()) for v in VERDICTS}


def flips(table: pd.DataFrame) -> pd.DataFrame:
    """Per claim: each campaign's verdict, the pooled one, whether the campaigns' verdicts differ (a flip)
    and whether a campaign says the opposite of a pooled agree/disagree (which the rule forbids)."""
    ks = campaign_numbers(table)
    rows = []
    for _, r in table.iterrows():
        own = {f"C{k}": r[f"c{k}_verdict"] for k in ks}
        per = [str(v) for v in own.values() if isinstance(v, str) and v]
        rows.append({"id": r["id"], "seed": r["seed"], **own, "pooled": r["verdict"],
                     "flip": len(per) > 1 and len(set(per)) > 1,
                     "contradicted": r["verdict"] in ("agree", "disagree") and any(
                         v in ("agree", "disagree") and v != r["verdict"] for v in per)})
    return pd.DataFrame(rows)
