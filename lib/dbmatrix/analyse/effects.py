"""Factor effects across runs: pairwise comparisons the spec declares, and a factorial model.

Pure functions of the runs table (one row per repetition; repetitions are the unit of replication).
Throughput is analysed on the log scale, so effects are multiplicative factors ("x1.30") and their CIs
are ratios too. The two-sample building blocks (Welch test on logs, Hedges' g, Holm) live in
:mod:`dbmatrix.analyse.stats` and are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.stats import hedges_g, holm, level_key, welch_log_ratio

__all__ = ["BLOCK_RATIO_COLUMNS", "FactorialFit", "factorial_model", "hedges_g", "holm", "pairwise_comparisons",
           "sum_contrast", "welch_log_ratio"]


# ============================================================================ pairwise comparisons


def comparison_fields(c: Any, i: int) -> tuple[str, Any, Any, tuple[str, ...]]:
    """(factor, a, b, within) of a declared comparison (a mapping or a spec object)."""
    if isinstance(c, Mapping):
        try:
            return c["factor"], c["a"], c["b"], tuple(c.get("within") or ())
        except KeyError as exc:
            raise ValueError(f"comparisons[{i}]: missing key {exc}; needed: factor, a, b (within)") from None
    return c.factor, c.a, c.b, tuple(c.within or ())


PAIRWISE_COLUMNS = ("comparison", "factor", "a", "b", "within", "pooled_over", "n_a", "n_b", "mean_a",
                    "mean_b", "ratio_of_means", "ratio", "ci_lo", "ci_hi", "t", "df", "p", "p_holm",
                    "significant", "hedges_g", "averaged_over", "basis")
WELCH_BASIS = "Welch on log, matched cells"
WELCH_POOLED_BASIS = "Welch on log, cells pooled over other factors"


def check_comparison(c: Any, i: int, factors: Sequence[str]) -> tuple[str, Any, Any, tuple[str, ...]]:
    """A declared comparison's fields, checked against the factor columns of the runs."""
    f, a, b, within = comparison_fields(c, i)
    if f not in factors:
        raise ValueError(f"comparisons[{i}].factor: {f!r} is not a factor column of the runs; "
                         f"allowed: {', '.join(factors)}")
    for w in within:
        if w not in factors or w == f:
            raise ValueError(f"comparisons[{i}].within: {w!r} is not allowed; allowed: "
                             f"{', '.join(x for x in factors if x != f)}")
    return f, a, b, within


def comparison_label(f: str, a: Any, b: Any, within: Sequence[str]) -> str:
    return f"{f}: {a} vs {b}" + (f" within {', '.join(within)}" if within else "")


