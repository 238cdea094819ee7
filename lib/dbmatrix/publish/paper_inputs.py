"""The paper's inputs from one study's analysis: number macros and LaTeX tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.figure_data import as_text, level_text
from dbmatrix.analyse.host_facts import first_facts
from dbmatrix.analyse.kinds import get_kind
from dbmatrix.analyse.stats import (
    DRIFT_CONFIDENCE,
    MIN_DRIFT_SAMPLES,
    STABLE_BAND_PCT,
    level_key,
)
from dbmatrix.analyse.tables import UNTESTED, Analysis, MiB
from dbmatrix.analyse.verdict_text import DEFAULT_CONFIDENCE, level_label
from dbmatrix.publish import paper
from dbmatrix.publish.placeholders import NOT_APPLICABLE
from dbmatrix.spec.experiment import FACTORS, WORKLOAD_SCHEMAS, Experiment
from dbmatrix.spec.factors import factor_label, factor_unit, factor_word
from dbmatrix.study import Study

# ------------------------------------------------------------------------------------ paper


def fmt_num(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}".replace(",", "{,}")


def _fmt_p(p: float) -> str:
    if pd.isna(p):
        return NOT_APPLICABLE
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _headline_row(a: Analysis) -> pd.Series | None:
    """The headline cache comparison: from the analysis, else (older processed tables) from the ratios."""
    if not a.headline.empty:
        h = a.headline.iloc[0]
        return pd.Series({"low": h["low"], "high": h["high"], "mean": h["low_mean"],
                          "baseline_mean": h["high_mean"], "ratio": h["ratio"], "ci_lo": h["ci_lo"],
                          "ci_hi": h["ci_hi"], "held": h.get("held"), "pooled_over": h.get("pooled_over"),
                          "boot_ci_lo": h.get("boot_ci_lo"), "boot_ci_hi": h.get("boot_ci_hi"),
                          "estimate": h.get("estimate")})
    r = a.ratios[a.ratios["ratio"].notna()] if "ratio" in a.ratios.columns else a.ratios
    if "factor" in r.columns:  # the ratios against another factor's baseline (a media study's) are not the cache's
        r = r[r["factor"] == "cache_pct"]
    if r.empty or "cache_pct" not in r.columns:
        return None
    low = r.sort_values("cache_pct", kind="stable").iloc[0]
    return pd.Series({"low": low["cache_pct"], "high": low["baseline"], "mean": low["mean"],
                      "baseline_mean": low["baseline_mean"], "ratio": low["ratio"], "ci_lo": low["ci_lo"],
                      "ci_hi": low["ci_hi"], "held": None, "pooled_over": None})


CELL_CI = level_label(DEFAULT_CONFIDENCE)  # the cells' and declared comparisons' intervals (the analysis' level)
CACHE_BASIS_TEXT = {"logical": "logical (uncompressed)", "physical": "physical (on-disk)"}


def cache_basis_text(runs: pd.DataFrame) -> str:
    """What the runs' cache_pct is a percentage of, in words (runs without the column: physical, as
    manifests without cache_basis were)."""
    col = runs["cache_basis"] if "cache_basis" in runs.columns else pd.Series(["physical"] * len(runs))
    bases = sorted(set(col.fillna("physical")))
    if len(bases) == 1:
        return CACHE_BASIS_TEXT.get(bases[0], paper.latex_escape(bases[0]))
    return " or ".join(CACHE_BASIS_TEXT.get(b, paper.latex_escape(b)) for b in bases) + " (runs differ)"


def tables_text(exp: Experiment) -> str:
    """The loaded data in words: TPC-C is table sets of warehouses, the oltp workloads tables of rows."""
    w = exp.workload
    if WORKLOAD_SCHEMAS.get(w.name, w.name) == "tpcc":
        return f"{w.tables} table sets of {w.warehouses} warehouse{'s' if w.warehouses != 1 else ''} each"
    return f"{w.tables} tables of {fmt_num(w.table_size)} rows"


def _count_text(lo: int, hi: int) -> str:
    return f"{lo}" if lo == hi else f"{lo}--{hi}"


def repetitions_text(runs: pd.DataFrame) -> str:
    """How many independent cold-start runs each cell has, per campaign as the runs say (a later campaign of
    the Kalibera-Jones allocation runs fewer than the pilot): "3 ... in each of 2 campaigns", or "7 ... over
    3 campaigns (3, 3 and 1 per campaign)"."""
    if runs.empty:
        return "no runs"
    camp = runs["campaign"] if "campaign" in runs else pd.Series(1, index=runs.index)
    per = runs.assign(_c=camp).groupby(["_c", "cell_id"]).size()
    by_camp = per.groupby(level=0).agg(["min", "max"])
    k = len(by_camp)
    total = runs.groupby("cell_id").size()
    if k == 1:
        r = by_camp.iloc[0]
        return (f"{_count_text(int(r['min']), int(r['max']))} independent cold-start repetitions per cell in its "
                "one campaign")
    if by_camp["min"].nunique() == 1 and by_camp["max"].nunique() == 1:
        r = by_camp.iloc[0]
        return (f"{_count_text(int(r['min']), int(r['max']))} independent cold-start repetitions per cell in each "
                f"of {k} campaigns")
    each = [_count_text(int(r["min"]), int(r["max"])) for _, r in by_camp.iterrows()]
    listed = paper.and_list(each)
    return (f"{_count_text(int(total.min()), int(total.max()))} independent cold-start runs per cell over {k} "
            f"campaigns ({listed} per campaign)")


