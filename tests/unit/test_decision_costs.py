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
