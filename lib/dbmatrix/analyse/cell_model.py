"""Estimates that follow the design: a contrast between cells from the cells' own means, with its variance
from every level that varies (run, dataset load, campaign) and Satterthwaite degrees of freedom.

Model on the log scale, for cell c (a combination of factor levels), campaign k, repetition r::

    log y_ckr = mu_c + b_k + l_dk + u_ck + e_ckr

with b_k the campaign's shift of every cell (fixed: it cancels from every contrast), l_dk ~ N(0, s_L^2) the
shift of dataset load d in campaign k (the cells that share the levels of the dataset factors share one
loaded dataset per campaign: a fresh load moves all of them together), u_ck ~ N(0, s_u^2) the campaign x cell
effect and e_ckr the repetitions' noise (its variance may differ between cells).

**The estimate** of a contrast sum_c w_c mu_c (a/b: +1/n_a on the cells at level a, -1/n_b at b, at the
claim's held levels, averaged with equal weights over every combination of the free factors measured at
both levels) comes from the cell means: saturated in the cells, never a reduced model (:func:`cell_weights`
returns None when the two sides do not have the same combinations, as in a fraction: the caller then fits
a reduced model after a lack-of-fit test).

**One campaign**: the cells' own run variances (heteroscedastic: one cell's outlier run does not widen
another cell's contrast), Welch-Satterthwaite df; a cell with one run borrows the runs' pooled variance.

**Several campaigns**: stage 1 the campaign x cell means m_ck; stage 2 two mean squares by OLS (Henderson's
method III, exact for the balanced designs here and right in expectation when a cell is missing):
MS_A, the residual of m_ck on cell + load x campaign (E = s_u^2 + s_e^2/n =: s_w^2), and MS_LK, the load x
campaign mean square (E = s_w^2 + c* s_L^2). With h the OLS weights of the contrast on the m_ck (cell + campaign
model), Var = s_L^2 |Z'h|^2 + s_w^2 |h|^2 = g_L MS_LK + g_A MS_A, both coefficients non-negative in a balanced
design; df by Satterthwaite (a contrast within one load gets MS_A's df, one across loads leans on MS_LK's
few df: a fresh load per campaign is the only replication of a dataset). A cell whose campaign x cell
residuals are outlying (Cochran's C, p < :data:`COCHRAN_ALPHA`) does not share the pooled variance: it is left
out of it, and a contrast that uses it is estimated from its own campaigns' contrasts (K-1 df).

The campaign x contrast heterogeneity (:attr:`CellContrast.heterogeneity`: do the campaigns' contrasts
differ by more than their runs' noise?) is a consistency check reported beside the estimate; the decision
uses the pooled interval, whose variance already contains the campaign level.
Coverage by simulation: ``benchmarks/bench_design_coverage.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.campaign_model import campaign_column
from dbmatrix.analyse.stats import level_key

COCHRAN_ALPHA = 0.01  # a cell whose campaign x cell residuals are this unlikely under one variance: its own


@dataclass(frozen=True)
class CellContrast:
    """A contrast of log(metric) between cells: estimate, standard error, df, interval (log scale)."""

    estimate: float
    se: float
    df: float
    lo: float
    hi: float
    basis: str
    n_runs: int
    campaigns: int
    heterogeneity: tuple[float, float, float, float] | None = None  # (F, df1, df2, p)
    used: frozenset[str] = frozenset()  # the keys (:func:`cell_keys`) of the cells the contrast weighs


def cell_keys(frame: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    """One text key per row: the levels of `cols` (the cell a run belongs to)."""
    return _keys(frame, cols)


def _keys(frame: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    if not cols:
        return pd.Series("", index=frame.index)
    return frame[list(cols)].map(level_key).astype(str).agg("|".join, axis=1)


def cell_weights(cells: pd.DataFrame, factor: str, a: Any, b: Any, at: Mapping[str, Any],
                 cols: Sequence[str]) -> tuple[np.ndarray, list[str]] | None:
    """Weights of the contrast a/b on the rows of `cells` (one row per cell, the factor columns `cols`) at the
    held levels `at`, averaged with equal weights over the free factors' combinations; and the free factors.
    None when level a and level b do not have the same combinations of the free factors (not a contrast of
    cell means: a fraction)."""
    mask = np.ones(len(cells), dtype=bool)
    for f, v in at.items():
        if f in cells.columns:
            mask &= (cells[f].map(level_key) == level_key(v)).to_numpy()
    level = cells[factor].map(level_key).to_numpy()
    free = [f for f in cols if f != factor and f not in at]
    combo = _keys(cells, free).to_numpy()
    side_a = mask & (level == level_key(a))
    side_b = mask & (level == level_key(b))
    ca, cb = set(combo[side_a]), set(combo[side_b])
    if not ca or ca != cb or side_a.sum() != len(ca) or side_b.sum() != len(cb):
        return None
    w = np.zeros(len(cells))
    w[side_a] = 1.0 / side_a.sum()
    w[side_b] = -1.0 / side_b.sum()
    return w, free


def _satterthwaite(terms: Sequence[tuple[float, float, float]]) -> tuple[float, float]:
    """Variance sum g_i MS_i and its Satterthwaite df from (g, MS, df) terms (terms with g = 0 left out)."""
    used = [(g, ms, df) for g, ms, df in terms if abs(g) > 1e-12]
    var = sum(g * ms for g, ms, _ in used)
    if not used or var <= 0:
        return max(var, 0.0), math.inf
    if any(df <= 0 for _, _, df in used):
        return var, math.nan
    return var, var ** 2 / sum((g * ms) ** 2 / df for g, ms, df in used)


def _interval(est: float, var: float, df: float, confidence: float) -> tuple[float, float, float]:
    se = math.sqrt(max(var, 0.0))
    if not math.isfinite(df) and df > 0:
        q = float(sps.norm.ppf((1 + confidence) / 2))
    elif math.isfinite(df) and df > 0:
        q = float(sps.t.ppf((1 + confidence) / 2, df))
    else:
        return se, math.nan, math.nan
    return se, est - q * se, est + q * se


def _pct(var: float) -> str:
    return f"{100 * math.sqrt(max(var, 0.0)):.2g} %"


def _design_text(cells: pd.DataFrame, w: np.ndarray, free: Sequence[str]) -> str:
    from dbmatrix.spec.factors import factor_word

    used = int((w != 0).sum())
    avg = (f", averaged over {', '.join(factor_word(f) for f in free)}"
           if free and used > 2 else "")
    return f"cell means of {used} cells{avg}"


# ============================================================================ one campaign


def _one_campaign(data: pd.DataFrame, y: np.ndarray, key: np.ndarray, cells: pd.DataFrame,
                  w: np.ndarray, confidence: float) -> tuple[float, float, float, str]:
    """Estimate, variance, df and the variance's words from the runs of one campaign."""
    stats = pd.DataFrame({"k": key, "y": y}).groupby("k")["y"].agg(["mean", "var", "count"])
    cell_keys = cells["_key"].to_numpy()
    mean = stats.loc[cell_keys, "mean"].to_numpy(dtype=float)
    var = stats.loc[cell_keys, "var"].to_numpy(dtype=float)
    n = stats.loc[cell_keys, "count"].to_numpy(dtype=float)
    est = float(w @ mean)
    used = w != 0
    if (n[used] >= 2).all():
        terms = [(w[i] ** 2 / n[i], var[i], n[i] - 1) for i in np.flatnonzero(used)]
        v, df = _satterthwaite(terms)
        return est, v, df, "each cell's own run variance, Welch-Satterthwaite"
    pooled = stats[stats["count"] >= 2]
    dfp = float((pooled["count"] - 1).sum())
    if dfp < 1:
        return est, math.nan, math.nan, "no repetitions: no interval"
    ms = float(((pooled["count"] - 1) * pooled["var"]).sum() / dfp)
    return est, ms * float(np.sum(w[used] ** 2 / n[used])), dfp, "the runs' pooled variance (a cell has one run)"