def paper_macros(a: Analysis, exp: Experiment, host_record: dict[str, Any], profile: str,
                 data_sha: str) -> dict[str, str]:
    """Every number the paper's text quotes (host facts from the study's processed host record)."""
    facts = first_facts(host_record)
    runs = a.runs
    m: dict[str, str] = {
        "studyProfile": profile,
        "studyExperiment": paper.latex_escape(exp.name),
        "nRuns": str(len(runs)),
        "nFailedRuns": str(len(a.failed)),
        "nCells": str(runs["cell_id"].nunique()),
        "nRepetitions": str(exp.repetitions),
        "repetitionsText": repetitions_text(runs),
        "measureSeconds": str(exp.measure_s),
        "warmupSeconds": str(exp.warmup_s),
        "workloadName": paper.latex_escape(exp.workload.name),
        "tablesText": tables_text(exp),
        "randType": paper.latex_escape(exp.workload.rand_type),
        "strings": paper.latex_escape(f"workload.strings: {exp.workload.strings}"),
        "planSeed": str(exp.seed),
        "mariadbVersion": paper.latex_escape(str(facts.get("mariadb_version", "unknown"))),
        "sysbenchVersion": paper.latex_escape(str(facts.get("sysbench_version", "unknown"))),
        "cpuModel": paper.latex_escape(str(facts.get("cpu_model", "unknown"))),
        "nCpus": str(facts.get("online_cpus", "?")),
        "memGiB": fmt_num((facts.get("mem_total_bytes") or 0) / 2**30, 0),
        "kernelVersion": paper.latex_escape(str(facts.get("kernel", "unknown"))),
        "dataHash": data_sha,
        # outside a git checkout (a copy, a tarball) there is no commit to name: say so, not "unknown"
        "threadsUsed": ", ".join(str(t) for t in exp.factors["threads"]),
        "dataPhysMiB": fmt_num(runs["data_physical_bytes"].median() / MiB, 0),
        "dataLogicalMiB": fmt_num(runs["data_logical_bytes"].median() / MiB, 0),
        "cacheBasis": cache_basis_text(runs),
        "maxCvPct": fmt_num(a.cells["cv"].max() * 100, 1) if a.cells["cv"].notna().any() else "--",
        # the sentence the text uses, whatever the data (one run per cell has no spread to report)
        "maxCvText": (f"reached {fmt_num(a.cells['cv'].max() * 100, 1)}\\,\\%" if a.cells["cv"].notna().any()
                      else "could not be measured (one run per cell)"),
        "designName": paper.latex_escape(str(getattr(exp, "design", "full"))),
        "nNotSteadyRuns": _count(runs, "steady_reason", lambda s: s == "drift"),
        "nUntestedRuns": _count(runs, "steady_reason", lambda s: s.isin(UNTESTED)),
        "nUndeterminedRuns": _count(runs, "steady_reason", lambda s: s == "undetermined"),
        "nStableRuns": _count(runs, "steady_reason", lambda s: s == ""),
        "steadyTrimMethod": _trim_methods(runs),
        "stableBandPct": fmt_num(STABLE_BAND_PCT, 0),
        "driftMinSeconds": str(MIN_DRIFT_SAMPLES),
        "driftCiPct": fmt_num(DRIFT_CONFIDENCE * 100, 0),
        "nNoisyCells": str(int(a.noise["noisy"].astype(bool).sum())) if "noisy" in a.noise else "--",
        "noiseMaxCvPct": fmt_num(getattr(getattr(exp, "noise", None), "max_cv_pct", 10.0), 0),
    }
    for _, c in a.cells.iterrows():
        base = paper.macro_name("cell", c["cell_id"])
        m[base + "Tps"] = fmt_num(c["mean"])
        m[base + "TpsLo"] = fmt_num(c["ci_lo"]) if pd.notna(c["ci_lo"]) else "--"
        m[base + "TpsHi"] = fmt_num(c["ci_hi"]) if pd.notna(c["ci_hi"]) else "--"
        m[base + "PNinetyFive"] = fmt_num(c["p95_ms"], 2) if pd.notna(c["p95_ms"]) else "--"
    m.update(_headline_macros(_headline_row(a)))
    m.update(headline_split_macros(a))
    m.update(_effects_macros(a))
    m.update(_design_macros(exp, runs))
    return m


