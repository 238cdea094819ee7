"""Campaigns as a level of replication: the arithmetic of pooling over them (pure; the Estimate-level API
is :mod:`dbmatrix.analyse.pooling`, the model contrasts :func:`dbmatrix.analyse.contrasts.ratio_estimate`).

A campaign is one run of a study's matrix on one boot of one host. Repetitions within a campaign share
the boot, the dataset snapshot and the hour, so their spread leaves out the variation between campaigns,
which on this machine is the larger one. The model behind the pooled estimates, on the log scale, for cell
c (a combination of factor levels), campaign k and repetition r::

    log y_ckr = mu_c + b_k + u_ck + e_ckr,   u_ck ~ N(0, s_u^2),  e_ckr ~ N(0, s_e^2)

with b_k the campaign's shift of every cell (a block effect: it cancels from every contrast between
cells), u_ck the campaign x cell effect (a cell runs differently in another boot), e_ckr the repetition
noise. Assumption: s_u^2 (and s_e^2) is the same for every cell on the log scale, i.e. the relative
variation does not depend on the cell.

Two stages (:func:`campaign_cell_means`, then OLS in :mod:`dbmatrix.analyse.contrasts`):

1. per campaign and cell, the mean of log y over that campaign's repetitions: m_ck = mu_c + b_k + u_ck +
   mean_r e_ckr, whose variance is s_u^2 + s_e^2/n;
2. OLS of m_ck on the cell model (the factor terms) plus a campaign block. Its residual mean square
   estimates s_u^2 + s_e^2/n (plus lack of fit when the model has fewer terms than cells), with
   cells*K - params - (K-1) degrees of freedom, i.e. (cells-1)(K-1) when the model is saturated in the
   cells; a contrast between cells gets a t interval with those df.

For a balanced design (every cell in every campaign, the same number of repetitions) this is exact: the
fixed-effect estimates and their standard errors equal those of the mixed model with random campaign x
cell effects (REML, variance component not on its boundary), because the cell means are sufficient for
the contrasts and their covariance within a campaign is compound-symmetric. Unbalanced (a failed run, a
missing cell in one campaign), the estimates stay unbiased and the intervals approximate.

Why not a two-level bootstrap: with the 2-5 campaigns a study will have, resampling campaigns has 3 to
126 distinct resamples and its percentile intervals are far too narrow; the t interval with few df is the
honest small-sample answer. With two campaigns and only the two compared cells it has 1 df (t = 12.7):
wide, as it should be. The study's other cells lend their campaign x cell variation to every contrast.

Since issue 38 a claim's contrast between cells that were all measured comes from their cell means with a
dataset-load level as well (:mod:`dbmatrix.analyse.cell_model`: Henderson III mean squares, Satterthwaite
df); the OLS path here serves reduced models on fractions (after a lack-of-fit test) and figures. Its
run-level floor (:func:`dbmatrix.analyse.contrasts.run_floor`: the cell means' variance is never taken below
the repetitions' within-cell variance over n) takes the smaller of the two df: a campaign-level variance
never borrows the runs' df. Coverage: ``benchmarks/bench_design_coverage.py`` (and, for this path,
``benchmarks/bench_pooled_coverage.py``).

For estimators that are not models (no claim uses this since issue 25) :func:`pooled_t` (through
:func:`dbmatrix.analyse.pooling.pool_campaign_estimates`) pools per-campaign
estimates: the mean on the log scale (or the natural scale for differences) and a t interval with K-1 df
from the spread of the campaign estimates (Hartung-Knapp with equal weights: the campaigns are the
replicates; their own intervals, which leave out the campaign variation, do not weight them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

CAMPAIGN = "campaign"  # the runs table's column (1 for results recorded before campaigns existed)
ONE_CAMPAIGN = "within one campaign"


def campaigns_of(runs: pd.DataFrame) -> list[int]:
    """The campaigns present in `runs`, sorted; [1] when the column is absent (everything is one)."""
    if CAMPAIGN not in runs.columns or runs.empty:
        return [1]
    values = pd.to_numeric(runs[CAMPAIGN], errors="coerce").fillna(1).astype(int)
    return sorted(int(v) for v in values.unique())


def campaign_column(runs: pd.DataFrame) -> pd.Series:
    """The campaign of every run (1 where absent)."""
    if CAMPAIGN not in runs.columns:
        return pd.Series(1, index=runs.index, dtype=int)
    return pd.to_numeric(runs[CAMPAIGN], errors="coerce").fillna(1).astype(int)


def campaign_cell_means(data: pd.DataFrame, metric: str, factors: Sequence[str]) -> pd.DataFrame:
    """Stage 1: one row per campaign and cell (combination of `factors`) with the geometric mean of the
    positive `metric` over that campaign's repetitions (``metric``: exp of the mean log), ``n_runs``, and
    ``campaign``. Cells are keyed by the factors' levels (NaN levels form their own cell)."""
    y = pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(y) & (y > 0)
    frame = data.loc[keep, list(factors)]
    camp = campaign_column(data).to_numpy()[keep]
    # one integer code per (campaign, cell): factorize each column (NaN its own level), then the rows
    codes = np.column_stack([camp] + [pd.factorize(frame[f], use_na_sentinel=False)[0] for f in factors])
    _, first, group = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    logs = np.log(y[keep])
    n = np.bincount(group)
    out = frame.iloc[first].reset_index(drop=True)
    out.insert(0, CAMPAIGN, camp[first])
    out["n_runs"] = n
    out[metric] = np.exp(np.bincount(group, weights=logs) / n)
    return out


