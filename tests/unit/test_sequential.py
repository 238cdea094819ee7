"""The stopping rule of ``dbmatrix run --until-decided`` (analyse.stats.sequential), the levels it threads
through the estimates, the block selection (analyse.claims.looks) and the loop (decide) with
injected evidence."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from dbmatrix.analyse.claims import Claim, Evidence, evaluate, verdict
from dbmatrix.analyse.claims.looks import ClaimLook, cells_to_add, claim_cells, judge_look, state_of, study_claims
from dbmatrix.analyse.contrasts import ratio_estimate
from dbmatrix.analyse.stats import welch_log_ratio
from dbmatrix.analyse.stats.sequential import (
    ALPHA,
    SPENDING,
    Schedule,
    final_look,
    increments,
    max_looks,
    projected_blocks,
    spent,
)
from dbmatrix.decide import UntilDecided, block_runs, look_line, parse_duration, rounds_option
from dbmatrix.hosts.inventory import load_inventory
from dbmatrix.spec.experiment import SpecError, load_spec
from dbmatrix.store import ResultStore
from dbmatrix.study import Study

SMOKE = Path(__file__).resolve().parents[2] / "specs" / "smoke.yaml"
# test-only claims on the smoke spec (innodb, buffer pool 25 % vs 100 %): judged by their properties, not ids
MORE_CACHE = Claim("testMoreCache", "999", "test", "a larger buffer pool gives more throughput", "tps", (1.0, 10.0),
                   factor="cache_pct", a="max", b="min", at={"engine": "innodb"}, sources=("storage",))
ELSEWHERE = Claim("testMyrocks", "999", "test", "a MyRocks claim", "tps", (1.0, 10.0), factor="cache_pct",
                  a="max", b="min", at={"engine": "myrocks"}, sources=("storage",))
OTHER_KIND = Claim("testGalera", "999", "test", "another kind's claim", "tps", (1.0, 2.0), sources=("galera",))


# ------------------------------------------------------------------------------------------ the rule

@pytest.mark.parametrize("spending", SPENDING)
def test_spending_sums_to_alpha_and_grows(spending: str) -> None:
    ts = [k / 10 for k in range(1, 11)]
    inc = increments(ts, ALPHA, spending)
    assert math.isclose(sum(inc), ALPHA, rel_tol=1e-12)
    assert all(a > 0 for a in inc)
    assert spent(0, ALPHA, spending) == 0 and math.isclose(spent(1, ALPHA, spending), ALPHA)
    s = Schedule(8, 3, spending=spending)
    assert math.isclose(sum(s.alpha_at(k) for k in range(1, 9)), ALPHA, rel_tol=1e-12)
    assert all(0.95 < s.confidence(k) < 1 for k in range(1, 9))


def test_known_values_of_the_spending_functions() -> None:
    # Pocock type at t = 1/2: 0.05 ln(1 + (e - 1)/2); O'Brien-Fleming type: 2 - 2 Phi(1.96 / sqrt(0.5)) = 0.0056
    assert math.isclose(spent(0.5, 0.05, "pocock"), 0.05 * math.log(1 + (math.e - 1) / 2))
    assert math.isclose(spent(0.5, 0.05, "obrien-fleming"), 2 - 2 * sps.norm.cdf(1.959964 / math.sqrt(0.5)),
                        rel_tol=1e-5)
    assert round(spent(0.5, 0.05, "obrien-fleming"), 4) == 0.0056
    assert Schedule(1, 3).confidence(1) == pytest.approx(0.95)  # one look: the plain interval


def test_rule_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="spending: 'linear'; allowed: obrien-fleming, pocock"):
        spent(0.5, 0.05, "linear")
    with pytest.raises(ValueError, match="increasing"):
        increments([0.5, 0.5])
    with pytest.raises(ValueError, match="look: 4; allowed: 1 .. 3"):
        Schedule(3, 2).confidence(4)
    with pytest.raises(ValueError, match="looks: 0"):
        Schedule(0, 2)


def test_max_looks_from_the_budget() -> None:
    assert max_looks(3600, 600, 300) == 11  # the first look and 10 blocks of 5 minutes
    assert max_looks(3600, 600, 30) == 12  # capped
    assert max_looks(600, 700, 60) == 1  # no time left: one look, the plain interval


def test_interval_at_a_look_is_wider_than_the_naive_one() -> None:
    rng = np.random.default_rng(3)
    a, b = np.exp(rng.normal(0.1, 0.05, 5)), np.exp(rng.normal(0.0, 0.05, 5))
    s = Schedule(6, 3)
    naive = welch_log_ratio(a, b)
    for k in range(1, 7):
        w = welch_log_ratio(a, b, s.confidence(k))
        assert w["ratio"] == naive["ratio"]
        assert w["ci_lo"] < naive["ci_lo"] and w["ci_hi"] > naive["ci_hi"]


def _runs(ratio: float, blocks: int, sd: float = 0.03, seed: int = 1, cells: dict[str, int] | None = None
          ) -> pd.DataFrame:
    """Smoke-like runs: innodb at buffer pool 25 and 100 (% of the data), one run per cell per block."""
    rng = np.random.default_rng(seed)
    rows = []
    for cache, cid in ((25, "innodb-c25-b16k-none-disk-t2"), (100, "innodb-c100-b16k-none-disk-t2")):
        n = (cells or {}).get(cid, blocks)
        for r in range(1, n + 1):
            rows.append({"engine": "innodb", "cache_pct": cache, "block_size": "16k", "compression": "none",
                         "medium": "disk", "threads": 2, "cell_id": cid, "run_id": f"{cid}-r{r}", "block": r,
                         "repetition": r, "campaign": 1, "rate_fraction": 0,
                         "tps": 1000 * (ratio if cache == 100 else 1.0) * math.exp(rng.normal(0, sd))})
    return pd.DataFrame(rows)


def test_confidence_threads_through_the_estimates_and_defaults_to_95() -> None:
    runs = _runs(1.3, 4)
    plain = ratio_estimate(runs, "tps", "cache_pct", 100, 25)
    same = ratio_estimate(runs, "tps", "cache_pct", 100, 25, confidence=0.95)
    wide = ratio_estimate(runs, "tps", "cache_pct", 100, 25, confidence=0.999)
    assert (plain.ci_lo, plain.ci_hi) == (same.ci_lo, same.ci_hi)
    assert wide.estimate == plain.estimate and wide.ci_lo < plain.ci_lo and wide.ci_hi > plain.ci_hi
    ev = Evidence("smoke", "storage", runs)
    at95 = evaluate([ev], [MORE_CACHE]).claims.iloc[0]
    at999 = evaluate([ev], [MORE_CACHE], confidence=0.999).claims.iloc[0]
    assert at999["ci_lo"] < at95["ci_lo"] and "99.90 % interval" in at999["basis"]
    assert "interval (a look)" not in at95["basis"]


def test_a_study_run_until_decided_is_judged_at_its_final_look() -> None:
    runs = _runs(1.3, 5)
    rec = {"campaign": 1, "until_decided": {"schedule": Schedule(6, 3).as_dict(), "last_look": 3}}
    assert final_look([]) is None and final_look([{"campaign": 1}]) is None
    level, note = final_look([rec]) or (0, "")
    assert level == pytest.approx(Schedule(6, 3).confidence(3))
    assert note.startswith("repeated 95 % CI, obrien-fleming alpha spending over 6 looks")
    plain = evaluate([Evidence("smoke", "storage", runs)], [MORE_CACHE]).claims.iloc[0]
    seq = evaluate([Evidence("smoke", "storage", runs, campaign_records=[rec])], [MORE_CACHE]).claims.iloc[0]
    assert seq["estimate"] == plain["estimate"] and seq["ci_lo"] < plain["ci_lo"]
    assert "alpha spending over 6 looks, union bound (look 3: 99.24 % interval)" in seq["basis"] and "alpha spending" not in plain["basis"]


def _simulate(levels: list[float], ratio: float, sims: int, first: int = 3, seed: int = 7) -> tuple[float, float]:
    """Campaigns stopped at the first look whose interval decides the claim 'more than +5 %' (direction, band
    1.0-10): the share with some look's interval excluding the true ratio up to the stop, and the share
    decided agree."""
    rng = np.random.default_rng(seed)
    n_max = first + len(levels) - 1
    a = rng.normal(math.log(ratio), 0.05, (sims, n_max))
    b = rng.normal(0.0, 0.05, (sims, n_max))
    missed = agreed = 0
    for i in range(sims):
        for k, level in enumerate(levels):
            w = welch_log_ratio(np.exp(a[i, :first + k]), np.exp(b[i, :first + k]), level)
            if w["ci_lo"] > ratio or w["ci_hi"] < ratio:
                missed += 1
                break
            v = verdict(w["ci_lo"], w["ci_hi"], (1.0, 10.0), "direction", 1.0, w["ratio"], 0.05)
            if v in ("agree", "disagree"):
                agreed += v == "agree"
                break
    return missed / sims, agreed / sims


def test_seeded_simulation_null_not_wrongly_decided_beyond_alpha_and_effect_decided() -> None:
    looks = 8
    seq = [Schedule(looks, 3).confidence(k) for k in range(1, looks + 1)]
    naive_miss, _ = _simulate([0.95] * looks, 1.0, 600)
    seq_miss, seq_agree_null = _simulate(seq, 1.0, 600)
    assert naive_miss > 0.08  # optional stopping with plain 95 % intervals: inflated
    assert seq_miss <= ALPHA and seq_agree_null <= ALPHA / 2
    _, power = _simulate(seq, 1.25, 300)
    assert power >= 0.9


def test_projected_blocks_known_answer() -> None:
    # estimate 1.2, interval [1.2/1.2, 1.2*1.2] after 4 blocks: decided once the lower end passes 1.05, i.e.
    # ln 1.2 * sqrt(4 / (4 + b)) < ln(1.2 / 1.05): b > 4 * (ln 1.2 / ln(1.2/1.05))^2 - 4 = 15.0 -> 16
    def decided(lo: float, hi: float) -> bool:
        return lo > 1.05

    need = 4 * (math.log(1.2) / math.log(1.2 / 1.05)) ** 2 - 4
    assert projected_blocks(1.2, 1.0, 1.44, 4, decided) == math.floor(need) + 1
    assert projected_blocks(1.2, 1.1, 1.3, 4, decided) == 0
    assert projected_blocks(1.0, 0.9, 1.1, 4, decided) is None  # on the edge: never
    assert projected_blocks(1.2, math.nan, 1.3, 4, decided) is None


# ------------------------------------------------------------------------------------------ budget and blocks

def test_parse_duration_forms_and_errors() -> None:
    assert parse_duration("90m") == 5400 and parse_duration("2h") == 7200 and parse_duration("7200s") == 7200
    assert parse_duration("1h30m") == 5400 and parse_duration("45") == 45
    for bad in ("90x", "", "m", "-5m", "0s", "2 hours"):
        with pytest.raises(ValueError, match="budget: .* allowed: a number with h, m or s"):
            parse_duration(bad)
    with pytest.raises(SpecError, match="budget: --budget needs --until-decided"):
        rounds_option(False, "2h")
    with pytest.raises(SpecError, match="budget: '2y' is not a duration"):
        rounds_option(True, "2y")
    assert rounds_option(False, None) is None and callable(rounds_option(True, None))


def test_until_decided_is_refused_where_campaigns_are_the_looks() -> None:
    """The paper profile's studies are judged after every campaign (the exact group-sequential levels): blocks
    added within a campaign would be looks that rule does not count."""
    from dbmatrix.study import load_studies

    studies = load_studies("paper")
    with pytest.raises(SpecError, match=r"^--until-decided: tpcc-paper, tpcc-index-paper, galera-paper, threads-paper, "
                                        r"scaleout-paper, scalegrid-paper, groupcommit-paper, remote-paper, builds-paper, "
                                        r"soak-paper run in "
                                        r"campaigns, "
                                        r"which are the looks"):
        rounds_option(True, "2h", studies)
    assert rounds_option(False, None, studies) is None


def test_claim_cells_by_the_claims_levels() -> None:
    exp = load_spec(SMOKE)
    assert claim_cells(MORE_CACHE, exp) == {c.cell_id for c in exp.cells()}
    assert claim_cells(ELSEWHERE, exp) == frozenset()
    one = Claim("testOne", "999", "t", "t", "tps", (1.0, 2.0), factor="engine", a="innodb", b="myrocks",
                at={"cache_pct": "min"})
    # the smoke spec has no myrocks cell: the claim cannot be tested here, so no cell is spent on it
    assert claim_cells(one, exp) == frozenset()
    assert study_claims([MORE_CACHE, OTHER_KIND], "storage") == [MORE_CACHE]


def _look(cid: str, v: str, cells: tuple[str, ...]) -> ClaimLook:
    return ClaimLook(cid, v, 1.1, 0.9, 1.3, 0.99, "", cells)


def test_only_the_open_claims_cells_get_a_block() -> None:
    looks = [_look("open1", "inconclusive", ("a", "b")), _look("done", "agree", ("c", "d")),
             _look("premise", "premise not met", ("e",)), _look("alias", "not identified", ("f",)),
             _look("untested", "not tested", ("g",)), _look("open2", "inconclusive", ("b", "d"))]
    assert cells_to_add(looks) == ("a", "b", "d")
    assert [state_of(v) for v in ("agree", "disagree", "inconclusive", "premise not met", "not identified",
                                  "not tested")] == ["decided"] * 2 + ["open"] + ["not decided by runs"] * 3
    assert cells_to_add([_look("x", "premise not met", ("e",))]) == ()
    # a measured quantity (dataset sizes) whose pairs disagree has no noise for more runs to shrink
    split = "pairs differ (measured, no CI): block 16k: 3.52 agree; block 4k: 2.9 disagree"
    assert state_of("inconclusive", split) == "not decided by runs"
    assert state_of("inconclusive", "premise uncertain: ...") == "open"


def test_block_runs_are_one_seeded_block_of_the_cells() -> None:
    exp = load_spec(SMOKE)
    ids = [c.cell_id for c in exp.cells()]
    runs = block_runs(exp, 1, ids, 3, {f"{ids[0]}-r3"}, 5)
    assert sorted(r.cell.cell_id for r in runs) == sorted(ids)
    assert {r.block for r in runs} == {3} and all(r.adaptive for r in runs)
    assert {r.run_id for r in runs} == {f"{ids[0]}-r4", f"{ids[1]}-r3"}  # a failed attempt is not retried
    assert [r.order for r in runs] == [5, 6]
    assert [r.run_id for r in block_runs(exp, 1, ids, 3, set(), 5)] == \
        [r.run_id for r in block_runs(exp, 1, ids, 3, set(), 5)]


# ------------------------------------------------------------------------------------------ the loop

def _loop(tmp_path: Path, ratio: float, budget: float | None, sd: float = 0.03, tick: float = 60.0
          ) -> tuple[UntilDecided, list[list[str]], list[dict[str, object]]]:
    exp = load_spec(SMOKE)
    study = Study("smoke", SMOKE, exp, load_inventory(None), ResultStore(tmp_path / "res"))
    added: dict[str, int] = {}
    now = [0.0]

    def clock() -> float:
        now[0] += tick
        return now[0]

    def evidence(campaign: int) -> Evidence:
        base = {c.cell_id: exp.repetitions + 2 for c in exp.cells()}  # 3 planned blocks (the spec has 1)
        return Evidence("smoke", "storage", _runs(ratio, 3, sd, cells={k: v + added.get(k, 0) for k, v in base.items()}))

    ud = UntilDecided(study, budget, claims=[MORE_CACHE, ELSEWHERE, OTHER_KIND], clock=clock, evidence=evidence)
    rounds = []
    while runs := ud.next_round(1):
        rounds.append([r.cell.cell_id for r in runs])
        for r in runs:
            added[r.cell.cell_id] = added.get(r.cell.cell_id, 0) + 1
        assert len(rounds) < 20
    lines = [json.loads(x) for x in ud.log_path(1).read_text().splitlines()]
    return ud, rounds, lines


def test_loop_stops_when_decided_and_logs_it(tmp_path: Path) -> None:
    ud, rounds, lines = _loop(tmp_path, 1.5, 3600)
    assert lines[0]["event"] == "schedule" and lines[-1]["event"] == "end"
    # one claim decided, the other not something runs decide: nothing open, and the reason says both
    assert lines[-1]["reason"] == "no claim open (1 decided, 1 not decided by runs)"
    assert lines[-1]["decided_at"]["testMoreCache"] >= 1
    assert "testMyrocks" in lines[-1]["not_decided_by_runs"]  # no cell of this spec: not spent on
    assert lines[0]["claims"] == ["testMoreCache", "testMyrocks"]  # the galera claim is not this study's
    rec = ud.study.store.campaign_record(1)
    assert rec is not None and rec["until_decided"]["last_look"] == len(rounds) + 1
    looks = [e for e in lines if e["event"] == "look"]
    assert all(set(e["cells_added"]) <= set(claim_cells(MORE_CACHE, ud.study.experiment)) for e in looks)
    assert "look 1/" in look_line("smoke", looks[0])
    again = UntilDecided(ud.study, 3600, claims=[MORE_CACHE], evidence=lambda k: pytest.fail("no new look"))
    assert again.next_round(1) == [] and again.stopped == lines[-1]["reason"]  # a resumed, ended loop


def test_loop_stops_at_the_budget_with_a_projection(tmp_path: Path) -> None:
    _, rounds, lines = _loop(tmp_path, 1.02, budget=1000, sd=0.05, tick=100.0)
    end = lines[-1]
    assert end["event"] == "end" and end["reason"].startswith("budget: the next block")
    assert "testMoreCache" in end["projected_blocks"]
    looks = [e for e in lines if e["event"] == "look"]
    assert [e["look"] for e in looks] == list(range(1, len(looks) + 1))
    assert all(e["runs_added"] for e in looks[:-1]) and not looks[-1]["runs_added"]
    assert rounds and all(sorted(r) == sorted(claim_cells(MORE_CACHE, load_spec(SMOKE))) for r in rounds)
    conf = [e["confidence"] for e in looks]
    assert all(c > 0.95 for c in conf)


def test_judge_look_keeps_the_first_decision_block() -> None:
    exp = load_spec(SMOKE)
    ev = Evidence("smoke", "storage", _runs(1.5, 4))
    first = judge_look([MORE_CACHE], ev, exp, 0.99, 4)
    assert first[0].verdict == "agree" and first[0].decided_at == 4
    again = judge_look([MORE_CACHE], ev, exp, 0.99, 5, {lk.id: lk for lk in first})
    assert again[0].decided_at == 4


def test_the_run_command_takes_the_flags_and_refuses_a_bad_budget_before_running(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbmatrix.cli import build_parser, main

    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    args = build_parser().parse_args(["run", "--profile", "smoke", "--until-decided", "--budget", "2h"])
    assert args.until_decided and args.budget == "2h"
    assert not build_parser().parse_args(["run", "--profile", "smoke"]).until_decided
    assert main(["run", "--profile", "smoke", "--until-decided", "--budget", "90x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dbmatrix: budget: '90x' is not a duration; allowed: a number with h, m or s")
    assert main(["run", "--profile", "smoke", "--budget", "2h"]) == 2
    assert "budget: --budget needs --until-decided" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing ran


def test_budget_is_split_over_the_studies_in_proportion_to_their_plans() -> None:
    """One budget for a profile's campaign: each study's share is proportional to its planned duration, and the
    shares add up to the budget (a larger study gets more, never the whole budget each)."""
    from dbmatrix.decide import budget_shares
    from dbmatrix.run.matrix import summarize_study
    from dbmatrix.study import load_studies

    studies = load_studies(profile="quick")
    shares = budget_shares(studies, 3600.0)
    assert sum(shares.values()) == pytest.approx(3600.0)
    est = {s.experiment.name: summarize_study(s).estimated_wall_s for s in studies}
    big, small = max(est, key=est.__getitem__), min(est, key=est.__getitem__)
    assert shares[big] > shares[small]
    assert shares[big] / shares[small] == pytest.approx(est[big] / est[small])


def test_what_a_study_leaves_of_its_share_goes_to_the_next() -> None:
    """BudgetPool: shares 60/30/30 s of 120 s; the first study stops after 40 s, so the second gets its 30 plus
    the 20 left; the second overruns (70 s), so the third gets its own share only."""
    from types import SimpleNamespace

    from dbmatrix.decide import BudgetPool

    now = [0.0]
    studies = [SimpleNamespace(kind="storage", experiment=SimpleNamespace(name=n)) for n in ("a", "b", "c")]
    pool = BudgetPool({"a": 60.0, "b": 30.0, "c": 30.0}, 120.0)
    pool(studies[0])  # type: ignore[arg-type]
    first = pool.loops[0]
    first.clock = lambda: now[0]
    first.t0 = 0.0
    assert first.budget_s == 60.0 and first.carried_s == 0.0
    now[0] = 40.0
    first.stopped_at = first.elapsed()  # its loop ended after 40 s
    now[0] = 41.0
    pool(studies[1])  # type: ignore[arg-type]
    second = pool.loops[1]
    assert (second.budget_s, second.carried_s) == (50.0, 20.0)
    second.stopped_at = 70.0  # it overran its 50 s
    pool(studies[2])  # type: ignore[arg-type]
    assert (pool.loops[2].budget_s, pool.loops[2].carried_s) == (30.0, 0.0)
    assert pool.loops[0].spent_s() == 40.0  # fixed at the end, not growing with the clock
