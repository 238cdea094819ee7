"""The variance model behind ``dbmatrix compare``: a cell's change B/A with an interval that holds the
campaign level, as the claims' intervals do (:mod:`dbmatrix.analyse.cell_model`).

On the log scale a run of cell c in campaign k is ``mu_c + b_k + l_dk + u_ck + e_ckr`` (cell_model's module
doc). A side's estimate of a cell is the mean of its campaigns' cell means; the change of a cell is B's
minus A's, so mu_c cancels and what is left varies with

- the dataset load x campaign (s_L^2) and the campaign x cell (s_u^2) components, once per campaign of each
  side: a fresh campaign draws them anew, so two campaigns of an unchanged study differ by them;
- the runs (s_e^2), once per run.

A side of two or more campaigns measures its own components (:func:`cell_model.study_components`); a side
of one campaign measures only its runs, and takes the campaign level from the **reference**: the full study
when one campaign of it was selected, else the other side, else the committed reference of the
experiment (the caller picks it, :func:`dbmatrix.resultsets.reference_runs`). Without any the campaign level
is unmeasured and the intervals hold the runs only (said in the basis: too narrow).

Var(change) = sum over sides of s_u^2/K + s_L^2/K + s_e^2 * mean(1/n_k)/K, degrees of freedom by
Satterthwaite with each component's own df (campaign x cell, load x campaign, runs). The campaign's shift
of every cell (b_k) is fixed, as in the claims: a shift of the whole campaign is part of the change B shows
(:func:`overall_change` reports it over all cells, with the same components).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
from dbmatrix.analyse.cell_model import Components, study_components
from dbmatrix.spec.factors import DATASET_FACTORS, FACTORS

OWN = "own"  # a side's campaign level from its own campaigns
REFERENCE = "reference"  # from the reference's campaigns
UNMEASURED = "unmeasured"  # no side or reference with two campaigns: runs only
Term = tuple[str, float, float, float]  # (component, coefficient, variance, df)


def level_text(v: object) -> str:
    """A factor level as a key: 25 and 25.0 alike, NaN and None as ''."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def cell_key(df: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    """One text key per row: its levels of `cols`."""
    if not cols or df.empty:
        return pd.Series("", index=df.index, dtype=str)
    parts = [df[c].map(level_text).astype(str) for c in cols]
    out = parts[0]
    for p in parts[1:]:
        out = out + "|" + p
    return out


def positive(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The ok runs with a positive, finite `metric`."""
    ok = runs[runs["status"] == "ok"] if "status" in runs.columns else runs
    y = pd.to_numeric(ok[metric], errors="coerce") if metric in ok.columns else pd.Series(dtype=float)
    return ok[(y > 0) & np.isfinite(y)] if len(ok) else ok


def components(runs: pd.DataFrame | None, metric: str, cols: Sequence[str]) -> Components | None:
    """The study's variance components of log(metric) (runs, campaign x cell, load); None without data."""
    if runs is None or metric not in runs.columns:
        return None
    data = positive(runs, metric)
    if data.empty:
        return None
    varied = [c for c in cols if c in data.columns and data[c].map(level_text).nunique() > 1]
    return study_components(data, metric, varied, [c for c in varied if c in DATASET_FACTORS])


@dataclass(frozen=True)
class SideModel:
    """What one side contributes: its runs' variance and the campaign level it uses (and whose)."""

    runs: Components | None  # the side's own components (its runs' variance; its campaign level if K >= 2)
    level: Components | None  # the campaign level used: own, the reference's, or None
    source: str  # OWN, REFERENCE, UNMEASURED

    def terms(self, k: float, inv_n: float) -> list[Term]:
        """The terms of a side mean over `k` campaigns with mean 1/n `inv_n` per campaign."""
        out: list[Term] = []
        if self.level is not None:
            out += [("cell", 1.0 / k, self.level.cell, self.level.cell_df),
                    ("load", 1.0 / k, self.level.load, self.level.load_df)]
        run = self.runs if self.runs is not None and self.runs.run_df > 0 else self.level
        if run is not None:
            out.append(("run", inv_n / k, run.run, run.run_df))
        return out


def side_model(runs: pd.DataFrame, metric: str, cols: Sequence[str], reference: pd.DataFrame | None) -> SideModel:
    """The side's own components when it has two campaigns or more, else the reference's campaign level."""
    own = components(runs, metric, cols)
    if own is not None and own.campaigns >= 2:
        return SideModel(own, own, OWN)
    ref = components(reference, metric, cols)
    if ref is not None and ref.campaigns >= 2:
        return SideModel(own, ref, REFERENCE)
    return SideModel(own, None, UNMEASURED)


def satterthwaite(terms: Sequence[Term]) -> tuple[float, float]:
    """sum g * v and its Satterthwaite df over the terms with a finite v and df > 0. Terms of one estimate
    (the same component, value and df: both sides using the reference's) are one term, their g summed."""
    merged: dict[tuple[str, float, float], float] = {}
    for name, g, v, df in terms:
        if math.isfinite(v) and df > 0 and g != 0:
            merged[(name, v, df)] = merged.get((name, v, df), 0.0) + g
    if not merged:
        return math.nan, math.nan
    var = sum(g * v for (_, v, _), g in merged.items())
    den = sum((g * v) ** 2 / df for (_, v, df), g in merged.items())
    return var, (var ** 2 / den if den > 0 else math.inf)


