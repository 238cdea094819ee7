"""Tests of dbmatrix.analyse.tables on synthetic data: a small result store written in the layout store.py
reads (manifests + sysbench.out texts), analysed and published twice (byte-identical), and the pure
analysis of in-memory tables with several varied factors (the headline comparison, exclusions)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests import benchmark_scripts

from dbmatrix import explore, steps
from dbmatrix.analyse import figure_data
from dbmatrix.analyse import tables as analysis
from dbmatrix.analyse.claims import CLAIMS
from dbmatrix.analyse.kinds import load_study_tables
from dbmatrix.parse import sysbench
from dbmatrix.publish import hooks, paper_inputs
from dbmatrix.record import RunRecord
from dbmatrix.spec.experiment import Experiment, parse_experiment
from dbmatrix.store import ResultStore

LEVEL = {25: 400.0, 50: 700.0, 100: 1000.0}  # tps by cache %
PAGE = {"4k": 1.25, "16k": 1.0}  # multiplicative effect of the page size
SPEC: dict[str, Any] = {
    "experiment": "unit-analysis",
    "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 1000},
    "factors": {"cache_pct": [25, 100], "block_size": ["4k", "16k"]},
    "repetitions": 3, "seed": 3, "warmup_s": 1, "measure_s": 40,
    "baseline": {"cache_pct": 100},
    "comparisons": [{"factor": "block_size", "levels": ["4k", "16k"], "within": ["cache_pct"]}],
    "noise": {"max_cv_pct": 10},
}
RAMP_RUN = "innodb-c25-b16k-none-disk-t4-r2"


def histogram_text(latencies: np.ndarray) -> tuple[str, list[tuple[float, int]]]:
    idx, counts = np.unique(np.vectorize(sysbench.bucket_index)(latencies), return_counts=True)
    hist = [(round(sysbench.bucket_value(int(i)), 3), int(c)) for i, c in zip(idx, counts)]
    top = max(c for _, c in hist)
    rows = [f"{v:12.3f} |{'*' * int(40 * c / top):<40} {c}" for v, c in hist]
    return "\n".join(["Latency histogram (values are in milliseconds)",
                      "       value  ------------- distribution ------------- count", *rows]), hist


def sysbench_out(tps: np.ndarray, latencies: np.ndarray, threads: int = 4) -> tuple[str, list[tuple[float, int]]]:
    """A sysbench 1.0.20 run report: per-second lines, the histogram block and the summary."""
    per_s = [f"[ {i}s ] thds: {threads} tps: {x:.2f} qps: {20 * x:.2f} (r/w/o: {14 * x:.2f}/{4 * x:.2f}/"
             f"{2 * x:.2f}) lat (ms,95%): 5.00 err/s: 0.00 reconn/s: 0.00" for i, x in enumerate(tps, 1)]
    hist_block, hist = histogram_text(latencies)
    n, secs = round(float(tps.sum())), float(tps.size)
    summary = f"""
