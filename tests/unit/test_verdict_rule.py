"""The verdict rule on constructed intervals and synthetic data with a known answer.

Issue 25: a precise null disagrees with an "up to" claim, an aliased condition is "not identified", a premise
at its threshold is "uncertain", Galera's applier claims are the campaign-level model's estimate, a
difference of shares stays within +-100 points, a claim judged per level counts unique runs.
Issue 38: the three-way regions (each boundary from both sides; an agree and a disagree need disjoint
intervals, a property test), one-sided stand-ins, premises that leave a claim not tested, the combination of
conditions, one family decision (campaigns as consistency checks), and the rule in the registration."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from dbmatrix.analyse import claims, contrasts
from dbmatrix.analyse.claims import (
    RULE,
    VERDICTS,
    Claim,
    Evidence,
    PremiseCheck,
    evaluate,
    judge,
    verdict,
    verdict_class,
)
from dbmatrix.analyse.claims.catalogue import CLAIMS, SATURATED, all_claims
from dbmatrix.analyse.claims.looks import state_of
from dbmatrix.analyse.claims.model import MARGINS, no_effect
from dbmatrix.analyse.claims.premises import check_premise, measured
from dbmatrix.analyse.claims.registration import (
    claim_digest,
    definition,
    first_registration,
    registration_status,
    registry,
    rule_digest,
)
from dbmatrix.analyse.claims.verdicts import (
    PER_PAIR,
    STAND_IN_BOUND,
    Condition,
    Region,
    bounded_outcome,
    claim_verdict,
    claimed_region,
    combine,
    combine_words,
    heterogeneity_text,
    verdict_reason,
)
from dbmatrix.analyse.contrasts import Estimate, NotIdentified, ratio_estimate
from dbmatrix.analyse.kinds.galera import GaleraKind
from dbmatrix.analyse.shares import SHARE_CLIP, share_difference

ROOT = Path(__file__).resolve().parents[2]


def _claim(**kw: object) -> Claim:
    base: dict[str, object] = {"id": "x", "seed": "000", "where": "-", "text": "-", "metric": "tps",
                               "band": (1.0, 1.10)}
    return Claim(**{**base, **kw})  # type: ignore[arg-type]


def _runs(cells: list[dict[str, object]], effect: dict[str, float], *, reps: int = 4, sd: float = 0.01,
          campaigns: int = 1, seed: int = 5) -> pd.DataFrame:
    """Runs whose log tps is the sum of `effect[f"{factor}={level}"]` over the cell's levels, with a
    campaign shift, a replicate block and lognormal noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(1, campaigns + 1):
        shift = rng.normal(0, 0.1)
        for c in cells:
            log = math.log(1000) + shift + sum(effect.get(f"{f}={v}", 0.0) for f, v in c.items())
            cid = "-".join(str(v) for v in c.values())
            for r in range(1, reps + 1):
                rows.append({**c, "cell_id": cid, "run_id": f"{cid}-r{r}-c{k}", "campaign": k, "block": r,
                             "tps": math.exp(log + rng.normal(0, sd))})
    return pd.DataFrame(rows)


def _grid(**levels: list[object]) -> list[dict[str, object]]:
    return [dict(zip(levels, combo)) for combo in itertools.product(*levels.values())]


# ================================================================================ a rule that can say no


def test_a_tight_null_disagrees_with_an_up_to_claim() -> None:
    """"4k blocks give up to 10 % more throughput": runs with no block effect at all, measured precisely,
    give an interval inside the +-5 % margin of no effect, which disagrees (the old rule, whose band
    started at no effect, left it inconclusive forever)."""
    runs = _runs(_grid(block_size=["4k", "16k"], cache_pct=[25, 100]), {}, sd=0.005, campaigns=2)
    claim = _claim(factor="block_size", a="4k", b="16k", at={"cache_pct": "min"})
    t = evaluate([Evidence("null", "storage", runs, {})], [claim]).claims.iloc[0]
    assert no_effect("tps")[0] < t["ci_lo"] and t["ci_hi"] < no_effect("tps")[1]
    assert t["verdict"] == "disagree"
    # the same interval without a margin cannot disagree; an imprecise one stays inconclusive
    assert verdict(t["ci_lo"], t["ci_hi"], claim.band, "direction", 1.0, t["estimate"]) == "inconclusive"
    assert verdict(0.9, 1.15, claim.band, "direction", 1.0, margin=MARGINS["tps"]) == "inconclusive"
    assert verdict(1.06, 1.09, claim.band, "direction", 1.0, margin=MARGINS["tps"]) == "agree"
    # an interval that reaches into the no-effect zone is not an agree, whatever its estimate
    assert verdict(1.02, 1.08, claim.band, "direction", 1.0, margin=MARGINS["tps"]) == "inconclusive"


def test_about_is_two_sided_around_its_value() -> None:
    """"about 11 % more" (tolerance 5 points): +0.5 % no longer agrees, +11 % +-2 % does."""
    claim = _claim(band=(1.06, 1.16), test="about")
    assert judge(claim, Estimate(1.005, 1.001, 1.009, "-", 8))[0] == "disagree"
    assert judge(claim, Estimate(1.11, 1.09, 1.13, "-", 8))[0] == "agree"
    assert judge(claim, Estimate(1.11, 1.01, 1.22, "-", 8))[0] == "inconclusive"


def test_an_unbounded_interval_says_so() -> None:
    v, why = judge(_claim(band=(1.0, math.inf)), Estimate(1.6, 0.7, math.inf, "-", 4))
    assert v == "inconclusive" and why == "unbounded"


# ================================================================================ identified contrasts


def _half_fraction() -> list[dict[str, object]]:
    """2^(3-1) with I = ABC: compression x cache is the block-size column."""
    return [c for c in _grid(compression=["none", "lz4"], cache_pct=[0, 100], block_size=["4k", "16k"])
            if ((c["compression"] == "lz4") + (c["cache_pct"] == 0) + (c["block_size"] == "4k")) % 2 == 0]


