"""From raw runs to processed tables (notebook 20), and to figures and paper inputs (notebook 30).

Deterministic: the same raw data gives byte-identical CSV/Parquet tables, figures and LaTeX files.

The analysed throughput of a run (``tps`` in the processed runs table) is the mean per-second
throughput over its steady window when the run passed the steady-state check
(:func:`dbmatrix.stats.steady_state`), and sysbench's whole-run figure (``tps_sysbench``) otherwise;
runs that never settle stay in the averages but are counted per cell (``n_not_steady``) and flagged
in the noise report (``analyse(..., exclude_not_steady=True)`` drops them instead); runs too short for
the check are counted as ``n_untested``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import paper, plots
from .effects import FactorialFit, factorial_model, pairwise_comparisons
from .paths import git_state
from .spec import FACTORS, Experiment
from .stats import (
    DEFAULT_SEED,
    EFFICIENCY_METRICS,
    bootstrap_ratio_cols,
    cell_summary,
    efficiency,
    level_key,
    merged_percentiles,
    noise_report,
    ratios_to_baseline_cells,
    stable_seed,
    steady_state,
    summarise_cells,
    t_mean_ci,
    welch_log_ratio,
)
from .store import ResultStore, write_text_atomic

MiB = 1024 * 1024
FACTOR_LABELS = {"engine": "Engine", "cache_pct": "Cache %", "block_size": "Page", "compression": "Compr.",
                 "medium": "Medium", "threads": "Thr.", "workload": "Workload", "log_medium": "Log medium",
                 "rate_fraction": "Rate"}
STEADY_RUN_COLUMNS = ("trim_s", "steady_s", "steady", "steady_reason", "drift_pct", "tps_steady",
                      "sec_tps_min", "sec_tps_p1", "sec_tps_p5", "sec_tps_median", "sec_tps_cv", "stall_s",
                      "zero_s")
UNTESTED = ("too_short", "no_intervals")  # steady_reason of runs whose steady state could not be checked
CSV_TABLES = ("runs", "cells", "ratios", "failed", "pairwise", "effects", "anova", "noise", "efficiency",
              "headline")


@dataclass
class Analysis:
    runs: pd.DataFrame
    cells: pd.DataFrame
    latency: pd.DataFrame
    ratios: pd.DataFrame
    failed: pd.DataFrame
    steady: pd.DataFrame = field(default_factory=pd.DataFrame)
    efficiency: pd.DataFrame = field(default_factory=pd.DataFrame)
    pairwise: pd.DataFrame = field(default_factory=pd.DataFrame)
    effects: pd.DataFrame = field(default_factory=pd.DataFrame)
    anova: pd.DataFrame = field(default_factory=pd.DataFrame)
    noise: pd.DataFrame = field(default_factory=pd.DataFrame)
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)
    model: dict[str, Any] = field(default_factory=dict)


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    write_text_atomic(path, df.to_csv(index=False, float_format="%.6g", lineterminator="\n"))


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    df.to_parquet(tmp, index=False)
    tmp.replace(path)


def cell_latency(histograms: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Latency percentiles per cell from histograms merged across repetitions (counts added)."""
    cols = ["cell_id", "runs", "events", "p50_ms", "p95_ms", "p99_ms", "max_bucket_ms"]
    if histograms.empty:
        return pd.DataFrame(columns=cols)
    h = histograms[histograms["run_id"].isin(set(runs["run_id"]))]
    out = merged_percentiles(h, ["cell_id"])
    if out.empty:
        return pd.DataFrame(columns=cols)
    out.insert(1, "runs", h.groupby("cell_id", sort=True)["run_id"].nunique().reindex(out["cell_id"]).to_numpy())
    return out[cols]


def baseline_factor(exp: Experiment) -> tuple[str, Any]:
    """The factor compared against a baseline level: the spec's baseline, else the highest cache %."""
    if exp.baseline:
        factor = next(iter(exp.baseline))
        return factor, exp.baseline[factor]
    return "cache_pct", max(exp.factors["cache_pct"])


def baseline_levels(exp: Experiment) -> dict[str, Any]:
    """The baseline cell's fixed levels: the spec's baseline, else the highest cache %."""
    return dict(exp.baseline) if exp.baseline else {"cache_pct": max(exp.factors["cache_pct"])}


def factor_columns(runs: pd.DataFrame) -> list[str]:
    return [f for f in FACTORS if f in runs.columns]


def _varied(runs: pd.DataFrame, factors: Sequence[str]) -> list[str]:
    return [f for f in factors if runs[f].map(level_key).nunique() > 1]


def closed_loop(runs: pd.DataFrame) -> pd.DataFrame:
    """Closed-loop runs only: open-loop throughput is set by the harness's --rate, not measured."""
    if "rate_fraction" not in runs.columns:
        return runs
    rf = pd.to_numeric(runs["rate_fraction"], errors="coerce").fillna(0)
    return runs[rf == 0]


# ------------------------------------------------------------------------------------ per run


def _num(df: pd.DataFrame, name: str) -> pd.Series:
    if name not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[name], errors="coerce").astype(float)


