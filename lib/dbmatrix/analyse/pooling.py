"""Campaign-level estimates: each campaign's own estimate, and a two-stage pooling of per-campaign estimates
(t on K-1 df). Since issue 25 no claim pools through :func:`pool_campaign_estimates`: every claim, Galera and
scale-out included, is estimated in the campaign-level model (:func:`dbmatrix.analyse.contrasts.ratio_estimate`);
it remains for tools that compare campaigns. The model contrasts pool campaigns themselves
(:func:`dbmatrix.analyse.contrasts.ratio_estimate`); the method is in :mod:`dbmatrix.analyse.campaign_model`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.campaign_model import ONE_CAMPAIGN, campaign_column, campaigns_of, pooled_t
from dbmatrix.analyse.contrasts import Estimate, NotTestable

SCALES = ("log", "linear")


def per_campaign_estimates(runs: pd.DataFrame, fn: Callable[[pd.DataFrame], Estimate]) -> list[Estimate]:
    """`fn` on each campaign's runs, in campaign order (one element with one campaign); the basis starts
    "campaign k: ". A campaign `fn` cannot answer (NotTestable) gives a NaN estimate whose basis is the
    reason, so that "every campaign on that side" fails for it."""
    camp = campaign_column(runs)
    out = []
    for k in campaigns_of(runs):
        try:
            e = fn(runs[camp == k])
        except NotTestable as exc:
            e = Estimate(math.nan, math.nan, math.nan, str(exc), 0)
        e.basis = f"campaign {k}: {e.basis}"
        e.campaigns = 1
        out.append(e)
    return out


def pool_campaign_estimates(estimates: Sequence[Estimate], *, scale: str = "log",
                            confidence: float = 0.95) -> Estimate:
    """Pool per-campaign estimates of one quantity: the mean of the K estimates on the log scale (ratios)
    or the natural one (``scale="linear"``: differences) with a t interval on K-1 df from their spread
    (two-stage, Hartung-Knapp with equal weights: :mod:`dbmatrix.analyse.campaign_model`). The campaigns'
    own intervals do not enter: they leave out the campaign variation this interval is for. One estimate is
    returned as it is, its basis labelled "within one campaign". NotTestable when an estimate is NaN (a
    campaign that cannot answer must not be dropped silently)."""
    if scale not in SCALES:
        raise ValueError(f"pool_campaign_estimates: scale {scale!r}; allowed: {', '.join(SCALES)}")
    if not estimates:
        raise NotTestable("no campaign estimates to pool")
    if len(estimates) == 1:
        e = estimates[0]
        return Estimate(e.estimate, e.ci_lo, e.ci_hi, f"{e.basis}; {ONE_CAMPAIGN}", e.n, e.compared, 1, [])
    missing = [e.basis for e in estimates if not math.isfinite(e.estimate)]
    if missing:
        raise NotTestable("not every campaign has an estimate: " + "; ".join(missing))
    if scale == "log" and any(e.estimate <= 0 for e in estimates):
        raise NotTestable("a campaign's ratio is not positive: cannot pool on the log scale")
    est, lo, hi, df = pooled_t([e.estimate for e in estimates], log=scale == "log", confidence=confidence)
    floor = _within_floor(estimates, scale == "log", confidence)
    if floor is not None:  # never narrower than the campaigns' own intervals pooled as if no campaign varied
        centre = math.log(est) if scale == "log" else est
        half = max((math.log(hi) - centre) if scale == "log" else hi - centre, floor)
        lo, hi = ((math.exp(centre - half), math.exp(centre + half)) if scale == "log"
                  else (centre - half, centre + half))
    each = estimates[0].basis
    each = each.split(": ", 1)[1] if each.startswith("campaign ") and ": " in each else each
    return Estimate(est, lo, hi,
                    f"{len(estimates)} campaigns pooled: t on {df} df from the spread of their estimates"
                    f"{' (log scale)' if scale == 'log' else ''}; each: {each}",
                    sum(e.n for e in estimates), estimates[0].compared, len(estimates), list(estimates))


def _within_floor(estimates: Sequence[Estimate], log: bool, confidence: float) -> float | None:
    """Half-width of the fixed-effect (inverse-variance) pool of the campaigns' own intervals, on the
    pooling scale, read as normal intervals: the least the pooled interval can claim, since it cannot know
    the quantity better than all the campaigns' repetitions together (two campaigns that agree by chance
    would otherwise give a t interval narrower than either's own). None when an interval is missing."""
    z = float(sps.norm.ppf((1 + confidence) / 2))
    inv = 0.0
    for e in estimates:
        lo, hi = e.ci_lo, e.ci_hi
        if not (math.isfinite(lo) and math.isfinite(hi)) or (log and lo <= 0):
            return None
        width = (math.log(hi) - math.log(lo)) if log else hi - lo
        se = width / (2 * z)
        if se <= 0:
            return None
        inv += 1 / (se * se)
    return z / math.sqrt(inv)
