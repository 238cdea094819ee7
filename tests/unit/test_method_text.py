"""The paper's method sentences come from the records (dbmatrix.publish.method_text): the warm-up mode of
every run, what the campaigns shared and what differed, the truncation used, a cell's degrees of freedom."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd

from dbmatrix.publish.method_text import campaigns_text, intervals_text, trim_text, warmup_text


def _study(name: str, runs: pd.DataFrame | None = None, campaigns: list[dict[str, Any]] | None = None,
           reps: int = 2) -> Any:
    a = SimpleNamespace(runs=runs, cells=pd.DataFrame()) if runs is not None else None
    return SimpleNamespace(name=name, a=a, analysis=a, experiment=SimpleNamespace(repetitions=reps),
                           campaign_summaries=lambda: list(campaigns or []))


def test_warmup_text_counts_one_and_two_process_runs_from_the_runs_table() -> None:
    one = pd.DataFrame({"status": ["ok"] * 3 + ["failed"], "window_mode": ["one_process"] * 3 + [None]})
    two = pd.DataFrame({"status": ["ok"] * 2, "window_mode": ["two_process"] * 2,
                        "window_mode_reason": ["its window opens while no client runs"] * 2})
    m = warmup_text([_study("matrix", one), _study("galera", two)])
    assert (m["nOneProcessRuns"], m["nTwoProcessRuns"], m["nBuildRuns"]) == ("3", "2", "5")
    assert m["warmupModeText"].startswith("In 3 of the build's 5 runs the warm-up and the measured window are "
                                          "one sysbench process")
    assert "in 2 runs (\\texttt{galera}) the warm-up is a separate sysbench run" in m["warmupModeText"]
    assert "its window opens while no client runs" in m["warmupModeText"]
    old = pd.DataFrame({"status": ["ok"] * 2, "window_mode": [None, None]})  # runs that did not record it
    assert "2 runs measured without a warm-up or recorded no window mode" in warmup_text([_study("o", old)])[
        "warmupModeText"]


def test_campaigns_text_says_what_the_campaigns_shared() -> None:
    """From processed/campaigns.json (analyse.campaign_records.summary of each campaign record)."""
    recs = [{"campaign": 1, "boot_ids": ["b1"], "hosts": ["localhost"], "started_utc": "2026-11-25T19:53:02",
             "commits": ["65aad715aa"], "dirty": False, "datasets": [{"snapshot": "s", "fresh": True}]},
            {"campaign": 2, "boot_ids": ["b1"], "hosts": ["localhost"], "started_utc": "2026-11-25T20:26:53",
             "commits": ["712a1fdaaa"], "dirty": True, "datasets": [{"snapshot": "s", "fresh": False}]}]
    text = campaigns_text([_study("matrix", campaigns=recs)])["campaignsText"]
    assert text.startswith("Every study of this build has 2 campaigns")
    assert "same boot of \\texttt{localhost}" in text and "does not capture a reboot" in text
    assert "commits \\texttt{65aad715}, \\texttt{712a1fda}" in text and "uncommitted changes" in text
    assert "reused the first one's dataset snapshots" in text and "(0.6\\,h apart at most)" in text
    assert "within one campaign" in campaigns_text([_study("m")])["campaignsText"]


def test_trim_text_never_names_a_method_none() -> None:
    none = trim_text(pd.DataFrame({"trim_method": ["none"] * 3}), 8, 10)
    assert "none truncation" not in none and none.startswith("No run was truncated")
    assert "at least 10\\,s and these are 8\\,s" in none
    some = trim_text(pd.DataFrame({"trim_method": ["MSER-2", "MSER-2", "none"]}), 10, 10)
    assert some.startswith("MSER-2 truncation") and "in 2 of 3 runs" in some


def test_intervals_text_gives_a_cell_s_runs_and_degrees_of_freedom() -> None:
    runs = pd.DataFrame({"campaign": [1, 1, 2, 2]})
    st = _study("matrix", runs)
    st.analysis.cells = pd.DataFrame({"n": [4, 4]})
    m = intervals_text(st)
    assert m == {"intervalsText": "Each cell of \\texttt{matrix} has 4 runs (2 repetitions in each of 2 "
                                  "campaigns), so a cell's Student-$t$ interval has 3 degrees of freedom (t = 3.18).",
                 "nStudyCampaigns": "2", "campaignsPerCellText": "in each of 2 campaigns"}
    # the runs say how many each campaign has (a later campaign of the allocation runs fewer)
    st.analysis.runs = pd.DataFrame({"campaign": [1] * 6 + [2] * 2, "cell_id": ["a", "b"] * 4})
    st.analysis.cells = pd.DataFrame({"n": [4, 4]})
    assert "(4 independent cold-start runs per cell over 2 campaigns (3 and 1 per campaign))" in \
        intervals_text(st)["intervalsText"]


def _designed(name: str, kind: str, info: dict[str, Any], reasons: list[str] | None = None) -> Any:
    runs = pd.DataFrame({"steady_reason": reasons}) if reasons is not None else None
    st = _study(name, runs)
    st.kind = kind
    st.experiment = SimpleNamespace(design_info=lambda: info)
    return st


def test_design_threat_text_names_what_each_design_aliases() -> None:
    from dbmatrix.publish.method_text import design_threat_text

    frac = {"design": "fractional", "resolution": 5}
    crossed = {"design": "crossed", "letters": {"cache_pct": "A", "block_size": "B", "compression": "C"},
               "crossed_with": ["medium"]}
    full = {"design": "full"}
    text = design_threat_text([_designed("m", "storage", frac), _designed("t", "tpcc", crossed),
                               _designed("g", "galera", full)])
    assert text.startswith("The storage matrix (\\texttt{m}) is a fraction of resolution 5: it aliases each main "
                           "effect with interactions of 4 factors and each two-way interaction with interactions "
                           "of 3")
    assert "The TPC-C study (\\texttt{t}) is a half fraction of its two-level factors (cache\\_pct, block\\_size, " \
           "compression) crossed with medium" in text
    assert text.endswith("The other studies are full factorials.")
    assert design_threat_text([_designed("t", "tpcc", full)]).startswith("Every study of this build is a full")
    assert not design_threat_text([_designed("m", "storage", frac)]).endswith("full factorials.")


def test_duration_threat_text_says_when_no_run_could_be_tested() -> None:
    from dbmatrix.publish.method_text import duration_threat_text

    short = duration_threat_text([_designed("q", "storage", {}, ["too_short"] * 4)])
    assert short.startswith("every run's window is too short for the steady-state test")
    part = duration_threat_text([_designed("q", "storage", {}, ["too_short", "", "drift"])])
    assert "averages of the 2 of 3 runs long enough to test" in part
    assert "ran on all 2 runs" in duration_threat_text([_designed("p", "tpcc", {}, ["", "drift"])])


def test_windows_text_gives_every_study_its_own_windows() -> None:
    from dbmatrix.publish.method_text import windows_text

    def st(kind: str, warm: int, measure: int) -> Any:
        return SimpleNamespace(kind=kind, experiment=SimpleNamespace(warmup_s=warm, measure_s=measure))

    assert windows_text([st("tpcc", 3, 45)]) == "Measured windows of 45\\,s follow a 3\\,s warm-up"
    assert windows_text([st("tpcc", 3, 45), st("galera", 10, 45), st("scaleout", 10, 45)]) == (
        "3\\,s of warm-up and 45\\,s measured in the TPC-C study, 10\\,s and 45\\,s in the Galera study and the "
        "scale-out study")


def test_levels_and_design_choice_follow_the_design() -> None:
    from dbmatrix.publish.paper_inputs import design_choice_text, levels_text

    assert levels_text({"a": 2, "b": 2}) == "at two levels each"
    assert levels_text({"block_size": 2, "compression": 2, "medium": 3}) == "at two levels each, medium at three"
    assert design_choice_text({"design": "full"}).startswith("every combination")
    assert "three or more factors" in design_choice_text({"design": "fractional", "resolution": 5})
    assert "aliased with each other" in design_choice_text({"design": "fractional", "resolution": 4})
    assert "refused at plan time" in design_choice_text({"design": "crossed"})


def test_the_claims_method_states_the_three_way_rule_from_the_registry() -> None:
    """The paper's claims method (publish.claims_method) describes the registered rule: three outcomes on the
    whole interval, one-sided stand-ins, premises that leave a claim not tested, conditions combined by a
    registered rule into "depends on", campaigns as a consistency check, estimates that follow the design; its
    numbers come from macros (no digit typed into the rule's paragraphs), none of them a placeholder."""
    import re

    from dbmatrix.analyse.claims.catalogue import CLAIMS
    from dbmatrix.analyse.claims.verdicts import HETEROGENEITY_ALPHA
    from dbmatrix.publish.claims_method import method_macros, render_claims_method
    from dbmatrix.publish.placeholders import value_placeholders

    m = method_macros()
    assert not [k for k, v in m.items() if value_placeholders(v)]
    assert m["claimsConfidence"] == "95\\,\\%" and m["claimsHeterogeneityAlpha"] == f"{HETEROGENEITY_ALPHA:g}"
    assert m["claimsNCombinePrimary"] == str(sum(1 for c in CLAIMS if c.combine == "primary" and not c.not_tested))
    assert m["claimsNBound"] == str(sum(1 for c in CLAIMS if c.bound and not c.not_tested))
    text = render_claims_method()
    for said in ("\\emph{agrees} when its whole interval lies inside the claimed region",
                 "\\emph{disagrees} when the whole interval misses it (it lies in the zone of no effect or outside",
                 "\\emph{inconclusive} otherwise", "judged one-sided", "cannot contradict",
                 "leaves the claim \\emph{not tested}", "\\emph{depends on} the factor", "the \\emph{largest}",
                 "a \\emph{primary} condition with the others as a sensitivity check", "consistency check",
                 "the one decision", "Satterthwaite", "dataset load", "saturated", "every interval printed states "
                 "its level", "\\claimsConfidence", "\\claimsHeterogeneityAlpha"):
        assert said in text, said
    assert "premise not met''" not in text and "every campaign's own estimate on that side" not in text
    rule = [p for p in text.split("\\paragraph{")[1:] if not p.startswith(("Intervals that respect", "Identified"))]
    typed = [p.split("}", 1)[0] for p in rule if re.search(r"\d", re.sub(r"\\cite\{[^}]*\}|\\[A-Za-z]+", "",
                                                                             p.split("\n\n")[0]))]
    assert typed == [], f"numbers typed into the method text: {typed}"
    assert text.count("\\begin{table}") == text.count("\\end{table}") == 1
    assert text.count("{") - text.count("\\{") == text.count("}") - text.count("\\}")  # balanced braces
