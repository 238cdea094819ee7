"""A trend of a ratio along a factor: (a/b at the factor's high level) / (a/b at its low level), the
interaction contrast of a full factorial's cell means (seed 001's "the more client threads, the smaller the
gap between remote and local storage": the ratio remote/local at the most threads over that at the fewest).

The estimate is the design's own (:func:`dbmatrix.analyse.contrasts.cell_means_estimate` with the trend
weights of :func:`dbmatrix.analyse.cell_model.trend_weights`): cell means, variance from every level that
varies (runs, dataset loads, campaigns), Satterthwaite df. A design that does not cross the two factors in
full has no such contrast of cell means: the claim is then not identified (no reduced model stands in: an
interaction is exactly what a reduced model drops).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pandas as pd

from dbmatrix.analyse.contrasts import (
    METRIC_LABELS,
    Estimate,
    NotIdentified,
    NotTestable,
    cell_means_estimate,
    compared_text,
    positive_values,
    resolve_level,
)
from dbmatrix.analyse.stats import level_key
from dbmatrix.spec.factors import MODEL_FACTORS, factor_unit, factor_word


def trend_text(factor: str, a: Any, b: Any, trend: tuple[str, Any, Any], at: Mapping[str, Any]) -> str:
    """``medium remote / nbdlocal at ... at 32 threads over at 2 threads``."""
    over, hi, lo = trend

    def level(v: Any) -> str:
        unit = factor_unit(over)
        return f"{v}{unit}" if unit else f"{v} {factor_word(over)}"

    return f"{compared_text(factor, a, b, at)} at {level(hi)} over at {level(lo)}"


def trend_estimate(runs: pd.DataFrame, metric: str, factor: str, a: Any, b: Any, trend: tuple[str, Any, Any],
                   at: Mapping[str, Any] | None = None, confidence: float = 0.95) -> Estimate:
    """The ratio of ratios (module doc); raises NotTestable when a level is missing, NotIdentified when the
    factors are not crossed in full."""
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
    held = {f: resolve_level(data, f, v) for f, v in (at or {}).items()}
    est = cell_means_estimate(data, metric, MODEL_FACTORS, factor, a, b, held,
                              trend_text(factor, a, b, (over, hi, lo), held), confidence, trend=(over, hi, lo))
    if est is None:
        raise NotIdentified(f"{factor_word(factor)} and {factor_word(over)} are not crossed in full at these "
                            "levels: no contrast of cell means measures the trend")
    return replace(est, basis=f"ratio of ratios, {est.basis}")
