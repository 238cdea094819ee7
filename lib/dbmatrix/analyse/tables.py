"""From raw runs to processed tables (notebook 20), and to figures and paper inputs (notebook 30).

Deterministic: the same raw data gives byte-identical CSV/Parquet tables, figures and LaTeX files.

Throughput and latency cover the same window: the whole measured window. The analysed throughput of
a run (``tps`` in the processed runs table, kept as ``tps_sysbench`` too) is sysbench's summary figure of
that window, the one its latency histogram (p50/p95/p99) covers: in a one-process run
(``--report-checkpoints``) the final report after the checkpoint, in a two-process run the measure
process's report. A histogram cannot be trimmed, so the steady-state test
(:func:`dbmatrix.analyse.stats.steady_state`: warm-up truncation, drift with its CI over the kept 1-s
samples, judged against +-5 %) tests stability but does not change the estimate: its window mean stays
beside it as ``tps_steady``. Runs found drifting stay in the averages but are counted per cell
(``n_not_steady``) and flagged in the noise report (``analyse(..., exclude_not_steady=True)`` drops them
instead); runs too short for the drift test are counted as ``n_untested``; undetermined runs (too noisy
to tell) are neither. The Galera study's tables (:mod:`dbmatrix.analyse.replication`) read the same
summary figure, so one run has one throughput in every table.
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

from dbmatrix.analyse.campaign_records import write_campaign_summaries
from dbmatrix.analyse.cell_model import study_components
from dbmatrix.analyse.comparisons import model_pairwise_comparisons
from dbmatrix.analyse.contrasts import INTERACTION_ALPHA, NotTestable, fit_log_model, ordered_levels
from dbmatrix.analyse.effects import FactorialFit, factorial_model, pairwise_comparisons
from dbmatrix.analyse.host_facts import write_host_record
from dbmatrix.analyse.hosts import host_check, multi_host
from dbmatrix.analyse.sentinel import write_sentinel
from dbmatrix.analyse.stats import (
    DEFAULT_SEED,
    EFFICIENCY_METRICS,
    MIN_DRIFT_SAMPLES,
    UNTESTED_REASONS,
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
from dbmatrix.analyse.window_halves import COLUMNS as HALF_COLUMNS
from dbmatrix.analyse.window_halves import window_halves
from dbmatrix.spec.experiment import FACTORS, Experiment
from dbmatrix.spec.factors import DATASET_FACTORS
from dbmatrix.store import ResultStore, write_text_atomic

MiB = 1024 * 1024
STEADY_RUN_COLUMNS = ("trim_method", "trim_s", "steady_s", "steady", "steady_reason", "flagged", "drift_pct",
                      "drift_ci_lo", "drift_ci_hi", "tps_steady", "sec_tps_min", "sec_tps_p1", "sec_tps_p5",
                      "sec_tps_median", "sec_tps_cv", "stall_s", "zero_s")
UNTESTED = UNTESTED_REASONS  # steady_reason of runs whose steady state could not be checked
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
    hosts: pd.DataFrame = field(default_factory=pd.DataFrame)  # the host check (several hosts only)
    cells_by_host: pd.DataFrame = field(default_factory=pd.DataFrame)  # per cell and host (several hosts only)


# Written only when the runs come from two or more hosts (a one-host study's outputs stay as they were).
HOST_TABLES = {"hosts": "hosts.csv", "cells_by_host": "cells-by-host.csv"}


def write_csv(df: pd.DataFrame, path: Path) -> None:
    write_text_atomic(path, df.to_csv(index=False, float_format="%.6g", lineterminator="\n"))


def read_csv(path: Path) -> pd.DataFrame:
    """A processed table as :func:`write_csv` wrote it, its columns consolidated into one block per dtype:
    pandas reads a CSV into a block per column, and a frame of more than 100 blocks warns on every column
    added to it (PerformanceWarning, which notebooks show as an error output)."""
    return pd.read_csv(path).copy()


def write_parquet(df: pd.DataFrame, path: Path) -> None:
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


def _tristate(s: pd.Series) -> pd.Series:
    """True/False/None (object) from a column of booleans with missing values."""
    return pd.Series([v if v is None else bool(v) if pd.notna(v) else None for v in s], index=s.index,
                     dtype=object)


def prepare_runs(runs: pd.DataFrame, steady: pd.DataFrame, histograms: pd.DataFrame,
                 exp: Experiment, halves: pd.DataFrame | None = None) -> pd.DataFrame:
    """The processed runs table: sysbench summary + steady state + the window's two halves
    (:mod:`dbmatrix.analyse.window_halves`) + efficiency + latency per run.

    ``tps`` is sysbench's summary throughput of the measured window (the window the latency histogram
    covers; see the module docstring), never the steady-state window's mean (``tps_steady``)."""
    out = runs.copy()
    out["tps_sysbench"] = out["tps"].astype(float)
    cols = [c for c in STEADY_RUN_COLUMNS if c in steady.columns]
    if not steady.empty:
        out = out.merge(steady[["run_id", *cols]], on="run_id", how="left")
    if halves is not None and not halves.empty:
        out = out.merge(halves[["run_id", *HALF_COLUMNS]], on="run_id", how="left")
    for c in HALF_COLUMNS:
        if c not in out.columns:
            out[c] = np.nan
    for c in STEADY_RUN_COLUMNS:
        if c not in out.columns:
            out[c] = np.nan
    no_series = out["steady_reason"].isna()
    out["steady_reason"] = out["steady_reason"].where(~no_series, "no_intervals")
    out["steady"] = _tristate(out["steady"].where(~no_series, None))
    out["flagged"] = _tristate(out["flagged"].where(~no_series, None))
    out["trim_method"] = out["trim_method"].where(~no_series, "none")
    out["tps"] = out["tps_sysbench"]  # the histogram's window: p95 and tps of one run cover the same time
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


