"""The seeds' claims set beside what our runs measured, with a verdict computed from the data.

Each :class:`Claim` names a seed, a short paraphrase of what it says, and what to compare: a metric, a
factor's two levels (``a`` against ``b``), the levels of other factors it holds (``at``), and the band of
values the claim asserts for the estimate (a ratio a/b, or a difference a - b in points). The estimate and
its 95 % CI come from the data (:func:`estimate`):

1. runs restricted to the claim's conditions, if only the compared factor still varies there: the two
   cells' repetitions, Welch's t on log values (ratio of geometric means);
2. otherwise the factorial model of log(metric) over all runs (main effects + two-way interactions,
   sum-to-zero coding, OLS; :func:`fit_log_model`): the contrast between the two levels at the claim's
   conditions, averaged over the levels of the factors the claim leaves free; its CI from the model's
   covariance and t with the residual degrees of freedom (this is how a fractional design answers a
   question about one engine at one cache level: no pair of cells differs only in the compared factor);
3. if the interactions are not estimable on the runs that measured the metric (e.g. device I/O exists
   only on the disk medium, a resolution-IV half of the fraction), a main-effects model on the runs at the
   claim's conditions;
4. dataset sizes (one dataset per engine x page x compression, no repetitions): the geometric mean of the
   matched pairs' ratios, the "interval" being their range; shares (tested runs shown stable by the
   steady-state test, :func:`dbmatrix.analyse.contrasts.steady_share`): a Wilson interval widened to bound
   the undetermined runs; the replication study's own effect table for the Galera claims.

Verdict rule, with [L, U] the 95 % CI and [lo, hi] the claimed band (null value 1 for ratios, 0 for
differences):

- ``direction`` claims (an effect in a direction, up to / about a size): **agree** when the CI overlaps the
  band and excludes the null on the claimed side; **disagree** when the CI misses the band entirely (the
  opposite direction, or a size clearly outside the claim); **inconclusive** otherwise.
- ``within`` claims (no or a bounded effect): **agree** when the CI lies inside the band; **disagree**
  when it misses the band entirely; **inconclusive** otherwise.
- **not tested**: no study of the build varies the factor at the needed levels, or the hardware the claim
  is about does not exist here (the reason is given).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.contrasts import (
    Estimate,
    NotTestable,
    dataset_ratio,
    ratio_estimate,
    replication_estimate,
    steady_share,
)
from dbmatrix.analyse.hosts import hosts_of, pooling_allowed
from dbmatrix.analyse.scaleout import (
    doubling_estimate,
    peak_ratio_estimate,
    saturation_estimate,
    stability_estimate,
)

VERDICTS = ("agree", "disagree", "inconclusive", "not tested")
# The dataset of a run is fixed by these factors (sizes are measured once per dataset).
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

    @property
    def null(self) -> float:
        return 0.0 if self.kind == "difference" else 1.0


@dataclass
class Evidence:
    """What a study offers the claims: its processed runs and, for Galera, its effect table."""

    experiment: str
    kind: str
    runs: pd.DataFrame
    level_order: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    replication: pd.DataFrame | None = None
    host_check: pd.DataFrame | None = None  # processed/hosts.csv (several hosts only)
    extra: Mapping[str, pd.DataFrame] = field(default_factory=dict)  # a scale-out study's own tables

    def hosts(self) -> list[str]:
        return hosts_of(self.runs)

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
        return (Evidence(self.experiment, self.kind, runs, self.level_order, self.replication, None, self.extra),
                f"class {best}: {members}")


# ============================================================================ the claims

CLAIMS: tuple[Claim, ...] = (
    Claim("blockSmallCache", "003", "slide 13",
          "4\\,KB blocks give up to 10\\,\\% more throughput than 16\\,KB on PMEM without a block cache",
          "tps", (1.0, 1.10), factor="block_size", a="4k", b="16k",
          at={"engine": "myrocks", "cache_pct": "min", "medium": "emulated:pmem"}, sources=("tpcc", "storage"),
          stand_in="lowest cache level for a disabled block cache"),
    Claim("blockLargeCache", "003", "slide 13",
          "with the block cache enabled, 4\\,KB and 16\\,KB blocks differ negligibly",
          "tps", (0.95, 1.05), test="within", factor="block_size", a="4k", b="16k",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage")),
    Claim("blockSize", "003", "slide 13", "4\\,KB blocks may grow the dataset by up to 10\\,\\%",
          "data_physical_bytes", (1.0, 1.10), factor="block_size", a="4k", b="16k", at={"engine": "myrocks"},
          sources=("tpcc", "storage")),
    Claim("lzFourTps", "003", "slide 14", "lz4 costs almost no throughput (PMEM)",
          "tps", (0.95, 1.05), test="within", factor="compression", a="lz4", b="none",
          at={"engine": "myrocks", "medium": "emulated:pmem"}, sources=("tpcc", "storage")),
    Claim("lzFourSize", "003", "slide 14", "the lz4 dataset is 4$\\times$ smaller than the uncompressed one",
          "data_physical_bytes", (0.20, 0.33), test="within", factor="compression", a="lz4", b="none",
          at={"engine": "myrocks"}, sources=("tpcc", "storage")),
    Claim("lzFourWrites", "003", "slide 14", "lz4 cuts the write rate by up to 2.5$\\times$",
          "write_kb_per_txn", (0.40, 1.0), factor="compression", a="lz4", b="none", at={"engine": "myrocks"},
          sources=("tpcc", "storage")),
    Claim("pmemNoCache", "003", "slide 15",
          "without a block cache, PMEM outperforms NVMe by up to 4$\\times$",
          "tps", (1.0, 4.0), factor="medium", a="emulated:pmem", b="native",
          at={"engine": "myrocks", "cache_pct": "min"}, sources=("tpcc", "storage"),
          stand_in="tmpfs (RAM) for PMEM, the root disk for NVMe, lowest cache level for no block cache"),
    Claim("pmemCache", "003", "slide 15",
          "with the block cache enabled, PMEM's advantage over NVMe is up to 25\\,\\%",
          "tps", (1.0, 1.25), factor="medium", a="emulated:pmem", b="native",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage"),
          stand_in="tmpfs (RAM) for PMEM, the root disk for NVMe"),
    Claim("bufferPool", "001", "section 3",
          "throughput grows with the InnoDB buffer pool share of the data (25 to 100\\,\\%)",
          "tps", (0.0, 1.0), factor="cache_pct", a="min", b="max", at={"engine": "innodb"},
          sources=("threads", "storage")),
    Claim("threadsScale", "001", "section 3", "throughput rises with client threads (8 to 128)",
          "tps", (1.0, math.inf), factor="threads", a="max", b="min", sources=("threads",)),
    Claim("remoteNvme", "001", "section 3.1",
          "NVMe pooled over InfiniBand outperforms local NVMe, less so at high concurrency",
          "tps", (1.0, math.inf),
          not_tested="no NVMe-oF/InfiniBand storage on this machine"),
    Claim("applierPause", "002", "flow-control charts",
          "16 applier threads cut flow-control pauses (from 64\\,\\% to 20\\,\\% of the time)",
          "fc_paused_pct_points", (-100.0, 0.0), kind="difference", factor="slave_threads", a="max", b=1,
          sources=("galera",)),
    Claim("applierTps", "002", "throughput chart", "16 applier threads give about 11\\,\\% more throughput",
          "tps_ratio", (1.0, 1.25), factor="slave_threads", a="max", b=1, sources=("galera",)),
    Claim("applierLatency", "002", "latency chart",
          "one applier thread has 27\\,\\% higher average latency than 16",
          "lat_avg_ratio", (0.70, 1.0), factor="slave_threads", a="max", b=1, sources=("galera",)),
    Claim("steadyRuns", "000", "per-second charts",
          "after warm-up, per-second throughput is stable over the run", "steady", (0.90, 1.0),
          test="within", kind="share", sources=("storage", "threads", "tpcc")),
    Claim("saturationTps", "000", "single-server scaling",
          "past saturation, more client threads add no throughput", "tps", (0.0, 1.05), test="within",
          factor="threads", a="max", b="second-max", sources=("threads",)),
    Claim("saturationLatency", "000", "p95 latency chart", "past saturation, p95 latency grows with clients",
          "p95_ms", (1.0, math.inf), factor="threads", a="max", b="second-max", sources=("threads",)),
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


# ============================================================================ verdicts


def verdict(ci_lo: float, ci_hi: float, band: tuple[float, float], test: str = "direction",
            null: float = 1.0) -> str:
    """The rule of the module docstring, for an interval [ci_lo, ci_hi] and a claimed band."""
    if test not in ("direction", "within"):
        raise ValueError(f"test: {test!r}; allowed: direction, within")
    if not (np.isfinite(ci_lo) and np.isfinite(ci_hi)):
        return "inconclusive"
    lo, hi = band
    overlaps = ci_lo <= hi and ci_hi >= lo
    if not overlaps:
        return "disagree"
    if test == "within":
        return "agree" if lo <= ci_lo and ci_hi <= hi else "inconclusive"
    up = (lo + hi) / 2 > null if np.isfinite(hi) else lo >= null
    excludes_null = ci_lo > null if up else ci_hi < null
    return "agree" if excludes_null else "inconclusive"


def estimate(claim: Claim, ev: Evidence) -> Estimate:
    """The claim's estimate from one study (raises NotTestable with the reason)."""
    if claim.kind == "share":
        return steady_share(ev.runs)
    if ev.kind == "galera" and claim.metric in ("fc_paused_pct_points", "tps_ratio", "lat_avg_ratio",
                                                "lat_p95_ratio"):
        if ev.replication is None or ev.replication.empty:
            raise NotTestable("the replication study's effect table is missing")
        return replication_estimate(ev.replication, claim.metric)
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
                          level_order=ev.level_order)


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


