"""The whole publication step: figures, claims, paper macros and tables of every study, written once."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.figure_data import (
    StudyTables,
    block_size_table,
    efficiency_figure_table,
    load_study_tables,
    timeline_cells,
)
from dbmatrix.analyse.tables import MiB, write_csv
from dbmatrix.paths import git_state
from dbmatrix.publish import figures as plots
from dbmatrix.publish import paper
from dbmatrix.publish.paper_inputs import (
    cells_table,
    effects_table,
    fmt_num,
    level_text,
    pairwise_table,
    paper_macros,
    render_table,
)
from dbmatrix.publish.registry import FIGURES, Published, draw_figures, remove_stale_figures
from dbmatrix.publish.replication import publish_replication
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore, write_text_atomic

# ------------------------------------------------------------------------------------ the whole build


def claims_evidence(studies: Sequence[StudyTables]) -> list[Any]:
    """What each study offers the claims (:class:`dbmatrix.publish.claims.Evidence`): its runs, design,
    host CPU counts, Galera's effect and runs tables, the scale-out tables, and per campaign the Galera and
    scale-out tables recomputed from that campaign's runs alone."""
    from dbmatrix.publish.claims import Evidence

    cpus = {str(f.get("host")): int(f["logical_cpus"]) for f, _ in host_facts_of(studies)
            if f.get("logical_cpus")}
    out = []
    for st in studies:
        runs = st.runs if st.a is not None else pd.DataFrame()
        extra = {k: v for k, v in st.extra.items() if k.startswith("scaleout-")}
        if "replication-runs" in st.extra:
            extra["replication-runs"] = st.extra["replication-runs"]
        out.append(Evidence(st.name, st.kind, runs, dict(st.experiment.factors),
                            st.extra.get("replication-effects"), st.a.hosts if st.a is not None else None,
                            extra, design=st.experiment.design_info(), host_cpus=cpus,
                            campaign_extra=campaign_tables(st)))
    return out


def campaign_tables(st: StudyTables) -> dict[int, dict[str, pd.DataFrame]]:
    """Per campaign (two or more only): the Galera effect and runs tables, or the scale-out tables, of
    that campaign's runs alone (the claims need each campaign's own estimate)."""
    from dbmatrix.analyse import replication as repl
    from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
    from dbmatrix.analyse.scaleout import scaleout_tables

    if st.kind == "galera":
        runs = st.extra.get("replication-runs", pd.DataFrame())
        if runs is None or runs.empty or len(campaigns_of(runs)) < 2:
            return {}
        col = campaign_column(runs)
        return {k: {"replication-runs": runs[col == k],
                    "replication-effects": repl.effects(runs[col == k].reset_index(drop=True))}
                for k in campaigns_of(runs)}
    if st.kind == "scaleout" and st.a is not None and len(campaigns_of(st.runs)) > 1:
        hist_p = st.store.processed / "histograms.parquet"
        hist = pd.read_parquet(hist_p) if hist_p.is_file() else pd.DataFrame()
        iv = st.intervals()
        col = campaign_column(st.runs)
        out = {}
        for k in campaigns_of(st.runs):
            runs = st.runs[col == k]
            ids = set(runs["run_id"])
            out[k] = scaleout_tables(runs, hist[hist["run_id"].isin(ids)] if not hist.empty else hist,
                                     iv[iv["run_id"].isin(ids)] if not iv.empty else iv, [])
        return out
    return {}


