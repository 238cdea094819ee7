"""Seed 000's doubling as a paired crossing ratio (dbmatrix.analyse.scaleout_crossing): known answers on
synthetic p95 curves, its power both ways, its coverage with a campaign level, and the study registered for
the claim judging it first."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.claims.catalogue import CLAIMS, CROSSING_GRID
from dbmatrix.analyse.claims.model import Evidence
from dbmatrix.analyse.claims.premises import check_premise
from dbmatrix.analyse.claims.table import evaluate
from dbmatrix.analyse.claims.verdicts import judge
from dbmatrix.analyse.contrasts import NotTestable
from dbmatrix.analyse.scaleout_crossing import campaign_ratio, crossing, crossing_ratio_estimate, crossing_table

GRID = (4, 6, 8, 10, 12, 16, 20, 24, 32, 48)
DOUBLING = next(c for c in CLAIMS if c.id == "scaleDoubling")


def curves(rng: np.random.Generator, crossings: dict[int, float], campaigns: int = 1, run_sd: float = 0.1,
           campaign_sd: float = 0.0, pair_sd: float = 0.0, slope: float = 1.2, reps: int = 1,
           grid: tuple[int, ...] = GRID) -> pd.DataFrame:
    """Runs whose p95 is 0.5 ms x (threads / crossing)^slope: each campaign moves every crossing by a common
    factor (campaign_sd, log) and each instance count's by its own (pair_sd), each run by run_sd."""
    rows = []
    for k in range(1, campaigns + 1):
        common = rng.normal(0, campaign_sd)
        for n, cross in crossings.items():
            own = math.log(cross) + common + rng.normal(0, pair_sd)
            for t in grid:
                for r in range(reps):
                    p95 = 0.5 * math.exp(slope * (math.log(t) - own) + rng.normal(0, run_sd))
                    rows.append({"run_id": f"t{t}-i{n}-r{r}-c{k}", "campaign": k, "instances": n, "threads": t,
                                 "lat_pct_ms": round(p95, 3), "status": "ok", "host": "h"})
    return pd.DataFrame(rows)


def test_a_noiseless_curve_gives_its_crossing_exactly() -> None:
    runs = curves(np.random.default_rng(1), {1: 10.0, 2: 20.0}, run_sd=0.0)
    c = crossing(runs, 1, 0.5)
    assert c.threads == pytest.approx(10.0, rel=2e-3) and c.slope == pytest.approx(1.2, rel=2e-3)  # p95 to 1 us
    assert c.levels == (4, 6, 8, 10, 12, 16, 20, 24)  # within x3 of 0.5 ms: p95 0.17 .. 1.5 ms
    r = campaign_ratio(runs, 1, 0.5)
    assert math.exp(r.log_ratio) == pytest.approx(2.0, rel=2e-3)


def test_a_true_doubling_agrees_and_no_scaling_disagrees() -> None:
    """Power both ways at the last look's level: six campaigns that move the crossings together by 30 %, the
    runs' p95 5 % apart; agreeing takes a ratio known within 10 %, so a pairing that holds in every campaign."""
    rng = np.random.default_rng(7)
    doubled = crossing_ratio_estimate(curves(rng, {1: 10.0, 2: 20.0}, 6, run_sd=0.05, campaign_sd=0.3,
                                             pair_sd=0.02), 0.9625)
    assert judge(DOUBLING, doubled)[0] == "agree", doubled
    assert doubled.campaigns == 6 and doubled.df == 5 and "the campaign as the unit" in doubled.basis
    flat = crossing_ratio_estimate(curves(rng, {1: 10.0, 2: 11.0}, 6, campaign_sd=0.3, pair_sd=0.03), 0.9625)
    assert judge(DOUBLING, flat)[0] == "disagree", flat
    assert flat.ci_hi < 1.8


def test_campaigns_that_disagree_widen_the_interval_past_a_decision() -> None:
    """The campaign is the unit: a pairing that varies between campaigns (SD 0.4 on the log scale) leaves the
    claim open where the runs within each campaign are precise."""
    est = crossing_ratio_estimate(curves(np.random.default_rng(3), {1: 10.0, 2: 14.0}, 3, run_sd=0.02,
                                         pair_sd=0.4), 0.995)
    assert judge(DOUBLING, est)[0] == "inconclusive"
    f, df1, _, p = est.heterogeneity
    assert f > 1 and df1 == est.campaigns - 1 >= 1 and p < 0.01  # the consistency check sees it


def test_the_interval_covers_the_true_ratio_at_its_level() -> None:
    """300 studies of 4 campaigns (run SD 0.1, campaign SD 0.2, pairing SD 0.1): the 95 % interval holds the
    true ratio 1.5 in 92-98 % of them."""
    rng = np.random.default_rng(2026)
    hits = 0
    for _ in range(300):
        est = crossing_ratio_estimate(curves(rng, {1: 10.0, 2: 15.0}, 4, campaign_sd=0.2, pair_sd=0.1), 0.95)
        hits += est.ci_lo <= 1.5 <= est.ci_hi
    assert 0.92 <= hits / 300 <= 0.98, hits


