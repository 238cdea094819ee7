"""A trend of a ratio along a factor: (a/b at the factor's high level) / (a/b at its low level), the
interaction contrast of a full factorial's cell means (seed 001's "the more client threads, the smaller the
gap between remote and local storage": the ratio remote/local at the most threads over that at the fewest).

The estimate is the design's own (:func:`dbmatrix.analyse.cell_model.cell_contrast` with its trend
weights): cell means, variance from every level that varies (runs, dataset loads, campaigns), Satterthwaite
df. A design that does not cross the two factors in full has no such contrast of cell means: the claim is
then not identified (no reduced model stands in: an interaction is exactly what a reduced model drops).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from dbmatrix.analyse.cell_model import cell_contrast, cell_keys
from dbmatrix.analyse.contrasts import (
    METRIC_LABELS,
    Estimate,
    NotIdentified,
    NotTestable,
    compared_text,
    positive_values,
    resolve_level,
    run_ids,
    varied,
)
from dbmatrix.analyse.stats import level_key
from dbmatrix.analyse.stats.intervals import exp_or_inf
from dbmatrix.spec.factors import DATASET_FACTORS, MODEL_FACTORS, factor_unit, factor_word


def trend_text(factor: str, a: Any, b: Any, trend: tuple[str, Any, Any], at: Mapping[str, Any]) -> str:
    """``medium remote / nbdlocal at 32 threads over at 2 threads``."""
    over, hi, lo = trend

    def level(v: Any) -> str:
        unit = factor_unit(over)
        return f"{v}{unit}" if unit else f"{v} {factor_word(over)}"

    return f"{compared_text(factor, a, b, at)} at {level(hi)} over at {level(lo)}"


def trend_estimate(runs: pd.DataFrame, metric: str, factor: str, a: Any, b: Any, trend: tuple[str, Any, Any],
                   at: Mapping[str, Any] | None = None, confidence: float = 0.95) -> Estimate:
    """The ratio of ratios (module doc); raises NotTestable when a level is missing, NotIdentified when the
    factors are not crossed in full."""
    at = dict(at or {})
    data = positive_values(runs, metric)
    if data.empty:
        raise NotTestable(f"{METRIC_LABELS.get(metric, metric)} was not measured")
    over = trend[0]
    if over not in data.columns:
        raise NotTestable(f"{factor_word(over)} not in the data")
    a, b = resolve_level(data, factor, a), resolve_level(data, factor, b)
    hi, lo = resolve_level(data, over, trend[1]), resolve_level(data, over, trend[2])
    if level_key(a) == level_key(b):
        raise NotTestable(f"{factor}: {a} against itself")
    if level_key(hi) == level_key(lo):
        raise NotTestable(f"{over}: {hi} against itself")
    at = {f: resolve_level(data, f, v) for f, v in at.items()}
    cols = varied(data, list(dict.fromkeys([f for f in MODEL_FACTORS if f in data.columns] + [factor, over, *at])))
    loads = [f for f in cols if f in DATASET_FACTORS]
    cc = cell_contrast(data, metric, factor, a, b, at, cols, loads, confidence, trend=(over, hi, lo))
    if cc is None:
        raise NotIdentified(f"{factor_word(factor)} and {factor_word(over)} are not crossed in full at these "
                            "levels: no contrast of cell means measures the trend")
    keys = cell_keys(data, cols)
    ids = run_ids(data[keys.isin(cc.used).to_numpy()])
    return Estimate(math.exp(cc.estimate), exp_or_inf(cc.lo) if math.isfinite(cc.lo) else math.nan,
                    exp_or_inf(cc.hi) if math.isfinite(cc.hi) else math.nan, f"ratio of ratios, {cc.basis}",
                    cc.n_runs, trend_text(factor, a, b, (over, hi, lo), at), cc.campaigns, run_ids=ids,
                    confidence=confidence, df=cc.df, heterogeneity=cc.heterogeneity)
