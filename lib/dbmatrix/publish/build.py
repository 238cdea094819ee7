"""The whole publication step: figures, claims, paper macros and tables of every study, written once."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.analyse import claims_view
from dbmatrix.analyse.claims.catalogue import COMPRESSES, FC_PAUSED, SATURATED, SEED003_CACHE_PCT
from dbmatrix.analyse.claims.verdicts import MAX_CAMPAIGNS, VERDICTS, bounded_outcome
from dbmatrix.analyse.figure_data import StudyTables, efficiency_figure_table, timeline_cells
from dbmatrix.analyse.host_facts import merge_host_facts
from dbmatrix.analyse.judgement import ClaimVerdicts, Judgement, combined, flips
from dbmatrix.analyse.kinds import get_kind, kinds
from dbmatrix.analyse.tables import steady_params
from dbmatrix.analyse.verdict_text import (
    DEFAULT_CONFIDENCE,
    class_counts,
    combine_of,
    confidence_of,
    is_premise_reason,
    level_label,
    level_pct,
    shows_interval,
    verdict_and_reason,
)
from dbmatrix.paths import git_state
from dbmatrix.publish import claims_tex, decisions_tex, method_text, paper
from dbmatrix.publish import figures as plots
from dbmatrix.publish import scaleout_crossing as _crossing  # noqa: F401  (registers its paper hook)
from dbmatrix.publish import soak as _soak  # noqa: F401  (registers its section's hook)
from dbmatrix.publish.boot_tex import boot_check_text
from dbmatrix.publish.captions import caption_macros, design_macros
from dbmatrix.publish.claims_method import render_claims_method
from dbmatrix.publish.figure_check import Finding, format_findings
from dbmatrix.publish.hooks import HookContext, HookOutput, run_hook
from dbmatrix.publish.paper_inputs import (
    cells_table,
    effects_table,
    fmt_num,
    pairwise_table,
    paper_macros,
    render_table,
)
from dbmatrix.publish.registry import FIGURES, Published, draw_figures, remove_stale_figures
from dbmatrix.store import write_text_atomic

# ------------------------------------------------------------------------------------ the whole build


def campaign_macros(table: pd.DataFrame) -> dict[str, str]:
    """What the judging studies' campaign levels captured (``campaignLevels``: each label with its studies)
    and how many claims were fixed before their data, revised or added after it, or not registered
    (``claimsRegistration``: the sentence; ``nClaimsRevisedAfterData`` ...)."""
    from dbmatrix.analyse.claims.registration import STATUSES

    tested = table[table["study"].fillna("").astype(str) != ""] if "study" in table else table.iloc[0:0]
    by_label: dict[str, set[str]] = {}
    # a claim pooled over studies joins their labels, so a label cannot be told to one of them: those claims'
    # studies are named by their own claims (and only when they have none, by the pooled claim's labels)
    single = {str(s) for s in tested["study"] if "+" not in str(s)} if "study" in tested else set()
    for _, r in tested.iterrows():
        studies = [x for x in str(r["study"]).split("+") if "+" not in str(r["study"]) or x not in single]
        labels = [x for x in str(r.get("campaign_level") or "").split("; ") if x]
        if "+" in str(r["study"]) and len(labels) != 1:
            continue
        for label in labels:
            by_label.setdefault(label, set()).update(studies)
    levels = "; ".join(f"{', '.join(sorted(v))}: {k}" for k, v in sorted(by_label.items()))
    m = {"campaignLevels": paper.latex_escape(levels or "no campaign records")}
    reg = tested["registration"].fillna("") if "registration" in tested else pd.Series(dtype=str)
    n = {k: int((reg == k).sum()) for k in STATUSES}
    for k, v in n.items():
        m[paper.macro_name("n", "claims", k)] = str(v)
    if len(reg) and n["not registered"] == len(reg):
        text = ("No claim was fixed before its data: the campaigns of this build predate the claim registry "
                "(their records hold no digest of the claims).")
    else:
        revised = n["revised after data"] + n["added after data"]
        text = (f"{n['fixed before data']} of {len(reg)} judged claims are as their first campaign recorded "
                f"them before its data; {revised} were revised or added after it (marked in the table)"
                + (f"; {n['not registered']} rest on campaigns recorded before the registry" if n["not registered"]
                   else "") + ".")
    m["claimsRegistration"] = text
    return m


class FigureCheckError(RuntimeError):
    """The figure check found defects in drawn figures: the build wrote every output (so the figures can be
    looked at, and provenance.json lists the findings) and then fails, as a placeholder in the paper does."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = list(findings)
        super().__init__(f"figure check: {len(self.findings)} finding(s) in the drawn figures:\n"
                         + format_findings(self.findings))


