"""A difference of two shares (percent of time, 0-100) in the campaign-level model, bounded to its range.

Each side's share is estimated on the logit scale (log odds of the per-run share, clipped to
[SHARE_CLIP, 1 - SHARE_CLIP]) in the same model as every ratio: campaign-level cell means with a campaign block
and the runs' variance as a floor (:func:`dbmatrix.analyse.contrasts.ratio_estimate`'s machinery); each
side's interval is back-transformed into 0-100 %, and the difference gets the MOVER interval (Newcombe's
method of variance estimates recovery): L = d - sqrt((p_a - l_a)^2 + (u_b - p_b)^2), U = d + sqrt((u_a -
p_a)^2 + (p_b - l_b)^2), which never leaves -100 .. +100 points."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.campaign_model import CAMPAIGN, campaign_cell_means, campaigns_of
from dbmatrix.analyse.contrasts import (
    BLOCK,
    Estimate,
    NotTestable,
    compared_text,
    fit_log_model,
    resolve_level,
    run_floor,
    run_ids,
)

SHARE_CLIP = 0.001  # a share of 0 or 100 % has no log odds: clipped to 0.1 % .. 99.9 %
ODDS = "_odds"


def share_difference(runs: pd.DataFrame, metric: str, factor: str, a: Any, b: Any,
                     confidence: float = 0.95) -> Estimate:
    """Share (percent) at level `a` minus at level `b` of `factor`, in points, with its MOVER interval."""
    if metric not in runs.columns:
        raise NotTestable(f"no {metric} in the runs")
    pct = pd.to_numeric(runs[metric], errors="coerce") / 100.0
    data = runs[pct.notna()].copy()
    if data.empty:
        raise NotTestable(f"{metric} was not measured")
    p = pct[pct.notna()].clip(SHARE_CLIP, 1 - SHARE_CLIP)
    data[ODDS] = p / (1 - p)
    a, b = resolve_level(data, factor, a), resolve_level(data, factor, b)
    k = len(campaigns_of(data))
    if k >= 2:
        means = campaign_cell_means(data, ODDS, [factor])
        ms, df_runs = run_floor(data, ODDS, [factor])
        n_bar = float(len(means) / np.sum(1.0 / means["n_runs"].to_numpy(dtype=float)))
        floor = (ms / n_bar, df_runs) if df_runs > 0 else None
        model = fit_log_model(means, [factor], ODDS, interactions=False, block=CAMPAIGN, floor=floor)
        how = f"campaign-level cell means of {len(data)} runs in {k} campaigns"
    else:
        block = BLOCK if BLOCK in data.columns and data[BLOCK].nunique() > 1 else None
        model = fit_log_model(data, [factor], ODDS, interactions=False, block=block)
        how = f"{len(data)} runs" + ("; replicate block as a term" if model is not None and model.blocks else "")
    if model is None:
        return _point_only(data, factor, a, b, how, k)
    sides = []
    for level in (a, b):
        odds, lo, hi = model.mean({factor: level}, confidence)
        sides.append(tuple(100 * o / (1 + o) for o in (odds, lo, hi)))
    df = min(model.df_resid, model.floor_df) if model.floored else model.df_resid  # what the interval used
    (pa, la, ua), (pb, lb, ub) = sides
    d = pa - pb
    lo_d = d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    hi_d = d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    basis = (f"shares on the logit scale ({how}; t on {df} df), each side back in 0-100 %: {pa:.3g} % "
             f"[{la:.3g}, {ua:.3g}] vs {pb:.3g} % [{lb:.3g}, {ub:.3g}]; difference by MOVER (Newcombe)")
    return Estimate(d, lo_d, hi_d, basis, len(data), compared_text(factor, a, b), k, run_ids=run_ids(data))


def _point_only(data: pd.DataFrame, factor: str, a: Any, b: Any, how: str, k: int) -> Estimate:
    """Without residual df (one run per level, as a later campaign of one run per cell has): each side's share
    from its runs' mean log odds, the difference without an interval (a campaign's point estimate, a
    consistency check and the boot check's input, never a decision). NotTestable when a side has no run."""
    sides = []
    for level in (a, b):
        odds = data.loc[data[factor].astype(str) == str(level), ODDS]
        if odds.empty:
            raise NotTestable(f"{factor} {a} vs {b}: no run at {factor} {level}")
        o = float(np.exp(np.log(odds.to_numpy(dtype=float)).mean()))
        sides.append(100 * o / (1 + o))
    pa, pb = sides
    basis = (f"shares on the logit scale ({how}; no residual df: no interval), each side back in 0-100 %: "
             f"{pa:.3g} % vs {pb:.3g} %")
    return Estimate(pa - pb, math.nan, math.nan, basis, len(data), compared_text(factor, a, b), k,
                    run_ids=run_ids(data))


def bounded(lo: float, hi: float, limits: Sequence[float] = (-100.0, 100.0)) -> bool:
    return limits[0] <= lo <= hi <= limits[1]
