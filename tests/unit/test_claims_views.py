"""One judgement through every view of the claims table (the paper's table and macros, the README, the HTML
report, `dbmatrix verdicts`, `dbmatrix compare`): every decided claim shows the same estimate, interval and
level in each, as the one formatter (dbmatrix.analyse.claims_view) wrote them; no view prints an interval
without its ends ("1.11 [, ]") or a missing number."""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Callable

import pandas as pd

from dbmatrix.analyse import claims_view as cv
from dbmatrix.analyse.judgement import ClaimVerdicts, normalise_verdicts, read_table

NAN = math.nan


def judgement() -> ClaimVerdicts:
    """Decided claims of every shape: a ratio with its interval, one at another level (a look), a share,
    a difference in points, one judged per condition ("all"), the largest condition (an interval of its own),
    a measured quantity judged pair by pair; and an undecided one."""
    base = {"seed": "003", "where": "slide 1", "metric": "tps", "test": "direction", "band_lo": 1.0,
            "band_hi": 1.1, "study": "tpcc-paper", "compared": "block 4k / 16k", "basis": "", "n": 24,
            "reason": "", "stand_in": "", "premise": "", "premise_value": "", "premise_met": "", "campaigns": 2,
            "campaign_level": "", "registration": "", "heterogeneity": "", "confidence": 0.95, "combine": ""}
    rows = [
        {**base, "id": "ratio", "claim": "a ratio", "kind": "ratio", "estimate": 1.1126, "ci_lo": 1.0514,
         "ci_hi": 1.1773, "verdict": "agree"},
        {**base, "id": "look", "claim": "at a look's level", "kind": "ratio", "estimate": 0.7101, "ci_lo": 0.6293,
         "ci_hi": 0.8012, "verdict": "disagree", "confidence": 0.97363},
        {**base, "id": "share", "claim": "a share", "kind": "share", "estimate": 0.0435, "ci_lo": 0.00122,
         "ci_hi": 0.881, "verdict": "disagree"},
        {**base, "id": "points", "claim": "a difference", "kind": "difference", "estimate": -31.8, "ci_lo": -85.5,
         "ci_hi": 64.3, "verdict": "disagree"},
        {**base, "id": "levels", "claim": "per level", "kind": "ratio", "estimate": NAN, "ci_lo": NAN, "ci_hi": NAN,
         "verdict": "depends on compression", "combine": "all conditions"},
        {**base, "id": "largest", "claim": "the largest", "kind": "ratio", "estimate": 0.8212, "ci_lo": 0.7579,
         "ci_hi": 0.9101, "verdict": "disagree", "combine": "the largest condition"},
        {**base, "id": "pairs", "claim": "dataset pairs", "kind": "ratio", "estimate": 1.11, "ci_lo": NAN,
         "ci_hi": NAN, "verdict": "disagree", "confidence": NAN, "combine": "the largest condition",
         "reason": "per pair (measured, no CI): compression lz4: 1.23 disagree; compression none: 1.01 agree; "
                   "judged: the largest value, 1.23"},
        {**base, "id": "open", "claim": "undecided", "kind": "ratio", "estimate": 1.02, "ci_lo": 0.88,
         "ci_hi": 1.18, "verdict": "inconclusive"},
    ]
    levels = pd.DataFrame([
        {"id": "levels", "level": "compression none", "campaign": 0, "estimate": 1.0094, "ci_lo": 0.9912,
         "ci_hi": 1.0301, "verdict": "disagree"},
        {"id": "levels", "level": "compression lz4", "campaign": 0, "estimate": 1.2271, "ci_lo": 1.1534,
         "ci_hi": 1.3012, "verdict": "agree"},
        {"id": "largest", "level": "medium disk", "campaign": 0, "estimate": 0.8212, "ci_lo": 0.7411,
         "ci_hi": 0.9101, "verdict": "disagree"},
        {"id": "largest", "level": "medium ramblock", "campaign": 0, "estimate": 0.7579, "ci_lo": 0.6842,
         "ci_hi": 0.8399, "verdict": "disagree"}])
    claims = pd.DataFrame(rows)
    camps = pd.DataFrame([{"id": r["id"], "campaign": k, "estimate": r["estimate"], "ci_lo": r["ci_lo"],
                           "ci_hi": r["ci_hi"], "verdict": r["verdict"]} for r in rows for k in (1, 2)])
    return normalise_verdicts(ClaimVerdicts(claims, camps, levels))