def claims_macros(verdicts: ClaimVerdicts, further: ClaimVerdicts | None = None) -> dict[str, str]:
    """Per claim (the seeds' and, given `further`, our own findings'): its verdict, estimate, interval and the
    estimate with its interval; the seeds' claims' counts; whether the verdicts are indicative."""
    from dbmatrix.analyse.contrasts import INTERACTION_ALPHA  # a constant: the module is loaded, nothing called

    table = verdicts.claims

    m: dict[str, str] = {"nClaims": str(len(table)), "interactionAlpha": f"{INTERACTION_ALPHA:g}",
                         "premiseFcPausedPct": f"{FC_PAUSED.threshold:g}",
                         "premiseCompressesX": f"{COMPRESSES.threshold:g}",
                         "premiseSaturatedPct": f"{SATURATED.threshold * 100:g}"}
    counts = class_counts(table["verdict"].fillna("").astype(str))  # "depends on <factor>": class "depends"
    for v in VERDICTS:
        m[paper.macro_name("n", "claims", v)] = str(counts.get(v, 0))
    untested = [verdict_and_reason(r) for _, r in table.iterrows()]
    m["nClaimsPremiseNotTested"] = str(sum(1 for v, why in untested if v == "not tested" and is_premise_reason(why)))
    shown = sorted({round(confidence_of(r), 6) for _, r in table.iterrows() if shows_interval(r, verdicts.levels)})
    m["claimsCiLevels"] = (f"{level_pct(shown[0])}\\,\\%" if len(shown) == 1 else
                           f"{level_pct(shown[0])}\\,\\% to {level_pct(shown[-1])}\\,\\%" if shown else
                           f"{level_pct(DEFAULT_CONFIDENCE)}\\,\\%")
    camps = pd.to_numeric(table["campaigns"], errors="coerce").fillna(0) if "campaigns" in table else pd.Series()
    m["nCampaigns"] = str(int(camps.max())) if len(camps) else "0"
    m["nClaimsSeveralCampaigns"] = str(int((camps > 1).sum()))
    m["nClaimsFlip"] = str(int(flips(verdicts)["flip"].sum())) if len(table) else "0"
    n_flip = int(m["nClaimsFlip"])
    opposed = claims_tex.opposed_claims(verdicts) if len(table) else []
    m["opposedText"] = ("\\relax" if not n_flip else  # \relax: an empty value reads as a missing number
                        " (none agrees in one campaign and disagrees in another: each gains or loses a decision)"
                        if not opposed else f" ({claims_tex.opposed_text(table, opposed)})")
    m.update(campaign_macros(table))
    indicative, said = claims_tex.standing(table)
    m["claimsStanding"] = paper.latex_escape(said)
    m["claimsIndicative"] = ("provisional: judged on one campaign of the paper profile, the experiment sized to "
                             "decide them; a second campaign shows whether they replicate (Section~\\ref{sec:compare})"
                             if said.startswith("Provisional") else
                             "indicative only: this build's data come from a profile that demonstrates the "
                             "pipeline, and the paper profile decides (Section~\\ref{sec:compare})" if indicative
                             else "judged on the paper profile's data, the experiment sized to decide them")
    m["seedBlockCachePct"] = f"{SEED003_CACHE_PCT:g}"  # seed 003's 30 GB block cache as a cache level here
    rows = table if further is None else pd.concat([table, further.claims], ignore_index=True)
    m["nFurther"] = str(len(further.claims)) if further is not None else "0"
    both = verdicts if further is None else combined(verdicts, further)
    m.update(_claim_row_macros(both, rows))
    m.update(tpcc_passages(m))
    return m


