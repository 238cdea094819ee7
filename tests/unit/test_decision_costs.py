"""What deciding the claims cost (analyse.claims.costs, publish.decisions_tex): known answers on a small log."""

from __future__ import annotations

import json
import math

import pandas as pd

from dbmatrix.analyse.claims.costs import RunTime, cost_summary, decision_costs, read_log, study_costs
from dbmatrix.publish.decisions_tex import decisions_text, render_decisions_table


def _claim(cid: str, verdict: str, state: str, cells: list[str], decided_at: int | None) -> dict:
    return {"id": cid, "verdict": verdict, "state": state, "cells": cells, "decided_at": decided_at,
            "estimate": 1.1, "ci_lo": 1.0, "ci_hi": 1.2, "confidence": 0.97, "reason": ""}


EVENTS = [
    {"event": "schedule", "schedule": {"looks": 3, "first_blocks": 3}},
    {"event": "look", "campaign": 2, "look": 1, "blocks": 3, "confidence": 0.999, "elapsed_s": 600.0,
     "claims": [_claim("fast", "agree", "decided", ["a", "b"], 3),
                _claim("slow", "inconclusive", "open", ["a", "c"], None),
                _claim("design", "not identified", "not decided by runs", ["d"], None)]},
    {"event": "look", "campaign": 2, "look": 2, "blocks": 4, "confidence": 0.98, "elapsed_s": 700.0,
     "claims": [_claim("fast", "agree", "decided", ["a", "b"], 3),
                _claim("slow", "inconclusive", "open", ["a", "c"], None),
                _claim("design", "not identified", "not decided by runs", ["d"], None)]},
    {"event": "end", "campaign": 2, "look": 2, "blocks": 4, "elapsed_s": 700.5, "reason": "budget",
     "projected_blocks": {"slow": 5}},
]

# 4 blocks of cells a, c (block 4 added for the open claim), 3 of b and d; one run of another campaign
RUNS = ([RunTime(c, b, 2, 10.0) for b in (1, 2, 3, 4) for c in ("a", "c")]
        + [RunTime(c, b, 2, 20.0) for b in (1, 2, 3) for c in ("b", "d")] + [RunTime("a", 1, 1, 99.0)])


def test_each_claim_counts_its_cells_runs_through_the_block_it_was_decided_at() -> None:
    df = decision_costs("s", EVENTS, RUNS).set_index("claim")
    # fast: cells a, b through block 3: 3 runs of a (10 s) and 3 of b (20 s); block 4's run of a is not its
    assert (df.loc["fast", "runs"], df.loc["fast", "run_s"], df.loc["fast", "decided_at"]) == (6, 90.0, 3.0)
    # slow, open: through the last block (4): 4 runs each of a and c, and its projection from the end event
    assert (df.loc["slow", "runs"], df.loc["slow", "run_s"], df.loc["slow", "projected_blocks"]) == (8, 80.0, 5.0)
    assert math.isnan(df.loc["slow", "decided_at"]) and math.isnan(df.loc["fast", "projected_blocks"])
    assert (df.loc["design", "runs"], df.loc["design", "state"]) == (3, "not decided by runs")
    assert set(df["campaign"]) == {2} and set(df["blocks"]) == {4} and set(df["confidence"]) == {0.98}


def test_summary_divides_the_elapsed_time_by_the_decided_claims() -> None:
    df = decision_costs("s", EVENTS, RUNS)
    s = cost_summary(df, {("s", 2): 700.5}, {("s", 2): (14, 200.0)}, {("s", 2): "budget"}).iloc[0]
    assert (s["claims"], s["decided"], s["open"], s["not_by_runs"]) == (3, 1, 1, 1)
    assert (s["elapsed_s_per_decided"], s["runs"], s["stopped"]) == (700.5, 14, "budget")
    none = decision_costs("s", [e for e in EVENTS if e["event"] != "look" or e["look"] == 1], RUNS)
    none = none.assign(state=["open"] * 3)
    assert math.isnan(cost_summary(none, {("s", 2): 1.0}, {}).iloc[0]["elapsed_s_per_decided"])


def test_a_log_without_looks_gives_no_rows_and_the_paper_says_nothing_ran_until_decided() -> None:
    assert decision_costs("s", EVENTS[:1], RUNS).empty
    empty = pd.DataFrame(columns=["study", "campaign", "claims", "decided", "open", "elapsed_s"])
    assert "No study of this build ran until decided" in decisions_text(empty)
    assert "no study of this build ran until decided" in render_decisions_table(pd.DataFrame(), empty)


def test_the_table_and_sentence_carry_the_numbers() -> None:
    df = decision_costs("s", EVENTS, RUNS)
    s = cost_summary(df, {("s", 2): 700.5}, {("s", 2): (14, 200.0)}, {("s", 2): "budget"})
    tex = render_decisions_table(df, s)
    assert "fast & \\texttt{s} & 2 & agree & 3 & 6 & 1.5 & --- \\\\" in tex
    assert "slow & \\texttt{s} & 2 & inconclusive & --- & 8 & 1.3 & 5 \\\\" in tex
    assert " -- " not in tex  # an en dash in a cell is a placeholder to the paper's checks
    assert "\\texttt{s} & 2 & 4 & 2 & 98.00\\,\\% & 1 of 3 & 11.7 & 11.7 \\\\" in tex
    text = decisions_text(s)
    assert ("of 3 claim judgements in 1 study campaign, 1 were decided, 1 were still open at the end and 1 cannot "
            "be decided by more runs") in text
    assert "11.7\\,min per decided claim" in text


