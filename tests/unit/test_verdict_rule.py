"""Issue 25's acceptance on synthetic data with a known answer: a precise null disagrees with an "up to"
claim, an aliased condition is "not identified", a premise at its threshold is "uncertain", Galera's
applier claims are the campaign-level model's estimate (no t on 1 df), a difference of shares stays within
+-100 points, and a claim judged per level counts unique runs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse import contrasts
from dbmatrix.analyse.claims import Claim, Evidence, PremiseCheck, evaluate, judge, verdict
from dbmatrix.analyse.claims.catalogue import CLAIMS, SATURATED
from dbmatrix.analyse.claims.model import MARGINS, no_effect
from dbmatrix.analyse.claims.premises import check_premise, measured
from dbmatrix.analyse.contrasts import Estimate, NotIdentified, ratio_estimate
from dbmatrix.analyse.kinds.galera import GaleraKind
from dbmatrix.analyse.shares import share_difference


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
    assert verdict(1.02, 1.08, claim.band, "direction", 1.0, margin=MARGINS["tps"]) == "agree"


def test_about_is_two_sided_around_its_value() -> None:
    """"about 11 % more" (tolerance 5 points): +0.5 % no longer agrees, +11 % +-2 % does."""
    claim = _claim(band=(1.06, 1.16), test="about")
    assert judge(claim, Estimate(1.005, 1.001, 1.009, "-", 8), [])[0] == "disagree"
    assert judge(claim, Estimate(1.11, 1.09, 1.13, "-", 8), [])[0] == "agree"
    assert judge(claim, Estimate(1.11, 1.01, 1.22, "-", 8), [])[0] == "inconclusive"


def test_an_unbounded_interval_says_so() -> None:
    v, why = judge(_claim(band=(1.0, math.inf)), Estimate(1.6, 0.7, math.inf, "-", 4), [])
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
    """CPUs busy 88-92 % (mean 90 %) against "at least 90 %": neither met nor not met; a verdict under it
    says so."""
    busy = pd.Series([0.88, 0.92, 0.89, 0.91])
    met, unsure, mean, lo, hi = measured(busy, 0.90)
    assert met is None and unsure and lo < 0.90 < hi and mean == pytest.approx(0.90)
    assert measured(busy + 0.05, 0.90)[0] is True and measured(busy - 0.05, 0.90)[0] is False
    runs = pd.DataFrame({"threads": [4, 4, 4, 4, 16, 16, 16, 16], "host": "h", "window_s": 10.0,
                         "host_cpu_busy_s": [x * 20 for x in busy] * 2, "tps": 1.0})
    claim = _claim(factor="threads", a="max", b="min", premises=(SATURATED,))
    check = check_premise(SATURATED, claim, Evidence("t", "threads", runs, {}, host_cpus={"h": 2}))
    assert check.state == "uncertain" and "needs 90 %" in check.value
    v, why = judge(claim, Estimate(1.06, 1.03, 1.09, "-", 8), [], [check])
    assert v == "agree" and why.startswith("premise uncertain: CPUs 90 %")
    assert judge(claim, Estimate(1.02, 1.01, 1.03, "-", 8), [], [PremiseCheck(False, "no")])[0] == "premise not met"


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
    assert "t on 1 df" not in got.basis and "df from the runs' residual (two campaigns)" in got.basis
    assert 0 < got.ci_lo < got.estimate < got.ci_hi < math.inf
    table = evaluate([ev], [claim]).claims.iloc[0]
    # n: the unique runs of the model (its campaign x cell residual borrows the third applier level's cells)
    assert table["estimate"] == pytest.approx(got.estimate) and table["n"] == len(runs)


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


def test_a_claim_judged_per_level_counts_unique_runs() -> None:
    """Judged at each compression level (fixed in the claim), the n is the study's unique runs, not the sum
    over levels."""
    cells = _grid(medium=["tmpfs", "disk"], compression=["none", "lz4"], cache_pct=[0, 100])
    runs = _runs(cells, {"medium=tmpfs": math.log(2.0)}, campaigns=2)
    claim = _claim(factor="medium", a="tmpfs", b="disk", at={"cache_pct": "min"}, band=(1.0, 4.0),
                   per=("compression",))
    t = evaluate([Evidence("m", "storage", runs, {})], [claim]).claims.iloc[0]
    assert t["verdict"] == "agree" and "judged at every level of compression" in t["basis"]
    assert t["n"] == runs["run_id"].nunique()


def test_dataset_sizes_are_judged_per_pair() -> None:
    runs = pd.DataFrame([{"engine": "myrocks", "block_size": b, "compression": c, "data_physical_bytes": s}
                         for (b, c), s in {("4k", "none"): 101.0, ("16k", "none"): 100.0, ("4k", "lz4"): 44.0,
                                           ("16k", "lz4"): 36.0}.items()])
    e = contrasts.dataset_ratio(runs, "block_size", "4k", "16k")
    v, why = judge(_claim(metric="data_physical_bytes", band=(1.0, 1.10)), e, [])
    assert v == "inconclusive" and "compression none: 1.01 agree" in why and "compression lz4: 1.22 disagree" in why


def test_the_method_statement_is_generated_from_the_registry() -> None:
    """The paper's method text quotes the registry: every macro name is LaTeX-safe, the margins are the
    registry's, and changing a margin changes the text."""
    import re

    from dbmatrix.publish.claims_method import method_macros, render_claims_method

    m = method_macros()
    assert all(re.fullmatch(r"claims[A-Za-z]+", k) for k in m)
    assert m["claimsMarginTps"] == f"$\\pm${100 * MARGINS['tps']:g}\\,\\%"
    assert m["claimsNPerLevel"] == str(sum(1 for c in CLAIMS if c.per))
    text = render_claims_method()
    assert "not identified" in text and "MOVER" in text and "t$ on one degree" in text
    wider = [Claim(**{**c.__dict__, "margin": 0.2}) if c.metric == "tps" else c for c in CLAIMS]
    assert "$\\pm$20\\,\\%" in render_claims_method(wider)


def test_premises_checked_on_the_data() -> None:
    """MyRocks writes need flush + compaction bytes in the window; a doubling needs n and 2n instances, a
    thread grid that resolves x2 and a CPU per instance; stability needs halves of 5 s."""
    from dbmatrix.analyse.claims.catalogue import DOUBLING_GRID, ENGINE_WRITES, HALVES

    writes = _claim(factor="compression", a="none", b="lz4", at={"engine": "myrocks"}, premises=(ENGINE_WRITES,))
    wal_only = pd.DataFrame({"engine": "myrocks", "engine_flush_bytes": [0.0, 0.0],
                             "engine_compaction_bytes": [0.0, 0.0]})
    assert check_premise(ENGINE_WRITES, writes, Evidence("t", "tpcc", wal_only, {})).state == "not met"
    flushed = wal_only.assign(engine_flush_bytes=[4096.0, 8192.0])
    assert check_premise(ENGINE_WRITES, writes, Evidence("t", "tpcc", flushed, {})).state == "met"
    assert check_premise(ENGINE_WRITES, writes, Evidence("t", "tpcc", pd.DataFrame({"engine": ["myrocks"]}),
                                                         {})).state == "not checked"
    grid = pd.DataFrame({"instances": [1, 1, 2, 2], "threads": [4, 8, 4, 8], "host": "h"})
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