def claims_macros(table: pd.DataFrame) -> dict[str, str]:
    """Per claim: its verdict, estimate, interval and the estimate with its interval; and the counts."""
    from dbmatrix.analyse.contrasts import INTERACTION_ALPHA
    from dbmatrix.publish.claims import COMPRESSES, FC_PAUSED, SATURATED, VERDICTS, flips

    m: dict[str, str] = {"nClaims": str(len(table)), "interactionAlpha": f"{INTERACTION_ALPHA:g}",
                         "premiseFcPausedPct": f"{FC_PAUSED.threshold:g}",
                         "premiseCompressesX": f"{COMPRESSES.threshold:g}",
                         "premiseSaturatedPct": f"{SATURATED.threshold * 100:g}"}
    for v in VERDICTS:
        m[paper.macro_name("n", "claims", v)] = str(int((table["verdict"] == v).sum()))
    camps = pd.to_numeric(table["campaigns"], errors="coerce").fillna(0) if "campaigns" in table else pd.Series()
    m["nCampaigns"] = str(int(camps.max())) if len(camps) else "0"
    m["nClaimsSeveralCampaigns"] = str(int((camps > 1).sum()))
    m["nClaimsFlip"] = str(int(flips(table)["flip"].sum())) if len(table) else "0"
    for _, r in table.iterrows():
        base = "claim" + r["id"][:1].upper() + r["id"][1:]
        kind = r["kind"]
        m[base + "Verdict"] = r["verdict"]
        m[base + "Measured"] = paper.claim_measured(r)
        for k in ("estimate", "ci_lo", "ci_hi"):
            name = {"estimate": "Est", "ci_lo": "Lo", "ci_hi": "Hi"}[k]
            m[base + name] = paper.claim_measured({"kind": kind, "estimate": r[k], "ci_lo": math.nan,
                                                   "ci_hi": math.nan})
        est = r["estimate"]
        m[base + "Pct"] = "--" if pd.isna(est) or kind != "ratio" else fmt_num((est - 1) * 100, 0)
        m[base + "Study"] = paper.latex_escape(str(r["study"] or "--"))
        m[base + "Premise"] = paper.latex_escape(str(r.get("premise_value") or "--"))
    return m


def threads_macros(st: StudyTables) -> dict[str, str]:
    """The thread sweep in numbers: levels, the peak's threads and throughput."""
    cells = st.cells
    if "threads" not in cells or cells["threads"].nunique() < 2:
        return {}
    by = cells.groupby("threads", sort=True)["mean"].max()
    peak = by.idxmax()
    return {"minThreads": level_text(by.index.min()), "maxThreads": level_text(by.index.max()),
            "peakThreads": level_text(peak), "peakTps": fmt_num(by.max()),
            "threadLevels": ", ".join(level_text(t) for t in by.index)}


TPCC_COLUMNS = ["cell_id", "n", "tpmC", "ci_lo", "ci_hi", "tps", "hit_ratio", "data_hit_ratio", "data_mib"]


def tpcc_table(st: StudyTables) -> pd.DataFrame:
    """Per cell: tpmC (New-Order transactions per minute), geometric mean over repetitions with a 95 % CI
    (t on log tpmC, variance pooled over the cells: df = runs - cells), all
    transactions per second, the cache hit ratio over the window from the engine's counters (MyRocks:
    all blocks and data blocks; :mod:`dbmatrix.hosts.cache_counters`) and the loaded tables' on-disk size."""
    rows = []
    for _, r in st.runs.iterrows():
        try:
            summary = st.store.parsed(r["run_id"]).summary
        except (OSError, ValueError):
            continue
        tpmc = summary.get("tpmC") or (summary.get("tpcc") or {}).get("tpmC")
        if tpmc is not None:
            rows.append({"cell_id": r["cell_id"], "tpmC": float(tpmc), "tps": float(r["tps"]),
                         **{k: float(pd.to_numeric(r.get(c), errors="coerce"))
                            for k, c in (("hit_ratio", "cache_hit_ratio"), ("data_hit_ratio", "cache_data_hit_ratio"),
                                         ("data_bytes", "data_physical_bytes"))}})
    if not rows:
        return pd.DataFrame(columns=TPCC_COLUMNS)
    df = pd.DataFrame(rows)
    df = df[df["tpmC"] > 0]
    df["log"] = np.log(df["tpmC"])
    # The spread of log tpmC pooled over the cells (the factorial model's assumption: one CV for all cells),
    # so that two repetitions per cell still give a usable interval (t with runs - cells df, not 1).
    groups = df.groupby("cell_id", sort=True)
    dof = len(df) - groups.ngroups
    s2 = float(((df["log"] - groups["log"].transform("mean")) ** 2).sum() / dof) if dof > 0 else math.nan
    t = float(sps.t.ppf(0.975, dof)) if dof > 0 else math.nan
    out = []
    for cid, g in groups:
        mean = float(g["log"].mean())
        half = t * math.sqrt(s2 / len(g)) if dof > 0 else math.nan
        out.append({"cell_id": cid, "n": len(g), "tpmC": math.exp(mean), "ci_lo": math.exp(mean - half),
                    "ci_hi": math.exp(mean + half), "tps": g["tps"].mean(), "hit_ratio": g["hit_ratio"].mean(),
                    "data_hit_ratio": g["data_hit_ratio"].mean(), "data_mib": g["data_bytes"].median() / MiB})
    return pd.DataFrame(out, columns=TPCC_COLUMNS)


