"""The verdict rule: one for the whole paper (see :mod:`dbmatrix.analyse.claims`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dbmatrix.analyse.claims.model import Claim, PremiseCheck
from dbmatrix.analyse.contrasts import Estimate

VERDICTS = ("agree", "disagree", "inconclusive", "premise not met", "not identified", "not tested")
TESTS = ("direction", "about", "within")
UNBOUNDED = "unbounded"
MEASURED_SPLIT = "pairs differ (measured, no CI)"  # a measured quantity whose pairs' verdicts differ


# ============================================================================ verdicts


def zone(null: float, margin: float) -> tuple[float, float]:
    """The equivalence zone of no effect around `null` (1: a ratio, 1/(1+m) .. 1+m; 0: -m .. m)."""
    return (1 / (1 + margin), 1 + margin) if null == 1.0 else (null - margin, null + margin)


def verdict(ci_lo: float, ci_hi: float, band: tuple[float, float], test: str = "direction",
            null: float = 1.0, estimate: float | None = None, margin: float = 0.0) -> str:
    """The rule of the module docstring for one interval (without premises and campaigns). `estimate`
    defaults to the middle of the interval (geometric for ratios); `margin` is the equivalence margin of
    no effect (0: none): a direction claim whose interval lies inside it disagrees."""
    if test not in TESTS:
        raise ValueError(f"test: {test!r}; allowed: {', '.join(TESTS)}")
    if not (np.isfinite(ci_lo) and np.isfinite(ci_hi)):
        return "inconclusive"
    lo, hi = band
    if not (ci_lo <= hi and ci_hi >= lo):
        return "disagree"
    if test in ("within", "about"):
        return "agree" if lo <= ci_lo and ci_hi <= hi else "inconclusive"
    z_lo, z_hi = zone(null, margin)
    if margin > 0 and z_lo <= ci_lo and ci_hi <= z_hi:
        return "disagree"  # a precise null against a claim of an effect
    if estimate is None or not np.isfinite(estimate):
        estimate = math.sqrt(ci_lo * ci_hi) if null == 1.0 and ci_lo > 0 else (ci_lo + ci_hi) / 2
    up = (lo + hi) / 2 > null if np.isfinite(hi) else lo >= null
    excludes_null = ci_lo > null if up else ci_hi < null
    return "agree" if excludes_null and lo <= estimate <= hi else "inconclusive"


def in_band(value: float, band: tuple[float, float]) -> bool:
    return bool(np.isfinite(value) and band[0] <= value <= band[1])


def _deterministic(claim: Claim, est: Estimate) -> tuple[str, str]:
    """A measured quantity (dataset sizes per pair): each value judged on its own (a degenerate
    interval); the common verdict, else inconclusive naming the pairs."""
    each = [(label, v, verdict(v, v, claim.band, claim.test, claim.null, v, claim.equivalence))
            for label, v in est.values]
    shown = "; ".join(f"{label}: {fmt(v)} {w}" for label, v, w in each)
    verdicts = {w for _, _, w in each}
    if len(verdicts) == 1:
        return verdicts.pop(), f"per pair (measured, no CI): {shown}"
    return "inconclusive", f"{MEASURED_SPLIT}: {shown}"


def judge(claim: Claim, pooled: Estimate, per_campaign: Sequence[Estimate | None],
          premises: Sequence[PremiseCheck] = ()) -> tuple[str, str]:
    """The verdict of the module docstring and its reason ("" when the interval speaks for itself)."""
    if pooled.values:
        v, reason = _deterministic(claim, pooled)
    else:
        v = verdict(pooled.ci_lo, pooled.ci_hi, claim.band, claim.test, claim.null, pooled.estimate,
                    claim.equivalence)
        reason = ""
        if not (np.isfinite(pooled.ci_lo) and np.isfinite(pooled.ci_hi)):
            bounded = [x for x in (pooled.ci_lo, pooled.ci_hi) if np.isfinite(x)]
            reason = UNBOUNDED if bounded or np.isfinite(pooled.estimate) else "no interval (too few repetitions)"
        ests = [e.estimate for e in per_campaign if e is not None]
        if len(per_campaign) > 1 and v in ("agree", "disagree"):
            inside = [in_band(x, claim.band) for x in ests]
            differ = len(ests) < len(per_campaign) or not all(inside if v == "agree" else [not i for i in inside])
            if differ and not (v == "disagree" and _precise_null(claim, pooled)):
                shown = ", ".join(f"C{k + 1} {fmt(e.estimate) if e is not None else '--'}"
                                  for k, e in enumerate(per_campaign))
                v, reason = "inconclusive", f"campaigns differ ({shown}): the pooled interval says {v}"
    failed = [c for c in premises if c.met is False]
    if failed:
        reason = "; ".join(c.value for c in failed)
        return "premise not met", reason
    unsure = [c for c in premises if c.uncertain]
    if unsure:
        reason = "; ".join([f"premise uncertain: {c.value}" for c in unsure] + ([reason] if reason else []))
    return v, reason


def _precise_null(claim: Claim, e: Estimate) -> bool:
    """The pooled interval lies inside the no-effect zone (the campaigns' own estimates may sit on either
    side of the null: that is what a null looks like, not a disagreement between campaigns)."""
    z_lo, z_hi = zone(claim.null, claim.equivalence)
    return claim.test == "direction" and z_lo <= e.ci_lo and e.ci_hi <= z_hi


def fmt(x: float) -> str:
    return f"{x:.3g}" if np.isfinite(x) else "--"
