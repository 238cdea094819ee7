"""The claims table a reader can check, and the claims in detail (LaTeX, from :class:`ClaimVerdicts`).

One row per claim, on full-width pages (``longtable`` after ``\\onecolumn``, so it may run over pages):
the seed's statement and where it says it, the band of values it asserts, what was compared here, the
estimate with its interval at the level the table's heading names, or the row's own where it differs (one
line per condition, with that condition's verdict, where the claim is judged at several; one value per pair,
without a CI, for a measured quantity such as a dataset size), the verdict ("depends on <factor>" where the
decided conditions differ) with how the claim's conditions combine, each campaign's verdict (a consistency
check) with the reason where it differs from the pooled one, and a footnote per stand-in (where this
study's condition stands in for the seed's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from dbmatrix.analyse.claims.verdicts import bounded_outcome
from dbmatrix.analyse.claims_view import SHORT, ClaimRow, claim_row, claim_rows, measured, render, table_level, tex
from dbmatrix.analyse.judgement import ClaimVerdicts, combined
from dbmatrix.analyse.mechanism import HALF, moved_parts, number_words
from dbmatrix.analyse.verdict_text import (
    class_of,
    combine_of,
    confidence_of,
    heterogeneity_of,
    is_decided,
    is_premise_reason,
    level_label,
    verdict_and_reason,
)
from dbmatrix.publish.boot_tex import claim_line
from dbmatrix.publish.paper import latex_escape

__all__ = ["SHORT", "band_text", "campaign_reason", "combined", "measured_text", "opposed_claims", "opposed_text",
           "profile_of", "render_claims_details", "render_claims_table", "standing", "why_not"]


def _f(x: float, kind: str) -> str:
    if kind == "share":
        return f"{x * 100:.0f}"
    if kind == "difference":
        return f"{x:+.0f}"
    return f"{x:.3g}" if x < 10 else f"{x:.0f}"


def band_text(row: Mapping[str, object]) -> str:
    """The seed's band in the estimate's unit: "1--1.1", "$>$1", "$\\le$1.05", "-100 to 0 pts", "90--100 %"."""
    kind = str(row.get("kind", "ratio"))
    lo, hi = float(row["band_lo"]), float(row["band_hi"])  # type: ignore[arg-type]
    unit = {"difference": " pts", "share": "\\,\\%"}.get(kind, "")
    if math.isinf(hi):
        body = f"$>${_f(lo, kind)}"
    elif kind == "ratio" and lo <= 0:
        body = f"$\\le${_f(hi, kind)}"
    elif kind == "difference":
        body = f"{_f(lo, kind)} to {_f(hi, kind)}"
    else:
        body = f"{_f(lo, kind)}--{_f(hi, kind)}"
    test = str(row.get("test"))
    no_effect = test == "within" and kind == "ratio" and 0 < lo < 1 < hi
    return body + unit + (" (no effect)" if no_effect else " (about)" if test == "about" else "")


def _null(kind: str) -> float:
    return 0.0 if kind == "difference" else 1.0


def campaign_reason(row: Mapping[str, object], est: float, lo: float, hi: float, own: str, pooled: str) -> str:
    """Why a campaign's own verdict (`own`) differs from the pooled one (`pooled`), in a few words."""
    kind, test = str(row.get("kind", "ratio")), str(row.get("test", "direction"))
    b_lo, b_hi = float(row["band_lo"]), float(row["band_hi"])  # type: ignore[arg-type]
    null = _null(kind)
    shown = tex(measured(kind, est, lo, hi))
    if own in ("", "no estimate") or math.isnan(est):
        return "no estimate in this campaign"
    if own == "inconclusive":
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return f"{shown}: no interval"
        if test == "direction" and lo <= null <= hi:
            return f"{shown}: its CI includes {_f(null, kind)} (no effect)"
        if not (b_lo <= est <= b_hi):
            return f"{shown}: its estimate lies outside the band"
        return f"{shown}: its CI reaches outside the band"
    if pooled == "inconclusive":
        p_lo, p_hi = float(row.get("ci_lo", math.nan)), float(row.get("ci_hi", math.nan))  # type: ignore[arg-type]
        if math.isfinite(p_lo) and test == "direction" and p_lo <= null <= p_hi:
            return (f"{shown}; the pooled CI, which includes the variation between campaigns, "
                    f"includes {_f(null, kind)}")
        return f"{shown}; the pooled CI, wider by the variation between campaigns, reaches outside the band"
    return f"{shown}: {own} where the pooled verdict is {pooled}"


