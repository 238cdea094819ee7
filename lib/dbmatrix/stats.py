"""Statistics over repetitions (the unit of replication): seeded bootstrap CIs and ratios.

Pure functions of DataFrames/arrays. Seeds are explicit and derived from the cell's identity,
so the same raw data gives the same numbers whatever the row order.
"""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np
import pandas as pd

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 20261122


def stable_seed(base: int, label: str) -> int:
    return (base * 1_000_003 + zlib.crc32(label.encode())) % (2**32)


def bootstrap_mean_ci(
    values: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean. With one value there is no interval (NaN, NaN).

    With very few repetitions the percentile interval is too narrow; callers report n beside it.
    """
    x = np.sort(np.asarray(values, dtype=float))  # sorted: the CI must not depend on row order
    x = x[~np.isnan(x)]
    if x.size < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    means = x[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return (float(lo), float(hi))


def bootstrap_ratio_ci(
    numerator: Sequence[float] | np.ndarray,
    denominator: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """Ratio of means with a bootstrap CI that resamples the repetitions of both sides independently."""
    a = np.sort(np.asarray(numerator, dtype=float))
    b = np.sort(np.asarray(denominator, dtype=float))
    point = float(a.mean() / b.mean()) if a.size and b.size else float("nan")
    if a.size < 2 or b.size < 2:
        return (point, float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    ra = a[rng.integers(0, a.size, size=(n_resamples, a.size))].mean(axis=1)
    rb = b[rng.integers(0, b.size, size=(n_resamples, b.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ra / rb, [alpha, 1 - alpha])
    return (point, float(lo), float(hi))


def cell_summary(
    runs: pd.DataFrame,
    metric: str = "tps",
    by: Sequence[str] = ("cell_id",),
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Mean, SD, CV and bootstrap CI of `metric` per group of repetitions."""
    rows = []
    for key, g in runs.groupby(list(by), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        v = g[metric].astype(float).to_numpy()
        label = "|".join(map(str, key)) + f"|{metric}"
        lo, hi = bootstrap_mean_ci(v, confidence, seed=stable_seed(seed, label))
        mean = float(np.mean(v))
        sd = float(np.std(v, ddof=1)) if v.size > 1 else float("nan")
        rows.append({**dict(zip(by, key)), "metric": metric, "n": int(v.size), "mean": mean, "sd": sd,
                     "cv": sd / mean if mean else float("nan"), "ci_lo": lo, "ci_hi": hi,
                     "confidence": confidence})
    return pd.DataFrame(rows)


def ratios_to_baseline(
    runs: pd.DataFrame,
    factor: str,
    baseline_level: object,
    metric: str = "tps",
    others: Sequence[str] = (),
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """For each level of `factor` (within each combination of `others`), the ratio of its mean
    `metric` to the baseline level's, with a bootstrap CI; absolute means beside the ratio."""
    rows = []
    groups = runs.groupby(list(others), sort=True) if others else [((), runs)]
    for okey, g in groups:
        okey = okey if isinstance(okey, tuple) else (okey,)
        base = g.loc[g[factor] == baseline_level, metric].astype(float).to_numpy()
        if base.size == 0:
            continue
        for level, gl in g.groupby(factor, sort=True):
            v = gl[metric].astype(float).to_numpy()
            label = "|".join(map(str, (*okey, factor, level, metric)))
            r, lo, hi = bootstrap_ratio_ci(v, base, seed=stable_seed(seed, label))
            rows.append({**dict(zip(others, okey)), factor: level, "baseline": baseline_level,
                         "metric": metric, "n": int(v.size), "n_baseline": int(base.size),
                         "mean": float(v.mean()), "baseline_mean": float(base.mean()),
                         "ratio": r, "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows)