def test_an_aliased_condition_is_not_identified() -> None:
    """lz4 at cache 0 % in a half fraction where compression x cache is aliased with block size: the
    verdict names the alias, never an average."""
    runs = _runs(_half_fraction(), {"compression=lz4": math.log(0.9), "block_size=4k": math.log(1.3)},
                 campaigns=2)
    claim = _claim(factor="compression", a="lz4", b="none", at={"cache_pct": "min"}, band=no_effect("tps"),
                   test="within")
    t = evaluate([Evidence("half", "storage", runs, {})], [claim]).claims.iloc[0]
    assert t["verdict"] == "not identified"
    assert "compression x cache is aliased with the block main effect" in t["reason"]
    assert math.isnan(t["estimate"])
    with pytest.raises(NotIdentified, match="compression x block is aliased with the cache main effect"):
        ratio_estimate(runs, "tps", "compression", "lz4", "none")  # averaging over both would mix them in


# ================================================================================ premises with intervals


def test_a_premise_at_its_threshold_is_uncertain() -> None:
    """CPUs busy 88-92 % (mean 90 %) against "at least 90 %": neither met nor not met; the claim is then
    not tested, naming the premise (issue 38: never a verdict under an uncertain premise)."""
    busy = pd.Series([0.88, 0.92, 0.89, 0.91])
    met, unsure, mean, lo, hi = measured(busy, 0.90)
    assert met is None and unsure and lo < 0.90 < hi and mean == pytest.approx(0.90)
    assert measured(busy + 0.05, 0.90)[0] is True and measured(busy - 0.05, 0.90)[0] is False
    runs = pd.DataFrame({"threads": [4, 4, 4, 4, 16, 16, 16, 16], "host": "h", "window_s": 10.0,
                         "host_cpu_busy_s": [x * 20 for x in busy] * 2, "tps": 1.0})
    claim = _claim(factor="threads", a="max", b="min", premises=(SATURATED,))
    check = check_premise(SATURATED, claim, Evidence("t", "threads", runs, {}, host_cpus={"h": 2}))
    assert check.state == "uncertain" and "needs 90 %" in check.value
    v, why = judge(claim, Estimate(1.07, 1.06, 1.09, "-", 8), [check])
    assert v == "not tested" and why.startswith("premise uncertain: CPUs 90 %")
    assert judge(claim, Estimate(1.07, 1.06, 1.09, "-", 8))[0] == "agree"  # the same interval without it
    assert judge(claim, Estimate(1.02, 1.01, 1.03, "-", 8), [PremiseCheck(False, "no")]) == (
        "not tested", "premise not met: no")


# ================================================================================ one estimator family