def test_one_campaign_gives_its_within_campaign_interval_and_says_so() -> None:
    est = crossing_ratio_estimate(curves(np.random.default_rng(5), {1: 10.0, 2: 20.0}), 0.95)
    assert est.campaigns == 1 and "within one campaign" in est.basis and est.ci_lo < 2.0 < est.ci_hi
    assert est.n == 20


def test_a_campaign_that_does_not_bracket_a_crossing_is_left_out_with_its_reason() -> None:
    rng = np.random.default_rng(11)
    runs = curves(rng, {1: 10.0, 2: 20.0}, 3)
    runs.loc[(runs["campaign"] == 2) & (runs["instances"] == 2), "lat_pct_ms"] = 0.1  # never reaches 0.5 ms
    est = crossing_ratio_estimate(runs, 0.95)
    assert est.campaigns == 2 and "left out: C2: every tested thread count kept p95 under 0.5 ms at 2" in est.basis
    table = crossing_table(runs, 0.5).set_index(["campaign", "instances"])
    assert math.isnan(table.loc[(2, 2), "crossing_threads"]) and "no fit brackets" in table.loc[(2, 2), "note"]
    assert table.loc[(1, 1), "levels"] == "4 6 8 10 12 16 20 24"
    coarse = curves(rng, {1: 10.0, 2: 20.0}, grid=(2, 4, 8, 16, 32))
    with pytest.raises(NotTestable, match="fewer than 3 thread levels within x3 of 0.5 ms at 1"):
        crossing_ratio_estimate(coarse, 0.95)
    with pytest.raises(NotTestable, match="needs two instance counts n and 2n; measured: 1"):
        crossing_ratio_estimate(runs[runs["instances"] == 1], 0.95)


def test_the_premise_asks_for_steps_of_at_most_x1_5() -> None:
    runs = curves(np.random.default_rng(1), {1: 10.0, 2: 20.0})
    assert check_premise(CROSSING_GRID, DOUBLING, Evidence("s", "scaleout", runs, {}, host_cpus={"h": 2})).met
    coarse = curves(np.random.default_rng(1), {1: 10.0, 2: 20.0}, grid=(2, 4, 8, 16))
    check = check_premise(CROSSING_GRID, DOUBLING, Evidence("s", "scaleout", coarse, {}, host_cpus={"h": 2}))
    assert check.met is False and "steps of x2, too coarse" in check.value


def test_the_study_registered_for_the_claim_judges_it_before_another_of_its_kind() -> None:
    rng = np.random.default_rng(4)
    coarse = Evidence("scaleout-x", "scaleout", curves(rng, {1: 10.0, 2: 20.0}, grid=(2, 4, 8, 16, 32)), {},
                      host_cpus={"h": 2})
    fine = Evidence("scalegrid-x", "scaleout", curves(rng, {1: 10.0, 2: 11.0}, 6), {}, host_cpus={"h": 2},
                    registered=("scaleDoubling",))
    row = evaluate([coarse, fine], [DOUBLING]).claims.iloc[0]
    assert row["study"] == "scalegrid-x" and row["verdict"] == "disagree"
    unregistered = Evidence(fine.experiment, fine.kind, fine.runs, {}, host_cpus={"h": 2})
    row = evaluate([coarse, unregistered], [DOUBLING]).claims.iloc[0]  # the first of the kind, as before
    assert row["study"] == "scaleout-x" and row["verdict"] == "not tested"


def test_the_crossing_figure_and_paragraph_numbers(tmp_path) -> None:
    """The figure draws every run and each campaign's fit; the paragraph's numbers come from the table."""
    from dbmatrix.publish.scaleout_crossing import crossing_macros, draw_crossings

    runs = curves(np.random.default_rng(8), {1: 10.0, 2: 12.0}, 2)
    table = crossing_table(runs, 0.5)
    m = crossing_macros(table)
    assert m["crossCampaigns"] == "2" and m["crossHighInstances"] == "2" and m["crossWindow"] == "3"
    assert len(m["crossRatios"].split(", ")) == 2 and "--" in m["crossLowRange"]
    files = draw_crossings(runs, table, tmp_path)
    assert {f.suffix for f in files} >= {".png", ".pdf"} and all(f.stat().st_size > 0 for f in files)
    assert draw_crossings(runs, table, tmp_path / "again")[0].read_bytes() == files[0].read_bytes()
    assert crossing_macros(table[table["instances"] == 1]) == {}


def test_the_paragraph_describes_the_grid_from_the_spec() -> None:
    from dbmatrix import paths
    from dbmatrix.publish.scaleout_crossing import grid_macros
    from dbmatrix.spec.experiment import load_spec

    m = grid_macros(load_spec(paths.repo_root() / "specs/paper-scalegrid.yaml"))
    assert m == {"crossThreadsLow": "4", "crossThreadsHigh": "48", "crossMaxStep": "1.5", "crossRunsText": "one run"}
