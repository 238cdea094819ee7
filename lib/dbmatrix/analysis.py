"""From raw runs to processed tables (notebook 20), and to figures and paper inputs (notebook 30).

Deterministic: the same raw data gives byte-identical CSV/Parquet tables, figures and LaTeX files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from . import paper, plots, sysbench
from .paths import git_state
from .spec import FACTORS, Experiment
from .stats import cell_summary, ratios_to_baseline
from .store import ResultStore, write_text_atomic

MiB = 1024 * 1024


@dataclass
class Analysis:
    runs: pd.DataFrame
    cells: pd.DataFrame
    latency: pd.DataFrame
    ratios: pd.DataFrame
    failed: pd.DataFrame


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    write_text_atomic(path, df.to_csv(index=False, float_format="%.6g", lineterminator="\n"))


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    df.to_parquet(tmp, index=False)
    tmp.replace(path)


def cell_latency(histograms: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Latency percentiles per cell from histograms merged across repetitions (counts added)."""
    rows = []
    ok = set(runs["run_id"])
    h = histograms[histograms["run_id"].isin(ok)]
    for cell_id, g in h.groupby("cell_id", sort=True):
        merged = sysbench.merge_histograms(*[
            list(zip(x["value_ms"], x["count"])) for _, x in g.groupby("run_id", sort=True)])
        rows.append({"cell_id": cell_id, "runs": g["run_id"].nunique(),
                     "events": int(sum(c for _, c in merged)),
                     **{f"p{q}_ms": sysbench.histogram_percentile(merged, q) for q in (50, 95, 99)},
                     "max_bucket_ms": merged[-1][0] if merged else float("nan")})
    return pd.DataFrame(rows)


def baseline_factor(exp: Experiment) -> tuple[str, Any]:
    """The factor compared against a baseline level: the spec's baseline, else the highest cache %."""
    if exp.baseline:
        factor = next(iter(exp.baseline))
        return factor, exp.baseline[factor]
    return "cache_pct", max(exp.factors["cache_pct"])


def analyse(store: ResultStore, exp: Experiment) -> Analysis:
    """Tidy tables under processed/: runs, per-second intervals, histograms, cell summaries, ratios."""
    runs = store.load_runs()
    if runs.empty:
        raise RuntimeError(f"no completed runs in {store.root}: run the matrix first (notebook 10 or "
                           "`dbmatrix run`)")
    allruns = store.load_runs(include_failed=True)
    failed = allruns[allruns["status"] != "ok"][["run_id", "cell_id", "host", "status"]] \
        if not allruns.empty else allruns
    cells = cell_summary(runs, "tps", by=["cell_id", *FACTORS])
    latency = cell_latency(store.load_histograms(), runs)
    cells = cells.merge(latency, on="cell_id", how="left")
    factor, level = baseline_factor(exp)
    others = [f for f in FACTORS if f != factor and runs[f].nunique() > 1]
    ratios = ratios_to_baseline(runs, factor, level, "tps", others)
    out = store.processed
    _write_csv(runs, out / "runs.csv")
    _write_csv(cells, out / "cells.csv")
    _write_csv(ratios, out / "ratios.csv")
    _write_csv(failed, out / "failed.csv")
    _write_parquet(store.load_intervals(), out / "intervals.parquet")
    _write_parquet(store.load_histograms(), out / "histograms.parquet")
    return Analysis(runs, cells, latency, ratios, failed)


def load_processed(store: ResultStore) -> Analysis:
    p = store.processed
    if not (p / "cells.csv").is_file():
        raise RuntimeError(f"no processed tables in {p}: run the analysis first (notebook 20)")
    cells = pd.read_csv(p / "cells.csv")
    return Analysis(pd.read_csv(p / "runs.csv"), cells, cells, pd.read_csv(p / "ratios.csv"),
                    pd.read_csv(p / "failed.csv"))


def _fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}".replace(",", "{,}")


