"""A claim's estimate with its 95 % CI (or at another `confidence`: a look of a campaign run until decided,
:mod:`dbmatrix.analyse.stats.sequential`) from one study's evidence, pooled over campaigns: the general
estimators (matched cells, the factorial model, dataset sizes, the steady share) and, through the study-kind
registry (:mod:`dbmatrix.analyse.kinds`), a kind's own estimators."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from dbmatrix.analyse.campaign_model import ONE_CAMPAIGN
from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.contrasts import (
    Estimate,
    NotIdentified,
    NotTestable,
    dataset_ratio,
    ratio_estimate,
    runs_at,
    steady_share,
)
from dbmatrix.analyse.kinds import find_kind
from dbmatrix.analyse.shares import share_difference
from dbmatrix.analyse.trend import trend_estimate

# ============================================================================ estimates


def estimate(claim: Claim, ev: Evidence, confidence: float = 0.95) -> Estimate:
    """The claim's estimate from one study's evidence, in the campaign-level model when it has several
    campaigns (every estimator, a study kind's own included, pools them itself: one estimator family);
    raises NotTestable with the reason, NotIdentified when the design does not identify the comparison.
    The estimate carries its interval's level (``Estimate.confidence``)."""
    est = _estimate(claim, ev, confidence)
    return est if est.confidence == confidence else replace(est, confidence=confidence)


def _estimate(claim: Claim, ev: Evidence, confidence: float) -> Estimate:
    if claim.kind == "share":  # "unless the system saturates": the runs whose CPUs were not saturated
        runs, words = unsaturated(ev)
        est = steady_share(runs, confidence)
        return replace(est, basis=f"{est.basis}; {words}")
    kind = find_kind(ev.kind)
    if kind is not None and kind.estimates(claim):
        # a kind's estimator takes a level only when one is asked for (one written before levels keeps working)
        return kind.claim_estimate(claim, ev, confidence) if confidence != 0.95 else kind.claim_estimate(claim, ev)
    if claim.factor is None:
        raise NotTestable("no factor to compare")
    if claim.metric == "data_physical_bytes":  # measured sizes: no interval, the level does not matter
        return dataset_ratio(ev.runs, claim.factor, claim.a, claim.b, claim.at)
    if claim.kind == "difference":  # a share of time (0-100 %), a - b in points
        return share_difference(runs_at(ev.runs, claim.at), claim.metric, claim.factor, claim.a,
                                claim.b, confidence)
    runs = ev.runs
    if "rate_fraction" in runs.columns:
        runs = runs[pd.to_numeric(runs["rate_fraction"], errors="coerce").fillna(0) == 0]
    metric, note = steady_metric(runs, claim.metric)
    if claim.trend is not None:
        est = trend_estimate(runs, metric, claim.factor, claim.a, claim.b, claim.trend, claim.at, confidence)
        return replace(est, basis=f"{est.basis}; {note}") if note else est
    est = ratio_estimate(runs, metric, claim.factor, claim.a, claim.b, claim.at,
                         level_order=ev.level_order, design=ev.design, confidence=confidence)
    return replace(est, basis=f"{est.basis}; {note}") if note else est


# Throughput is judged on each run's steady window: the per-second series after the MSER-truncated warm-up
# (``tps_steady``, :mod:`dbmatrix.analyse.stats.steady`), registered with the rule (verdicts.RULE). Metrics
# from counters or histograms cover the whole window (they cannot be trimmed after the fact).
STEADY_METRICS = {"tps": "tps_steady"}
SATURATED_SHARE = 0.90  # a run whose host CPUs were busy at least this share of the window is saturated


def steady_metric(runs: pd.DataFrame, metric: str) -> tuple[str, str]:
    """The column a claim on `metric` is estimated from, and the words the basis adds: the steady window's
    throughput when every run has one, else the whole window's (said)."""
    steady = STEADY_METRICS.get(metric)
    if steady is None or runs.empty:
        return metric, ""
    values = pd.to_numeric(runs.get(steady), errors="coerce") if steady in runs.columns else None
    if values is None or values.isna().any() or (values <= 0).any():
        return metric, "whole-window throughput (a run has no steady window)"
    return steady, "throughput of each run's steady window (warm-up truncated by MSER)"


def unsaturated(ev: Evidence) -> tuple[pd.DataFrame, str]:
    """The runs whose host CPUs were busy less than :data:`SATURATED_SHARE` of their window (the seed's
    "unless the system saturates"), and the words saying how many were left out."""
    runs = ev.runs
    need = {"host", "host_cpu_busy_s", "window_s"}
    if runs.empty or not need <= set(runs.columns):
        return runs, "saturation unknown (no CPU time in the runs): every run kept"
    cpus = runs["host"].map(lambda h: ev.host_cpus.get(str(h), float("nan"))).astype(float)
    share = (pd.to_numeric(runs["host_cpu_busy_s"], errors="coerce")
             / pd.to_numeric(runs["window_s"], errors="coerce") / cpus)
    if share.isna().all():
        raise NotTestable("no run has its host's CPU count and CPU time, so saturated runs cannot be told apart")
    keep = share < SATURATED_SHARE
    unknown = int(share.isna().sum())
    words = (f"unsaturated runs only (host CPUs under {SATURATED_SHARE:.0%} busy): {int(keep.sum())} of "
             f"{len(runs)} kept" + (f", {unknown} without CPU time left out" if unknown else ""))
    return runs[keep.to_numpy()], words


def estimate_all(claim: Claim, ev: Evidence,
                 confidence: float = 0.95) -> tuple[Estimate, list[Estimate | None], list[str]]:
    """Pooled estimate (raises NotTestable / NotIdentified) and each campaign's own (None where it cannot
    be estimated; the notes say why)."""
    ks = ev.campaigns()
    per: list[Estimate | None] = []
    notes: list[str] = []
    for k in ks:
        try:
            per.append(estimate(claim, ev.campaign(k), confidence))
        except NotIdentified:
            raise
        except NotTestable as exc:
            per.append(None)
            notes.append(f"C{k}: {exc}")
    if len(ks) == 1:
        if per[0] is None:
            return estimate(claim, ev, confidence), per, notes  # raises with the reason
        return replace(per[0], basis=f"{per[0].basis}; {ONE_CAMPAIGN}"), per, notes
    return estimate(claim, ev, confidence), per, notes