def pairwise_comparisons(runs: pd.DataFrame, comparisons: Sequence[Any], factors: Sequence[str],
                         metric: str = "tps", confidence: float = 0.95, alpha: float = 0.05) -> pd.DataFrame:
    """Each declared comparison (level ``a`` against level ``b`` of ``factor``, within each combination
    of the ``within`` factors) as Welch tests on log ``metric`` (:func:`welch_log_ratio`), Holm-adjusted
    over all tests of all comparisons (one family: the spec's claims).

    Factors that vary in the runs but are neither compared nor ``within`` are held fixed too (each test
    compares two cells that differ only in ``factor``): pooling cells with different levels of another
    factor would count that factor's effect as noise. In a fractional design such matched cells do not
    exist; those factors are then pooled and named in ``pooled_over`` (the test is conservative; a
    fractional design's comparisons are the factorial model's contrasts instead, see
    :func:`dbmatrix.analyse.comparisons.model_pairwise_comparisons`). ``basis`` says which test a row is.
    Columns: :data:`PAIRWISE_COLUMNS` plus one column per factor (None where pooled)."""
    factors = [f for f in factors if f in runs.columns]
    varied = [f for f in factors if runs[f].map(level_key).nunique() > 1]
    if metric not in runs.columns:
        raise ValueError(f"runs: missing column {metric!r}")
    rows: list[dict[str, Any]] = []
    for i, c in enumerate(comparisons):
        f, a, b, within = check_comparison(c, i, factors)
        sub = runs[runs[f].map(level_key).isin([level_key(a), level_key(b)])]
        held = [x for x in varied if x != f and x not in within]
        keys = [*within, *held]
        if keys and held and not _has_matched_pairs(sub, f, a, keys):
            keys, pooled = list(within), held
        else:
            pooled = []
        groups = sub.groupby([sub[k].map(level_key) for k in keys], sort=True) if keys else [((), sub)]
        label = comparison_label(f, a, b, within)
        basis = WELCH_POOLED_BASIS if pooled else WELCH_BASIS
        before = len(rows)
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            va = g.loc[g[f].map(level_key) == level_key(a), metric].astype(float).to_numpy()
            vb = g.loc[g[f].map(level_key) == level_key(b), metric].astype(float).to_numpy()
            if va.size == 0 and vb.size == 0:
                continue
            res = welch_log_ratio(va, vb, confidence)
            levels = {k: g[k].iloc[0] for k in keys}
            rows.append({"comparison": label, "factor": f, "a": a, "b": b, "within": ",".join(within),
                         "pooled_over": ",".join(pooled), **{x: levels.get(x) for x in factors if x != f},
                         **res, "ratio_of_means": res["mean_a"] / res["mean_b"] if res["mean_b"] else np.nan,
                         "averaged_over": "", "basis": basis})
        if len(rows) == before:  # neither level has runs: say so rather than drop the declared comparison
            rows.append({"comparison": label, "factor": f, "a": a, "b": b, "within": ",".join(within),
                         "pooled_over": "", **welch_log_ratio([], []), "ratio_of_means": np.nan,
                         "averaged_over": "", "basis": "no runs at either level"})
    return comparisons_frame(rows, factors, alpha)


def comparisons_frame(rows: list[dict[str, Any]], factors: Sequence[str], alpha: float) -> pd.DataFrame:
    """The comparisons table from its rows: the columns in order, Holm-adjusted p over every row (one
    family per study) and whether each is significant at `alpha`."""
    cols = [*PAIRWISE_COLUMNS[:6], *factors, *PAIRWISE_COLUMNS[6:]]
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=cols)
    df["p_holm"] = holm(df["p"].to_numpy(dtype=float))
    df["significant"] = df["p_holm"] < alpha
    for x in factors:
        if x not in df.columns:
            df[x] = None
    return df[cols]


def _has_matched_pairs(sub: pd.DataFrame, f: str, a: Any, keys: list[str]) -> bool:
    """Whether some combination of `keys` has runs at both compared levels of `f`."""
    has = sub.groupby([sub[k].map(level_key) for k in keys], sort=False)[f].agg(
        lambda s: s.map(level_key).nunique())
    return bool((has >= 2).any())


# ============================================================================ factorial model


@dataclass
class FactorialFit:
    """Effects of the factors on log(metric): a main-effects + two-way-interactions linear model with
    sum-to-zero coding, fitted by OLS (statsmodels)."""

    effects: pd.DataFrame  # one row per level (main effects) or level pair (interactions)
    anova: pd.DataFrame  # one row per term, ranked by its share of the variance, plus the residual
    model: str  # "main+2way", "main" or "none"
    note: str = ""
    n: int = 0
    df_resid: int = 0
    r2: float = float("nan")
    factors: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)  # block terms in the model (main effects only)
    block_ratios: pd.DataFrame = field(default_factory=pd.DataFrame)  # each block level / the reference


BLOCK_RATIO_COLUMNS = ("block", "level", "reference", "log_ratio", "se", "ratio", "ci_lo", "ci_hi", "p", "df")


EFFECT_COLUMNS = ("term", "kind", "factor_1", "level_1", "factor_2", "level_2", "log_effect", "se",
                  "effect", "ci_lo", "ci_hi", "p")
