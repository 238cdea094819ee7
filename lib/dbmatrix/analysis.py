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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

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
    write_text_atomic(out / "model.json", json.dumps(a.model, indent=2, sort_keys=True) + "\n")
    _write_parquet(intervals, out / "intervals.parquet")
    _write_parquet(histograms, out / "histograms.parquet")
    _write_parquet(a.steady, out / "steady.parquet")
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


def publish(store: ResultStore, exp: Experiment, profile: str, figures_dir: Path,
            generated_dir: Path) -> list[Path]:
    """Figures (PDF+PNG) and the paper's generated macros and tables, from the processed tables."""
    a = load_processed(store)
    sha = plots.data_hash(a.runs, a.cells)
    commit = git_state().get("commit")
    fig, _ = plots.throughput_vs_cache(a.cells, a.runs)
    written = plots.save_figure(fig, figures_dir, "throughput-vs-cache", commit=commit, data_sha=sha,
                                title="Throughput vs cache size")
    fig, _ = plots.factor_effects(a.effects)
    written += plots.save_figure(fig, figures_dir, "factor-effects", commit=commit, data_sha=sha,
                                 title="Factor effects on throughput")
    macros = paper_macros(a, exp, store, profile, sha)
    paper.write_macros(macros, generated_dir / "macros.tex")
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
        caption="Declared comparisons: ratio a/b of geometric-mean throughput with a Welch 95\\,\\% CI on "
                "log throughput, Holm-adjusted p over all comparisons, Hedges' g; arithmetic means beside.",
        label="tab:pairwise", empty="the spec declares no comparisons", precision=0,
        column_format="llcrrrcrr", wide=True))
    written += [generated_dir / n for n in ("macros.tex", "table-cells.tex", "table-effects.tex",
                                             "table-pairwise.tex")]
    return written