def _per_campaign(verdicts: ClaimVerdicts, r: Mapping[str, object]) -> str:
    """C1 agree, C2 inconcl. (why) -- the reason only where a campaign's verdict differs from the pooled."""
    rows = verdicts.of(str(r["id"]))
    if len(rows) < 2 or str(r["verdict"]) == "not tested":
        return ""
    pooled = str(r["verdict"])
    levels = verdicts.levels_of(str(r["id"]))
    parts = []
    for _, c in rows.iterrows():
        own = c["verdict"] if isinstance(c["verdict"], str) else ""
        k = int(c["campaign"])
        text = f"C{k} {SHORT.get(own, own)}"
        if own != pooled:
            why = []
            if not levels.empty:
                pooled_lv = levels[levels["campaign"] == 0].set_index("level")["verdict"]
                for _, lv in levels[levels["campaign"] == k].iterrows():
                    want = pooled_lv.get(lv["level"], "")
                    if lv["verdict"] != want:
                        why.append(latex_escape(str(lv["level"])) + ": " + campaign_reason(
                            r, float(lv["estimate"]), float(lv["ci_lo"]), float(lv["ci_hi"]), lv["verdict"], want))
                if not why:
                    why.append("the levels' verdicts differ")
            else:
                why.append(campaign_reason(r, float(c["estimate"]), float(c["ci_lo"]), float(c["ci_hi"]), own, pooled))
            text += " (" + "; ".join(why) + ")"
        parts.append(text)
    return ", ".join(parts)


def measured_text(verdicts: ClaimVerdicts, r: Mapping[str, object], sep: str = "; ") -> str:
    """The estimate with its CI; for a claim judged at several conditions, one "condition: estimate [CI]
    (verdict)" per condition (:meth:`~dbmatrix.analyse.claims_view.ClaimRow.lines`; empty when there is no
    estimate), as LaTeX."""
    return sep.join(tex(line) for line in claim_row(r, verdicts, None).lines(short=True))


def _stand_in(r: Mapping[str, object]) -> str:
    return str(r.get("stand_in") or "").split("; premise")[0]


def why_not(r: Mapping[str, object]) -> str:
    """Why a claim has no verdict from an estimate: not tested (the reason; a premise not met or uncertain
    named with its measured value), not identified (the alias). An older table's "premise not met" reads
    as not tested with the premise."""
    verdict, reason = verdict_and_reason(r)
    if verdict == "not tested":
        if is_premise_reason(reason):
            return latex_escape(reason)
        return latex_escape(reason.split(": ", 1)[-1] if reason.count(":") == 1 else reason)
    if verdict == "not identified":
        return "not identified by the design: " + latex_escape(reason)
    return ""


def _combined_cell(r: Mapping[str, object]) -> str:
    """How the claim's conditions combine, under its verdict ("" for a claim judged at one condition)."""
    how = combine_of(r)
    return f"\\newline \\emph{{combined: {latex_escape(how)}}}" if how else ""


# ------------------------------------------------------------------------------------ standing of the verdicts

PROFILES = ("smoke", "quick", "paper", "full")  # the profiles' experiment-name suffixes (specs/*.yaml)
DECIDING = ("paper",)  # the profile sized to decide the claims (DESIGN: profiles); the others demonstrate


def profile_of(experiment: str) -> str:
    """The profile an experiment belongs to, from its name's suffix (``tpcc-quick`` -> quick; a name
    without a known suffix: "")."""
    tail = str(experiment).rsplit("-", 1)[-1]
    return tail if tail in PROFILES else ""


