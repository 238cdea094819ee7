"""How the analysis scales: 10,000 synthetic runs x 600 s of per-second rows (6 M interval rows).

Builds, in memory, tables shaped like ``ResultStore.load_runs()``, ``load_intervals()`` and
``load_histograms()`` for a synthetic design, then times each analysis step and prints seconds and the
peak resident memory (``resource.getrusage``). Not part of the test suite (a unit test runs it small).

    .venv/bin/python benchmarks/analysis_scale.py                 # 10,000 runs x 600 s, 5 repetitions
    .venv/bin/python benchmarks/analysis_scale.py --runs 2000 --seconds 300
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse import tables as analysis
from dbmatrix.analyse.effects import factorial_model, pairwise_comparisons
from dbmatrix.analyse.stats import merged_percentiles, noise_report, ratios_to_baseline_cells, steady_state
from dbmatrix.parse import sysbench
from dbmatrix.spec.experiment import Experiment, parse_experiment


def design(n_cells: int) -> Experiment:
    """engine x cache x block size x threads, with as many thread levels as needed for n_cells."""
    per_thread = 2 * 5 * 5
    threads = list(range(1, max(1, math.ceil(n_cells / per_thread)) + 1))
    return parse_experiment({
        "experiment": "scale", "factors": {"engine": ["innodb", "myrocks"], "cache_pct": [10, 25, 50, 75, 100],
                                           "block_size": ["4k", "8k", "16k", "32k", "64k"], "threads": threads},
        "baseline": {"cache_pct": 100}, "repetitions": 1,
        "comparisons": [{"factor": "block_size", "levels": ["4k", "16k"], "within": ["cache_pct"]}],
    })


def synthetic(n_runs: int, seconds: int, repetitions: int, seed: int
              ) -> tuple[Experiment, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Runs, per-second intervals and histograms with known effects, warm-up and a few ramps."""
    rng = np.random.default_rng(seed)
    n_cells = max(1, n_runs // repetitions)
    exp = design(n_cells)
    cells = exp.cells()[:n_cells]
    cell_of_run = np.arange(n_runs) % n_cells
    rep = np.arange(n_runs) // n_cells + 1
    eng = {"innodb": 1.0, "myrocks": 0.8}
    level = np.array([1000 * eng[c.engine] * (0.3 + 0.7 * c.cache_pct / 100) / (1 + 0.02 * c.threads)
                      for c in cells])[cell_of_run] * np.exp(rng.normal(0, 0.05, n_runs))
    run_ids = np.array([f"{cells[c].cell_id}-r{r}" for c, r in zip(cell_of_run, rep)], dtype=object)
    cell_ids = np.array([c.cell_id for c in cells], dtype=object)[cell_of_run]
    # per-second series: AR(1)-ish noise, a 10 s warm-up, and 2 % of the runs ramping throughout
    noise = rng.normal(0, 0.08, (n_runs, seconds)).astype(np.float64)
    noise[:, 1:] = 0.5 * noise[:, :-1] + noise[:, 1:]
    shape = np.ones(seconds)
    warm = min(10, seconds // 4)
    shape[:warm] = np.linspace(0.3, 1.0, warm)
    tps = level[:, None] * shape[None, :] * (1 + noise)
    ramps = rng.random(n_runs) < 0.02
    tps[ramps] *= np.linspace(0.5, 1.2, seconds)[None, :]
    del noise
    intervals = pd.DataFrame({
        "run_id": np.repeat(run_ids, seconds), "cell_id": np.repeat(cell_ids, seconds),
        "t_s": np.tile(np.arange(1, seconds + 1), n_runs), "threads": 4, "tps": tps.ravel(),
        "qps": 20 * tps.ravel(), "err_ps": 0.0, "reconn_ps": 0.0,
    })
    transactions = tps.sum(axis=1)
    del tps
    levels = {f: [getattr(cells[c], f) for c in cell_of_run] for f in ("engine", "cache_pct", "block_size",
                                                                      "compression", "medium", "threads",
                                                                      "workload", "log_medium", "rate_fraction")}
    runs = pd.DataFrame({
        "run_id": run_ids, "cell_id": cell_ids, **levels, "repetition": rep, "status": "ok",
        "tps": transactions / seconds, "transactions": transactions.round(), "total_time_s": float(seconds),
        "ignored_errors": 0, "reconnects": 0, "lat_max_ms": 50.0, "emulated": None,
        "data_physical_bytes": 3e8, "data_logical_bytes": 3.2e8, "window_s": float(seconds),
        "host_cpu_busy_s": 1.9 * seconds, "host_cpu_iowait_s": 0.1 * seconds,
        "cpu_user_s": 3e-4 * transactions, "cpu_sys_s": 1e-4 * transactions,
        "proc_read_bytes": 16384 * 0.5 * transactions, "proc_write_bytes": 9000 * transactions,
        "dev_read_ios": 0.5 * transactions, "dev_write_ios": 0.3 * transactions,
        "dev_read_bytes": 16384 * 0.5 * transactions, "dev_write_bytes": 10000 * transactions,
        "dev_io_ms": 0.8 * 1000 * seconds,
    })
    # histograms: 120 buckets per run around a run-specific median
    centre = np.array([sysbench.bucket_index(4000 / lv) for lv in level])
    k = np.arange(-60, 60)
    idx = np.clip(centre[:, None] + k[None, :], 0, sysbench.HIST_SIZE - 1)
    counts = rng.poisson(1000 * np.exp(-0.5 * (k / 15) ** 2), (n_runs, k.size))
    values = np.round(np.exp(idx / sysbench._RANGE_MULT + sysbench._RANGE_DEDUCT), 3)
    histograms = pd.DataFrame({"run_id": np.repeat(run_ids, k.size), "cell_id": np.repeat(cell_ids, k.size),
                               "value_ms": values.ravel(), "count": counts.ravel()})
    return exp, runs, intervals, histograms


def _timed(report: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    out = fn()
    report[key] = round(time.perf_counter() - t0, 3)
    return out


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run(n_runs: int = 10_000, seconds: int = 600, repetitions: int = 5, seed: int = 1) -> dict[str, Any]:
    report: dict[str, Any] = {"runs": n_runs, "seconds": seconds, "repetitions": repetitions}
    exp, runs, intervals, histograms = _timed(report, "build_s", lambda: synthetic(n_runs, seconds,
                                                                                   repetitions, seed))
    report["peak_rss_after_build_mib"] = round(peak_rss_mib(), 1)
    report["interval_rows"] = len(intervals)
    report["histogram_rows"] = len(histograms)
    report["intervals_mib"] = round(intervals.memory_usage(deep=True).sum() / 2**20, 1)
    steady = _timed(report, "steady_s", lambda: steady_state(intervals))
    verdict = steady["steady"].map(lambda v: "steady" if v is True else "not_steady" if v is False else "none")
    report["steady_fraction"] = round(float((verdict == "steady").mean()), 4)
    report["not_steady_fraction"] = round(float((verdict == "not_steady").mean()), 4)
    report["undetermined_fraction"] = round(float((steady["steady_reason"] == "undetermined").mean()), 4)
    prepared = _timed(report, "prepare_runs_s", lambda: analysis.prepare_runs(runs, steady, histograms, exp))
    factors = analysis.factor_columns(prepared)
    base = analysis.baseline_levels(exp)
    _timed(report, "cell_latency_s", lambda: merged_percentiles(histograms, ["cell_id"]))
    cells = _timed(report, "cells_s", lambda: analysis.cell_table(prepared, histograms, factors))
    ratios = _timed(report, "ratios_s", lambda: ratios_to_baseline_cells(prepared, base, factors))
    _timed(report, "efficiency_s", lambda: analysis.efficiency_table(prepared, factors, base))
    _timed(report, "pairwise_s", lambda: pairwise_comparisons(prepared, exp.comparisons, factors))
    fit = _timed(report, "model_s", lambda: factorial_model(prepared, factors, level_order=exp.factors))
    report["model"] = f"{fit.model} ({len(fit.effects)} effects, {fit.df_resid} residual df)"
    _timed(report, "noise_s", lambda: noise_report(cells, ratios, prepared))
    report["total_s"] = round(sum(v for k, v in report.items() if k.endswith("_s") and k != "build_s"), 3)
    report["peak_rss_mib"] = round(peak_rss_mib(), 1)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    report = run(args.runs, args.seconds, args.repetitions, args.seed)
    width = max(map(len, report))
    for k, v in report.items():
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
