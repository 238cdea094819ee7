"""Checking a claim's premises on the evidence it is judged on: one registered check per premise kind
(:data:`PREMISES`, filled by :func:`premise`), which :func:`check_premise` dispatches to."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.claims.model import Claim, Evidence, Premise, PremiseCheck
from dbmatrix.analyse.contrasts import NotTestable, dataset_ratio
from dbmatrix.analyse.replication import pressured_setting, setting_runs

PremiseCheckFn = Callable[[Premise, Claim, Evidence], PremiseCheck]

# ============================================================================ premise checks

MiB = 1024 * 1024
# the engine's own write counters over the window (processed runs: dbmatrix.parse.cache_counters)
ENGINE_WRITE_COLUMNS = ("engine_flush_bytes", "engine_compaction_bytes")


def _pct(x: float) -> str:
    return f"{x:.1f} %" if x < 10 else f"{x:.0f} %"


def _num_col(df: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(df[name], errors="coerce") if name in df.columns else pd.Series(np.nan, index=df.index)


def _level(ev: Evidence, factor: str, spec: Any) -> Any:
    from dbmatrix.analyse.contrasts import resolve_level

    return resolve_level(ev.runs, factor, spec)


def _at_runs(claim: Claim, ev: Evidence, **extra: Any) -> pd.DataFrame:
    """The runs at the claim's conditions (and the extra factor levels given)."""
    from dbmatrix.analyse.contrasts import runs_at

    return runs_at(ev.runs, {**claim.at, **extra})


