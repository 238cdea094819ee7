"""Across repetitions, per cell (pure): means with CIs, ratios to a baseline cell, the noise report and the
adaptive-repetition rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.stats.intervals import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    bootstrap_mean_ci,
    bootstrap_mean_cols,
    bootstrap_ratio_ci,
    bootstrap_ratio_cols,
    level_key,
    mask_groups,
    self_ratio,
    stable_seed,
    t_halfwidth_pct,
    welch_cols,
)


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
        for mask, cols_j in mask_groups(V).items():
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
            w = welch_cols(np.where(positive, a, 1.0), np.where(positive, b, 1.0), confidence)
            if cid == base_id:  # itself: 1 by definition, no sampling variation to put an interval on
                r, lo, hi = self_ratio(r), np.full_like(lo, np.nan), np.full_like(hi, np.nan)
                w = {k: self_ratio(v) if k == "ratio_gm" else np.full_like(v, np.nan) for k, v in w.items()}
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