def opposed_claims(result: ClaimVerdicts) -> list[str]:
    """The claims one campaign agrees with and another disagrees with: the flip a replication must not show.
    (Here, not in :mod:`dbmatrix.analyse.claims`: the digest the campaigns record covers that code.)"""
    ks = result.campaign_numbers()
    return [str(i) for i in result.claims["id"]
            if {"agree", "disagree"} <= {result.campaign_verdict(i, k) for k in ks}]


def opposed_text(table: pd.DataFrame, opposed: list[str]) -> str:
    """What the pooled verdict made of the claims whose campaigns' verdicts oppose each other.

    Under the three-way rule one campaign's agree and another's disagree need disjoint intervals: the
    campaigns differ (the heterogeneity test beside each claim says by how much). Their own verdicts are
    consistency checks; the pooled interval, which includes the variation between campaigns, is the one
    decision."""
    n = len(opposed)
    verb = "s" if n == 1 else ""
    said = f"{n} agree{verb} in one campaign and disagree{verb} in another"
    pooled = table.set_index("id")["verdict"].reindex(opposed).fillna("").astype(str).map(class_of)
    counts = {v: int((pooled == v).sum()) for v in ("agree", "disagree", "depends")}
    words = {"agree": "agree", "disagree": "disagree", "depends": "depends on a condition"}
    parts = [f"{k} pooled {words[v]}" if n > 1 else f"pooled {words[v]}" for v, k in counts.items() if k]
    if not parts:
        return f"{said}; pooled, {'it is' if n == 1 else 'they are'} inconclusive"
    return (f"{said}; {', '.join(parts)}: opposite verdicts need disjoint intervals, so those campaigns differ; "
            "the campaigns' own verdicts are consistency checks, and the pooled interval, which includes the "
            "variation between campaigns, is the one decision")


def standing(table: pd.DataFrame) -> tuple[bool, str]:
    """Whether the verdicts are indicative (judged on data of a profile that demonstrates rather than
    decides: any study that judged a claim is not of the paper profile) or provisional (the paper profile's,
    but one campaign only), and the sentence that says so, from the experiments named in the table's
    ``study`` column (a pooled share names several, joined by +) and its ``campaigns`` counts."""
    studies = sorted({s for v in table.get("study", pd.Series(dtype=str)).fillna("").astype(str)
                      for s in v.split("+") if s})
    if not studies:
        return True, "Indicative: no study of this build judged a claim."
    profiles = sorted({profile_of(s) or "unknown" for s in studies})
    named = ", ".join(studies)
    if all(p in DECIDING for p in profiles):
        camps = pd.to_numeric(table.get("campaigns", pd.Series(dtype=float)), errors="coerce").max()
        if not (camps >= 2):
            return True, (f"Provisional: these verdicts are judged on one campaign of the {' and '.join(profiles)} "
                          f"profile ({named}). A second campaign, in a separate sitting with a fresh dataset load, "
                          "shows whether they replicate; until then no interval includes the variation between "
                          "campaigns.")
        return False, (f"The verdicts are judged on the {' and '.join(profiles)} profile's data ({named}), the "
                       "experiment sized to decide the claims.")
    return True, (f"Indicative: these verdicts are judged on {' and '.join(profiles)}-profile data ({named}). "
                  "That profile demonstrates the pipeline in minutes on this machine; it is not sized to decide "
                  "the claims. The paper profile (the seeds' conditions, designs that identify every claim's "
                  "contrast, windows long enough for the steady-state test, repetitions until decided) decides "
                  "them.")


def _claim_cell(c: ClaimRow) -> str:
    """The claim's words with its seed and where, and a footnote naming its stand-in."""
    r = c.row
    verdict, reason = verdict_and_reason(r)
    claim = f"{r['claim']} ({latex_escape(str(r['seed']))}, {latex_escape(str(r['where']))})"
    stand_in = _stand_in(r)
    if stand_in and (verdict != "not tested" or is_premise_reason(reason)):
        claim += f"\\footnote{{Here: {latex_escape(stand_in)}.}}"
    return claim


