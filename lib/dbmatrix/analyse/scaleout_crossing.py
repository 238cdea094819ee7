"""Seed 000's doubling as a crossing ratio with an interval from every level that varies. Pure.

The seed reads off its p95 chart that 2n front-ends keep twice the clients of n under 0.5 ms. A grid of
thread levels only brackets where each instance count's p95 crosses the threshold, and the crossing itself
moves between campaigns (a slower VM crosses at fewer clients), while the two instance counts of one
campaign move together. So the ratio is estimated per campaign, paired, and pooled with the campaign as
the unit:

- **Crossing** (per campaign and instance count): the thread count where the runs' p95 (sysbench's own,
  one value per run) reaches the threshold, from an ordinary least-squares fit of log p95 on log threads
  over the levels near it: those whose geometric-mean p95 is within a factor :data:`WINDOW` of the threshold,
  at least :data:`MIN_LEVELS` of them with at least one on each side (else the campaign does not bracket the
  crossing at that count and gives no estimate). Its variance by the delta method from the fit.
- **Ratio** (per campaign): log crossing at 2n minus log crossing at n; its within-campaign variance the sum
  of the two, t on the smaller residual df.
- **Pooled** (over the campaigns with a ratio): the mean log ratio; its variance the campaigns' sample
  variance over K (never below the mean within-campaign variance over K), t on K - 1 df: the campaign is the
  unit, so campaign-to-campaign variation of the pairing is in the interval. One campaign: its own interval,
  said to be within one campaign. A heterogeneity F test (between over within) is the consistency check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats

from dbmatrix.analyse.campaign_model import campaign_column
from dbmatrix.analyse.contrasts import Estimate, NotTestable

WINDOW = 3.0  # levels whose p95 is within this factor of the threshold enter a crossing's fit
MIN_LEVELS = 3


@dataclass(frozen=True)
class Crossing:
    """Where one instance count's p95 reaches the threshold in one campaign (log threads, its variance)."""
    instances: int
    log_threads: float
    var: float
    df: int
    slope: float
    levels: tuple[int, ...]

    @property
    def threads(self) -> float:
        return math.exp(self.log_threads)