def measured(values: pd.Series, threshold: float, *, above: bool = True, confidence: float = 0.95
             ) -> tuple[bool | None, bool, float, float, float]:
    """A premise measured over runs: (met, uncertain, mean, lo, hi) with a t interval of the mean over the
    runs; met when the whole interval is on the premise's side of `threshold` (above it, or below it when
    not `above`), not met when it is wholly on the other side, uncertain (met None) when it straddles it.
    One run: its value, met/not met read off it (no interval)."""
    from scipy import stats as sps

    v = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    if v.size == 0:
        raise NotTestable("no measured values")
    mean = float(v.mean())
    if v.size < 2:
        lo = hi = mean
    else:
        half = float(sps.t.ppf((1 + confidence) / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
        lo, hi = mean - half, mean + half
    ok_lo, ok_hi = (lo >= threshold, hi < threshold) if above else (hi < threshold, lo >= threshold)
    if ok_lo:
        return True, False, mean, lo, hi
    if ok_hi:
        return False, False, mean, lo, hi
    return None, True, mean, lo, hi


def _check_of(met: bool | None, unsure: bool, text: str) -> PremiseCheck:
    return PremiseCheck(met, text + (" (uncertain: the interval straddles the threshold)" if unsure else ""), unsure)


# ============================================================================ the premise registry


@dataclass(frozen=True)
class PremiseKind:
    """A kind of premise: how it is checked on the evidence a claim is judged on. A claim names the kind, its
    threshold and the seed's words in a :class:`~dbmatrix.analyse.claims.model.Premise` (the catalogue)."""

    name: str
    check: Callable[[Premise, Claim, Evidence], PremiseCheck]  # raises NotTestable when the data cannot tell
    description: str  # what is measured and compared with the threshold


PREMISES: dict[str, PremiseKind] = {}


def premise(name: str, description: str) -> Callable[[PremiseCheckFn], PremiseCheckFn]:
    """Register a premise check under `name`: a new premise is one decorated function in this module."""
    def add(fn: PremiseCheckFn) -> PremiseCheckFn:
        if name in PREMISES:
            raise ValueError(f"premise kind {name!r} is registered already")
        PREMISES[name] = PremiseKind(name, fn, description)
        return fn
    return add


def check_premise(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    """One premise of `claim` on the evidence it is judged on (never raises)."""
    try:
        return _check(p, claim, ev)
    except NotTestable as exc:
        return PremiseCheck(None, f"not checked: {exc}")


def _check(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    kind = PREMISES.get(p.kind)
    if kind is None:
        raise ValueError(f"premise kind {p.kind!r}; allowed: {', '.join(PREMISES)}")
    return kind.check(p, claim, ev)


@premise("fc_paused", "flow control paused the nodes at least `threshold` % of the time at the lowest applier "
                      "level (Galera, at the pressured setting)")
def _fc_paused(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    runs = ev.extra.get("replication-runs")
    if runs is None or runs.empty or "fc_paused_pct" not in runs.columns:
        raise NotTestable("the replication study's runs table is missing")
    setting = pressured(ev)
    runs = setting_runs(runs, setting)
    level = pd.to_numeric(runs["slave_threads"], errors="coerce")
    low = runs[level == level.min()]
    met, unsure, paused, lo, hi = measured(_num_col(low, "fc_paused_pct"), p.threshold)
    where = "" if setting == "all" else f" ({setting.replace('_', ' ')})"
    return _check_of(met, unsure, f"flow control paused {_pct(paused)} [{_pct(max(lo, 0))}, {_pct(min(hi, 100))}] "
                     f"of the time with {int(level.min())} applier{'s' if level.min() != 1 else ''}{where} "
                     f"(needs {p.threshold:g} %)")


@premise("compresses", "the claim's engine's dataset under lz4 is at most 1/`threshold` of the uncompressed one, "
                       "in every pair of datasets")
def _compresses(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    engine = claim.at.get("engine")
    est = dataset_ratio(ev.runs, "compression", "lz4", "none", {"engine": engine} if engine else {})
    factors = [1 / v if v > 0 else math.inf for _, v in est.values] or [1 / est.estimate]
    shown = ", ".join(f"{f:.2f}x" for f in factors)
    if min(factors) >= p.threshold:
        return PremiseCheck(True, f"lz4 shrinks the data {shown} per pair (needs {p.threshold:g}x)")
    if max(factors) < p.threshold:
        return PremiseCheck(False, f"lz4 shrinks the data {shown} per pair (needs {p.threshold:g}x)")
    return PremiseCheck(None, f"lz4 shrinks the data {shown} per pair (needs {p.threshold:g}x; pairs differ)",
                        True)


@premise("saturated", "the host's CPUs are at least `threshold` busy at the lower compared thread level")
def _saturated(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    if claim.factor != "threads":
        raise NotTestable("the saturation premise needs a thread comparison")
    lv = [_level(ev, "threads", s) for s in (claim.a, claim.b)]
    lower = min(lv, key=float)
    runs = _at_runs(claim, ev, threads=lower)
    cpus = runs["host"].map(lambda h: ev.host_cpus.get(str(h), math.nan)) if "host" in runs else None
    if cpus is None or runs.empty or cpus.isna().all():
        raise NotTestable("the host's CPU count or the runs' CPU time is missing")
    share = _num_col(runs, "host_cpu_busy_s") / _num_col(runs, "window_s") / cpus.astype(float)
    if not np.isfinite(share).any():
        raise NotTestable("no CPU time over the window in the runs")
    met, unsure, busy, lo, hi = measured(share[np.isfinite(share)], p.threshold)
    return _check_of(met, unsure, f"CPUs {busy * 100:.0f} % [{lo * 100:.0f}, {min(hi, 1) * 100:.0f}] busy at "
                     f"{lower} threads (needs {p.threshold * 100:.0f} %)")


@premise("cache_below_data", "at the claim's lowest cache level the cache holds less than `threshold` x the "
                             "logical data (with uniform access the working set is all of it)")
def _cache_below_data(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
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


@premise("engine_writes", "the engine's flush + compaction counters moved more than `threshold` bytes in every "
                          "run's window")
def _engine_writes(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    runs = _at_runs(claim, ev)
    cols = [c for c in ENGINE_WRITE_COLUMNS if c in runs.columns]
    if not cols or runs.empty:
        raise NotTestable("the runs do not record the engine's flush and compaction bytes")
    moved = sum(_num_col(runs, c).fillna(0) for c in cols)
    known = runs[cols].notna().any(axis=1)
    if not known.any():
        raise NotTestable("no flush or compaction counters in the runs' status")
    some = int((moved[known] > p.threshold).sum())
    total = int(known.sum())
    text = (f"flush + compaction wrote {moved[known].sum() / MiB:.2f} MiB in {some} of {total} runs' windows "
            "(needs bytes in every window)")
    if some == total:
        return PremiseCheck(True, text)
    return PremiseCheck(False, text) if some == 0 else PremiseCheck(None, text, True)


@premise("halves", "each half of the shortest measured window is at least `threshold` s (scale-out stability)")
def _halves(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    st = ev.extra.get("scaleout-stability")
    if st is None or st.empty or "seconds" not in st.columns:
        raise NotTestable("no per-second rows at the best setting")
    secs = pd.to_numeric(st["seconds"], errors="coerce").dropna()
    half = float(secs.min()) / 2
    return PremiseCheck(bool(half >= p.threshold), f"halves of {half:g} s (the shortest window: "
                        f"{secs.min():g} s; needs {p.threshold:g} s each)")


@premise("doubling_grid", "the grid has an instance count n and 2n, thread steps of at most x`threshold`, and a "
                          "CPU per instance at the larger count")
def _doubling_grid(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    runs = ev.runs
    if runs.empty or "instances" not in runs.columns:
        raise NotTestable("no instance counts in the runs")
    counts = sorted({int(x) for x in pd.to_numeric(runs["instances"], errors="coerce").dropna()})
    steps = [n for n in counts if 2 * n in counts]
    cpus = min((ev.host_cpus.get(str(h), 0) for h in runs["host"].unique()), default=0) \
        if "host" in runs.columns else 0
    if not steps:
        return PremiseCheck(False, f"instance counts {counts}: no n and 2n")
    threads = sorted({float(x) for x in pd.to_numeric(runs.get("threads"), errors="coerce").dropna()})
    step = max((b / a for a, b in itertools.pairwise(threads) if a > 0), default=math.inf)
    if step > p.threshold:  # the crossing is read off the thread grid: it must resolve a factor of 2
        return PremiseCheck(False, f"thread counts {', '.join(f'{t:g}' for t in threads)}: steps of "
                            f"x{step:.3g}, too coarse to resolve a doubling (needs x{p.threshold:g})")
    n2 = int(max(steps) * 2)
    if not cpus:
        return PremiseCheck(None, f"instances {max(steps)} and {n2} measured; the host's CPU count is unknown")
    return PremiseCheck(bool(cpus >= n2), f"instances {max(steps)} and {n2} measured on {cpus} CPUs "
                        f"(needs a CPU per instance)")


def pressured(ev: Evidence) -> str:
    """The Galera setting the seed's claims are judged at: where flow control paused most with one applier
    (:func:`dbmatrix.analyse.replication.pressured_setting`)."""
    runs = ev.extra.get("replication-runs")
    return pressured_setting(runs) if runs is not None else "all"




@premise("binlog_synced", "every run at the claim's conditions had the binary log on and sync_binlog at `threshold` "
                          "(the server's own variables)")
def _binlog_synced(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    runs = _at_runs(claim, ev)
    on, sync = _num_col(runs, "binlog_on"), _num_col(runs, "sync_binlog")
    known = on.notna() & sync.notna()
    if runs.empty or not known.any():
        raise NotTestable("the runs do not record the server's log_bin and sync_binlog")
    ok = int(((on == 1) & (sync == p.threshold))[known].sum())
    total = int(known.sum())
    text = f"log_bin ON with sync_binlog = {p.threshold:g} in {ok} of {total} runs"
    if ok == total:
        return PremiseCheck(True, text)
    return PremiseCheck(False, text) if ok == 0 else PremiseCheck(None, text, True)
