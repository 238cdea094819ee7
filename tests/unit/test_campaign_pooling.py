"""Tests of the campaign level of replication in the estimates (analyse.campaign_model, analyse.pooling,
contrasts.ratio_estimate): the pooled interval's coverage by simulation (and the within-campaign interval
failing the same check), its equality with the two-stage and the mixed-model answers on balanced data,
one-campaign behaviour, an interacting free factor judged at its levels, and what a fraction aliases."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from tests import benchmark_scripts

from dbmatrix.analyse.campaign_model import alias_note, campaign_cell_means, campaigns_of, pooled_t
from dbmatrix.analyse.contrasts import Estimate, NotTestable, ratio_estimate
from dbmatrix.analyse.pooling import per_campaign_estimates, pool_campaign_estimates
from dbmatrix.analyse.stats import welch_log_ratio

BENCH = benchmark_scripts.load("bench_campaign_coverage")

# ================================================================================ coverage


def test_pooled_interval_covers_and_the_within_campaign_one_does_not() -> None:
    """100 simulated studies of the threads shape (6 cells, 3 repetitions, K = 3 campaigns) whose campaign x
    cell SD (0.08) dwarfs the repetitions' (0.02): the pooled interval covers the true ratio about 95 %
    of the time; the within-campaign intervals (every run as if one campaign, or campaign 1 alone) fail the
    same bounds (binomial SE 2.2 points at 100 trials:
    the bounds are 3.2 SE below and 1.8 above 95 %; the seed is fixed). The benchmark gives the table."""
    got = BENCH.coverage(BENCH.DESIGNS["threads"], 3, 100, sd_u=0.08, sd_e=0.02, seed=5,
                         methods=("pooled", "ignore campaign", "one campaign"))
    assert 0.88 <= got["pooled"] <= 0.99, got
    for within in ("ignore campaign", "one campaign"):
        assert not 0.88 <= got[within] <= 0.99, got
    assert got["one campaign"] < 0.6, got


def test_two_cells_pooled_equals_the_two_stage_t_interval() -> None:
    """With only the two compared cells the additive cell + campaign model is the paired comparison of the
    campaigns: the mean of the K per-campaign log ratios with a t interval on K-1 df, i.e. exactly
    pool_campaign_estimates over the campaigns' own (Welch) estimates."""
    d = BENCH.DESIGNS["two-cell"]
    runs = BENCH.simulate_runs(d, 4, 3, 0.05, 0.03, np.random.default_rng(3))
    got = BENCH.estimates(d, runs, ("pooled", "two-stage"))
    pooled, two = got["pooled"], got["two-stage"]
    assert (pooled.estimate, pooled.ci_lo, pooled.ci_hi) == pytest.approx((two.estimate, two.ci_lo, two.ci_hi))
    assert pooled.campaigns == 4 and "t on 3 df" in pooled.basis and pooled.basis.startswith("cell means of 2 cells")
    logs = [math.log(e.estimate) for e in two.per_campaign]
    half = sps.t.ppf(0.975, 3) * np.std(logs, ddof=1) / 2
    assert pooled.ci_hi == pytest.approx(math.exp(np.mean(logs) + half))


def test_balanced_two_stage_equals_the_mixed_model() -> None:
    """On a balanced study the two-stage contrast and its standard error are those of the mixed model
    log y = cell + campaign + campaign x cell (random) + e fitted by REML (statsmodels MixedLM)."""
    import statsmodels.formula.api as smf

    d = BENCH.DESIGNS["threads"]
    runs = BENCH.simulate_runs(d, 3, 3, 0.08, 0.03, np.random.default_rng(11))
    e = ratio_estimate(runs, "tps", "threads", 16, 4, {"cache_pct": 100}, factors=d.factors)
    df = runs.assign(y=np.log(runs["tps"]), cell=runs["cell_id"], camp=runs["campaign"].astype(str))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm("y ~ 0 + C(cell) + C(camp, Sum)", df, groups=np.ones(len(df)),
                          vc_formula={"cc": "0 + C(camp):C(cell)"}).fit(reml=True)
    a, b = "C(cell)[100-16]", "C(cell)[100-4]"
    est = fit.fe_params[a] - fit.fe_params[b]
    cov = fit.cov_params()
    se = math.sqrt(cov.loc[a, a] + cov.loc[b, b] - 2 * cov.loc[a, b])
    assert math.log(e.estimate) == pytest.approx(est, abs=1e-6)
    t = sps.t.ppf(0.975, 10)  # (6 - 1)(3 - 1) df
    assert math.log(e.ci_hi) - math.log(e.estimate) == pytest.approx(t * se, rel=1e-3)


def test_pooled_fraction_uses_the_campaign_by_cell_residual() -> None:
    """The storage shape (2^(5-1), 16 cells, saturated two-way model): 15 (K - 1) df, the campaigns counted."""
    d = BENCH.DESIGNS["storage"]
    runs = BENCH.simulate_runs(d, 3, 3, 0.05, 0.03, np.random.default_rng(1))
    e = ratio_estimate(runs, "tps", d.factor, d.a, d.b, d.at, factors=d.factors)
    assert e.basis.startswith("two-way model, 48 campaign-level cell means of 144 runs in 3 campaigns")
    assert "30 df" in e.basis and e.campaigns == 3 and e.n == 144
    assert e.ci_lo < d.truth < e.ci_hi


