"""The steady-state test of one run (pure): warm-up truncation by MSER on the 1-s samples, then the drift
of the kept window with a CI from an OLS trend with AR(1) errors (Prais-Winsten FGLS), judged against a
+-5 % band; runs too short to test are "untested", never "steady". Vectorised over many runs at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

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