def views(v: ClaimVerdicts) -> dict[str, tuple[str, Callable[[str], str]]]:
    """Each view's text of the claims and how it escapes the formatter's plain text."""
    from dbmatrix import readme
    from dbmatrix.analyse import compare
    from dbmatrix.analyse import compare_text as ct
    from dbmatrix.commands.studies import claim_lines
    from dbmatrix.publish import claims_tex, report
    from dbmatrix.publish.build import claims_macros

    macros = claims_macros(v)
    result = "\n".join(f"{k}={x}" for k, x in sorted(macros.items()) if k.endswith("Result"))
    runs = pd.DataFrame({"cell_id": ["x"] * 4, "tps": [100.0, 101.0, 99.0, 100.5], "repetition": [1, 2, 1, 2],
                         "campaign": [1, 1, 2, 2], "status": "ok"})
    cmp = compare.compare_sets("A", {"s": runs}, "B", {"s": runs}, v.claims, v.claims)
    return {
        "paper": (claims_tex.render_claims_table(v), cv.tex),
        "macros": (result, cv.tex),
        "readme": (readme.claims_table(v, details=True), cv.markdown),
        "report": (report.render(report.ReportInputs({}, v.claims, [], [], v.levels)), html.escape),
        "verdicts": ("\n".join(claim_lines(v)), cv.terminal),
        "compare": (ct.render(cmp, width=400), cv.terminal),
    }


def _segment(text: str, view: str, row: cv.ClaimRow) -> str:
    """The part of a view that shows one claim."""
    if view == "verdicts":
        return re.split(r"\n(?=\S)", text[text.index(f"{row.id} ({row.seed}):"):])[0]
    if view == "compare":
        return re.split(r"\n(?=\S)", text[text.index(f"{row.id}: "):])[0]
    if view == "macros":
        name = "claim" + row.id[:1].upper() + row.id[1:] + "Result="
        return next(line for line in text.splitlines() if line.startswith(name))
    if view == "report":
        return text[text.index(f"<tr><td>{row.id}</td>"):].split("</tr>")[0]
    return next(line for line in text.splitlines() if line.startswith(f"{row.claim} (") or f"| {row.claim} |" in line)


def test_every_view_shows_the_same_estimate_interval_and_level_of_every_decided_claim() -> None:
    v = judgement()
    rows = cv.claim_rows(v)
    level, _ = cv.table_level(v)
    shown = views(v)
    decided = [r for r in rows if r.verdict in ("agree", "disagree") or r.verdict.startswith("depends on")]
    assert len(decided) == 7
    for name, (text, esc) in shown.items():
        assert "[, ]" not in text and "nan" not in text.lower().replace("nanc", ""), name
        for r in decided:
            part = _segment(text, name, r)
            if name == "compare":  # its sides' own estimates: the pooled row's
                own = cv.measured(r.kind, r.row["estimate"], r.row["ci_lo"], r.row["ci_hi"])
                if own:
                    assert esc(own) in part, (name, r.id, part)
                    if "[" in own:
                        assert esc(r.level_label) in part, (name, r.id, part)
                continue
            wanted = [c.measured for c in r.conditions] + [r.measured, r.judged]
            for w in filter(None, wanted):
                assert esc(w) in part, (name, r.id, w, part)
            if r.has_interval and round(r.level, 6) != round(level, 6):  # said beside it, else in the heading
                assert esc(r.level_label) in part, (name, r.id, part)


def test_the_numbers_are_formatted_once_per_metric_kind() -> None:
    assert cv.measured("ratio", 1.1126, 1.0514, 1.1773) == "1.11 [1.05, 1.18]"
    assert cv.measured("difference", -31.8, -85.5, 64.3) == "-31.8 [-85.5, +64.3] pts"
    assert cv.measured("share", 0.0435, 0.00122, 0.881) == "4\u202f% [0\u202f%, 88\u202f%]"
    assert cv.measured("ratio", 1.2, -math.inf, math.inf) == "1.20 [-∞, ∞]"
    assert cv.measured("ratio", 1.2, NAN, NAN) == "1.20" and cv.measured("ratio", NAN) == ""
    assert cv.tex(cv.measured("share", 0.0435, 0.00122, 0.881)) == "4\\,\\% [0\\,\\%, 88\\,\\%]"
    assert cv.tex("97.4 % CI") == "97.4\\,\\% CI"


def test_a_judgement_reads_back_as_it_was_written(tmp_path) -> None:
    from dbmatrix.analyse.judgement import FigureTables, Judgement, load_judgement, write_judgement

    v = judgement()
    fig = pd.DataFrame({"engine": ["myrocks", "innodb"], "cache_pct": [0.0, 8.5],
                        "estimate": [1.9163985457516375, 2.12455147829581], "basis": ["a, b", "c"]})
    j = Judgement(v, v, figures={"block-size": FigureTables("s", {"ratios": fig}, {"a": "16k", "b": "4k"})},
                  figure_notes=(("block-size", "t", "the study does not vary block_size"),), inputs="abc")
    write_judgement(j, tmp_path)
    back = load_judgement(tmp_path)
    pd.testing.assert_frame_equal(back.verdicts.claims, v.claims)
    pd.testing.assert_frame_equal(back.verdicts.levels, v.levels)
    pd.testing.assert_frame_equal(back.further.campaigns, v.campaigns)
    pd.testing.assert_frame_equal(back.figures["block-size"].tables["ratios"], fig)
    assert back.figures["block-size"].labels == {"a": "16k", "b": "4k"} and back.inputs == "abc"
    assert back.figure_error("block-size", "t") == "the study does not vary block_size"
    text = (tmp_path / "claims.csv").read_text()
    assert read_table(io.StringIO(text)).equals(back.verdicts.claims)
