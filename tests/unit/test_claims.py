"""Tests of dbmatrix.publish.claims: the verdict rule, the estimates behind each claim (matched cells, the
factorial model's conditional contrast, main effects at the conditions, dataset sizes, shares, the
replication table) on synthetic runs with known effects, and the claim list itself."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from dbmatrix.analyse import claims, contrasts
from dbmatrix.analyse.claims import CLAIMS, Claim, Evidence, evaluate, verdict
from dbmatrix.analyse.claims.catalogue import FURTHER, all_claims
from dbmatrix.analyse.contrasts import NotTestable
from dbmatrix.analyse.effects import factorial_model

# ================================================================================ verdict rule


@pytest.mark.parametrize("ci,band,test,null,expected", [
    ((1.02, 1.08), (1.0, 1.10), "direction", 1.0, "agree"),  # inside the claimed "up to +10 %"
    ((1.05, 1.30), (1.0, 1.10), "direction", 1.0, "inconclusive"),  # meets the claimed region and goes past it
    ((1.02, 1.12), (1.0, 1.10), "direction", 1.0, "inconclusive"),  # the estimate (1.07) is in the band: not read
    ((1.20, 1.40), (1.0, 1.10), "direction", 1.0, "disagree"),  # a size clearly beyond the claim
    ((0.80, 0.95), (1.0, 1.10), "direction", 1.0, "disagree"),  # the opposite direction
    ((0.95, 1.05), (1.0, 1.10), "direction", 1.0, "inconclusive"),  # includes no effect
    ((0.30, 0.50), (0.0, 1.0), "direction", 1.0, "agree"),  # a claimed decrease
    ((0.90, 1.10), (0.0, 1.0), "direction", 1.0, "inconclusive"),
    ((1.50, 3.00), (1.0, math.inf), "direction", 1.0, "agree"),  # open-ended band
    ((0.97, 1.03), (0.95, 1.05), "within", 1.0, "agree"),  # no effect, inside the band
    ((0.90, 1.03), (0.95, 1.05), "within", 1.0, "inconclusive"),
    ((0.80, 0.90), (0.95, 1.05), "within", 1.0, "disagree"),
    ((-40.0, -20.0), (-100.0, 0.0), "direction", 0.0, "agree"),  # a difference in points
    ((-5.0, 3.0), (-100.0, 0.0), "direction", 0.0, "inconclusive"),
    ((2.0, 6.0), (-100.0, 0.0), "direction", 0.0, "disagree"),
    ((math.nan, math.nan), (1.0, 1.1), "direction", 1.0, "inconclusive"),
])
def test_verdict_rule(ci, band, test, null, expected) -> None:
    assert verdict(*ci, band, test, null) == expected


def test_up_to_x_agrees_only_with_an_interval_inside_the_band() -> None:
    """The issue's example: PMEM's advantage "up to 25 %" measured as 1.39 (1.19-1.64) is not an agree, and
    neither is 1.15 (1.05-1.30), whose interval reaches past 1.25 (issue 38: no test of the estimate)."""
    assert verdict(1.19, 1.64, (1.0, 1.25), "direction", 1.0, estimate=1.39) == "inconclusive"
    assert verdict(1.05, 1.30, (1.0, 1.25), "direction", 1.0, estimate=1.15) == "inconclusive"
    assert verdict(1.05, 1.24, (1.0, 1.25), "direction", 1.0, estimate=1.15) == "agree"


def _claim(**kw: object) -> Claim:
    base: dict[str, object] = {"id": "x", "seed": "000", "where": "-", "text": "-", "metric": "tps",
                               "band": (1.0, 1.25)}
    return Claim(**{**base, **kw})  # type: ignore[arg-type]


def _est(e: float, lo: float, hi: float) -> contrasts.Estimate:
    return contrasts.Estimate(e, lo, hi, "test", 6)


def test_the_pooled_interval_alone_decides() -> None:
    """One decision on the pooled interval (issue 38): the campaigns' own estimates are consistency checks
    in the table, never a veto of the pooled verdict."""
    c = _claim()
    assert claims.judge(c, _est(1.12, 1.06, 1.20)) == ("agree", "")
    assert claims.judge(c, _est(0.8, 0.7, 0.9)) == ("disagree", "")


def test_a_failed_premise_leaves_the_claim_not_tested() -> None:
    c = _claim()
    failed = claims.PremiseCheck(False, "lz4 shrinks the data 1.04x")
    ok = claims.PremiseCheck(True, "fine")
    unsure = claims.PremiseCheck(None, "CPUs 90 %", uncertain=True)
    assert claims.judge(c, _est(1.12, 1.06, 1.20), [ok]) == ("agree", "")
    assert claims.judge(c, _est(1.12, 1.06, 1.20), [ok, failed]) == (
        "not tested", "premise not met: lz4 shrinks the data 1.04x")
    assert claims.judge(c, _est(0.5, 0.4, 0.6), [failed])[0] == "not tested"
    assert claims.judge(c, _est(1.12, 1.06, 1.20), [unsure, failed]) == (
        "not tested", "premise not met: lz4 shrinks the data 1.04x; premise uncertain: CPUs 90 %")
    assert claims.judge(c, _est(1.12, 1.06, 1.20), [claims.PremiseCheck(None, "not checked: no data")])[0] == "agree"


def test_verdicts_are_counted_by_class() -> None:
    t = pd.DataFrame({"verdict": ["agree", "depends on compression", "depends on block", "not tested", "odd"]})
    counts = claims.verdict_counts(t)
    assert list(counts) == list(claims.VERDICTS) and counts["depends"] == 2 and counts["agree"] == 1
    assert sum(counts.values()) == 4
    assert claims.verdict_class("depends on medium") == "depends" and claims.verdict_class("agree") == "agree"


def test_flips_count_claims_whose_campaigns_disagree() -> None:
    t = pd.DataFrame({"id": ["a", "b", "c"], "seed": ["0", "0", "0"], "verdict": ["agree", "inconclusive", "x"]})
    per = pd.DataFrame({"id": ["a", "b", "c"] * 2, "campaign": [1, 1, 1, 2, 2, 2],
                        "verdict": ["agree", "agree", "", "agree", "disagree", ""]})
    f = claims.flips(claims.ClaimVerdicts(t, per)).set_index("id")
    assert f["flip"].tolist() == [False, True, False]
    assert f.loc["b", "C2"] == "disagree" and f.loc["b", "pooled"] == "inconclusive"


def test_verdict_rejects_an_unknown_test() -> None:
    with pytest.raises(ValueError, match="direction, about, within"):
        verdict(1.0, 1.1, (1.0, 1.2), "bigger")


@pytest.mark.parametrize("k,n", [(48, 48), (40, 48), (0, 10), (7, 9)])
def test_wilson_interval_agrees_with_statsmodels(k: int, n: int) -> None:
    assert contrasts.wilson_interval(k, n) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)


# ================================================================================ synthetic runs

ENGINE = {"innodb": 1.0, "myrocks": 0.8}
CACHE = {25: 0.5, 100: 1.0}


def synthetic_runs(cells: list[dict[str, object]], reps: int = 3, sd: float = 0.02, seed: int = 1) -> pd.DataFrame:
    """Runs with multiplicative effects: block 4k/16k is 1.25 for MyRocks and 1.0 for InnoDB, times 0.9
    at cache 100 (an engine x block and a cache x block interaction, no three-way one: what the two-way
    model represents exactly), compression lz4/none 0.9 everywhere."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in cells:
        level = 1000 * ENGINE[c["engine"]] * CACHE[c["cache_pct"]]
        if c["block_size"] == "4k":
            level *= (1.25 if c["engine"] == "myrocks" else 1.0) * (0.9 if c["cache_pct"] == 100 else 1.0)
        level *= 0.9 if c.get("compression") == "lz4" else 1.0
        cid = "-".join(str(v) for v in c.values())
        for r in range(reps):
            rows.append({**c, "cell_id": cid, "run_id": f"{cid}-r{r + 1}",
                         "tps": level * math.exp(rng.normal(0, sd)), "rate_fraction": 0})
    return pd.DataFrame(rows)


