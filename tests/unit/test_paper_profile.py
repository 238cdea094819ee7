"""The paper profile (notebooks/params/paper.yaml): the studies the committed paper's verdicts come from, at the
seeds' conditions, with windows the steady-state test always judges, >= 3 repetitions per cell, a fresh dataset
load per campaign, and about 2 hours per campaign by the plan's estimate."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from dbmatrix.analyse.stats.steady import MIN_DRIFT_SAMPLES, MIN_STEADY_S, steady_state_series
from dbmatrix.run.matrix import summarize_plan
from dbmatrix.study import load_studies

STUDIES = {s.experiment.name: s for s in load_studies("paper")}
MISSING_S = 2  # a series may hold a second or two fewer rows than measure_s (reference: series_s = measure_s - 1)


def test_the_paper_profile_has_one_study_per_seed_kind() -> None:
    assert {n: s.kind for n, s in STUDIES.items()} == {
        "tpcc-paper": "tpcc", "galera-paper": "galera", "threads-paper": "threads", "scaleout-paper": "scaleout",
        "groupcommit-paper": "threads", "tpcc-index-paper": "tpcc", "remote-paper": "media",
        "builds-paper": "builds", "soak-paper": "soak", "scalegrid-paper": "scaleout"}


SHORT = sorted(n for n, s in STUDIES.items() if s.kind != "soak")  # a soak measures an hour, once per campaign
# its pilot runs the allocation too: its cells at 4, 8 and 16 threads are the scale-out study's, whose six
# campaigns measured the run and campaign components it is allocated by (specs/paper-scalegrid.yaml)
BORROWED_PILOT = {"scalegrid-paper"}


@pytest.mark.parametrize("name", SHORT)
def test_every_study_replicates_and_loads_afresh(name: str) -> None:
    """A pilot (the first campaign) with a run variance of its own in every cell; later campaigns at the
    allocation, one run per cell; every campaign loads its datasets afresh."""
    exp = STUDIES[name].experiment
    assert exp.repetitions >= (1 if name in BORROWED_PILOT else 2) and exp.repetitions_in(2) == 1
    assert exp.dataset_load == "per_campaign"
    assert exp.measure_s >= 30 and exp.measure_s - MISSING_S >= MIN_STEADY_S


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_the_steady_state_test_judges_every_run_even_at_the_largest_truncation(name: str) -> None:
    """MSER truncation may drop up to half the series; what is left must still meet the drift test's minimum."""
    n = STUDIES[name].experiment.measure_s - MISSING_S
    assert n - n // 2 >= MIN_DRIFT_SAMPLES
    rng = np.random.default_rng(1)
    ramp = np.r_[np.linspace(100, 1000, n // 2), np.full(n - n // 2, 1000.0)] + rng.normal(0, 5, n)
    res = steady_state_series(ramp)
    assert res["steady_reason"] != "too_short" and res["steady_s"] >= MIN_DRIFT_SAMPLES


def test_tpcc_is_the_seeds_full_design_at_its_conditions() -> None:
    exp = STUDIES["tpcc-paper"].experiment
    assert exp.design == "full" and len(exp.cells()) == 24
    assert exp.factors["cache_pct"] == (0, 8.5)  # disabled, and the seed's 30 GB of 351-353 GB uncompressed
    assert set(exp.factors["medium"]) == {"disk", "tmpfs", "ramblock"}
    w = exp.workload
    assert (w.name, w.rand_type, w.isolation, w.warehouses) == ("tpcc", "pareto", "RC", 1)


def test_galera_followers_are_limited_by_applying_as_the_seeds_and_appliers_compared_1_vs_16() -> None:
    """The seed's condition, not a throttle: the buffer pool at ~9 % of the data (8 GB for ~90 GB), so one
    applier waits on page reads; no calibrated limit on the followers, no throttled medium."""
    exp = STUDIES["galera-paper"].experiment
    assert exp.topology.calibrate is None and exp.factors["slave_threads"] == (1, 16)
    assert exp.factors["follower_medium"] == ("same",)
    assert exp.factors["cache_pct"] == (9,)


def test_threads_run_with_the_binlog_synced_over_the_seeds_16x_range() -> None:
    exp = STUDIES["threads-paper"].experiment
    assert exp.server_options["log_bin"] and exp.server_options["sync_binlog"] == "1"
    assert exp.server_options["innodb_flush_log_at_trx_commit"] == "1"
    t = exp.factors["threads"]
    assert max(t) / min(t) == 16  # the seed's 8..128


def test_scaleout_goes_past_saturation_on_a_doubling_grid() -> None:
    exp = STUDIES["scaleout-paper"].experiment
    assert exp.factors["instances"] == (1, 2)
    t = sorted(exp.factors["threads"])
    assert all(b == 2 * a for a, b in pairwise(t)) and max(t) >= 8


def test_the_grid_study_fits_both_crossings_and_is_registered_for_the_doubling() -> None:
    """Steps of at most x1.5 (the claim's premise) from below the fastest crossing seen (5 threads) to past a
    true doubling of the slowest (16 -> 32); the claim judged here before the scale-out study."""
    exp = STUDIES["scalegrid-paper"].experiment
    t = sorted(exp.factors["threads"])
    assert exp.factors["instances"] == (1, 2) and exp.claims == ("scaleDoubling",)
    assert max(b / a for a, b in pairwise(t)) <= 1.5 and min(t) <= 4 and max(t) > 32
    same = ("workload", "warmup_s", "measure_s", "server_options")
    scaleout = STUDIES["scaleout-paper"].experiment
    assert all(getattr(exp, k) == getattr(scaleout, k) for k in same)


NEW = ("groupcommit-paper", "tpcc-index-paper", "remote-paper", "builds-paper", "scalegrid-paper")  # pilots later


def test_the_soak_measures_over_an_hour_after_the_seeds_warm_up_once_per_campaign() -> None:
    """Seed 000's long run: one run of over an hour (120 s warm-up, 3600 s measured) per campaign, in a
    sitting of its own (never beside a paper campaign), the dataset loaded afresh."""
    from dbmatrix.steps import sittings

    exp = STUDIES["soak-paper"].experiment
    assert (exp.warmup_s, exp.measure_s, exp.repetitions, exp.repetitions_in(2)) == (120, 3600, 1, 1)
    assert exp.dataset_load == "per_campaign" and len(exp.cells()) == 1
    assert sittings(list(STUDIES.values()))[0] == [s for s in STUDIES.values() if s.kind != "soak"]
    assert summarize_plan(exp).estimated_s <= 70 * 60


def test_a_later_campaign_takes_about_an_hour_by_the_plan() -> None:
    """A campaign after the pilots, at one run per cell, fits the hour a sitting is meant to take; with the
    group-commit and tpcc-index pilots beside it (as they ran), about an hour and a half; the remote-storage
    pilot, which ran in a sitting of its own, within half an hour."""
    from dataclasses import replace

    total = sum(summarize_plan(replace(s.experiment, repetitions=s.experiment.repetitions_in(2))).estimated_s
                for s in STUDIES.values() if s.experiment.name not in NEW and s.kind != "soak")
    pilot = {n: summarize_plan(STUDIES[n].experiment).estimated_s for n in NEW}
    assert 30 * 60 <= total <= 50 * 60, total / 60
    assert total + pilot["groupcommit-paper"] + pilot["tpcc-index-paper"] <= 95 * 60, (total, pilot)
    assert pilot["remote-paper"] <= 30 * 60, pilot
    assert pilot["builds-paper"] <= 15 * 60, pilot
    assert pilot["scalegrid-paper"] <= 25 * 60, pilot