ANOVA_COLUMNS = ("term", "kind", "df", "sum_sq", "share_pct", "F", "p", "spread", "rank")


def sum_contrast(n_levels: int) -> np.ndarray:
    """Sum-to-zero coding: level i < L-1 -> unit vector e_i, the last level -> all -1 (L x (L-1))."""
    return np.vstack([np.eye(n_levels - 1), -np.ones((1, n_levels - 1))])


def _sort_key(k: Any) -> tuple[bool, float, str]:
    """Numbers first, in numeric order, then everything else by its text."""
    number = isinstance(k, (int, float, np.number)) and not isinstance(k, bool)
    return (not number, float(k) if number else 0.0, str(k))


def _ordered_levels(values: pd.Series, order: Sequence[Any] | None) -> list[Any]:
    present = {level_key(v): v for v in values}
    out = [v for v in (order or ()) if level_key(v) in present]
    known = {level_key(v) for v in out}
    rest = sorted((k for k in present if k not in known), key=_sort_key)
    return out + [present[k] for k in rest]


def factorial_model(runs: pd.DataFrame, factors: Sequence[str], metric: str = "tps", *,
                    interactions: bool = True, level_order: Mapping[str, Sequence[Any]] | None = None,
                    confidence: float = 0.95, blocks: Sequence[str] = ()) -> FactorialFit:
    """Main effects and two-way interactions of the factors on log(``metric``), per repetition.

    With sum-to-zero coding each level's coefficient is its deviation from the (geometric) grand mean, so
    ``effect`` = exp(deviation) reads "this level multiplies throughput by x relative to the average over
    the levels" (for a two-level factor, a/b = effect_a / effect_b); interactions read "beyond the two main
    effects". CIs and p from the model's t statistics. The ANOVA table gives each term's Type III sum of
    squares (Wald F test of its columns), its share of the total variance of log(metric), F, p and, for
    main effects, the ``spread`` (largest / smallest level effect): the ranking says which factor matters
    most. Works for full and fractional (resolution V) designs; if the interactions are not estimable
    (aliased, or no residual degrees of freedom left) the model falls back to main effects, and says so.
    Only factors with two or more levels in ``runs`` enter the model.

    ``blocks`` (e.g. ``("host",)``) enter as main effects only (kind "block", never crossed with a factor):
    a block soaks up a level shift (one host 20 % slower) that would otherwise be noise, or, where the
    blocks are not balanced over the cells, bias. ``block_ratios`` gives each block level against the
    first (its ratio of geometric means with the factors' effects removed, the model's CI)."""
    import statsmodels.api as sm

    if metric not in runs.columns:
        raise ValueError(f"runs: missing column {metric!r}")
    y_all = pd.to_numeric(runs[metric], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(y_all) & (y_all > 0)
    data = runs[ok]
    y = np.log(y_all[ok])
    factors = [f for f in factors if f in data.columns and data[f].map(level_key).nunique() > 1]
    block_terms = [b for b in blocks if b in data.columns and b not in factors and data[b].map(level_key).nunique() > 1]
    empty = FactorialFit(pd.DataFrame(columns=EFFECT_COLUMNS), pd.DataFrame(columns=ANOVA_COLUMNS), "none",
                         n=int(y.size), factors=factors)
    if not factors:
        empty.note = "no factor has two or more levels in the runs"
        return empty
    levels = {f: _ordered_levels(data[f], (level_order or {}).get(f)) for f in [*factors, *block_terms]}
    coded: dict[str, np.ndarray] = {}
    for f in [*factors, *block_terms]:
        idx = {level_key(v): i for i, v in enumerate(levels[f])}
        codes = data[f].map(lambda v, idx=idx: idx[level_key(v)]).to_numpy()
        coded[f] = sum_contrast(len(levels[f]))[codes]
    attempts = [("main+2way", True), ("main", False)] if interactions and len(factors) > 1 else [("main", False)]
    note = ""
    for model, with_inter in attempts:
        terms = _terms(factors, with_inter) + [(b,) for b in block_terms]
        X, cols = _design(coded, terms, y.size)
        rank = np.linalg.matrix_rank(X)
        if with_inter and rank < X.shape[1]:  # a crossed half fraction: keep the two-way terms not aliased
            kept = _unaliased_terms(coded, _terms(factors, True), y.size)
            if any(len(t) == 2 for t in kept):
                terms = kept + [(b,) for b in block_terms]
                X, cols = _design(coded, terms, y.size)
                rank = np.linalg.matrix_rank(X)
                note = "two-way interactions aliased with main effects left out: " + ", ".join(
                    " x ".join(t) for t in _terms(factors, True) if len(t) == 2 and t not in terms) + "; "
        if rank == X.shape[1] and y.size - X.shape[1] >= 1:
            break
        why = "aliased terms" if rank < X.shape[1] else "no residual degrees of freedom"
        note = f"{model} not estimable ({why}); " if model == "main+2way" else note + f"main: {why}"
    else:
        empty.note = note
        return empty
    fit = sm.OLS(y, X).fit()
    tcrit = sps.t.ppf((1 + confidence) / 2, fit.df_resid)
    effects = _level_effects(fit, terms, cols, levels, tcrit, set(block_terms))
    anova = _anova(fit, terms, cols, effects, set(block_terms))
    return FactorialFit(effects, anova, model, note.rstrip("; "), int(y.size), int(fit.df_resid),
                        float(fit.rsquared), factors, block_terms,
                        _block_ratios(fit, block_terms, cols, levels, tcrit))


def _block_ratios(fit: Any, block_terms: list[str], cols: dict[tuple[str, ...], slice],
                  levels: dict[str, list[Any]], tcrit: float) -> pd.DataFrame:
    """Each block level against the block's first level: exp(effect_level - effect_first), model CI."""
    params, cov = np.asarray(fit.params), np.asarray(fit.cov_params())
    rows = []
    for b in block_terms:
        C = sum_contrast(len(levels[b]))
        for i in range(1, len(levels[b])):
            L = np.zeros(len(params))
            L[cols[(b,)]] = C[i] - C[0]
            est, se = float(L @ params), float(np.sqrt(max(L @ cov @ L, 0.0)))
            p = float(2 * sps.t.sf(abs(est / se), fit.df_resid)) if se > 0 else float("nan")
            rows.append({"block": b, "level": levels[b][i], "reference": levels[b][0], "log_ratio": est, "se": se,
                         "ratio": math.exp(est), "ci_lo": math.exp(est - tcrit * se),
                         "ci_hi": math.exp(est + tcrit * se), "p": p, "df": int(fit.df_resid)})
    return pd.DataFrame(rows, columns=list(BLOCK_RATIO_COLUMNS))


def _terms(factors: list[str], with_inter: bool) -> list[tuple[str, ...]]:
    terms = [(f,) for f in factors]
    return terms + (list(combinations(factors, 2)) if with_inter else [])


def _unaliased_terms(coded: dict[str, np.ndarray], terms: list[tuple[str, ...]], n: int) -> list[tuple[str, ...]]:
    """Main effects plus each two-way term not aliased with a main effect (see
    :func:`dbmatrix.analyse.contrasts.fit_log_model`: interactions aliased with each other all stay, and
    the model is then not estimable)."""
    mains: list[tuple[str, ...]] = [t for t in terms if len(t) == 1]
    base, _ = _design(coded, mains, n)
    rank = np.linalg.matrix_rank(base)
    return mains + [t for t in terms if len(t) == 2
                    and np.linalg.matrix_rank(np.hstack([base, _design(coded, [t], n)[0]])) > rank]


def _design(coded: dict[str, np.ndarray], terms: list[tuple[str, ...]],
            n: int) -> tuple[np.ndarray, dict[tuple[str, ...], slice]]:
    blocks, cols, at = [np.ones((n, 1))], {}, 1
    for t in terms:
        if len(t) == 1:
            block = coded[t[0]]
        else:
            a, b = coded[t[0]], coded[t[1]]
            block = (a[:, :, None] * b[:, None, :]).reshape(n, -1)  # column k*(Lb-1)+l = a_k * b_l
        blocks.append(block)
        cols[t] = slice(at, at + block.shape[1])
        at += block.shape[1]
    return np.hstack(blocks), cols


def _kind(t: tuple[str, ...], block_terms: AbstractSet[str]) -> str:
    return "interaction" if len(t) > 1 else "block" if t[0] in block_terms else "main"


def _level_effects(fit: Any, terms: list[tuple[str, ...]], cols: dict[tuple[str, ...], slice],
                   levels: dict[str, list[Any]], tcrit: float, block_terms: AbstractSet[str] = frozenset()
                   ) -> pd.DataFrame:
    params, cov, p_total = np.asarray(fit.params), np.asarray(fit.cov_params()), len(fit.params)
    rows = []
    for t in terms:
        mats = [sum_contrast(len(levels[f])) for f in t]
        combos = [(i,) for i in range(len(levels[t[0]]))] if len(t) == 1 else [
            (i, j) for i in range(len(levels[t[0]])) for j in range(len(levels[t[1]]))]
        L = np.zeros((len(combos), p_total))
        for r, ij in enumerate(combos):
            row = mats[0][ij[0]] if len(t) == 1 else np.kron(mats[0][ij[0]], mats[1][ij[1]])
            L[r, cols[t]] = row
        est = L @ params
        se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", L, cov, L), 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = 2 * sps.t.sf(np.abs(est / se), fit.df_resid)
        for r, ij in enumerate(combos):
            rows.append({
                "term": " x ".join(t), "kind": _kind(t, block_terms),
                "factor_1": t[0], "level_1": levels[t[0]][ij[0]],
                "factor_2": t[1] if len(t) > 1 else None, "level_2": levels[t[1]][ij[1]] if len(t) > 1 else None,
                "log_effect": est[r], "se": se[r], "effect": math.exp(est[r]),
                "ci_lo": math.exp(est[r] - tcrit * se[r]), "ci_hi": math.exp(est[r] + tcrit * se[r]),
                "p": float(p[r]) if se[r] > 0 else float("nan"),
            })
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def _anova(fit: Any, terms: list[tuple[str, ...]], cols: dict[tuple[str, ...], slice],
           effects: pd.DataFrame, block_terms: AbstractSet[str] = frozenset()) -> pd.DataFrame:
    tss, mse = float(fit.centered_tss), float(fit.mse_resid)
    rows = []
    for t in terms:
        sl = cols[t]
        R = np.zeros((sl.stop - sl.start, len(fit.params)))
        R[:, sl] = np.eye(sl.stop - sl.start)
        ft = fit.f_test(R)
        F, df = float(np.squeeze(ft.fvalue)), sl.stop - sl.start
        name = " x ".join(t)
        e = effects.loc[effects["term"] == name, "log_effect"]
        rows.append({"term": name, "kind": _kind(t, block_terms), "df": df,
                     "sum_sq": F * df * mse, "share_pct": F * df * mse / tss * 100 if tss > 0 else np.nan,
                     "F": F, "p": float(np.squeeze(ft.pvalue)),
                     "spread": math.exp(e.max() - e.min()) if len(t) == 1 else np.nan})
    df = pd.DataFrame(rows).sort_values(["share_pct", "term"], ascending=[False, True], kind="stable")
    df["rank"] = np.arange(1, len(df) + 1)
    resid = {"term": "residual", "kind": "residual", "df": int(fit.df_resid), "sum_sq": float(fit.ssr),
             "share_pct": float(fit.ssr) / tss * 100 if tss > 0 else np.nan, "F": np.nan, "p": np.nan,
             "spread": np.nan, "rank": np.nan}
    return pd.concat([df, pd.DataFrame([resid])], ignore_index=True)[list(ANOVA_COLUMNS)]