def replication_outputs(st: StudyTables, figures_dir: Path, generated_dir: Path,
                        claims: pd.DataFrame | None = None) -> list[Path]:
    """A Galera study's figures, ``replication-macros.tex`` and ``table-replication.tex`` (its verdicts
    are the claims table's: one rule for the whole paper)."""
    return [Path(p) for p in publish_replication(st.store, st.experiment, figures_dir, generated_dir, claims)]


def replication_section(paper_src: Path, published: bool) -> str | None:
    """The body of generated/replication-section.tex: the macros of the replication study (unless its
    section inputs them itself) and paper/replication.tex; None when there is nothing to include."""
    src = paper_src / "replication.tex"
    if not published or not src.is_file():
        return None
    own = "replication-macros" in src.read_text()
    return ("" if own else "\\input{generated/replication-macros.tex}\n") + "\\input{replication}"


def host_facts_of(studies: Sequence[StudyTables]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each host's facts and media states, one entry per inventory host name, in name order.

    Facts: ``hosts/<host>.json`` of the first study that recorded it, else the facts in its runs'
    manifests. Media: the verified states recorded in the manifests of the runs that host measured
    (every study, every medium it used), else ``hosts/<host>.media.json``. The inventory class, where
    declared, from the manifests."""
    facts: dict[str, dict[str, Any]] = {}
    media: dict[str, dict[str, Any]] = {}
    for st in studies:
        for f in sorted(st.store.hosts.glob("*.json")):
            if f.name.endswith(".media.json"):
                continue
            data = json.loads(f.read_text())
            name = str(data.get("host") or f.stem)
            facts.setdefault(name, data)
            media_file = f.with_name(f"{f.stem}.media.json")
            if media_file.is_file():
                media.setdefault(name, {}).setdefault("_file", json.loads(media_file.read_text()))
        for m in st.store.records():
            name = str(m.host or "")
            if not name:
                continue
            if m.host_facts:
                facts.setdefault(name, {"host": name, **m.host_facts})
            if m.host_class and name in facts:
                facts[name].setdefault("host_class", m.host_class)
            for medium, state in sorted(m.media_state.items()):
                media.setdefault(name, {}).setdefault("_runs", {}).setdefault(medium, state)
    out = []
    for name in sorted(facts):
        recorded = media.get(name, {})
        out.append(({**facts[name], "host": name}, recorded.get("_runs") or recorded.get("_file") or {}))
    return out


def _study_sha(st: StudyTables) -> str:
    return plots.data_hash(st.analysis.runs, st.analysis.cells) if st.a is not None else "none"


def run_dirs(st: StudyTables) -> list[str]:
    """The run directories a study's tables were computed from (completed runs; a Galera study's from
    its replication runs table)."""
    runs = st.extra.get("replication-runs") if st.kind == "galera" else None
    if runs is None or "run_id" not in runs:
        runs = st.a.runs if st.a is not None else pd.DataFrame()
    if "run_id" not in runs:
        return []
    return [_rel(st.store.raw / r) for r in sorted(runs["run_id"])]


def _rel(p: Path) -> str:
    from dbmatrix.paths import display_path

    return display_path(p)


def write_tables(st: StudyTables, generated_dir: Path, primary: bool) -> list[Path]:
    """A study's tables: the storage matrix's cells, effects and declared comparisons under their usual
    names; another study's cells table as ``table-<prefix>-cells.tex``."""
    a = st.analysis
    written = []
    if primary:
        table = cells_table(a)
        write_text_atomic(generated_dir / "table-cells.tex", render_table(
            table,
            caption="Per-cell throughput: mean over repetitions with its 95\\,\\% Student-t CI; "
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
            caption="Declared comparisons: ratio a/b of geometric-mean throughput with its 95\\,\\% CI "
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
                           "over repetitions with its 95\\,\\% Student-t CI; p95 from merged histograms.",
            label=f"tab:{st.prefix}cells", empty="no cells", precision=1,
            column_format="l" * (len(table.columns) - 5) + "rrcrr"))
        written.append(generated_dir / name)
    if st.kind == "tpcc":
        t = tpcc_table(st)
        pct = lambda x: "--" if pd.isna(x) else f"{100 * x:.1f}"  # noqa: E731
        show = pd.DataFrame({"Cell": t["cell_id"], "n": t["n"], "tpmC": t["tpmC"].round(0),
                             "95 % CI": [("--" if pd.isna(lo) else f"{lo:.0f}--{hi:.0f}")
                                         for lo, hi in zip(t["ci_lo"], t["ci_hi"])],
                             "TPS": t["tps"].round(0), "hit %": t["hit_ratio"].map(pct),
                             "data hit %": t["data_hit_ratio"].map(pct),
                             "MiB": t["data_mib"].round(1)}) if not t.empty else t
        write_text_atomic(generated_dir / "table-tpcc.tex", render_table(
            show, caption="TPC-C: New-Order transactions per minute (tpmC) per cell, geometric mean over "
                          "repetitions with its 95\\,\\% CI (Student-t on log tpmC with the variance pooled over the "
                          "cells, as the factorial model has it); all transactions per second; the cache hit "
                          "ratio over the window from the engine's status counters (all blocks, and data blocks "
                          "alone); the loaded tables' on-disk size.",
            label="tab:tpcc", empty="no tpmC in the runs", precision=0, column_format="lrrcrrrr"))
        written.append(generated_dir / "table-tpcc.tex")
    return written