# ============================================================================ several campaigns


def _ols_resid(X: np.ndarray, y: np.ndarray) -> tuple[float, int, np.ndarray]:
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    r = y - X @ beta
    return float(r @ r), int(len(y) - np.linalg.matrix_rank(X)), r


def _dummies(codes: np.ndarray) -> np.ndarray:
    levels = np.unique(codes)
    return (codes[:, None] == levels[None, :]).astype(float)


def _cochran_outliers(resid: np.ndarray, cell: np.ndarray, df_a: int) -> list[Any]:
    """Cells whose share of the campaign x cell residual is outlying (Cochran's C, Bonferroni over cells)."""
    flagged: list[Any] = []
    ss = pd.Series(resid ** 2).groupby(cell).sum()
    while len(ss) > 2:
        nu = df_a / len(ss) if df_a > 0 else 0.0
        total = float(ss.sum())
        if nu <= 0 or total <= 0:
            break
        top = ss.idxmax()
        c = float(ss[top]) / total
        if c >= 1.0:
            p = 0.0
        else:
            f = (len(ss) - 1) * c / (1 - c)
            p = min(1.0, len(ss) * float(sps.f.sf(f, nu, (len(ss) - 1) * nu)))
        if p >= COCHRAN_ALPHA:
            break
        flagged.append(top)
        ss = ss.drop(top)
        df_a = round(df_a - nu)
    return flagged