HEADLINE_COLUMNS = ("factor", "by", "by_level", "low", "high", "low_cell_id", "high_cell_id", "held",
                    "pooled_over", "n_low", "n_high", "low_mean", "high_mean", "ratio", "ci_lo", "ci_hi", "ratio_gm",
                    "welch_ci_lo", "welch_ci_hi", "welch_p")
HEADLINE_ALPHA = INTERACTION_ALPHA  # the claims' rule: never average over an interaction this significant


def interacting_factors(anova: pd.DataFrame | None, factor: str = "cache_pct",
                        alpha: float = HEADLINE_ALPHA) -> list[str]:
    """The factors whose two-way interaction with `factor` is significant in the factorial model's ANOVA
    (p < alpha), the strongest (largest F) first: a ratio of `factor`'s levels averaged over one of them
    would mix different effects (InnoDB's and MyRocks' cache ratios), so it is never averaged over them."""
    if anova is None or anova.empty or "kind" not in anova.columns:
        return []
    found = []
    for _, r in anova[anova["kind"] == "interaction"].iterrows():
        parts = str(r["term"]).split(" x ")
        if factor in parts and len(parts) == 2 and pd.notna(r["p"]) and float(r["p"]) < alpha:
            found.append((-float(r["F"]), parts[1] if parts[0] == factor else parts[0]))
    return [f for _, f in sorted(found)]


def headline_cache_ratio(runs: pd.DataFrame, exp: Experiment, factors: list[str],
                         seed: int = DEFAULT_SEED, *, anova: pd.DataFrame | None = None) -> pd.DataFrame:
    """The paper's headline: the smallest cache level against the baseline's (else the largest), with
    every other varied factor at its reference level (:func:`reference_levels`). If no such pair of cells
    exists (a fractional design), the pair matching the most reference levels; failing that, all runs
    pooled over the other factors (:func:`model_headline` then replaces the pooled ratio by the model's).
    Seeded as the ratio table's row for the same pair of cells.

    When the cache interacts significantly with other factors (``anova``, :func:`interacting_factors`),
    the headline is one row per level of the strongest of them (``by``, ``by_level``; e.g. one cache ratio
    per engine): a single ratio would average different effects."""
    if "cache_pct" not in runs.columns or runs["cache_pct"].nunique() < 2:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    others = [f for f in _varied(runs, factors) if f != "cache_pct"]
    split = next((f for f in interacting_factors(anova) if f in others), None)
    if split is None:
        return _headline_pair(runs, exp, factors, seed, None, None)
    first = reference_levels(exp, runs, [split])[split]  # the reference level's row first
    spec = [v for v in exp.factors.get(split, ()) if level_key(v) != level_key(first)]
    levels = ordered_levels(runs[split].dropna(), [first, *spec])
    rows = [_headline_pair(runs[runs[split].map(level_key) == level_key(v)], exp, factors, seed, split, v)
            for v in levels]
    return pd.concat([r for r in rows if not r.empty], ignore_index=True) if rows else \
        pd.DataFrame(columns=HEADLINE_COLUMNS)