def full_factorial(**levels: list[object]) -> list[dict[str, object]]:
    keys = list(levels)
    return [dict(zip(keys, combo)) for combo in itertools.product(*levels.values())]


FACTORS = ("engine", "cache_pct", "block_size", "compression")


def test_conditional_ratio_from_matched_cells_is_welch() -> None:
    runs = synthetic_runs(full_factorial(engine=["innodb", "myrocks"], cache_pct=[25, 100],
                                         block_size=["4k", "16k"]))
    e = contrasts.ratio_estimate(runs, "tps", "block_size", "4k", "16k",
                              {"engine": "myrocks", "cache_pct": "min"}, factors=FACTORS)
    assert e.basis.startswith("cell means of 2 cells") and "Welch-Satterthwaite" in e.basis
    assert e.ci_lo < 1.25 < e.ci_hi and e.estimate == pytest.approx(1.25, rel=0.05)
    assert e.compared == "block 4k / 16k at engine myrocks, cache 25 %"
    flat = contrasts.ratio_estimate(runs, "tps", "block_size", "4k", "16k", {"engine": "innodb", "cache_pct": 100},
                                 factors=FACTORS)
    assert flat.ci_lo < 0.9 < flat.ci_hi


def test_conditional_ratio_from_the_model_averages_the_free_factors() -> None:
    """Compression is left free: the cell means' contrast at engine x cache averages over it with equal
    weights, and agrees with the main effect of effects.factorial_model where no condition is given."""
    cells = full_factorial(engine=["innodb", "myrocks"], cache_pct=[25, 100], block_size=["4k", "16k"],
                           compression=["none", "lz4"])
    estimates = [contrasts.ratio_estimate(synthetic_runs(cells, seed=seed), "tps", "block_size", "4k", "16k",
                                       {"engine": "myrocks", "cache_pct": 25}, factors=FACTORS)
                 for seed in range(40)]
    e = estimates[0]
    assert e.basis.startswith("cell means of 4 cells, averaged over compression")  # a full factorial: its cells
    covered = sum(x.ci_lo < 1.25 < x.ci_hi for x in estimates)
    assert covered >= 34, f"the 95 % interval covered the true 1.25 in {covered}/40 fixed seeds"
    assert np.mean([math.log(x.estimate) for x in estimates]) == pytest.approx(math.log(1.25), abs=0.005)
    runs = synthetic_runs(cells)
    main = contrasts.ratio_estimate(runs, "tps", "compression", "lz4", "none", factors=FACTORS)
    fit = factorial_model(runs, list(FACTORS))
    eff = fit.effects[fit.effects["term"] == "compression"].set_index("level_1")["log_effect"]
    assert main.estimate == pytest.approx(math.exp(eff["lz4"] - eff["none"]))
    assert main.ci_lo < main.estimate < main.ci_hi and main.estimate == pytest.approx(0.9, rel=0.02)