SQL statistics:
    queries performed:
        read:                            {14 * n}
        write:                           {4 * n}
        other:                           {2 * n}
        total:                           {20 * n}
    transactions:                        {n}   ({n / secs:.2f} per sec.)
    queries:                             {20 * n}  ({20 * n / secs:.2f} per sec.)
    ignored errors:                      4      ({4 / secs:.2f} per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          {secs:.4f}s
    total number of events:              {n}

Latency (ms):
         min:                                    {latencies.min():.2f}
         avg:                                    {latencies.mean():.2f}
         max:                                   {latencies.max():.2f}
         95th percentile:                        {np.quantile(latencies, 0.95):.2f}
         sum:                                 {latencies.sum():.2f}

Threads fairness:
    events (avg/stddev):           {n / threads:.4f}/1.00
    execution time (avg/stddev):   {secs:.4f}/0.00
"""
    head = ["sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)", "", "Running the test with following options:",
            f"Number of threads: {threads}", "Report intermediate results every 1 second(s)",
            "Initializing random number generator from seed (7).", "", "", "Initializing worker threads...", "",
            "Threads started!", ""]
    return "\n".join([*head, *per_s, hist_block, summary]), hist


def build_store(root: Path, exp: Experiment) -> tuple[ResultStore, dict[str, list[tuple[float, int]]]]:
    """Every planned run of `exp`, written as the runner would; one run of one cell never settles."""
    store = ResultStore(root)
    hists = {}
    for run in exp.plan():
        c = run.cell
        rng = np.random.default_rng(run.order)
        level = LEVEL[c.cache_pct] * PAGE[c.block_size] * math.exp(rng.normal(0, 0.02))
        tps = level * (1 + 0.05 * rng.normal(size=exp.measure_s))
        tps[:4] *= np.linspace(0.3, 1.0, 4)  # residual warm-up
        if run.run_id == RAMP_RUN:
            tps = np.linspace(0.3, 1.0, exp.measure_s) * level * (1 + 0.02 * rng.normal(size=exp.measure_s))
        text, hists[run.run_id] = sysbench_out(tps, rng.lognormal(math.log(4000 / level), 0.4, 3000),
                                               threads=c.threads)
        staging = store.begin_run(run.run_id)
        (staging / "sysbench.out").write_text(text)
        n = round(float(tps.sum()))
        store.commit_run(staging, RunRecord.from_dict({
            "run_id": run.run_id, "experiment": exp.name, "cell_id": c.cell_id, "cell": c.levels(),
            "repetition": run.repetition, "block": run.block, "order": run.order, "host": "db1",
            "status": "ok", "medium": {"name": "disk", "emulates": None}, "cache_bytes": 2**20,
            "dataset": {"data_physical_bytes": 2 * 1000 * 188 * 3, "data_logical_bytes": 2 * 1000 * 188 * 3},
            "started_utc": "2026-01-01T00:00:00+00:00",
            "system": {"window_s": float(exp.measure_s), "cpu_user_s": 2e-4 * n, "cpu_sys_s": 1e-4 * n,
                       "host_cpu_busy_s": 5e-4 * n, "dev_write_bytes": 4 * 188 * 3.0 * n,
                       "dev_read_ios": 0.5 * n if c.cache_pct == 25 else 0.0},
        }))
    failed = store.begin_run("innodb-c25-b4k-none-disk-t4-r9")
    store.commit_run(failed, RunRecord.from_dict({
        "run_id": "innodb-c25-b4k-none-disk-t4-r9", "experiment": exp.name, "cell_id": "innodb-c25-b4k-none-disk-t4",
        "cell": exp.cells()[0].levels(), "repetition": 9, "block": 9, "order": 99, "host": "db1", "status": "failed"}))
    return store, hists


@pytest.fixture(scope="module")
def exp() -> Experiment:
    return parse_experiment(SPEC)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, exp: Experiment):
    root = tmp_path_factory.mktemp("store")
    store, hists = build_store(root, exp)
    return store, hists


def test_analyse_writes_every_table_byte_identical_twice(built, exp: Experiment) -> None:
    store, _ = built
    analysis.analyse(store, exp)
    first = {p.name: p.read_bytes() for p in sorted(store.processed.iterdir())}
    analysis.analyse(store, exp)
    second = {p.name: p.read_bytes() for p in sorted(store.processed.iterdir())}
    assert first == second
    expected = {f"{t}.csv" for t in analysis.CSV_TABLES} | {"model.json", "intervals.parquet",
                                                             "histograms.parquet", "steady.parquet", "host-facts.json", "campaigns.json"}
    assert set(first) == expected


def test_analysis_results_on_known_data(built, exp: Experiment) -> None:
    store, hists = built
    a = analysis.analyse(store, exp)
    assert len(a.runs) == 12 and len(a.failed) == 1
    runs = a.runs.set_index("run_id")
    assert runs.loc[RAMP_RUN, "steady_reason"] == "drift" and runs.loc[RAMP_RUN, "steady"] is False
    assert runs.loc[RAMP_RUN, "flagged"] is True and runs.loc[RAMP_RUN, "drift_ci_lo"] > 5
    assert runs.loc[RAMP_RUN, "tps"] == runs.loc[RAMP_RUN, "tps_sysbench"]  # not silently trimmed
    ok = runs.drop(index=RAMP_RUN)
    # 40-s runs with 5 % white noise: the drift CI (about +-6 %) is too wide to show +-5 %: undetermined
    # or steady, never drifting
    assert ok["steady_reason"].isin(["", "undetermined"]).all() and (ok["trim_s"] >= 0).all()
    assert (ok["trim_method"] == "MSER-1").all()
    assert ((ok["drift_ci_lo"] <= ok["drift_pct"]) & (ok["drift_pct"] <= ok["drift_ci_hi"])).all()
    # tps is sysbench's figure of the window the histogram covers; the steady window's mean stays beside it
    assert (runs["tps"] == runs["tps_sysbench"]).all()
    assert (ok["tps_steady"] > ok["tps_sysbench"]).mean() > 0.8  # trimming the warm-up would raise the mean
    assert runs["mysqld_cpu_us_per_txn"].to_numpy() == pytest.approx(300.0, rel=1e-3)
    assert runs["write_amp"].to_numpy() == pytest.approx(3.0, rel=1e-3)
    assert runs["space_amp"].to_numpy() == pytest.approx(3.0)
    assert runs["err_ps"].to_numpy() == pytest.approx(0.1)

    cells = a.cells.set_index("cell_id")
    assert (cells["n"] == 3).all()
    assert cells.loc["innodb-c25-b16k-none-disk-t4", "n_not_steady"] == 1
    for cid, c in cells.iterrows():
        assert c["mean"] == pytest.approx(LEVEL[c["cache_pct"]] * PAGE[c["block_size"]], rel=0.15)
        assert c["ci_lo"] < c["mean"] < c["ci_hi"]  # Student-t, the primary interval
        assert c["boot_ci_lo"] < c["mean"] < c["boot_ci_hi"]  # the seeded bootstrap, kept beside it
        pooled = [(v, n) for rid, h in hists.items() if rid.startswith(cid + "-r") for v, n in h]
        assert c["p95_ms"] == sysbench.histogram_percentile(sysbench.merge_histograms(pooled), 95)

    r = a.ratios.set_index("cell_id")
    assert r.loc["innodb-c25-b4k-none-disk-t4", "baseline_cell_id"] == "innodb-c100-b4k-none-disk-t4"
    assert r.loc["innodb-c25-b4k-none-disk-t4", "ratio"] == pytest.approx(0.4, rel=0.1)

    p = a.pairwise
    assert len(p) == 2 and set(p["cache_pct"]) == {25, 100}
    assert p.loc[p["cache_pct"] == 100, "ratio"].iloc[0] == pytest.approx(1.25, rel=0.08)

    top = a.anova.iloc[0]
    assert top["term"] == "cache_pct" and top["rank"] == 1
    assert a.model["model"] == "main+2way" and a.model["factors"] == ["cache_pct", "block_size"]

    noise = a.noise.set_index("cell_id")
    assert "not_steady_runs" in noise.loc["innodb-c25-b16k-none-disk-t4", "flags"]
    assert noise.loc["innodb-c25-b16k-none-disk-t4", "noisy"]  # the ramp run makes its CV large

    eff = a.efficiency
    cpu = eff[eff["metric"] == "mysqld_cpu_us_per_txn"]
    assert len(cpu) == 4 and cpu["mean"].to_numpy() == pytest.approx(300.0, rel=1e-3)
    assert cpu["ratio"].to_numpy() == pytest.approx(1.0, rel=1e-3)
    assert "read_kb_per_txn" not in set(eff["metric"])  # never measured: left out, not zero

    h = a.headline.iloc[0]
    assert (h["low"], h["high"]) == (25, 100) and h["held"] == "block_size=4k"
    row = r.loc[h["low_cell_id"]]
    assert (h["ratio"], h["ci_lo"], h["ci_hi"]) == (row["ratio"], row["ci_lo"], row["ci_hi"])


def test_publish_writes_tables_and_macros_byte_identical(built, exp: Experiment, tmp_path: Path) -> None:
    store, _ = built
    analysis.analyse(store, exp)
    outs = []
    for name in ("a", "b"):
        written = steps.publish(store, exp, "unit", tmp_path / name / "fig", tmp_path / name / "gen")
        outs.append({p.name: p.read_bytes() for p in written})
    assert outs[0] == outs[1]
    macros = outs[0]["macros.tex"].decode()
    used = {"cacheRatio", "cacheRatioLo", "cacheRatioHi", "lowCachePct", "highCachePct", "cacheVerdict",
            "maxCvPct", "nRuns", "topFactor", "nComparisons", "nNotSteadyRuns", "cacheRatioBootLo"}
    for name in used:
        assert f"\\newcommand{{\\{name}}}" in macros, name
    assert "\\newcommand{\\topFactor}{Cache \\%}" in macros
    assert "\\newcommand{\\nNotSteadyRuns}{1}" in macros and "\\newcommand{\\nUntestedRuns}{0}" in macros
    assert "\\newcommand{\\steadyTrimMethod}{MSER-1}" in macros  # the method named as what it is
    stable, undetermined = (int(re.search(rf"\\newcommand{{\\{m}}}{{(\d+)}}", macros).group(1))
                            for m in ("nStableRuns", "nUndeterminedRuns"))
    assert stable + undetermined == 11  # the 12 runs less the ramp
    effects = outs[0]["table-effects.tex"].decode()
    assert "\\label{tab:effects}" in effects and "Cache \\% x Page" in effects
    pairwise = outs[0]["table-pairwise.tex"].decode()
    assert "Page 4k / 16k" in pairwise and "Cache \\% 25" in pairwise
    assert pairwise.count("\\begin{table*}") == 1 and pairwise.count("\\end{table*}") == 1


def test_publish_from_processed_tables_of_an_older_analysis(built, exp: Experiment, tmp_path: Path) -> None:
    """Processed directories written before this analysis existed (runs, cells, ratios, failed) still
    publish: the headline falls back to the ratios, and the new tables are empty."""
    store, _ = built
    analysis.analyse(store, exp)
    old = ResultStore(tmp_path / "old")
    old.processed.mkdir(parents=True)
    for name in ("runs", "cells", "ratios", "failed"):
        shutil.copyfile(store.processed / f"{name}.csv", old.processed / f"{name}.csv")
    st = load_study_tables(old, exp)
    out = steps.publish_tables([st], "unit", tmp_path / "fig", tmp_path / "gen")
    macros = (tmp_path / "gen" / "macros.tex").read_text()
    # no model: no top factor, a macro that stops LaTeX where the text would use it
    assert "\\newcommand{\\lowCachePct}{25}" in macros
    assert "\\newcommand{\\topFactor}{\\dbmatrixMissing{topFactor}}" in macros
    assert (tmp_path / "gen" / "table-pairwise.tex").read_text().startswith("% Generated")
    # no model and no per-second rows: those figures are skipped with a note, the others drawn
    assert "throughput-vs-cache" in out.figures and "factor-effects" not in out.figures
    assert any(n.startswith("factor-effects from unit-analysis: factor effects need") for n in out.skipped)
    assert any(n.startswith("throughput-over-time from unit-analysis: throughput over time: no per-second")
               for n in out.skipped)
    assert sorted(p.stem for p in (tmp_path / "fig").glob("*.pdf")) == sorted(out.figures)


def test_exclude_not_steady(built, exp: Experiment) -> None:
    store, _ = built
    a = analysis.analyse(store, exp, exclude_not_steady=True)
    cells = a.cells.set_index("cell_id")
    assert cells.loc["innodb-c25-b16k-none-disk-t4", "n"] == 2
    assert len(a.runs) == 12  # the runs table keeps every run, flagged
    analysis.analyse(store, exp)  # leave the default tables for the other tests


# ------------------------------------------------------------------------------------ pure analysis


def frames(exp: Experiment, skip: set[tuple[Any, ...]] = frozenset()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs and per-second intervals (40 s, stationary) for every planned run of `exp`."""
    rng = np.random.default_rng(1)
    runs, intervals = [], []
    eng = {"innodb": 1.0, "myrocks": 0.7}
    for run in exp.plan():
        c = run.cell
        if (c.engine, c.cache_pct, c.block_size) in skip:
            continue
        level = LEVEL[c.cache_pct] * PAGE[c.block_size] * eng[c.engine] * math.exp(rng.normal(0, 0.02))
        tps = level * (1 + 0.03 * rng.normal(size=40))
        runs.append({"run_id": run.run_id, "cell_id": c.cell_id, **c.levels(), "repetition": run.repetition,
                     "status": "ok", "tps": tps.mean(), "transactions": int(tps.sum()), "total_time_s": 40.0,
                     "data_physical_bytes": 1e6, "data_logical_bytes": 1e6})
        intervals.append(pd.DataFrame({"run_id": run.run_id, "cell_id": c.cell_id, "t_s": np.arange(1, 41),
                                       "tps": tps}))
    return pd.DataFrame(runs), pd.concat(intervals, ignore_index=True)


def test_headline_holds_the_other_factors_at_their_reference_levels() -> None:
    exp = parse_experiment({**SPEC, "factors": {"engine": ["myrocks", "innodb"], "cache_pct": [25, 50, 100],
                                                "block_size": ["16k", "4k"]},
                            "baseline": {"cache_pct": 100, "engine": "innodb"}})
    runs, intervals = frames(exp)
    a = analysis.analyse_frames(runs, intervals, pd.DataFrame(), exp)
    h = a.headline.iloc[0]
    assert (h["low"], h["high"]) == (25, 100)
    assert h["held"] == "engine=innodb;block_size=16k"  # the baseline's engine, the spec's first page size
    assert h["low_mean"] == pytest.approx(400, rel=0.1) and h["high_mean"] == pytest.approx(1000, rel=0.1)
    row = a.ratios.set_index("cell_id").loc[h["low_cell_id"]]
    assert row["baseline_cell_id"] == h["high_cell_id"] and row["ratio"] == h["ratio"]
    assert a.cells["p95_ms"].isna().all()  # no histograms: no percentiles, and no error
    # without the reference cells, the pair that matches the most reference levels
    runs2, intervals2 = frames(exp, skip={("innodb", 25, "16k")})
    h2 = analysis.analyse_frames(runs2, intervals2, pd.DataFrame(), exp).headline.iloc[0]
    assert h2["held"] in ("engine=innodb;block_size=4k", "engine=myrocks;block_size=16k")


def test_headline_in_a_fraction_without_matched_cells_pools() -> None:
    exp = parse_experiment({**SPEC, "factors": {"engine": ["innodb", "myrocks"], "cache_pct": [25, 100],
                                                "block_size": ["4k", "16k"]}})
    runs, intervals = frames(exp, skip={("innodb", 25, "4k"), ("myrocks", 25, "16k"),
                                        ("innodb", 100, "16k"), ("myrocks", 100, "4k")})
    a = analysis.analyse_frames(runs, intervals, pd.DataFrame(), exp)
    h = a.headline.iloc[0]
    assert h["pooled_over"] == "engine,block_size" and h["low_cell_id"] == "pooled"
    assert a.model["model"] == "main"  # a 2^(3-1) half fraction aliases the two-way interactions
    assert "not estimable" in a.model["note"]
    # Pooled cells mix the other factors' effects in: the headline takes the model's main effect instead.
    assert h["estimate"] == "factorial model main effect"
    main = a.effects[a.effects["term"] == "cache_pct"].set_index("level_1")["log_effect"]
    assert h["ratio"] == pytest.approx(math.exp(main[25] - main[100]))
    assert h["ci_lo"] < h["ratio"] < h["ci_hi"] and pd.notna(h["pooled_ci_lo"])


def test_cells_table_shows_the_varied_factors() -> None:
    exp = parse_experiment({**SPEC, "factors": {"engine": ["innodb", "myrocks"], "cache_pct": [25, 100]},
                            "comparisons": None})
    runs, intervals = frames(exp)
    a = analysis.analyse_frames(runs, intervals, pd.DataFrame(), exp)
    t = paper_inputs.cells_table(a)
    assert list(t.columns[:2]) == ["Engine", "Cache %"] and "Page" not in t.columns
    assert list(t["Cache %"][:2]) == [25, 100] and len(t) == 4


def test_closed_loop_only_in_the_model() -> None:
    df = pd.DataFrame({"rate_fraction": [0, 0.5, None, 0.0], "x": range(4)})
    assert list(analysis.closed_loop(df)["x"]) == [0, 2, 3]
    assert analysis.closed_loop(df.drop(columns="rate_fraction")).shape == (4, 1)


def test_steady_state_settings_follow_the_run_length() -> None:
    assert analysis.steady_params(900) == {"batch_s": 1, "min_seconds": 20}  # MSER-1
    assert analysis.steady_params(20) == {"batch_s": 1, "min_seconds": 20}
    # the quick profile: truncated with MSER-2 as before (same window means), too short for the drift test
    assert analysis.steady_params(10) == {"batch_s": 2, "min_seconds": 10}
    assert analysis.steady_params(3) == {"batch_s": 2, "min_seconds": 10}  # smoke: neither


def test_benchmark_script_runs_small() -> None:
    mod = benchmark_scripts.load("analysis_scale")
    report = mod.run(n_runs=60, seconds=40, repetitions=3, seed=1)
    assert report["runs"] == 60 and report["interval_rows"] == 60 * 40
    assert report["steady_s"] >= 0 and report["peak_rss_mib"] > 0
    # 40-s series with 8 % AR(1) noise: mostly too noisy to tell; the 2 % of ramps drift
    fractions = report["steady_fraction"] + report["not_steady_fraction"] + report["undetermined_fraction"]
    assert fractions == pytest.approx(1.0) and report["undetermined_fraction"] > 0.5


def test_short_runs_are_untested_and_keep_the_sysbench_throughput() -> None:
    exp = parse_experiment({**SPEC, "measure_s": 8})
    runs, intervals = frames(exp)
    intervals = intervals[intervals["t_s"] <= 8]
    intervals = intervals[intervals["run_id"] != runs["run_id"].iloc[0]]  # one run without per-second rows
    a = analysis.analyse_frames(runs, intervals, pd.DataFrame(), exp)
    r = a.runs.set_index("run_id")
    assert r.loc[runs["run_id"].iloc[0], "steady_reason"] == "no_intervals"
    assert set(r["steady_reason"]) == {"too_short", "no_intervals"} and r["steady"].isna().all()
    assert r["flagged"].isna().all() and (r["trim_method"] == "none").all()
    assert (r["tps"] == r["tps_sysbench"]).all()
    assert (a.cells["n_untested"] == 3).all() and (a.cells["n_not_steady"] == 0).all()
    assert a.noise["flags"].str.contains("steady_state_untested").all()


# ------------------------------------------------------------------------------------ figures and paper


def test_publish_draws_every_figure_it_has_data_for_and_removes_stale_ones(built, exp: Experiment,
                                                                          tmp_path: Path) -> None:
    store, _ = built
    analysis.analyse(store, exp)
    figs, gen = tmp_path / "fig", tmp_path / "gen"
    figs.mkdir()
    (figs / "old-figure.pdf").write_bytes(b"%PDF stale")
    out = steps.publish_tables([load_study_tables(store, exp)], "unit", figs, gen)
    assert set(out.figures) == {"factor-effects", "throughput-vs-cache", "block-size", "efficiency",
                                "throughput-over-time"}
    assert not (figs / "old-figure.pdf").exists(), "figures/ holds exactly the figures of this data"
    assert any(n.startswith("compression from unit-analysis") for n in out.skipped)
    includes = (gen / "figures.tex").read_text()
    assert "\\input{fig-block-size}" in includes and "fig-compression" not in includes
    assert includes.index("fig-factor-effects") < includes.index("fig-throughput-vs-cache")
    prov = json.loads((gen / "provenance.json").read_text())
    assert prov["studies"][0]["n_runs"] == 12 and len(prov["studies"][0]["run_dirs"]) == 12
    assert set(prov["figures"]) == set(out.figures)
    claims = pd.read_csv(gen / "claims.csv")
    assert len(claims) == len(CLAIMS) and set(claims["verdict"]) <= {"agree", "disagree", "inconclusive",
                                                                     "not tested"}
    assert "not run in this build" in (gen / "replication-section.tex").read_text().lower()


def test_block_size_table_recovers_the_page_effect(built, exp: Experiment) -> None:
    store, _ = built
    analysis.analyse(store, exp)
    st = load_study_tables(store, exp)
    table, a, b = figure_data.block_size_table(st)
    # treatment / baseline, as every ratio figure: the baseline is the spec's first level, 4k
    assert (a, b) == ("16k", "4k") and list(table["cache_pct"]) == [25, 100]
    for _, r in table.iterrows():  # cache 25's 16k cell holds the run that never settles: wider there
        assert r["ci_lo"] < PAGE["16k"] / PAGE["4k"] < r["ci_hi"] and r["basis"].startswith("cell means of 2 cells")
    assert table.set_index("cache_pct").loc[100, "estimate"] == pytest.approx(1 / 1.25, rel=0.08)


def test_adjusted_means_in_a_fraction_use_the_model() -> None:
    full = parse_experiment({**SPEC, "factors": {"engine": ["innodb", "myrocks"], "cache_pct": [25, 100],
                                                 "block_size": ["4k", "16k"]}})
    runs, _ = frames(full)
    t = figure_data.adjusted_means(runs, "tps", ["engine", "cache_pct"], dict(full.factors))
    assert len(t) == 4 and (t["basis"] == "main+2way model").all()
    got = t.set_index(["engine", "cache_pct"])["mean"]
    # geometric mean over the page sizes: LEVEL x engine x sqrt(1.25 x 1.0)
    assert got[("myrocks", 25)] == pytest.approx(400 * 0.7 * math.sqrt(1.25), rel=0.03)
    assert (t["ci_lo"] < t["mean"]).all() and (t["mean"] < t["ci_hi"]).all()
    # a metric measured in a half fraction of the cells only: the two-way model is not estimable there
    half = ((runs["engine"] == "myrocks").astype(int) + (runs["cache_pct"] == 25) + (runs["block_size"] == "4k")) % 2
    t2 = figure_data.adjusted_means(runs.assign(w=np.where(half == 0, runs["tps"], np.nan)), "w",
                                 ["engine", "cache_pct"], dict(full.factors))
    assert len(t2) == 4 and not (t2["basis"] == "main+2way model").any()


def test_exploration_helpers(built, exp: Experiment) -> None:
    store, _ = built
    analysis.analyse(store, exp)
    runs = explore.load_runs_table(store.root)
    sel = explore.filter_runs(runs, {"cache_pct": 25, "block_size": ["4k", "16k"]})
    assert len(sel) == 6 and set(sel["cache_pct"]) == {25}
    with pytest.raises(ValueError, match="filters: 'nope' is not a column"):
        explore.filter_runs(runs, {"nope": 1})
    with pytest.raises(ValueError, match="filters.cache_pct: 50 not among the levels 100, 25"):
        explore.filter_runs(runs, {"cache_pct": 50})
    with pytest.raises(FileNotFoundError, match="no processed/runs.csv"):
        explore.load_runs_table(store.root / "nowhere")
    ref = explore.load_runs_table()  # the committed reference of the storage matrix
    assert len(ref) >= 48 and {"engine", "medium", "tps"} <= set(ref.columns)


def test_threads_study_gets_prefixed_macros_and_its_figure(built, exp: Experiment, tmp_path: Path) -> None:
    """Two studies in one build: the storage study keeps its macro names, the thread sweep prefixes
    its own (thr...), no name is defined twice, and figure 1 comes from the sweep."""
    store, _ = built
    analysis.analyse(store, exp)
    sweep = parse_experiment({**SPEC, "experiment": "unit-threads", "factors": {"cache_pct": [25, 100],
                                                                               "threads": [1, 4, 16]},
                              "comparisons": None})
    tstore, _ = build_store(tmp_path / "threads", sweep)
    analysis.analyse(tstore, sweep)
    studies = [load_study_tables(store, exp, "storage", ""),
               load_study_tables(tstore, sweep, "threads", "thr")]
    out = steps.publish_tables(studies, "unit", tmp_path / "fig", tmp_path / "gen")
    assert out.figures["throughput-vs-threads"] == "unit-threads"
    assert out.figures["throughput-vs-cache"] == "unit-analysis"
    text = (tmp_path / "gen" / "macros.tex").read_text()
    names = re.findall(r"\\newcommand\{\\([A-Za-z]+)\}", text)
    assert len(names) == len(set(names))
    assert "\\newcommand{\\thrNRuns}{18}" in text and "\\newcommand{\\nRuns}{12}" in text
    assert "\\newcommand{\\thrPeakThreads}" in text and "\\newcommand{\\nStudies}{2}" in text
    assert (tmp_path / "gen" / "table-thr-cells.tex").read_text().count("\\label{tab:thrcells}") == 1
    further = pd.read_csv(tmp_path / "gen" / "further.csv").set_index("id")  # our own findings' table
    assert further.loc["threadsScale", "study"] == "unit-threads"


def test_replication_section_inputs_the_galera_helpers_section(tmp_path: Path) -> None:
    assert hooks.replication_section(tmp_path, published=True) is None  # no paper/replication.tex
    (tmp_path / "replication.tex").write_text("\\section{Replication}\n")
    assert hooks.replication_section(tmp_path, published=False) is None  # nothing was published
    assert hooks.replication_section(tmp_path, published=True) == (
        "\\input{generated/replication-macros.tex}\n\\input{replication}")
    (tmp_path / "replication.tex").write_text("\\input{generated/replication-macros.tex}\n\\section{R}\n")
    assert hooks.replication_section(tmp_path, published=True) == "\\input{replication}"  # no double input