def _headline_pair(runs: pd.DataFrame, exp: Experiment, factors: list[str], seed: int, by: str | None,
                   by_level: Any) -> pd.DataFrame:
    """One headline row from `runs` (those at ``by = by_level`` when split)."""
    levels = sorted(runs["cache_pct"].dropna().unique().tolist())
    if len(levels) < 2:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    base = exp.baseline.get("cache_pct")
    high = base if base in levels and base != levels[0] else levels[-1]
    low = levels[0]
    others = [f for f in _varied(runs, factors) if f not in ("cache_pct", by)]
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
    held = ";".join([*([f"{by}={by_level}"] if by else []),
                     *(f"{f}={lo_runs[f].iloc[0]}" for f in others if not pooled)])
    w = welch_log_ratio(a, b) if (a > 0).all() and (b > 0).all() else {}
    return pd.DataFrame([{
        "factor": "cache_pct", "by": by or "", "by_level": by_level if by else "", "low": low, "high": high,
        "low_cell_id": cell_lo, "high_cell_id": cell_hi, "held": held, "pooled_over": ",".join(pooled),
        "n_low": a.size, "n_high": b.size, "low_mean": float(a.mean()), "high_mean": float(b.mean()),
        "ratio": r, "ci_lo": ci_lo, "ci_hi": ci_hi, "ratio_gm": w.get("ratio", np.nan),
        "welch_ci_lo": w.get("ci_lo", np.nan), "welch_ci_hi": w.get("ci_hi", np.nan), "welch_p": w.get("p", np.nan),
    }], columns=HEADLINE_COLUMNS)


