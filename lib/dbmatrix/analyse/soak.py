"""The soak study (seed 000's hour-long run, pure): one cell measured for an hour after the seed's 2-minute
warm-up, and what a run of minutes would have averaged, read from the same run's beginning.

A run of 5 minutes after the same warm-up is the long run's first 300 s: the run does not know that it will
go on. So each long run answers seed 000's two statements about run length by itself, paired, with the
campaign's level (its boot, its dataset load) cancelling in the ratio:

- ``hour_over_5min``: the hour's average over its first 300 s (the seed: "runs of over an hour give no
  significantly different average throughput" than its 5-minute runs);
- ``minute_over_hour``: the first 60 s over the hour (the seed: "2 minutes of warm-up and 1-2 minutes
  of measuring suffice"); ``2min_over_hour`` the first 120 s, reported beside it.

Each ratio's interval within one run comes from batch means of ``BATCH_S`` seconds over the measured hour:
the variance of a batch mean from all the hour's batches about their linear trend (a drift is the effect
measured, not noise; t on b - 2 df), widened by (1 + r1) / (1 - r1) when the batch means' lag-1
autocorrelation r1 is positive; a window of k batches has that variance over k. Across runs (one per
campaign) the log ratios are averaged, with the between-run variance when it exceeds the average within-run
variance (Student t on n - 1 df), else the within-run one: a drift that differs from campaign to campaign is
only seen once there are several."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.sentinel_mechanism import as_float
from dbmatrix.analyse.stats.steady import mser_truncation
from dbmatrix.spec.experiment import LONG_RUN_S
from dbmatrix.store import PROBE_FIGURES

BATCH_S = 30  # batch means: long enough that 1-s autocorrelation (lag ~1-5 s) leaves them nearly independent
MSER_BATCH_S = 5  # the warm-up's end on the whole series: MSER-5 (White 1997)
SOAK_MIN_S = LONG_RUN_S  # a study of one cell measured at least this long is a soak study
# the windows a run of minutes would have measured, after the same warm-up: seconds from the window's start
WINDOWS = {"minute": 60, "2min": 120, "5min": 300}
RATIOS = {  # metric -> (numerator, denominator): "hour" is the whole measured window
    "hour_over_5min": ("hour", "5min"),
    "minute_over_hour": ("minute", "hour"),
    "2min_over_hour": ("2min", "hour"),
}
COLUMNS = ("run_id", "cell_id", "campaign", "warmup_s", "measured_s", "batches", "batch_cv_pct", "batch_r1",
           "mser_s", "tps_hour", "tps_minute", "tps_2min", "tps_5min")
RATIO_COLUMNS = tuple(f"{m}{s}" for m in RATIOS for s in ("", "_se", "_df"))


@dataclass(frozen=True)
class SoakRatio:
    """A ratio of two windows' mean throughput: the estimate, its interval at ``confidence``, and how."""

    metric: str
    estimate: float
    ci_lo: float
    ci_hi: float
    df: float
    runs: int
    basis: str


def _window_ratio(tps: np.ndarray, w_num: str, w_den: str, var_batch: float) -> tuple[float, float]:
    """(ratio, se of its log) of the mean over window `w_num` to the mean over `w_den` of one run's measured
    1-s series; one of them is the whole window ("hour"), the other a window from its start."""
    short = w_den if w_num == "hour" else w_num
    w = WINDOWS[short]
    m_w, m_rest = float(tps[:w].mean()), float(tps[w:].mean())
    f = w / len(tps)
    q = m_rest / m_w  # the rest of the hour over the window
    k_w, k_rest = w / BATCH_S, (len(tps) - w) / BATCH_S
    se_log_q = math.sqrt(var_batch / k_w / m_w ** 2 + var_batch / k_rest / m_rest ** 2)
    r_hour_over_w = f + (1 - f) * q  # the hour's mean over the window's
    se_log_r = (1 - f) * q * se_log_q / r_hour_over_w  # delta method
    ratio = r_hour_over_w if w_num == "hour" else 1 / r_hour_over_w
    return ratio, se_log_r