def _verdict_cell(verdicts: ClaimVerdicts, c: ClaimRow) -> str:
    """The verdict with how its conditions combine, whether it was revised after data and each campaign's."""
    r = c.row
    cell = f"\\textbf{{{latex_escape(c.verdict)}}}" + _combined_cell(r)
    if bound := bounded_outcome(verdict_and_reason(r)[1]):
        cell += f"\\newline \\emph{{{bound}}}"  # a decided condition rules one outcome out
    if c.registration in ("revised after data", "added after data"):
        cell += f"\\newline \\emph{{{c.registration}}}"  # analyse.claims.registration
    per = _per_campaign(verdicts, r)
    return cell + ("\\newline " + per if per else "")


def render_claims_table(verdicts: ClaimVerdicts, *, further: bool = False) -> str:
    """The seeds' claims beside this build's measurements: a longtable over full-width pages (it starts
    with ``\\onecolumn``), headed as indicative unless every judging study is of the deciding profile, with a
    footnote per stand-in. `further`: our own findings (:data:`dbmatrix.analyse.claims.catalogue.FURTHER`),
    the same columns under their own heading and label (``tab:further``), right after the seeds' table."""
    table = verdicts.claims
    label = "tab:further" if further else "tab:claims"
    if table.empty:
        return f"% Generated by dbmatrix; do not edit.\n% {label}: no claims\n"
    indicative, said = standing(table)
    several = len(verdicts.campaign_numbers()) > 1
    level, every = table_level(verdicts)
    ci = level_label(level, tex=True) + ("" if every else " unless stated")
    cols = ("p{4.3cm}", "p{1.5cm}", "p{2.9cm}", "p{3.7cm}", "p{3.6cm}")
    spec = "".join(f">{{\\raggedright\\arraybackslash}}{c}" for c in cols)
    head = (("Finding (after seed, where) & Band" if further else "Claim (seed, where) & Seed's band")
            + f" & Compared here & Measured: estimate [{ci}] & "
            "Verdict" + (" (per campaign)" if several else "") + " \\\\")
    head_word, _, rest = said.partition(": ")
    standing_text = f"\\textbf{{{latex_escape(head_word)}:}} {latex_escape(rest)} " if indicative and rest else ""
    if further:
        caption = ("\\textbf{Further findings of ours, not the seeds' conclusions}: comparisons our studies make "
                   "that no seed concludes (the seed named is the one whose study design they follow), judged by "
                   "the same rule and read as Table~\\ref{tab:claims}. " + standing_text)
    else:
        caption = standing_text + (
            "The seeds' claims beside this build's measurements, each stated in the seed's direction. Seed's "
            "band: the values of the estimate (a ratio a/b, a difference a$-$b in points, or a share) the claim "
            "asserts. A claim \\emph{agrees} when its whole interval lies in the claimed region (the band, "
            "beyond the margin of no effect for a claimed effect), \\emph{disagrees} when the whole interval "
            "misses it, and is \\emph{inconclusive} otherwise; a stand-in that bounds the real medium is judged "
            "on one side only; a claim judged at several conditions combines them by the rule named under its "
            "verdict, and \\emph{depends on} a factor when its decided conditions differ; a premise not met or "
            "uncertain leaves it \\emph{not tested}, its estimate shown (Section~\\ref{sec:method}). Measured: "
            f"the estimate with its interval, at the level the heading names ({ci})"
            + ("" if every else " or the one stated below it (a study run until decided is judged at its last "
               "look's level)")
            + (", pooled over the campaigns (Section~\\ref{sec:method}); under the verdict each campaign's own "
               "(C1, C2, \\dots), a consistency check rather than a decision, with the reason where it differs "
               "from the pooled one" if several else " (within one campaign)")
            + "; a claim judged at several conditions gives one line per condition with that condition's "
            "verdict; a measured quantity (a dataset size) is given per pair, without a CI. Footnotes name what "
            "stands in here for the seed's condition; the basis of each estimate and "
            "the premises' measured values are in Section~\\ref{sec:claims-detail}; the seeds' own words and "
            "conditions are in \\texttt{docs/registry.md}. Our own further findings follow in "
            "\\optref{tab:further}{Table}{their own table}.")
    lines = ["% Generated by dbmatrix (claims_tex.render_claims_table); do not edit.",
             *([] if further else ["\\onecolumn"]),
             "{\\small\\setlength{\\tabcolsep}{3pt}\\setlength{\\LTcapwidth}{\\textwidth}",
             f"\\begin{{longtable}}{{{spec}}}",
             f"\\caption{{{caption}}}\\label{{{label}}}\\\\", "\\toprule", head, "\\midrule", "\\endfirsthead",
             f"\\multicolumn{{5}}{{l}}{{\\emph{{Table~\\ref{{{label}}}, continued}}}}\\\\", "\\toprule", head,
             "\\midrule", "\\endhead", "\\bottomrule", "\\endfoot"]
    body = render("tex", claim_rows(verdicts, level=level), NL="\\newline ", NOTHING="\\emph{nothing}",
                  why=lambda c: why_not(c.row), premise=is_premise_reason, band=lambda c: band_text(c.row),
                  claim=_claim_cell, verdict=lambda c: _verdict_cell(verdicts, c))
    lines.append(body.rstrip("\n"))
    lines += ["\\end{longtable}}", ""]
    return "\n".join(lines)


