"""Exact group-sequential boundaries for looks at the pooled estimate, one look per campaign (pure).

A study judged after every campaign looks at its pooled, campaign-level estimate K_max times at most (the
registered maximum number of campaigns). Judging each look's 95 % interval inflates the error rate; the
union bound of :mod:`dbmatrix.analyse.stats.sequential` (look k at level 1 - a_k, the spending function's
increment) keeps it under alpha whatever the looks' correlation, but the looks at one study's pooled
estimate are strongly correlated (look k holds every campaign of look k - 1), so the union bound is about 4x
conservative (1.3 % errors at a nominal 5 %).

Here the boundaries are exact for that correlation. With information fractions t_k (campaigns so far over
K_max when campaigns are equally informative) the standardised estimates Z_1..Z_K are jointly normal with
corr(Z_j, Z_k) = sqrt(t_j / t_k) (j <= k): the canonical joint distribution (Jennison & Turnbull 2000,
ch. 3), which holds for any efficient estimate whose information grows with the data. The two-sided
boundaries c_k solve

    P(|Z_j| < c_j for j < k, |Z_k| >= c_k) = alpha(t_k) - alpha(t_{k-1})

with the Lan-DeMets spending function alpha(t) (O'Brien-Fleming type by default), computed by the numerical
recursion of Armitage, McPherson and Rowe (1969) on the Brownian-motion scale W_k = Z_k sqrt(t_k), whose
increments are independent N(0, t_k - t_{k-1}): the sub-density of W_k over the continuation region is the
previous one convolved with the increment's normal density (Simpson's rule on a grid). Deterministic, no
Monte Carlo.

The repeated confidence intervals estimate +- c_k SE_k then cover the true value at every look at once with
probability 1 - alpha (Jennison & Turnbull ch. 9). A look's interval is a t interval on few df (a campaign
pool has K - 1 df at the campaign level), so look k uses the nominal level of its z boundary,
1 - 2 (1 - Phi(c_k)), with the t quantile on its own df (the usual small-sample adjustment, Jennison &
Turnbull ch. 11): :func:`look_levels` gives those levels, which the estimators take as ``confidence``.
``benchmarks/bench_campaign_looks.py`` measures error rate and power against the union bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

from dbmatrix.analyse.stats.sequential import ALPHA, DEFAULT_SPENDING, increments, level_text

GRID = 1601  # points of the continuation region per look (odd: Simpson's rule); error < 1e-6 in alpha


def _simpson_weights(n: int, h: float) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w * h / 3.0


def _exit(f: np.ndarray, w: np.ndarray, x: np.ndarray, var: float, c: float) -> float:
    """P(|W_new| >= c) from the sub-density `f` (weights `w`) on the grid `x`, the increment of variance `var`."""
    sd = math.sqrt(var)
    inside = sps.norm.cdf((c - x) / sd) - sps.norm.cdf((-c - x) / sd)
    return float(np.sum(w * f * (1.0 - inside)))


def _next_density(f: np.ndarray, w: np.ndarray, x: np.ndarray, x_new: np.ndarray, var: float,
                  mu: float = 0.0) -> np.ndarray:
    """The sub-density at the next look on `x_new`: the current one convolved with N(mu, var)."""
    sd = math.sqrt(var)
    kern = sps.norm.pdf((x_new[:, None] - x[None, :] - mu) / sd) / sd
    return np.asarray(kern @ (w * f))


def boundaries(fractions: Sequence[float], alpha: float = ALPHA, spending: str = DEFAULT_SPENDING,
               grid: int = GRID) -> list[float]:
    """Two-sided z boundaries c_1..c_K of looks at the increasing information `fractions` (last <= 1) that
    spend `spending`'s alpha(t_k) - alpha(t_{k-1}) exactly at look k under the canonical joint distribution."""
    spend = increments(fractions, alpha, spending)
    ts = [float(t) for t in fractions]
    out: list[float] = []
    f = x = w = np.empty(0)
    prev_t = 0.0
    for k, (t, a_k) in enumerate(zip(ts, spend)):
        var = t - prev_t
        if a_k <= 0:
            c = math.inf
        elif k == 0:  # W_1 ~ N(0, t_1): |Z_1| >= c with probability a_1
            c = float(sps.norm.isf(a_k / 2))
        else:
            def excess(cz: float, f: np.ndarray = f, x: np.ndarray = x, w: np.ndarray = w, var: float = var,
                       t: float = t, a_k: float = a_k) -> float:
                return _exit(f, w, x, var, cz * math.sqrt(t)) - a_k
            c = float(optimize.brentq(excess, 0.0, 40.0, xtol=1e-10))
        out.append(c)
        # the sub-density of W_k on the continuation region |W_k| < c_k sqrt(t_k)
        edge = (c if math.isfinite(c) else 10.0) * math.sqrt(t)
        x_new = np.linspace(-edge, edge, grid)
        f = sps.norm.pdf(x_new, scale=math.sqrt(t)) if k == 0 else _next_density(f, w, x, x_new, var)
        x, w, prev_t = x_new, _simpson_weights(grid, x_new[1] - x_new[0]), t
    return out