def interval(d: float, var: float, df: float, level: float) -> tuple[float, float]:
    """d -/+ t(level, df) * sqrt(var) (normal for infinite df); NaNs without a variance."""
    if not (math.isfinite(var) and var >= 0) or not df > 0:
        return math.nan, math.nan
    q = float(stats.norm.ppf(0.5 + level / 2)) if math.isinf(df) else float(stats.t.ppf(0.5 + level / 2, df))
    half = q * math.sqrt(var)
    return d - half, d + half


def family_level(level: float, m: int) -> float:
    """Each of `m` intervals' level so that all hold together at `level` (Bonferroni)."""
    return 1 - (1 - level) / max(m, 1)


def per_cell(data: pd.DataFrame, metric: str, cols: Sequence[str]) -> pd.DataFrame:
    """Per cell key: the mean over campaigns of the campaign's mean log, campaigns K, runs and mean 1/n."""
    y = np.log(pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=float))
    frame = pd.DataFrame({"key": cell_key(data, cols).to_numpy(), "k": campaign_column(data).to_numpy(), "y": y})
    ck = frame.groupby(["key", "k"])["y"].agg(["mean", "count"]).reset_index()
    ck["inv_n"] = 1.0 / ck["count"]
    g = ck.groupby("key")
    return pd.DataFrame({"mean": g["mean"].mean(), "K": g["k"].nunique(), "runs": g["count"].sum(),
                         "inv_n": g["inv_n"].mean()})


def cell_changes(a: pd.DataFrame, b: pd.DataFrame, metric: str, cols: Sequence[str],
                 reference: pd.DataFrame | None = None) -> tuple[pd.DataFrame, SideModel, SideModel]:
    """Per cell measured on both sides (index: :func:`cell_key`): ``d`` (log B/A), ``var``, ``df``; and the
    two sides' models. Cells without `metric` on a side are left out."""
    da, db = positive(a, metric), positive(b, metric)
    ma, mb = side_model(da, metric, cols, reference), side_model(db, metric, cols, reference)
    if da.empty or db.empty:
        return pd.DataFrame(columns=["d", "var", "df"]), ma, mb
    pa, pb = per_cell(da, metric, cols), per_cell(db, metric, cols)
    keys = [k for k in pa.index if k in pb.index]
    rows = {}
    for k in keys:
        terms = ma.terms(pa.at[k, "K"], pa.at[k, "inv_n"]) + mb.terms(pb.at[k, "K"], pb.at[k, "inv_n"])
        var, df = satterthwaite(terms)
        rows[k] = {"d": float(pb.at[k, "mean"] - pa.at[k, "mean"]), "var": var, "df": df}
    return pd.DataFrame.from_dict(rows, orient="index", columns=["d", "var", "df"]), ma, mb


def overall_change(a: pd.DataFrame, b: pd.DataFrame, metric: str, cols: Sequence[str], keys: Sequence[str],
                   ma: SideModel, mb: SideModel) -> tuple[float, float, float] | None:
    """The mean log change over the cells `keys` with its variance and df: the campaign x cell and run terms
    average out over cells, the load terms only over the loads (cells of one dataset load move together).
    None with fewer than two cells."""
    if len(keys) < 2:
        return None
    loads = [c for c in cols if c in DATASET_FACTORS]
    terms: list[Term] = []
    mean = 0.0
    for runs, model, sign in ((positive(a, metric), ma, -1.0), (positive(b, metric), mb, 1.0)):
        runs = runs[cell_key(runs, cols).isin(set(keys)).to_numpy()]
        per = per_cell(runs, metric, cols).loc[list(keys)]
        mean += sign * float(per["mean"].mean())
        n = len(per)
        k = float(len(campaigns_of(runs)))
        load_of = cell_key(runs, loads).groupby(cell_key(runs, cols).to_numpy()).first().loc[list(keys)]
        share = float(((load_of.value_counts() / n) ** 2).sum()) if loads else 1.0
        if model.level is not None:
            terms += [("cell", 1.0 / (k * n), model.level.cell, model.level.cell_df),
                      ("load", share / k, model.level.load, model.level.load_df)]
        run = model.runs if model.runs is not None and model.runs.run_df > 0 else model.level
        if run is not None:
            terms.append(("run", float((per["inv_n"] / per["K"]).sum()) / n ** 2, run.run, run.run_df))
    var, df = satterthwaite(terms)
    return mean, var, df


def campaign_shift(runs: pd.DataFrame | None, metric: str) -> float | None:
    """The largest difference between two campaigns' mean log `metric` over the cells all of them hold
    (how far a whole campaign moved; None with fewer than two campaigns)."""
    if runs is None or metric not in runs.columns:
        return None
    data = positive(runs, metric)
    if len(campaigns_of(data)) < 2:
        return None
    cols = [c for c in FACTORS if c in data.columns]
    y = np.log(pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=float))
    frame = pd.DataFrame({"key": cell_key(data, cols).to_numpy(), "k": campaign_column(data).to_numpy(), "y": y})
    wide = frame.groupby(["k", "key"])["y"].mean().unstack().dropna(axis=1)
    if wide.shape[1] == 0:
        return None
    m = wide.mean(axis=1)
    return float(m.max() - m.min())