def _several(means: pd.DataFrame, m: np.ndarray, cells: pd.DataFrame, w: np.ndarray, loads: Sequence[str],
             run_ms: tuple[float, float], confidence: float
             ) -> tuple[float, float, float, str, tuple[float, float, float, float] | None]:
    """Estimate, variance, df, words and the heterogeneity test from campaign x cell means (module doc)."""
    weight = dict(zip(cells["_key"], w))
    key = means["_key"].to_numpy()
    camp = means["campaign"].to_numpy()
    used_keys = [k for k, x in weight.items() if x != 0]
    # campaigns holding every cell of the contrast (a campaign missing one cannot give its contrast)
    have = pd.crosstab(camp, key).reindex(columns=used_keys, fill_value=0)
    complete = [c for c in have.index if (have.loc[c] > 0).all()]
    keep = np.isin(camp, complete)
    means, m, key, camp = means[keep], m[keep], key[keep], camp[keep]
    K = len(complete)
    if K < 2:
        raise ValueError("fewer than two campaigns hold every cell of the contrast")
    load_of = dict(zip(cells["_key"], _keys(cells, loads))) if loads else {}
    load = np.array([load_of.get(k, "") for k in key])
    lk = np.array([f"{c}#{d}" for c, d in zip(camp, load)])
    X_a = np.hstack([_dummies(key), _dummies(lk)])
    ss_a, df_a, resid = _ols_resid(X_a, m)
    flagged = _cochran_outliers(resid, key, df_a) if df_a > 0 else []
    per_campaign = pd.Series(m * np.array([weight.get(k, 0.0) for k in key])).groupby(camp).sum()
    het = _heterogeneity(per_campaign.to_numpy(), means, w, cells, run_ms)
    if any(weight.get(f, 0.0) != 0 for f in flagged):
        d = per_campaign.to_numpy(dtype=float)
        var = float(d.var(ddof=1) / K)
        return (float(d.mean()), var, float(K - 1),
                f"a cell of the contrast has outlying campaign x cell variation (Cochran's C, p < "
                f"{COCHRAN_ALPHA:g}): variance from the campaigns' own contrasts", het)
    if flagged:
        drop = ~np.isin(key, flagged)
        means, m, key, camp, load, lk = means[drop], m[drop], key[drop], camp[drop], load[drop], lk[drop]
        X_a = np.hstack([_dummies(key), _dummies(lk)])
        ss_a, df_a, _ = _ols_resid(X_a, m)
    X_b = np.hstack([_dummies(key), _dummies(camp)[:, 1:]])
    ss_b, df_b, _ = _ols_resid(X_b, m)
    df_lk = df_b - df_a
    # the contrast's OLS weights on the m_ck in the cell + campaign model
    cell_levels = np.unique(key)
    L = np.concatenate([[weight.get(k, 0.0) for k in cell_levels], np.zeros(X_b.shape[1] - len(cell_levels))])
    XtX_inv = np.linalg.pinv(X_b.T @ X_b)
    h = X_b @ XtX_inv @ L
    est = float(h @ m)
    Z = _dummies(lk)
    q_w = float(h @ h)
    q_l = float(np.sum((Z.T @ h) ** 2))
    ms_a = ss_a / df_a if df_a > 0 else math.nan
    words = ""
    if df_lk > 0 and q_l > 1e-12:
        M_b = np.eye(len(m)) - X_b @ np.linalg.pinv(X_b)
        c_star = float(np.trace(M_b @ Z @ Z.T)) / df_lk
        ms_lk = (ss_b - ss_a) / df_lk
        g_l, g_a = q_l / c_star, q_w - q_l / c_star
        if g_a < -1e-12:  # an unbalanced design: the load component truncated at zero
            s_l = max(0.0, (ms_lk - ms_a) / c_star)
            var, df = _satterthwaite([(q_w, ms_a, df_a)])
            var += q_l * s_l
        else:
            var, df = _satterthwaite([(g_l, ms_lk, df_lk), (max(g_a, 0.0), ms_a, df_a)])
        s_l2 = (ms_lk - ms_a) / c_star if df_a > 0 else ms_lk
        words += (f"variance from dataset load x campaign ({df_lk} df) and campaign x cell ({df_a} df), "
                  "Satterthwaite" if df_a > 0 else
                  f"variance from dataset load x campaign ({df_lk} df; one cell per load: campaign x cell within it)")
    else:
        var, df = _satterthwaite([(q_w, ms_a, df_a)]) if df_a > 0 else (math.nan, math.nan)
        s_l2 = math.nan
        words += f"variance from campaign x cell within a load ({df_a} df)"
    run_var, _ = run_ms
    n_bar = float(np.mean(means["n_runs"])) if "n_runs" in means.columns else 1.0
    s_u2 = ms_a - run_var / n_bar if math.isfinite(run_var) else math.nan
    shown = [f"{name} {_pct(v)}" for name, v in (("load", s_l2), ("campaign x cell", s_u2), ("runs", run_var))
             if math.isfinite(v)]  # a level the design does not have (one load, one run per cell) is left out
    words += ((f"; components (SD, log scale): {', '.join(shown)}" if shown else "")
              + (f"; {len(flagged)} outlying cell{'s' if len(flagged) > 1 else ''} left out of the pooled "
                 "variance (Cochran's C)" if flagged else ""))
    return est, var, df, words, het