def paper_macros(a: Analysis, exp: Experiment, store: ResultStore, profile: str,
                 data_sha: str) -> dict[str, str]:
    """Every number the paper's text quotes."""
    facts_files = sorted(store.hosts.glob("*.json"))
    facts = json.loads(facts_files[0].read_text()) if facts_files else {}
    runs = a.runs
    m: dict[str, str] = {
        "studyProfile": profile,
        "studyExperiment": paper.latex_escape(exp.name),
        "nRuns": str(len(runs)),
        "nFailedRuns": str(len(a.failed)),
        "nCells": str(runs["cell_id"].nunique()),
        "nRepetitions": str(exp.repetitions),
        "measureSeconds": str(exp.measure_s),
        "warmupSeconds": str(exp.warmup_s),
        "workloadName": paper.latex_escape(exp.workload.name),
        "nTables": str(exp.workload.tables),
        "tableRows": _fmt(exp.workload.table_size),
        "randType": paper.latex_escape(exp.workload.rand_type),
        "planSeed": str(exp.seed),
        "mariadbVersion": paper.latex_escape(str(facts.get("mariadb_version", "unknown"))),
        "sysbenchVersion": paper.latex_escape(str(facts.get("sysbench_version", "unknown"))),
        "cpuModel": paper.latex_escape(str(facts.get("cpu_model", "unknown"))),
        "nCpus": str(facts.get("online_cpus", "?")),
        "memGiB": _fmt((facts.get("mem_total_bytes") or 0) / 2**30, 0),
        "kernelVersion": paper.latex_escape(str(facts.get("kernel", "unknown"))),
        "dataHash": data_sha,
        "gitCommit": str(git_state().get("commit") or "unknown")[:12],
        "threadsUsed": ", ".join(str(t) for t in exp.factors["threads"]),
        "dataPhysMiB": _fmt(runs["data_physical_bytes"].median() / MiB, 0),
        "dataLogicalMiB": _fmt(runs["data_logical_bytes"].median() / MiB, 0),
        "maxCvPct": _fmt(a.cells["cv"].max() * 100, 1) if a.cells["cv"].notna().any() else "--",
    }
    for _, c in a.cells.iterrows():
        base = paper.macro_name("cell", c["cell_id"])
        m[base + "Tps"] = _fmt(c["mean"])
        m[base + "TpsLo"] = _fmt(c["ci_lo"]) if pd.notna(c["ci_lo"]) else "--"
        m[base + "TpsHi"] = _fmt(c["ci_hi"]) if pd.notna(c["ci_hi"]) else "--"
        m[base + "PNinetyFive"] = _fmt(c["p95_ms"], 2)
    # The headline comparison: the smallest cache level against the baseline (first group).
    r = a.ratios[a.ratios["ratio"].notna()]
    if not r.empty:
        low = r.sort_values("cache_pct" if "cache_pct" in r else "ratio", kind="stable").iloc[0]
        m.update({
            "lowCachePct": _fmt(low.get("cache_pct", float("nan"))),
            "highCachePct": _fmt(low["baseline"]),
            "lowCacheTps": _fmt(low["mean"]),
            "highCacheTps": _fmt(low["baseline_mean"]),
            "cacheRatio": _fmt(low["ratio"], 2),
            "cacheRatioLo": _fmt(low["ci_lo"], 2) if pd.notna(low["ci_lo"]) else "--",
            "cacheRatioHi": _fmt(low["ci_hi"], 2) if pd.notna(low["ci_hi"]) else "--",
            "cacheSlowdownPct": _fmt((1 - low["ratio"]) * 100, 0),
            "cacheVerdict": seed_verdict(low),
        })
    return m


def seed_verdict(row: pd.Series) -> str:
    """Seed 001 reports more throughput with a larger buffer pool: does our CI say so too?"""
    lo, hi = row["ci_lo"], row["ci_hi"]
    if pd.isna(lo) or pd.isna(hi):
        return "not testable (too few repetitions for an interval)"
    if hi < 1:
        return "consistent with the seed: the smaller cache is slower, and the 95\\,\\% CI excludes 1"
    if lo > 1:
        return "contrary to the seed: the smaller cache is faster, and the 95\\,\\% CI excludes 1"
    return "inconclusive: the 95\\,\\% CI of the ratio includes 1"


def cells_table(a: Analysis) -> pd.DataFrame:
    c = a.cells.sort_values(["engine", "block_size", "threads", "cache_pct"], kind="stable")

    def ci(row: pd.Series) -> str:
        return "--" if pd.isna(row["ci_lo"]) else f"{row['ci_lo']:.0f}--{row['ci_hi']:.0f}"

    return pd.DataFrame({
        "Engine": c["engine"], "Cache %": c["cache_pct"], "Page": c["block_size"], "Thr.": c["threads"],
        "n": c["n"], "TPS": c["mean"].round(0), "95 % CI": c.apply(ci, axis=1),
        "CV %": (c["cv"] * 100).round(1), "p95 ms": c["p95_ms"].round(2),
    })


def publish(store: ResultStore, exp: Experiment, profile: str, figures_dir: Path,
            generated_dir: Path) -> list[Path]:
    """Figures (PDF+PNG) and the paper's generated macros and tables, from the processed tables."""
    a = load_processed(store)
    sha = plots.data_hash(a.runs, a.cells)
    commit = git_state().get("commit")
    fig, _ = plots.throughput_vs_cache(a.cells, a.runs)
    written = plots.save_figure(fig, figures_dir, "throughput-vs-cache", commit=commit, data_sha=sha,
                                title="Throughput vs cache size")
    macros = paper_macros(a, exp, store, profile, sha)
    paper.write_macros(macros, generated_dir / "macros.tex")
    table = paper.render_table(
        cells_table(a),
        caption="Per-cell throughput: mean over repetitions with 95\\,\\% bootstrap CI; "
                "p95 from histograms merged across repetitions.",
        label="tab:cells", column_format="lrlrrrcrr", precision=1)
    write_text_atomic(generated_dir / "table-cells.tex", table)
    written += [generated_dir / "macros.tex", generated_dir / "table-cells.tex"]
    return written