# ================================================================================ one campaign


def test_one_campaign_is_todays_estimate() -> None:
    """No campaign column, or a campaign column of ones: the same numbers as before campaigns existed,
    Estimate.campaigns == 1, and "within one campaign" in the basis when asked."""
    d = BENCH.DESIGNS["storage"]
    runs = BENCH.simulate_runs(d, 1, 3, 0.05, 0.03, np.random.default_rng(2))
    bare = ratio_estimate(runs.drop(columns="campaign"), "tps", d.factor, d.a, d.b, d.at, factors=d.factors)
    ones = ratio_estimate(runs, "tps", d.factor, d.a, d.b, d.at, factors=d.factors, label_campaigns=True)
    assert (bare.estimate, bare.ci_lo, bare.ci_hi) == (ones.estimate, ones.ci_lo, ones.ci_hi)
    # a resolution-V half fraction: the two-way model, saturated in its 16 cells (no lack of fit to test)
    assert bare.basis == "two-way model, 48 runs; averaged over compression, medium" and bare.campaigns == 1
    assert ones.basis == bare.basis + "; within one campaign"
    t = BENCH.DESIGNS["threads"]
    runs = BENCH.simulate_runs(t, 1, 3, 0.05, 0.03, np.random.default_rng(2))
    matched = ratio_estimate(runs, "tps", "threads", 16, 4, {"cache_pct": 100}, factors=t.factors)
    assert matched.basis.startswith("cell means of 2 cells (6 runs); each cell's own run variance, Welch") \
        and matched.campaigns == 1
    w = welch_log_ratio(runs[(runs.threads == 16) & (runs.cache_pct == 100)]["tps"],
                        runs[(runs.threads == 4) & (runs.cache_pct == 100)]["tps"])
    assert (matched.ci_lo, matched.ci_hi) == pytest.approx((w["ci_lo"], w["ci_hi"]))  # two cells: Welch itself


def test_per_campaign_estimates_and_pooling() -> None:
    d = BENCH.DESIGNS["threads"]
    runs = BENCH.simulate_runs(d, 3, 3, 0.05, 0.03, np.random.default_rng(4))
    runs = runs[~((runs["campaign"] == 2) & (runs["threads"] == 16))]  # campaign 2 lost the 16-thread cells

    def fn(r: pd.DataFrame) -> Estimate:
        return ratio_estimate(r, "tps", "threads", 16, 4, {"cache_pct": 100}, factors=d.factors)

    per = per_campaign_estimates(runs, fn)
    assert [e.basis.split(":")[0] for e in per] == ["campaign 1", "campaign 2", "campaign 3"]
    assert math.isnan(per[1].estimate) and "not measured" in per[1].basis
    assert per[0].basis.startswith("campaign 1: cell means of 2 cells (6 runs)")
    with pytest.raises(NotTestable, match="not every campaign"):
        pool_campaign_estimates(per)
    ok = [per[0], per[2]]
    pooled = pool_campaign_estimates(ok)
    est, lo, hi, df = pooled_t([e.estimate for e in ok])
    assert (pooled.estimate, pooled.ci_lo, pooled.ci_hi, df) == (est, lo, hi, 1)
    assert pooled.campaigns == 2 and pooled.per_campaign == ok and "t on 1 df" in pooled.basis
    single = pool_campaign_estimates([per[0]])
    assert single.basis.endswith("; within one campaign") and single.campaigns == 1


def test_pool_on_the_linear_scale_for_differences() -> None:
    es = [Estimate(v, v - 0.01, v + 0.01, "x", 3) for v in (-0.4, -0.2, -0.3)]
    p = pool_campaign_estimates(es, scale="linear")
    half = sps.t.ppf(0.975, 2) * np.std([-0.4, -0.2, -0.3], ddof=1) / math.sqrt(3)
    assert (p.estimate, p.ci_lo, p.ci_hi) == pytest.approx((-0.3, -0.3 - half, -0.3 + half))
    with pytest.raises(NotTestable, match="log scale"):
        pool_campaign_estimates(es)
    with pytest.raises(ValueError, match="log, linear"):
        pool_campaign_estimates(es, scale="sqrt")


def test_pooled_interval_is_never_narrower_than_the_campaigns_own_pooled_as_one() -> None:
    """Two campaigns that agree by chance (1.10 and 1.101) must not give an interval narrower than
    their repetitions allow: the floor is the fixed-effect pool of their own intervals."""
    es = [Estimate(1.10, 1.0, 1.21, "x", 3), Estimate(1.101, 1.0, 1.2122, "x", 3)]
    p = pool_campaign_estimates(es)
    se = math.log(1.21) / (2 * sps.norm.ppf(0.975))
    floor = sps.norm.ppf(0.975) * se / math.sqrt(2)
    centre = math.log(p.estimate)
    assert math.log(p.ci_hi) - centre == pytest.approx(floor, rel=0.01)
    assert p.ci_lo > 1.0  # and narrower than either campaign's own