def _heterogeneity(d: np.ndarray, means: pd.DataFrame, w: np.ndarray, cells: pd.DataFrame,
                   run_ms: tuple[float, float]) -> tuple[float, float, float, float] | None:
    """Do the campaigns' contrasts vary more than their repetitions explain? F = the campaigns' variance of
    the contrast over its expected value from the runs (pooled within campaign x cell), on K-1 and the runs'
    df; None without repetitions."""
    run_var, run_df = run_ms
    K = len(d)
    if K < 2 or not (math.isfinite(run_var) and run_df > 0 and run_var > 0):
        return None
    n = means.groupby("_key")["n_runs"].apply(lambda s: len(s) / float(np.sum(1.0 / s))).to_dict()
    expected = run_var * sum(x ** 2 / n.get(k, 1.0) for k, x in zip(cells["_key"], w) if x != 0)
    if expected <= 0:
        return None
    f = float(np.var(d, ddof=1) / expected)
    return f, float(K - 1), float(run_df), float(sps.f.sf(f, K - 1, run_df))


def _run_ms(y: np.ndarray, group: np.ndarray) -> tuple[float, float]:
    """The repetitions' pooled variance within campaign x cell (mean square, df)."""
    g = pd.DataFrame({"g": group, "y": y}).groupby("g")["y"]
    count = g.count()
    df = float((count - 1).sum())
    if df < 1:
        return math.nan, 0.0
    return float((g.var(ddof=1).fillna(0) * (count - 1)).sum() / df), df