def crossing_probability(bounds: Sequence[float], fractions: Sequence[float], drift: float = 0.0,
                         grid: int = GRID) -> float:
    """P(|Z_k| >= c_k at some look) when the standardised effect at full information is `drift` (Z_k has mean
    drift sqrt(t_k)): alpha at drift 0 (a check of :func:`boundaries`), the power otherwise."""
    total = 0.0
    f = x = w = np.empty(0)
    prev_t = 0.0
    for k, (c, t) in enumerate(zip(bounds, fractions)):
        var = t - prev_t
        mu = drift * var  # W's mean increment
        cw = c * math.sqrt(t)
        sd = math.sqrt(var)
        x_new = np.linspace(-cw, cw, grid)
        if k == 0:
            total += float(sps.norm.sf((cw - mu) / sd) + sps.norm.cdf((-cw - mu) / sd))
            f = sps.norm.pdf(x_new, loc=mu, scale=sd)
        else:
            inside = sps.norm.cdf((cw - x - mu) / sd) - sps.norm.cdf((-cw - x - mu) / sd)
            total += float(np.sum(w * f * (1.0 - inside)))
            f = _next_density(f, w, x, x_new, var, mu)
        x, w, prev_t = x_new, _simpson_weights(grid, x_new[1] - x_new[0]), t
    return total


def nominal_confidence(c: float) -> float:
    """The two-sided level of a z boundary: 1 - 2 (1 - Phi(c))."""
    return 1.0 - 2.0 * float(sps.norm.sf(c)) if math.isfinite(c) else 1.0


@dataclass(frozen=True)
class CampaignLooks:
    """Looks at a study's pooled estimate after each campaign, at most ``max_campaigns`` of them, equally
    informative (one campaign = one unit of information), alpha spent by ``spending``."""

    max_campaigns: int
    alpha: float = ALPHA
    spending: str = DEFAULT_SPENDING

    def __post_init__(self) -> None:
        if self.max_campaigns < 1:
            raise ValueError(f"max_campaigns: {self.max_campaigns}; allowed: >= 1")

    def fractions(self) -> list[float]:
        return [k / self.max_campaigns for k in range(1, self.max_campaigns + 1)]

    def bounds(self) -> list[float]:
        return _bounds(self.max_campaigns, self.alpha, self.spending)

    def confidence(self, campaigns: int) -> float:
        """The level of the interval judged after `campaigns` campaigns (the last look's beyond the maximum)."""
        if campaigns < 1:
            raise ValueError(f"campaigns: {campaigns}; allowed: >= 1")
        return nominal_confidence(self.bounds()[min(campaigns, self.max_campaigns) - 1])

    def describe(self, campaigns: int) -> str:
        k = min(campaigns, self.max_campaigns)
        return (f"look {k} of at most {self.max_campaigns} campaigns, {self.spending} alpha spending, exact "
                f"group-sequential boundary: {level_text(self.confidence(campaigns))} interval")


_CACHE: dict[tuple[int, float, str], list[float]] = {}


def _bounds(k: int, alpha: float, spending: str) -> list[float]:
    key = (k, alpha, spending)
    if key not in _CACHE:
        _CACHE[key] = boundaries([j / k for j in range(1, k + 1)], alpha, spending)
    return _CACHE[key]


def union_bound_levels(fractions: Sequence[float], alpha: float = ALPHA, spending: str = DEFAULT_SPENDING
                       ) -> list[float]:
    """The union bound's levels at the same looks (1 - the spending function's increments), for comparison."""
    return [1.0 - a for a in increments(fractions, alpha, spending)]


def look_levels(max_campaigns: int, alpha: float = ALPHA, spending: str = DEFAULT_SPENDING) -> list[float]:
    """The exact boundaries' nominal levels, look 1..max_campaigns."""
    return [nominal_confidence(c) for c in _bounds(max_campaigns, alpha, spending)]