def test_a_fraction_does_not_identify_an_average_over_aliased_interactions() -> None:
    """A 2^(4-1) half fraction (resolution IV: two-way interactions aliased in pairs) has no pair of cells
    that differ only in compression and no estimable two-way model: averaging the compression effect over
    cache and block would average it with their aliases, so the comparison is not identified (never the
    main-effects model's silent average)."""
    cells = [c for c in full_factorial(engine=["innodb", "myrocks"], cache_pct=[25, 100],
                                       block_size=["4k", "16k"], compression=["none", "lz4"])
             if ((c["engine"] == "myrocks") + (c["cache_pct"] == 25) + (c["block_size"] == "4k")
                 + (c["compression"] == "lz4")) % 2 == 0]
    runs = synthetic_runs(cells)
    with pytest.raises(contrasts.NotIdentified, match="compression x cache, block cannot be told apart"):
        contrasts.ratio_estimate(runs, "tps", "compression", "lz4", "none", {"engine": "innodb"}, factors=FACTORS)


def test_resolve_levels() -> None:
    runs = pd.DataFrame({"threads": [1, 4, 16, 16], "medium": ["disk", "tmpfs", "disk", "tmpfs"],
                         "emulated": [None, "pmem-fsdax", None, "pmem-fsdax"], "cache_pct": [25, 25, 100, 100]})
    assert contrasts.resolve_level(runs, "threads", "max") == 16
    assert contrasts.resolve_level(runs, "threads", "min") == 1
    assert contrasts.resolve_level(runs, "threads", "second-max") == 4
    assert contrasts.resolve_level(runs, "medium", "emulated:pmem") == "tmpfs"
    assert contrasts.resolve_level(runs, "medium", "native") == "disk"
    assert contrasts.resolve_level(runs, "cache_pct", "100") == 100
    with pytest.raises(NotTestable, match="three levels"):
        contrasts.resolve_level(runs, "cache_pct", "second-max")
    with pytest.raises(NotTestable, match="not measured"):
        contrasts.resolve_level(runs, "cache_pct", 50)
    with pytest.raises(NotTestable, match="not numbers"):
        contrasts.resolve_level(runs, "medium", "max")
    with pytest.raises(NotTestable, match="emulates nvme"):
        contrasts.resolve_level(runs, "medium", "emulated:nvme")


