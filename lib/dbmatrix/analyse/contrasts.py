"""Estimates of a comparison from the processed runs: matched cells, the factorial model's contrasts,
dataset-size ratios, shares with Wilson intervals (what the claims and the figures ask of the data).

With two or more campaigns (the runs' ``campaign`` column) :func:`ratio_estimate` pools them by the
two-stage model of :mod:`dbmatrix.analyse.campaign_model` (campaign-level cell means, then OLS with a
campaign block: the interval comes from the campaign x cell variation); with one campaign it is the
estimate of that campaign's repetitions (``Estimate.campaigns == 1``; the basis says "within one campaign"
when asked). Per-campaign estimates and the pooling of estimators that are not models:
:mod:`dbmatrix.analyse.pooling`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, product
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.campaign_model import (
    CAMPAIGN,
    ONE_CAMPAIGN,
    alias_note,
    campaign_cell_means,
    campaigns_of,
)
from dbmatrix.analyse.cell_model import cell_contrast, cell_keys, lack_of_fit
from dbmatrix.analyse.effects import sum_contrast
from dbmatrix.analyse.stats import STABLE_BAND_PCT, UNTESTED_REASONS, level_key, welch_log_ratio
from dbmatrix.analyse.stats.intervals import exp_or_inf
from dbmatrix.spec.factors import (
    DATASET_FACTORS,
    MODEL_FACTORS,
    factor_unit,
    factor_word,
)

UNTESTED_STEADY = UNTESTED_REASONS
METRIC_LABELS = {"tps": "throughput", "p95_ms": "p95 latency", "write_kb_per_txn": "KiB written/txn",
                 "read_kb_per_txn": "KiB read/txn", "mysqld_cpu_us_per_txn": "mysqld CPU/txn",
                 "data_physical_bytes": "on-disk size", "steady": "steady runs",
                 "fc_paused_pct_points": "flow-control paused time", "tps_ratio": "throughput",
                 "lat_p95_ratio": "p95 latency", "lat_avg_ratio": "average latency", "tpmC": "tpmC",
                 "p99_ms": "p99 latency"}




# The headline cache ratio is never averaged over a factor whose interaction with the cache has p below this
# (analyse.tables); claims name the levels they are judged at instead (Claim.per, fixed before the data).
INTERACTION_ALPHA = 0.05


@dataclass
class Estimate:
    estimate: float
    ci_lo: float
    ci_hi: float
    basis: str
    n: int
    compared: str = ""
    campaigns: int = 1  # campaigns the estimate draws on (its interval includes their variation if >= 2)
    # The campaign estimates a pooled estimate was made of (campaigns.pool_campaign_estimates), in campaign
    # order; empty otherwise (campaigns.per_campaign_estimates gives them for any estimator).
    per_campaign: list[Estimate] = field(default_factory=list)
    # A deterministic quantity (a dataset size per pair): its values, judged one by one; no interval
    # (ci_lo/ci_hi NaN, never called a CI). Empty for a sampled estimate.
    values: list[tuple[str, float]] = field(default_factory=list)
    run_ids: frozenset[str] = frozenset()  # the unique runs behind the estimate (n of a per-level verdict)
    confidence: float = 0.95  # the interval's level (a look of a campaign run until decided asks for another)
    df: float = math.nan  # the t interval's degrees of freedom (Satterthwaite where components combine)
    # campaigns consistent? the contrast's campaign x contrast interaction against the within-campaign noise:
    # (F, df1, df2, p); None with one campaign or where it cannot be tested. A consistency check, not a decision
    heterogeneity: tuple[float, float, float, float] | None = None


class NotTestable(Exception):
    """The data cannot answer this claim (the message says why)."""


class NotIdentified(NotTestable):
    """The study's design does not identify the comparison: the claim's condition, or the interaction of
    the compared factor with a factor it would average over, is aliased (the message names the alias)."""


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n."""
    if n == 0:
        return math.nan, math.nan
    z = sps.norm.ppf((1 + confidence) / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# ============================================================================ the model


def _sort_key(k: Any) -> tuple[bool, float, str]:
    number = isinstance(k, (int, float, np.number)) and not isinstance(k, bool)
    return (not number, float(k) if number else 0.0, str(k))


def ordered_levels(values: pd.Series, order: Sequence[Any] | None = None) -> list[Any]:
    """Levels present in `values`: those of `order` first (in its order), the rest sorted."""
    present = {level_key(v): v for v in values}
    out = [v for v in (order or ()) if level_key(v) in present]
    known = {level_key(v) for v in out}
    return out + [present[k] for k in sorted((k for k in present if k not in known), key=_sort_key)]


@dataclass
class LogModel:
    """OLS of log(metric) on sum-to-zero coded factors (main effects, two-way interactions if asked)."""

    factors: list[str]
    levels: dict[str, list[Any]]
    terms: list[tuple[str, ...]]
    params: np.ndarray
    cov: np.ndarray
    df_resid: int
    n: int
    name: str
    blocks: int = 0  # block (campaign) columns after the terms' columns; a row leaves them at 0 (averaged)
    scale: float = math.nan  # the residual mean square (cov = scale * (X'X)^-1)
    # the run-level floor of a campaign-level model (:func:`run_floor`): the cell means' variance can be no
    # less than the repetitions' within-cell variance over n, with `floor_df` df
    floor: float = math.nan
    floor_df: int = 0
    floored: bool = False  # set by the last interval: the floor was larger than the residual

    def _se_df(self, L: np.ndarray) -> tuple[float, int]:
        """Standard error and df of the linear combination L of the parameters."""
        var = max(float(L @ self.cov @ L), 0.0)
        df = self.df_resid
        self.floored = False
        if math.isfinite(self.floor) and self.floor_df > 0 and self.scale > 0:
            c = var / self.scale
            if self.floor > self.scale:
                # the runs' variance is the larger: the interval uses it, with the smaller of the two df (a
                # campaign-level variance never borrows the runs' df)
                var, self.floored = c * self.floor, True
                df = min(self.df_resid, self.floor_df)
        return math.sqrt(var), df

    def _coded(self, f: str, level: Any) -> np.ndarray:
        keys = [level_key(v) for v in self.levels[f]]
        if level_key(level) not in keys:
            raise NotTestable(f"{f}={level} has no runs in the model (levels: "
                              f"{', '.join(map(str, self.levels[f]))})")
        return sum_contrast(len(keys))[keys.index(level_key(level))]

    def row(self, at: Mapping[str, Any]) -> np.ndarray:
        """The design row of the levels `at`, averaged over every level of the factors it leaves free
        (whose sum-to-zero codes average to zero)."""
        coded = {f: self._coded(f, at[f]) if f in at else np.zeros(len(self.levels[f]) - 1)
                 for f in self.factors}
        parts = [np.ones(1)]
        for t in self.terms:
            parts.append(coded[t[0]] if len(t) == 1 else np.kron(coded[t[0]], coded[t[1]]))
        parts.append(np.zeros(self.blocks))
        return np.concatenate(parts)

    def has_term(self, term: tuple[str, ...]) -> bool:
        return any(set(t) == set(term) for t in self.terms)

    def term_columns(self, term: tuple[str, ...]) -> list[int]:
        """The parameter indices of a term (its coded columns)."""
        start = 1
        for t in self.terms:
            width = int(np.prod([len(self.levels[f]) - 1 for f in t]))
            if set(t) == set(term):
                return list(range(start, start + width))
            start += width
        raise KeyError(term)

    def term_test(self, term: tuple[str, ...]) -> tuple[float, float]:
        """Wald F test that every coefficient of `term` is zero (the partial F of OLS): (F, p)."""
        idx = self.term_columns(term)
        beta = self.params[idx]
        cov = self.cov[np.ix_(idx, idx)]
        try:
            f = float(beta @ np.linalg.solve(cov, beta)) / len(idx)
        except np.linalg.LinAlgError:
            return math.nan, math.nan
        return f, float(sps.f.sf(f, len(idx), self.df_resid))

    def contrast(self, at_a: Mapping[str, Any], at_b: Mapping[str, Any],
                 confidence: float = 0.95) -> tuple[float, float, float]:
        """log(metric) at `at_a` minus at `at_b`: estimate and CI on the log scale."""
        L = self.row(at_a) - self.row(at_b)
        est = float(L @ self.params)
        se, df = self._se_df(L)
        half = sps.t.ppf((1 + confidence) / 2, df) * se
        return est, est - half, est + half

    def mean(self, at: Mapping[str, Any], confidence: float = 0.95) -> tuple[float, float, float]:
        """Model geometric mean at `at` (others averaged): estimate and CI, back on the metric's scale."""
        x = self.row(at)
        est = float(x @ self.params)
        se, df = self._se_df(x)
        half = sps.t.ppf((1 + confidence) / 2, df) * se
        return math.exp(est), math.exp(est - half), math.exp(est + half)


def positive_values(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Rows with a finite, positive metric (the model works on logarithms)."""
    if metric not in runs.columns:
        return runs.iloc[0:0]
    y = pd.to_numeric(runs[metric], errors="coerce")
    return runs[np.isfinite(y) & (y > 0)]


def varied(runs: pd.DataFrame, factors: Sequence[str]) -> list[str]:
    return [f for f in factors if f in runs.columns and runs[f].map(level_key).nunique() > 1]


def fit_log_model(runs: pd.DataFrame, factors: Sequence[str], metric: str = "tps", *,
                  interactions: bool = True,
                  level_order: Mapping[str, Sequence[Any]] | None = None,
                  block: str | None = None,
                  floor: tuple[float, int] | None = None) -> LogModel | None:
    """The factorial model of :func:`dbmatrix.analyse.effects.factorial_model` with its covariance kept, so that
    any contrast can be estimated. None when not estimable (aliased terms or no residual df).

    `block`: a column (the campaign) entered as a sum-coded block effect, additive, not crossed with any
    factor: contrasts between cells are within blocks and its residual is the block x cell variation."""
    import statsmodels.api as sm

    data = positive_values(runs, metric)
    factors = varied(data, factors)
    if not factors:
        return None
    y = np.log(pd.to_numeric(data[metric]).to_numpy(dtype=float))
    levels = {f: ordered_levels(data[f], (level_order or {}).get(f)) for f in factors}
    coded = {}
    for f in factors:
        keys = [level_key(v) for v in levels[f]]
        codes = np.array([keys.index(level_key(v)) for v in data[f]], dtype=int)
        coded[f] = sum_contrast(len(keys))[codes]
    terms: list[tuple[str, ...]] = [(f,) for f in factors]
    if interactions:
        terms += list(combinations(factors, 2))

    def columns(t: tuple[str, ...]) -> np.ndarray:
        if len(t) == 1:
            return coded[t[0]]
        a, b = coded[t[0]], coded[t[1]]
        return (a[:, :, None] * b[:, None, :]).reshape(y.size, -1)

    blocks = [np.ones((y.size, 1)), *(columns(t) for t in terms)]
    if interactions and np.linalg.matrix_rank(np.hstack(blocks)) < sum(b.shape[1] for b in blocks):
        terms, blocks = _estimable_terms(terms, columns, y.size)
        if not any(len(t) == 2 for t in terms):  # every interaction aliased with a main effect
            return None
    n_block = 0
    if block is not None and block in data.columns:
        bkeys = sorted(data[block].map(level_key).unique(), key=_sort_key)
        if len(bkeys) > 1:
            codes = np.array([bkeys.index(level_key(v)) for v in data[block]], dtype=int)
            blocks.append(sum_contrast(len(bkeys))[codes])
            n_block = len(bkeys) - 1
    X = np.hstack(blocks)
    if np.linalg.matrix_rank(X) < X.shape[1] or y.size - X.shape[1] < 1:
        return None
    fit = sm.OLS(y, X).fit()
    return LogModel(factors, levels, terms, np.asarray(fit.params), np.asarray(fit.cov_params()),
                    int(fit.df_resid), int(y.size), "main+2way" if interactions and len(factors) > 1 else "main",
                    n_block, float(fit.scale), *(floor or (math.nan, 0)))


def _estimable_terms(terms: list[tuple[str, ...]], columns: Callable[[tuple[str, ...]], np.ndarray],
                     n: int) -> tuple[list[tuple[str, ...]], list[np.ndarray]]:
    """The main effects and every two-way interaction that is not aliased with a main effect: in a crossed
    half fraction (I = ABC crossed with the medium) A x B is C's column and is left out, medium x A stays.
    Interactions aliased with each other (a resolution-IV fraction) are all kept, so the model stays
    rank-deficient and the caller falls back to main effects: no silent choice between two aliases."""
    mains: list[tuple[str, ...]] = [t for t in terms if len(t) == 1]
    base = np.hstack([np.ones((n, 1)), *(columns(t) for t in mains)])
    rank = np.linalg.matrix_rank(base)
    kept = list(mains)
    for t in terms:
        if len(t) > 1 and np.linalg.matrix_rank(np.hstack([base, columns(t)])) > rank:
            kept.append(t)
    return kept, [np.ones((n, 1)), *(columns(t) for t in kept)]


# ============================================================================ estimates


def _numeric_levels(levels: list[Any], factor: str) -> list[float]:
    try:
        return sorted(float(v) for v in levels)
    except (TypeError, ValueError):
        raise NotTestable(f"{factor}: levels {levels} are not numbers, so min/max mean nothing") from None


def runs_at(runs: pd.DataFrame, at: Mapping[str, Any]) -> pd.DataFrame:
    """The runs at the levels `at` (level specs such as "max" or "native" resolved on the runs; a factor the
    runs do not have is skipped)."""
    for f, v in at.items():
        if f in runs.columns:
            lv = resolve_level(runs, f, v)
            runs = runs[runs[f].map(level_key) == level_key(lv)]
    return runs


def resolve_level(runs: pd.DataFrame, factor: str, spec: Any) -> Any:
    """A claim's level in this study's runs: a level as written, or min / max / second-max (numbers),
    ``emulated:<device>`` (the medium emulating it), ``native`` (a medium emulating nothing)."""
    if factor not in runs.columns:
        raise NotTestable(f"no {factor} column in the runs")
    present = ordered_levels(runs[factor])
    if isinstance(spec, str) and spec in ("min", "max", "second-max"):
        nums = _numeric_levels(present, factor)
        if spec == "second-max" and len(nums) < 3:
            raise NotTestable(f"{factor}: needs three levels to tell a saturation step, has {len(nums)}")
        value = {"min": nums[0], "max": nums[-1], "second-max": nums[-2] if len(nums) > 1 else nums[0]}[spec]
        return next(v for v in present if float(v) == value)
    if isinstance(spec, str) and (spec.startswith("emulated:") or spec == "native"):
        if "emulated" not in runs.columns:
            raise NotTestable("the runs do not record which media are emulated")
        emu = runs.groupby(runs[factor].map(level_key), sort=False)["emulated"].first()
        if spec == "native":
            hits = [lv for lv in present if not _text(emu.get(level_key(lv)))]
        else:
            device = spec.split(":", 1)[1]
            hits = [lv for lv in present if _text(emu.get(level_key(lv))).startswith(device)]
        if not hits:
            wanted = "emulates nothing" if spec == "native" else "emulates " + spec[9:]
            raise NotTestable(f"{factor}: no level {wanted}")
        return hits[0]
    for v in present:
        if level_key(v) == level_key(spec) or str(v) == str(spec):
            return v
    raise NotTestable(f"{factor}={spec} was not measured (levels: {', '.join(map(str, present))})")


def _text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def _describe(at: Mapping[str, Any]) -> str:
    return ", ".join(f"{factor_word(f)} {v}{factor_unit(f)}" for f, v in at.items())


def _compared(factor: str, a: Any, b: Any, at: Mapping[str, Any]) -> str:
    unit = factor_unit(factor)
    return (f"{factor_word(factor)} {a}{unit} / {b}{unit}"
            + (f" at {_describe(at)}" if at else ""))


def _condition(runs: pd.DataFrame, at: Mapping[str, Any]) -> pd.DataFrame:
    mask = np.ones(len(runs), dtype=bool)
    for f, v in at.items():
        mask &= (runs[f].map(level_key) == level_key(v)).to_numpy()
    return runs[mask]


def ratio_estimate(runs: pd.DataFrame, metric: str, factor: str, a: Any, b: Any,
                   at: Mapping[str, Any] | None = None, *, factors: Sequence[str] | None = None,
                   level_order: Mapping[str, Sequence[Any]] | None = None,
                   design: Mapping[str, Any] | None = None, label_campaigns: bool = False,
                   confidence: float = 0.95) -> Estimate:
    """Ratio a/b of `metric` between two levels of `factor` at the levels `at`.

    One campaign (see the module docstring): matched cells (Welch), else the two-way model's contrast,
    else a main-effects model at the conditions; with `label_campaigns` the basis ends "within one
    campaign". Two or more (``Estimate.campaigns``): the same three paths on the campaign-level cell means
    with a campaign block (:mod:`dbmatrix.analyse.campaign_model`); matched cells become the additive
    cell + campaign model over every cell of the study, which lends the study's campaign x cell variation
    to the two cells. Each campaign's own estimate: :func:`dbmatrix.analyse.pooling.per_campaign_estimates`.

    The main-effects path cannot test interactions (its basis says they are aliased). `design`
    (Experiment.design_info()) adds what a fractional design aliases to the basis of the model paths.
    `confidence`: the interval's level (0.95; a look of a campaign run until decided asks for another:
    :mod:`dbmatrix.analyse.stats.sequential`)."""
    at = dict(at or {})
    data = positive_values(runs, metric)
    if data.empty:
        raise NotTestable(f"{METRIC_LABELS.get(metric, metric)} was not measured")
    candidates = list(factors) if factors is not None else [f for f in MODEL_FACTORS if f in data.columns]
    a, b = resolve_level(data, factor, a), resolve_level(data, factor, b)
    if level_key(a) == level_key(b):
        raise NotTestable(f"{factor}: {a} against itself")
    at = {f: resolve_level(data, f, v) for f, v in at.items()}
    compared = _compared(factor, a, b, at)
    order = level_order or {}

    check = _Check(factor, a, b, at, compared)
    camps = campaigns_of(data)
    est_cells = cell_means_estimate(data, metric, candidates, factor, a, b, at, compared, confidence)
    if est_cells is not None:
        if len(camps) < 2 and label_campaigns:
            est_cells.basis += f"; {ONE_CAMPAIGN}"
        return est_cells
    if len(camps) < 2:
        est = _within_campaign(data, metric, candidates, order, check, confidence)
        if label_campaigns:
            est.basis += f"; {ONE_CAMPAIGN}"
    else:
        est = _pooled(data, metric, candidates, order, check, len(camps), confidence)
    note = alias_note(dict(design)) if design and est.basis.startswith(("two-way", "main-effects")) else ""
    if note:
        est.basis += f"; {note}"
    return est


def cell_means_estimate(data: pd.DataFrame, metric: str, candidates: Sequence[str], factor: str, a: Any, b: Any,
                        at: Mapping[str, Any], compared: str, confidence: float,
                        trend: tuple[str, Any, Any] | None = None) -> Estimate | None:
    """The design's own estimate (:mod:`dbmatrix.analyse.cell_model`): the cell means of the claim's cells,
    variance components at every level that varies; with `trend` the interaction contrast along another factor
    (:func:`dbmatrix.analyse.cell_model.trend_weights`). None when the two sides have different cells (a
    fraction: a reduced model after a lack-of-fit test)."""
    cols = varied(data, list(dict.fromkeys([f for f in candidates if f in data.columns] + [factor, *at]
                                           + ([trend[0]] if trend else []))))
    if factor not in cols:
        return None
    loads = [f for f in cols if f in DATASET_FACTORS]
    cc = cell_contrast(data, metric, factor, a, b, at, cols, loads, confidence, trend=trend)
    if cc is None:
        return None
    keys = cell_keys(data, cols)
    ids = _ids(data[keys.isin(cc.used).to_numpy()])
    return Estimate(math.exp(cc.estimate), exp_or_inf(cc.lo) if math.isfinite(cc.lo) else math.nan,
                    exp_or_inf(cc.hi) if math.isfinite(cc.hi) else math.nan, cc.basis, cc.n_runs, compared,
                    cc.campaigns, run_ids=ids, confidence=confidence, df=cc.df, heterogeneity=cc.heterogeneity)


@dataclass
class _Check:
    """What ratio_estimate compares."""

    factor: str
    a: Any
    b: Any
    at: dict[str, Any]
    compared: str

    def matched(self, frame: pd.DataFrame, candidates: Sequence[str]) -> pd.DataFrame | None:
        """The rows of the two matched cells at the conditions (only the compared factor varies), or None."""
        sub = _condition(frame, self.at)
        sub = sub[sub[self.factor].map(level_key).isin([level_key(self.a), level_key(self.b)])]
        if varied(sub, [f for f in candidates if f != self.factor]) or not len(sub):
            return None
        return sub

    def side(self, frame: pd.DataFrame, level: Any) -> pd.DataFrame:
        return frame[frame[self.factor].map(level_key) == level_key(level)]


def _model_contrast(frame: pd.DataFrame, metric: str, candidates: Sequence[str],
                    order: Mapping[str, Sequence[Any]], check: _Check, block: str | None,
                    size: Callable[[LogModel], str], floor: tuple[float, int] | None = None,
                    confidence: float = 0.95) -> tuple[float, float, float, str, int]:
    """The two model paths (two-way model over all rows, else main effects at the conditions): the log
    contrast, its CI, the basis and the model's rows."""
    model = fit_log_model(frame, candidates, metric, level_order=order, block=block, floor=floor)
    if model is not None and model.name == "main+2way" and check.factor in model.factors:
        held = {f: v for f, v in check.at.items() if f in model.factors}
        aliased = [f for f in held if not model.has_term((check.factor, f))]
        if aliased:  # a crossed half fraction: the contrast would be the same at every level of these
            raise NotIdentified(f"{_alias_names(check.factor, aliased, model.factors, frame)} in this design, so the "
                                f"comparison cannot be made at {_describe({f: held[f] for f in aliased})} alone")
        free = [f for f in model.factors if f != check.factor and f not in held
                and not model.has_term((check.factor, f))]
        if free:  # averaging over these would average an effect with the main effect it is aliased with
            raise NotIdentified(f"{_alias_names(check.factor, free, model.factors, frame)} in this design, so its "
                                f"average over {', '.join(factor_word(f) for f in free)} is not the effect")
        fit = _fits(frame, metric, model, block)
        est, lo, hi = model.contrast({**held, check.factor: check.a}, {**held, check.factor: check.b}, confidence)
        avg = [f for f in model.factors if f != check.factor and f not in held]
        return est, lo, hi, (f"two-way model, {size(model)}{fit}"
                             + (f"; averaged over {', '.join(factor_word(f) for f in avg)}" if avg else "")), model.n
    sub = _condition(frame, check.at)
    model = fit_log_model(sub, candidates, metric, interactions=False, level_order=order, block=block, floor=floor)
    if model is None or check.factor not in model.factors:
        pair = sub[sub[check.factor].map(level_key).isin([level_key(check.a), level_key(check.b)])]
        tied = [g for g in varied(pair, candidates) if g != check.factor
                and pair.groupby(pair[check.factor].map(level_key))[g].nunique().max() == 1]
        if tied:  # at the conditions the compared factor never changes alone
            fixed = [f for f in check.at if f in frame.columns and frame[f].map(level_key).nunique() > 1]
            why = _alias_names(check.factor, fixed, varied(frame, candidates), frame) if fixed else ""
            raise NotIdentified(f"at {_describe(check.at)}, {factor_word(check.factor)} always changes with "
                                f"{', '.join(factor_word(g) for g in tied)} in this design"
                                + (f" ({why})" if why else ""))
        raise NotTestable(f"{check.factor} {check.a} vs {check.b} is not estimable from the runs at "
                          f"{_describe(check.at) or 'all levels'}")
    others = [f for f in model.factors if f != check.factor]
    if others:  # the two-way model could not be fitted: no interaction with the compared factor is testable
        raise NotIdentified(f"{factor_word(check.factor)} x {', '.join(factor_word(f) for f in others)} cannot be "
                            f"told apart from the main effects in this design at {_describe(check.at) or 'all levels'} "
                            f"({_alias_names(check.factor, others, model.factors, sub)})")
    fit = _fits(sub, metric, model, block)
    est, lo, hi = model.contrast({check.factor: check.a}, {check.factor: check.b}, confidence)
    return est, lo, hi, (f"main-effects model, {size(model)}{fit} at the conditions "
                         "(interactions aliased)"
                         + (f"; averaged over {', '.join(factor_word(f) for f in others)}" if others else "")), model.n


LACK_OF_FIT_ALPHA = 0.05  # a reduced model whose left-out interactions are this significant gives no estimate


def _fits(frame: pd.DataFrame, metric: str, model: LogModel, block: str | None) -> str:
    """A reduced model is used only after a lack-of-fit test against the saturated cell model on the same
    rows: raises NotIdentified when the interactions it leaves out are significant; else the test in words
    ("" for a saturated model)."""
    rows = positive_values(frame, metric)
    lof = lack_of_fit(rows, metric, model.factors, model.scale * model.df_resid, model.df_resid, block)
    if lof is None:
        return ""
    f, d1, d2, p = lof
    if not math.isfinite(p):
        return "; lack of fit not testable (no replication within cells)"
    words = f"lack of fit F = {f:.3g} on {d1:g} and {d2:g} df, p = {p:.2g}"
    if p < LACK_OF_FIT_ALPHA:
        raise NotIdentified(f"the {model.name} model leaves out interactions the data show ({words}): this design "
                            "cannot give the contrast without them")
    return f"; {words}"


def _alias_names(factor: str, others: Sequence[str], factors: Sequence[str], frame: pd.DataFrame) -> str:
    """'compression x cache is aliased with the block size main effect' for each interaction of `factor`
    the model left out: the two-level main effect whose column equals the interaction's in the runs (a
    half fraction), else 'with other effects'."""

    def column(f: str) -> np.ndarray | None:
        keys = frame[f].map(level_key)
        levels = sorted(keys.unique(), key=_sort_key)
        return None if len(levels) != 2 else np.where(keys == levels[0], 1.0, -1.0)

    parts = []
    for f in others:
        ca, cb = column(factor), column(f)
        alias = []
        if ca is not None and cb is not None:
            prod = ca * cb
            for g in factors:
                cg = column(g) if g not in (factor, f) else None
                if cg is not None and abs(float(np.dot(prod, cg))) == len(prod):
                    alias.append(g)
        parts.append(f"{factor_word(factor)} x {factor_word(f)} is aliased with "
                     + (" and ".join(f"the {factor_word(g)} main effect" for g in alias) if alias else "other effects"))
    return "; ".join(parts)


def _within_campaign(data: pd.DataFrame, metric: str, candidates: Sequence[str],
                     order: Mapping[str, Sequence[Any]], check: _Check, confidence: float = 0.95) -> Estimate:
    """One campaign: the matched cells' repetitions (Welch on log values), else the run-level model with
    the replicate block (run order) as a term when the runs have one."""
    sub = check.matched(data, candidates)
    if sub is not None:
        va, vb = check.side(sub, check.a)[metric].astype(float), check.side(sub, check.b)[metric].astype(float)
        if len(va) and len(vb):
            w = welch_log_ratio(va, vb, confidence)
            return Estimate(w["ratio"], w["ci_lo"], w["ci_hi"],
                            f"matched cells, {len(va)}+{len(vb)} runs, Welch", len(va) + len(vb), check.compared,
                            run_ids=_ids(sub))
    block = BLOCK if BLOCK in data.columns and data[BLOCK].nunique() > 1 else None

    def size(m: LogModel) -> str:
        return f"{m.n} runs" + ("; replicate block as a term" if m.blocks else "")

    try:
        est, lo, hi, basis, n = _model_contrast(data, metric, candidates, order, check, block, size,
                                                confidence=confidence)
    except NotIdentified:
        raise
    except NotTestable:
        if block is None:
            raise
        est, lo, hi, basis, n = _model_contrast(data, metric, candidates, order, check, None, size,
                                                confidence=confidence)
    return Estimate(math.exp(est), math.exp(lo), exp_or_inf(hi), basis, n, check.compared, run_ids=_ids(data))


BLOCK = "block"  # the runs' replicate block (randomised run order within a campaign)


def run_ids(frame: pd.DataFrame) -> frozenset[str]:
    """The unique run ids of a frame (empty without a run_id column)."""
    return _ids(frame)


def compared_text(factor: str, a: Any, b: Any, at: Mapping[str, Any] | None = None) -> str:
    """'block 4k / 16k at engine myrocks' (the claims table's compared column)."""
    return _compared(factor, a, b, at or {})


def _ids(frame: pd.DataFrame) -> frozenset[str]:
    return frozenset(str(x) for x in frame["run_id"]) if "run_id" in frame.columns else frozenset()


def run_floor(data: pd.DataFrame, metric: str, cells: Sequence[str]) -> tuple[float, int]:
    """The repetitions' variance of log(metric) within campaign x cell, with the replicate block within
    each campaign as a term (run-order drift): (mean square, df). NaN, 0 without repetitions."""
    y = pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(y) & (y > 0)
    frame = data.loc[keep]
    if frame.empty:
        return math.nan, 0
    camp = frame[CAMPAIGN].astype(str) if CAMPAIGN in frame.columns else pd.Series("1", index=frame.index)
    cell = camp + "|" + (frame[list(cells)].map(level_key).astype(str).agg("|".join, axis=1) if cells else "")
    parts = [pd.get_dummies(cell).to_numpy(dtype=float)]
    if BLOCK in frame.columns and frame[BLOCK].nunique() > 1:
        parts.append(pd.get_dummies(camp + "|" + frame[BLOCK].astype(str)).to_numpy(dtype=float))
    X = np.hstack(parts)
    logs = np.log(y[keep])
    beta, *_ = np.linalg.lstsq(X, logs, rcond=None)
    df = int(len(logs) - np.linalg.matrix_rank(X))
    if df < 1:
        return math.nan, 0
    return float(np.sum((logs - X @ beta) ** 2) / df), df


def _pooled(data: pd.DataFrame, metric: str, candidates: Sequence[str], order: Mapping[str, Sequence[Any]],
            check: _Check, k: int, confidence: float = 0.95) -> Estimate:
    """The campaign-level model (:mod:`dbmatrix.analyse.campaign_model`): campaign-level cell means, OLS
    with a campaign block; the cell means' variance floored by the runs' (``run_floor`` over the mean
    repetitions per cell mean), and with two campaigns the t on the runs' residual df."""
    cols = list(dict.fromkeys([f for f in candidates if f in data.columns] + [check.factor, *check.at]))
    means = campaign_cell_means(data, metric, cols)
    n_runs = int(means["n_runs"].sum())
    ms, df_runs = run_floor(data, metric, varied(means, cols))
    n_bar = float(len(means) / np.sum(1.0 / means["n_runs"].to_numpy(dtype=float)))
    floor = (ms / n_bar, df_runs) if df_runs > 0 else None
    ids = _ids(positive_values(data, metric))

    def size(m: LogModel) -> str:
        head = f"{m.n} campaign-level cell means of {n_runs} runs in {k} campaigns; "
        if m.floored:
            return head + (f"the repetitions' variance (replicate block as a term) exceeds the campaign x cell "
                           f"residual: t on {min(m.df_resid, m.floor_df)} df")
        return head + f"campaign x cell variation, {m.df_resid} df"

    sub = check.matched(means, candidates)
    if sub is not None and len(check.side(sub, check.a)) and len(check.side(sub, check.b)):
        cells = varied(means, cols)
        keyed = means.assign(_cell=means[cells].map(level_key).astype(str).agg("|".join, axis=1))
        key_a = keyed.loc[check.side(sub, check.a).index, "_cell"].iloc[0]
        key_b = keyed.loc[check.side(sub, check.b).index, "_cell"].iloc[0]
        model = fit_log_model(keyed, ["_cell"], metric, interactions=False, block=CAMPAIGN, floor=floor)
        if model is not None:
            est, lo, hi = model.contrast({"_cell": key_a}, {"_cell": key_b}, confidence)
            n_cells = len(model.levels["_cell"])
            return Estimate(math.exp(est), math.exp(lo), exp_or_inf(hi),
                            f"matched cells, additive cell + campaign model over the study's {n_cells} cells: "
                            + size(model), n_runs, check.compared, k, run_ids=ids)
    est, lo, hi, basis, _ = _model_contrast(means, metric, candidates, order, check, CAMPAIGN, size, floor,
                                            confidence)
    return Estimate(math.exp(est), math.exp(lo), exp_or_inf(hi), basis, n_runs, check.compared, k, run_ids=ids)


def dataset_ratio(runs: pd.DataFrame, factor: str, a: Any, b: Any,
                  at: Mapping[str, Any] | None = None) -> Estimate:
    """On-disk size ratio a/b for each dataset pair that differs only in `factor` (``Estimate.values``, labelled
    by the pair's other levels), their geometric mean as the estimate and no interval: sizes are measured
    once per dataset, a deterministic quantity judged per pair, never a CI."""
    if "data_physical_bytes" not in runs.columns or factor not in DATASET_FACTORS:
        raise NotTestable(f"no dataset sizes per {factor}")
    keys = [f for f in DATASET_FACTORS if f in runs.columns]
    ds = runs.dropna(subset=["data_physical_bytes"]).groupby(keys, sort=True)["data_physical_bytes"].median()
    ds = ds.reset_index()
    a, b = resolve_level(ds, factor, a), resolve_level(ds, factor, b)
    at = {f: resolve_level(ds, f, v) for f, v in (at or {}).items()}
    ds = _condition(ds, at)
    others = [f for f in keys if f != factor]
    ratios, labels = [], []
    for _, g in ds.groupby([ds[f].map(level_key) for f in others], sort=True) if others else [((), ds)]:
        sa = g.loc[g[factor].map(level_key) == level_key(a), "data_physical_bytes"]
        sb = g.loc[g[factor].map(level_key) == level_key(b), "data_physical_bytes"]
        if len(sa) and len(sb) and float(sb.iloc[0]) > 0:
            ratios.append(float(sa.iloc[0]) / float(sb.iloc[0]))
            held = {f: g[f].iloc[0] for f in others if f not in at and ds[f].map(level_key).nunique() > 1}
            labels.append(_describe(held) or "the pair")
    if not ratios:
        raise NotTestable(f"no pair of datasets differs only in {factor}")
    gm = math.exp(float(np.mean(np.log(ratios))))
    compared = _compared(factor, a, b, at)
    return Estimate(gm, math.nan, math.nan,
                    f"dataset sizes (du), {len(ratios)} pair{'s' if len(ratios) > 1 else ''}, measured once each: "
                    "judged per pair (no CI)", len(ratios), compared, values=list(zip(labels, ratios)))


def _tristate(v: Any) -> bool | None:
    """True/False/None from a steady/flagged cell as stored (bool, None/NaN, or text from a CSV)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    text = str(v).strip().lower()
    if text in ("true", "1", "1.0"):
        return True
    if text in ("false", "0", "0.0"):
        return False
    return None


def steady_share(runs: pd.DataFrame, confidence: float = 0.95) -> Estimate:
    """Share of the tested runs shown stable after warm-up (``steady`` True: the drift CI lies within
    +-STABLE_BAND_PCT %), with a 95 % interval that also bounds the undetermined runs.

    Tested runs are those the drift test ran on (``steady_reason`` not too_short/no_intervals): stable
    (True), drifting (False) or undetermined (None: too noisy to tell). The estimate is the share of
    stable runs among the determined ones; the interval runs from the Wilson lower limit with every
    undetermined run counted as not stable to the Wilson upper limit with every one counted as stable, so
    undetermined runs widen it rather than vanish from the denominator or count against the claim. The
    basis says how many runs were stable, drifting, undetermined and untested."""
    if "steady" not in runs.columns:
        raise NotTestable("no steady-state results in the runs")
    reason = (runs["steady_reason"].astype(object).where(runs["steady_reason"].notna(), "")
              if "steady_reason" in runs.columns else pd.Series("", index=runs.index, dtype=object))
    state = runs["steady"].map(_tristate)
    # a run without a verdict counts as tested only when the test said it could not tell (older tables
    # have no such reason: their runs without a verdict were not tested)
    tested = ~reason.isin(UNTESTED_STEADY) & (state.notna() | (reason == "undetermined"))
    untested = int((~tested).sum())
    k = int((tested & state.map(lambda v: v is True)).sum())
    f = int((tested & state.map(lambda v: v is False)).sum())
    u = int(tested.sum()) - k - f
    n = k + f + u
    if n == 0:
        raise NotTestable(f"every run was too short for the steady-state test ({untested} untested)")
    if k + f == 0:
        raise NotTestable(f"the steady-state test could not tell for any of the {n} tested runs "
                          f"(all undetermined, {untested} untested)")
    lo, _ = wilson_interval(k, n, confidence)
    _, hi = wilson_interval(k + u, n, confidence)
    basis = (f"steady-state test (drift CI within +-{STABLE_BAND_PCT:g} %), {n} tested runs: {k} stable, "
             f"{f} drifting, {u} undetermined; {untested} untested; Wilson, undetermined bounded")
    return Estimate(k / (k + f), lo, hi, basis, n, "share of runs that settled")


def replication_estimate(table: pd.DataFrame, metric: str, within: str | None = None) -> Estimate:
    """A row of the replication study's effect table (``replication-effects.csv``); `within` picks one
    setting (its ``within`` column) when the study has several."""
    rows = table[table["metric"] == metric] if "metric" in table.columns else table.iloc[0:0]
    if within is not None and "within" in rows.columns and within != "all":
        rows = rows[rows["within"].astype(str) == within]
    if rows.empty:
        raise NotTestable(f"the replication study has no {metric}" + (f" at {within}" if within else ""))
    la, lb = pd.to_numeric(rows["level_a"], errors="coerce"), pd.to_numeric(rows["level_b"], errors="coerce")
    rows = rows[(la == la.max()) & (lb == lb.min())] if la.notna().any() and lb.notna().any() else rows
    rows = rows.assign(_n=pd.to_numeric(rows.get("n_a"), errors="coerce").fillna(0)
                       + pd.to_numeric(rows.get("n_b"), errors="coerce").fillna(0))
    r = rows.sort_values("_n", ascending=False, kind="stable").iloc[0]  # the highest level against the lowest
    n = int(r["_n"])
    setting = str(r.get("within", "all"))
    return Estimate(float(r["estimate"]), float(r["ci_lo"]), float(r["ci_hi"]),
                    f"replication study, Welch ({n} runs)", n,
                    f"appliers {_level(r.get('level_a'))}/{_level(r.get('level_b'))}"
                    + ("" if setting in ("all", "nan") else f" at {setting.replace('_', ' ')}"))


def _level(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return _text(v)


def level_product(levels: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the given factors' levels (for model means over a grid)."""
    keys = list(levels)
    return [dict(zip(keys, combo)) for combo in product(*(levels[k] for k in keys))]