def mechanism_sentence(rows: pd.DataFrame, claim_id: str, compared: str = "") -> str:
    """What moved behind a decided verdict, in LaTeX: the counters of its compared sides that moved most
    (:func:`dbmatrix.analyse.mechanism.moved_parts`, means over runs, per condition), the sides named by
    `compared` (the claims table's words, "threads 16 / 2") when given, else by their levels; "" when nothing
    moved."""
    per = moved_parts(rows, claim_id)
    if not per:
        return ""
    a, b = (str(rows.loc[rows["id"] == claim_id, k].iloc[0]) for k in ("a", "b"))
    sides = compared.replace(" / ", " vs ", 1) if " / " in compared else f"{a} vs {b}"
    conds = []
    for cond, parts in per:
        words = "; ".join(
            f"{latex_escape(str(x['label']))} {latex_escape(number_words(x['value_a']))} vs "
            f"{latex_escape(number_words(x['value_b']))}"
            + (f" ($\\times${float(x['ratio']):.3g})" if math.isfinite(float(x["ratio"])) else "") for x in parts)
        conds.append((f"\\textit{{{latex_escape(cond)}}}: " if cond else "") + words)
    return (f"\\emph{{what moved}} ({latex_escape(sides)}; the counters' means over runs): "
            + "; ".join(conds))


def drift_text(rows: pd.DataFrame) -> str:
    """The steady-state paragraph's sentence on what changed inside the drifting runs the share of settled
    runs counted, from the first half of their windows to the second (the mechanism rows of the window
    halves, :func:`dbmatrix.analyse.mechanism.drift_rows`); without them, a sentence that says so (a macro
    the text uses is never empty)."""
    half = rows[rows["counter"].astype(str).str.startswith(HALF)] if not rows.empty else rows
    if half.empty:
        return ("In this build no drifting run has the halves of its window to compare: none of the runs the share "
                "of settled runs counts drifted, or they have no per-second host samples.")

    def times(r: pd.Series, counter: str) -> str:
        v = float(r.get(counter, math.nan))
        return f"$\\times${v:.2f}" if math.isfinite(v) else ""

    parts = []
    for cond, g in half.groupby("condition", sort=False):
        r = g.set_index("counter")["ratio"]
        read, wrote, busy = (times(r, HALF + x) for x in ("read_kb_per_txn", "write_kb_per_txn", "busy_pct"))
        io = " and ".join(x for x in (f"read {read}" if read else "", f"wrote {wrote}" if wrote else "") if x)
        said = [*([f"per transaction they {io} as much"] if io else []),
                *([f"the host's CPUs were busy {busy} as much"] if busy else [])]
        tps = times(r, HALF + "tps")
        parts.append(latex_escape(str(cond)) + (f" (throughput {tps})" if tps else "")
                     + (": " + ", ".join(said) if said else ""))
    return ("Over the runs the share of settled runs counts (every standalone study's unsaturated runs), from the "
            "first half of a drifting run's window to the second (the host's per-second samples beside "
            "sysbench's): " + "; ".join(parts) + ".")