def test_study_costs_reads_the_logs_and_run_records(tmp_path) -> None:
    class Rec:
        def __init__(self, cell: str, block: int, campaign: int, status: str = "ok") -> None:
            self.cell_id, self.block, self.repetition, self.campaign = cell, block, block, campaign
            self.status, self.duration_s = status, 10.0

    class Store:
        root = tmp_path

        def records(self):  # type: ignore[no-untyped-def]
            return [Rec("a", 1, 2), Rec("b", 1, 2), Rec("a", 2, 2, status="failed"), Rec("a", 1, 1)]

    (tmp_path / "campaigns").mkdir()
    (tmp_path / "campaigns" / "2.until-decided.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    assert read_log(tmp_path / "campaigns" / "1.until-decided.jsonl") == []
    costs, summary = study_costs("s", Store())
    assert list(costs["claim"]) == ["fast", "slow", "design"]
    assert costs.set_index("claim").loc["fast", "runs"] == 2  # the failed run and campaign 1's are not counted
    row = summary.iloc[0]
    assert (row["runs"], row["run_s"], row["elapsed_s"], row["stopped"]) == (2, 20.0, 700.5, "budget")


def test_the_paper_shows_the_cost_of_the_campaign_looks_the_claims_table_reports() -> None:
    """Issue 39 item 5 / issue 41: with campaigns as looks, the decisions table is the looks' (the verdict the
    claims table reports, the look it was decided at and the campaigns' time), an open claim has its
    half-width, the one it needs and its projected look, and a claim decided earlier and open again says so;
    the within-campaign logs of earlier campaigns are named, not shown."""
    from dbmatrix.publish.decisions_tex import looks_text, render_looks_table

    looks = pd.DataFrame([
        {"id": "a", "study": "s", "campaigns": 4, "verdict": "agree", "decided_at": 2, "machine_s": 7200.0,
         "half_width": float("nan"), "needed_half_width": float("nan"), "projected_campaigns": "", "note": "",
         "study_machine_s": 14400.0},
        {"id": "b", "study": "s", "campaigns": 4, "verdict": "inconclusive", "decided_at": 1, "machine_s": 3600.0,
         "half_width": float("nan"), "needed_half_width": float("nan"), "projected_campaigns": "",
         "note": "disagree at look 1, inconclusive at look 4: the verdict the table reports is the last look's",
         "study_machine_s": 14400.0},
        {"id": "c", "study": "s", "campaigns": 4, "verdict": "inconclusive", "decided_at": "", "machine_s": float("nan"),
         "half_width": 0.2, "needed_half_width": 0.1, "projected_campaigns": "", "note": "open beyond",
         "study_machine_s": 14400.0},
        {"id": "d", "study": "s", "campaigns": 4, "verdict": "inconclusive", "decided_at": "", "machine_s": float("nan"),
         "half_width": 0.12, "needed_half_width": 0.1, "projected_campaigns": 5, "note": "",
         "study_machine_s": 14400.0}])
    tex = render_looks_table(looks, 6)
    assert "a & \\texttt{s} & 4 & agree & 2 & 120.0 & --- & --- & --- \\\\" in tex
    assert "b & \\texttt{s} & 4 & inconclusive & 1$^\\dagger$ &" in tex
    assert "c & \\texttt{s} & 4 & inconclusive & --- & --- & 0.2 & 0.1 & ${>}6$ \\\\" in tex
    assert tex.rstrip().endswith("d & \\texttt{s} & 4 & inconclusive & --- & --- & 0.12 & 0.1 & 5 \\\\\n\\end{longtable}}")
    history = pd.DataFrame({"campaign": [1, 2, 1]})
    text = looks_text(looks, 6, history)
    assert "of 4 claim judgements, 1 are decided, 4.0\\,h of campaigns in all, 240\\,min per decided claim" in text
    assert "1 decided at an earlier look is open again" in text
    assert "2 are open, 1 of them projected to be decided within 6 campaigns" in text and "and 1 not" in text
    assert "Campaigns 1 and 2 also added replicate blocks within the campaign" in text
    assert "no study" in render_looks_table(looks.iloc[0:0], 6)


def test_an_open_claim_judged_per_condition_is_projected_from_its_open_conditions() -> None:
    """A claim judged at every level of a factor (combined: all) has no pooled interval of its own: its
    projection comes from its open conditions' pooled intervals, the one needing the most campaigns naming it;
    before, it said "no finite interval to project"."""
    from dbmatrix.analyse.claims.campaign_costs import _open_projection
    from dbmatrix.analyse.claims.catalogue import FURTHER

    claim = next(c for c in FURTHER if c.id == "buildsEquivalent")
    now = pd.Series({"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan})
    levels = pd.DataFrame([
        {"id": claim.id, "level": "cache 25 %", "campaign": 0, "estimate": 1.0, "ci_lo": 0.97, "ci_hi": 1.031,
         "verdict": "inconclusive"},
        {"id": claim.id, "level": "cache 100 %", "campaign": 0, "estimate": 1.0, "ci_lo": 0.96, "ci_hi": 1.042,
         "verdict": "inconclusive"},
        {"id": claim.id, "level": "cache 100 %", "campaign": 1, "estimate": 1.0, "ci_lo": 0.5, "ci_hi": 2.0,
         "verdict": "inconclusive"}])  # a campaign's own row: not the pooled interval
    got = _open_projection(claim, now, levels, 2)
    assert math.isclose(got["half_width"], math.log(1.042 / 0.96) / 2) and got["needed_half_width"] > got["half_width"] * 0.5
    assert got["projected_campaigns"] in range(3, 7) and "cache 100 %" in got["note"]
    wide = levels.assign(ci_lo=0.3, ci_hi=3.0)
    far = _open_projection(claim, now, wide, 2)
    assert far["projected_campaigns"] == "" and "beyond the registered maximum" in far["note"]
    assert _open_projection(claim, now, levels.iloc[:0], 2)["note"] == "no finite interval to project"