ROMAN = {3: "III", 4: "IV", 5: "V", 6: "VI", 7: "VII", 8: "VIII", 9: "IX"}


def _design_macros(exp: Experiment, runs: pd.DataFrame) -> dict[str, str]:
    """How the design is described in the text: its fraction, the varied factors, the media (emulated
    ones say so)."""
    info = exp.design_info()
    varied = info["factors"]
    if info["design"] == "fractional":
        k, p = len(varied), len(info["generators"])
        text = (f"a $2^{{{k}-{p}}}$ fraction of resolution~{ROMAN.get(info['resolution'], info['resolution'])} "
                f"(generator{'s' if p > 1 else ''} "
                + ", ".join(f"${g}$" for g in info["generators"]) + ")")
    elif info["design"] == "crossed":
        k = len(info["letters"])
        text = (f"a $2^{{{k}-1}}$ half fraction of the two-level factors (generator ${info['generators'][0]}$, "
                "main effects aliased with two-factor interactions) crossed with every level of "
                + ", ".join(paper.latex_escape(factor_word(f)) for f in info["crossed_with"]))
    else:
        text = "the full factorial"
    media = []
    for name in exp.factors["medium"]:
        emu = runs.loc[runs["medium"] == name, "emulated"].dropna() if "emulated" in runs else pd.Series([])
        label = paper.latex_escape(str(name))
        media.append(f"{label} (emulated {paper.latex_escape(str(emu.iloc[0]))})" if len(emu) else label)
    return {
        "designText": text,
        "designChoiceText": design_choice_text(info),
        "levelsText": levels_text({f: len(exp.factors[f]) for f in varied}),
        "nVariedFactors": str(len(varied)),
        "variedFactors": paper.latex_escape(", ".join(PROSE.get(f, factor_word(f)) for f in varied) or "none"),
        "mediaList": ", ".join(media),
        "nDesignCells": str(info["cells"]),
        "nFullCells": str(int(np.prod([len(exp.factors[f]) for f in varied])) if varied else "1"),
    }