def soak_run(run_id: str, cell_id: str, campaign: int, warmup: Sequence[float],
             measured: Sequence[float]) -> dict[str, object] | None:
    """One long run's row: its windows' means, batch statistics, the warm-up's end by MSER-5 on the whole
    series (warm-up included, seconds from the run's start) and the ratios with their within-run standard
    errors. None when the measured series is shorter than twice the longest window."""
    tps = np.asarray(measured, dtype=float)
    if len(tps) < 2 * max(WINDOWS.values()) or not np.all(np.isfinite(tps)) or tps.mean() <= 0:
        return None
    b = len(tps) // BATCH_S
    means = tps[: b * BATCH_S].reshape(b, BATCH_S).mean(axis=1)
    t = np.arange(b, dtype=float)
    d = means - np.polyval(np.polyfit(t, means, 1), t)  # about the hour's linear trend: the drift is the effect
    var_b = float((d * d).sum() / (b - 2))
    r1 = float((d[1:] * d[:-1]).sum() / (d * d).sum()) if (d * d).sum() > 0 else 0.0
    infl = (1 + r1) / (1 - r1) if 0 < r1 < 1 else 1.0
    whole = np.concatenate([np.asarray(warmup, dtype=float), tps])
    mser = int(mser_truncation(whole[None, :], MSER_BATCH_S)[0]) * MSER_BATCH_S
    row: dict[str, object] = {
        "run_id": run_id, "cell_id": cell_id, "campaign": int(campaign), "warmup_s": len(warmup),
        "measured_s": len(tps), "batches": b, "batch_cv_pct": 100 * math.sqrt(var_b) / float(means.mean()),
        "batch_r1": r1, "mser_s": mser, "tps_hour": float(tps.mean()),
        **{f"tps_{k}": float(tps[:w].mean()) for k, w in WINDOWS.items()}}
    for metric, (num, den) in RATIOS.items():
        ratio, se = _window_ratio(tps, num, den, var_b * infl)
        row.update({metric: ratio, f"{metric}_se": se, f"{metric}_df": b - 2})
    return row


def soak_table(runs: Iterable[tuple[str, str, int, Sequence[float], Sequence[float]]]) -> pd.DataFrame:
    """The soak rows of (run_id, cell_id, campaign, warm-up series, measured series) runs, long enough."""
    rows = [r for r in (soak_run(*x) for x in runs) if r is not None]
    return pd.DataFrame(rows, columns=[*COLUMNS, *RATIO_COLUMNS])


def pooled_ratio(table: pd.DataFrame, metric: str, confidence: float = 0.95) -> SoakRatio:
    """The ratio `metric` over the soak runs of `table` (one per campaign, normally): see the module doc."""
    t = table.dropna(subset=[metric, f"{metric}_se"])
    if t.empty:
        raise ValueError(f"no soak run measured long enough for {metric}")
    y = np.log(t[metric].to_numpy(dtype=float))
    se = t[f"{metric}_se"].to_numpy(dtype=float)
    dfs = t[f"{metric}_df"].to_numpy(dtype=float)
    n = len(y)
    within = float(np.mean(se ** 2))
    between = float(np.var(y, ddof=1)) if n > 1 else math.nan
    if n > 1 and between > within:
        var, df, how = between / n, float(n - 1), f"between the {n} runs (t on {n - 1} df)"
    else:
        var, df = within / n, float(dfs.sum())
        how = (f"within the run, {BATCH_S}-s batch means (t on {int(df)} df); how the run's drift varies "
               "between campaigns is not estimated from one run" if n == 1 else
               f"within the {n} runs, {BATCH_S}-s batch means (t on {int(df)} df): the runs differ less "
               "than their own batch noise")
    q = float(sps.t.ppf((1 + confidence) / 2, df))
    m, h = float(y.mean()), q * math.sqrt(var)
    num, den = RATIOS[metric]
    words = {"hour": "the measured hour", **{k: f"its first {w} s" for k, w in WINDOWS.items()}}
    basis = (f"{words[num]} over {words[den]}, mean 1-s throughput, {n} run(s) of {int(t['measured_s'].min())} s "
             f"after a {int(t['warmup_s'].min())}-s warm-up; interval {how}")
    return SoakRatio(metric, math.exp(m), math.exp(m - h), math.exp(m + h), df, n, basis)


