"""Tests of dbmatrix.analyse.effects: Welch/Holm/Hedges against scipy and statsmodels, CI coverage over fixed
seeds, pairwise comparisons of the spec, and the factorial model on synthetic data with known effects
(full and resolution-V fractional designs)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from dbmatrix.analyse.effects import (
    factorial_model,
    hedges_g,
    holm,
    pairwise_comparisons,
    sum_contrast,
    welch_log_ratio,
)
from dbmatrix.spec.experiment import Comparison

# ================================================================================ two samples


def test_welch_log_ratio_agrees_with_scipy() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.lognormal(np.log(1300), 0.05, 3), rng.lognormal(np.log(1000), 0.15, 5)
    r = welch_log_ratio(a, b)
    ref = sps.ttest_ind(np.log(a), np.log(b), equal_var=False)
    assert r["t"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
    assert r["df"] == pytest.approx(ref.df)
    ci = ref.confidence_interval(0.95)
    assert (r["ci_lo"], r["ci_hi"]) == pytest.approx((math.exp(ci.low), math.exp(ci.high)))
    assert r["ratio"] == pytest.approx(sps.gmean(a) / sps.gmean(b))
    assert (r["n_a"], r["n_b"]) == (3, 5) and r["mean_a"] == pytest.approx(a.mean())


def test_welch_edge_cases() -> None:
    one = welch_log_ratio([1200.0], [1000.0, 1010.0])
    assert one["ratio"] == pytest.approx(1200 / math.sqrt(1000 * 1010)) and math.isnan(one["p"])
    empty = welch_log_ratio([], [1000.0, 1010.0])
    assert math.isnan(empty["ratio"]) and empty["n_a"] == 0
    const = welch_log_ratio([2.0, 2.0], [1.0, 1.0])
    assert (const["ratio"], const["ci_lo"], const["ci_hi"], const["p"]) == (2.0, 2.0, 2.0, 0.0)
    with pytest.raises(ValueError, match="positive"):
        welch_log_ratio([0.0, 1.0], [1.0, 2.0])


def test_welch_ratio_ci_coverage_at_three_repetitions() -> None:
    """Log-normal repetitions, true ratio 1.5, n = 3 against n = 4, unequal spread: 1 000 fixed seeds.
    Welch is slightly conservative here (measured 0.96); the band is +-3.5 binomial SDs around 0.95-0.96."""
    rng = np.random.default_rng(2)
    covered = 0
    for _ in range(1000):
        a = rng.lognormal(np.log(1500), 0.08, 3)
        b = rng.lognormal(np.log(1000), 0.15, 4)
        r = welch_log_ratio(a, b)
        covered += r["ci_lo"] <= 1.5 <= r["ci_hi"]
    assert 0.93 <= covered / 1000 <= 0.985


def test_hedges_g() -> None:
    a, b = np.array([10.0, 12.0, 14.0]), np.array([6.0, 8.0, 10.0])
    d = (a.mean() - b.mean()) / 2.0  # pooled SD is 2
    assert hedges_g(a, b) == pytest.approx(d * (1 - 3 / (4 * 4 - 1)), rel=0.02)  # the usual approximation
    df = 4
    j = math.gamma(df / 2) / (math.sqrt(df / 2) * math.gamma((df - 1) / 2))
    assert hedges_g(a, b) == pytest.approx(d * j)
    assert hedges_g(b, a) == pytest.approx(-hedges_g(a, b))
    assert math.isnan(hedges_g([1.0], [2.0, 3.0])) and math.isnan(hedges_g([1.0, 1.0], [1.0, 1.0]))


def test_holm_agrees_with_statsmodels() -> None:
    rng = np.random.default_rng(3)
    for size in (1, 3, 7, 12):  # multipletests takes ~30 ms a call
        p = rng.uniform(0, 0.2, size)
        assert np.allclose(holm(p), multipletests(p, method="holm")[1])
    p = np.array([0.01, np.nan, 0.04, 0.03])
    adj = holm(p)
    assert math.isnan(adj[1])
    assert np.allclose(adj[[0, 2, 3]], multipletests(p[[0, 2, 3]], method="holm")[1])
    assert holm([]).size == 0


# ================================================================================ pairwise


def design_runs(effects: dict[str, dict], interaction: float, sigma: float, reps: int,
                seed: int) -> pd.DataFrame:
    """Full factorial of cache_pct x block_size x engine with known multiplicative effects; block size
    helps more when the cache is small (the interaction)."""
    rng = np.random.default_rng(seed)
    rows = []
    for levels in itertools.product(*[list(v) for v in effects.values()]):
        cell = dict(zip(effects, levels))
        mu = math.log(1000) + sum(effects[f][lv] for f, lv in cell.items())
        if cell.get("block_size") == "4k" and cell.get("cache_pct") == 25:
            mu += interaction
        cid = "-".join(str(v) for v in levels)
        for rep in range(1, reps + 1):
            rows.append({"cell_id": cid, **cell, "repetition": rep, "tps": math.exp(mu + rng.normal(0, sigma))})
    return pd.DataFrame(rows)


EFFECTS = {"engine": {"innodb": 0.0, "myrocks": math.log(0.8)},
           "cache_pct": {25: math.log(0.4), 50: math.log(0.7), 100: 0.0},
           "block_size": {"4k": math.log(1.1), "16k": 0.0}}
FACTORS3 = ["engine", "cache_pct", "block_size"]


def test_pairwise_within_cache_recovers_the_ratios() -> None:
    df = design_runs(EFFECTS, interaction=math.log(1.5), sigma=0.03, reps=4, seed=4)
    p = pairwise_comparisons(df, [Comparison("block_size", "4k", "16k", ("cache_pct",))], FACTORS3)
    assert len(p) == 6  # engine is held fixed too: matched cells exist in a full factorial
    assert (p["pooled_over"] == "").all() and set(p["engine"]) == {"innodb", "myrocks"}
    for _, row in p.iterrows():
        truth = 1.1 * (1.5 if row["cache_pct"] == 25 else 1.0)
        assert row["ci_lo"] <= truth <= row["ci_hi"]
        assert row["ratio"] == pytest.approx(truth, rel=0.06)
        assert (row["n_a"], row["n_b"]) == (4, 4) and row["hedges_g"] > 0
    assert np.allclose(p["p_holm"], multipletests(p["p"], method="holm")[1])
    assert p["significant"].all()
    assert (p["comparison"] == "block_size: 4k vs 16k within cache_pct").all()


def test_pairwise_holm_family_spans_all_comparisons_and_accepts_mappings() -> None:
    df = design_runs(EFFECTS, interaction=0.0, sigma=0.05, reps=3, seed=5)
    p = pairwise_comparisons(df, [{"factor": "engine", "a": "myrocks", "b": "innodb", "within": ["cache_pct"]},
                                  Comparison("cache_pct", 25, 100)], FACTORS3)
    assert len(p) == 6 + 4  # the engine tests are also split by block size; cache 25 vs 100 by both others
    assert np.allclose(p["p_holm"], multipletests(p["p"], method="holm")[1])
    eng = p[p["factor"] == "engine"]
    assert eng["ratio"].between(0.7, 0.9).all()
    assert eng["ratio_of_means"].to_numpy() == pytest.approx(eng["mean_a"] / eng["mean_b"])


def test_pairwise_in_a_fraction_pools_what_cannot_be_matched() -> None:
    df = fraction_runs(reps=3, seed=6)
    p = pairwise_comparisons(df, [Comparison("a", "hi", "lo", ("b",))], list("abcde"))
    assert len(p) == 2 and (p["pooled_over"] == "c,d,e").all()
    assert p["c"].isna().all()
    assert p["ratio"].between(1.1, 1.6).all()  # the a effect (x1.3) plus pooled noise


def test_pairwise_errors_and_missing_levels() -> None:
    df = design_runs(EFFECTS, interaction=0.0, sigma=0.05, reps=2, seed=7)
    with pytest.raises(ValueError, match=r"comparisons\[0\].factor"):
        pairwise_comparisons(df, [Comparison("threads", 1, 2)], FACTORS3)
    with pytest.raises(ValueError, match=r"comparisons\[1\].within"):
        pairwise_comparisons(df, [Comparison("engine", "innodb", "myrocks"),
                                  Comparison("engine", "innodb", "myrocks", ("engine",))], FACTORS3)
    with pytest.raises(ValueError, match="missing key"):
        pairwise_comparisons(df, [{"factor": "engine"}], FACTORS3)
    gone = df[~((df["block_size"] == "4k") & (df["cache_pct"] == 50))]
    p = pairwise_comparisons(gone, [Comparison("block_size", "4k", "16k", ("cache_pct",))], FACTORS3)
    missing = p[p["cache_pct"] == 50]
    assert (missing["n_a"] == 0).all() and missing["p"].isna().all() and missing["p_holm"].isna().all()
    assert pairwise_comparisons(df, [], FACTORS3).empty
    absent = pairwise_comparisons(df, [Comparison("cache_pct", 10, 20)], FACTORS3)
    assert len(absent) == 1 and (absent["n_a"].iloc[0], absent["n_b"].iloc[0]) == (0, 0)


# ================================================================================ factorial model


def test_sum_contrast() -> None:
    assert sum_contrast(3).tolist() == [[1, 0], [0, 1], [-1, -1]]
    assert sum_contrast(2).sum(axis=0).tolist() == [0]


def test_factorial_model_recovers_known_effects() -> None:
    df = design_runs(EFFECTS, interaction=math.log(1.5), sigma=0.03, reps=3, seed=8)
    fit = factorial_model(df, FACTORS3, level_order={"block_size": ["4k", "16k"]})
    assert fit.model == "main+2way" and fit.note == "" and fit.n == 36
    e = fit.effects.set_index(["term", "level_1", "level_2"], drop=False)
    # two-level engine: myrocks / innodb = effect_myrocks / effect_innodb = 0.8
    ratio = e.loc[("engine", "myrocks", None), "effect"] / e.loc[("engine", "innodb", None), "effect"]
    assert ratio == pytest.approx(0.8, rel=0.03)
    # the interaction: 4k helps by 1.5 more at cache 25 than on average ... in sum-to-zero terms
    inter = e[(e["term"] == "cache_pct x block_size")]
    cell = lambda c, b: inter[(inter["level_1"] == c) & (inter["level_2"] == b)]["log_effect"].iloc[0]  # noqa: E731
    contrast = (cell(25, "4k") - cell(25, "16k")) - (cell(100, "4k") - cell(100, "16k"))
    assert math.exp(contrast) == pytest.approx(1.5, rel=0.05)
    # deviations of each term sum to zero
    for term, g in fit.effects.groupby("term"):
        if g["kind"].iloc[0] == "main":
            assert g["log_effect"].sum() == pytest.approx(0, abs=1e-12)
    a = fit.anova.set_index("term")
    assert a.loc["cache_pct", "rank"] == 1 and a.loc["cache_pct x block_size", "p"] < 1e-6
    assert a.loc["engine x cache_pct", "p"] > 0.001  # no such interaction in the truth
    assert a["share_pct"].sum() == pytest.approx(100.0)  # balanced: the shares partition the variance
    assert a.loc["cache_pct", "spread"] == pytest.approx(2.5 / 1.5**0.5, rel=0.05)  # 100 vs 25, averaged over pages


def test_factorial_model_agrees_with_statsmodels_formulas() -> None:
    df = design_runs(EFFECTS, interaction=math.log(1.2), sigma=0.05, reps=2, seed=9)
    df = df.iloc[1:]  # unbalanced: Type III sums of squares still agree
    fit = factorial_model(df, FACTORS3)
    d = df.assign(y=np.log(df["tps"]))
    ref = smf.ols("y ~ (C(engine, Sum) + C(cache_pct, Sum) + C(block_size, Sum))**2", data=d).fit()
    table = sm.stats.anova_lm(ref, typ=3)
    names = {"engine": "C(engine, Sum)", "cache_pct": "C(cache_pct, Sum)", "block_size": "C(block_size, Sum)",
             "engine x cache_pct": "C(engine, Sum):C(cache_pct, Sum)",
             "engine x block_size": "C(engine, Sum):C(block_size, Sum)",
             "cache_pct x block_size": "C(cache_pct, Sum):C(block_size, Sum)"}
    a = fit.anova.set_index("term")
    for ours, theirs in names.items():
        assert a.loc[ours, "sum_sq"] == pytest.approx(table.loc[theirs, "sum_sq"], rel=1e-8)
        assert a.loc[ours, "F"] == pytest.approx(table.loc[theirs, "F"], rel=1e-8)
        assert a.loc[ours, "p"] == pytest.approx(table.loc[theirs, "PR(>F)"], rel=1e-6)
    assert a.loc["residual", "df"] == ref.df_resid and fit.r2 == pytest.approx(ref.rsquared)
    e = fit.effects.set_index(["term", "level_1"])
    assert e.loc[("engine", "innodb"), "log_effect"] == pytest.approx(ref.params["C(engine, Sum)[S.innodb]"])
    assert e.loc[("cache_pct", 25), "se"] == pytest.approx(ref.bse["C(cache_pct, Sum)[S.25]"])


def test_factorial_effect_ci_coverage() -> None:
    """200 fixed seeds: the 95 % CI of the engine effect and of one interaction cover the truth."""
    hits = np.zeros(2)
    truth_engine = math.log(0.8) / 2  # deviation of myrocks from the mean of the two engines
    for s in range(200):
        df = design_runs(EFFECTS, interaction=0.0, sigma=0.1, reps=2, seed=1000 + s)
        e = factorial_model(df, FACTORS3).effects
        eng = e[(e["term"] == "engine") & (e["level_1"] == "myrocks")].iloc[0]
        inter = e[(e["term"] == "engine x block_size")].iloc[0]
        hits[0] += math.log(eng["ci_lo"]) <= truth_engine <= math.log(eng["ci_hi"])
        hits[1] += inter["ci_lo"] <= 1.0 <= inter["ci_hi"]
    assert ((hits / 200 >= 0.91) & (hits / 200 <= 0.99)).all(), hits / 200


def fraction_runs(reps: int, seed: int) -> pd.DataFrame:
    """2^(5-1) resolution V (E = ABCD) with main effects and one two-way interaction (a x b)."""
    rng = np.random.default_rng(seed)
    main = {"a": math.log(1.3), "b": math.log(0.7), "c": math.log(1.1), "d": 0.0, "e": math.log(1.05)}
    rows = []
    for bits in itertools.product([-1, 1], repeat=4):
        code = dict(zip("abcd", bits), e=int(np.prod(bits)))
        mu = math.log(1000) + sum(main[f] * (code[f] + 1) / 2 for f in main)
        mu += math.log(1.2) * (code["a"] == 1 and code["b"] == 1)
        levels = {f: "hi" if code[f] == 1 else "lo" for f in main}
        for rep in range(reps):
            rows.append({"cell_id": "".join(f"{f}{levels[f]}" for f in main), **levels, "repetition": rep,
                         "tps": math.exp(mu + rng.normal(0, 0.03))})
    return pd.DataFrame(rows)


def test_fractional_design_recovers_main_effects_and_interactions() -> None:
    df = fraction_runs(reps=2, seed=10)
    fit = factorial_model(df, list("abcde"))
    assert fit.model == "main+2way" and fit.n == 32 and fit.df_resid == 32 - 16
    e = fit.effects.set_index(["term", "level_1", "level_2"])
    for f, truth in (("a", 1.3 * 1.2**0.5), ("b", 0.7 * 1.2**0.5), ("c", 1.1), ("d", 1.0), ("e", 1.05)):
        hi, lo = e.loc[(f, "hi", None), "log_effect"], e.loc[(f, "lo", None), "log_effect"]
        assert math.exp(hi - lo) == pytest.approx(truth, rel=0.04), f
    ab = e.loc[("a x b", "hi", "hi"), "log_effect"]
    assert math.exp(4 * ab) == pytest.approx(1.2, rel=0.06)  # the a x b interaction contrast
    a = fit.anova.set_index("term")
    assert a.loc["a x b", "p"] < 1e-4 and a.loc["c x d", "p"] > 0.001
    assert list(fit.anova["term"][:2]) == ["a", "b"]  # ranked by share of variance (|log 1.31| > |log 0.77|)


def test_model_falls_back_to_main_effects_and_says_why() -> None:
    single = fraction_runs(reps=1, seed=11)  # 16 runs, 16 parameters: no residual df for interactions
    fit = factorial_model(single, list("abcde"))
    assert fit.model == "main" and "no residual degrees of freedom" in fit.note
    assert set(fit.anova["kind"]) == {"main", "residual"}
    one_level = single[single["a"] == "hi"].assign(b="lo", c="lo", d="lo", e="lo")
    none = factorial_model(one_level, list("abcde"))
    assert none.model == "none" and none.effects.empty and "no factor" in none.note
    with pytest.raises(ValueError, match="'qps'"):
        factorial_model(single, list("abcde"), metric="qps")


def test_model_uses_only_positive_values_and_spec_level_order() -> None:
    df = design_runs(EFFECTS, interaction=0.0, sigma=0.05, reps=2, seed=12)
    df.loc[0, "tps"] = 0.0
    fit = factorial_model(df, FACTORS3, level_order={"cache_pct": [100, 50, 25]})
    assert fit.n == len(df) - 1
    main = fit.effects[fit.effects["term"] == "cache_pct"]
    assert list(main["level_1"]) == [100, 50, 25]