def test_dataset_ratio_is_a_value_per_matched_pair_never_a_ci() -> None:
    runs = pd.DataFrame([
        {"engine": e, "block_size": b, "compression": c, "workload": "oltp_read_write",
         "data_physical_bytes": size}
        for (e, b, c), size in {("myrocks", "4k", "none"): 110.0, ("myrocks", "16k", "none"): 100.0,
                                ("myrocks", "4k", "lz4"): 44.0, ("myrocks", "16k", "lz4"): 42.0,
                                ("innodb", "4k", "none"): 500.0, ("innodb", "16k", "none"): 100.0}.items()])
    e = contrasts.dataset_ratio(runs, "block_size", "4k", "16k", {"engine": "myrocks"})
    assert math.isnan(e.ci_lo) and math.isnan(e.ci_hi) and "no CI" in e.basis
    assert [v for _, v in e.values] == pytest.approx([44 / 42, 1.1])  # block 4k/16k pairs by compression
    assert [label for label, _ in e.values] == ["compression lz4", "compression none"]
    assert e.estimate == pytest.approx(math.sqrt(1.1 * 44 / 42)) and e.n == 2
    claim = _claim(metric="data_physical_bytes", band=(1.0, 1.08))  # "up to 8 %": one pair in, one out
    v, why = claims.judge(claim, e)
    assert v == "depends on compression" and why.startswith("per pair (measured, no CI)") and "1.1 disagree" in why
    with pytest.raises(NotTestable):
        contrasts.dataset_ratio(runs, "threads", 1, 4)


def test_steady_share_counts_only_tested_runs() -> None:
    runs = pd.DataFrame({"steady": [True, True, False, None],
                         "steady_reason": [None, None, "drift", "too_short"]})
    e = contrasts.steady_share(runs)
    assert e.estimate == pytest.approx(2 / 3) and e.n == 3
    assert (e.ci_lo, e.ci_hi) == pytest.approx(contrasts.wilson_interval(2, 3))
    assert "3 tested runs: 2 stable, 1 drifting, 0 undetermined; 1 untested" in e.basis
    with pytest.raises(NotTestable, match="too short"):
        contrasts.steady_share(runs.iloc[3:])


def test_steady_share_bounds_the_undetermined_runs() -> None:
    """Undetermined runs (too noisy to tell) are tested: they widen the interval from 'all not stable'
    (lower limit) to 'all stable' (upper limit) instead of leaving the denominator or counting against."""
    runs = pd.DataFrame({"steady": [True] * 8 + [False] + [None] * 3 + [None, "True", "False"],
                         "steady_reason": [""] * 8 + ["drift"] + ["undetermined"] * 3
                         + ["no_intervals", "", "drift"]})  # the last two as read back from a CSV
    e = contrasts.steady_share(runs)
    assert e.n == 14 and e.estimate == pytest.approx(9 / 11)
    assert e.ci_lo == pytest.approx(contrasts.wilson_interval(9, 14)[0])
    assert e.ci_hi == pytest.approx(contrasts.wilson_interval(12, 14)[1])
    assert "9 stable, 2 drifting, 3 undetermined; 1 untested" in e.basis
    with pytest.raises(NotTestable, match="all undetermined"):
        contrasts.steady_share(runs.iloc[9:13])


