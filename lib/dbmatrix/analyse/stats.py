"""Statistics a reviewer would trust. Pure functions of DataFrames/arrays, no I/O.

- Per run (per-second series and histogram): warm-up truncation (MSER) and a steady-state test with
  power (drift of the kept 1-s samples with a CI from a trend with AR(1) errors, judged against a +-5 %
  band; :func:`steady_state`), the per-second throughput distribution, hardware efficiency per transaction
  and space/write amplification (:func:`efficiency`), latency percentiles from histograms merged by
  adding counts (:func:`merged_percentiles`).
- Across runs (repetitions are the unit of replication): seeded bootstrap CIs of means and of ratios to
  a baseline cell, Student-t and Welch intervals that keep their coverage at 3-5 repetitions, Holm,
  Hedges' g, the noise report and the adaptive-repetition rule (:func:`adaptive_additions`).

Seeds are explicit and derived from the cells' identities, so the same raw data gives the same numbers
whatever the row order.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np
import pandas as pd
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
    `metric` to the baseline level's, with a bootstrap CI; absolute means beside the ratio. The baseline
    level against itself is 1 with no interval (NaN CI)."""
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
            if level_key(level) == level_key(baseline_level):
                r, lo, hi = (1.0 if math.isfinite(r) else r), float("nan"), float("nan")
            rows.append({**dict(zip(others, okey)), factor: level, "baseline": baseline_level,
                         "metric": metric, "n": int(v.size), "n_baseline": int(base.size),
                         "mean": float(v.mean()), "baseline_mean": float(base.mean()),
                         "ratio": r, "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows)


# =============================================================================== per run: steady state

STEADY_BATCH_S = 1  # truncation: MSER-1 (MSER on the 1-s samples themselves)
MIN_STEADY_S = 20  # shorter series are neither truncated nor tested
MIN_DRIFT_SAMPLES = 20  # kept 1-s samples the drift test needs; with fewer a run is untested (too_short)
STABLE_BAND_PCT = 5.0  # "stable": the drift across the kept window lies within +-5 % of its mean
DRIFT_CONFIDENCE = 0.95
AR1_BIAS = (3.0, 8.0)  # phi = (r1 + a/L) / (1 - b/L): small-sample correction, see drift_fgls
AR1_PHI_MAX = 0.9  # cap of the bias-corrected AR(1) coefficient (a 20-60 s window cannot tell more)
DRIFT_CHUNK_CELLS = 2_000_000  # samples per drift_fgls call
STALL_FRACTION = 0.5  # a stall second: tps below this fraction of the window's median
DRIFT_METHOD = "OLS trend with AR(1) errors, Prais-Winsten FGLS on 1-s samples"
UNTESTED_REASONS = ("too_short", "no_intervals")  # steady_reason of runs the drift test could not check

STEADY_COLUMNS = (
    "run_id", "cell_id", "series_s", "trim_method", "trim_s", "steady_s", "steady", "steady_reason",
    "flagged", "drift_pct", "drift_ci_lo", "drift_ci_hi", "drift_p", "drift_phi", "tps_steady",
    "sec_tps_min", "sec_tps_p1", "sec_tps_p5", "sec_tps_median", "sec_tps_cv", "stall_s", "zero_s",
    "err_ps", "reconn_ps",
)


def _row_quantiles(sorted_rows: np.ndarray, counts: np.ndarray, q: float) -> np.ndarray:
    """numpy's default (linear) quantile of each row's first `counts[i]` sorted values."""
    pos = q * (counts - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, counts - 1)
    rows = np.arange(sorted_rows.shape[0])
    a, b = sorted_rows[rows, lo], sorted_rows[rows, hi]
    return a + (b - a) * (pos - lo)


def mser_truncation(X: np.ndarray, batch: int) -> np.ndarray:
    """MSER-``batch`` truncation point (in batches) of each row of X, searched over the first half of the
    batches: the d minimising ``var(Y[d:]) / (m - d)`` over the batch means Y (White 1997)."""
    k, n = X.shape
    m = n // batch
    Y = X[:, : m * batch].reshape(k, m, batch).mean(axis=2)
    s1 = np.cumsum(Y[:, ::-1], axis=1)[:, ::-1]  # sums of batches d.. m-1
    s2 = np.cumsum((Y * Y)[:, ::-1], axis=1)[:, ::-1]
    cnt = (m - np.arange(m)).astype(float)
    mser = (s2 / cnt - (s1 / cnt) ** 2) / cnt  # population variance of the kept batches / their number
    return np.argmin(mser[:, : m // 2 + 1], axis=1)  # the first minimum: deterministic


def drift_fgls(X: np.ndarray, start: np.ndarray, *, confidence: float = DRIFT_CONFIDENCE,
               phi_max: float = AR1_PHI_MAX) -> dict[str, np.ndarray]:
    """Drift of each row of X over its window [start, n): a linear trend with AR(1) errors fitted by
    Prais-Winsten FGLS on the 1-s samples (each window needs at least 4 samples).

    1. OLS line through the window; the lag-1 autocorrelation r1 of its residuals is biased down by
       about (2 + 6 phi) / L in a window of L samples (simulated for L = 20-120), and FGLS with an
       estimated phi is liberal in short windows besides; phi = (r1 + 3/L) / (1 - 8/L) (``AR1_BIAS``,
       calibrated by simulation: size 4.6-5.1 % at phi 0.35 and at most 5.8 % at phi 0.6 for L = 20-60,
       where (2, 6) gave up to 9 %), clipped to [0, ``phi_max``] (a negative estimate is taken as 0:
       conservative).
    2. Prais-Winsten: the window (divided by its mean) and the regressors (1, t) are whitened with phi,
       keeping the first sample scaled by sqrt(1 - phi^2); OLS on the whitened data gives the slope b and
       its standard error; Student t with L - 3 degrees of freedom (one spent on phi).

    Returns ``drift`` = b (L - 1), the change across the window relative to its mean (a fraction),
    ``ci_lo``/``ci_hi`` at ``confidence``, ``p`` (two-sided, slope 0) and ``phi``. The size of this test
    at the autocorrelation of real runs is checked by ``benchmarks/bench_steady_power.py``."""
    k, n = X.shape
    L = n - start
    if np.any(L < 4):
        raise ValueError("drift_fgls: every window needs at least 4 samples")
    j = np.arange(n)[None, :]
    inside = j < L[:, None]
    idx = np.minimum(start[:, None] + j, n - 1)
    W = X[np.arange(k)[:, None], idx]
    Lf = L.astype(float)
    mean = np.where(inside, W, 0.0).sum(axis=1) / Lf
    with np.errstate(divide="ignore", invalid="ignore"):
        Y = np.where(inside, W / mean[:, None], 0.0)  # relative to the window's mean
    Y = np.where(np.isfinite(Y), Y, 0.0)
    tc = np.where(inside, j - (Lf[:, None] - 1) / 2, 0.0)
    sxx = (tc * tc).sum(axis=1)
    b_ols = (tc * Y).sum(axis=1) / sxx
    e = np.where(inside, Y - (Y.sum(axis=1) / Lf)[:, None] - b_ols[:, None] * tc, 0.0)
    ss = (e * e).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where(ss > 0, (e[:, 1:] * e[:, :-1]).sum(axis=1) / ss, 0.0)
    phi = np.clip((r1 + AR1_BIAS[0] / Lf) / (1 - AR1_BIAS[1] / Lf), 0.0, phi_max)
    s0 = np.sqrt(1 - phi * phi)[:, None]
    ph = phi[:, None]
    t = j.astype(float)
    first = j == 0
    prev_y = np.concatenate([np.zeros((k, 1)), Y[:, :-1]], axis=1)
    ys = np.where(inside, np.where(first, s0 * Y, Y - ph * prev_y), 0.0)
    a_s = np.where(inside, np.where(first, s0, 1 - ph), 0.0)
    c_s = np.where(inside, np.where(first, 0.0, t - ph * (t - 1)), 0.0)
    saa, sac, scc = (a_s * a_s).sum(axis=1), (a_s * c_s).sum(axis=1), (c_s * c_s).sum(axis=1)
    say, scy = (a_s * ys).sum(axis=1), (c_s * ys).sum(axis=1)
    det = saa * scc - sac * sac
    b = (saa * scy - sac * say) / det
    a = (scc * say - sac * scy) / det
    r = ys - a[:, None] * a_s - b[:, None] * c_s
    s2 = (r * r).sum(axis=1) / (Lf - 2)
    se = np.sqrt(np.maximum(s2, 0.0) * saa / det)
    df = Lf - 3
    q = sps.t.ppf((1 + confidence) / 2, df)
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = np.where(se > 0, np.abs(b) / se, np.where(b == 0, 0.0, np.inf))
    ok = mean != 0
    drift = np.where(ok, b * (Lf - 1), np.nan)
    half = np.where(ok, q * se * (Lf - 1), np.nan)
    return {"drift": drift, "ci_lo": drift - half, "ci_hi": drift + half,
            "p": np.where(ok, 2 * sps.t.sf(tstat, df), np.nan), "phi": np.where(ok, phi, np.nan)}


def steady_verdict(flagged: np.ndarray, drift_pct: np.ndarray, lo_pct: np.ndarray, hi_pct: np.ndarray,
                   band_pct: float = STABLE_BAND_PCT) -> np.ndarray:
    """True (stable: the drift CI lies inside +-band), False (not stable: the CI lies entirely outside the
    band, or the test flags a drift, i.e. its CI excludes 0, whose estimate is beyond the band) or None
    (undetermined: too noisy to tell). Object array."""
    inside = (lo_pct >= -band_pct) & (hi_pct <= band_pct)
    outside = (lo_pct > band_pct) | (hi_pct < -band_pct) | (flagged & (np.abs(drift_pct) > band_pct))
    out = np.full(len(inside), None, dtype=object)
    out[outside] = False
    out[inside] = True
    return out


def _is(values: np.ndarray, flag: bool) -> np.ndarray:
    """Elementwise ``value is flag`` of an object array of True/False/None."""
    return np.fromiter((v is flag for v in values), dtype=bool, count=len(values))


def _steady_matrix(X: np.ndarray, E: np.ndarray, R: np.ndarray, *, batch: int, min_seconds: int,
                   min_samples: int, band_pct: float, confidence: float,
                   stall_fraction: float) -> dict[str, np.ndarray]:
    """Steady-state analysis of k series of equal length n (rows of X); E, R: err/s and reconn/s."""
    k, n = X.shape
    drift, lo, hi, p, phi = (np.full(k, np.nan) for _ in range(5))
    steady = np.full(k, None, dtype=object)
    flagged = np.full(k, None, dtype=object)
    reason = np.full(k, "too_short", dtype=object)
    if n >= min_seconds:
        method = f"MSER-{batch}"
        start = mser_truncation(X, batch) * batch
        tested = n - start >= min_samples
        rows = np.flatnonzero(tested)
        step = max(1, DRIFT_CHUNK_CELLS // n)  # bounded memory: drift_fgls holds ~15 arrays of rows x n
        for c0 in range(0, rows.size, step):
            sub = rows[c0:c0 + step]
            d = drift_fgls(X[sub], start[sub], confidence=confidence)
            drift[sub], lo[sub], hi[sub] = d["drift"] * 100, d["ci_lo"] * 100, d["ci_hi"] * 100
            p[sub], phi[sub] = d["p"], d["phi"]
        if tested.any():
            fl = (lo[tested] > 0) | (hi[tested] < 0)
            flagged[tested] = fl
            v = steady_verdict(fl, drift[tested], lo[tested], hi[tested], band_pct)
            steady[tested] = v
            is_true, is_false = _is(v, True), _is(v, False)
            reason[tested] = np.where(is_true, "", np.where(is_false, "drift", "undetermined"))
        start = np.where(_is(steady, False), 0, start)  # a run that drifts: summarised over its whole series
    else:
        method = "none"
        start = np.zeros(k, dtype=np.int64)
    inside = np.arange(n)[None, :] >= start[:, None]
    cnt = inside.sum(axis=1)
    Xw = np.where(inside, X, np.nan)
    srt = np.sort(Xw, axis=1)  # NaN (outside the window) sorts last
    mean = np.where(inside, X, 0.0).sum(axis=1) / cnt
    dev = np.where(inside, X - mean[:, None], 0.0)
    sd = np.sqrt((dev * dev).sum(axis=1) / np.maximum(cnt - 1, 1))
    sd = np.where(cnt > 1, sd, np.nan)
    median = _row_quantiles(srt, cnt, 0.5)
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = np.where(mean > 0, sd / mean, np.nan)
    return {
        "series_s": np.full(k, n), "trim_method": np.full(k, method, dtype=object), "trim_s": start,
        "steady_s": cnt, "steady": steady, "steady_reason": reason, "flagged": flagged, "drift_pct": drift,
        "drift_ci_lo": lo, "drift_ci_hi": hi, "drift_p": p, "drift_phi": phi,
        "tps_steady": mean, "sec_tps_min": srt[:, 0], "sec_tps_p1": _row_quantiles(srt, cnt, 0.01),
        "sec_tps_p5": _row_quantiles(srt, cnt, 0.05), "sec_tps_median": median, "sec_tps_cv": cv,
        "stall_s": (inside & (stall_fraction * median[:, None] > X)).sum(axis=1),
        "zero_s": (inside & (X == 0)).sum(axis=1),
        "err_ps": np.where(inside, E, 0.0).sum(axis=1) / cnt,
        "reconn_ps": np.where(inside, R, 0.0).sum(axis=1) / cnt,
    }


def steady_state(
    intervals: pd.DataFrame,
    *,
    batch_s: int = STEADY_BATCH_S,
    min_seconds: int = MIN_STEADY_S,
    min_samples: int = MIN_DRIFT_SAMPLES,
    band_pct: float = STABLE_BAND_PCT,
    confidence: float = DRIFT_CONFIDENCE,
    stall_fraction: float = STALL_FRACTION,
) -> pd.DataFrame:
    """Warm-up truncation, a steady-state test with power and the per-second throughput distribution,
    per run.

    Input: per-second rows as from ``ResultStore.load_intervals()`` (run_id, t_s, tps; cell_id,
    err_ps, reconn_ps when present), in any order. One output row per run (sorted by run_id):

    1. **Truncation: MSER-``batch_s``** (White 1997; MSER-5 by default, MSER-2 for the quick profile's
       10-s runs, see ``tables.steady_params``), named in ``trim_method``. Per-second tps are averaged in
       batches of ``batch_s`` s; the truncation point minimises ``var(Y[d:]) / (m - d)`` over the first
       half of the batches (outside it MSER picks noise at the end of stationary series). ``trim_s``
       seconds are dropped as residual warm-up. Series shorter than ``min_seconds`` are not truncated
       (``trim_method`` 'none'). MSER-5 rather than MSER-1: on 1-s samples MSER-1 trims more of flat
       series and of drifting ones and loses power (``benchmarks/bench_steady_power.py`` compares them).
    2. **Drift test** on the kept 1-s samples (:func:`drift_fgls`: trend with AR(1) errors,
       Prais-Winsten FGLS): ``drift_pct``, the change across the kept window relative to its mean, with
       its CI (``drift_ci_lo``/``drift_ci_hi``, ``confidence``), ``drift_p`` and the AR(1) coefficient
       used (``drift_phi``). ``flagged``: the CI excludes 0 (the series drifts). A window of fewer than
       ``min_samples`` samples is **untested**: ``steady`` None, reason ``too_short`` (never steady).
    3. **Verdict** against the band +-``band_pct`` % (:func:`steady_verdict`): ``steady`` True when the
       CI lies inside the band (reason ''); False (reason ``drift``) when the CI lies entirely outside it
       or the run is flagged with ``|drift_pct|`` > band (a significant drift beyond the band: at the noise
       of real runs the CI is too wide for the first rule alone to catch most 10 % drifts in 60 s); else
       None, reason ``undetermined`` (too noisy to tell). A run found not steady is summarised over its
       whole series (``trim_s`` 0), never silently trimmed.

    ``steady`` and ``flagged`` are object columns (True/False/None). Window statistics: ``tps_steady``
    (mean), min/p1/p5/median and CV of the per-second tps, ``stall_s`` (seconds below ``stall_fraction``
    x the window median, including zeros), ``zero_s``, and mean err/s and reconn/s. Rows are assumed to
    be one per second (``--report-interval=1``). Vectorised: series of equal length are one matrix.
    """
    for col in ("run_id", "t_s", "tps"):
        if col not in intervals.columns:
            raise ValueError(f"intervals: missing column {col!r}; needed: run_id, t_s, tps")
    if batch_s < 1 or min_seconds < 2 * batch_s:
        raise ValueError(f"steady_state: need batch_s >= 1 and min_seconds >= 2 * batch_s, got batch_s="
                         f"{batch_s!r}, min_seconds={min_seconds!r}")
    if min_samples < 4 or not band_pct > 0 or not 0 < confidence < 1:
        raise ValueError(f"steady_state: need min_samples >= 4, band_pct > 0, 0 < confidence < 1, got "
                         f"{min_samples!r}, {band_pct!r}, {confidence!r}")
    if intervals.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in STEADY_COLUMNS})
    codes, run_ids = pd.factorize(intervals["run_id"], sort=True)
    t = intervals["t_s"].to_numpy(dtype=float)
    presorted = bool(np.all(np.diff(codes) >= 0)) and bool(
        np.all((np.diff(t) > 0) | (np.diff(codes) > 0)))
    order = np.arange(len(codes)) if presorted else np.lexsort((t, codes))

    def column(name: str) -> np.ndarray:
        if name not in intervals.columns:
            return np.zeros(len(codes))
        return intervals[name].to_numpy(dtype=float, na_value=np.nan)[order]

    tps, err, reconn = column("tps"), column("err_ps"), column("reconn_ps")
    codes = codes[order]
    counts = np.bincount(codes, minlength=len(run_ids))
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    out: dict[str, np.ndarray] = {}
    for n in np.unique(counts):
        sel = np.flatnonzero(counts == n)
        idx = starts[sel, None] + np.arange(n)[None, :]
        res = _steady_matrix(tps[idx], err[idx], reconn[idx], batch=batch_s, min_seconds=min_seconds,
                             min_samples=min_samples, band_pct=band_pct, confidence=confidence,
                             stall_fraction=stall_fraction)
        for key, values in res.items():
            if key not in out:
                out[key] = np.empty(len(run_ids), dtype=values.dtype)
            out[key][sel] = values
    df = pd.DataFrame({"run_id": np.asarray(run_ids, dtype=object)})
    if "cell_id" in intervals.columns:
        df["cell_id"] = intervals["cell_id"].to_numpy()[order][starts]
    else:
        df["cell_id"] = None
    for key in STEADY_COLUMNS[2:]:
        df[key] = out[key]
    return df


def steady_state_series(tps: Sequence[float] | np.ndarray, **kwargs: object) -> dict[str, object]:
    """:func:`steady_state` of one per-second tps series (a convenience for notebooks and tests)."""
    x = np.asarray(tps, dtype=float)
    df = steady_state(pd.DataFrame({"run_id": "run", "t_s": np.arange(1, x.size + 1), "tps": x}),
                      **kwargs)  # type: ignore[arg-type]
    return df.iloc[0].drop(["run_id", "cell_id"]).to_dict()


# ============================================================================ per run: efficiency

# sysbench's oltp tables: id INT, k INT, c CHAR(120), pad CHAR(60); digits only, so one byte a char.
SYSBENCH_ROW_BYTES = 4 + 4 + 120 + 60
# Rows written per transaction with sysbench's default options (index_updates=1, non_index_updates=1,
# delete_inserts=1: one UPDATE of k, one of c, one DELETE and one INSERT).
# TPC-C: 0, because its rows differ in size per table and its writes per transaction per type, so
# no logical write volume (write_amp) or user data size (space_amp) is estimated: both are NaN.
ROW_WRITES_PER_TXN = {"oltp_read_write": 4, "oltp_write_only": 4, "oltp_read_only": 0,
                      "oltp_point_select": 0, "tpcc": 0}

EFFICIENCY_METRICS = (
    "host_cpu_us_per_txn", "mysqld_cpu_us_per_txn", "read_kb_per_txn", "write_kb_per_txn",
    "read_ios_per_txn", "write_ios_per_txn", "proc_read_kb_per_txn", "proc_write_kb_per_txn",
    "read_mb_s", "write_mb_s", "dev_util_pct", "host_iowait_cpus", "space_amp", "apparent_space_amp",
    "write_amp", "write_amp_proc",
)


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[name], errors="coerce").astype(float)


def efficiency(runs: pd.DataFrame, *, tables: int, table_size: int,
               workload: str = "oltp_read_write") -> pd.DataFrame:
    """Hardware cost per transaction and space/write amplification, per run (Small Datum style).

    Counters are exact deltas over the measured window (``window_s``); the transactions in that window
    are sysbench's ``transactions`` scaled by ``window_s / total_time_s`` (the collector's window and
    sysbench's run differ only by start/stop latency). Missing counters give NaN, never 0.

    - ``host_cpu_us_per_txn``: busy CPU time of the whole host (server *and* client) per transaction;
      ``mysqld_cpu_us_per_txn``: user+system CPU of mysqld only. Microseconds.
    - ``read_kb_per_txn``/``write_kb_per_txn``, ``read_ios_per_txn``/``write_ios_per_txn``: the data
      medium's block device (KiB, requests); ``proc_*_kb_per_txn``: mysqld's storage I/O from
      /proc/PID/io (0 on tmpfs, where no block device is involved).
    - ``read_mb_s``/``write_mb_s`` (10^6 bytes/s), ``dev_util_pct`` (device busy time / window),
      ``host_iowait_cpus`` (CPU-seconds of iowait per second).
    - ``space_amp``: on-disk (``du``) size of the loaded tables / their user data, rows x 188 bytes
      (id INT + k INT + CHAR(120) + CHAR(60)); indexes and page overhead count as amplification.
      ``apparent_space_amp`` uses the apparent file size instead (equal unless holes are punched).
    - ``write_amp``: device bytes written / logical bytes written, where logical = transactions x rows
      written per transaction (4 for oltp_read_write and oltp_write_only) x 188; NaN for read-only
      workloads. ``write_amp_proc`` uses mysqld's /proc/PID/io write bytes (no file-system overhead).
    The ``workload`` column of ``runs`` wins over the ``workload`` argument where present.
    """
    if tables < 1 or table_size < 1:
        raise ValueError(f"efficiency: tables ({tables!r}) and table_size ({table_size!r}) must be >= 1")
    w = runs["workload"] if "workload" in runs.columns else pd.Series(workload, index=runs.index)
    w = w.fillna(workload)
    unknown = sorted(set(w) - set(ROW_WRITES_PER_TXN))
    if unknown:
        raise ValueError(f"efficiency: unknown workload(s) {unknown}; allowed: {', '.join(ROW_WRITES_PER_TXN)}")
    window = _col(runs, "window_s")
    total = _col(runs, "total_time_s")
    txn = _col(runs, "transactions")
    scaled = txn * window / total
    txn = scaled.where(scaled.notna(), txn).where(lambda s: s > 0)
    user_bytes = pd.Series(float(tables * table_size * SYSBENCH_ROW_BYTES), index=runs.index).where(w != "tpcc")
    logical_w = txn * w.map(ROW_WRITES_PER_TXN).astype(float) * SYSBENCH_ROW_BYTES
    logical_w = logical_w.where(logical_w > 0)
    c = lambda name: _col(runs, name)  # noqa: E731
    out = pd.DataFrame({
        "run_id": runs["run_id"].to_numpy() if "run_id" in runs.columns else runs.index,
        "host_cpu_us_per_txn": c("host_cpu_busy_s") * 1e6 / txn,
        "mysqld_cpu_us_per_txn": (c("cpu_user_s") + c("cpu_sys_s")) * 1e6 / txn,
        "read_kb_per_txn": c("dev_read_bytes") / 1024 / txn,
        "write_kb_per_txn": c("dev_write_bytes") / 1024 / txn,
        "read_ios_per_txn": c("dev_read_ios") / txn,
        "write_ios_per_txn": c("dev_write_ios") / txn,
        "proc_read_kb_per_txn": c("proc_read_bytes") / 1024 / txn,
        "proc_write_kb_per_txn": c("proc_write_bytes") / 1024 / txn,
        "read_mb_s": c("dev_read_bytes") / 1e6 / window,
        "write_mb_s": c("dev_write_bytes") / 1e6 / window,
        "dev_util_pct": c("dev_io_ms") / 10.0 / window,
        "host_iowait_cpus": c("host_cpu_iowait_s") / window,
        "space_amp": c("data_physical_bytes") / user_bytes,
        "apparent_space_amp": c("data_apparent_bytes" if "data_apparent_bytes" in runs.columns
                                else "data_logical_bytes") / user_bytes,
        "write_amp": c("dev_write_bytes") / logical_w,
        "write_amp_proc": c("proc_write_bytes") / logical_w,
    }, index=runs.index)
    return out.replace([np.inf, -np.inf], np.nan)


# ============================================================================ histograms (latency)


def merged_percentiles(histograms: pd.DataFrame, by: Sequence[str],
                       percentiles: Sequence[float] = (50, 95, 99)) -> pd.DataFrame:
    """Latency percentiles per group from histograms merged by adding counts (never by averaging
    percentiles), with sysbench's own rule (``sysbench.histogram_percentile``): the first bucket whose
    cumulative count reaches floor(total * q / 100 + 0.5). Columns: by..., events, pQ_ms...,
    max_bucket_ms (the highest non-empty bucket). Vectorised over all groups."""
    by = list(by)
    for col in (*by, "value_ms", "count"):
        if col not in histograms.columns:
            raise ValueError(f"histograms: missing column {col!r}")
    cols = [*by, "events", *[f"p{q:g}_ms" for q in percentiles], "max_bucket_ms"]
    h = histograms[[*by, "value_ms", "count"]]
    h = h[h["count"] > 0]
    if h.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    g = h.groupby([*by, "value_ms"], sort=True, dropna=False)["count"].sum().reset_index()
    grp = g.groupby(by, sort=True, dropna=False)
    cum = grp["count"].cumsum().to_numpy()
    total = grp["count"].transform("sum").to_numpy()
    out = grp["count"].sum().rename("events").reset_index()
    for q in percentiles:
        nmax = np.floor(total * q / 100 + 0.5)
        first = g[cum >= nmax].groupby(by, sort=True, dropna=False)["value_ms"].first()
        out[f"p{q:g}_ms"] = first.to_numpy()
    out["max_bucket_ms"] = grp["value_ms"].last().to_numpy()
    return out[cols]


# ============================================================================ two samples (few repetitions)


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
    out.update(ci_lo=math.exp(diff - half), ci_hi=math.exp(diff + half), t=t, df=df,
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


# ============================================================================ across runs


def _canonical(V: np.ndarray) -> np.ndarray:
    """Rows sorted by the first column, ties by the next ones: results must not depend on row order."""
    return V[np.lexsort(V.T[::-1])] if V.shape[0] > 1 else V


def _mask_groups(V: np.ndarray) -> dict[bytes, list[int]]:
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


def summarise_cells(
    runs: pd.DataFrame,
    metrics: Sequence[str],
    by: Sequence[str] = ("cell_id",),
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> pd.DataFrame:
    """Long table of n, mean, SD, CV and bootstrap CI per group and metric; NaNs (not measurable) are
    dropped per metric, and metrics without any value are left out.

    Metrics measured on the same repetitions of a group are resampled together (one draw, seeded by the
    group and those metrics), which keeps thousands of cells x a dozen metrics fast; for one metric the
    numbers are those of :func:`cell_summary`."""
    by = list(by)
    metrics = [m for m in metrics
               if m in runs.columns and pd.to_numeric(runs[m], errors="coerce").notna().any()]
    cols = [*by, "metric", "n", "mean", "sd", "cv", "ci_lo", "ci_hi"]
    if not metrics or runs.empty:
        return pd.DataFrame(columns=cols)
    values = runs[metrics].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    rows = []
    for key, pos in runs.groupby(by, sort=True, dropna=False).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        V = values[pos]
        stats: dict[int, dict[str, object]] = {}
        for mask, cols_j in _mask_groups(V).items():
            rows_ok = np.frombuffer(mask, dtype=bool)
            if not rows_ok.any():
                continue
            W = V[rows_ok][:, cols_j]
            label = "|".join(map(str, key)) + "|" + ",".join(metrics[j] for j in cols_j)
            lo, hi = bootstrap_mean_cols(W, confidence, n_resamples, stable_seed(seed, label))
            mean = W.mean(axis=0)
            sd = W.std(axis=0, ddof=1) if W.shape[0] > 1 else np.full(len(cols_j), np.nan)
            for i, j in enumerate(cols_j):
                stats[j] = {"n": int(W.shape[0]), "mean": float(mean[i]), "sd": float(sd[i]),
                            "cv": float(sd[i] / mean[i]) if mean[i] else float("nan"),
                            "ci_lo": float(lo[i]), "ci_hi": float(hi[i])}
        for j in sorted(stats):
            rows.append({**dict(zip(by, key)), "metric": metrics[j], **stats[j]})
    return pd.DataFrame(rows, columns=cols)


def level_key(v: object) -> object:
    """Factor levels as comparable keys: None and NaN are one level."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "\0none"
    return v


def _welch_cols(A: np.ndarray, B: np.ndarray, confidence: float) -> dict[str, np.ndarray]:
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


def _self_ratio(r: np.ndarray) -> np.ndarray:
    """A ratio of a cell to itself: 1 where defined (NaN stays NaN, e.g. a zero mean)."""
    return np.where(np.isfinite(r), 1.0, np.nan)


def ratios_to_baseline_cells(
    runs: pd.DataFrame,
    baseline: dict[str, object],
    factors: Sequence[str],
    metric: str | Sequence[str] = "tps",
    confidence: float = 0.95,
    seed: int = DEFAULT_SEED,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> pd.DataFrame:
    """Every cell against its baseline cell: the cell with the same levels except those ``baseline``
    fixes (``Experiment.baseline_cell``). Ratio of means with a bootstrap CI resampling the repetitions
    of both sides (``ci_lo``/``ci_hi``); absolute means beside it. Also the ratio of geometric means with
    its Welch CI on the log scale (``ratio_gm``, ``welch_ci_*``, ``welch_p``; positive values only),
    which keeps its nominal coverage at 3-5 repetitions where the percentile bootstrap is too narrow.
    Cells whose baseline cell has no runs give no row; a baseline mean of 0 gives NaN ratios. The
    baseline cell against itself is 1 by definition: ratio 1 and no interval (NaN CIs and p), not a
    resampling of the same runs twice as if they were independent samples.

    ``metric`` may be several columns (one row per cell and metric; metrics measured on the same runs
    share one bootstrap draw). Seeds come from the pair of cell ids, so the same comparison gets the
    same interval wherever it is computed (e.g. the paper's headline): for one metric the numbers are
    :func:`bootstrap_ratio_ci`'s (up to rounding) with seed ``stable_seed(seed, "cell|baseline cell|metric")``."""
    factors = [f for f in factors if f in runs.columns]
    metrics = [metric] if isinstance(metric, str) else list(metric)
    for k in baseline:
        if k not in factors:
            raise ValueError(f"baseline.{k}: not a factor column of the runs; allowed: {', '.join(factors)}")
    cols = ["cell_id", *factors, "factor", "baseline", "baseline_cell_id", "metric", "n", "n_baseline",
            "mean", "baseline_mean", "ratio", "ci_lo", "ci_hi", "ratio_gm", "welch_ci_lo", "welch_ci_hi",
            "welch_p"]
    metrics = [m for m in metrics if m in runs.columns]
    if runs.empty or not metrics:
        return pd.DataFrame(columns=cols)
    groups = runs.groupby("cell_id", sort=True).indices
    first = runs.iloc[[pos[0] for pos in groups.values()]][factors].to_dict("records")
    levels = dict(zip(groups, first))
    by_levels = {tuple(level_key(lv[f]) for f in factors): c for c, lv in levels.items()}
    values = runs[metrics].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    label = next(iter(baseline.values())) if len(baseline) == 1 else ";".join(
        f"{k}={v}" for k, v in baseline.items())
    rows = []
    for cid, pos in groups.items():
        lv = levels[cid]
        base_id = by_levels.get(tuple(level_key(baseline.get(f, lv[f])) for f in factors))
        if base_id is None:
            continue
        V, B = values[pos], values[groups[base_id]]
        fv, fb = np.isfinite(V), np.isfinite(B)
        pairs: dict[bytes, list[int]] = {}
        for j in range(len(metrics)):
            pairs.setdefault(fv[:, j].tobytes() + b"|" + fb[:, j].tobytes(), []).append(j)
        for js in pairs.values():
            a, b = V[fv[:, js[0]]][:, js], B[fb[:, js[0]]][:, js]
            if a.shape[0] == 0 or b.shape[0] == 0:
                continue
            tag = ",".join(metrics[j] for j in js)
            r, lo, hi = bootstrap_ratio_cols(a, b, confidence, n_resamples,
                                            stable_seed(seed, f"{cid}|{base_id}|{tag}"))
            positive = (a > 0).all(axis=0) & (b > 0).all(axis=0)
            w = _welch_cols(np.where(positive, a, 1.0), np.where(positive, b, 1.0), confidence)
            if cid == base_id:  # itself: 1 by definition, no sampling variation to put an interval on
                r, lo, hi = _self_ratio(r), np.full_like(lo, np.nan), np.full_like(hi, np.nan)
                w = {k: _self_ratio(v) if k == "ratio_gm" else np.full_like(v, np.nan) for k, v in w.items()}
            for i, j in enumerate(js):
                rows.append({"cell_id": cid, **lv, "factor": ",".join(baseline), "baseline": label,
                             "baseline_cell_id": base_id, "metric": metrics[j], "n": int(a.shape[0]),
                             "n_baseline": int(b.shape[0]), "mean": float(a[:, i].mean()),
                             "baseline_mean": float(b[:, i].mean()), "ratio": float(r[i]),
                             "ci_lo": float(lo[i]), "ci_hi": float(hi[i]),
                             **{k: float(v[i]) if positive[i] else np.nan for k, v in w.items()}})
    df = pd.DataFrame(rows, columns=cols)
    order = {m: i for i, m in enumerate(metrics)}
    df["_o"] = df["metric"].map(order)
    return df.sort_values(["cell_id", "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


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


def adaptive_additions(
    runs: pd.DataFrame,
    target_halfwidth_pct: float,
    max_repetitions: int,
    metric: str = "tps",
    confidence: float = 0.95,
    min_repetitions: int = 2,
) -> dict[str, int]:
    """How many more repetitions each cell needs: cell_id -> count (0 when done), for every cell in
    ``runs`` (completed runs; rows with a ``status`` other than ok are ignored).

    A cell is done when its Student-t CI half-width (:func:`t_halfwidth_pct`) is at most
    ``target_halfwidth_pct`` % of its mean, or when it has ``max_repetitions`` runs. Otherwise the count is
    the smallest N with t(N-1) * CV / sqrt(N) under the target at the cell's current CV, capped at
    ``max_repetitions``, minus the runs it has (at least 1); below ``min_repetitions`` runs it is the
    difference. The caller may run fewer (e.g. one round at a time) and ask again."""
    if isinstance(target_halfwidth_pct, bool) or not isinstance(target_halfwidth_pct, (int, float)) \
            or not target_halfwidth_pct > 0:
        raise ValueError(f"target_halfwidth_pct: {target_halfwidth_pct!r} must be a positive percentage")
    if isinstance(max_repetitions, bool) or not isinstance(max_repetitions, (int, np.integer)) \
            or max_repetitions < 1:
        raise ValueError(f"max_repetitions: {max_repetitions!r} must be an integer >= 1")
    for col in ("cell_id", metric):
        if col not in runs.columns:
            raise ValueError(f"runs: missing column {col!r}")
    if "status" in runs.columns:
        runs = runs[runs["status"] == "ok"]
    out: dict[str, int] = {}
    for cid, g in runs.groupby("cell_id", sort=True):
        x = pd.to_numeric(g[metric], errors="coerce").to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        n = x.size
        floor = min(min_repetitions, max_repetitions)
        if n >= max_repetitions:
            out[str(cid)] = 0
        elif n < floor:
            out[str(cid)] = floor - n
        elif t_halfwidth_pct(x, confidence) <= target_halfwidth_pct:
            out[str(cid)] = 0
        else:
            cv = x.std(ddof=1) / x.mean() if x.mean() > 0 else np.inf
            need = next((N for N in range(n + 1, max_repetitions + 1)
                         if sps.t.ppf((1 + confidence) / 2, N - 1) * cv / np.sqrt(N) * 100
                         <= target_halfwidth_pct), max_repetitions)
            out[str(cid)] = max(need - n, 1)
    return out


def noise_report(cells: pd.DataFrame, ratios: pd.DataFrame | None, runs: pd.DataFrame, *,
                 max_cv_pct: float = 10.0, target_halfwidth_pct: float | None = None,
                 metric: str = "tps", confidence: float = 0.95) -> pd.DataFrame:
    """CV and CI half-width per cell, with flags a reader must see before trusting a claim:

    ``cv_above_max`` (CV > ``max_cv_pct``), ``halfwidth_above_target`` (Student-t half-width above the
    target, when one is set), ``ratio_ci_includes_1`` (a cell compared with a different baseline cell
    whose ratio CI includes 1: too wide to tell the ratio from 1), ``single_repetition`` and
    ``not_steady_runs`` (runs that never settled) and ``steady_state_untested`` (runs too short to
    check). ``noisy`` is True for the first three. The ratio CI is the Welch one where the
    ratios table has it (honest at few repetitions), else the bootstrap one.

    ``cells``: one row per cell with cell_id, n, mean, cv, ci_lo, ci_hi (n_not_steady, n_untested if
    known)."""
    if max_cv_pct <= 0:
        raise ValueError(f"max_cv_pct: {max_cv_pct!r} must be positive")
    tw = {cid: t_halfwidth_pct(g[metric], confidence) for cid, g in runs.groupby("cell_id", sort=True)} \
        if metric in runs.columns else {}
    r = ratios if ratios is not None and not ratios.empty else None
    if r is not None:
        r = r[r["cell_id"] != r["baseline_cell_id"]].set_index("cell_id")
    rows = []
    for _, c in cells.sort_values("cell_id", kind="stable").iterrows():
        cid = c["cell_id"]
        cv_pct = c["cv"] * 100
        hw = (c["ci_hi"] - c["ci_lo"]) / 2 / c["mean"] * 100 if c["mean"] else np.nan
        thw = tw.get(cid, np.nan)
        rr = r.loc[cid] if r is not None and cid in r.index else None
        if rr is not None and pd.notna(rr.get("welch_ci_lo", np.nan)):
            rr = pd.Series({"ratio": rr["ratio"], "ci_lo": rr["welch_ci_lo"], "ci_hi": rr["welch_ci_hi"]})
        flags = []
        if pd.notna(cv_pct) and cv_pct > max_cv_pct:
            flags.append("cv_above_max")
        if target_halfwidth_pct is not None and not (pd.notna(thw) and thw <= target_halfwidth_pct):
            flags.append("halfwidth_above_target")
        if rr is not None and pd.notna(rr["ci_lo"]) and rr["ci_lo"] <= 1 <= rr["ci_hi"]:
            flags.append("ratio_ci_includes_1")
        if c["n"] < 2:
            flags.append("single_repetition")
        not_steady = int(c.get("n_not_steady", 0) or 0)
        if not_steady:
            flags.append("not_steady_runs")
        if int(c.get("n_untested", 0) or 0):
            flags.append("steady_state_untested")
        rows.append({
            "cell_id": cid, "n": int(c["n"]), "mean": c["mean"], "cv_pct": cv_pct, "ci_halfwidth_pct": hw,
            "t_halfwidth_pct": thw, "max_cv_pct": max_cv_pct, "target_halfwidth_pct": target_halfwidth_pct,
            "ratio": rr["ratio"] if rr is not None else np.nan,
            "ratio_ci_lo": rr["ci_lo"] if rr is not None else np.nan,
            "ratio_ci_hi": rr["ci_hi"] if rr is not None else np.nan,
            "n_not_steady": not_steady, "flags": ";".join(flags),
            "noisy": bool({"cv_above_max", "halfwidth_above_target", "ratio_ci_includes_1"} & set(flags)),
        })
    return pd.DataFrame(rows)
