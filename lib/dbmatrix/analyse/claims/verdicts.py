"""The verdict rule: one for the whole paper (see :mod:`dbmatrix.analyse.claims`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dbmatrix.analyse.claims.model import Claim, PremiseCheck
from dbmatrix.analyse.contrasts import Estimate

VERDICTS = ("agree", "disagree", "inconclusive", "premise not met", "not tested")


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
            shown = ", ".join(f"C{k + 1} {fmt(e.estimate) if e is not None else '--'}"
                              for k, e in enumerate(per_campaign))
            v, reason = "inconclusive", f"campaigns differ ({shown}): the pooled interval says {v}"
    failed = [c for c in premises if c.met is False]
    if failed:
        reason = "; ".join(c.value for c in failed)
        return "premise not met", reason
    return v, reason


def fmt(x: float) -> str:
    return f"{x:.3g}" if np.isfinite(x) else "--"