# ============================================================================ the entry point


def trend_weights(cells: pd.DataFrame, factor: str, a: Any, b: Any, at: Mapping[str, Any], cols: Sequence[str],
                  trend: tuple[str, Any, Any]) -> tuple[np.ndarray, list[str]] | None:
    """Weights of an interaction contrast: the contrast a/b at level `hi` of the trend factor minus the same
    contrast at its level `lo` (``trend = (factor, hi, lo)``; on the log scale, the ratio of the two ratios),
    each averaged over the other free factors as :func:`cell_weights` does. None unless both sides are
    contrasts of cell means."""
    over, hi, lo = trend
    upper = cell_weights(cells, factor, a, b, {**at, over: hi}, cols)
    lower = cell_weights(cells, factor, a, b, {**at, over: lo}, cols)
    if upper is None or lower is None:
        return None
    return upper[0] - lower[0], [f for f in upper[1] if f != over]


def cell_contrast(data: pd.DataFrame, metric: str, factor: str, a: Any, b: Any, at: Mapping[str, Any],
                  cols: Sequence[str], loads: Sequence[str], confidence: float = 0.95,
                  trend: tuple[str, Any, Any] | None = None) -> CellContrast | None:
    """The contrast log(metric) at `a` minus at `b` of `factor` from the cell means (module doc): `cols` the
    factors that make a cell, `loads` those of them that make a dataset load. With `trend` the interaction
    contrast of :func:`trend_weights`. None when the two sides do not have the same cells (a fraction: the
    caller's reduced model decides)."""
    y = np.log(pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=float))
    ok = np.isfinite(y)
    data, y = data[ok], y[ok]
    if data.empty:
        return None
    key = _keys(data, cols).to_numpy()
    first = ~pd.Series(key).duplicated().to_numpy()
    cells = data.loc[first, list(cols)].reset_index(drop=True)
    cells["_key"] = key[first]
    found = (cell_weights(cells, factor, a, b, at, cols) if trend is None
             else trend_weights(cells, factor, a, b, at, cols, trend))
    if found is None:
        return None
    w, free = found
    camp = campaign_column(data).to_numpy()
    K = len(np.unique(camp))
    design = _design_text(cells, w, free)
    n_runs = int(np.isin(key, cells["_key"][w != 0]).sum())
    het = None
    if K < 2:
        est, var, df, words = _one_campaign(data, y, key, cells, w, confidence)
        words = f"{design} ({n_runs} runs); {words}"
    else:
        frame = pd.DataFrame({"campaign": camp, "_key": key, "y": y})
        grouped = frame.groupby(["campaign", "_key"], sort=True)["y"]
        means = grouped.agg(["mean", "count"]).reset_index().rename(columns={"count": "n_runs"})
        run_ms = _run_ms(y, np.array([f"{c}#{k}" for c, k in zip(camp, key)]))
        try:
            est, var, df, words, het = _several(means, means["mean"].to_numpy(dtype=float), cells, w, loads,
                                                run_ms, confidence)
        except ValueError:
            return None
        words = f"{design} ({n_runs} runs in {K} campaigns); {words}"
    se, lo, hi = _interval(est, var, df, confidence)
    df_text = "inf" if not math.isfinite(df) else f"{df:.3g}"
    words += f"; t on {df_text} df" if math.isfinite(lo) else "; no interval"
    return CellContrast(est, se, df, lo, hi, words, n_runs, K, het, frozenset(cells["_key"][w != 0]))