def render_claims_details(verdicts: ClaimVerdicts, further: ClaimVerdicts | None = None,
                          boots: pd.DataFrame | None = None, mechanism: pd.DataFrame | None = None) -> str:
    """Each claim's basis (how it was estimated, what the design aliases), its premises with their
    measured values and each campaign's estimate: a description list after the claims table; `further`
    (our own findings) follows the seeds' claims, each marked as ours; `boots`: the boot check
    (:mod:`dbmatrix.analyse.claims.boot_check`), a line per claim it applies to; `mechanism`: the counters
    behind each verdict (``claims-mechanism.csv``), what moved most said for every decided one."""
    ours = set(further.claims["id"]) if further is not None and not further.claims.empty else set()
    if further is not None:
        verdicts = combined(verdicts, further)
    lines = ["% Generated by dbmatrix (claims_tex.render_claims_details); do not edit.",
             "\\section{The claims in detail}\\label{sec:claims-detail}",
             "Table~\\ref{tab:claims} sets each claim beside this build's measurement"
             + (" and \\optref{tab:further}{Table}{the further findings' table} our own findings" if ours else "")
             + "; here is how each estimate was made.", "\\begin{description}"]
    table = verdicts.claims
    ks = verdicts.campaign_numbers()
    several = len(set(table["study"]) - {""}) > 1 if "study" in table else False
    for _, r in table.iterrows():
        verdict, reason = verdict_and_reason(r)
        origin = "ours, after seed" if r["id"] in ours else "seed"
        head = (f"\\item[{latex_escape(str(r['id']))}] ({origin} {latex_escape(str(r['seed']))}, "
                f"\\textbf{{{latex_escape(verdict)}}})")
        if verdict == "not tested" and not is_premise_reason(reason):
            lines.append(f"{head} {latex_escape(reason)}.")
            continue
        parts = [latex_escape(str(r.get("basis") or ""))]
        if several and r.get("study"):
            parts.insert(0, f"Study {latex_escape(str(r['study']))}")
        if isinstance(r.get("hosts"), str) and r.get("hosts"):
            parts.append(f"hosts {latex_escape(str(r['hosts']))}")
        premise = str(r.get("premise_value") or "")
        if premise:
            met = {"yes": "met", "no": "not met", "uncertain": "uncertain"}.get(str(r.get("premise_met")),
                                                                                 "not checked")
            parts.append(f"premise {met}: {latex_escape(premise)}")
        if measured_text(verdicts, r):
            parts.append(f"{level_label(confidence_of(r), tex=True)}s")
        if combine_of(r):
            parts.append(f"conditions combined: {latex_escape(combine_of(r))}")
        if len(ks) > 1 and verdicts.levels_of(str(r["id"])).empty:
            parts.append("per campaign (a consistency check): " + ", ".join(
                f"C{int(c['campaign'])} " + (tex(measured(str(r["kind"]), c["estimate"], c["ci_lo"], c["ci_hi"]))
                                             if pd.notna(c["estimate"]) else "no estimate")
                + f" ({c['verdict'] or 'no verdict'})" for _, c in verdicts.of(r["id"]).iterrows()))
        if heterogeneity_of(r):
            parts.append(latex_escape(heterogeneity_of(r)))
        if reason:
            parts.append(latex_escape(reason))
        if boots is not None:
            parts.append(claim_line(boots, str(r["id"])))
        if mechanism is not None and not mechanism.empty and is_decided(verdict):
            parts.append(mechanism_sentence(mechanism, str(r["id"]), str(r.get("compared") or "")))
        lines.append(f"{head} " + "; ".join(p for p in parts if p) + ".")
    lines += ["\\end{description}", ""]
    return "\n".join(lines)