def pooled_t(values: Sequence[float], *, log: bool = True,
             confidence: float = 0.95) -> tuple[float, float, float, int]:
    """Mean of the campaign estimates (on the log scale when `log`) with a t interval on K-1 df:
    (estimate, ci_lo, ci_hi, df), back on the natural scale. NaN interval with fewer than two values."""
    v = np.asarray(values, dtype=float)
    if log:
        if (v <= 0).any():
            raise ValueError("pooled_t: a ratio must be positive to pool on the log scale (log=False for "
                             "differences)")
        v = np.log(v)
    k = v.size
    if k == 0:
        return math.nan, math.nan, math.nan, 0
    centre = float(v.mean())
    if k < 2:
        est = math.exp(centre) if log else centre
        return est, math.nan, math.nan, 0
    half = float(sps.t.ppf((1 + confidence) / 2, k - 1) * v.std(ddof=1) / math.sqrt(k))
    lo, hi = centre - half, centre + half
    if log:
        return math.exp(centre), math.exp(lo), math.exp(hi), k - 1
    return centre, lo, hi, k - 1


def alias_note(design: dict[str, object] | None) -> str:
    """What a fractional design aliases, from its resolution (Experiment.design_info()): in a resolution R
    fraction an effect of order i is aliased with effects of order R - i; the note names the aliasing a
    two-way model leans on. '' for a full factorial or no design."""
    if design and design.get("design") == "crossed":
        aliases = design.get("aliases")
        crossed = design.get("crossed_with")
        return (f"{design.get('fraction')} half fraction crossed with "
                f"{', '.join(str(c) for c in crossed) if isinstance(crossed, list) else ''}: "
                + "; ".join(str(a) for a in (aliases if isinstance(aliases, list) else []))
                + " (the model leaves the second of each pair out)")
    if not design or design.get("design") != "fractional":
        return ""
    res = int(str(design.get("resolution", 0)) or 0)
    if res < 3:
        return ""
    order = {1: "main effects", 2: "two-factor interactions", 3: "three-factor ones", 4: "four-factor ones",
             5: "five-factor ones", 6: "six-factor ones"}
    if res == 3:
        text = "main effects aliased with two-factor interactions"
    elif res == 4:
        text = "two-factor interactions aliased with each other"
    else:
        text = f"two-factor interactions aliased with {order.get(res - 2, f'{res - 2}-factor ones')}"
    fraction = design.get("fraction") or "fraction"
    return f"{fraction} resolution {_roman(res)}: {text}"


def _roman(n: int) -> str:
    out = ""
    for value, letters in ((10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= value:
            out, n = out + letters, n - value
    return out
