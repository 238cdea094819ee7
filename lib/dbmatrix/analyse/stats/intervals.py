"""Intervals that keep their coverage at a few repetitions (pure): seeded percentile bootstraps of a mean
and of a ratio of means (one sample, or many columns at once), Student-t and Welch log-ratio intervals,
Hedges' g and Holm's adjustment; seeds derived from labels, so the numbers do not depend on row order.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np
from scipy import special
from scipy import stats as sps

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


def t_mean_ci(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Student-t CI of the mean (NaN below two values): nominal coverage even at 3 repetitions, where the
    percentile bootstrap cannot reach beyond the data's range (it covers ~75 % at n = 3)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return (float("nan"), float("nan"))
    half = sps.t.ppf((1 + confidence) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return (float(x.mean() - half), float(x.mean() + half))


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


def hedges_g(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Standardised mean difference (a - b) / pooled SD with the exact small-sample correction
    J = Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2)), df = n_a + n_b - 2 (Hedges 1981)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    df = x.size + y.size - 2
    if x.size < 2 or y.size < 2:
        return float("nan")
    sp = math.sqrt(((x.size - 1) * x.var(ddof=1) + (y.size - 1) * y.var(ddof=1)) / df)
    if sp == 0:
        return float("nan")
    j = math.exp(special.gammaln(df / 2) - special.gammaln((df - 1) / 2)) / math.sqrt(df / 2)
    return float((x.mean() - y.mean()) / sp * j)


def exp_or_inf(x: float) -> float:
    """exp(x), or inf where it overflows: an interval's end at a very high level on few df (a look of a
    campaign run until decided) is unbounded, not an error."""
    return math.exp(x) if x < 709.0 else math.inf


def welch_log_ratio(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                    confidence: float = 0.95) -> dict[str, float]:
    """Welch's t test on log values: a test suited to few repetitions with unequal variances, whose CI
    of the log difference is a CI of the ratio of geometric means a/b.

    Returns ratio, ci_lo, ci_hi, t, df, p (two-sided), hedges_g (on the log scale), n_a, n_b, and the
    arithmetic means (absolute numbers to print beside the ratio). Non-positive values are rejected."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("welch_log_ratio: values must be positive (the test works on their logarithms)")
    out = {"n_a": x.size, "n_b": y.size, "mean_a": float(x.mean()) if x.size else math.nan,
           "mean_b": float(y.mean()) if y.size else math.nan, "ratio": math.nan, "ci_lo": math.nan,
           "ci_hi": math.nan, "t": math.nan, "df": math.nan, "p": math.nan, "hedges_g": math.nan}
    if x.size == 0 or y.size == 0:
        return out
    lx, ly = np.log(x), np.log(y)
    diff = float(lx.mean() - ly.mean())
    out["ratio"] = math.exp(diff)
    if x.size < 2 or y.size < 2:
        return out
    va, vb = lx.var(ddof=1) / x.size, ly.var(ddof=1) / y.size
    se = math.sqrt(va + vb)
    if se == 0:
        out.update(ci_lo=out["ratio"], ci_hi=out["ratio"], p=1.0 if diff == 0 else 0.0)
        return out
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    t = diff / se
    half = sps.t.ppf((1 + confidence) / 2, df) * se
    out.update(ci_lo=exp_or_inf(diff - half), ci_hi=exp_or_inf(diff + half), t=t, df=df,
               p=float(2 * sps.t.sf(abs(t), df)), hedges_g=hedges_g(lx, ly))
    return out


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control); NaNs stay NaN and are not counted
    in the family."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.minimum(np.maximum.accumulate((m - np.arange(m)) * p[order]), 1.0)
    out[order] = adj
    return out


def _canonical(V: np.ndarray) -> np.ndarray:
    """Rows sorted by the first column, ties by the next ones: results must not depend on row order."""
    return V[np.lexsort(V.T[::-1])] if V.shape[0] > 1 else V


def mask_groups(V: np.ndarray) -> dict[bytes, list[int]]:
    """Columns of V grouped by which rows are finite (metrics measured on the same runs go together)."""
    groups: dict[bytes, list[int]] = {}
    finite = np.isfinite(V)
    for j in range(V.shape[1]):
        groups.setdefault(finite[:, j].tobytes(), []).append(j)
    return groups