# The figure paragraphs' sentences on seed 003's claims, which the TPC-C study judges: its numbers where the
# build has that study, else one sentence saying the claims are not judged here (a build from a storage
# matrix alone draws the figures but has no TPC-C claim to quote). Macro names used in each, and its text.
_TPCC_PASSAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "blockClaimsText": (("claimBlockSmallCacheStudy", "claimBlockSizeStudy"), (
        "Seed~003 reports its gain for MyRocks on PMEM without a block cache, under TPC-C: there the TPC-C study "
        "(\\texttt{\\claimBlockSmallCacheStudy}) gives \\claimBlockSmallCacheResult{} in throughput and "
        "\\claimBlockSmallCacheLatencyResult{} in p99 latency; with the block cache enabled (the seed's 30\\,GB, "
        "\\seedBlockCachePct\\,\\% of the logical data here), \\claimBlockLargeCacheResult. In the TPC-C study "
        "(\\texttt{\\claimBlockSizeStudy}) MyRocks' dataset grows by a ratio of \\claimBlockSizeResult{} with "
        "smaller blocks (seed~003's band: \\claimBlockSizeBand).")),
    "compressionClaimsText": (("claimLzFourSizeEst",), (
        "Seed~003's compression claims need data that compresses (its band for the uncompressed/lz4 size ratio: "
        "\\claimLzFourSizeBand), so they are judged on the TPC-C study with compressible strings "
        "(Table~\\ref{tab:claims}), where lz4 shrinks MyRocks' data \\claimLzFourSizeEst{} times: on the "
        "emulated PMEM its throughput ratio is \\claimLzFourTpsResult{} against the seed's ``almost no "
        "difference'', and its ratio of KiB written per transaction \\claimLzFourWritesResult.")),
    "mediumClaimsText": (("claimPmemNoCacheStudy",), (
        "The seed's medium claims are judged on its own workload, TPC-C (\\texttt{\\claimPmemNoCacheStudy}, "
        "Table~\\ref{tab:claims}): for MyRocks, each emulated PMEM mode against the disk gives, without a block "
        "cache (the engine's minimum), \\claimPmemNoCacheResult; with the block cache enabled (the seed's "
        "30\\,GB, \\seedBlockCachePct\\,\\% of the logical data here), \\claimPmemCacheResult.")),
}
_NO_TPCC = ("Seed~003 judged these claims under TPC-C; this build's data have no TPC-C study, so the claims "
            "table says why each is not tested (Table~\\ref{tab:claims}).")


def tpcc_passages(m: dict[str, str]) -> dict[str, str]:
    """The figure paragraphs' seed-003 sentences (:data:`_TPCC_PASSAGES`) for the macros `m` of this build."""
    from dbmatrix.publish.placeholders import is_placeholder

    def have(name: str) -> bool:
        return name in m and not is_placeholder(m[name])

    return {k: text if all(have(n) for n in needs) else _NO_TPCC for k, (needs, text) in _TPCC_PASSAGES.items()}


def _claim_row_macros(verdicts: ClaimVerdicts, table: pd.DataFrame) -> dict[str, str]:
    """Per claim row: ``\\claim<Id>Verdict``, ``...Measured``, ``...Est``/``Lo``/``Hi``, ``...Ci`` (its
    intervals' level, "97.4\\,\\% CI"), ``...Combine`` (how its conditions combine), ``...Pct``, ``...Study``,
    ``...Premise``, ``...Band``, ``...Result``."""
    m: dict[str, str] = {}
    for _, r in table.iterrows():
        base = "claim" + r["id"][:1].upper() + r["id"][1:]
        kind = r["kind"]
        verdict, reason = verdict_and_reason(r)
        m[base + "Verdict"] = verdict
        # per level where the claim was judged per level; empty (an error where the text uses it) without one
        m[base + "Measured"] = claims_tex.measured_text(verdicts, r)
        for k in ("estimate", "ci_lo", "ci_hi"):
            name = {"estimate": "Est", "ci_lo": "Lo", "ci_hi": "Hi"}[k]
            m[base + name] = claims_view.tex(claims_view.measured(kind, r[k])) or "--"  # the number, its unit
        m[base + "Ci"] = ci = level_label(confidence_of(r), tex=True)
        m[base + "Combine"] = paper.latex_escape(combine_of(r) or "one condition")
        est = r["estimate"]
        m[base + "Pct"] = "--" if pd.isna(est) or kind != "ratio" else fmt_num((est - 1) * 100, 0)
        m[base + "Study"] = paper.latex_escape(str(r["study"] or "--"))
        m[base + "Premise"] = paper.latex_escape(str(r.get("premise_value") or "--"))
        m[base + "Band"] = claims_tex.band_text(r)
        why = claims_tex.why_not(r)
        measured = m[base + "Measured"]
        per_level = not verdicts.levels_of(str(r["id"])).empty
        with_ci = shows_interval(r, verdicts.levels)  # a measured quantity (per pair) has no interval
        if verdict == "not tested" and is_premise_reason(reason):  # the estimate shown, no verdict
            result = f"{measured} ({ci}), but not tested: {why}" if measured and with_ci else (
                f"{measured}, but not tested: {why}" if measured else f"not tested: {why}")
        elif verdict == "not identified":
            result = f"{measured}, but {why}" if measured and not per_level else why
        elif verdict == "not tested":  # a study without the seed's level says "not tested in ..." itself
            result = why if why.startswith("not tested") else f"not tested ({why})" if why else verdict
        elif measured and per_level:
            result = f"per level {measured} ({ci}s); overall {verdict}" + (
                f": it {paper.latex_escape(reason)}" if bounded_outcome(reason) else "")
        elif measured:
            result = f"{measured} ({ci}; {verdict})" if with_ci else f"{measured} ({verdict})"
        else:
            result = verdict
        m[base + "Result"] = result
    return m