def figure_macros(drawn: dict[str, StudyTables], opts: dict[str, Any]) -> dict[str, str]:
    """Numbers the figures' paragraphs quote: which cells a figure shows, its baseline, its ranges."""
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
    if "block-size" in drawn:
        table, a, b = block_size_table(drawn["block-size"])
        m["blockLevelA"], m["blockLevelB"] = paper.latex_escape(a), paper.latex_escape(b)
        m["blockRatioMin"] = fmt_num(table["estimate"].min(), 2)
        m["blockRatioMax"] = fmt_num(table["estimate"].max(), 2)
    return m


def _section(generated_dir: Path, name: str, body: str | None, not_run: str) -> Path:
    body = body + "\n" if body else not_run + "\n"
    write_text_atomic(generated_dir / name, "% Generated by dbmatrix; do not edit.\n" + body)
    return generated_dir / name


def publish_all(studies: Sequence[StudyTables], profile: str, figures_dir: Path, generated_dir: Path, *,
                not_run: Sequence[str] = (), data_root: str | None = None,
                opts: dict[str, Any] | None = None, paper_src: Path | None = None) -> Published:
    """Figures (PDF+PNG), the claims table, every macro and table of the paper, the generated include
    lists and the provenance, from the studies' processed tables. Deterministic: the same tables give the
    same bytes."""
    from dbmatrix.paths import repo_root
    from dbmatrix.publish import claims as claims_mod

    studies = [s for s in studies if s.a is not None or s.kind == "galera"]
    if not studies:
        raise RuntimeError(f"profile {profile}: no study has processed tables (run the analysis first)")
    paper_src = paper_src or repo_root() / "paper"
    commit = git_state().get("commit")
    out = draw_figures(studies, figures_dir, commit=commit, opts=opts)
    macros: dict[str, str] = {}
    table = claims_mod.evaluate(claims_evidence(studies))
    out.claims = table
    repl_include = None
    for st in studies:
        if st.kind == "galera" and repl_include is None:
            files = replication_outputs(st, figures_dir, generated_dir, table)
            out.written += files
            out.figures.update({f.stem: st.name for f in files if f.suffix == ".pdf" and f.parent == figures_dir})
            repl_include = replication_section(paper_src, bool(files))
    remove_stale_figures(figures_dir, set(out.figures))

    standard = [s for s in studies if s.kind != "galera" and s.a is not None]
    primary = next((s for s in standard if s.kind == "storage"), standard[0] if standard else None)
    shas = {st.name: _study_sha(st) for st in studies}
    build_sha = plots.data_hash(pd.DataFrame({"experiment": list(shas), "sha": list(shas.values())}))
    for st in standard:
        base = paper_macros(st.analysis, st.experiment, st.store, profile, shas[st.name])
        if st.kind == "threads":
            base.update(threads_macros(st))
        if st is primary:
            macros.update(base)
        if st.prefix:
            macros.update(paper.prefixed(base, st.prefix))
    by_name = {st.name: st for st in studies}
    macros.update(figure_macros({stem: by_name[n] for stem, n in out.figures.items() if n in by_name},
                                opts or {}))
    macros.update(claims_macros(table))
    macros.update({
        "buildProfile": paper.latex_escape(profile), "buildDataHash": build_sha,
        "nStudies": str(len(studies)),
        "studyList": ", ".join(f"\\texttt{{{paper.latex_escape(s.name)}}}" for s in studies),
        "nFigures": str(len(out.figures)), "ciPct": "95",
    })
    if primary is None:
        raise RuntimeError(f"profile {profile}: no standalone study with data; the paper needs one")
    paper.write_macros(macros, generated_dir / "macros.tex")
    written = [generated_dir / "macros.tex"]
    for st in standard:
        written += write_tables(st, generated_dir, st is primary)
    write_csv(table, generated_dir / "claims.csv")
    write_text_atomic(generated_dir / "table-claims.tex", paper.render_claims_table(table))
    write_text_atomic(generated_dir / "claims-details.tex", paper.render_claims_details(table))
    write_text_atomic(generated_dir / "table-setup.tex", paper.render_setup_table(host_facts_of(studies)))
    fragments = [f"fig-{fd.stem}" for fd in FIGURES if fd.stem in out.figures]
    missing = [f for f in fragments if not (paper_src / f"{f}.tex").is_file()]
    if missing:
        raise FileNotFoundError(f"paper fragments missing for drawn figures: {', '.join(missing)} "
                                f"(expected in {paper_src})")
    write_text_atomic(generated_dir / "figures.tex",
                      paper.render_inputs(fragments, "The figures drawn from this build's data."))
    tpcc = next((s for s in standard if s.kind == "tpcc"), None)
    written += [generated_dir / n for n in ("claims.csv", "table-claims.tex", "claims-details.tex", "table-setup.tex",
                                            "figures.tex")]
    written.append(_section(generated_dir, "replication-section.tex", repl_include,
                            "\\section{Replication: Galera applier threads}\nNot run in this build: the profile "
                            "has no Galera study with completed runs (or the replication analysis is not "
                            "installed), so the seed~002 claims stay untested."))
    written.append(_section(generated_dir, "tpcc-section.tex", "\\input{tpcc}" if tpcc is not None else None,
                            "\\section{TPC-C}\nNot run in this build: the profile has no TPC-C study with "
                            "completed runs; the storage-matrix claims of seed~003 (measured there with "
                            "sysbench-TPCC) are set against the OLTP read-write matrix instead."))
    info = [{"experiment": st.name, "kind": st.kind, "spec": _rel(st.spec_path) if st.spec_path else None,
             "spec_digest": st.experiment.digest(), "results_dir": _rel(st.store.root),
             "n_runs": len(run_dirs(st)), "data_sha": shas[st.name], "run_dirs": run_dirs(st)}
            for st in studies]
    write_text_atomic(generated_dir / "provenance.tex", paper.render_provenance(info, not_run))
    written.append(generated_dir / "provenance.tex")
    out.written = out.written + written
    provenance = {"profile": profile, "data": data_root, "git_commit": commit, "data_sha": build_sha,
                  "studies": info, "not_run": list(not_run), "figures": dict(sorted(out.figures.items())),
                  "skipped_figures": out.skipped}
    write_text_atomic(generated_dir / "provenance.json", json.dumps(provenance, indent=2, sort_keys=True) + "\n")
    out.written.append(generated_dir / "provenance.json")
    return out


def publish(store: ResultStore, exp: Experiment, profile: str, figures_dir: Path,
            generated_dir: Path) -> list[Path]:
    """One study's figures and paper inputs (:func:`publish_all` for a single storage study)."""
    from dbmatrix.study import KIND_PREFIX, study_kind

    kind = study_kind(exp)
    st = load_study_tables(store, exp, kind, KIND_PREFIX[kind] if kind != "storage" else "")
    return publish_all([st], profile, figures_dir, generated_dir).written


