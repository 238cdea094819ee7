"""The spec's declared comparisons in a fractional design: contrasts of the factorial model.

A fraction has no two cells that differ in the compared factor only, so a two-sample test must pool
the runs over the free factors, whose effects then count as noise (in the storage matrix's 2^(5-1)
fraction: 12 against 12 runs over three free factors, Holm p 0.38 where the model gives 1e-9). The
factorial model (log metric on main effects and two-way interactions, sum-to-zero coding; resolution V
keeps them apart) removes those effects instead: each comparison is the model's contrast between the two
levels, at the comparison's ``within`` levels, averaged over the factors it leaves free, with the model's
t-based CI and p (residual df of the model). Holm over all rows, as for the two-sample tests
(:func:`dbmatrix.analyse.effects.pairwise_comparisons`, which full designs keep).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.contrasts import LogModel, NotTestable, fit_log_model, positive_values
from dbmatrix.analyse.effects import (
    check_comparison,
    comparison_label,
    comparisons_frame,
    pairwise_comparisons,
)
from dbmatrix.analyse.stats import level_key

MODEL_BASIS = "factorial model contrast"


def model_contrast_test(model: LogModel, at_a: Mapping[str, Any], at_b: Mapping[str, Any],
                        confidence: float = 0.95) -> dict[str, float]:
    """log(metric) at `at_a` minus at `at_b` (free factors averaged): estimate, se, t, df, two-sided p and
    the CI, the ratio and CI back on the metric's scale."""
    L = model.row(at_a) - model.row(at_b)
    est = float(L @ model.params)
    se = float(math.sqrt(max(float(L @ model.cov @ L), 0.0)))
    df = model.df_resid
    half = float(sps.t.ppf((1 + confidence) / 2, df)) * se
    t = est / se if se > 0 else (0.0 if est == 0 else math.inf)
    p = float(2 * sps.t.sf(abs(t), df)) if se > 0 else (1.0 if est == 0 else 0.0)
    return {"log_ratio": est, "se": se, "t": t, "df": float(df), "p": p, "ratio": math.exp(est),
            "ci_lo": math.exp(est - half), "ci_hi": math.exp(est + half)}


def _count(runs: pd.DataFrame, at: Mapping[str, Any]) -> int:
    mask = np.ones(len(runs), dtype=bool)
    for f, v in at.items():
        mask &= (runs[f].map(level_key) == level_key(v)).to_numpy()
    return int(mask.sum())


def model_pairwise_comparisons(runs: pd.DataFrame, comparisons: Sequence[Any], factors: Sequence[str],
                               metric: str = "tps", *, level_order: Mapping[str, Sequence[Any]] | None = None,
                               confidence: float = 0.95, alpha: float = 0.05) -> pd.DataFrame:
    """Each declared comparison as the factorial model's contrast (see the module docstring), one row per
    combination of its ``within`` levels; the same columns as the two-sample table
    (:data:`~dbmatrix.analyse.effects.PAIRWISE_COLUMNS` plus one per factor). ``mean_a``/``mean_b`` are the
    model's geometric means at the two levels (so ``ratio_of_means`` = ``ratio``), ``n_a``/``n_b`` the runs
    at each level (within levels), ``averaged_over`` the free factors, ``hedges_g`` NaN (no two samples).
    When the two-way model is not estimable the main-effects model is used, and when neither is the
    two-sample tests are returned (``basis`` says which)."""
    factors = [f for f in factors if f in runs.columns]
    if metric not in runs.columns:
        raise ValueError(f"runs: missing column {metric!r}")
    for i, c in enumerate(comparisons):
        check_comparison(c, i, factors)
    data = positive_values(runs, metric)
    model = fit_log_model(data, factors, metric, level_order=level_order)
    if model is None:
        model = fit_log_model(data, factors, metric, interactions=False, level_order=level_order)
    if model is None:
        return pairwise_comparisons(runs, comparisons, factors, metric, confidence, alpha)
    basis = f"{MODEL_BASIS} ({'two-way' if model.name == 'main+2way' else 'main-effects'} model, " \
            f"{model.n} runs, t with {model.df_resid} df)"
    rows: list[dict[str, Any]] = []
    for i, c in enumerate(comparisons):
        f, a, b, within = check_comparison(c, i, factors)
        label = comparison_label(f, a, b, within)
        held = [w for w in within if w in model.factors]
        combos = [()] if not held else sorted(
            {tuple(level_key(v) for v in r) for r in data[held].itertuples(index=False, name=None)},
            key=lambda k: tuple(_position(model, w, v) for w, v in zip(held, k)))
        before = len(rows)
        for combo in combos if f in model.factors else ():
            at = {w: _level(model, w, k) for w, k in zip(held, combo)}
            try:
                res = model_contrast_test(model, {**at, f: a}, {**at, f: b}, confidence)
                mean_a, mean_b = model.mean({**at, f: a})[0], model.mean({**at, f: b})[0]
            except NotTestable:
                continue
            free = [x for x in model.factors if x != f and x not in at]
            rows.append({"comparison": label, "factor": f, "a": a, "b": b, "within": ",".join(within),
                         "pooled_over": "", **{x: at.get(x) for x in factors if x != f},
                         "n_a": _count(data, {**at, f: a}), "n_b": _count(data, {**at, f: b}),
                         "mean_a": mean_a, "mean_b": mean_b, "ratio_of_means": mean_a / mean_b,
                         "ratio": res["ratio"], "ci_lo": res["ci_lo"], "ci_hi": res["ci_hi"], "t": res["t"],
                         "df": res["df"], "p": res["p"], "hedges_g": np.nan, "averaged_over": ",".join(free),
                         "basis": basis})
        if len(rows) == before:
            rows.append({"comparison": label, "factor": f, "a": a, "b": b, "within": ",".join(within),
                         "pooled_over": "", "n_a": 0, "n_b": 0, "mean_a": np.nan, "mean_b": np.nan,
                         "ratio_of_means": np.nan, "ratio": np.nan, "ci_lo": np.nan, "ci_hi": np.nan,
                         "t": np.nan, "df": np.nan, "p": np.nan, "hedges_g": np.nan, "averaged_over": "",
                         "basis": f"not estimable: {f} {a} vs {b} not both in the model"})
    return comparisons_frame(rows, factors, alpha)


def _position(model: LogModel, f: str, key: Any) -> int:
    return [level_key(v) for v in model.levels[f]].index(key)


def _level(model: LogModel, f: str, key: Any) -> Any:
    return model.levels[f][_position(model, f, key)]