def model_headline(headline: pd.DataFrame, runs: pd.DataFrame, exp: Experiment, factors: list[str],
                   anova: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows whose pair had to be pooled over other factors (a fractional design has no matched pair) take
    the factorial model's contrast instead (:func:`dbmatrix.analyse.contrasts.fit_log_model`, the two-way
    model, else main effects): the low/high ratio of geometric means with the other factors' effects
    removed, and its model CI. It is taken at the row's ``by`` level, with every other factor that
    interacts significantly with the cache held at its reference level, and averaged over the rest only
    (``averaged_over``); with no interaction that is the model's main effect of the cache. The pooled
    Welch interval stays as ``pooled_ci_lo/hi``."""
    if headline.empty or not headline["pooled_over"].astype(str).str.len().gt(0).any():
        return headline
    data = closed_loop(runs)
    model = fit_log_model(data, factors, "tps", level_order=exp.factors) \
        or fit_log_model(data, factors, "tps", interactions=False, level_order=exp.factors)
    if model is None or "cache_pct" not in model.factors:
        return headline
    interacting = [f for f in interacting_factors(anova) if f in model.factors]
    ref = reference_levels(exp, data, interacting)
    h = headline.copy()
    for c in ("pooled_ci_lo", "pooled_ci_hi", "averaged_over", "estimate"):
        h[c] = np.nan if c.startswith("pooled") else ""
    for i, row in h.iterrows():
        if not _text(row["pooled_over"]):
            continue
        at = {f: ref[f] for f in interacting}
        if _text(row["by"]):
            at[row["by"]] = row["by_level"]
        try:
            est, lo, hi = model.contrast({**at, "cache_pct": row["low"]}, {**at, "cache_pct": row["high"]})
        except NotTestable:
            continue
        free = [f for f in model.factors if f != "cache_pct" and f not in at]
        h.at[i, "pooled_ci_lo"], h.at[i, "pooled_ci_hi"] = row["ci_lo"], row["ci_hi"]
        h.at[i, "ratio"], h.at[i, "ci_lo"], h.at[i, "ci_hi"] = math.exp(est), math.exp(lo), math.exp(hi)
        h.at[i, "held"] = ";".join(f"{f}={v}" for f, v in at.items())
        h.at[i, "averaged_over"] = ",".join(free)
        h.at[i, "estimate"] = "factorial model main effect" if not at else "factorial model contrast"
    return h


def _text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


def steady_params(measure_s: int) -> dict[str, int]:
    """Steady-state settings for the run length. Runs long enough for the drift test
    (``MIN_DRIFT_SAMPLES`` s) are truncated with MSER-1, which keeps more of the run than MSER-5 and so
    more power (``benchmarks/bench_steady_power.py --compare``). Shorter runs (the quick profile's 10 s)
    are untested; their warm-up truncation stays MSER-2 (as before, so their trim points, the crosses of
    the throughput-over-time figure, are unchanged); under 10 s neither truncation nor test."""
    batch = 1 if measure_s >= MIN_DRIFT_SAMPLES else 2
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


def declared_comparisons(runs: pd.DataFrame, exp: Experiment, factors: list[str]) -> pd.DataFrame:
    """The spec's comparisons, Holm-adjusted as one family per study: in a fractional design the factorial
    model's contrasts (:func:`dbmatrix.analyse.comparisons.model_pairwise_comparisons`: no matched cells
    exist, and pooling over the free factors counts their effects as noise), in a full design Welch tests
    on log throughput between matched cells (:func:`pairwise_comparisons`). Each row's ``basis`` says
    which."""
    comparisons = getattr(exp, "comparisons", ()) or ()
    design = exp.design_info()["design"] if hasattr(exp, "design_info") else "full"
    if design in ("fractional", "crossed"):
        return model_pairwise_comparisons(closed_loop(runs), comparisons, factors, level_order=exp.factors)
    return pairwise_comparisons(runs, comparisons, factors)


def analyse_frames(runs: pd.DataFrame, intervals: pd.DataFrame, histograms: pd.DataFrame, exp: Experiment,
                   failed: pd.DataFrame | None = None, *, exclude_not_steady: bool = False,
                   host: pd.DataFrame | None = None) -> Analysis:
    """The whole analysis as a pure function of the loaded tables (what :func:`analyse` writes); `host`: the
    runs' per-second host samples (:meth:`~dbmatrix.store.ResultStore.load_host_series`), when loaded."""
    steady = steady_state(intervals if not intervals.empty else pd.DataFrame(columns=["run_id", "t_s", "tps"]),
                          **steady_params(exp.measure_s))
    halves = window_halves(intervals, host if host is not None else pd.DataFrame(), steady)
    allruns = prepare_runs(runs, steady, histograms, exp, halves)
    used = allruns[allruns["steady_reason"] != "drift"] if exclude_not_steady else allruns
    if used.empty:
        raise RuntimeError("no runs left to analyse: every run was excluded as never settling")
    factors = factor_columns(used)
    base = baseline_levels(exp)
    cells = cell_table(used, histograms, factors)
    ratios = ratios_to_baseline_cells(used, base, factors)
    pairwise = declared_comparisons(used, exp, factors)
    blocks = ("host",) if multi_host(used) else ()
    fit: FactorialFit = factorial_model(closed_loop(used), factors, level_order=exp.factors, blocks=blocks)
    noise_policy = getattr(exp, "noise", None)
    noise = noise_report(cells, ratios, used,
                         max_cv_pct=getattr(noise_policy, "max_cv_pct", 10.0),
                         target_halfwidth_pct=getattr(noise_policy, "target_halfwidth_pct", None))
    model = {"model": fit.model, "note": fit.note, "n": fit.n, "df_resid": fit.df_resid,
             "r2": None if math.isnan(fit.r2) else round(fit.r2, 6), "factors": fit.factors,
             "response": "log(tps)", "coding": "sum-to-zero", "design": getattr(exp, "design", "full"),
             "runs_used": "closed-loop" + (", never-settled excluded" if exclude_not_steady else "")}
    if blocks:
        model["blocks"] = fit.blocks
    hosts = host_check(closed_loop(used), factors, level_order=exp.factors) if blocks else pd.DataFrame()
    cells, ratios = prefer_t_intervals(cells), prefer_t_intervals(ratios)
    latency = cells
    return Analysis(
        runs=allruns, cells=cells, latency=latency, ratios=ratios,
        failed=failed if failed is not None else pd.DataFrame(columns=["run_id", "cell_id", "host", "status"]),
        steady=steady, efficiency=efficiency_table(used, factors, base), pairwise=pairwise,
        effects=fit.effects, anova=fit.anova, noise=noise,
        headline=model_headline(prefer_t_intervals(headline_cache_ratio(closed_loop(used), exp, factors,
                                                                        anova=fit.anova)),
                                used, exp, factors, fit.anova), model=model,
        hosts=hosts, cells_by_host=cells_by_host(used) if blocks else pd.DataFrame())


