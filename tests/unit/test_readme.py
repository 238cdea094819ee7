"""The README's first screen shows the answer, and every number on it comes from the committed data: its
generated blocks (dbmatrix.readme) must equal what the generator makes of the committed claims table,
reference data and measured times, and the text around them on the first screen carries no number of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from dbmatrix import readme

ROOT = Path(__file__).resolve().parents[2]
FIRST_SCREEN = 50  # lines of the raw file: the answer, the decided claims (13 rows here), the figures, the commands, the box


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return readme.blocks(ROOT, ROOT / "data" / "reference")


@pytest.mark.parametrize("name", sorted(readme.FILES))
def test_generated_blocks_match_the_committed_data(name: str, generated: dict[str, str]) -> None:
    text = (ROOT / name).read_text()
    assert set(readme.FILES[name]) <= set(readme.block_names(text)), f"{name}: a generated block is missing"
    assert readme.render(text, generated) == text, f"{name} differs from the committed data: run `make readme`"


def test_the_first_screen_shows_the_answer_and_the_commands() -> None:
    """The first screen ends with the requirements box, within about 40 lines of the raw file; what
    follows it (other sections' blocks) is not checked here."""
    lines = (ROOT / "README.md").read_text().splitlines()
    end = lines.index("<!-- dbmatrix:box end -->") + 1
    assert end <= FIRST_SCREEN, f"the first screen runs to line {end}"
    head = "\n".join(lines[:end])
    for block in ("answer", "claims", "figures", "commands", "box"):
        assert f"<!-- dbmatrix:{block} end -->" in head, f"the {block} block is not on the first screen"
    for command in ("make smoke", "make reproduce", "make test", "make clean-host"):
        assert f"`{command}`" in head
    outside = readme.BLOCK.sub("", head)
    assert not re.findall(r"\d", outside), "a number on the first screen outside the generated blocks"


def test_the_figures_shown_exist() -> None:
    for stem in readme.FIGURES:
        assert (ROOT / "figures" / f"{stem}.png").is_file(), stem


def test_counts_come_from_the_data(generated: dict[str, str]) -> None:
    built = readme.built_experiments(ROOT)  # the committed paper's studies, not every profile's reference
    assert built
    facts = readme.reference_facts(ROOT / "data" / "reference", built)
    ok = sum(1 for e in built for p in (ROOT / "data" / "reference" / e).glob("raw/*/manifest.json")
             if '"status": "ok"' in p.read_text())
    assert facts.runs == ok and facts.runs == sum(s.runs for s in facts.sittings)  # every run in a sitting
    camps = {(e, k) for s in facts.sittings for e, k in s.campaigns}
    assert len(camps) == sum(len(s.campaigns) for s in facts.sittings)  # a campaign in one sitting only
    assert all(s.seconds <= 2.5 * 3600 for s in facts.sittings)  # none stretched over the days between
    keys = {p.stem for e in built for p in (ROOT / "data" / "reference" / e).glob("datasets/*/*.json")}
    assert facts.datasets == len(keys)
    assert f"{facts.datasets} datasets" in generated["answer"] and f"{facts.studies} studies" in generated["answer"]
    rows = readme.claims_rows(ROOT / "paper" / "generated" / "claims.csv")
    assert f"the {len(rows)} claims" in generated["answer"]
    assert generated["every-claim"].count("\n| ") == len(rows)


def test_campaigns_group_into_sittings_by_boot_and_gap() -> None:
    """A study registered later runs its campaign 1 in the older studies' third sitting: sittings follow the
    records' times and boots, not the campaign numbers."""
    from datetime import datetime, timedelta

    t0 = datetime.fromisoformat("2026-11-27T10:00:00+00:00")

    def span(e: str, k: int, start_h: float, minutes: float, boot: str) -> tuple:
        s = t0 + timedelta(hours=start_h)
        return (e, k, s, s + timedelta(minutes=minutes), (boot,))

    spans = [span("a", 1, 0, 50, "b1"), span("b", 1, 50 / 60 + 0.01, 20, "b1"),  # one sitting: a then b
             span("a", 2, 3, 50, "b1"),  # three hours later on the same boot: a second sitting
             span("a", 3, 48, 20, "b2"), span("new", 1, 48 + 21 / 60, 10, "b2"),  # another boot
             span("a", 4, 49, 20, "b3"),  # within the gap but on a third boot: its own sitting
             span("a", 5, 49 + 21 / 60, 20, "b3")]  # within the gap, same boot, but a's next campaign
    runs = {("a", 1): 40, ("b", 1): 8, ("a", 2): 40, ("a", 3): 12, ("new", 1): 6, ("a", 4): 12, ("a", 5): 12}
    got = readme.sittings(spans, runs)
    assert [s.campaigns for s in got] == [(("a", 1), ("b", 1)), (("a", 2),), (("a", 3), ("new", 1)), (("a", 4),),
                                          (("a", 5),)]
    assert [s.runs for s in got] == [48, 40, 18, 12, 12] and [s.boots for s in got][2:] == [("b2",), ("b3",), ("b3",)]
    assert round(got[0].seconds) == round((50 / 60 + 0.01) * 3600 + 20 * 60)
    assert round(got[2].seconds) == 31 * 60
    # a soak (StudyKind.own_sitting) 15 minutes after a campaign, and a campaign 15 minutes after it: three sittings
    alone = [span("a", 6, 60, 20, "b3"), span("soak", 1, 60 + 35 / 60, 62, "b3"), span("b", 2, 62, 20, "b3")]
    got = readme.sittings(alone, {("a", 6): 6, ("soak", 1): 1, ("b", 2): 4}, frozenset({"soak"}))
    assert [s.campaigns for s in got] == [(("a", 6),), (("soak", 1),), (("b", 2),)]
    assert len(readme.sittings(alone, {})) == 1  # without the soak named, one sitting (gaps under 30 min)


def test_the_sittings_table_lists_each_sitting_with_its_campaigns_by_number() -> None:
    t0 = "2026-11-29T09:41:00+00:00"
    s = readme.Sitting(t0, 76 * 60, 80, ("2d9bd31a-aaaa",), (("tpcc-paper", 3), ("galera-paper", 3),
                                                             ("groupcommit-paper", 1)))
    assert readme.sitting_row(s) == "| 2026-11-29 09:41-10:57 | 2d9bd31a | 1 of groupcommit; 3 of tpcc, galera | 80 |"
    late = readme.Sitting("2026-11-30T23:40:00+00:00", 62 * 60, 1, ("b",), (("soak-paper", 3),))
    assert readme.sitting_row(late) == "| 2026-11-30 23:40-00:42 (to 12-01) | b | 3 of soak | 1 |"
    facts = readme.ReferenceFacts(2, 2, (1, 3), 81, (s, late), {}, 4, 0)
    table = readme.sittings_table(facts)
    assert "measured in 2 sittings on 2 boots, 2026-11-29 to 2026-11-30, 81 runs in all" in table
    assert table.count("\n| 2026-") == 2
    assert "No paper reference" in readme.sittings_table(None)


def test_the_docs_list_every_sitting_of_the_committed_paper_reference(generated: dict[str, str]) -> None:
    paper = readme.reference_facts(ROOT / "data" / "reference", readme.profile_experiments(ROOT / "data" / "reference",
                                                                                           "paper"))
    assert generated["sittings"].count("\n| 20") == len(paper.sittings) > 0
    assert sum(int(line.rsplit("|", 2)[1]) for line in generated["sittings"].splitlines()
               if line.startswith("| 20")) == paper.runs


def test_latex_wording() -> None:
    assert readme.plain(r"4\,KB blocks give up to 10\,\% more; 4$\times$ smaller; 2--3") == \
        "4\u202fKB blocks give up to 10\u202f% more; 4× smaller; 2–3"


def test_render_names_a_block_without_a_generator() -> None:
    with pytest.raises(ValueError, match="without a generator: nope"):
        readme.render("<!-- dbmatrix:nope begin -->\nx\n<!-- dbmatrix:nope end -->\n", {"answer": ""})


def test_durations_in_words() -> None:
    assert readme.duration(37) == "37 s"
    assert readme.duration(1517) == "25 min 17 s"
    assert readme.duration(6443) == "1 h 47 min 23 s"  # a paper campaign: hours, not 107 min


def _verdicts(rows: list[dict[str, str]], campaigns: str = "id,campaign,estimate,ci_lo,ci_hi,verdict\n"):
    import io

    from dbmatrix.analyse.judgement import ClaimVerdicts, read_table

    table = read_table(io.StringIO(pd.DataFrame(rows).to_csv(index=False)))
    return ClaimVerdicts(table, read_table(io.StringIO(campaigns)))


def test_a_verdict_a_campaign_judged_the_other_way_names_that_campaign() -> None:
    from dbmatrix.readme import claims_table, opposing_campaigns

    rows = [{"id": "a", "seed": "003", "claim": "x", "estimate": "1.04", "ci_lo": "1.02", "ci_hi": "1.06",
             "verdict": "agree"},
            {"id": "b", "seed": "003", "claim": "y", "estimate": "0.5", "ci_lo": "0.4", "ci_hi": "0.6",
             "verdict": "disagree"},
            {"id": "c", "seed": "000", "claim": "z", "estimate": "1", "ci_lo": "0.5", "ci_hi": "2",
             "verdict": "inconclusive"},
            {"id": "d", "seed": "000", "claim": "w", "estimate": "1.2", "ci_lo": "1.1", "ci_hi": "1.3",
             "verdict": "agree"}]
    v = _verdicts(rows, "id,campaign,estimate,ci_lo,ci_hi,verdict\n"
                        "a,1,1.03,1.01,1.04,disagree\na,2,1.04,1.02,1.06,agree\n"
                        "b,1,,,,disagree\nb,2,,,,inconclusive\nc,1,,,,agree\nc,2,,,,disagree\n"
                        "d,1,,,,disagree\nd,2,,,,inconclusive\n")
    opposing = opposing_campaigns(v)
    # b only lost a decision; c is not decided pooled; d has no campaign agreeing: not opposed, as in the paper
    assert opposing == {"a": "campaign 1: disagree"}
    table = claims_table(v, opposing=opposing).splitlines()
    assert table[2].endswith("| **agree** (campaign 1: disagree) |") and table[3].endswith("| **disagree** |")
    assert opposing_campaigns(_verdicts(rows)) == {}


def test_each_interval_carries_its_level_and_a_depends_on_verdict_its_conditions() -> None:
    """The estimate column names the level its intervals share, else the common one "unless stated" with
    each other row's own; a claim judged at several conditions shows each condition's verdict and how they
    combine; the counts give "depends on" its own class; no "premise not met" verdict is printed."""
    from dbmatrix.readme import claims_table, verdict_summary

    basis = ("judged at every level of compression (fixed in the claim): compression none: 1.01 [0.99, 1.03] "
             "disagree; compression lz4: 1.23 [1.15, 1.3] agree; 2 campaigns pooled")
    rows = [{"id": "a", "seed": "003", "claim": "x", "estimate": "1.04", "ci_lo": "1.02", "ci_hi": "1.06",
             "verdict": "agree", "confidence": "0.9736"},
            {"id": "b", "seed": "003", "claim": "y", "estimate": "", "ci_lo": "", "ci_hi": "", "basis": basis,
             "verdict": "depends on compression", "confidence": "0.9736", "combine": "all conditions",
             "heterogeneity": "campaigns consistent (F = 0.81 on 1 and 20 df, p = 0.38)"},
            {"id": "c", "seed": "000", "claim": "z", "estimate": "2.0", "ci_lo": "1.5", "ci_hi": "2.5",
             "verdict": "not tested", "reason": "premise uncertain: CPUs 90 %", "confidence": "0.9736"},
            {"id": "d", "seed": "000", "claim": "w", "estimate": "0.5", "ci_lo": "0.4", "ci_hi": "0.6",
             "verdict": "premise not met", "reason": "lz4 shrinks the data 1.04x"}]  # an older table's row
    v = _verdicts(rows)
    table = claims_table(v, details=True)
    head = table.splitlines()[0]
    assert "estimate (97.4 % CI unless stated)" in head
    assert "| 1.04 [1.02, 1.06] | **agree** |" in table  # at the heading's level: not repeated
    assert "| 2.00 [1.50, 2.50] |" in table and "0.50 [0.40, 0.60] (95 % CI)" in table  # no level column: 95 %
    assert ("compression none: 1.01 [0.99, 1.03] (disagree); compression lz4: 1.23 [1.15, 1.30] (agree) | "
            "**depends on compression** (combined: all conditions) |") in table
    assert "campaigns consistent (F = 0.81 on 1 and 20 df, p = 0.38)" in table
    assert "premise not met" not in table.replace("premise not met: lz4", "")  # only as the reason
    assert "| **not tested** | premise not met: lz4 shrinks the data 1.04x |" in table
    shared = claims_table(v, v.claims.iloc[:2])
    assert shared.splitlines()[0] == "| seed | claim | estimate (97.4 % CI) | verdict |"
    assert verdict_summary(rows) == "1 agree, 1 depends on a condition, 2 not tested"


def test_the_largest_condition_shows_the_interval_it_was_judged_on() -> None:
    from dbmatrix.analyse.claims_view import claim_rows

    basis = ("judged at every level of medium (fixed in the claim): medium disk: 0.82 [0.74, 0.85] disagree; "
             "medium ramblock: 0.86 [0.7, 0.91] disagree; 2 campaigns pooled")
    row = {"id": "a", "estimate": "0.86", "ci_lo": "0.74", "ci_hi": "0.91", "basis": basis, "reason": "",
           "confidence": "0.95", "verdict": "disagree"}
    assert claim_rows(_verdicts([row]))[0].cell().startswith(
        "judged: 0.86 [0.74, 0.91]; medium disk: 0.82 [0.74, 0.85] (disagree)")
    primary = {**row, "ci_lo": "0.7", "ci_hi": "0.91"}  # the primary condition's own interval: said once
    assert claim_rows(_verdicts([primary]))[0].cell().startswith("medium disk: 0.82")
