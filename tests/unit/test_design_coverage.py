"""Coverage of the design-based intervals (analyse.cell_model through contrasts.ratio_estimate) on studies
shaped like the paper's TPC-C study (benchmarks/bench_design_coverage.py, issue 38 item 1): the simulation's
truth and shape, and a small seeded coverage run in which ignoring campaigns and loads fails."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from tests import benchmark_scripts

from dbmatrix.analyse.contrasts import ratio_estimate

BENCH = benchmark_scripts.load("bench_design_coverage")
WITHIN, ACROSS, AVERAGED = BENCH.CONTRASTS


def test_the_simulated_study_has_the_tpcc_shape_and_known_truths() -> None:
    """24 cells, K x n runs each with unique ids; the cells of one dataset load (block size x compression) in
    a campaign share its draw; the truths are the log cell differences (c: their equal-weight average)."""
    runs = BENCH.simulate(3, 2, 0.0, np.random.default_rng(0), sd_load=0.5)
    assert len(runs) == 24 * 3 * 2 and runs["run_id"].is_unique
    assert runs.groupby(["cache_pct", "block_size", "compression", "medium"]).size().eq(6).all()
    assert set(runs["engine"]) == {"myrocks"} and sorted(runs["campaign"].unique()) == [1, 2, 3]
    mu = runs.apply(lambda r: BENCH.log_mean(r.to_dict()), axis=1)
    # with no campaign x cell term, a campaign's residual (run noise aside) is its shift + its load's draw:
    # averaged over a load's 12 runs per campaign, loads differ by about the load SD (0.5), not the runs' noise
    resid = np.log(runs["tps"]) - mu
    per_load = resid.groupby([runs["campaign"], runs["block_size"], runs["compression"]]).mean()
    spread = per_load.groupby(level=0).std()
    assert (spread > 0.1).all(), spread
    cell = {c: BENCH.log_mean(dict(zip(BENCH.LEVELS, c))) for c in itertools.product(*BENCH.LEVELS.values())}
    assert WITHIN.truth() == pytest.approx(cell[("4k", "none", 0, "tmpfs")] - cell[("4k", "none", 0, "disk")])
    assert ACROSS.truth() == pytest.approx(cell[("4k", "none", 0, "disk")] - cell[("16k", "none", 0, "disk")])
    avg = np.mean([cell[(b, "lz4", 8.5, m)] - cell[(b, "none", 8.5, m)]
                   for b in ("4k", "16k") for m in ("disk", "ramblock", "tmpfs")])
    assert AVERAGED.truth() == pytest.approx(avg)
    # the interactions are large: c differs from its value at any one block size by more than 0.3
    assert abs(avg - (cell[("16k", "lz4", 8.5, "disk")] - cell[("16k", "none", 8.5, "disk")])) > 0.3


def test_estimates_take_the_design_path_and_the_naive_one_is_welch() -> None:
    """ratio_estimate answers from the cell means with the load level for a contrast across loads (3 (K-1)
    df from it); the naive interval of two cells is Welch on their pooled runs, which is what the estimator
    gives when the campaign column is dropped (every run one campaign)."""
    runs = BENCH.simulate(2, 3, 0.04, np.random.default_rng(1))
    e = ratio_estimate(runs, "tps", ACROSS.factor, ACROSS.a, ACROSS.b, ACROSS.at, factors=BENCH.FACTORS)
    assert e.basis.startswith("cell means of 2 cells (12 runs in 2 campaigns); variance from dataset load x "
                              "campaign (3 df) and campaign x cell (20 df), Satterthwaite"), e.basis
    assert 3 <= e.df <= 23
    one = ratio_estimate(runs.drop(columns="campaign"), "tps", ACROSS.factor, ACROSS.a, ACROSS.b, ACROSS.at,
                         factors=BENCH.FACTORS)
    est, lo, hi, _ = BENCH.naive(runs, ACROSS)
    assert (est, lo, hi) == pytest.approx((math.log(one.estimate), math.log(one.ci_lo), math.log(one.ci_hi)))
    # the naive contrast of several cells: the same estimate as the design's, from every campaign's runs
    e = ratio_estimate(runs, "tps", AVERAGED.factor, AVERAGED.a, AVERAGED.b, AVERAGED.at, factors=BENCH.FACTORS)
    one = ratio_estimate(runs.drop(columns="campaign"), "tps", AVERAGED.factor, AVERAGED.a, AVERAGED.b,
                         AVERAGED.at, factors=BENCH.FACTORS)
    est, lo, hi, df = BENCH.naive(runs, AVERAGED)
    assert est == pytest.approx(math.log(e.estimate))
    assert (lo, hi, df) == pytest.approx((math.log(one.ci_lo), math.log(one.ci_hi), one.df))


def test_across_loads_interval_covers_and_ignoring_the_levels_does_not() -> None:
    """150 seeded studies (K = 2 campaigns, 3 runs per cell per campaign, campaign x cell SD 4 %, load SD
    4 %): the design's interval for block 4k / 16k (two dataset loads, the load level on 3 df) covers the
    truth within about 3 binomial SE (1.8 points) of 95 %; Welch on the pooled runs, which takes the runs
    of a campaign (sharing its load and campaign x cell draws) as independent, covers about 87 % (1,500
    naive-only trials) and must stay below 91 %. (At K = 5 with 1 run per cell the naive interval is too
    wide instead: the campaign shift, which cancels from the contrast, inflates the runs' spread.)"""
    row, = BENCH.coverage(2, 3, 0.04, 150, seed=38, contrasts=(ACROSS,))
    assert row["trials"] == 150 and row["no CI"] == 0 and row["naive no CI"] == 0
    assert 89.5 <= row["cov"] <= 99.0, row
    assert row["naive cov"] <= 91.0, row
    assert row["cov"] - row["naive cov"] >= 4.0, row
    assert abs(row["bias"]) < 10, row  # x 1000 on the log scale: the cell means are unbiased
    assert row["width"] > row["naive width"], row