def test_replication_estimate_takes_the_highest_level_against_the_lowest() -> None:
    table = pd.DataFrame([
        {"metric": "tps_ratio", "level_a": 4, "level_b": 1, "estimate": 1.02, "ci_lo": 0.9, "ci_hi": 1.1,
         "n_a": 5, "n_b": 5},
        {"metric": "tps_ratio", "level_a": 16, "level_b": 1, "estimate": 1.10, "ci_lo": 1.04, "ci_hi": 1.16,
         "n_a": 3, "n_b": 3},
        {"metric": "fc_paused_pct_points", "level_a": 16, "level_b": 1, "estimate": -30.0, "ci_lo": -40.0,
         "ci_hi": -20.0, "n_a": 3, "n_b": 3},
    ])
    e = contrasts.replication_estimate(table, "tps_ratio")
    assert (e.estimate, e.ci_lo, e.ci_hi) == (1.10, 1.04, 1.16) and e.compared == "appliers 16/1"
    with pytest.raises(NotTestable):
        contrasts.replication_estimate(table, "lat_avg_ratio")
    rows = evaluate([Evidence("galera-x", "galera", pd.DataFrame(), {}, table)]).claims
    by = rows.set_index("id")  # the claims read the replication runs (the campaign-level model), not this table
    assert by.loc["applierTps", "verdict"] == "not tested"
    assert "replication study's runs table is missing" in by.loc["applierTps", "reason"]


# ================================================================================ evaluate


def threads_runs() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for cache, threads in itertools.product([25, 100], [1, 4, 16]):
        level = {1: 300.0, 4: 900.0, 16: 910.0}[threads] * (0.6 if cache == 25 else 1.0)
        for r in range(3):
            rows.append({"engine": "innodb", "cache_pct": cache, "threads": threads, "block_size": "16k",
                         "cell_id": f"c{cache}-t{threads}", "run_id": f"c{cache}-t{threads}-r{r}",
                         "tps": level * math.exp(rng.normal(0, 0.01)), "p95_ms": threads * 2.0 * math.exp(rng.normal(0, 0.01)),
                         "steady": True, "steady_reason": None})
    return pd.DataFrame(rows)


def test_evaluate_prefers_the_study_kind_the_claim_names() -> None:
    storage = synthetic_runs(full_factorial(engine=["innodb", "myrocks"], cache_pct=[25, 100],
                                            block_size=["4k", "16k"]))
    ev = [Evidence("matrix", "storage", storage, {}), Evidence("sweep", "threads", threads_runs(), {})]
    t = evaluate(ev, all_claims()).claims.set_index("id")
    assert t.loc["bufferPool", "study"] == "sweep"  # our thread sweep (after seed 001): its study first
    assert t.loc["bufferPool", "verdict"] == "agree"
    assert t.loc["threadsScale", "verdict"] == "agree"  # judged at every cache level (fixed in the claim)
    assert "judged at every level of cache" in t.loc["threadsScale", "basis"]
    assert t.loc["threadsSaturation", "compared"].startswith("threads 16 / 4")
    assert t.loc["threadsSaturation", "verdict"] == "agree"  # 910/900: inside "no more throughput"
    # seed 000's latency claim is judged on its miniature, the scale-out study, which this build lacks
    assert t.loc["saturationLatency", "verdict"] == "not tested"
    assert "needs a scaleout study" in t.loc["saturationLatency", "reason"]
    # seed 003's results are TPC-C: the oltp storage matrix no longer stands in for them
    for cid in ("blockLargeCache", "pmemNoCache", "blockSmallCache", "lzFourTps"):
        assert t.loc[cid, "verdict"] == "not tested" and "needs a tpcc study" in t.loc[cid, "reason"], cid
    assert t.loc["raidChunk", "verdict"] == "not tested" and "MD RAID" in t.loc["raidChunk", "reason"]
    # every tested run settled, but so few runs cannot put a Wilson interval inside [0.9, 1]
    assert t.loc["steadyRuns", "estimate"] == 1.0 and t.loc["steadyRuns", "n"] >= len(threads_runs())
    assert t.loc["steadyRuns", "verdict"] == "inconclusive"
    counts = claims.verdict_counts(t.reset_index())
    assert sum(counts.values()) == len(CLAIMS) + len(FURTHER)


