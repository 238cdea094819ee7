"""dbmatrix.analyse.verdict_text: one wording of the claims table for every renderer (levels, verdict classes,
counts, conditions), on small tables; older tables (no confidence/combine/heterogeneity columns, the verdict
"premise not met") still read."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dbmatrix.analyse import verdict_text as vt


@pytest.mark.parametrize("confidence,label", [(0.95, "95 % CI"), (0.9736, "97.4 % CI"), (0.9888, "98.9 % CI"),
                                              (0.99, "99 % CI"), (0.999, "99.9 % CI"), (0.99995, "99.995 % CI"),
                                              (0.9, "90 % CI")])
def test_level_label_says_the_level_with_the_digits_it_needs(confidence: float, label: str) -> None:
    assert vt.level_label(confidence) == label
    assert vt.level_label(confidence, tex=True) == label.replace(" % CI", "\\,\\% CI")


def test_the_level_comes_from_the_column_else_the_basis_look_else_95() -> None:
    assert vt.confidence_of({"confidence": 0.9736}) == 0.9736
    assert vt.confidence_of({"confidence": float("nan"), "basis": "x; repeated 95 % CI, obrien-fleming alpha "
                             "spending over 8 looks, union bound (look 8: 98.88 % interval)"}) == pytest.approx(0.9888)
    assert vt.confidence_of({"confidence": "", "basis": "two-way model"}) == vt.DEFAULT_CONFIDENCE
    assert vt.confidence_of({}) == 0.95


def test_a_heading_names_the_shared_level_else_the_common_one_unless_stated() -> None:
    rows = [{"estimate": 1.0, "ci_lo": 0.9, "ci_hi": 1.1, "confidence": 0.9736},
            {"estimate": 1.0, "ci_lo": 0.9, "ci_hi": 1.1, "confidence": 0.9736},
            {"estimate": float("nan"), "ci_lo": float("nan"), "ci_hi": float("nan"), "confidence": 0.95}]
    assert vt.heading(rows) == ("estimate (97.4 % CI)", pytest.approx(0.9736))  # the untested row has none
    mixed = [*rows, {"estimate": 2.0, "ci_lo": 1.5, "ci_hi": 2.5, "confidence": 0.95}]
    head, level = vt.heading(mixed, tex=True, word="Measured")
    assert head == "Measured (97.4\\,\\% CI unless stated)"
    assert vt.stated(mixed[-1], level) == "95 % CI" and vt.stated(rows[0], level) == ""
    assert vt.stated(rows[0], None) == "97.4 % CI"  # no heading level: every row states its own


def test_verdict_classes_and_counts() -> None:
    verdicts = ["agree", "disagree", "depends on compression", "depends on medium", "inconclusive",
                "premise not met", "not tested", "not identified"]
    counts = vt.class_counts(verdicts)
    assert counts == {"agree": 1, "disagree": 1, "depends": 2, "inconclusive": 1, "not identified": 1,
                      "not tested": 2}  # an older table's "premise not met" is not tested now
    assert vt.counts_text(verdicts) == ("1 agree, 1 disagree, 2 depend on a condition, 1 inconclusive, "
                                        "1 not identified, 2 not tested")
    assert vt.counts_text(["depends on medium", "inconclusive"], verbs=True) == \
        "1 depends on a condition, 1 is inconclusive"
    assert vt.is_decided("depends on medium") and not vt.is_decided("inconclusive")


def test_an_older_premise_not_met_reads_as_not_tested_with_the_premise() -> None:
    row = {"verdict": "premise not met", "reason": "lz4 shrinks the data 1.04x", "premise_value": "x"}
    assert vt.verdict_and_reason(row) == ("not tested", "premise not met: lz4 shrinks the data 1.04x")
    now = {"verdict": "not tested", "reason": "premise uncertain: CPUs 90 %"}
    assert vt.verdict_and_reason(now) == ("not tested", "premise uncertain: CPUs 90 %")
    assert vt.is_premise_reason(now["reason"]) and not vt.is_premise_reason("needs a tpcc study")


def test_conditions_from_the_levels_table_else_the_basis_else_the_pairs() -> None:
    levels = pd.DataFrame([
        {"id": "a", "level": "compression none", "campaign": 0, "estimate": 1.01, "ci_lo": 0.99, "ci_hi": 1.03,
         "verdict": "disagree"},
        {"id": "a", "level": "compression none", "campaign": 1, "estimate": 1.0, "ci_lo": 0.9, "ci_hi": 1.1,
         "verdict": "inconclusive"},
        {"id": "a", "level": "compression lz4", "campaign": 0, "estimate": 1.23, "ci_lo": 1.15, "ci_hi": 1.3,
         "verdict": "agree"}])
    got = vt.conditions({"id": "a"}, levels)
    assert [c.text() for c in got] == ["compression none: 1.01 [0.99, 1.03] disagree",
                                       "compression lz4: 1.23 [1.15, 1.3] agree"]
    basis = ("judged at every level of medium (fixed in the claim): medium tmpfs: 4.25 [3.42, 5.29] inconclusive "
             "(beyond the stand-in's bound: the interval reaches above; more runs cannot decide it); medium "
             "ramblock: 2.01 [1.61, 2.49] agree; medium x: not estimable (no runs); 2 campaigns pooled; repeated "
             "95 % CI (look 2: 97.36 % interval)")
    got = vt.conditions({"id": "b", "basis": basis}, levels)
    assert [(c.level, c.verdict) for c in got] == [("medium tmpfs", "inconclusive"), ("medium ramblock", "agree"),
                                                   ("medium x", "")]
    assert got[1].ci_hi == 2.49 and math.isnan(got[2].estimate) and got[2].text() == "medium x: not estimable"
    pairs = {"id": "c", "reason": "per pair (measured, no CI): compression none: 1.01 disagree; compression lz4: "
                                  "1.23 agree"}
    got = vt.conditions(pairs)
    assert [c.text() for c in got] == ["compression none: 1.01 disagree", "compression lz4: 1.23 agree"]
    assert vt.conditions({"id": "d", "basis": "two-way model"}) == []
    assert vt.shows_interval({"id": "b", "basis": basis}) and not vt.shows_interval(pairs)