PROSE = {"cache_pct": "cache size", "block_size": "block size", "threads": "client threads"}  # factors in a sentence

NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def levels_text(levels: dict[str, int]) -> str:
    """How many levels the varied factors have, in words: "at two levels each", or "at two levels each,
    medium at three"."""
    if not levels:
        return "at one level"
    counts = sorted(levels.values())
    common = max(set(counts), key=lambda n: (counts.count(n), -n))
    others = [f"{paper.latex_escape(f)} at {NUMBER_WORDS.get(n, str(n))}" for f, n in levels.items() if n != common]
    return f"at {NUMBER_WORDS.get(common, str(common))} levels each" + (", " + ", ".join(others) if others else "")


def design_choice_text(info: dict[str, Any]) -> str:
    """What the design's cells allow the model to estimate, by the design's kind and resolution."""
    if info["design"] == "full":
        return "every combination, so every main effect and interaction is estimable"
    if info["design"] == "crossed":
        return ("so the two-level factors' main effects are aliased with their two-way interactions (a claim "
                "that needs such a contrast is refused at plan time, or marked not identified)")
    r = int(info["resolution"])
    if r >= 5:
        return ("chosen so that every main effect and every two-way interaction is estimable, aliased only with "
                "interactions of three or more factors")
    if r == 4:
        return ("chosen so that every main effect is estimable free of two-way interactions; two-way interactions "
                "are aliased with each other")
    return "so main effects are aliased with two-way interactions"


def _trim_methods(runs: pd.DataFrame) -> str:
    """The warm-up truncation(s) the runs used, e.g. 'MSER-2' ('none' when no run was truncated)."""
    if "trim_method" not in runs.columns:
        return "--"
    used = sorted({str(m) for m in runs["trim_method"].dropna() if str(m) != "none"})
    return paper.latex_escape(" and ".join(used)) if used else "not applied: the windows are too short"


def _count(df: pd.DataFrame, col: str, pred: Any) -> str:
    return str(int(pred(df[col]).sum())) if col in df.columns else "--"


def _headline_macros(h: pd.Series | None) -> dict[str, str]:
    keys = ("lowCachePct", "highCachePct", "lowCacheTps", "highCacheTps", "cacheRatio", "cacheRatioLo",
            "cacheRatioHi", "cacheSlowdownPct", "cacheRatioBootLo", "cacheRatioBootHi")
    if h is None:
        return {**{k: "--" for k in keys}, "cacheVerdict": "not testable (one cache level only)",
                "cacheHeldLevels": "--", "cacheComparisonBasis": "--"}
    held = as_text(h.get("held")).replace(";", ", ")
    pooled = as_text(h.get("pooled_over"))
    return {
        "lowCachePct": f"{float(h['low']):g}",  # a level as the spec names it: 8.5, not rounded to 8
        "highCachePct": f"{float(h['high']):g}",
        "lowCacheTps": fmt_num(h["mean"]),
        "highCacheTps": fmt_num(h["baseline_mean"]),
        "cacheRatio": fmt_num(h["ratio"], 2),
        "cacheRatioLo": fmt_num(h["ci_lo"], 2) if pd.notna(h["ci_lo"]) else "--",
        "cacheRatioHi": fmt_num(h["ci_hi"], 2) if pd.notna(h["ci_hi"]) else "--",
        "cacheSlowdownPct": fmt_num((1 - h["ratio"]) * 100, 0),
        "cacheRatioBootLo": fmt_num(h["boot_ci_lo"], 2) if pd.notna(h.get("boot_ci_lo")) else "--",
        "cacheRatioBootHi": fmt_num(h["boot_ci_hi"], 2) if pd.notna(h.get("boot_ci_hi")) else "--",
        "cacheVerdict": seed_verdict(h),
        "cacheHeldLevels": paper.latex_escape(held or (f"pooled over {pooled}" if pooled else "none")),
        "cacheComparisonBasis": (
            "the factorial model's main effect of the cache, averaged over the other factors' levels"
            if as_text(h.get("estimate")) else
            "cells that share the other factors' levels (" + paper.latex_escape(held) + ")" if held else
            "the cells of the two cache levels"),
    }