VERDICT_COLUMNS = ("id", "seed", "where", "claim", "metric", "kind", "test", "band_lo", "band_hi", "study",
                   "compared", "basis", "n", "estimate", "ci_lo", "ci_hi", "verdict", "reason", "stand_in")


def evaluate(evidence: Sequence[Evidence], claims: Sequence[Claim] = CLAIMS) -> pd.DataFrame:
    """One row per claim: the first study (in the claim's preferred order of study kinds, then the order
    given) that can test it, its estimate with the 95 % CI, and the verdict; else "not tested" and why."""
    rows = []
    several = any(len(e.hosts()) > 1 for e in evidence)
    for c in claims:
        row: dict[str, Any] = {"id": c.id, "seed": c.seed, "where": c.where, "claim": c.text, "metric": c.metric,
                               "kind": c.kind, "test": c.test, "band_lo": c.band[0], "band_hi": c.band[1],
                               "study": "", "compared": "", "basis": "", "n": 0, "estimate": math.nan,
                               "ci_lo": math.nan, "ci_hi": math.nan, "verdict": "not tested", "reason": "",
                               "stand_in": c.stand_in, **({"hosts": ""} if several else {})}
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
            try:
                est = estimate(c, ev)
            except NotTestable as exc:
                reasons.append(f"{ev.experiment}: {exc}")
                continue
            row.update(study=ev.experiment, compared=est.compared, basis=est.basis, n=est.n,
                       estimate=est.estimate, ci_lo=est.ci_lo, ci_hi=est.ci_hi,
                       verdict=verdict(est.ci_lo, est.ci_hi, c.band, c.test, c.null),
                       reason="" if np.isfinite(est.ci_lo) else "no interval (too few repetitions)")
            if several:
                row["hosts"] = hosts
            break
        else:
            row["reason"] = "; ".join(reasons) if reasons else (
                "needs a " + " or ".join(c.sources) + " study; none in this build")
        rows.append(row)
    columns = [*VERDICT_COLUMNS, *(["hosts"] if several else [])]  # "hosts": how hosts entered (several only)
    return pd.DataFrame(rows, columns=columns)


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    return {v: int((table["verdict"] == v).sum()) for v in VERDICTS}