def test_without_studies_everything_is_not_tested_with_a_reason() -> None:
    t = evaluate([]).claims
    assert (t["verdict"] == "not tested").all() and t["reason"].str.len().gt(0).all()


def test_the_claims_cover_every_seed_and_have_macro_safe_ids() -> None:
    assert {c.seed for c in CLAIMS} == {"000", "001", "002", "003", "004"}
    ids = [c.id for c in all_claims()]
    assert len(set(ids)) == len(ids)  # unique across the seeds' claims and our further findings
    for c in all_claims():
        assert re.fullmatch(r"[a-z][A-Za-z]+", c.id), c.id
        assert c.test in ("direction", "about", "within") and c.band[0] < c.band[1]
        assert c.not_tested or c.sources, c.id
    # seed 004 is about NVMe/RAID layout, which this machine lacks: always not tested, with the reason
    assert all(c.not_tested for c in CLAIMS if c.seed == "004")


def test_a_claim_on_a_metric_nobody_measured_is_not_tested() -> None:
    runs = synthetic_runs(full_factorial(engine=["innodb", "myrocks"], cache_pct=[25, 100],
                                         block_size=["4k", "16k"]))
    c = Claim("x", "003", "here", "text", "write_kb_per_txn", (0.4, 1.0), factor="block_size", a="4k", b="16k")
    t = evaluate([Evidence("m", "storage", runs, {})], [c]).claims
    assert t["verdict"].iloc[0] == "not tested" and "KiB written/txn was not measured" in t["reason"].iloc[0]


def test_two_campaigns_are_pooled_and_each_is_judged() -> None:
    """Campaign 2 repeats campaign 1 except that MyRocks' 4k cells at cache 100 run 15 % slower: the block
    claim agrees in campaign 1 (1.125), disagrees in campaign 2 (0.96): their intervals are disjoint (the only
    way under the three-way rule), the heterogeneity test says the campaigns differ, and the pooled interval,
    which carries their difference, takes no side; with campaign 2 like campaign 1, the pooled interval agrees
    and says it pools two campaigns."""
    cells = full_factorial(engine=["innodb", "myrocks"], cache_pct=[25, 100], block_size=["4k", "16k"])
    c = Claim("blockTest", "003", "here", "4k up to 20 % faster", "tps", (1.0, 1.2), factor="block_size",
              a="4k", b="16k", at={"engine": "myrocks", "cache_pct": 100})
    one = synthetic_runs(cells, seed=1).assign(campaign=1)
    two = synthetic_runs(cells, seed=2).assign(campaign=2)
    two["run_id"] += "-camp2"
    slow = (two["engine"] == "myrocks") & (two["cache_pct"] == 100) & (two["block_size"] == "4k")
    flipped = pd.concat([one, two.assign(tps=two["tps"].where(~slow, two["tps"] * 0.85))], ignore_index=True)
    result = evaluate([Evidence("m", "storage", flipped, {})], [c])
    t, per = result.claims.iloc[0], result.of("blockTest").set_index("campaign")
    assert t["campaigns"] == 2 and result.campaign_numbers() == [1, 2]
    assert list(result.campaigns.columns) == list(claims.CAMPAIGN_COLUMNS)
    assert per.loc[1, "verdict"] == "agree" and per.loc[2, "verdict"] == "disagree"
    assert per.loc[1, "estimate"] == pytest.approx(1.125, rel=0.03)
    assert per.loc[2, "estimate"] == pytest.approx(0.956, rel=0.03)
    assert per.loc[2, "ci_hi"] < per.loc[1, "ci_lo"]  # an agree and a disagree: disjoint intervals
    assert t["verdict"] == "inconclusive" and t["heterogeneity"].startswith("campaigns differ (F = ")
    assert claims.flips(result)["flip"].iloc[0] and not claims.flips(result)["contradicted"].iloc[0]
    same = evaluate([Evidence("m", "storage", pd.concat([one, two], ignore_index=True), {})], [c])
    assert same.claims["verdict"].iloc[0] == "agree" and "campaign" in same.claims["basis"].iloc[0]
    assert same.campaign_verdict("blockTest", 1) == same.campaign_verdict("blockTest", 2) == "agree"
    assert not claims.flips(same)["flip"].iloc[0]