def _ci_text(lo: Any, hi: Any) -> str:
    return "no CI" if pd.isna(lo) or pd.isna(hi) else f"\\ciPct\\,\\% CI {fmt_num(lo, 2)}--{fmt_num(hi, 2)}"


def _held_text(held: Any, skip: str = "") -> str:
    parts = [kv.split("=", 1) for kv in as_text(held).split(";") if "=" in kv]
    return ", ".join(f"{factor_word(f)} {paper.latex_escape(v)}{factor_unit(f)}" for f, v in parts if f != skip)


def headline_split_macros(a: Analysis) -> dict[str, str]:
    """The headline cache ratio as the text quotes it (``cacheRatioText``): one ratio with its CI, or, when
    the cache interacts significantly with another factor (the analysis split the headline ``by`` it), one
    per level of that factor (``cacheRatio<Level>``, ``...Lo``, ``...Hi``), never one averaged over it.
    ``cacheVerdict`` and ``cacheComparisonBasis`` follow; ``cacheRatioBy`` names the factor ("--" when not
    split). ``lowCacheTps``/``highCacheTps`` become the mean over every run at each cache level."""
    h = a.headline
    if h.empty or "by" not in h.columns or not as_text(h["by"].iloc[0]):
        row = _headline_row(a)
        text = "--" if row is None else f"{fmt_num(row['ratio'], 2)} ({_ci_text(row['ci_lo'], row['ci_hi'])})"
        return {"cacheRatioText": text, "cacheRatioBy": "--"}
    by = str(h["by"].iloc[0])
    m: dict[str, str] = {"cacheRatioBy": paper.latex_escape(factor_word(by))}
    parts, verdicts = [], []
    for _, r in h.iterrows():
        level = level_text(r["by_level"])
        name = paper.macro_name("cacheRatio", level)
        m[name] = fmt_num(r["ratio"], 2)
        m[name + "Lo"] = fmt_num(r["ci_lo"], 2) if pd.notna(r["ci_lo"]) else "--"
        m[name + "Hi"] = fmt_num(r["ci_hi"], 2) if pd.notna(r["ci_hi"]) else "--"
        where = f"{factor_word(by)} {paper.latex_escape(level)}{factor_unit(by)}"
        parts.append(f"{fmt_num(r['ratio'], 2)} ({_ci_text(r['ci_lo'], r['ci_hi'])}) with {where}")
        verdicts.append(f"{where}: {seed_verdict(r)}")
    first = h.iloc[0]
    held = _held_text(first.get("held"), skip=by)
    # the levels the ratios hold at travel with them (the abstract quotes this text on its own)
    m["cacheRatioText"] = (", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
                           + (f", at {held}" if held else ""))
    m["cacheVerdict"] = "; ".join(verdicts)
    averaged = [factor_word(f) for f in as_text(first.get("averaged_over")).split(",") if f]
    how = ("the factorial model's contrast of the two cache levels" if as_text(first.get("estimate"))
           else "the cells of the two cache levels")
    m["cacheComparisonBasis"] = (
        f"{how} per {factor_word(by)} (its interaction with the cache is significant, so no ratio is "
        f"averaged over it)" + (f", with {held}" if held else "")
        + (f", averaged over {', '.join(averaged)}" if averaged else ""))
    runs = a.runs
    if "rate_fraction" in runs.columns:
        runs = runs[pd.to_numeric(runs["rate_fraction"], errors="coerce").fillna(0) == 0]
    for key, level in (("lowCacheTps", first["low"]), ("highCacheTps", first["high"])):
        sel = pd.to_numeric(runs["cache_pct"], errors="coerce") == float(level)
        m[key] = fmt_num(float(runs.loc[sel, "tps"].mean()))
    return m