PROBE_COLUMNS = ("probe_cpu_ratio", "probe_cpu_all_ratio", "probe_sync_ratio")


def with_probes(table: pd.DataFrame, probes: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]]
                ) -> pd.DataFrame:
    """`table` with each run's platform probe after over before it (:mod:`dbmatrix.run.probes`): CPU speed on
    one thread and on every CPU, synchronous write time; NaN where a run has no pair (it ran before the probe)."""
    def ratio(run_id: str, key: str) -> float:
        before, after = probes.get(run_id, ({}, {}))
        a, b = as_float(before.get(key)), as_float(after.get(key))
        return b / a if a > 0 and b > 0 else math.nan

    out = table.copy()
    for col, key in zip(PROBE_COLUMNS, PROBE_FIGURES, strict=True):
        out[col] = [ratio(str(r), key) for r in out["run_id"]] if len(out) else pd.Series(dtype=float)
    return out


def probe_text(table: pd.DataFrame) -> str:
    """What the platform probe saw around each long run, in words (empty without a run)."""
    if table.empty:
        return ""
    if "probe_cpu_ratio" not in table.columns or table["probe_cpu_ratio"].isna().all():
        return ("no run was bracketed by the platform probe (fixed CPU work with the server stopped, before and "
                "after each long run), so a change of the platform's speed during the hour is not measured")
    parts = []
    for _, r in table.sort_values("campaign").iterrows():
        c = float(r["probe_cpu_ratio"])
        if not math.isfinite(c):
            parts.append(f"campaign {int(r['campaign'])}: no probe (it ran before the probe)")
            continue
        a = float(r.get("probe_cpu_all_ratio", math.nan))
        parts.append(f"campaign {int(r['campaign'])}: {100 * (c - 1):+.1f} % on one thread"
                     + (f", {100 * (a - 1):+.1f} % on every CPU" if math.isfinite(a) else ""))
    return ("the platform probe's fixed CPU work, after the run over before it (the server stopped; a platform "
            "that slows during the hour lowers the hour's average as much): " + "; ".join(parts))


def warmup_end(table: pd.DataFrame) -> str:
    """Where MSER-5 puts each run's end of warm-up (seconds from the run's start), in words."""
    if table.empty:
        return "no soak run"
    values = ", ".join(f"{int(v)} s" for v in table["mser_s"])
    return (f"MSER-5 on warm-up and hour puts the transient's end at {values} (the warm-up ran "
            f"{int(table['warmup_s'].min())} s)")


def series_table(runs: Iterable[tuple[str, str, int, Sequence[float], Sequence[float]]]) -> pd.DataFrame:
    """The figure's data: per run, its ``BATCH_S``-s batch means from the run's start, the warm-up's and the
    measured window's batches apart (``phase``), at their midpoints in minutes (``t_min``)."""
    rows = []
    for run_id, _cell, campaign, warm, meas in runs:
        start = 0
        for phase, x in (("warm-up", np.asarray(warm, dtype=float)), ("measured", np.asarray(meas, dtype=float))):
            for i in range(len(x) // BATCH_S):
                rows.append({"run_id": run_id, "campaign": int(campaign), "phase": phase,
                             "t_min": (start + (i + 0.5) * BATCH_S) / 60,
                             "tps": float(x[i * BATCH_S:(i + 1) * BATCH_S].mean())})
            start += len(x)
    return pd.DataFrame(rows, columns=["run_id", "campaign", "phase", "t_min", "tps"])