def cells_by_host(runs: pd.DataFrame, metric: str = "tps") -> pd.DataFrame:
    """The cells split by host: per cell and host, n, the mean with its 95 % Student-t CI."""
    rows = []
    for (cell_id, host), g in runs.groupby(["cell_id", "host"], sort=True):
        v = pd.to_numeric(g[metric], errors="coerce").dropna()
        lo, hi = t_mean_ci(v)
        rows.append({"cell_id": cell_id, "host": host, **({"host_class": g["host_class"].iloc[0]}
                                                          if "host_class" in g.columns else {}),
                     "n": int(v.size), "mean": float(v.mean()) if v.size else np.nan, "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows)


def analyse(store: ResultStore, exp: Experiment, *, exclude_not_steady: bool = False) -> Analysis:
    """Tidy tables under processed/: CSV for the small ones (runs, cells, ratios, pairwise, effects,
    anova, noise, efficiency, headline, failed; model.json), Parquet for the big ones (per-second
    intervals, histograms, per-run steady state); the study's host record (:mod:`dbmatrix.analyse.host_facts`)."""
    runs = store.load_runs()
    if runs.empty:
        raise RuntimeError(f"no completed runs in {store.root}: run the matrix first (notebook 10 or "
                           "`dbmatrix run`)")
    allruns = store.load_runs(include_failed=True)
    failed = allruns[allruns["status"] != "ok"][["run_id", "cell_id", "host", "status"]] \
        if not allruns.empty else allruns
    intervals, histograms = store.load_intervals(), store.load_histograms()
    a = analyse_frames(runs, intervals, histograms, exp, failed, exclude_not_steady=exclude_not_steady,
                       host=store.load_host_series())
    out = store.processed
    for name in CSV_TABLES:
        write_csv(getattr(a, name), out / f"{name}.csv")
    for name, file in HOST_TABLES.items():
        if not getattr(a, name).empty:
            write_csv(getattr(a, name), out / file)
        elif (out / file).is_file():
            (out / file).unlink()  # left by an earlier analysis with several hosts
    write_parquet(intervals, out / "intervals.parquet")
    write_parquet(histograms, out / "histograms.parquet")
    write_parquet(a.steady, out / "steady.parquet")
    write_text_atomic(out / "model.json", json.dumps(a.model, indent=2, sort_keys=True) + "\n")
    write_host_record(store)
    write_campaign_summaries(store)
    write_sentinel(store.root, out, design_run_sd(runs, exp))
    return a


def design_run_sd(runs: pd.DataFrame, exp: Experiment) -> float | None:
    """The study's run-to-run SD of log tps within a campaign x cell (its run variance component), the
    yardstick of the sentinel's A/A ratio; None where the design has no replicated cell."""
    cols = [f for f in exp.varied_factors() if f in runs.columns]
    if "tps" not in runs.columns or runs.empty:
        return None
    comp = study_components(runs, "tps", cols, [f for f in cols if f in DATASET_FACTORS])
    return math.sqrt(comp.run) if math.isfinite(comp.run) and comp.run > 0 else None


def load_processed(store: ResultStore) -> Analysis:
    p = store.processed
    if not (p / "cells.csv").is_file():
        raise RuntimeError(f"no processed tables in {p}: run the analysis first (notebook 20)")

    def csv(name: str) -> pd.DataFrame:
        f = p / f"{name}.csv"
        if not f.is_file() or f.stat().st_size <= 1:
            return pd.DataFrame()
        return read_csv(f)

    cells = csv("cells")
    model = json.loads((p / "model.json").read_text()) if (p / "model.json").is_file() else {}
    steady = pd.read_parquet(p / "steady.parquet") if (p / "steady.parquet").is_file() else pd.DataFrame()
    return Analysis(csv("runs"), cells, cells, csv("ratios"), csv("failed"), steady=steady,
                    efficiency=csv("efficiency"), pairwise=csv("pairwise"), effects=csv("effects"),
                    anova=csv("anova"), noise=csv("noise"), headline=csv("headline"), model=model,
                    hosts=csv("hosts"), cells_by_host=csv("cells-by-host"))