def _effects_macros(a: Analysis) -> dict[str, str]:
    m = {"modelName": paper.latex_escape(str(a.model.get("model", "none"))),
         "modelRsqPct": fmt_num(a.model["r2"] * 100, 1) if a.model.get("r2") is not None else "--",
         "topFactor": "--", "topFactorSharePct": "--",
         "nComparisons": str(len(a.pairwise)),
         "nSignificantComparisons": str(int(a.pairwise["significant"].astype(bool).sum()))
         if "significant" in a.pairwise else "0"}
    m["modelFitText"] = (f"$R^2$ = {m['modelRsqPct']}\\,\\%" if a.model.get("r2") is not None
                         else "no fit: too few cells or runs in this build")
    terms = a.anova[a.anova["kind"] != "residual"] if "kind" in a.anova else a.anova
    m["topFactorText"] = ("No factorial model could be fitted to this build's runs (too few cells or runs), so no "
                          "factor's share of the variance is given.")
    if not terms.empty:
        top = terms.sort_values("rank", kind="stable").iloc[0]
        m["topFactor"] = paper.latex_escape(_term_label(top["term"]))
        m["topFactorSharePct"] = fmt_num(top["share_pct"], 0)
        m["topFactorText"] = (f"The factor that explains most of the variance of log throughput is "
                              f"\\emph{{{m['topFactor']}}} ({m['topFactorSharePct']}\\,\\%).")
    return m


def seed_verdict(row: pd.Series) -> str:
    """Seed 001 reports more throughput with a larger buffer pool: does our CI say so too?"""
    lo, hi = row["ci_lo"], row["ci_hi"]
    if pd.isna(lo) or pd.isna(hi):
        return "not testable (too few repetitions for an interval)"
    if hi < 1:
        return "consistent with the seed: the smaller cache is slower, and the \\ciPct\\,\\% CI excludes 1"
    if lo > 1:
        return "contrary to the seed: the smaller cache is faster, and the \\ciPct\\,\\% CI excludes 1"
    return "inconclusive: the \\ciPct\\,\\% CI of the ratio includes 1"


def _term_label(term: str) -> str:
    return " x ".join(factor_label(t) for t in str(term).split(" x "))


def cells_table(a: Analysis) -> pd.DataFrame:
    """The paper's per-cell table: the factors that vary (and the cache share), throughput with its CI."""
    c = a.cells
    shown = [f for f in FACTORS if f in c.columns and (f == "cache_pct" or c[f].map(level_key).nunique() > 1)]
    c = c.sort_values(shown or ["cell_id"], kind="stable",
                      key=lambda s: s if pd.api.types.is_numeric_dtype(s) else s.map(str))

    def ci(row: pd.Series) -> str:
        return NOT_APPLICABLE if pd.isna(row["ci_lo"]) else f"{row['ci_lo']:.0f}--{row['ci_hi']:.0f}"

    table = pd.DataFrame({factor_label(f): c[f] for f in shown})
    table["n"] = c["n"]
    table["TPS"] = c["mean"].round(0)
    table[CELL_CI] = c.apply(ci, axis=1)
    table["CV %"] = (c["cv"] * 100).round(1)
    table["p95 ms"] = c["p95_ms"].round(2)
    return table.reset_index(drop=True)