def test_opposed_claims_are_agree_in_one_campaign_and_disagree_in_another() -> None:
    from dbmatrix.publish.claims_tex import opposed_claims

    t = pd.DataFrame({"id": ["a", "b", "c", "d"], "seed": ["0"] * 4,
                      "verdict": ["agree", "inconclusive", "inconclusive", "disagree"]})
    per = pd.DataFrame({"id": ["a", "b", "c", "d"] * 2, "campaign": [1] * 4 + [2] * 4,
                        "verdict": ["agree", "agree", "agree", "disagree",
                                    "agree", "disagree", "inconclusive", "disagree"]})
    assert opposed_claims(claims.ClaimVerdicts(t, per)) == ["b"]  # c only lost its decision: a flip, not opposed


def test_opposed_text_says_what_the_pooled_verdict_made_of_opposed_campaigns() -> None:
    from dbmatrix.publish.claims_tex import opposed_text

    t = pd.DataFrame({"id": ["a", "b", "c"], "verdict": ["agree", "disagree", "inconclusive"]})
    one = opposed_text(t, ["a"])
    assert one.startswith("1 agrees in one campaign and disagrees in another; pooled agree: ")
    # under the three-way rule opposite verdicts need disjoint intervals; the pooled interval decides
    assert "disjoint intervals" in one and "the one decision" in one and "precise null" not in one
    null = opposed_text(t, ["b"])
    assert null.startswith("1 agrees in one campaign and disagrees in another; pooled disagree: ")
    assert "consistency checks" in null
    both = opposed_text(t, ["a", "b", "c"])
    assert both.startswith("3 agree in one campaign and disagree in another; 1 pooled agree, 1 pooled disagree: ")
    assert opposed_text(t, ["c"]) == "1 agrees in one campaign and disagrees in another; pooled, it is inconclusive"


def test_steady_runs_are_judged_on_the_unsaturated_runs_only() -> None:
    """steadyRuns says 'unless the system saturates': runs whose host CPUs were busy 90 % of the window or more
    are left out before the share is taken (here 6 saturated drifting runs and 6 unsaturated stable ones: the
    share is 1, not 0.5), and a build without CPU counts cannot tell them apart (not testable)."""
    from dbmatrix.analyse.claims.estimators import estimate

    claim = next(c for c in CLAIMS if c.id == "steadyRuns")
    runs = pd.DataFrame({"run_id": [f"r{i}" for i in range(12)], "host": "h", "window_s": 45.0,
                         "host_cpu_busy_s": [88.0] * 6 + [60.0] * 6,  # 2 CPUs: 98 % and 67 % busy
                         "steady": [False] * 6 + [True] * 6, "steady_reason": [""] * 12})
    e = estimate(claim, Evidence("x", "storage", runs, {}, host_cpus={"h": 2}))
    assert e.estimate == 1.0 and "6 of 12 kept" in e.basis and e.n == 6
    with pytest.raises(contrasts.NotTestable, match="saturated runs cannot be told apart"):
        estimate(claim, Evidence("x", "storage", runs, {}))