def test_campaign_cell_means_are_geometric_means_per_campaign() -> None:
    runs = pd.DataFrame({"engine": ["a", "a", "a", "b"], "campaign": [1, 1, 2, 1], "tps": [1.0, 4.0, 3.0, 5.0]})
    m = campaign_cell_means(runs, "tps", ["engine"]).set_index(["campaign", "engine"])
    assert m.loc[(1, "a"), "tps"] == pytest.approx(2.0) and m.loc[(1, "a"), "n_runs"] == 2
    assert m.loc[(2, "a"), "tps"] == pytest.approx(3.0) and len(m) == 3
    assert campaigns_of(runs) == [1, 2] and campaigns_of(runs.drop(columns="campaign")) == [1]


# ================================================================================ interacting factors


def _interacting(campaigns: int = 1, seed: int = 7) -> pd.DataFrame:
    """engine x cache x block (full), cache 25/100 is 0.38 for InnoDB and 0.78 for MyRocks."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(1, campaigns + 1):
        for eng in ("innodb", "myrocks"):
            for cache in (25, 100):
                for block in ("4k", "16k"):
                    mu = math.log(1000) + (math.log(0.38 if eng == "innodb" else 0.78) if cache == 25 else 0.0)
                    mu += 0.05 * (block == "4k") + rng.normal(0, 0.02 if campaigns > 1 else 0.0)
                    for r in range(3):
                        rows.append({"engine": eng, "cache_pct": cache, "block_size": block, "campaign": k,
                                     "tps": math.exp(mu + rng.normal(0, 0.03))})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("campaigns", [1, 2])
def test_an_interacting_free_factor_is_judged_at_each_of_its_levels(campaigns: int) -> None:
    """Averaged over the engine, the cache ratio is the geometric mean of the two engines' ratios; held at
    each engine (as a claim that names ``per: engine`` is judged), each interval covers that engine's."""
    runs = _interacting(campaigns)
    factors = ("engine", "cache_pct", "block_size")
    averaged = ratio_estimate(runs, "tps", "cache_pct", 25, 100, factors=factors)
    assert averaged.estimate == pytest.approx(math.sqrt(0.38 * 0.78), rel=0.05)
    for level, truth in (("innodb", 0.38), ("myrocks", 0.78)):
        e = ratio_estimate(runs, "tps", "cache_pct", 25, 100, {"engine": level}, factors=factors)
        assert e.ci_lo < truth < e.ci_hi and e.campaigns == campaigns


def test_a_free_factor_without_interaction_is_averaged_over() -> None:
    """Block does not interact with cache in _interacting: holding the engine, block stays free and the
    two-way model's contrast averages over it."""
    runs = _interacting(1, seed=8)
    runs = runs[runs["engine"] == "innodb"]
    e = ratio_estimate(runs, "tps", "cache_pct", 25, 100, factors=("cache_pct", "block_size"))
    assert "averaged over block" in e.basis and e.estimate == pytest.approx(0.38, rel=0.05)


# ================================================================================ aliasing


@pytest.mark.parametrize("resolution,fraction,text", [
    (3, "2^(3-1)", "2^(3-1) resolution III: main effects aliased with two-factor interactions"),
    (4, "2^(4-1)", "2^(4-1) resolution IV: two-factor interactions aliased with each other"),
    (5, "2^(5-1)", "2^(5-1) resolution V: two-factor interactions aliased with three-factor ones"),
    (6, "2^(9-2)", "2^(9-2) resolution VI: two-factor interactions aliased with four-factor ones"),
])
def test_alias_note(resolution: int, fraction: str, text: str) -> None:
    assert alias_note({"design": "fractional", "resolution": resolution, "fraction": fraction}) == text


def test_the_basis_says_what_the_fraction_aliases() -> None:
    from dbmatrix.spec.experiment import parse_experiment

    exp = parse_experiment({"experiment": "frac", "design": "fractional", "repetitions": 3,
                            "factors": {"engine": ["innodb", "myrocks"], "cache_pct": [25, 100],
                                        "block_size": ["4k", "16k"], "compression": ["none", "lz4"],
                                        "medium": ["disk", "tmpfs"]}})
    info = exp.design_info()
    assert alias_note({"design": "full"}) == "" and alias_note(None) == ""
    d = BENCH.DESIGNS["storage"]
    runs = BENCH.simulate_runs(d, 1, 3, 0.0, 0.03, np.random.default_rng(0))
    e = ratio_estimate(runs, "tps", d.factor, d.a, d.b, d.at, factors=d.factors, design=info)
    assert e.basis.endswith("; 2^(5-1) resolution V: two-factor interactions aliased with three-factor ones")
    t = BENCH.DESIGNS["threads"]
    runs = BENCH.simulate_runs(t, 1, 3, 0.0, 0.03, np.random.default_rng(0))
    matched = ratio_estimate(runs, "tps", "threads", 16, 4, {"cache_pct": 100}, factors=t.factors, design=info)
    assert matched.basis.startswith("cell means") and "resolution" not in matched.basis  # no model, no aliases