def effects_table(a: Analysis) -> pd.DataFrame:
    """The factorial model's terms ranked by their share of the variance of log throughput."""
    t = a.anova
    if t.empty:
        return pd.DataFrame(columns=["Term", "df", "Share %", "F", "p", "Spread"])
    return pd.DataFrame({
        "Term": t["term"].map(lambda s: "Residual" if s == "residual" else _term_label(s)),
        "df": t["df"].astype(int), "Share %": t["share_pct"].round(1),
        "F": t["F"].map(lambda v: NOT_APPLICABLE if pd.isna(v) else f"{v:.1f}"), "p": t["p"].map(_fmt_p),
        "Spread": t["spread"].map(lambda v: NOT_APPLICABLE if pd.isna(v) else f"{v:.2f}"),
    })


def pairwise_table(a: Analysis) -> pd.DataFrame:
    """The spec's comparisons: ratio of geometric means with its CI (Welch between matched cells; in a
    fractional design the factorial model's contrast, "Held at" naming the factors averaged over),
    Holm-adjusted p, Hedges g (two-sample tests only)."""
    p = a.pairwise
    cols = ["Comparison", "Held at", "n", "TPS a", "TPS b", "Ratio", CELL_CI, "p (Holm)", "g"]
    if p.empty:
        return pd.DataFrame(columns=cols)
    factor_cols = [f for f in FACTORS if f in p.columns]

    def held(row: pd.Series) -> str:
        parts = [f"{factor_label(f)} {level_text(row[f])}" for f in factor_cols
                 if f != row["factor"] and pd.notna(row[f]) and as_text(row[f]) != ""]
        pooled = [factor_label(f) for f in as_text(row.get("pooled_over")).split(",") if f]
        if pooled:
            parts.append("pooled over " + ", ".join(pooled))
        averaged = [factor_label(f) for f in as_text(row.get("averaged_over")).split(",") if f]
        if averaged:  # a model contrast (fractional design)
            parts.append("model, averaged over " + ", ".join(averaged))
        return ", ".join(parts) or "all"

    return pd.DataFrame({
        "Comparison": p.apply(lambda r: f"{factor_label(r['factor'])} "
                                        f"{level_text(r['a'])} / {level_text(r['b'])}", axis=1),
        "Held at": p.apply(held, axis=1),
        "n": p.apply(lambda r: f"{int(r['n_a'])}/{int(r['n_b'])}", axis=1),
        "TPS a": p["mean_a"].round(0), "TPS b": p["mean_b"].round(0),
        "Ratio": p["ratio"].map(lambda v: NOT_APPLICABLE if pd.isna(v) else f"{v:.2f}"),
        CELL_CI: p.apply(lambda r: NOT_APPLICABLE if pd.isna(r["ci_lo"]) else f"{r['ci_lo']:.2f}--{r['ci_hi']:.2f}",
                           axis=1),
        "p (Holm)": p["p_holm"].map(_fmt_p),
        "g": p["hedges_g"].map(lambda v: NOT_APPLICABLE if pd.isna(v) else f"{v:.1f}"),
    })


def render_table(df: pd.DataFrame, caption: str, label: str, empty: str, precision: int = 1,
            column_format: str | None = None, wide: bool = False) -> str:
    """A booktabs table (``table*``, spanning both columns, when ``wide``); a comment when empty."""
    if df.empty:
        return f"% Generated by dbmatrix; do not edit.\n% {label}: {empty}\n"
    fmt = column_format or "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in df.columns)
    tex = paper.render_table(df, caption=caption, label=label, column_format=fmt, precision=precision)
    if wide:
        tex = tex.replace("\\begin{table}", "\\begin{table*}", 1).replace("\\end{table}", "\\end{table*}", 1)
    return tex


def macro_prefixes(studies: list[Study]) -> dict[str, str]:
    """Macro prefix per experiment: its kind's (:attr:`dbmatrix.analyse.kinds.StudyKind.prefix`); a second
    study of the same kind is prefixed by its own name so that no two studies define the same macro."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for s in studies:
        kind = s.kind
        out[s.experiment.name] = get_kind(kind).prefix if kind not in seen else paper.macro_name(s.experiment.name)
        seen.add(kind)
    return out