def _resampled_means(V: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `n_resamples` bootstrap resamples of the rows of V, one row per column of V (m x R).

    The draw is ``rng.integers(0, n, (R, n))`` as in :func:`bootstrap_mean_ci`; the means come from the
    resample counts times V (a matrix product), which is much faster than gathering R x n x m values."""
    n = V.shape[0]
    idx = rng.integers(0, n, size=(n_resamples, n))
    offsets = (idx + n * np.arange(n_resamples)[:, None]).ravel()
    counts = np.bincount(offsets, minlength=n * n_resamples).reshape(n_resamples, n).astype(float)
    return (V.T @ counts.T) / n


def bootstrap_mean_cols(V: np.ndarray, confidence: float = 0.95, n_resamples: int = DEFAULT_RESAMPLES,
                        seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI of the mean of each column of V (rows: repetitions, resampled together,
    so one draw serves every metric). With one column: :func:`bootstrap_mean_ci` up to rounding."""
    m = V.shape[1]
    if V.shape[0] < 2:
        return np.full(m, np.nan), np.full(m, np.nan)
    means = _resampled_means(_canonical(V), n_resamples, np.random.default_rng(seed))
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha], axis=1)
    return lo, hi


def level_key(v: object) -> object:
    """Factor levels as comparable keys: None and NaN are one level."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "\0none"
    return v


def welch_cols(A: np.ndarray, B: np.ndarray, confidence: float) -> dict[str, np.ndarray]:
    """:func:`welch_log_ratio` for every column of positive A (n_a x m) against B (n_b x m)."""
    la, lb = np.log(A), np.log(B)
    diff = la.mean(axis=0) - lb.mean(axis=0)
    nan = np.full(A.shape[1], np.nan)
    out = {"ratio_gm": np.exp(diff), "welch_ci_lo": nan, "welch_ci_hi": nan, "welch_p": nan}
    if A.shape[0] < 2 or B.shape[0] < 2:
        return out
    va, vb = la.var(axis=0, ddof=1) / A.shape[0], lb.var(axis=0, ddof=1) / B.shape[0]
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (va + vb) ** 2 / (va**2 / (A.shape[0] - 1) + vb**2 / (B.shape[0] - 1))
        half = sps.t.ppf((1 + confidence) / 2, df) * se
        p = 2 * sps.t.sf(np.abs(diff / se), df)
    zero = se == 0
    out["welch_ci_lo"] = np.where(zero, np.exp(diff), np.exp(diff - half))
    out["welch_ci_hi"] = np.where(zero, np.exp(diff), np.exp(diff + half))
    out["welch_p"] = np.where(zero, np.where(diff == 0, 1.0, 0.0), p)
    return out


def bootstrap_ratio_cols(a: np.ndarray, b: np.ndarray, confidence: float = 0.95,
                         n_resamples: int = DEFAULT_RESAMPLES,
                         seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`bootstrap_ratio_ci` for every column of a (n_a x m) against b (n_b x m): the repetitions of
    each side are resampled together across columns. A zero baseline mean gives NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        base = b.mean(axis=0)
        point = np.where(base != 0, a.mean(axis=0) / base, np.nan)
        nan = np.full(a.shape[1], np.nan)
        if a.shape[0] < 2 or b.shape[0] < 2:
            return point, nan, nan
        rng = np.random.default_rng(seed)
        ra = _resampled_means(_canonical(a), n_resamples, rng)
        rb = _resampled_means(_canonical(b), n_resamples, rng)
        alpha = (1 - confidence) / 2
        lo, hi = np.quantile(ra / rb, [alpha, 1 - alpha], axis=1)
    return point, np.where(base != 0, lo, np.nan), np.where(base != 0, hi, np.nan)


def self_ratio(r: np.ndarray) -> np.ndarray:
    """A ratio of a cell to itself: 1 where defined (NaN stays NaN, e.g. a zero mean)."""
    return np.where(np.isfinite(r), 1.0, np.nan)


def t_halfwidth_pct(values: Sequence[float] | np.ndarray, confidence: float = 0.95) -> float:
    """Half-width of the Student-t CI of the mean, in % of the mean (NaN below two values).

    Used as the adaptive stopping rule: the percentile bootstrap is too narrow at 3-5 repetitions."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return float("nan")
    mean = x.mean()
    if mean <= 0:
        return float("inf")
    return float(sps.t.ppf((1 + confidence) / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size) / mean * 100)