def lack_of_fit(frame: pd.DataFrame, metric: str, cols: Sequence[str], ss_model: float, df_model: int,
                block: str | None) -> tuple[float, float, float, float] | None:
    """A reduced model's lack of fit against the saturated cell model (cells + `block`) on the same rows:
    (F, df1, df2, p); None when the model is saturated; F and p NaN when the cells have no residual df to test
    against."""
    y = np.log(pd.to_numeric(frame[metric], errors="coerce").to_numpy(dtype=float))
    parts = [_dummies(_keys(frame, cols).to_numpy())]
    if block is not None and block in frame.columns:
        parts.append(_dummies(frame[block].map(level_key).astype(str).to_numpy())[:, 1:])
    ss_sat, df_sat, _ = _ols_resid(np.hstack(parts), y)
    df1 = df_model - df_sat
    if df1 <= 0:
        return None
    if df_sat <= 0:  # no replication within cells: nothing to test the left-out interactions against
        return math.nan, float(df1), 0.0, math.nan
    f = max(0.0, (ss_model - ss_sat) / df1) / (ss_sat / df_sat) if ss_sat > 0 else math.inf
    return f, float(df1), float(df_sat), float(sps.f.sf(f, df1, df_sat)) if math.isfinite(f) else 0.0


# ============================================================================ a study's components


@dataclass(frozen=True)
class Components:
    """A study's variance components of log(metric) (variances on the log scale, with their df): the runs
    within a campaign x cell, campaign x cell within a load (s_u^2), and dataset load x campaign (s_L^2);
    NaN where the design cannot estimate one (one campaign: neither campaign level)."""

    run: float
    run_df: float
    cell: float
    cell_df: float
    load: float
    load_df: float
    campaigns: int
    runs_per_cell: float  # mean repetitions per campaign x cell

    def campaign_level(self) -> float:
        """The variance a cell's campaign mean gains from the campaign level (load + campaign x cell)."""
        return sum(v for v in (self.cell, self.load) if math.isfinite(v))


def study_components(data: pd.DataFrame, metric: str, cols: Sequence[str], loads: Sequence[str]) -> Components:
    """The components of the module doc over every cell of a study (method of moments, truncated at zero)."""
    y = np.log(pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=float))
    ok = np.isfinite(y)
    data, y = data[ok], y[ok]
    key = _keys(data, cols).to_numpy()
    camp = campaign_column(data).to_numpy()
    run_var, run_df = _run_ms(y, np.array([f"{c}#{k}" for c, k in zip(camp, key)]))
    frame = pd.DataFrame({"campaign": camp, "_key": key, "y": y})
    means = frame.groupby(["campaign", "_key"], sort=True)["y"].agg(["mean", "count"]).reset_index()
    n_bar = float(means["count"].mean()) if len(means) else math.nan
    K = len(np.unique(camp))
    if K < 2:
        return Components(run_var, run_df, math.nan, 0.0, math.nan, 0.0, K, n_bar)
    load_of = dict(zip(key, _keys(data, loads))) if loads else {}
    mk, mc = means["_key"].to_numpy(), means["campaign"].to_numpy()
    lk = np.array([f"{c}#{load_of.get(k, '')}" for c, k in zip(mc, mk)])
    m = means["mean"].to_numpy(dtype=float)
    ss_a, df_a, _ = _ols_resid(np.hstack([_dummies(mk), _dummies(lk)]), m)
    X_b = np.hstack([_dummies(mk), _dummies(mc)[:, 1:]])
    ss_b, df_b, _ = _ols_resid(X_b, m)
    ms_a = ss_a / df_a if df_a > 0 else math.nan
    s_u = max(0.0, ms_a - (run_var / n_bar if math.isfinite(run_var) else 0.0)) if df_a > 0 else math.nan
    df_lk = df_b - df_a
    if df_lk > 0:
        Z = _dummies(lk)
        M_b = np.eye(len(m)) - X_b @ np.linalg.pinv(X_b)
        c_star = float(np.trace(M_b @ Z @ Z.T)) / df_lk
        ms_lk = (ss_b - ss_a) / df_lk
        s_l = max(0.0, (ms_lk - (ms_a if df_a > 0 else 0.0)) / c_star)
    else:
        s_l = math.nan
    return Components(run_var, run_df, s_u, float(df_a), s_l, float(df_lk), K, n_bar)