def _p95_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The completed runs with a positive p95: numeric instances, threads, p95 and campaign (1 where absent)."""
    need = {"instances", "threads", "lat_pct_ms"}
    if runs.empty or not need <= set(runs.columns):
        raise NotTestable(f"needs the runs' {', '.join(sorted(need - set(runs.columns))) or 'rows'}")
    r = runs.assign(instances=pd.to_numeric(runs["instances"], errors="coerce"),
                    threads=pd.to_numeric(runs["threads"], errors="coerce"),
                    p95=pd.to_numeric(runs["lat_pct_ms"], errors="coerce"), campaign=campaign_column(runs))
    if "status" in r.columns:
        r = r[r["status"].fillna("ok") == "ok"]
    return r[(r["p95"] > 0) & (r["threads"] > 0)].dropna(subset=["instances", "threads"])


def crossing(runs: pd.DataFrame, instances: int, threshold_ms: float) -> Crossing:
    """The crossing of one instance count in one campaign's `runs` (see the module's rules)."""
    return _crossing(_p95_runs(runs), instances, threshold_ms)


def _crossing(p95_runs: pd.DataFrame, instances: int, threshold_ms: float) -> Crossing:
    r = p95_runs[p95_runs["instances"] == instances]
    gm = np.exp(np.log(r["p95"]).groupby(r["threads"]).mean()).sort_index()
    near = gm[(gm >= threshold_ms / WINDOW) & (gm <= threshold_ms * WINDOW)]
    under, over = int((near <= threshold_ms).sum()), int((near > threshold_ms).sum())
    if len(near) < MIN_LEVELS or not under or not over:
        where = ("every tested thread count kept p95 under" if (gm <= threshold_ms).all() else
                 "no tested thread count kept p95 under" if (gm > threshold_ms).all() else
                 f"fewer than {MIN_LEVELS} thread levels within x{WINDOW:g} of")
        raise NotTestable(f"{where} {threshold_ms:g} ms at {instances} instance(s) (threads "
                          f"{', '.join(f'{t:g}' for t in gm.index)}): no fit brackets the crossing")
    fit = r[r["threads"].isin(near.index)]
    x, y = np.log(fit["threads"].to_numpy(float)), np.log(fit["p95"].to_numpy(float))
    n = len(x)
    if n < 3:
        raise NotTestable(f"needs 3 or more runs near the crossing at {instances} instance(s)")
    xm = x.mean()
    sxx = float(((x - xm) ** 2).sum())
    b = float(((x - xm) * (y - y.mean())).sum() / sxx)
    a = float(y.mean() - b * xm)
    if b <= 0:
        raise NotTestable(f"p95 does not rise with client threads near {threshold_ms:g} ms at {instances} "
                          f"instance(s) (slope {b:.2f})")
    s2 = float(((y - a - b * x) ** 2).sum() / (n - 2))
    x_star = (math.log(threshold_ms) - a) / b
    # delta method on x* = (c - a) / b, with the fit centred at the mean: Var = s2 / b^2 (1/n + (x*-xm)^2/Sxx)
    var = s2 / b ** 2 * (1.0 / n + (x_star - xm) ** 2 / sxx)
    return Crossing(int(instances), x_star, var, n - 2, b, tuple(int(t) for t in near.index))


@dataclass(frozen=True)
class CampaignRatio:
    campaign: int
    log_ratio: float
    var: float
    df: int
    high: Crossing
    low: Crossing


def campaign_ratio(runs: pd.DataFrame, campaign: int, threshold_ms: float) -> CampaignRatio:
    """Crossing at 2n over crossing at n in one campaign, for the largest n measured at both counts."""
    return _campaign_ratio(_p95_runs(runs), campaign, threshold_ms)


def _campaign_ratio(r: pd.DataFrame, campaign: int, threshold_ms: float) -> CampaignRatio:
    counts = sorted({int(x) for x in r["instances"]})
    pairs = [n for n in counts if 2 * n in counts]
    if not pairs:
        raise NotTestable(f"needs two instance counts n and 2n; measured: {', '.join(map(str, counts)) or 'none'}")
    n = pairs[-1]
    lo, hi = _crossing(r, n, threshold_ms), _crossing(r, 2 * n, threshold_ms)
    return CampaignRatio(campaign, hi.log_threads - lo.log_threads, hi.var + lo.var, min(hi.df, lo.df), hi, lo)


def crossing_table(runs: pd.DataFrame, threshold_ms: float) -> pd.DataFrame:
    """Per campaign and instance count: the crossing, its standard error (log scale), slope and fitted levels;
    why not, where a campaign does not bracket it (the figure and the paper read this)."""
    rows = []
    for k, g in _p95_runs(runs).groupby("campaign", sort=True):
        for n in sorted({int(x) for x in g["instances"]}):
            try:
                c = _crossing(g, n, threshold_ms)
            except NotTestable as exc:
                rows.append({"campaign": int(k), "instances": n, "threshold_ms": threshold_ms,
                             "crossing_threads": math.nan, "se_log": math.nan, "slope": math.nan, "df": 0,
                             "levels": "", "note": str(exc)})
                continue
            rows.append({"campaign": int(k), "instances": n, "threshold_ms": threshold_ms,
                         "crossing_threads": c.threads, "se_log": math.sqrt(c.var), "slope": c.slope,
                         "df": c.df, "levels": " ".join(map(str, c.levels)), "note": ""})
    return pd.DataFrame(rows, columns=["campaign", "instances", "threshold_ms", "crossing_threads", "se_log",
                                       "slope", "df", "levels", "note"])


def _one(ratio: CampaignRatio, confidence: float, threshold_ms: float) -> Estimate:
    t = stats.t.ppf(0.5 + confidence / 2, ratio.df)
    half = t * math.sqrt(ratio.var)
    return Estimate(math.exp(ratio.log_ratio), math.exp(ratio.log_ratio - half), math.exp(ratio.log_ratio + half),
                    f"{_words(ratio, threshold_ms)}; within one campaign: the fits' residuals, t on {ratio.df} df",
                    0, _compared(ratio), 1, confidence=confidence, df=float(ratio.df))


def _words(r: CampaignRatio, threshold_ms: float) -> str:
    return (f"client threads where the runs' p95 reaches {threshold_ms:g} ms, {r.high.threads:.1f} at "
            f"{r.high.instances} vs {r.low.threads:.1f} at {r.low.instances} instance(s) (log-log fits over "
            f"threads {'/'.join(map(str, r.high.levels))} and {'/'.join(map(str, r.low.levels))})")


def _compared(r: CampaignRatio) -> str:
    return f"{r.high.instances} vs {r.low.instances} instances"


def crossing_ratio_estimate(runs: pd.DataFrame, confidence: float = 0.95,
                            threshold_ms: float = 0.5) -> Estimate:
    """The pooled crossing ratio over the campaigns of `runs` (the module's rules); NotTestable when no
    campaign brackets both crossings (the reasons of each campaign said)."""
    r = _p95_runs(runs)
    ks = sorted(set(campaign_column(runs)))
    ratios: list[CampaignRatio] = []
    why: dict[int, str] = {}
    for k in ks:
        try:
            ratios.append(_campaign_ratio(r[r["campaign"] == k], int(k), threshold_ms))
        except NotTestable as exc:
            why[int(k)] = str(exc)
    left_out = "; ".join(f"C{k}: {w}" for k, w in why.items())
    ids = frozenset(str(x) for x in runs["run_id"]) if "run_id" in runs.columns else frozenset()
    if not ratios:
        raise NotTestable(left_out if len(ks) > 1 else next(iter(why.values())))
    if len(ratios) == 1:
        est = _one(ratios[0], confidence, threshold_ms)
        return replace(est, basis=est.basis + (f"; left out: {left_out}" if why else ""), n=len(ids), run_ids=ids)
    return _pooled(ratios, left_out, ids, confidence, threshold_ms)


def _pooled(ratios: list[CampaignRatio], left_out: str, ids: frozenset[str], confidence: float,
            threshold_ms: float) -> Estimate:
    y = np.array([r.log_ratio for r in ratios])
    w = np.array([r.var for r in ratios])
    k = len(y)
    between = float(y.var(ddof=1))
    within = float(w.mean())
    var = max(between, within) / k
    t = stats.t.ppf(0.5 + confidence / 2, k - 1)
    m, half = float(y.mean()), float(t * math.sqrt(var))
    df_within = float(sum(r.df for r in ratios))
    f = between / within if within > 0 else math.inf
    p = float(stats.f.sf(f, k - 1, df_within)) if math.isfinite(f) and df_within > 0 else math.nan
    crossings = ", ".join(f"C{r.campaign} {math.exp(r.log_ratio):.2f}" for r in ratios)
    basis = (f"client threads where the runs' p95 reaches {threshold_ms:g} ms, {ratios[0].high.instances} / "
             f"{ratios[0].low.instances} instance(s), per campaign from log-log fits near the crossing ({crossings});"
             f" pooled over {k} campaigns, the campaign as the unit: log scale, t on {k - 1} df"
             + (" (the between-campaign variance is below the fits' own: theirs used)" if within > between else "")
             + (f"; left out: {left_out}" if left_out else ""))
    return Estimate(math.exp(m), math.exp(m - half), math.exp(m + half), basis, len(ids), _compared(ratios[0]), k,
                    run_ids=ids, confidence=confidence, df=float(k - 1),
                    heterogeneity=(f, float(k - 1), df_within, p))