def _galera_runs(campaigns: int = 2, reps: int = 3, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(1, campaigns + 1):
        shift = rng.normal(0, 0.15)  # a campaign runs everything faster or slower
        for st, tps, paused in ((1, 500.0, 55.0), (4, 750.0, 25.0), (16, 900.0, 12.0)):
            for r in range(1, reps + 1):
                rows.append({"run_id": f"st{st}-r{r}-c{k}", "slave_threads": st, "follower_medium": "slow",
                             "campaign": k, "block": r, "tps": tps * math.exp(shift + rng.normal(0, 0.03)),
                             "lat_avg_ms": 4000 / tps * math.exp(rng.normal(0, 0.03)),
                             "fc_paused_pct": float(np.clip(paused + rng.normal(0, 3), 0, 100))})
    return pd.DataFrame(rows)


def test_galera_pooling_is_the_campaign_level_models() -> None:
    """The applier throughput claim through the Galera kind is exactly ratio_estimate's campaign-level model
    on the same runs, and the model's estimate is the mean over campaigns of the log difference of the two
    cells' means (balanced data); its interval is no t on 1 df."""
    runs = _galera_runs()
    claim = next(c for c in CLAIMS if c.id == "applierTps")
    ev = Evidence("g", "galera", pd.DataFrame(), extra={"replication-runs": runs})
    got = GaleraKind().claim_estimate(claim, ev)
    model = ratio_estimate(runs, "tps", "slave_threads", 16, 1, factors=["slave_threads"])
    assert (got.estimate, got.ci_lo, got.ci_hi) == pytest.approx((model.estimate, model.ci_lo, model.ci_hi))
    logs = runs.assign(y=np.log(runs["tps"])).groupby(["campaign", "slave_threads"])["y"].mean().unstack()
    assert got.estimate == pytest.approx(math.exp(float((logs[16] - logs[1]).mean())))
    # the campaign x cell variance of the study's three applier levels in two campaigns: (3-1)(2-1) = 2 df,
    # and the t takes those df (never the runs')
    assert "campaign x cell within a load (2 df)" in got.basis and got.df == 2 and got.basis.endswith("t on 2 df")
    assert 0 < got.ci_lo < got.estimate < got.ci_hi < math.inf
    table = evaluate([ev], [claim]).claims.iloc[0]
    # n: the unique runs of the two compared cells (the third level lends its variance, not its runs)
    compared = runs[runs["slave_threads"].isin([1, 16])]
    assert table["estimate"] == pytest.approx(got.estimate) and table["n"] == len(compared)


def test_a_difference_of_shares_stays_within_its_range() -> None:
    """Paused 55 % vs 12 %, two campaigns: the MOVER interval of the logit-scale shares lies inside
    -100 .. +100 points and around the true -43; even two runs a side at 0 and 100 % stay bounded."""
    runs = _galera_runs()
    e = share_difference(runs, "fc_paused_pct", "slave_threads", "max", "min")
    assert -100 <= e.ci_lo < -43 < e.ci_hi <= 100 and e.estimate == pytest.approx(-43, abs=4)
    extreme = pd.DataFrame({"slave_threads": [1, 1, 16, 16], "fc_paused_pct": [100.0, 99.0, 0.0, 2.0],
                            "run_id": list("abcd")})
    x = share_difference(extreme, "fc_paused_pct", "slave_threads", "max", "min")
    assert -100 <= x.ci_lo <= x.estimate <= x.ci_hi <= 100
    # one run a side (a later campaign's single run per cell): the point estimate, no interval, no verdict
    one = share_difference(extreme.iloc[[0, 2]], "fc_paused_pct", "slave_threads", "max", "min")
    assert one.estimate == pytest.approx(100 * SHARE_CLIP - 100 * (1 - SHARE_CLIP)) and math.isnan(one.ci_lo)
    assert "no residual df: no interval" in one.basis and judge(_claim(kind="difference", band=(-100.0, -20.0)),
                                                                       one)[0] == "inconclusive"


def test_a_claim_judged_per_level_counts_unique_runs() -> None:
    """Judged at each compression level (fixed in the claim), the n is the unique runs of the compared cells,
    not the sum over levels."""
    cells = _grid(medium=["tmpfs", "disk"], compression=["none", "lz4"], cache_pct=[0, 100])
    runs = _runs(cells, {"medium=tmpfs": math.log(2.0)}, campaigns=2)
    claim = _claim(factor="medium", a="tmpfs", b="disk", at={"cache_pct": "min"}, band=(1.0, 4.0),
                   per=("compression",))
    t = evaluate([Evidence("m", "storage", runs, {})], [claim]).claims.iloc[0]
    assert t["verdict"] == "agree" and "judged at every level of compression" in t["basis"]
    assert t["n"] == runs.loc[runs["cache_pct"] == 0, "run_id"].nunique()  # the compared cells' runs, once each


def test_dataset_sizes_are_judged_per_pair() -> None:
    runs = pd.DataFrame([{"engine": "myrocks", "block_size": b, "compression": c, "data_physical_bytes": s}
                         for (b, c), s in {("4k", "none"): 101.0, ("16k", "none"): 100.0, ("4k", "lz4"): 44.0,
                                           ("16k", "lz4"): 36.0}.items()])
    e = contrasts.dataset_ratio(runs, "block_size", "4k", "16k")
    v, why = judge(_claim(metric="data_physical_bytes", band=(1.0, 1.10)), e)
    assert v == "depends on compression" and verdict_class(v) == "depends"  # "all": the pairs differ
    assert why.startswith(PER_PAIR) and "compression none: 1.01 agree" in why and "compression lz4: 1.22 disagree" in why
    v, why = judge(_claim(metric="data_physical_bytes", band=(1.0, 1.10), combine="largest"), e)
    assert v == "disagree" and why.endswith("judged: the largest value, 1.22")  # the seed's "up to": 1.22


def test_the_method_statement_is_generated_from_the_registry() -> None:
    """The paper's method text quotes the registry: every macro name is LaTeX-safe, the margins are the
    registry's, and changing a margin changes the text."""
    import re

    from dbmatrix.publish.claims_method import method_macros, render_claims_method

    m = method_macros()
    assert all(re.fullmatch(r"claims[A-Za-z]+", k) for k in m)
    assert m["claimsMarginTps"] == f"$\\pm${100 * MARGINS['tps']:g}\\,\\%"
    assert m["claimsNPerLevel"] == str(sum(1 for c in CLAIMS if c.per))
    # every claim judged at several conditions has one combination rule: the counts add up (issue 41)
    combined = sum(int(m[f"claimsNCombine{r}"]) for r in ("All", "Any", "Largest", "Primary"))
    assert combined == sum(1 for c in CLAIMS if not c.not_tested and (c.per or c.metric == "data_physical_bytes"
                                                                       or c.combine != "all"))
    assert m["claimsNPerPair"] == "2" and int(m["claimsNPerLevel"]) + int(m["claimsNPerPair"]) == combined
    text = render_claims_method()
    assert "not identified" in text and "MOVER" in text and "t$ on one degree" in text
    wider = [Claim(**{**c.__dict__, "margin": 0.2}) if c.metric == "tps" else c for c in CLAIMS]
    assert "$\\pm$20\\,\\%" in render_claims_method(wider)


def test_premises_checked_on_the_data() -> None:
    """MyRocks writes need flush + compaction bytes in the window; a doubling needs n and 2n instances, a
    thread grid in steps of at most x1.5 and a CPU per instance; stability needs halves of 5 s."""
    from dbmatrix.analyse.claims.catalogue import CROSSING_GRID as DOUBLING_GRID
    from dbmatrix.analyse.claims.catalogue import ENGINE_WRITES, HALVES

    writes = _claim(factor="compression", a="none", b="lz4", at={"engine": "myrocks"}, premises=(ENGINE_WRITES,))
    wal_only = pd.DataFrame({"engine": "myrocks", "engine_flush_bytes": [0.0, 0.0],
                             "engine_compaction_bytes": [0.0, 0.0]})
    assert check_premise(ENGINE_WRITES, writes, Evidence("t", "tpcc", wal_only, {})).state == "not met"
    flushed = wal_only.assign(engine_flush_bytes=[4096.0, 8192.0])
    assert check_premise(ENGINE_WRITES, writes, Evidence("t", "tpcc", flushed, {})).state == "met"
    assert check_premise(ENGINE_WRITES, writes, Evidence("t", "tpcc", pd.DataFrame({"engine": ["myrocks"]}),
                                                         {})).state == "not checked"
    grid = pd.DataFrame({"instances": [1, 1, 2, 2], "threads": [4, 6, 4, 6], "host": "h"})
    dbl = _claim(metric="scale_p95_doubling", premises=(DOUBLING_GRID,))
    assert check_premise(DOUBLING_GRID, dbl, Evidence("s", "scaleout", grid, {}, host_cpus={"h": 2})).met is True
    assert check_premise(DOUBLING_GRID, dbl, Evidence("s", "scaleout", grid, {}, host_cpus={"h": 1})).met is False
    coarse = grid.assign(threads=[1, 16, 1, 16])
    assert "too coarse" in check_premise(DOUBLING_GRID, dbl, Evidence("s", "scaleout", coarse, {},
                                                                      host_cpus={"h": 2})).value
    short = {"scaleout-stability": pd.DataFrame({"seconds": [5, 6]})}
    assert check_premise(HALVES, dbl, Evidence("s", "scaleout", grid, {}, extra=short)).met is False
    assert check_premise(HALVES, dbl, Evidence("s", "scaleout", grid, {},
                                               extra={"scaleout-stability": pd.DataFrame({"seconds": [60]})})).met


# ================================================================================ issue 38: three-way regions

UP, DOWN = (1.0, 1.10), (0.90, 1.0)  # "up to 10 % more", "up to 10 % less"
Z_LO = 1 / 1.05  # the lower edge of the +-5 % zone of a ratio


@pytest.mark.parametrize("ci,band,test,null,margin,expected", [
    # an increase: A = (1.05, 1.10]; the zone's edge 1.05 is no effect (closed zone), 1.10 is claimed
    ((1.06, 1.09), UP, "direction", 1.0, 0.05, "agree"),
    ((1.0501, 1.10), UP, "direction", 1.0, 0.05, "agree"),  # both ends just inside
    ((1.05, 1.09), UP, "direction", 1.0, 0.05, "inconclusive"),  # L on the zone's edge: meets Z
    ((1.06, 1.1001), UP, "direction", 1.0, 0.05, "inconclusive"),  # U just past the band
    ((1.10, 1.20), UP, "direction", 1.0, 0.05, "inconclusive"),  # touches the band's closed end
    ((1.1001, 1.20), UP, "direction", 1.0, 0.05, "disagree"),  # just past it
    ((0.90, 1.05), UP, "direction", 1.0, 0.05, "disagree"),  # up to the zone's edge: misses the open A
    ((0.90, 1.0501), UP, "direction", 1.0, 0.05, "inconclusive"),  # just into A
    ((0.80, 0.95), UP, "direction", 1.0, 0.05, "disagree"),  # the opposite direction
    # a decrease: A = [0.90, 1/1.05)
    ((0.91, 0.95), DOWN, "direction", 1.0, 0.05, "agree"),
    ((0.90, Z_LO - 1e-6), DOWN, "direction", 1.0, 0.05, "agree"),
    ((0.91, Z_LO), DOWN, "direction", 1.0, 0.05, "inconclusive"),
    ((Z_LO, 1.02), DOWN, "direction", 1.0, 0.05, "disagree"),
    ((0.85, 0.8999), DOWN, "direction", 1.0, 0.05, "disagree"),
    ((0.85, 0.90), DOWN, "direction", 1.0, 0.05, "inconclusive"),
    # about 11 % more, tolerance 5 points: A = [1.06, 1.16] (beyond the zone: the band itself)
    ((1.06, 1.16), (1.06, 1.16), "about", 1.0, 0.05, "agree"),
    ((1.0599, 1.12), (1.06, 1.16), "about", 1.0, 0.05, "inconclusive"),
    ((1.00, 1.0599), (1.06, 1.16), "about", 1.0, 0.05, "disagree"),
    # about 3 % more (1.03 +- 0.05): A = (1.05, 1.08], the part of the band beyond the zone
    ((1.04, 1.05), (0.98, 1.08), "about", 1.0, 0.05, "disagree"),
    ((1.051, 1.07), (0.98, 1.08), "about", 1.0, 0.05, "agree"),
    # within: A = the band, closed
    ((0.95, 1.05), (0.95, 1.05), "within", 1.0, 0.05, "agree"),
    ((0.9499, 1.00), (0.95, 1.05), "within", 1.0, 0.05, "inconclusive"),
    ((0.90, 0.95), (0.95, 1.05), "within", 1.0, 0.05, "inconclusive"),
    ((0.90, 0.9499), (0.95, 1.05), "within", 1.0, 0.05, "disagree"),
    # a difference in points: A = [-100, -5)
    ((-40.0, -20.0), (-100.0, 0.0), "direction", 0.0, 5.0, "agree"),
    ((-6.0, -5.0), (-100.0, 0.0), "direction", 0.0, 5.0, "inconclusive"),
    ((-5.0, 3.0), (-100.0, 0.0), "direction", 0.0, 5.0, "disagree"),
    # infinite bounds decide only a disagree their finite side proves
    ((-math.inf, 1.05), UP, "direction", 1.0, 0.05, "disagree"),
    ((-math.inf, 1.07), UP, "direction", 1.0, 0.05, "inconclusive"),
    ((1.06, math.inf), UP, "direction", 1.0, 0.05, "inconclusive"),
    ((1.11, math.inf), UP, "direction", 1.0, 0.05, "disagree"),
    ((1.5, math.inf), (1.0, math.inf), "direction", 1.0, 0.05, "inconclusive"),
    ((1.5, 3.0), (1.0, math.inf), "direction", 1.0, 0.05, "agree"),
    ((math.nan, math.nan), UP, "direction", 1.0, 0.05, "inconclusive"),
])
def test_three_way_regions_at_each_boundary(ci, band, test, null, margin, expected) -> None:
    assert verdict(*ci, band, test, null, margin=margin) == expected


def test_no_cliff_the_same_estimate_is_never_agree_when_imprecise_and_disagree_when_precise() -> None:
    """Issue 38's lzFourWrites: 1.031 [1.017, 1.044] was "disagree" and 1.043 [1.022, 1.064] "agree"; the
    estimate is no longer read, and the two overlapping intervals cannot take opposite verdicts."""
    band = (1.0, 2.5)
    assert verdict(1.017, 1.044, band, margin=0.05, estimate=1.031) == "disagree"
    assert verdict(1.022, 1.064, band, margin=0.05, estimate=1.043) == "inconclusive"
    assert verdict(1.022, 1.064, band, margin=0.05, estimate=2.4) == "inconclusive"  # the estimate is not read
    assert verdict(1.06, 1.3, (1.0, 1.25), margin=0.05, estimate=1.15) == "inconclusive"  # was agree


def test_an_empty_claimed_region_is_refused() -> None:
    with pytest.raises(ValueError, match="claimed region .* is empty"):
        verdict(1.0, 1.02, (1.0, 1.04), "direction", 1.0, margin=0.05)  # "up to 4 %" inside a 5 % zone
    assert claimed_region((1.0, 1.10), "direction", 1.0, 0.05) == Region(1.05, 1.10, lo_open=True)
    assert claimed_region((0.0, 1.0), "direction", 1.0, 0.0) == Region(0.0, 1.0, hi_open=True)


def test_every_registered_claims_region_is_agreeable() -> None:
    """A claim whose band lies inside its no-effect zone could never agree: none in the registry."""
    for c in all_claims():
        a = claimed_region(c.band, c.test, c.null, c.equivalence)
        assert not a.empty(), (c.id, a)
        inside = (a.lo + a.hi) / 2 if math.isfinite(a.hi) else a.lo + 1.0
        assert claim_verdict(c, inside, inside)[0] == "agree", c.id


_BANDS = hst.sampled_from([((1.0, 1.10), "direction"), ((0.90, 1.0), "direction"), ((1.0, math.inf), "direction"),
                          ((1.06, 1.16), "about"), ((0.95, 1.05), "within"), ((0.0, 1.05), "within"),
                          ((1.0, 4.0), "direction"), ((0.85, 1.0), "within")])
_ENDS = hst.floats(0.5, 5.0) | hst.sampled_from([1.0, 1.05, Z_LO, 1.10, 0.90, 0.95, 4.0, -math.inf, math.inf])


@settings(max_examples=3000, deadline=None, derandomize=True)
@given(_BANDS, hst.sampled_from([0.0, 0.02, 0.05]), hst.sampled_from(["", "upper", "lower"]),
       hst.tuples(_ENDS, _ENDS), hst.tuples(_ENDS, _ENDS))
def test_an_agree_and_a_disagree_need_disjoint_intervals(band_test, margin, bound, one, two) -> None:
    """A and its complement are disjoint: whenever one interval agrees and another disagrees (the same
    claim: two campaigns, two looks), the intervals do not overlap; so a flip between agree and disagree
    with overlapping intervals is impossible by construction."""
    (band, test) = band_test
    i1, i2 = sorted(one), sorted(two)
    v1 = verdict(*i1, band, test, 1.0, margin=margin, bound=bound)
    v2 = verdict(*i2, band, test, 1.0, margin=margin, bound=bound)
    if {v1, v2} == {"agree", "disagree"}:
        assert i1[1] < i2[0] or i2[1] < i1[0], (i1, v1, i2, v2)


def test_a_seeded_sweep_of_random_intervals_never_flips_on_overlap() -> None:
    """The same property over 10^5 random pairs of intervals around an "up to 25 %" claim."""
    rng = np.random.default_rng(38)
    centre = np.exp(rng.normal(0.1, 0.12, (50_000, 2)))
    half = np.exp(rng.normal(-3.5, 0.8, (50_000, 2)))
    lo, hi = centre / np.exp(half), centre * np.exp(half)
    verdicts = np.array([[verdict(lo[i, k], hi[i, k], (1.0, 1.25), margin=0.05) for k in (0, 1)]
                         for i in range(len(lo))])
    opposed = ((verdicts[:, 0] == "agree") & (verdicts[:, 1] == "disagree")) | (
        (verdicts[:, 0] == "disagree") & (verdicts[:, 1] == "agree"))
    overlap = (lo[:, 0] <= hi[:, 1]) & (lo[:, 1] <= hi[:, 0])
    assert opposed.sum() > 100 and not (opposed & overlap).any()


# ================================================================================ one-sided stand-ins


def test_an_upper_bound_stand_in_cannot_contradict_from_above() -> None:
    """PMEM "up to 25 %" faster with the cache, judged on RAM (faster than PMEM): an interval above the
    claimed region is inconclusive and more runs cannot decide it; below it, even the faster stand-in
    misses the claim (disagree); inside it, the real effect is at most U (agree)."""
    band = (1.0, 1.25)
    v, why = verdict_reason(1.51, 1.69, band, margin=0.05, bound="upper")
    assert v == "inconclusive" and why.startswith(STAND_IN_BOUND) and "at most 1.69" in why
    assert state_of(v, why) == "not decided by runs"
    assert verdict(1.51, 1.69, band, margin=0.05) == "disagree"  # without the bound
    assert verdict(1.10, 1.2501, band, margin=0.05, bound="upper") == "inconclusive"  # reaches above A
    v, why = verdict_reason(1.06, 1.20, band, margin=0.05, bound="upper")
    assert (v, why) == ("agree", "as an upper bound: the real medium's effect is at most 1.2")
    assert verdict(0.80, 1.05, band, margin=0.05, bound="upper") == "disagree"  # below A: the real one too
    v, why = verdict_reason(1.00, 1.20, band, margin=0.05, bound="upper")  # meets Z: runs may decide it
    assert v == "inconclusive" and why == "" and state_of(v, why) == "open"
    assert verdict(-math.inf, 1.02, band, margin=0.05, bound="upper") == "disagree"


def test_a_lower_bound_stand_in_is_the_mirror() -> None:
    band = (1.0, 1.25)
    v, why = verdict_reason(0.80, 1.10, band, margin=0.05, bound="lower")
    assert v == "inconclusive" and why.startswith(STAND_IN_BOUND) and "at least 0.8" in why
    assert verdict(1.30, 1.50, band, margin=0.05, bound="lower") == "disagree"
    assert verdict_reason(1.06, 1.20, band, margin=0.05, bound="lower") == (
        "agree", "as a lower bound: the real medium's effect is at least 1.06")
    with pytest.raises(ValueError, match="bound"):
        verdict(1.0, 1.1, band, bound="faster")


def test_the_pmem_claims_are_upper_bounds_judged_on_ramblock() -> None:
    """RAM stands in for PMEM: a ratio with the stand-in on the faster side is an upper bound. pmemLatency
    puts NVMe over the stand-in (its lower latency in the denominator); pmemNoCacheSlight's no cache / cache
    falls as the medium slows (said in its stand-in text)."""
    from dbmatrix.analyse.claims.catalogue import CLAIMS

    by = {c.id: c for c in CLAIMS}
    for cid in ("pmemNoCache", "pmemCache", "pmemTps", "pmemLatency", "pmemNoCacheSlight"):
        c = by[cid]
        assert (c.bound, c.combine, c.primary) == ("upper", "primary", "ramblock"), cid
    assert by["pmemLatency"].a == "native" and by["pmemLatency"].b == "emulated:pmem"
    assert all(by[i].a == "emulated:pmem" for i in ("pmemNoCache", "pmemCache", "pmemTps"))
    assert "upper bound" in by["pmemNoCacheSlight"].stand_in and "falls as the medium slows" in \
        by["pmemNoCacheSlight"].stand_in
    runs = pd.read_csv(ROOT / "data" / "reference" / "tpcc-paper" / "processed" / "runs.csv",
                       usecols=["medium", "emulated"])
    assert set(runs.loc[runs["emulated"].notna(), "medium"]) == {"ramblock", "tmpfs"}  # the primary is a level


# ================================================================================ premises


def test_a_premise_not_met_or_uncertain_leaves_the_claim_not_tested_with_its_estimate() -> None:
    """Cache 0 % against 100 %, premise "the cache holds less than the data" measured on the runs: met,
    the claim is judged; not met (the cache is larger), "not tested" naming the premise, the estimate kept."""
    from dbmatrix.analyse.claims.catalogue import CACHE_BELOW

    cells = _grid(block_size=["4k", "16k"], cache_pct=[0, 100])
    runs = _runs(cells, {"block_size=4k": math.log(1.08)}, sd=0.005).assign(data_logical_bytes=100e6)
    runs["cache_bytes_effective"] = np.where(runs["cache_pct"] == 0, 1024.0, 200e6)
    claim = _claim(factor="block_size", a="4k", b="16k", at={"cache_pct": "min"}, premises=(CACHE_BELOW,))
    t = evaluate([Evidence("p", "storage", runs, {})], [claim]).claims.iloc[0]
    assert t["verdict"] == "agree" and t["premise_met"] == "yes"
    big = runs.assign(cache_bytes_effective=200e6)
    t = evaluate([Evidence("p", "storage", big, {})], [claim]).claims.iloc[0]
    assert t["verdict"] == "not tested" and t["reason"].startswith("premise not met: ")
    assert t["premise_met"] == "no" and 1.05 < t["estimate"] < 1.10 and t["ci_lo"] < t["estimate"] < t["ci_hi"]
    assert "premise not met" not in VERDICTS and "premise uncertain" not in VERDICTS


# ================================================================================ conditions


def _cond(label: str, lo: float, hi: float, claim: Claim) -> Condition:
    f, lv = label.split(" ")
    return Condition(label, {f: lv}, math.sqrt(lo * hi), lo, hi, *claim_verdict(claim, lo, hi))


AGREE, DISAGREE, OPEN = (1.06, 1.09), (1.2, 1.3), (1.0, 1.09)  # against "up to 10 %" (A = (1.05, 1.10])


@pytest.mark.parametrize("rule,intervals,expected", [
    ("all", [AGREE, AGREE], "agree"),
    ("all", [DISAGREE, DISAGREE], "disagree"),
    ("all", [AGREE, DISAGREE], "depends on compression"),
    ("all", [AGREE, DISAGREE, OPEN], "depends on compression"),
    ("all", [AGREE, OPEN], "inconclusive"),
    ("any", [AGREE, OPEN], "agree"),
    ("any", [AGREE, DISAGREE], "agree"),
    ("any", [DISAGREE, DISAGREE], "disagree"),
    ("any", [DISAGREE, OPEN], "inconclusive"),
    ("largest", [AGREE, (1.01, 1.095)], "agree"),  # [1.06, 1.095]
    ("largest", [AGREE, OPEN], "agree"),  # [max L, max U] = [1.06, 1.09]
    ("largest", [AGREE, (1.0, 1.2)], "inconclusive"),  # [1.06, 1.2]
    ("largest", [AGREE, DISAGREE], "disagree"),  # the largest effect is beyond "up to 10 %"
    ("largest", [AGREE, (math.nan, math.nan)], "inconclusive"),  # no interval: the largest is unbounded
    ("largest", [(1.12, 1.2), (math.nan, math.nan)], "disagree"),  # ... but at least 1.12
])
def test_conditions_combine_by_the_registered_rule(rule, intervals, expected) -> None:
    claim = _claim(combine=rule, per=("compression",))
    conds = [_cond(f"compression {lv}", lo, hi, claim) for lv, (lo, hi) in zip(("none", "lz4", "zstd"), intervals)]
    v, why, judged = combine(claim, conds, "compression")
    assert v == expected
    if v.startswith("depends on"):
        assert verdict_class(v) == "depends" and "compression none agree" in why and "compression lz4 disagree" in why
    assert (judged is not None) == (rule == "largest")


def test_an_inconclusive_all_claim_says_which_outcome_its_decided_conditions_rule_out() -> None:
    """The registered rule leaves "all" inconclusive while a condition is open; the reason says which outcome
    the decided ones already rule out, and the open ones stay open (more runs may decide them)."""
    claim = _claim(combine="all", per=("compression",))
    conds = [_cond("compression none", *OPEN, claim), _cond("compression lz4", *DISAGREE, claim)]
    v, why, _ = combine(claim, conds, "compression")
    assert (v, bounded_outcome(why), state_of(v, why)) == ("inconclusive", "cannot agree", "open")
    assert why == ("cannot agree: disagree at compression lz4; compression none open, between disagree and "
                   "depends on compression")
    v, why, _ = combine(claim, [conds[0], _cond("compression lz4", *AGREE, claim)], "compression")
    assert bounded_outcome(why) == "cannot disagree" and "between agree and depends on compression" in why
    for rule, pair in (("all", [OPEN, OPEN]), ("any", [OPEN, DISAGREE])):  # nothing ruled out / not "all"
        c = _claim(combine=rule, per=("compression",))
        v, why, _ = combine(c, [_cond(f"compression {x}", *iv, c) for x, iv in zip(("none", "lz4"), pair)],
                            "compression")
        assert v == "inconclusive" and bounded_outcome(why) == ""


def test_a_decrease_takes_the_smallest_interval() -> None:
    claim = _claim(band=(0.5, 1.0), combine="largest", per=("medium",))  # "cuts up to 2x"
    conds = [_cond("medium a", 0.60, 0.70, claim), _cond("medium b", 0.40, 0.45, claim)]
    v, why, judged = combine(claim, conds, "medium")
    assert judged == (pytest.approx(math.sqrt(0.4 * 0.45)), 0.40, 0.45) and v == "disagree"
    assert "the smallest of 2 conditions (medium b)" in why


def test_the_primary_condition_decides_and_the_others_are_sensitivity() -> None:
    claim = _claim(band=(1.0, 4.0), combine="primary", primary="ramblock", per=("medium",), bound="upper")
    conds = [_cond("medium tmpfs", 4.0, 4.5, claim), _cond("medium ramblock", 1.9, 2.1, claim)]
    v, why, judged = combine(claim, conds, "medium")
    assert v == "agree" and judged == (pytest.approx(math.sqrt(1.9 * 2.1)), 1.9, 2.1)
    assert why == "as an upper bound: the real medium's effect is at most 2.1; sensitivity: medium tmpfs inconclusive"
    v, why, _ = combine(claim, [_cond("medium ramblock", 4.2, 4.4, claim), conds[1]][:1], "medium")
    assert v == "inconclusive" and state_of(v, why) == "not decided by runs"
    v, why, _ = combine(claim, conds[:1], "medium")
    assert v == "not tested" and "primary condition (ramblock)" in why
    assert combine_words(claim, ["tmpfs"]) == "primary: medium ramblock; tmpfs as sensitivity"
    assert [combine_words(_claim(combine=r)) for r in ("all", "any", "largest")] == [
        "all conditions", "any condition", "the largest condition"]
    with pytest.raises(ValueError, match="primary"):
        _claim(combine="primary")  # a primary rule names its level
    with pytest.raises(ValueError, match="combine"):
        _claim(combine="most")


def test_the_registry_says_how_each_claims_conditions_combine() -> None:
    by = {c.id: c for c in all_claims()}
    assert {i: by[i].combine for i in ("blockSmallCache", "blockSmallCacheLatency", "blockLargeCache", "blockSize",
                                       "lzFourSize", "lzFourReads", "bufferPool", "threadsScale")} == {
        "blockSmallCache": "all", "blockSmallCacheLatency": "all", "blockLargeCache": "all", "blockSize": "largest",
        "lzFourSize": "all", "lzFourReads": "largest", "bufferPool": "all", "threadsScale": "all"}
    assert all(c.combine == "primary" for c in all_claims() if c.bound)


def _tpcc_runs(tmpfs: float, ramblock: float, campaigns: int = 1, sd: float = 0.01) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    speed = {"disk": 1.0, "tmpfs": tmpfs, "ramblock": ramblock}
    emulated = {"disk": None, "tmpfs": "pmem-fsdax", "ramblock": "pmem-sector"}
    rows = []
    for k in range(1, campaigns + 1):
        for c in (0, 8.5):
            for medium, x in speed.items():
                for r in range(3):
                    tps = 100.0 * x * math.exp(rng.normal(0, sd))
                    rows.append({"engine": "myrocks", "cache_pct": c, "block_size": "16k", "compression": "none",
                                 "medium": medium, "emulated": emulated[medium], "cell_id": f"{c}-{medium}",
                                 "run_id": f"{c}-{medium}-{r}-c{k}", "campaign": k, "block": r + 1, "tps": tps,
                                 "cache_bytes_effective": 1024.0 if c == 0 else 10e6, "data_logical_bytes": 100e6})
    return pd.DataFrame(rows)


def test_pmem_is_judged_on_ramblock_with_tmpfs_as_sensitivity() -> None:
    """Issue 38: tmpfs 4.25x, ramblock 2.0x against "up to 4x": the primary (ramblock) agrees as an upper
    bound; tmpfs, beyond 4x, cannot contradict a claim about slower PMEM. The table says how it combined and
    shows the primary's interval."""
    from dbmatrix.analyse.claims.catalogue import CLAIMS

    claim = next(c for c in CLAIMS if c.id == "pmemNoCache")
    result = evaluate([Evidence("tpcc-paper", "tpcc", _tpcc_runs(4.25, 2.0), {})], [claim])
    t = result.claims.iloc[0]
    assert t["verdict"] == "agree" and t["combine"] == "primary: medium ramblock; tmpfs as sensitivity"
    assert "sensitivity: medium tmpfs inconclusive" in t["reason"] and "at most" in t["reason"]
    assert t["ci_lo"] < 2.0 < t["ci_hi"] < 2.2
    levels = result.levels_of("pmemNoCache").set_index("level")["verdict"]
    assert levels["medium tmpfs"] == "inconclusive" and levels["medium ramblock"] == "agree"


def test_conditions_that_differ_say_depends_on_the_factor() -> None:
    """4k blocks 8 % faster without compression, 30 % faster with lz4, against "up to 10 %" for both:
    each condition is decided, the claim holds at one and not at the other."""
    cells = _grid(block_size=["4k", "16k"], compression=["none", "lz4"])
    runs = _runs(cells, {"block_size=4k": math.log(1.08)}, sd=0.003)
    lz4_4k = (runs["block_size"] == "4k") & (runs["compression"] == "lz4")
    runs.loc[lz4_4k, "tps"] *= 1.30 / 1.08
    claim = _claim(factor="block_size", a="4k", b="16k", per=("compression",), combine="all")
    result = evaluate([Evidence("b", "storage", runs, {})], [claim])
    t = result.claims.iloc[0]
    assert t["verdict"] == "depends on compression" and t["combine"] == "all conditions"
    assert "compression none agree" in t["reason"] and "compression lz4 disagree" in t["reason"]
    assert math.isnan(t["estimate"])  # "all": no one interval stands for the claim
    assert claims.verdict_counts(result.claims)["depends"] == 1
    largest = evaluate([Evidence("b", "storage", runs, {})], [replace(claim, combine="largest")]).claims.iloc[0]
    assert largest["verdict"] == "disagree" and largest["estimate"] == pytest.approx(1.30, rel=0.02)


# ================================================================================ one family decision


def test_the_pooled_interval_decides_and_campaigns_are_consistency_checks() -> None:
    """Two campaigns, 4k 7 % faster in both: the pooled interval agrees, whatever one campaign's own
    verdict (no veto); the table carries the level and the campaigns' heterogeneity test."""
    cells = _grid(block_size=["4k", "16k"], cache_pct=[0, 100])
    runs = _runs(cells, {"block_size=4k": math.log(1.075)}, sd=0.01, campaigns=2, reps=6)
    claim = _claim(factor="block_size", a="4k", b="16k", at={"cache_pct": "min"})
    result = evaluate([Evidence("m", "storage", runs, {})], [claim])
    t = result.claims.iloc[0]
    assert t["verdict"] == "agree" and "campaigns differ" not in str(t["reason"])
    assert t["confidence"] == 0.95 and t["heterogeneity"].startswith(("campaigns consistent (F = ", "campaigns differ"))
    assert list(result.claims.columns[-3:]) == ["heterogeneity", "confidence", "combine"]
    looked = evaluate([Evidence("m", "storage", runs, {})], [claim], confidence=0.9736).claims.iloc[0]
    assert looked["confidence"] == pytest.approx(0.9736)
    one = evaluate([Evidence("m", "storage", runs[runs["campaign"] == 1], {})], [claim]).claims.iloc[0]
    assert one["heterogeneity"] == ""  # one campaign: nothing to test


def test_heterogeneity_in_words() -> None:
    assert heterogeneity_text((0.81, 1, 20, 0.38)) == "campaigns consistent (F = 0.81 on 1 and 20 df, p = 0.38)"
    assert heterogeneity_text((9.6, 1, 20, 0.003)) == "campaigns differ (F = 9.6 on 1 and 20 df, p = 0.003)"
    assert heterogeneity_text((40.0, 1, 96, 1e-8)).endswith("p < 0.001)")
    assert heterogeneity_text(None) == "" and heterogeneity_text((math.nan, 1, 2, math.nan)) == ""


def test_judge_reads_no_campaign_estimates() -> None:
    """The old rule's "campaigns differ" veto is gone: judge takes one estimate (and its premises)."""
    import inspect

    assert list(inspect.signature(judge).parameters) == ["claim", "est", "premises"]
    assert judge(_claim(band=(1.0, 1.25)), Estimate(1.12, 1.06, 1.20, "-", 6)) == ("agree", "")


# ================================================================================ registration


def test_the_rule_margins_and_combination_enter_the_registration() -> None:
    c = next(c for c in all_claims() if c.id == "pmemCache")
    d = definition(c)
    assert d["equivalence"] == c.equivalence and d["bound"] == "upper" and d["combine"] == "primary"
    assert d["primary"] == "ramblock"
    for change in ({"bound": ""}, {"combine": "all", "primary": None}, {"margin": 0.10}):
        assert claim_digest(replace(c, **change)) != claim_digest(c), change
    reg = registry([c], "code")
    assert reg["rule"] == rule_digest() and set(reg) == {"claims", "rule", "registry", "verdict_code"}
    assert registration_status(c, reg) == "fixed before data"
    assert registration_status(c, {**reg, "rule": "another"}) == "revised after data"
    old = {k: v for k, v in reg.items() if k != "rule"}  # a record from before the rule was registered
    assert registration_status(c, old) == "fixed before data"
    assert RULE["name"] == "three-way regions" and RULE["confidence"] == 0.95
    assert "tps_steady" in RULE["steady_state"] and set(RULE["combination"]) == {"all", "any", "largest", "primary"}


def test_a_metrics_margin_is_registered_through_the_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    c = next(c for c in all_claims() if c.id == "lzFourTps")
    before = claim_digest(c)
    monkeypatch.setitem(MARGINS, "tps", 0.07)
    assert claim_digest(c) != before


def test_claims_judged_on_the_committed_reference_are_revised_after_data() -> None:
    """The reference's campaigns registered the claims under the old rule (their records have no rule):
    every claim they judge is "revised after data" now, and nothing fails on the missing key."""
    import json

    records = json.loads((ROOT / "data" / "reference" / "tpcc-paper" / "processed" / "campaigns.json").read_text())
    reg = first_registration(records)
    assert reg is not None and "rule" not in reg
    tested = [c for c in all_claims() if "tpcc" in c.sources and not c.not_tested]
    added = {c.id for c in tested if registration_status(c, reg) == "added after data"}
    assert added == {"pmemIowait", "indexCacheCollapse", "indexCacheControl", "indexCacheNoCache"}  # registered after those campaigns (issue 40), judged on their counters
    assert {registration_status(c, reg) for c in tested if c.id not in added} == {"revised after data"}


def test_studies_that_could_not_test_a_claim_for_one_reason_are_named_together() -> None:
    from dbmatrix.analyse.claims.table import _merged

    reasons = ["scaleout-paper: needs 8 and 16 instances; measured: 1, 2", "tpcc-paper: no instances column",
               "scalegrid-paper: needs 8 and 16 instances; measured: 1, 2"]
    assert _merged(reasons) == ["scaleout-paper, scalegrid-paper: needs 8 and 16 instances; measured: 1, 2",
                                "tpcc-paper: no instances column"]
    assert _merged(["odd"]) == ["odd"]