def host_facts_of(studies: Sequence[StudyTables]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each host's facts and media states (:func:`dbmatrix.analyse.host_facts.merge_host_facts` of the
    studies' processed host records)."""
    return merge_host_facts([st.host_record() for st in studies])


def _study_sha(st: StudyTables) -> str:
    return plots.data_hash(st.analysis.runs, st.analysis.cells) if st.a is not None else "none"


def run_dirs(st: StudyTables) -> list[str]:
    """The run directories a study's tables were computed from (completed runs; a Galera study's from
    its replication runs table: :attr:`StudyKind.runs_table`)."""
    name = get_kind(st.kind).runs_table
    runs = st.extra.get(name) if name else None
    if runs is None or "run_id" not in runs:
        runs = st.a.runs if st.a is not None else pd.DataFrame()
    if "run_id" not in runs:
        return []
    return [_rel(st.store.raw / r) for r in sorted(runs["run_id"])]


def _rel(p: Path) -> str:
    from dbmatrix.paths import display_path

    return display_path(p)


def write_tables(st: StudyTables, generated_dir: Path, primary: bool) -> list[Path]:
    """A study's standard tables: the primary study's cells, effects and declared comparisons under their
    usual names; another study's cells table as ``table-<prefix>-cells.tex`` (a kind's own tables are
    written by its paper hooks)."""
    a = st.analysis
    written = []
    if primary:
        table = cells_table(a)
        write_text_atomic(generated_dir / "table-cells.tex", render_table(
            table,
            caption="Per-cell throughput: mean over repetitions with its \\ciPct\\,\\% Student-t CI; "
                    "p95 from histograms merged across repetitions.",
            label="tab:cells", empty="no cells", precision=1,
            column_format="l" * (len(table.columns) - 5) + "rrcrr", wide=len(table.columns) >= 8))
        write_text_atomic(generated_dir / "table-effects.tex", render_table(
            effects_table(a),
            caption="Factor effects on log throughput (main effects and two-way interactions, sum-to-zero "
                    "coding, OLS over repetitions): share of the variance (Type III sums of squares), F test, "
                    "and for main effects the spread between the best and the worst level (x).",
            label="tab:effects", empty="no factor varies in the completed runs", column_format="lrrrrr"))
        write_text_atomic(generated_dir / "table-pairwise.tex", render_table(
            pairwise_table(a),
            caption="Declared comparisons: ratio a/b of geometric-mean throughput with its \\ciPct\\,\\% CI "
                    "(Welch on log throughput between cells that differ only in the compared factor; in a "
                    "fractional design the factorial model's contrast, averaged over the factors named), "
                    "Holm-adjusted p over all comparisons of the study, Hedges' g (two-sample tests); "
                    "means beside (model geometric means for contrasts).",
            label="tab:pairwise", empty="the spec declares no comparisons", precision=0,
            column_format="llcrrrcrr", wide=True))
        written += [generated_dir / n for n in ("table-cells.tex", "table-effects.tex", "table-pairwise.tex")]
    if st.prefix:
        table = cells_table(a)
        name = f"table-{st.prefix}-cells.tex"
        write_text_atomic(generated_dir / name, render_table(
            table, caption=f"Per-cell results of \\texttt{{{paper.latex_escape(st.name)}}}: mean throughput "
                           "over repetitions with its \\ciPct\\,\\% Student-t CI; p95 from merged histograms.",
            label=f"tab:{st.prefix}cells", empty="no cells", precision=1,
            column_format="l" * (len(table.columns) - 5) + "rrcrr"))
        written.append(generated_dir / name)
    return written


def figure_macros(drawn: dict[str, StudyTables], opts: dict[str, Any], judgement: Judgement) -> dict[str, str]:
    """Numbers the figures' paragraphs quote: which cells a figure shows, its baseline, its ranges (a
    model-fitted figure's from the judgement's tables)."""
    m: dict[str, str] = {}
    if "efficiency" in drawn:
        table, base = efficiency_figure_table(drawn["efficiency"])
        m["effBaseline"] = paper.latex_escape(base)
        cpu = table[(table["metric"] == "mysqld_cpu_us_per_txn") & ~table["label"].str.endswith("(baseline)")]
        if not cpu.empty:
            m["effCpuRatioMin"] = fmt_num(cpu["ratio"].min(), 2)
            m["effCpuRatioMax"] = fmt_num(cpu["ratio"].max(), 2)
            m["effCpuBaseline"] = fmt_num(cpu["baseline_mean"].iloc[0], 0)
    if "throughput-over-time" in drawn:
        st = drawn["throughput-over-time"]
        ids, labels = timeline_cells(st, opts.get("timeline_cells"))
        m["timelineCells"] = paper.latex_escape(" and ".join(labels[c] for c in ids))
        steady = st.analysis.steady
        trims = steady.loc[steady["cell_id"].isin(ids), "trim_s"] if "trim_s" in steady else pd.Series([], dtype=float)
        m["timelineMaxTrimS"] = fmt_num(float(trims.max()), 0) if trims.notna().any() else "--"
    if "compression" in drawn:  # what the compression figure shows: lz4 against none per engine
        ft = judgement.figures["compression"].tables
        tps, sizes = ft["tps"], ft["sizes"]
        said: list[str] = []
        for engine, g in tps.groupby("engine", sort=False):
            ratios = _compression_ratios(g)
            shrink = _size_ratio(sizes[sizes["engine"] == engine])
            if shrink is not None:
                m[paper.macro_name("compFigSizeRatio", engine)] = fmt_num(shrink, 2)
            if ratios and shrink is not None:
                name = _ENGINE_WORDS.get(str(engine), str(engine))
                said.append(f"the uncompressed {name} dataset is {fmt_num(shrink, 2)} times "
                            f"its lz4 one, and lz4 gives {name} " + ", ".join(
                                f"{r} of the throughput{f' at {where}' if where else ''}"
                                for where, r in ratios)
                            + (" (where two numbers: the lowest and highest over the media)"
                               if "medium" in g and any("--" in r for _, r in ratios) else ""))
        st = drawn["compression"]
        m["compFigText"] = (f"Figure~\\ref{{fig:compression}} shows the {get_kind(st.kind).noun} "
                            f"(\\texttt{{{paper.latex_escape(st.name)}}}, workload "
                            f"\\texttt{{{paper.latex_escape(st.experiment.workload.name)}}}): "
                            + ("; ".join(said) if said else "no engine has both levels") + ".")
    if "medium-cache" in drawn:  # which study the medium x cache figure is drawn from, on which workload
        st = drawn["medium-cache"]
        m["mediumFigText"] = (f"Figure~\\ref{{fig:medium}} is seed~003's block-cache chart in miniature, on the "
                              f"{get_kind(st.kind).noun} (\\texttt{{{paper.latex_escape(st.name)}}}, workload "
                              f"\\texttt{{{paper.latex_escape(st.experiment.workload.name)}}}).")
    if "block-size" in drawn:
        fb = judgement.figures["block-size"]
        table, a, b = fb.tables["ratios"], fb.labels["a"], fb.labels["b"]
        m["blockLevelA"], m["blockLevelB"] = paper.latex_escape(a), paper.latex_escape(b)
        m["blockRatioMin"] = fmt_num(table["estimate"].min(), 2)
        m["blockRatioMax"] = fmt_num(table["estimate"].max(), 2)
    return m


_ENGINE_WORDS = {"myrocks": "MyRocks", "innodb": "InnoDB"}


def _size_ratio(sizes: pd.DataFrame) -> float | None:
    """none / lz4 on-disk size: the geometric mean over block sizes of the per-block-size ratio of median
    sizes (the lzFourSize claim's reading, so the text and the claims table give one number)."""
    logs = []
    for _, g in (sizes.groupby("block_size", sort=True) if "block_size" in sizes else [((), sizes)]):
        med = g.groupby(g["compression"].astype(str))["data_physical_bytes"].median()
        if {"lz4", "none"} <= set(med.index) and med["lz4"] > 0:
            logs.append(math.log(float(med["none"] / med["lz4"])))
    return math.exp(sum(logs) / len(logs)) if logs else None


def _compression_ratios(g: pd.DataFrame) -> list[tuple[str, str]]:
    """lz4 / none of one engine's compression-figure means, per block size x cache level the table holds
    (in its order), each with where it holds in words ("" when the table has neither); where the table
    also splits by medium (it interacts with compression), the range over the media ("0.20--0.23")."""
    keys = [c for c in ("block_size", "cache_pct") if c in g]
    out = []
    for where, h in (g.groupby(keys, sort=False) if keys else [((), g)]):
        ratios = []
        for _, hm in (h.groupby("medium", sort=False) if "medium" in h else [((), h)]):
            by = hm.set_index(hm["compression"].astype(str))["mean"]
            if {"lz4", "none"} <= set(by.index):
                ratios.append(float(by["lz4"] / by["none"]))
        if not ratios:
            continue
        levels = dict(zip(keys, where if isinstance(where, tuple) else (where,)))
        cache = fmt_num(float(levels.get("cache_pct", 0)), 1).removesuffix(".0")
        words = [f"{levels['block_size']} blocks" if "block_size" in levels else "",
                 f"cache {cache}\\,\\%" if "cache_pct" in levels else ""]
        lo, hi = fmt_num(min(ratios), 2), fmt_num(max(ratios), 2)
        out.append((" and ".join(w for w in words if w), lo if lo == hi else f"{lo}--{hi}"))
    return out


def _section(generated_dir: Path, name: str, body: str | None, not_run: str) -> Path:
    body = body + "\n" if body else not_run + "\n"
    write_text_atomic(generated_dir / name, "% Generated by dbmatrix; do not edit.\n" + body)
    return generated_dir / name


def publish_all(studies: Sequence[StudyTables], profile: str, figures_dir: Path, generated_dir: Path, *,
                judgement: Judgement, not_run: Sequence[str] = (), data_root: str | None = None,
                opts: dict[str, Any] | None = None, paper_src: Path | None = None) -> Published:
    """Figures (PDF+PNG), the claims table, every macro and table of the paper, the generated include
    lists and the provenance, from the studies' processed tables and the build's `judgement` (what the judge
    step wrote, :mod:`dbmatrix.analyse.judgement`): formatted here, never judged. Deterministic: the same
    tables give the same bytes."""
    from dbmatrix.paths import repo_root

    studies = [s for s in studies if get_kind(s.kind).publishable(s)]
    if not studies:
        raise RuntimeError(f"profile {profile}: no study has processed tables (run the analysis first)")
    opts = opts or {}
    paper_src = paper_src or repo_root() / "paper"
    out = draw_figures(studies, figures_dir, judgement, opts=opts)
    out.claims, out.verdicts = judgement.claims, judgement.verdicts
    ctx = HookContext(figures_dir, generated_dir, paper_src, judgement.claims, findings=out.findings)
    bodies = _sections(studies, ctx, out)
    remove_stale_figures(figures_dir, set(out.figures))
    standard, primary = _standard(studies, profile)
    shas = {st.name: _study_sha(st) for st in studies}
    build_sha = plots.data_hash(pd.DataFrame({"experiment": list(shas), "sha": list(shas.values())}))
    macros, hooked = _study_macros(standard, primary, profile, shas, ctx)
    for done in (d for outs in hooked.values() for d in outs):
        out.figures.update(done.figures)  # a paper hook's own figure (scaleout-crossing)
    by_name = {st.name: st for st in studies}
    drawn = {stem: by_name[n] for stem, n in out.figures.items() if n in by_name}
    macros.update(_text_macros(studies, drawn, primary, opts, judgement))
    macros.update(_build_macros(studies, profile, build_sha, len(out.figures)))
    paper.write_macros(macros, generated_dir / "macros.tex")
    written = [generated_dir / "macros.tex"]
    for st in standard:
        written += write_tables(st, generated_dir, st is primary)
        written += [f for done in hooked[st.name] for f in done.written]
    written += _write_claims_tex(judgement, generated_dir)
    written.append(_write(generated_dir, "table-setup.tex", paper.render_setup_table(host_facts_of(studies))))
    written += _write_figure_list(out, generated_dir, paper_src)
    written += [_section(generated_dir, kind.section.file, bodies.get(kind.name), kind.section.not_run)
                for kind in kinds() if kind.section is not None]
    written += _write_provenance(out, studies, shas, build_sha, profile, data_root, not_run, generated_dir)
    out.written = out.written + written
    if out.findings and opts.get("figure_check", "fail") == "fail":
        raise FigureCheckError(out.findings)
    return out


def _standard(studies: Sequence[StudyTables], profile: str) -> tuple[list[StudyTables], StudyTables]:
    """The studies with the standard tables and the primary one among them (the paper needs one)."""
    standard = [s for s in studies if get_kind(s.kind).standard_tables and s.a is not None]
    primary = next((s for s in standard if get_kind(s.kind).primary), standard[0] if standard else None)
    if primary is None:
        raise RuntimeError(f"profile {profile}: no standalone study with data; the paper needs one")
    return standard, primary


def _build_macros(studies: Sequence[StudyTables], profile: str, build_sha: str, n_figures: int) -> dict[str, str]:
    """What the build is: its profile, data digest, studies and figures, the intervals' default level."""
    return {"buildProfile": paper.latex_escape(profile), "buildDataHash": build_sha,
            "nStudies": str(len(studies)),
            "studyList": ", ".join(f"\\texttt{{{paper.latex_escape(s.name)}}}" for s in studies),
            "nFigures": str(n_figures), "ciPct": level_pct(DEFAULT_CONFIDENCE)}


def _write(folder: Path, name: str, text: str) -> Path:
    write_text_atomic(folder / name, text)
    return folder / name


def _sections(studies: Sequence[StudyTables], ctx: HookContext, out: Published) -> dict[str, str | None]:
    """Each kind's paper section (its first study's): the publisher hook's figures and files into `out`;
    kind -> the body of its section's include."""
    bodies: dict[str, str | None] = {}
    for st in studies:
        section = get_kind(st.kind).section
        if section is None or st.kind in bodies:
            continue
        if not section.publisher:
            bodies[st.kind] = section.body
            continue
        done = run_hook(section.publisher, st, ctx)
        out.written += done.written
        out.figures.update(done.figures)
        bodies[st.kind] = done.body
    return bodies


def _study_macros(standard: Sequence[StudyTables], primary: StudyTables, profile: str, shas: dict[str, str],
                  ctx: HookContext) -> tuple[dict[str, str], dict[str, list[HookOutput]]]:
    """The standard studies' macros (the primary study's unprefixed, every study's under its prefix) with
    their kinds' paper hooks' (whose outputs are returned per study)."""
    macros: dict[str, str] = {}
    hooked: dict[str, list[HookOutput]] = {}
    for st in standard:
        base = paper_macros(st.analysis, st.experiment, st.host_record(), profile, shas[st.name])
        hooked[st.name] = [run_hook(h, st, ctx) for h in get_kind(st.kind).paper_hooks]
        for done in hooked[st.name]:
            base.update(done.macros)
        if st is primary:
            macros.update(base)
        if st.prefix:
            macros.update(paper.prefixed(base, st.prefix))
    return macros, hooked


def _text_macros(studies: Sequence[StudyTables], drawn: dict[str, StudyTables], primary: StudyTables,
                 opts: dict[str, Any], judgement: Judgement) -> dict[str, str]:
    """The figures', method's, claims' and decisions' macros of the running text."""
    m = figure_macros(drawn, opts, judgement)
    m.update(caption_macros(drawn, opts))
    m.update(design_macros(drawn, judgement))
    m.update(method_text.warmup_text(studies))
    m.update(method_text.campaigns_text(studies))
    m.update(method_text.sentinel_text(studies))
    m["baselineText"] = method_text.baseline_text(drawn)
    m["designThreatText"] = method_text.design_threat_text(studies)
    m["durationThreatText"] = method_text.duration_threat_text(studies)
    m["windowsText"] = method_text.windows_text(studies)
    m["primaryStudy"] = get_kind(primary.kind).noun
    m.update(method_text.intervals_text(primary))
    m["steadyTrimText"] = method_text.trim_text(primary.analysis.runs, primary.experiment.measure_s,
                                                steady_params(primary.experiment.measure_s)["min_seconds"])
    m.update(claims_macros(judgement.verdicts, judgement.further))
    m["bootCheckText"] = boot_check_text(judgement.boots)
    m["driftMechanismText"] = claims_tex.drift_text(judgement.mechanism)
    m["decisionsText"] = (
        decisions_tex.looks_text(judgement.looks, MAX_CAMPAIGNS, judgement.cost_summary)
        if not judgement.looks.empty else decisions_tex.decisions_text(judgement.cost_summary))
    return m


def _write_claims_tex(j: Judgement, generated_dir: Path) -> list[Path]:
    """The claims', further findings' and decisions' tables, the claims in detail and the method text."""
    table = (decisions_tex.render_looks_table(j.looks, MAX_CAMPAIGNS) if not j.looks.empty
             else decisions_tex.render_decisions_table(j.costs, j.cost_summary))
    return [_write(generated_dir, "table-decisions.tex", table),
            _write(generated_dir, "table-claims.tex", claims_tex.render_claims_table(j.verdicts)),
            _write(generated_dir, "table-further.tex", claims_tex.render_claims_table(j.further, further=True)),
            _write(generated_dir, "claims-details.tex",
                   claims_tex.render_claims_details(j.verdicts, j.further, j.boots, j.mechanism)),
            _write(generated_dir, "claims-method.tex", render_claims_method())]


def section_figures() -> dict[str, str]:
    """Figure stem -> the kind whose own paper section shows it (a kind with a section and figures of its own,
    e.g. the scale-out study's); every other figure is in the results section."""
    from dbmatrix.analyse.kinds.base import STANDARD_FIGURES

    return {stem: kind.name for kind in kinds() if kind.section is not None and kind.section.body
            for stem in kind.figures if stem not in STANDARD_FIGURES}


def _write_figure_list(out: Published, generated_dir: Path, paper_src: Path) -> list[Path]:
    """``figures.tex``: the drawn figures' paper fragments, in the paper's order; ``figures-<kind>.tex`` the
    ones a kind's own section shows (:func:`section_figures`)."""
    fragments = [f"fig-{fd.stem}" for fd in FIGURES if fd.stem in out.figures]
    missing = [f for f in fragments if not (paper_src / f"{f}.tex").is_file()]
    if missing:
        raise FileNotFoundError(f"paper fragments missing for drawn figures: {', '.join(missing)} "
                                f"(expected in {paper_src})")
    owned = section_figures()
    written = [_write(generated_dir, "figures.tex", paper.render_inputs(
        [f for f in fragments if f[4:] not in owned], "The figures drawn from this build's data."))]
    for kind in sorted(set(owned.values())):
        written.append(_write(generated_dir, f"figures-{kind}.tex", paper.render_inputs(
            [f for f in fragments if owned.get(f[4:]) == kind], f"The {kind} section's figures in this build.")))
    return written


def _write_provenance(out: Published, studies: Sequence[StudyTables], shas: dict[str, str], build_sha: str,
                      profile: str, data_root: str | None, not_run: Sequence[str], generated_dir: Path) -> list[Path]:
    """``provenance.tex`` and ``provenance.json`` (tracked: no commit) and ``build.json`` (the commit, and
    whether the tree was dirty, in an untracked sidecar: the committed build's bytes change only when its data
    or its drawing do)."""
    info = [{"experiment": st.name, "kind": st.kind, "spec": _rel(st.spec_path) if st.spec_path else None,
             "spec_digest": st.experiment.digest(), "results_dir": _rel(st.store.root),
             "n_runs": len(run_dirs(st)), "data_sha": shas[st.name], "run_dirs": run_dirs(st)}
            for st in studies]
    tex_file = _write(generated_dir, "provenance.tex", paper.render_provenance(info, not_run))
    _write(generated_dir, "build.json", json.dumps(
        {"git": git_state(), "profile": profile, "data": data_root}, indent=2, sort_keys=True) + "\n")
    provenance = {"profile": profile, "data": data_root, "data_sha": build_sha,
                  "studies": info, "not_run": list(not_run), "figures": dict(sorted(out.figures.items())),
                  "skipped_figures": out.skipped, "figure_findings": [str(f) for f in out.findings]}
    return [tex_file, _write(generated_dir, "provenance.json", json.dumps(provenance, indent=2, sort_keys=True) + "\n")]