def prepare_runs(runs: pd.DataFrame, steady: pd.DataFrame, histograms: pd.DataFrame,
                 exp: Experiment) -> pd.DataFrame:
    """The processed runs table: sysbench summary + steady state + efficiency + latency per run."""
    out = runs.copy()
    out["tps_sysbench"] = out["tps"].astype(float)
    cols = [c for c in STEADY_RUN_COLUMNS if c in steady.columns]
    if not steady.empty:
        out = out.merge(steady[["run_id", *cols]], on="run_id", how="left")
    for c in STEADY_RUN_COLUMNS:
        if c not in out.columns:
            out[c] = np.nan
    no_series = out["steady_reason"].isna()
    out["steady"] = out["steady"].where(~no_series, False).astype(bool)
    out["steady_reason"] = out["steady_reason"].where(~no_series, "no_intervals")
    out["tps"] = np.where(out["steady"], out["tps_steady"], out["tps_sysbench"])
    total, txn = _num(out, "total_time_s"), _num(out, "transactions").where(lambda s: s > 0)
    out["err_ps"] = _num(out, "ignored_errors") / total
    out["reconn_ps"] = _num(out, "reconnects") / total
    out["err_per_txn"] = _num(out, "ignored_errors") / txn
    if not histograms.empty:
        lat = merged_percentiles(histograms[histograms["run_id"].isin(set(out["run_id"]))], ["run_id"])
        out = out.merge(lat.drop(columns=["events"]), on="run_id", how="left")
    else:
        for c in ("p50_ms", "p95_ms", "p99_ms", "max_bucket_ms"):
            out[c] = np.nan
    w = exp.workload
    eff = efficiency(out, tables=w.tables, table_size=w.table_size, workload=w.name)
    out = pd.concat([out, eff.drop(columns=["run_id"])], axis=1)
    return out.sort_values("run_id", kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------------ per cell


def cell_table(runs: pd.DataFrame, histograms: pd.DataFrame, factors: list[str],
               seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """Throughput summary per cell (bootstrap and Student-t CIs over repetitions), merged latency
    percentiles, the per-second view (min, p1, stalls), error rates, and the counts of runs that never
    settled (``n_not_steady``) and of runs too short to check (``n_untested``)."""
    cells = cell_summary(runs, "tps", by=["cell_id", *factors], seed=seed)
    t_ci = {cid: t_mean_ci(g["tps"]) for cid, g in runs.groupby("cell_id", sort=True)}
    cells["t_ci_lo"] = cells["cell_id"].map(lambda c: t_ci[c][0])
    cells["t_ci_hi"] = cells["cell_id"].map(lambda c: t_ci[c][1])
    cells = cells.merge(cell_latency(histograms, runs), on="cell_id", how="left")
    g = runs.groupby("cell_id", sort=True)
    extra = pd.DataFrame({
        "tps_sysbench_mean": g["tps_sysbench"].mean(),
        "n_not_steady": g["steady_reason"].agg(lambda s: int((s == "drift").sum())),
        "n_untested": g["steady_reason"].agg(lambda s: int(s.isin(UNTESTED).sum())),
        "sec_tps_min": g["sec_tps_min"].min(),
        "sec_tps_p1_mean": g["sec_tps_p1"].mean(),
        "stall_s": g["stall_s"].sum(min_count=1),
        "err_ps": g["err_ps"].mean(),
        "reconn_ps": g["reconn_ps"].mean(),
        "lat_max_ms": g["lat_max_ms"].max() if "lat_max_ms" in runs.columns else np.nan,
        "emulated": g["emulated"].first() if "emulated" in runs.columns else None,
    }).reset_index()
    return cells.merge(extra, on="cell_id", how="left")


def efficiency_table(runs: pd.DataFrame, factors: list[str], baseline: dict[str, Any],
                     seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """Cell summaries of the efficiency metrics, with each one's ratio to the baseline cell."""
    metrics = [m for m in EFFICIENCY_METRICS if m in runs.columns]
    eff = summarise_cells(runs, metrics, by=["cell_id", *factors], seed=seed)
    if eff.empty:
        return eff
    r = ratios_to_baseline_cells(runs, baseline, factors, list(eff["metric"].unique()), seed=seed)
    r = r[["cell_id", "metric", "baseline_cell_id", "ratio", "ci_lo", "ci_hi"]].rename(
        columns={"ci_lo": "ratio_ci_lo", "ci_hi": "ratio_ci_hi"})
    eff = eff.merge(r, on=["cell_id", "metric"], how="left")
    order = {m: i for i, m in enumerate(EFFICIENCY_METRICS)}
    eff["_o"] = eff["metric"].map(order)
    return eff.sort_values(["cell_id", "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)


def reference_levels(exp: Experiment, runs: pd.DataFrame, factors: list[str]) -> dict[str, Any]:
    """Per factor, the level other comparisons are held at: the baseline's, else the spec's first."""
    ref = {}
    for f in factors:
        present = {level_key(v) for v in runs[f]}
        order = [exp.baseline[f]] if f in exp.baseline else []
        order += list(exp.factors.get(f, ())) + sorted(runs[f].dropna().unique().tolist(), key=str)
        ref[f] = next((v for v in order if level_key(v) in present), None)
    return ref


HEADLINE_COLUMNS = ("factor", "low", "high", "low_cell_id", "high_cell_id", "held", "pooled_over", "n_low",
                    "n_high", "low_mean", "high_mean", "ratio", "ci_lo", "ci_hi", "ratio_gm", "welch_ci_lo",
                    "welch_ci_hi", "welch_p")


def headline_cache_ratio(runs: pd.DataFrame, exp: Experiment, factors: list[str],
                         seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """The paper's headline: the smallest cache level against the baseline's (else the largest), with
    every other varied factor at its reference level (:func:`reference_levels`). If no such pair of cells
    exists (a fractional design), the pair matching the most reference levels; failing that, all runs
    pooled over the other factors. Seeded as the ratio table's row for the same pair of cells."""
    if "cache_pct" not in runs.columns or runs["cache_pct"].nunique() < 2:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    levels = sorted(runs["cache_pct"].dropna().unique().tolist())
    base = exp.baseline.get("cache_pct")
    high = base if base in levels and base != levels[0] else levels[-1]
    low = levels[0]
    others = [f for f in _varied(runs, factors) if f != "cache_pct"]
    ref = reference_levels(exp, runs, others)
    sub = runs[runs["cache_pct"].isin([low, high])]
    pooled: list[str] = []
    if others:
        combos = sub.groupby([sub[f].map(level_key) for f in others], sort=True)["cache_pct"].nunique()
        both = [k if isinstance(k, tuple) else (k,) for k, n in combos.items() if n == 2]
        if both:
            target = tuple(level_key(ref[f]) for f in others)
            best = max(both, key=lambda k: sum(a == b for a, b in zip(k, target)))  # first of the best
            mask = np.logical_and.reduce([sub[f].map(level_key) == k for f, k in zip(others, best)])
            sub = sub[mask]
        else:
            pooled = others
    lo_runs, hi_runs = sub[sub["cache_pct"] == low], sub[sub["cache_pct"] == high]
    cell_lo = lo_runs["cell_id"].iloc[0] if lo_runs["cell_id"].nunique() == 1 else "pooled"
    cell_hi = hi_runs["cell_id"].iloc[0] if hi_runs["cell_id"].nunique() == 1 else "pooled"
    a, b = lo_runs["tps"].astype(float).to_numpy(), hi_runs["tps"].astype(float).to_numpy()
    r, ci_lo, ci_hi = (float(v[0]) for v in bootstrap_ratio_cols(
        a[:, None], b[:, None], seed=stable_seed(seed, f"{cell_lo}|{cell_hi}|tps")))
    held = ";".join(f"{f}={lo_runs[f].iloc[0]}" for f in others if not pooled)
    w = welch_log_ratio(a, b) if (a > 0).all() and (b > 0).all() else {}
    return pd.DataFrame([{
        "factor": "cache_pct", "low": low, "high": high, "low_cell_id": cell_lo, "high_cell_id": cell_hi,
        "held": held, "pooled_over": ",".join(pooled), "n_low": a.size, "n_high": b.size,
        "low_mean": float(a.mean()), "high_mean": float(b.mean()), "ratio": r, "ci_lo": ci_lo, "ci_hi": ci_hi,
        "ratio_gm": w.get("ratio", np.nan), "welch_ci_lo": w.get("ci_lo", np.nan),
        "welch_ci_hi": w.get("ci_hi", np.nan), "welch_p": w.get("p", np.nan),
    }], columns=HEADLINE_COLUMNS)


def model_headline(headline: pd.DataFrame, effects: pd.DataFrame) -> pd.DataFrame:
    """When the headline pair had to be pooled over other factors (a fractional design has no matched
    pair), the factorial model's main effect of cache is the better estimate: the low/high ratio of
    geometric means with the other factors' effects removed, and its model CI. The pooled Welch interval
    stays as ``pooled_ci_lo/hi``."""
    if headline.empty or not headline["pooled_over"].iloc[0]:
        return headline
    main = effects[(effects["term"] == "cache_pct")] if not effects.empty else effects
    if len(main) != 2:
        return headline
    h = headline.copy()
    by_level = {float(r["level_1"]): r for _, r in main.iterrows()}
    lo, hi = by_level.get(float(h["low"].iloc[0])), by_level.get(float(h["high"].iloc[0]))
    if lo is None or hi is None:
        return headline
    half = float(np.log(hi["ci_hi"]) - hi["log_effect"])  # t x se, the same for both levels
    est = float(lo["log_effect"] - hi["log_effect"])
    h["pooled_ci_lo"], h["pooled_ci_hi"] = h["ci_lo"], h["ci_hi"]
    h["ratio"] = math.exp(est)
    h["ci_lo"], h["ci_hi"] = math.exp(est - 2 * half), math.exp(est + 2 * half)
    h["estimate"] = "factorial model main effect"
    return h


def steady_params(measure_s: int) -> dict[str, int]:
    """Steady-state settings for the run length: 5-s batches from 25 s on; shorter runs (the quick
    profile's 10 s) use 2-s batches so the drift test still has five batch means; under 10 s no test."""
    batch = 5 if measure_s >= 25 else 2
    return {"batch_s": batch, "min_seconds": min(20, max(10, measure_s))}


def prefer_t_intervals(df: pd.DataFrame) -> pd.DataFrame:
    """Make the t-based intervals the primary ``ci_lo``/``ci_hi`` columns, keeping the bootstrap ones as
    ``boot_ci_lo``/``boot_ci_hi``.

    Why: with the 3 repetitions of a typical cell the percentile bootstrap cannot reach beyond the data
    and covers the truth only ~75 % (means) to ~81 % (ratios) of the time (tests/unit/test_stats.py
    measures it), while the Student-t interval of a mean and the Welch interval of a log ratio hold their
    95 %. Ratios become ratios of geometric means (``ratio``), the ratio of arithmetic means is kept as
    ``ratio_am``."""
    out = df.copy()
    if "t_ci_lo" in out.columns:
        out = out.rename(columns={"ci_lo": "boot_ci_lo", "ci_hi": "boot_ci_hi"})
        out = out.rename(columns={"t_ci_lo": "ci_lo", "t_ci_hi": "ci_hi"})
    elif "welch_ci_lo" in out.columns:
        out = out.rename(columns={"ci_lo": "boot_ci_lo", "ci_hi": "boot_ci_hi", "ratio": "ratio_am"})
        out = out.rename(columns={"welch_ci_lo": "ci_lo", "welch_ci_hi": "ci_hi", "ratio_gm": "ratio"})
    return out


def analyse_frames(runs: pd.DataFrame, intervals: pd.DataFrame, histograms: pd.DataFrame, exp: Experiment,
                   failed: pd.DataFrame | None = None, *, exclude_not_steady: bool = False) -> Analysis:
    """The whole analysis as a pure function of the loaded tables (what :func:`analyse` writes)."""
    steady = steady_state(intervals if not intervals.empty else pd.DataFrame(columns=["run_id", "t_s", "tps"]),
                          **steady_params(exp.measure_s))
    allruns = prepare_runs(runs, steady, histograms, exp)
    used = allruns[allruns["steady_reason"] != "drift"] if exclude_not_steady else allruns
    if used.empty:
        raise RuntimeError("no runs left to analyse: every run was excluded as never settling")
    factors = factor_columns(used)
    base = baseline_levels(exp)
    cells = cell_table(used, histograms, factors)
    ratios = ratios_to_baseline_cells(used, base, factors)
    pairwise = pairwise_comparisons(used, getattr(exp, "comparisons", ()) or (), factors)
    fit: FactorialFit = factorial_model(closed_loop(used), factors, level_order=exp.factors)
    noise_policy = getattr(exp, "noise", None)
    noise = noise_report(cells, ratios, used,
                         max_cv_pct=getattr(noise_policy, "max_cv_pct", 10.0),
                         target_halfwidth_pct=getattr(noise_policy, "target_halfwidth_pct", None))
    model = {"model": fit.model, "note": fit.note, "n": fit.n, "df_resid": fit.df_resid,
             "r2": None if math.isnan(fit.r2) else round(fit.r2, 6), "factors": fit.factors,
             "response": "log(tps)", "coding": "sum-to-zero", "design": getattr(exp, "design", "full"),
             "runs_used": "closed-loop" + (", never-settled excluded" if exclude_not_steady else "")}
    cells, ratios = prefer_t_intervals(cells), prefer_t_intervals(ratios)
    latency = cells
    return Analysis(
        runs=allruns, cells=cells, latency=latency, ratios=ratios,
        failed=failed if failed is not None else pd.DataFrame(columns=["run_id", "cell_id", "host", "status"]),
        steady=steady, efficiency=efficiency_table(used, factors, base), pairwise=pairwise,
        effects=fit.effects, anova=fit.anova, noise=noise,
        headline=model_headline(prefer_t_intervals(headline_cache_ratio(closed_loop(used), exp, factors)),
                                fit.effects), model=model)


def analyse(store: ResultStore, exp: Experiment, *, exclude_not_steady: bool = False) -> Analysis:
    """Tidy tables under processed/: CSV for the small ones (runs, cells, ratios, pairwise, effects,
    anova, noise, efficiency, headline, failed; model.json), Parquet for the big ones (per-second
    intervals, histograms, per-run steady state)."""
    runs = store.load_runs()
    if runs.empty:
        raise RuntimeError(f"no completed runs in {store.root}: run the matrix first (notebook 10 or "
                           "`dbmatrix run`)")
    allruns = store.load_runs(include_failed=True)
    failed = allruns[allruns["status"] != "ok"][["run_id", "cell_id", "host", "status"]] \
        if not allruns.empty else allruns
    intervals, histograms = store.load_intervals(), store.load_histograms()
    a = analyse_frames(runs, intervals, histograms, exp, failed, exclude_not_steady=exclude_not_steady)
    out = store.processed
    for name in CSV_TABLES:
        _write_csv(getattr(a, name), out / f"{name}.csv")
    _write_parquet(intervals, out / "intervals.parquet")
    _write_parquet(histograms, out / "histograms.parquet")
    _write_parquet(a.steady, out / "steady.parquet")
    write_text_atomic(out / "model.json", json.dumps(a.model, indent=2, sort_keys=True) + "\n")
    return a


def load_processed(store: ResultStore) -> Analysis:
    p = store.processed
    if not (p / "cells.csv").is_file():
        raise RuntimeError(f"no processed tables in {p}: run the analysis first (notebook 20)")

    def csv(name: str) -> pd.DataFrame:
        f = p / f"{name}.csv"
        if not f.is_file() or f.stat().st_size <= 1:
            return pd.DataFrame()
        return pd.read_csv(f)

    cells = csv("cells")
    model = json.loads((p / "model.json").read_text()) if (p / "model.json").is_file() else {}
    steady = pd.read_parquet(p / "steady.parquet") if (p / "steady.parquet").is_file() else pd.DataFrame()
    return Analysis(csv("runs"), cells, cells, csv("ratios"), csv("failed"), steady=steady,
                    efficiency=csv("efficiency"), pairwise=csv("pairwise"), effects=csv("effects"),
                    anova=csv("anova"), noise=csv("noise"), headline=csv("headline"), model=model)


# ------------------------------------------------------------------------------------ paper


def _fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}".replace(",", "{,}")


def _fmt_p(p: float) -> str:
    if pd.isna(p):
        return "--"
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
    if r.empty or "cache_pct" not in r.columns:
        return None
    low = r.sort_values("cache_pct", kind="stable").iloc[0]
    return pd.Series({"low": low["cache_pct"], "high": low["baseline"], "mean": low["mean"],
                      "baseline_mean": low["baseline_mean"], "ratio": low["ratio"], "ci_lo": low["ci_lo"],
                      "ci_hi": low["ci_hi"], "held": None, "pooled_over": None})


def _level_text(v: Any) -> str:
    """A level as printed: 25.0 (a number column with gaps) prints as 25."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def paper_macros(a: Analysis, exp: Experiment, store: ResultStore, profile: str,
                 data_sha: str) -> dict[str, str]:
    """Every number the paper's text quotes."""
    facts_files = sorted(p for p in store.hosts.glob("*.json") if not p.name.endswith(".media.json"))
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
        "designName": paper.latex_escape(str(getattr(exp, "design", "full"))),
        "nNotSteadyRuns": _count(runs, "steady_reason", lambda s: s == "drift"),
        "nUntestedRuns": _count(runs, "steady_reason", lambda s: s.isin(UNTESTED)),
        "nNoisyCells": str(int(a.noise["noisy"].astype(bool).sum())) if "noisy" in a.noise else "--",
        "noiseMaxCvPct": _fmt(getattr(getattr(exp, "noise", None), "max_cv_pct", 10.0), 0),
    }
    for _, c in a.cells.iterrows():
        base = paper.macro_name("cell", c["cell_id"])
        m[base + "Tps"] = _fmt(c["mean"])
        m[base + "TpsLo"] = _fmt(c["ci_lo"]) if pd.notna(c["ci_lo"]) else "--"
        m[base + "TpsHi"] = _fmt(c["ci_hi"]) if pd.notna(c["ci_hi"]) else "--"
        m[base + "PNinetyFive"] = _fmt(c["p95_ms"], 2) if pd.notna(c["p95_ms"]) else "--"
    m.update(_headline_macros(_headline_row(a)))
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
    else:
        text = "the full factorial"
    media = []
    for name in exp.factors["medium"]:
        emu = runs.loc[runs["medium"] == name, "emulated"].dropna() if "emulated" in runs else pd.Series([])
        label = paper.latex_escape(str(name))
        media.append(f"{label} (emulated {paper.latex_escape(str(emu.iloc[0]))})" if len(emu) else label)
    return {
        "designText": text,
        "nVariedFactors": str(len(varied)),
        "variedFactors": paper.latex_escape(", ".join(varied) or "none"),
        "mediaList": ", ".join(media),
        "nDesignCells": str(info["cells"]),
        "nFullCells": str(int(np.prod([len(exp.factors[f]) for f in varied])) if varied else "1"),
    }


def _count(df: pd.DataFrame, col: str, pred: Any) -> str:
    return str(int(pred(df[col]).sum())) if col in df.columns else "--"


def _headline_macros(h: pd.Series | None) -> dict[str, str]:
    keys = ("lowCachePct", "highCachePct", "lowCacheTps", "highCacheTps", "cacheRatio", "cacheRatioLo",
            "cacheRatioHi", "cacheSlowdownPct", "cacheRatioBootLo", "cacheRatioBootHi")
    if h is None:
        return {**{k: "--" for k in keys}, "cacheVerdict": "not testable (one cache level only)",
                "cacheHeldLevels": "--", "cacheComparisonBasis": "--"}
    held = _text(h.get("held")).replace(";", ", ")
    pooled = _text(h.get("pooled_over"))
    return {
        "lowCachePct": _fmt(float(h["low"])),
        "highCachePct": _fmt(float(h["high"])),
        "lowCacheTps": _fmt(h["mean"]),
        "highCacheTps": _fmt(h["baseline_mean"]),
        "cacheRatio": _fmt(h["ratio"], 2),
        "cacheRatioLo": _fmt(h["ci_lo"], 2) if pd.notna(h["ci_lo"]) else "--",
        "cacheRatioHi": _fmt(h["ci_hi"], 2) if pd.notna(h["ci_hi"]) else "--",
        "cacheSlowdownPct": _fmt((1 - h["ratio"]) * 100, 0),
        "cacheRatioBootLo": _fmt(h["boot_ci_lo"], 2) if pd.notna(h.get("boot_ci_lo")) else "--",
        "cacheRatioBootHi": _fmt(h["boot_ci_hi"], 2) if pd.notna(h.get("boot_ci_hi")) else "--",
        "cacheVerdict": seed_verdict(h),
        "cacheHeldLevels": paper.latex_escape(held or (f"pooled over {pooled}" if pooled else "none")),
        "cacheComparisonBasis": (
            "the factorial model's main effect of the cache, averaged over the other factors' levels"
            if _text(h.get("estimate")) else
            "cells that share the other factors' levels (" + paper.latex_escape(held) + ")" if held else
            "the cells of the two cache levels"),
    }


def _effects_macros(a: Analysis) -> dict[str, str]:
    m = {"modelName": paper.latex_escape(str(a.model.get("model", "none"))),
         "modelRsqPct": _fmt(a.model["r2"] * 100, 1) if a.model.get("r2") is not None else "--",
         "topFactor": "--", "topFactorSharePct": "--",
         "nComparisons": str(len(a.pairwise)),
         "nSignificantComparisons": str(int(a.pairwise["significant"].astype(bool).sum()))
         if "significant" in a.pairwise else "0"}
    terms = a.anova[a.anova["kind"] != "residual"] if "kind" in a.anova else a.anova
    if not terms.empty:
        top = terms.sort_values("rank", kind="stable").iloc[0]
        m["topFactor"] = paper.latex_escape(_term_label(top["term"]))
        m["topFactorSharePct"] = _fmt(top["share_pct"], 0)
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


def _term_label(term: str) -> str:
    return " x ".join(FACTOR_LABELS.get(t, t) for t in str(term).split(" x "))


def cells_table(a: Analysis) -> pd.DataFrame:
    """The paper's per-cell table: the factors that vary (and the cache share), throughput with its CI."""
    c = a.cells
    shown = [f for f in FACTORS if f in c.columns and (f == "cache_pct" or c[f].map(level_key).nunique() > 1)]
    c = c.sort_values(shown or ["cell_id"], kind="stable",
                      key=lambda s: s if pd.api.types.is_numeric_dtype(s) else s.map(str))

    def ci(row: pd.Series) -> str:
        return "--" if pd.isna(row["ci_lo"]) else f"{row['ci_lo']:.0f}--{row['ci_hi']:.0f}"

    table = pd.DataFrame({FACTOR_LABELS.get(f, f): c[f] for f in shown})
    table["n"] = c["n"]
    table["TPS"] = c["mean"].round(0)
    table["95 % CI"] = c.apply(ci, axis=1)
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
        "F": t["F"].map(lambda v: "--" if pd.isna(v) else f"{v:.1f}"), "p": t["p"].map(_fmt_p),
        "Spread": t["spread"].map(lambda v: "--" if pd.isna(v) else f"{v:.2f}"),
    })


def pairwise_table(a: Analysis) -> pd.DataFrame:
    """The spec's comparisons: ratio of geometric means with its Welch CI, Holm-adjusted p, Hedges g."""
    p = a.pairwise
    cols = ["Comparison", "Held at", "n", "TPS a", "TPS b", "Ratio", "95 % CI", "p (Holm)", "g"]
    if p.empty:
        return pd.DataFrame(columns=cols)
    factor_cols = [f for f in FACTORS if f in p.columns]

    def held(row: pd.Series) -> str:
        parts = [f"{FACTOR_LABELS.get(f, f)} {_level_text(row[f])}" for f in factor_cols
                 if f != row["factor"] and pd.notna(row[f]) and _text(row[f]) != ""]
        pooled = [FACTOR_LABELS.get(f, f) for f in _text(row.get("pooled_over")).split(",") if f]
        if pooled:
            parts.append("pooled over " + ", ".join(pooled))
        return ", ".join(parts) or "all"

    return pd.DataFrame({
        "Comparison": p.apply(lambda r: f"{FACTOR_LABELS.get(r['factor'], r['factor'])} "
                                        f"{_level_text(r['a'])} / {_level_text(r['b'])}", axis=1),
        "Held at": p.apply(held, axis=1),
        "n": p.apply(lambda r: f"{int(r['n_a'])}/{int(r['n_b'])}", axis=1),
        "TPS a": p["mean_a"].round(0), "TPS b": p["mean_b"].round(0),
        "Ratio": p["ratio"].map(lambda v: "--" if pd.isna(v) else f"{v:.2f}"),
        "95 % CI": p.apply(lambda r: "--" if pd.isna(r["ci_lo"]) else f"{r['ci_lo']:.2f}--{r['ci_hi']:.2f}",
                           axis=1),
        "p (Holm)": p["p_holm"].map(_fmt_p),
        "g": p["hedges_g"].map(lambda v: "--" if pd.isna(v) else f"{v:.1f}"),
    })


def _render(df: pd.DataFrame, caption: str, label: str, empty: str, precision: int = 1,
            column_format: str | None = None, wide: bool = False) -> str:
    """A booktabs table (``table*``, spanning both columns, when ``wide``); a comment when empty."""
    if df.empty:
        return f"% Generated by dbmatrix; do not edit.\n% {label}: {empty}\n"
    fmt = column_format or "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in df.columns)
    tex = paper.render_table(df, caption=caption, label=label, column_format=fmt, precision=precision)
    if wide:
        tex = tex.replace("\\begin{table}", "\\begin{table*}", 1).replace("\\end{table}", "\\end{table*}", 1)
    return tex



# ------------------------------------------------------------------------------------ studies -> paper


@dataclass
class StudyTables:
    """One study's processed tables, as figures, claims and the paper use them."""

    experiment: Experiment
    store: ResultStore
    kind: str = "storage"
    prefix: str = ""
    a: Analysis | None = None
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    spec_path: Path | None = None
    _intervals: pd.DataFrame | None = None

    @property
    def name(self) -> str:
        return self.experiment.name

    @property
    def analysis(self) -> Analysis:
        if self.a is None:
            raise RuntimeError(f"{self.name}: no processed tables")
        return self.a

    @property
    def runs(self) -> pd.DataFrame:
        """Closed-loop runs (open-loop throughput is the harness's --rate, not a measurement)."""
        return closed_loop(self.analysis.runs)

    @property
    def cells(self) -> pd.DataFrame:
        return closed_loop(self.analysis.cells)

    def intervals(self) -> pd.DataFrame:
        if self._intervals is None:
            p = self.store.processed / "intervals.parquet"
            self._intervals = pd.read_parquet(p) if p.is_file() else pd.DataFrame()
        return self._intervals


def load_study_tables(store: ResultStore, exp: Experiment, kind: str = "storage", prefix: str = "",
                      spec_path: Path | None = None) -> StudyTables:
    """The processed tables of a study (and, for a Galera study, the replication tables; its standard
    tables may be absent)."""
    a = load_processed(store) if kind != "galera" or (store.processed / "cells.csv").is_file() else None
    extra: dict[str, pd.DataFrame] = {}
    for f in sorted(store.processed.glob("replication-*.csv")):
        extra[f.stem] = pd.read_csv(f) if f.stat().st_size > 1 else pd.DataFrame()
    return StudyTables(exp, store, kind, prefix, a, extra, spec_path)


def _block_bytes(level: Any) -> float:
    text = str(level).lower()
    mult = {"k": 1024, "m": 1024 * 1024}.get(text[-1:], 1)
    try:
        return float(text.rstrip("km")) * mult
    except ValueError:
        return math.inf


def _levels_of(runs: pd.DataFrame, factor: str, exp: Experiment) -> list[Any]:
    from .claims import ordered_levels

    return ordered_levels(runs[factor], exp.factors.get(factor)) if factor in runs.columns else []


def _require_varied(runs: pd.DataFrame, factor: str, what: str) -> None:
    if factor not in runs.columns or runs[factor].map(level_key).nunique() < 2:
        raise plots.FigureDataError(f"{what}: the study does not vary {factor}")


def _at(runs: pd.DataFrame, **levels: Any) -> dict[str, Any]:
    return {k: v for k, v in levels.items() if k in runs.columns}


def block_size_table(st: StudyTables) -> tuple[pd.DataFrame, str, str]:
    """Throughput ratio smallest/largest block size per engine and cache level (claims.ratio_estimate:
    matched cells, else the two-way model's contrast at that engine and cache level)."""
    from .claims import NotTestable, ratio_estimate

    runs, exp = st.runs, st.experiment
    _require_varied(runs, "block_size", "block size figure")
    blocks = sorted(_levels_of(runs, "block_size", exp), key=_block_bytes)
    a, b = blocks[0], blocks[-1]
    rows = []
    for eng in _levels_of(runs, "engine", exp):
        for cache in _levels_of(runs, "cache_pct", exp):
            try:
                e = ratio_estimate(runs, "tps", "block_size", a, b, _at(runs, engine=eng, cache_pct=cache),
                                   level_order=exp.factors)
            except NotTestable:
                continue
            rows.append({"engine": eng, "cache_pct": cache, "estimate": e.estimate, "ci_lo": e.ci_lo,
                         "ci_hi": e.ci_hi, "basis": e.basis})
    if not rows:
        raise plots.FigureDataError("block size figure: no estimable ratio")
    return pd.DataFrame(rows), str(a), str(b)


def _gm_ci(values: np.ndarray) -> tuple[float, float, float]:
    logs = np.log(values)
    lo, hi = t_mean_ci(logs) if logs.size > 1 else (math.nan, math.nan)
    return math.exp(logs.mean()), math.exp(lo), math.exp(hi)


def adjusted_means(runs: pd.DataFrame, metric: str, by: Sequence[str],
                   level_order: dict[str, Sequence[Any]] | None = None) -> pd.DataFrame:
    """Geometric means of `metric` at every combination of the `by` levels, averaged over the other
    factors by the two-way factorial model (:func:`dbmatrix.claims.fit_log_model`), with 95 % CIs. When
    the two-way model is not estimable on the runs that measured the metric, one main-effects model per
    combination of ``by[:-1]``; with a single cell, the plain geometric mean and its t interval."""
    from .claims import fit_log_model, ordered_levels, positive_values

    data = positive_values(runs, metric)
    by = [f for f in by if f in data.columns]
    cols = [*by, "mean", "ci_lo", "ci_hi", "basis"]
    if data.empty or not by:
        return pd.DataFrame(columns=cols)
    order = level_order or {}
    factors = factor_columns(data)
    levels = {f: ordered_levels(data[f], order.get(f)) for f in by}
    model = fit_log_model(data, factors, metric, level_order=order)
    rows = []
    if model is not None and (model.name == "main+2way" or len([f for f in by if f in model.factors]) <= 1):
        for combo in _product(levels):
            m, lo, hi = model.mean({f: v for f, v in combo.items() if f in model.factors})
            rows.append({**combo, "mean": m, "ci_lo": lo, "ci_hi": hi, "basis": f"{model.name} model"})
        return pd.DataFrame(rows, columns=cols)
    outer, last = by[:-1], by[-1]
    for combo in _product({f: levels[f] for f in outer}):
        sub = data
        for f, v in combo.items():
            sub = sub[sub[f].map(level_key) == level_key(v)]
        m1 = fit_log_model(sub, factors, metric, interactions=False, level_order=order)
        for v in levels[last]:
            if m1 is not None and last in m1.factors:
                m, lo, hi = m1.mean({last: v})
                basis = "main-effects model within " + ", ".join(f"{k}={x}" for k, x in combo.items())
            else:
                vals = sub.loc[sub[last].map(level_key) == level_key(v), metric].astype(float).to_numpy()
                if vals.size == 0:
                    continue
                m, lo, hi = _gm_ci(vals)
                basis = "geometric mean of the runs"
            rows.append({**combo, last: v, "mean": m, "ci_lo": lo, "ci_hi": hi, "basis": basis})
    return pd.DataFrame(rows, columns=cols)


def _product(levels: dict[str, list[Any]]) -> list[dict[str, Any]]:
    from .claims import level_product

    return level_product(levels) if levels else [{}]


def dataset_sizes(runs: pd.DataFrame) -> pd.DataFrame:
    """On-disk size of each dataset (engine x block size x compression), measured once after loading."""
    keys = [f for f in ("engine", "block_size", "compression") if f in runs.columns]
    if "data_physical_bytes" not in runs.columns or not keys:
        return pd.DataFrame(columns=[*keys, "data_physical_bytes"])
    return runs.dropna(subset=["data_physical_bytes"]).groupby(keys, sort=True)[
        "data_physical_bytes"].median().reset_index()


def compression_tables(st: StudyTables) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Throughput and KiB written per transaction per engine x compression (model-adjusted), and the
    dataset sizes."""
    runs, exp = st.runs, st.experiment
    _require_varied(runs, "compression", "compression figure")
    by = ["engine", "compression"]
    tps = adjusted_means(runs, "tps", by, exp.factors)
    writes = adjusted_means(runs, "write_kb_per_txn", by, exp.factors)
    return tps, dataset_sizes(runs), writes


def medium_cache_tables(st: StudyTables) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Throughput and p95 latency per engine x medium x cache level (model-adjusted), with the label of
    the device an emulated medium stands in for."""
    runs, exp = st.runs, st.experiment
    _require_varied(runs, "medium", "medium x cache figure")
    _require_varied(runs, "cache_pct", "medium x cache figure")
    by = ["engine", "medium", "cache_pct"]
    emu = runs.groupby("medium", sort=False)["emulated"].first() if "emulated" in runs else pd.Series(dtype=object)
    out = []
    for metric in ("tps", "p95_ms"):
        t = adjusted_means(runs, metric, by, exp.factors)
        t["emulated"] = t["medium"].map(lambda m: _text(emu.get(m)) or None) if not t.empty else None
        out.append(t)
    return out[0], out[1]


def cell_label(row: pd.Series, varied: Sequence[str]) -> str:
    """A short cell label from its varied factors: innodb c25 16k lz4 tmpfs."""
    parts = []
    for f in varied:
        v = row[f]
        parts.append(f"c{_level_text(v)}" if f == "cache_pct" else f"{_level_text(v)} thr" if f == "threads"
                     else _level_text(v))
    return " ".join(parts) or str(row["cell_id"])


def timeline_cells(st: StudyTables, chosen: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The cells whose per-second series figure 5 shows: `chosen`, else the slowest and the fastest."""
    cells = st.cells.sort_values(["mean", "cell_id"], kind="stable")
    if cells.empty:
        raise plots.FigureDataError("throughput over time: no cells")
    if chosen:
        unknown = sorted(set(chosen) - set(cells["cell_id"]))
        if unknown:
            raise plots.FigureDataError(f"throughput over time: no cells {', '.join(unknown)}; cells: "
                                        f"{', '.join(cells['cell_id'])}")
        ids = list(chosen)
    else:
        ids = list(dict.fromkeys([cells["cell_id"].iloc[0], cells["cell_id"].iloc[-1]]))
    varied = [f for f in FACTORS if f in cells.columns and cells[f].map(level_key).nunique() > 1]
    rows = cells.set_index("cell_id", drop=False)
    return ids, {c: cell_label(rows.loc[c], varied) for c in ids}


EFFICIENCY_FIGURE_METRICS = ("mysqld_cpu_us_per_txn", "host_cpu_us_per_txn", "read_kb_per_txn",
                             "write_kb_per_txn")


def baseline_cell(st: StudyTables) -> str:
    """The baseline configuration: the spec's baseline levels, the other factors at their reference
    levels (:func:`reference_levels`); the existing cell matching most of them."""
    cells, exp = st.cells, st.experiment
    factors = [f for f in FACTORS if f in cells.columns and cells[f].map(level_key).nunique() > 1]
    want = {**reference_levels(exp, cells, factors), **{k: v for k, v in baseline_levels(exp).items()
                                                         if k in factors}}
    score = sum((cells[f].map(level_key) == level_key(v)).astype(int) * (2 if f in exp.baseline else 1)
                for f, v in want.items()) if want else pd.Series(0, index=cells.index)
    best = cells.assign(_s=score).sort_values(["_s", "cell_id"], ascending=[False, True], kind="stable")
    return str(best["cell_id"].iloc[0])


def efficiency_figure_table(st: StudyTables) -> tuple[pd.DataFrame, str]:
    """Every cell's hardware cost per transaction relative to the baseline cell: ratio of geometric means
    with a Welch 95 % CI (ratio of means without an interval where a run measured zero)."""
    runs, cells = st.runs, st.cells
    base = baseline_cell(st)
    varied = [f for f in FACTORS if f in cells.columns and cells[f].map(level_key).nunique() > 1]
    by_id = cells.set_index("cell_id", drop=False)
    rows = []
    base_runs = runs[runs["cell_id"] == base]
    for m in EFFICIENCY_FIGURE_METRICS:
        if m not in runs.columns:
            continue
        b = pd.to_numeric(base_runs[m], errors="coerce").dropna().to_numpy(dtype=float)
        if b.size == 0 or b.mean() <= 0:
            continue
        for cid in cells["cell_id"]:
            v = pd.to_numeric(runs.loc[runs["cell_id"] == cid, m], errors="coerce").dropna().to_numpy(dtype=float)
            if v.size == 0:
                continue
            if (v > 0).all() and (b > 0).all():
                w = welch_log_ratio(v, b)
                ratio, lo, hi = w["ratio"], w["ci_lo"], w["ci_hi"]
            else:
                ratio, lo, hi = v.mean() / b.mean(), math.nan, math.nan
            rows.append({"cell_id": cid, "label": cell_label(by_id.loc[cid], varied) + (" (baseline)" if cid == base else ""),
                         "metric": m, "ratio": ratio, "ci_lo": lo, "ci_hi": hi, "baseline_mean": float(b.mean())})
    if not rows:
        raise plots.FigureDataError("efficiency: no per-transaction metric measured in the baseline cell")
    return pd.DataFrame(rows), cell_label(by_id.loc[base], varied)


@dataclass(frozen=True)
class FigureDef:
    """A figure of the paper: its stem under figures/, PDF title, and how to draw it from a study (the
    draw function returns the figure and the tables it was drawn from, whose hash goes in the PDF)."""

    stem: str
    title: str
    draw: Any  # Callable[[StudyTables, dict], tuple[plt.Figure, list[pd.DataFrame]]]


def _draw_effects(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    fig, _ = plots.factor_effects(st.analysis.effects)
    return fig, [st.analysis.effects]


def _draw_cache(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    fig, _ = plots.throughput_vs_cache(st.cells, st.runs)
    return fig, [st.runs, st.cells]


def _draw_threads(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    fig, _ = plots.throughput_vs_threads(st.cells, st.runs)
    return fig, [st.runs, st.cells]


def _draw_block(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    table, a, b = block_size_table(st)
    fig, _ = plots.block_size_ratios(table, a=a, b=b)
    return fig, [table]


def _draw_compression(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    tps, sizes, writes = compression_tables(st)
    fig, _ = plots.compression_panels(tps, sizes, writes)
    return fig, [tps, sizes, writes]


def _draw_medium(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    tps, p95 = medium_cache_tables(st)
    fig, _ = plots.medium_cache(tps, p95)
    return fig, [tps, p95]


def _draw_timeline(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    ids, labels = timeline_cells(st, opts.get("timeline_cells"))
    iv = st.intervals()
    if iv.empty:
        raise plots.FigureDataError("throughput over time: no per-second rows (processed/intervals.parquet)")
    iv = iv[iv["cell_id"].isin(ids)]
    steady = st.analysis.steady
    fig, _ = plots.throughput_over_time(iv, steady, ids, labels)
    return fig, [iv, steady[steady["run_id"].isin(set(iv["run_id"]))] if "run_id" in steady else steady]


def _draw_efficiency(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    table, base = efficiency_figure_table(st)
    fig, _ = plots.efficiency_vs_baseline(table, base)
    return fig, [table]


# The paper's order. Each figure is drawn from the first study (in the profile's order) that has its data.
FIGURES: tuple[FigureDef, ...] = (
    FigureDef("factor-effects", "Factor effects on throughput", _draw_effects),
    FigureDef("throughput-vs-cache", "Throughput vs cache size", _draw_cache),
    FigureDef("block-size", "Block size 4k vs 16k per engine and cache level", _draw_block),
    FigureDef("compression", "Compression: throughput, on-disk size and writes per transaction",
              _draw_compression),
    FigureDef("medium-cache", "Medium x cache: throughput and p95 latency", _draw_medium),
    FigureDef("efficiency", "Hardware cost per transaction relative to the baseline", _draw_efficiency),
    FigureDef("throughput-over-time", "Per-second throughput and p95 latency", _draw_timeline),
    FigureDef("throughput-vs-threads", "Throughput and p95 latency vs client threads", _draw_threads),
)
FIGURE_STUDY_KINDS = ("storage", "threads", "tpcc")  # Galera studies draw their own figures


@dataclass
class Published:
    """What the figures step wrote: files, the figures drawn (stem -> experiment), and the notes of those
    skipped for want of data."""

    written: list[Path] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    claims: pd.DataFrame = field(default_factory=pd.DataFrame)


def draw_figures(studies: Sequence[StudyTables], figures_dir: Path, *, commit: str | None,
                 opts: dict[str, Any] | None = None) -> Published:
    """Every figure of :data:`FIGURES` from the first study that has its data; stale figure files (of
    figures this data no longer gives) are removed so that figures/ holds exactly what the paper shows."""
    out = Published()
    opts = opts or {}
    for fd in FIGURES:
        for st in studies:
            if st.kind not in FIGURE_STUDY_KINDS or st.a is None:
                continue
            try:
                fig, frames = fd.draw(st, opts)
            except plots.FigureDataError as exc:
                out.skipped.append(f"{fd.stem} from {st.name}: {exc}")
                continue
            out.written += plots.save_figure(fig, figures_dir, fd.stem, commit=commit,
                                             data_sha=plots.data_hash(*frames), title=fd.title)
            out.figures[fd.stem] = st.name
            break
        else:
            if not any(n.startswith(f"{fd.stem} from ") for n in out.skipped):
                out.skipped.append(f"{fd.stem}: no study with data")
    return out


def remove_stale_figures(figures_dir: Path, keep: set[str]) -> list[Path]:
    removed = []
    for f in sorted(figures_dir.glob("*")):
        if f.suffix in (".pdf", ".png") and f.stem not in keep:
            f.unlink()
            removed.append(f)
    return removed


# ------------------------------------------------------------------------------------ the whole build


def claims_evidence(studies: Sequence[StudyTables]) -> list[Any]:
    from .claims import Evidence

    out = []
    for st in studies:
        runs = st.runs if st.a is not None else pd.DataFrame()
        out.append(Evidence(st.name, st.kind, runs, dict(st.experiment.factors),
                            st.extra.get("replication-effects")))
    return out


def claims_macros(table: pd.DataFrame) -> dict[str, str]:
    """Per claim: its verdict, estimate, interval and the estimate with its interval; and the counts."""
    from .claims import VERDICTS

    m: dict[str, str] = {"nClaims": str(len(table))}
    for v in VERDICTS:
        m[paper.macro_name("n", "claims", v)] = str(int((table["verdict"] == v).sum()))
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
        m[base + "Pct"] = "--" if pd.isna(est) or kind != "ratio" else _fmt((est - 1) * 100, 0)
        m[base + "Study"] = paper.latex_escape(str(r["study"] or "--"))
    return m


def threads_macros(st: StudyTables) -> dict[str, str]:
    """The thread sweep in numbers: levels, the peak's threads and throughput."""
    cells = st.cells
    if "threads" not in cells or cells["threads"].nunique() < 2:
        return {}
    by = cells.groupby("threads", sort=True)["mean"].max()
    peak = by.idxmax()
    return {"minThreads": _level_text(by.index.min()), "maxThreads": _level_text(by.index.max()),
            "peakThreads": _level_text(peak), "peakTps": _fmt(by.max()),
            "threadLevels": ", ".join(_level_text(t) for t in by.index)}


def tpcc_table(st: StudyTables) -> pd.DataFrame:
    """tpmC (New-Order transactions per minute) per cell, mean over repetitions with a t 95 % CI."""
    rows = []
    for _, r in st.runs.iterrows():
        try:
            summary = st.store.parsed(r["run_id"]).summary
        except (OSError, ValueError):
            continue
        tpmc = summary.get("tpmC") or (summary.get("tpcc") or {}).get("tpmC")
        if tpmc is not None:
            rows.append({"cell_id": r["cell_id"], "tpmC": float(tpmc), "tps": float(r["tps"])})
    if not rows:
        return pd.DataFrame(columns=["cell_id", "n", "tpmC", "ci_lo", "ci_hi", "tps"])
    df = pd.DataFrame(rows)
    out = []
    for cid, g in df.groupby("cell_id", sort=True):
        lo, hi = t_mean_ci(g["tpmC"]) if len(g) > 1 else (math.nan, math.nan)
        out.append({"cell_id": cid, "n": len(g), "tpmC": g["tpmC"].mean(), "ci_lo": lo, "ci_hi": hi,
                    "tps": g["tps"].mean()})
    return pd.DataFrame(out)


def _replication() -> tuple[Any, Any]:
    """The Galera study's modules (another part of the package); (None, None) while they do not exist."""
    try:
        from . import plots_replication, replication  # type: ignore[attr-defined]
    except ImportError:
        return None, None
    return replication, plots_replication


def replication_outputs(st: StudyTables, figures_dir: Path, generated_dir: Path) -> tuple[list[Path], str]:
    """A Galera study's figures, ``replication-macros.tex`` and ``table-replication.tex`` through
    :func:`dbmatrix.replication.publish_replication`; a note instead when that module is absent."""
    rep, _ = _replication()
    if rep is None or not hasattr(rep, "publish_replication"):
        return [], f"{st.name}: dbmatrix.replication is not installed; replication section skipped"
    written = rep.publish_replication(st.store, st.experiment, figures_dir, generated_dir)
    return [Path(p) for p in written], ""


def replication_section(paper_src: Path, published: bool) -> str | None:
    """The body of generated/replication-section.tex: the macros of the replication study (unless its
    section inputs them itself) and paper/replication.tex; None when there is nothing to include."""
    src = paper_src / "replication.tex"
    if not published or not src.is_file():
        return None
    own = "replication-macros" in src.read_text()
    return ("" if own else "\\input{generated/replication-macros.tex}\n") + "\\input{replication}"


def host_facts_of(studies: Sequence[StudyTables]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each host's facts and media states, once per host name (the first study that recorded it)."""
    seen: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for st in studies:
        for f in sorted(st.store.hosts.glob("*.json")):
            if f.name.endswith(".media.json"):
                continue
            facts = json.loads(f.read_text())
            name = str(facts.get("host") or f.stem)
            if name in seen:
                continue
            media_file = f.with_name(f"{f.stem}.media.json")
            media = json.loads(media_file.read_text()) if media_file.is_file() else {}
            seen[name] = (facts, media)
    return list(seen.values())


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
    from .paths import display_path

    return display_path(p)


def write_tables(st: StudyTables, generated_dir: Path, primary: bool) -> list[Path]:
    """A study's tables: the storage matrix's cells, effects and declared comparisons under their usual
    names; another study's cells table as ``table-<prefix>-cells.tex``."""
    a = st.analysis
    written = []
    if primary:
        table = cells_table(a)
        write_text_atomic(generated_dir / "table-cells.tex", _render(
            table,
            caption="Per-cell throughput: mean over repetitions with its 95\\,\\% Student-t CI; "
                    "p95 from histograms merged across repetitions.",
            label="tab:cells", empty="no cells", precision=1,
            column_format="l" * (len(table.columns) - 5) + "rrcrr", wide=len(table.columns) >= 8))
        write_text_atomic(generated_dir / "table-effects.tex", _render(
            effects_table(a),
            caption="Factor effects on log throughput (main effects and two-way interactions, sum-to-zero "
                    "coding, OLS over repetitions): share of the variance (Type III sums of squares), F test, "
                    "and for main effects the spread between the best and the worst level (x).",
            label="tab:effects", empty="no factor varies in the completed runs", column_format="lrrrrr"))
        write_text_atomic(generated_dir / "table-pairwise.tex", _render(
            pairwise_table(a),
            caption="Declared comparisons: ratio a/b of geometric-mean throughput with a Welch 95\\,\\% CI "
                    "on log throughput, Holm-adjusted p over all comparisons, Hedges' g; arithmetic means "
                    "beside.",
            label="tab:pairwise", empty="the spec declares no comparisons", precision=0,
            column_format="llcrrrcrr", wide=True))
        written += [generated_dir / n for n in ("table-cells.tex", "table-effects.tex", "table-pairwise.tex")]
    if st.prefix:
        table = cells_table(a)
        name = f"table-{st.prefix}-cells.tex"
        write_text_atomic(generated_dir / name, _render(
            table, caption=f"Per-cell results of \\texttt{{{paper.latex_escape(st.name)}}}: mean throughput "
                           "over repetitions with its 95\\,\\% Student-t CI; p95 from merged histograms.",
            label=f"tab:{st.prefix}cells", empty="no cells", precision=1,
            column_format="l" * (len(table.columns) - 5) + "rrcrr"))
        written.append(generated_dir / name)
    if st.kind == "tpcc":
        t = tpcc_table(st)
        show = pd.DataFrame({"Cell": t["cell_id"], "n": t["n"], "tpmC": t["tpmC"].round(0),
                             "95 % CI": [("--" if pd.isna(lo) else f"{lo:.0f}--{hi:.0f}")
                                         for lo, hi in zip(t["ci_lo"], t["ci_hi"])],
                             "TPS": t["tps"].round(0)}) if not t.empty else t
        write_text_atomic(generated_dir / "table-tpcc.tex", _render(
            show, caption="TPC-C: New-Order transactions per minute (tpmC) per cell, mean over repetitions "
                          "with its 95\\,\\% Student-t CI; all transactions per second beside.",
            label="tab:tpcc", empty="no tpmC in the runs", precision=0, column_format="lrrcr"))
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
            m["effCpuRatioMin"] = _fmt(cpu["ratio"].min(), 2)
            m["effCpuRatioMax"] = _fmt(cpu["ratio"].max(), 2)
            m["effCpuBaseline"] = _fmt(cpu["baseline_mean"].iloc[0], 0)
    if "throughput-over-time" in drawn:
        st = drawn["throughput-over-time"]
        ids, labels = timeline_cells(st, opts.get("timeline_cells"))
        m["timelineCells"] = paper.latex_escape(" and ".join(labels[c] for c in ids))
        steady = st.analysis.steady
        trims = steady.loc[steady["cell_id"].isin(ids), "trim_s"] if "trim_s" in steady else pd.Series([], dtype=float)
        m["timelineMaxTrimS"] = _fmt(float(trims.max()), 0) if trims.notna().any() else "--"
    if "block-size" in drawn:
        table, a, b = block_size_table(drawn["block-size"])
        m["blockLevelA"], m["blockLevelB"] = paper.latex_escape(a), paper.latex_escape(b)
        m["blockRatioMin"], m["blockRatioMax"] = _fmt(table["estimate"].min(), 2), _fmt(table["estimate"].max(), 2)
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
    from . import claims as claims_mod
    from .paths import repo_root

    studies = [s for s in studies if s.a is not None or s.kind == "galera"]
    if not studies:
        raise RuntimeError(f"profile {profile}: no study has processed tables (run the analysis first)")
    paper_src = paper_src or repo_root() / "paper"
    commit = git_state().get("commit")
    out = draw_figures(studies, figures_dir, commit=commit, opts=opts)
    macros: dict[str, str] = {}
    repl_include = None
    for st in studies:
        if st.kind == "galera" and repl_include is None:
            files, note = replication_outputs(st, figures_dir, generated_dir)
            out.written += files
            out.figures.update({f.stem: st.name for f in files if f.suffix == ".pdf" and f.parent == figures_dir})
            if note:
                out.skipped.append(note)
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
    table = claims_mod.evaluate(claims_evidence(studies))
    out.claims = table
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
    _write_csv(table, generated_dir / "claims.csv")
    write_text_atomic(generated_dir / "table-claims.tex", paper.render_claims_table(table))
    write_text_atomic(generated_dir / "table-setup.tex", paper.render_setup_table(host_facts_of(studies)))
    fragments = [f"fig-{fd.stem}" for fd in FIGURES if fd.stem in out.figures]
    missing = [f for f in fragments if not (paper_src / f"{f}.tex").is_file()]
    if missing:
        raise FileNotFoundError(f"paper fragments missing for drawn figures: {', '.join(missing)} "
                                f"(expected in {paper_src})")
    write_text_atomic(generated_dir / "figures.tex",
                      paper.render_inputs(fragments, "The figures drawn from this build's data."))
    tpcc = next((s for s in standard if s.kind == "tpcc"), None)
    written += [generated_dir / n for n in ("claims.csv", "table-claims.tex", "table-setup.tex", "figures.tex")]
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
    from .study import KIND_PREFIX, study_kind

    kind = study_kind(exp)
    st = load_study_tables(store, exp, kind, KIND_PREFIX[kind] if kind != "storage" else "")
    return publish_all([st], profile, figures_dir, generated_dir).written


# ------------------------------------------------------------------------------------ exploration

DEFAULT_EXPLORE = "storage-matrix-quick"  # the committed reference the exploration notebook opens


def available_results() -> list[Path]:
    """Results directories under data/runs and data/reference that have processed tables."""
    from .paths import reference_root, runs_root

    out: list[Path] = []
    for root in (runs_root(), reference_root()):
        if root.is_dir():
            out += sorted(d for d in root.iterdir() if (d / "processed" / "runs.csv").is_file())
    return out


def load_runs_table(run_dir: str | Path | None = None) -> pd.DataFrame:
    """The processed runs table of a results directory (default: the committed reference of the storage
    matrix): one row per run with its factor levels, throughput, latency and efficiency metrics."""
    from .paths import reference_dir

    d = Path(run_dir) if run_dir else reference_dir(DEFAULT_EXPLORE)
    f = d / "processed" / "runs.csv"
    if not f.is_file():
        have = ", ".join(str(p) for p in available_results()) or "none"
        raise FileNotFoundError(f"run_dir: {d} has no processed/runs.csv (run notebook 20 or `dbmatrix analyse "
                                f"--results {d}` first); directories with processed tables: {have}")
    return pd.read_csv(f)


def filter_runs(runs: pd.DataFrame, filters: dict[str, Any] | None) -> pd.DataFrame:
    """Runs whose factor levels match `filters` ({factor: level or [levels]}); unknown factors or levels
    are errors that name the allowed values."""
    out = runs
    for f, want in (filters or {}).items():
        if f not in runs.columns:
            raise ValueError(f"filters: {f!r} is not a column of the runs; factors: "
                             f"{', '.join(c for c in FACTORS if c in runs.columns)}")
        levels = want if isinstance(want, (list, tuple, set)) else [want]
        present = {str(v): v for v in runs[f].dropna().unique()}
        missing = [v for v in levels if str(v) not in present]
        if missing:
            raise ValueError(f"filters.{f}: {', '.join(map(str, missing))} not among the levels "
                             f"{', '.join(sorted(present))}")
        out = out[out[f].astype(str).isin({str(v) for v in levels})]
    return out
