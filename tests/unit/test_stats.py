"""Tests of dbmatrix.analyse.stats: bootstrap and t CIs against scipy and their coverage, order invariance, steady
state on synthetic series, efficiency, exact histogram merging, noise report and the adaptive rule."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from tests import benchmark_scripts

from dbmatrix.analyse.stats import (
    DEFAULT_SEED,
    EFFICIENCY_METRICS,
    MIN_DRIFT_SAMPLES,
    STABLE_BAND_PCT,
    SYSBENCH_ROW_BYTES,
    adaptive_additions,
    bootstrap_mean_ci,
    bootstrap_ratio_ci,
    cell_summary,
    drift_fgls,
    efficiency,
    merged_percentiles,
    noise_report,
    ratios_to_baseline,
    ratios_to_baseline_cells,
    stable_seed,
    steady_state,
    steady_state_series,
    steady_verdict,
    summarise_cells,
    t_halfwidth_pct,
    t_mean_ci,
)
from dbmatrix.parse import sysbench


def test_mean_ci_agrees_with_scipy_percentile_bootstrap() -> None:
    x = np.random.default_rng(42).normal(100.0, 10.0, 30)
    lo, hi = bootstrap_mean_ci(x, n_resamples=20_000, seed=1)
    ref = sps.bootstrap((x,), np.mean, confidence_level=0.95, n_resamples=20_000, method="percentile",
                        rng=np.random.default_rng(2)).confidence_interval
    width = ref.high - ref.low
    assert lo < x.mean() < hi
    assert abs(lo - ref.low) < 0.05 * width
    assert abs(hi - ref.high) < 0.05 * width


def test_mean_ci_confidence_level_changes_width() -> None:
    x = np.random.default_rng(3).normal(50.0, 5.0, 25)
    lo90, hi90 = bootstrap_mean_ci(x, confidence=0.90, n_resamples=5000)
    lo99, hi99 = bootstrap_mean_ci(x, confidence=0.99, n_resamples=5000)
    assert lo99 < lo90 < hi90 < hi99


def test_mean_ci_is_seeded() -> None:
    x = np.random.default_rng(0).normal(size=12)
    assert bootstrap_mean_ci(x, seed=5) == bootstrap_mean_ci(x, seed=5)
    assert bootstrap_mean_ci(x, seed=5) != bootstrap_mean_ci(x, seed=6)


@pytest.mark.parametrize("values", [[], [3.0], [float("nan"), 7.0]])
def test_mean_ci_needs_two_values(values: list[float]) -> None:
    lo, hi = bootstrap_mean_ci(values)
    assert math.isnan(lo) and math.isnan(hi)


def test_mean_ci_ignores_nans() -> None:
    x = [10.0, 12.0, float("nan"), 11.0, 13.0]
    assert bootstrap_mean_ci(x, seed=9) == bootstrap_mean_ci([10.0, 12.0, 11.0, 13.0], seed=9)


def test_mean_ci_coverage() -> None:
    """The nominal 95 % interval should cover the true mean in roughly 95 % of samples
    (percentile bootstrap at n=20 is known to be a little narrow)."""
    trials, covered = 300, 0
    for s in range(trials):
        x = np.random.default_rng(s).normal(100.0, 10.0, 20)
        lo, hi = bootstrap_mean_ci(x, n_resamples=2000, seed=10_000 + s)
        covered += lo <= 100.0 <= hi
    assert 0.90 <= covered / trials <= 0.98


def test_ratio_ci_coverage() -> None:
    trials, covered = 300, 0
    for s in range(trials):
        rng = np.random.default_rng(5000 + s)
        a = rng.normal(200.0, 20.0, 20)
        b = rng.normal(100.0, 10.0, 20)
        point, lo, hi = bootstrap_ratio_ci(a, b, n_resamples=2000, seed=s)
        assert point == pytest.approx(a.mean() / b.mean())
        assert lo <= point <= hi
        covered += lo <= 2.0 <= hi
    assert 0.90 <= covered / trials <= 0.98


def test_ratio_ci_small_samples() -> None:
    point, lo, hi = bootstrap_ratio_ci([4.0], [2.0, 2.0])
    assert point == 2.0 and math.isnan(lo) and math.isnan(hi)
    point, lo, hi = bootstrap_ratio_ci([], [2.0, 2.0])
    assert math.isnan(point)


def test_ratio_ci_of_constant_samples_is_exact() -> None:
    assert bootstrap_ratio_ci([6.0, 6.0, 6.0], [3.0, 3.0]) == (2.0, 2.0, 2.0)


def test_stable_seed() -> None:
    assert stable_seed(1, "a|tps") == stable_seed(1, "a|tps")
    assert stable_seed(1, "a|tps") != stable_seed(1, "b|tps")
    assert stable_seed(1, "a|tps") != stable_seed(2, "a|tps")
    assert 0 <= stable_seed(2**40, "x") < 2**32


def runs_frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for engine in ("innodb", "myrocks"):
        for pct, level in ((25, 500.0), (50, 750.0), (100, 1000.0)):
            for rep in range(1, 6):
                scale = 1.0 if engine == "innodb" else 0.8
                rows.append({"cell_id": f"{engine}-c{pct}", "engine": engine, "cache_pct": pct,
                             "repetition": rep, "tps": rng.normal(level * scale, 20.0),
                             "qps": rng.normal(level * 20, 300.0)})
    return pd.DataFrame(rows)


def test_cell_summary_values() -> None:
    df = runs_frame()
    s = cell_summary(df, "tps")
    assert list(s["cell_id"]) == sorted(df["cell_id"].unique())
    assert (s["n"] == 5).all() and (s["metric"] == "tps").all()
    for _, row in s.iterrows():
        v = df.loc[df["cell_id"] == row["cell_id"], "tps"].to_numpy()
        assert row["mean"] == pytest.approx(v.mean())
        assert row["sd"] == pytest.approx(v.std(ddof=1))
        assert row["cv"] == pytest.approx(v.std(ddof=1) / v.mean())
        assert row["ci_lo"] < row["mean"] < row["ci_hi"]
    assert (s["confidence"] == 0.95).all()


def test_cell_summary_is_deterministic() -> None:
    df = runs_frame()
    pd.testing.assert_frame_equal(cell_summary(df), cell_summary(df.copy()))


def test_cell_summary_groups_by_several_columns() -> None:
    s = cell_summary(runs_frame(), "qps", by=("engine", "cache_pct"))
    assert list(zip(s["engine"], s["cache_pct"])) == [
        ("innodb", 25), ("innodb", 50), ("innodb", 100), ("myrocks", 25), ("myrocks", 50), ("myrocks", 100)]
    assert (s["metric"] == "qps").all()


def test_cell_summary_single_repetition_has_no_interval() -> None:
    df = runs_frame()
    s = cell_summary(df[df["repetition"] == 1])
    assert (s["n"] == 1).all()
    assert s["sd"].isna().all() and s["ci_lo"].isna().all() and s["ci_hi"].isna().all()


def test_cell_summary_point_estimates_ignore_row_order() -> None:
    df = runs_frame()
    shuffled = df.sample(frac=1.0, random_state=11).reset_index(drop=True)
    a, b = cell_summary(df), cell_summary(shuffled)
    cols = ["cell_id", "n", "mean", "sd", "cv"]
    pd.testing.assert_frame_equal(a[cols], b[cols])


def test_cell_summary_is_invariant_to_row_order() -> None:
    df = runs_frame()
    shuffled = df.sample(frac=1.0, random_state=11).reset_index(drop=True)
    pd.testing.assert_frame_equal(cell_summary(df), cell_summary(shuffled))


def test_ratios_are_invariant_to_row_order() -> None:
    df = runs_frame()
    shuffled = df.sample(frac=1.0, random_state=11).reset_index(drop=True)
    pd.testing.assert_frame_equal(ratios_to_baseline(df, "cache_pct", 100, others=("engine",)),
                                  ratios_to_baseline(shuffled, "cache_pct", 100, others=("engine",)))


def test_ratios_to_baseline() -> None:
    df = runs_frame()
    r = ratios_to_baseline(df, "cache_pct", 100, others=("engine",))
    assert len(r) == 6
    assert list(r.columns[:2]) == ["engine", "cache_pct"]
    for _, row in r.iterrows():
        sel = (df["engine"] == row["engine"])
        v = df.loc[sel & (df["cache_pct"] == row["cache_pct"]), "tps"]
        base = df.loc[sel & (df["cache_pct"] == 100), "tps"]
        assert row["ratio"] == pytest.approx(v.mean() / base.mean())
        assert row["mean"] == pytest.approx(v.mean())
        assert row["baseline_mean"] == pytest.approx(base.mean())
        assert (row["n"], row["n_baseline"]) == (5, 5)
        assert row["cache_pct"] == 100 or row["ci_lo"] <= row["ratio"] <= row["ci_hi"]
    base_rows = r[r["cache_pct"] == 100]
    assert (base_rows["ratio"] == 1.0).all()
    assert base_rows["ci_lo"].isna().all() and base_rows["ci_hi"].isna().all()  # itself: no interval
    quarter = r[r["cache_pct"] == 25]
    assert quarter["ratio"].between(0.45, 0.55).all()  # 500/1000 with small noise
    assert (quarter["ci_hi"] < 1.0).all()


def test_ratios_without_others_and_missing_baseline() -> None:
    df = runs_frame()
    one = df[df["engine"] == "innodb"]
    r = ratios_to_baseline(one, "cache_pct", 25)
    assert list(r["cache_pct"]) == [25, 50, 100]
    assert r.loc[r["cache_pct"] == 100, "ratio"].iloc[0] == pytest.approx(2.0, rel=0.05)
    # a group without the baseline level gives no rows rather than dividing by nothing
    no_base = df[~((df["engine"] == "myrocks") & (df["cache_pct"] == 100))]
    r = ratios_to_baseline(no_base, "cache_pct", 100, others=("engine",))
    assert set(r["engine"]) == {"innodb"}


# =============================================================================== steady state


def ar1(rng: np.random.Generator, shape: tuple[int, int], phi: float) -> np.ndarray:
    """Stationary AR(1) noise with unit marginal variance, one series per row."""
    e = rng.normal(size=shape)
    x = np.empty(shape)
    x[:, 0] = e[:, 0]
    for t in range(1, shape[1]):
        x[:, t] = phi * x[:, t - 1] + math.sqrt(1 - phi**2) * e[:, t]
    return x


def intervals_frame(series: dict[str, np.ndarray]) -> pd.DataFrame:
    frames = [pd.DataFrame({"run_id": rid, "cell_id": rid.rsplit("-r", 1)[0], "t_s": np.arange(1, x.size + 1),
                            "tps": x, "err_ps": 0.5, "reconn_ps": 0.0}) for rid, x in series.items()]
    return pd.concat(frames, ignore_index=True)


def test_stationary_series_is_steady_and_barely_trimmed() -> None:
    x = 1000 + 20 * ar1(np.random.default_rng(1), (1, 300), 0.5)[0]
    s = steady_state_series(x)
    assert s["steady"] is True and s["steady_reason"] == "" and s["flagged"] is False
    assert s["trim_method"] == "MSER-1" and s["trim_s"] <= 30
    assert -STABLE_BAND_PCT <= s["drift_ci_lo"] <= 0 <= s["drift_ci_hi"] <= STABLE_BAND_PCT
    assert 0.2 <= s["drift_phi"] <= 0.8  # the AR(1) coefficient is estimated (true 0.5)
    assert s["tps_steady"] == pytest.approx(x[s["trim_s"]:].mean())


def test_warmup_is_trimmed() -> None:
    x = 1000 + 40 * np.random.default_rng(2).normal(size=200)
    x[:30] *= np.linspace(0.1, 1.0, 30)
    s = steady_state_series(x)
    assert s["steady"] is True
    assert 20 <= s["trim_s"] <= 40
    assert s["tps_steady"] == pytest.approx(1000, rel=0.01)
    assert s["tps_steady"] > x.mean()  # the warm-up would have biased the whole-run mean down


@pytest.mark.parametrize("shape", ["ramp", "decay"])
def test_series_that_never_settles_is_flagged(shape: str) -> None:
    rng = np.random.default_rng(3)
    trend = np.linspace(400, 1000, 300) if shape == "ramp" else np.linspace(1000, 500, 300)
    s = steady_state_series(trend + 30 * rng.normal(size=300))
    assert s["steady"] is False and s["steady_reason"] == "drift" and s["flagged"] is True
    assert s["trim_s"] == 0 and s["steady_s"] == 300  # summarised over the whole run, not trimmed
    assert abs(s["drift_pct"]) > 20 and s["drift_p"] < 0.01
    assert s["drift_ci_lo"] > STABLE_BAND_PCT if shape == "ramp" else s["drift_ci_hi"] < -STABLE_BAND_PCT


def test_short_series_is_not_tested() -> None:
    s = steady_state_series([900.0, 1000.0, 1100.0, 1000.0, 950.0])
    assert s["steady"] is None and s["steady_reason"] == "too_short" and s["flagged"] is None
    assert s["trim_method"] == "none" and math.isnan(s["drift_pct"]) and math.isnan(s["drift_ci_lo"])
    assert s["tps_steady"] == pytest.approx(990.0) and s["steady_s"] == 5
    # long enough to truncate, but fewer than MIN_DRIFT_SAMPLES seconds are left after the warm-up:
    # untested, never steady, even though the rest is perfectly flat
    x = np.full(MIN_DRIFT_SAMPLES + 10, 1000.0)
    x[:12] = np.linspace(100, 900, 12)
    s = steady_state_series(x)
    assert s["trim_s"] >= 11 and s["steady_s"] < MIN_DRIFT_SAMPLES
    assert s["steady"] is None and s["steady_reason"] == "too_short"
    flat = steady_state_series(np.full(MIN_DRIFT_SAMPLES, 1000.0))  # exactly the minimum: tested
    assert flat["steady"] is True and flat["drift_ci_lo"] == flat["drift_ci_hi"] == 0


def test_noisy_series_is_undetermined_not_steady() -> None:
    """Flat but noisy (per-second CV 20 %): the drift CI is wider than the band, so no verdict."""
    s = steady_state_series(1000 * (1 + 0.2 * ar1(np.random.default_rng(8), (1, 40), 0.3)[0]))
    assert s["steady"] is None and s["steady_reason"] == "undetermined"
    assert s["drift_ci_lo"] < -STABLE_BAND_PCT and s["drift_ci_hi"] > STABLE_BAND_PCT


def test_verdict_against_the_band() -> None:
    lo = np.array([-2.0, 6.0, 2.0, -4.0, -12.0, 1.0])
    hi = np.array([3.0, 9.0, 14.0, 8.0, -6.0, 4.0])
    mid = (lo + hi) / 2
    flagged = (lo > 0) | (hi < 0)
    v = steady_verdict(flagged, mid, lo, hi, 5.0)
    # inside; outside; flagged with |drift| 8 > 5; too wide; outside below; flagged but inside the band
    assert list(v) == [True, False, False, None, False, True]


def test_false_alarm_rate_and_power_over_many_seeds() -> None:
    """Stationary AR(1) series (per-second CV 10 %, lag-1 correlation 0.5, 300 s) are flagged at about the
    test's 5 % level and rarely found drifting; a ramp (x2 over the run) is nearly always found drifting.
    Fixed seeds: the rates are exact numbers, and the bounds leave room for a different but sound
    implementation (not for a broken one)."""
    rng = np.random.default_rng(20261122)
    k, n = 400, 300
    noise = 1000 * (1 + 0.10 * ar1(rng, (k, n), 0.5))
    ramp = noise * np.linspace(0.5, 1.0, n)
    series = {f"s-r{i:03d}": noise[i] for i in range(k)} | {f"d-r{i:03d}": ramp[i] for i in range(k)}
    df = steady_state(intervals_frame(series))
    stationary, drifting = df[df["run_id"].str.startswith("s-")], df[df["run_id"].str.startswith("d-")]
    assert stationary["flagged"].map(lambda v: v is True).mean() <= 0.06  # measured: 0.035
    assert stationary["steady"].map(lambda v: v is False).mean() <= 0.06  # measured: 0.035
    assert drifting["steady"].map(lambda v: v is False).mean() >= 0.95  # measured: 1.0


def test_acceptance_size_and_power_of_the_drift_test() -> None:
    """Issue 14's acceptance, on the simulation of benchmarks/bench_steady_power.py (seeded, 600 trials a
    case): at the autocorrelation measured on the reference runs (phi 0.35, per-second CV 6.2 %) and at
    phi 0 and 0.6, a flat 60-s series is flagged in <= 5 %; a 10 % linear drift over 60 s is flagged in
    >= 90 % where the noise allows it (CV 1 % at phi 0.35: 0.97; CV 3 % uncorrelated: 0.93). At the
    reference runs' own noise a 60-s run cannot have that power (0.43: the CI half-width is about 8 %, and
    no test does much better: without truncation the same FGLS reaches 0.65); 180 s do (0.95)."""
    bench = benchmark_scripts.load("bench_steady_power")
    for phi in (0.0, bench.PHI_REAL, 0.6):
        r = bench.case(phi, bench.CV_REAL, n=60, trials=600)
        assert r["flat_flagged"] <= 0.05, (phi, r["flat_flagged"])
        assert r["flat_not_steady"] <= 0.05
    for phi, cv, n in ((bench.PHI_REAL, 0.01, 60), (0.0, 0.03, 60), (bench.PHI_REAL, bench.CV_REAL, 180)):
        r = bench.case(phi, cv, n=n, trials=600)
        assert r["drift_flagged"] >= 0.90, (phi, cv, n, r["drift_flagged"])
        assert r["flat_flagged"] <= 0.05, (phi, cv, n, r["flat_flagged"])


def test_prais_winsten_size_on_short_windows() -> None:
    """The drift CI alone (no truncation) on flat AR(1) windows of the minimum length and longer keeps its
    95 % level (the bias-corrected phi is what holds it there; OLS ignoring phi is far too liberal)."""
    rng = np.random.default_rng(11)
    for L in (MIN_DRIFT_SAMPLES, 60):
        for phi in (0.0, 0.35, 0.6):
            X = 1000 * (1 + 0.06 * ar1(rng, (2000, L), phi))
            d = drift_fgls(X, np.zeros(2000, dtype=np.int64))
            rate = float(((d["ci_lo"] > 0) | (d["ci_hi"] < 0)).mean())
            assert rate <= (0.06 if phi <= 0.35 else 0.07), (L, phi, rate)


def test_window_statistics_match_numpy() -> None:
    rng = np.random.default_rng(4)
    x = 800 + 50 * rng.normal(size=120)
    x[[80, 81, 110]] = [0.0, 100.0, 300.0]  # a zero second and two stall seconds (< half the median),
    # in the second half, which MSER never trims
    s = steady_state_series(x)
    w = x[s["trim_s"]:]
    assert s["steady_reason"] in ("", "undetermined")  # 6 % white noise over ~120 s: CI about +-4 %
    assert s["sec_tps_min"] == 0.0
    for key, q in (("sec_tps_p1", 0.01), ("sec_tps_p5", 0.05), ("sec_tps_median", 0.5)):
        assert s[key] == pytest.approx(np.quantile(w, q))
    assert s["sec_tps_cv"] == pytest.approx(w.std(ddof=1) / w.mean())
    assert s["stall_s"] == int((w < 0.5 * np.median(w)).sum()) == 3
    assert s["zero_s"] == 1


def test_vectorised_equals_one_run_at_a_time_and_ignores_row_order() -> None:
    rng = np.random.default_rng(5)
    series = {f"c{i % 3}-r{i}": 500 + 40 * rng.normal(size=n) for i, n in enumerate([5, 30, 30, 64, 120, 120, 601])}
    series["c0-r99"] = np.linspace(200, 900, 90)
    df = intervals_frame(series)
    together = steady_state(df)
    shuffled = steady_state(df.sample(frac=1.0, random_state=3))
    pd.testing.assert_frame_equal(together, shuffled)
    assert list(together["run_id"]) == sorted(series)
    for _, row in together.iterrows():
        alone = steady_state_series(series[row["run_id"]])
        for key, value in alone.items():
            if key in ("err_ps", "reconn_ps"):
                continue  # the one-series helper has no error columns
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(row[key]), key
            else:
                assert row[key] == value, key
        assert row["cell_id"] == row["run_id"].rsplit("-r", 1)[0]
        assert row["err_ps"] == 0.5 and row["reconn_ps"] == 0.0


def test_steady_state_input_errors() -> None:
    with pytest.raises(ValueError, match="'tps'"):
        steady_state(pd.DataFrame({"run_id": ["a"], "t_s": [1]}))
    with pytest.raises(ValueError, match="min_seconds"):
        steady_state(intervals_frame({"a-r1": np.ones(30)}), batch_s=5, min_seconds=3)
    with pytest.raises(ValueError, match="min_samples"):
        steady_state(intervals_frame({"a-r1": np.ones(30)}), min_samples=3)
    empty = steady_state(pd.DataFrame(columns=["run_id", "t_s", "tps"]))
    assert empty.empty and "steady" in empty.columns


# =============================================================================== efficiency


def efficiency_runs() -> pd.DataFrame:
    return pd.DataFrame({
        "run_id": ["a", "b"], "transactions": [30_000, 9_000], "total_time_s": [30.0, 30.0],
        "window_s": [30.0, 15.0], "host_cpu_busy_s": [45.0, 10.0], "host_cpu_iowait_s": [3.0, 0.0],
        "cpu_user_s": [20.0, 4.0], "cpu_sys_s": [10.0, 2.0], "proc_read_bytes": [0.0, 1e6],
        "proc_write_bytes": [0.0, 2e6], "dev_read_ios": [60_000, np.nan], "dev_write_ios": [15_000, np.nan],
        "dev_read_bytes": [60_000 * 16384.0, np.nan], "dev_write_bytes": [1.5e8, np.nan],
        "dev_io_ms": [15_000.0, np.nan], "data_physical_bytes": [2 * 4 * 1000 * SYSBENCH_ROW_BYTES, 1e6],
        "data_logical_bytes": [3 * 4 * 1000 * SYSBENCH_ROW_BYTES, 1e6],
        "workload": ["oltp_read_write", "oltp_read_only"],
    })


def test_efficiency_per_transaction() -> None:
    e = efficiency(efficiency_runs(), tables=4, table_size=1000).set_index("run_id")
    a = e.loc["a"]  # 30 000 transactions in a 30 s window
    assert a["host_cpu_us_per_txn"] == pytest.approx(45e6 / 30_000)
    assert a["mysqld_cpu_us_per_txn"] == pytest.approx(30e6 / 30_000)
    assert a["read_kb_per_txn"] == pytest.approx(60_000 * 16 / 30_000)
    assert a["read_ios_per_txn"] == pytest.approx(2.0) and a["write_ios_per_txn"] == pytest.approx(0.5)
    assert a["write_kb_per_txn"] == pytest.approx(1.5e8 / 1024 / 30_000)
    assert a["read_mb_s"] == pytest.approx(60_000 * 16384 / 1e6 / 30)
    assert a["dev_util_pct"] == pytest.approx(50.0) and a["host_iowait_cpus"] == pytest.approx(0.1)
    assert a["space_amp"] == pytest.approx(2.0) and a["apparent_space_amp"] == pytest.approx(3.0)
    assert a["write_amp"] == pytest.approx(1.5e8 / (30_000 * 4 * SYSBENCH_ROW_BYTES))
    assert a["proc_read_kb_per_txn"] == 0.0  # measured zero (tmpfs) stays zero
    b = e.loc["b"]  # 9 000 transactions over 30 s, counters over a 15 s window: 4 500 in the window
    assert b["mysqld_cpu_us_per_txn"] == pytest.approx(6e6 / 4_500)
    assert math.isnan(b["read_kb_per_txn"]) and math.isnan(b["dev_util_pct"])  # not measurable: NaN
    assert math.isnan(b["write_amp_proc"])  # read-only workload: no logical writes
    assert list(e.columns) == list(EFFICIENCY_METRICS)


def test_efficiency_of_old_runs_without_counters() -> None:
    runs = pd.DataFrame({"run_id": ["x"], "transactions": [100], "data_physical_bytes": [376_000.0]})
    e = efficiency(runs, tables=1, table_size=1000)
    assert e.loc[0, "space_amp"] == pytest.approx(2.0)
    assert e.drop(columns=["run_id", "space_amp"]).isna().all().all()


def test_efficiency_of_tpcc_has_no_write_or_space_amplification() -> None:
    runs = efficiency_runs().assign(workload="tpcc")
    out = efficiency(runs, tables=1, table_size=1)
    assert out["write_amp"].isna().all() and out["space_amp"].isna().all()
    assert out["host_cpu_us_per_txn"].notna().all()


def test_efficiency_input_errors() -> None:
    with pytest.raises(ValueError, match="unknown workload"):
        efficiency(pd.DataFrame({"run_id": ["x"], "workload": ["tpc-h"]}), tables=1, table_size=1)
    with pytest.raises(ValueError, match="tables"):
        efficiency(efficiency_runs(), tables=0, table_size=1)


# =============================================================================== histograms


def histogram_of(latencies_ms: np.ndarray) -> list[tuple[float, int]]:
    """A sysbench-style histogram: bucket values printed with %.3f, counts per bucket."""
    idx, counts = np.unique([sysbench.bucket_index(v) for v in latencies_ms], return_counts=True)
    return [(round(sysbench.bucket_value(int(i)), 3), int(c)) for i, c in zip(idx, counts)]


def test_merged_histogram_percentiles_are_exact() -> None:
    rng = np.random.default_rng(6)
    samples = {f"r{i}": rng.lognormal(mean=1.0 + 0.3 * i, sigma=0.5, size=2000 + 500 * i) for i in range(4)}
    rows = [(rid, "cell", v, c) for rid, s in samples.items() for v, c in histogram_of(s)]
    h = pd.DataFrame(rows, columns=["run_id", "cell_id", "value_ms", "count"])
    merged = merged_percentiles(h, ["cell_id"], (50, 95, 99, 99.9)).iloc[0]
    pooled = histogram_of(np.concatenate(list(samples.values())))
    # adding counts is exact: the same as the histogram of all latencies pooled
    assert sysbench.merge_histograms(*[histogram_of(s) for s in samples.values()]) == pooled
    assert merged["events"] == sum(c for _, c in pooled)
    for q in (50, 95, 99, 99.9):
        assert merged[f"p{q:g}_ms"] == sysbench.histogram_percentile(pooled, q)
    assert merged["max_bucket_ms"] == pooled[-1][0]
    per_run = merged_percentiles(h, ["run_id"]).set_index("run_id")
    for rid, s in samples.items():
        assert per_run.loc[rid, "p95_ms"] == sysbench.histogram_percentile(histogram_of(s), 95)
    # averaging the runs' percentiles is not the same thing (and not what we report)
    assert per_run["p99_ms"].mean() != merged["p99_ms"]


def test_merged_percentiles_of_the_fixture_match_sysbench() -> None:
    text = (Path(__file__).resolve().parents[1] / "fixtures" / "sysbench"
            / "run_oltp_read_write_innodb_t2_5s.stdout").read_text()
    out = sysbench.parse_output(text)
    h = pd.DataFrame([("r", v, c) for v, c in out.histogram], columns=["run_id", "value_ms", "count"])
    row = merged_percentiles(h, ["run_id"]).iloc[0]
    assert row["p95_ms"] == pytest.approx(out.summary["lat_pct_ms"], abs=0.006)  # sysbench prints %.2f
    assert row["events"] == out.summary["events"]


def test_merged_percentiles_ignores_empty_buckets_and_checks_columns() -> None:
    h = pd.DataFrame({"g": ["a", "a", "a"], "value_ms": [1.0, 2.0, 3.0], "count": [5, 0, 5]})
    row = merged_percentiles(h, ["g"], (50, 100)).iloc[0]
    assert (row["p50_ms"], row["p100_ms"], row["max_bucket_ms"], row["events"]) == (1.0, 3.0, 3.0, 10)
    with pytest.raises(ValueError, match="'count'"):
        merged_percentiles(h.drop(columns="count"), ["g"])


# =============================================================================== across runs


def test_summarise_cells_equals_cell_summary_and_drops_nans() -> None:
    df = runs_frame()
    df["cpu"] = np.where(df["repetition"] == 1, np.nan, df["tps"] / 10)
    df["never"] = np.nan
    s = summarise_cells(df, ["tps", "cpu", "never"])
    tps = s[s["metric"] == "tps"].reset_index(drop=True)
    ref = cell_summary(df, "tps")
    pd.testing.assert_frame_equal(tps, ref[tps.columns])
    cpu = s[s["metric"] == "cpu"]
    assert (cpu["n"] == 4).all() and "never" not in set(s["metric"])


def test_t_mean_ci_agrees_with_scipy_and_covers() -> None:
    x = np.array([980.0, 1010.0, 1040.0])
    lo, hi = t_mean_ci(x)
    ref = sps.t.interval(0.95, 2, loc=x.mean(), scale=sps.sem(x))
    assert (lo, hi) == pytest.approx(ref)
    assert t_halfwidth_pct(x) == pytest.approx((hi - lo) / 2 / x.mean() * 100)
    assert math.isnan(t_mean_ci([1.0])[0])
    # coverage at three repetitions, vectorised over 4 000 fixed seeds
    rng = np.random.default_rng(7)
    samples = rng.normal(100.0, 10.0, size=(4000, 3))
    half = sps.t.ppf(0.975, 2) * samples.std(axis=1, ddof=1) / math.sqrt(3)
    covered = np.abs(samples.mean(axis=1) - 100.0) <= half
    assert 0.94 <= covered.mean() <= 0.96
    i = 17
    assert t_mean_ci(samples[i]) == pytest.approx((samples[i].mean() - half[i], samples[i].mean() + half[i]))


def test_percentile_bootstrap_is_too_narrow_at_three_repetitions() -> None:
    """Pinned known limitation (why the Welch/t intervals sit beside the bootstrap ones): with n = 3 the
    percentile bootstrap cannot reach beyond the data, so it covers at most 1 - 2 / 2^3 = 75 %."""
    trials, covered = 200, 0
    for s in range(trials):
        x = np.random.default_rng(900 + s).normal(100.0, 10.0, 3)
        lo, hi = bootstrap_mean_ci(x, n_resamples=1000, seed=s)
        covered += lo <= 100.0 <= hi
    assert 0.55 <= covered / trials <= 0.80


def cell_runs(seed: int = 0) -> pd.DataFrame:
    """engine x cache x block size, 3 repetitions, with log-normal noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for engine, e in (("innodb", 1.0), ("myrocks", 0.8)):
        for cache, c in ((25, 0.4), (100, 1.0)):
            for bs, b in (("4k", 1.2), ("16k", 1.0)):
                for rep in (1, 2, 3):
                    rows.append({"cell_id": f"{engine}-c{cache}-b{bs}", "engine": engine, "cache_pct": cache,
                                 "block_size": bs, "repetition": rep,
                                 "tps": 1000 * e * c * b * math.exp(rng.normal(0, 0.03))})
    return pd.DataFrame(rows)


def test_ratios_to_baseline_cells_single_factor_matches_ratios_to_baseline() -> None:
    df = cell_runs()
    r = ratios_to_baseline_cells(df, {"cache_pct": 100}, ["engine", "cache_pct", "block_size"])
    old = ratios_to_baseline(df, "cache_pct", 100, others=("engine", "block_size"))
    assert len(r) == len(old) == 8
    merged = r.merge(old, on=["engine", "cache_pct", "block_size"], suffixes=("", "_old"))
    assert np.allclose(merged["ratio"], merged["ratio_old"])
    low = r[r["cache_pct"] == 25]
    assert low["ratio"].between(0.37, 0.43).all() and (low["ci_hi"] < 1).all()
    assert (low["welch_ci_hi"] < 1).all() and (low["welch_p"] < 0.01).all()
    assert (low["baseline_cell_id"] == low["cell_id"].str.replace("c25", "c100")).all()
    assert (r["factor"] == "cache_pct").all() and (r["baseline"] == 100).all()


def test_ratios_to_baseline_cells_with_a_two_factor_baseline() -> None:
    df = cell_runs()
    r = ratios_to_baseline_cells(df, {"cache_pct": 100, "block_size": "16k"}, ["engine", "cache_pct", "block_size"])
    assert set(r["baseline_cell_id"]) == {"innodb-c100-b16k", "myrocks-c100-b16k"}
    row = r[r["cell_id"] == "innodb-c25-b4k"].iloc[0]
    assert row["ratio"] == pytest.approx(0.48, rel=0.05)
    assert row["baseline"] == "cache_pct=100;block_size=16k"
    # no baseline cell: no row; a baseline on a column that is not a factor: an error naming it
    no_base = df[df["cell_id"] != "myrocks-c100-b16k"]
    r = ratios_to_baseline_cells(no_base, {"cache_pct": 100, "block_size": "16k"},
                                 ["engine", "cache_pct", "block_size"])
    assert set(r["engine"]) == {"innodb"}
    with pytest.raises(ValueError, match="baseline.threads"):
        ratios_to_baseline_cells(df, {"threads": 4}, ["engine", "cache_pct"])


def test_ratio_seeds_follow_the_pair_of_cells() -> None:
    df = cell_runs()
    a = ratios_to_baseline_cells(df, {"cache_pct": 100}, ["engine", "cache_pct", "block_size"])
    b = ratios_to_baseline_cells(df.sample(frac=1, random_state=1), {"cache_pct": 100},
                                 ["engine", "cache_pct", "block_size"])
    pd.testing.assert_frame_equal(a, b)
    lo = df[df["cell_id"] == "innodb-c25-b4k"]["tps"]
    hi = df[df["cell_id"] == "innodb-c100-b4k"]["tps"]
    want = bootstrap_ratio_ci(lo, hi, seed=stable_seed(DEFAULT_SEED, "innodb-c25-b4k|innodb-c100-b4k|tps"))
    got = a.set_index("cell_id").loc["innodb-c25-b4k", ["ratio", "ci_lo", "ci_hi"]]
    assert tuple(got) == pytest.approx(want)


# =============================================================================== noise and adaptive


def test_noise_report_flags() -> None:
    df = cell_runs()
    df.loc[df["cell_id"] == "myrocks-c25-b16k", "tps"] *= [0.6, 1.0, 1.4]  # very noisy
    cells = cell_summary(df, "tps")
    cells["n_not_steady"] = np.where(cells["cell_id"] == "innodb-c100-b4k", 1, 0)
    cells["n_untested"] = np.where(cells["cell_id"] == "innodb-c25-b16k", 3, 0)
    ratios = ratios_to_baseline_cells(df, {"cache_pct": 100}, ["engine", "cache_pct", "block_size"])
    n = noise_report(cells, ratios, df, max_cv_pct=10.0, target_halfwidth_pct=5.0).set_index("cell_id")
    noisy = n.loc["myrocks-c25-b16k"]
    assert "cv_above_max" in noisy["flags"] and "ratio_ci_includes_1" in noisy["flags"] and noisy["noisy"]
    assert noisy["ratio_ci_lo"] == ratios.set_index("cell_id").loc["myrocks-c25-b16k", "welch_ci_lo"]
    calm = n.loc["innodb-c25-b4k"]
    assert calm["cv_pct"] < 10 and "cv_above_max" not in calm["flags"] and "ratio_ci_includes_1" not in calm["flags"]
    assert n.loc["innodb-c100-b4k", "flags"].endswith("not_steady_runs")
    assert n.loc["innodb-c25-b16k", "flags"] == "steady_state_untested"  # untested is not noisy
    assert not n.loc["innodb-c25-b16k", "noisy"]
    assert "ratio_ci_includes_1" not in n.loc["innodb-c100-b4k", "flags"]  # its own baseline
    assert (n["t_halfwidth_pct"] > n["ci_halfwidth_pct"]).all()  # t is wider than the bootstrap at n = 3
    one = noise_report(cell_summary(df[df["repetition"] == 1]), None, df[df["repetition"] == 1])
    assert one["flags"].str.contains("single_repetition").all()
    with pytest.raises(ValueError, match="max_cv_pct"):
        noise_report(cells, ratios, df, max_cv_pct=0)


def test_adaptive_additions() -> None:
    rng = np.random.default_rng(8)
    rows = [{"cell_id": "calm", "tps": 1000 + rng.normal(0, 5)} for _ in range(3)]
    rows += [{"cell_id": "noisy", "tps": 1000 + rng.normal(0, 150)} for _ in range(3)]
    rows += [{"cell_id": "single", "tps": 900.0}]
    rows += [{"cell_id": "capped", "tps": v} for v in (500, 1500, 800, 1200, 1000, 600)]
    rows += [{"cell_id": "calm", "tps": 1.0, "status": "failed"}]
    runs = pd.DataFrame(rows).fillna({"status": "ok"})
    more = adaptive_additions(runs, target_halfwidth_pct=5.0, max_repetitions=6)
    assert list(more) == ["calm", "capped", "noisy", "single"]
    assert more["calm"] == 0 and more["capped"] == 0 and more["single"] == 1
    assert 1 <= more["noisy"] <= 3
    # the count is the smallest N that meets the target at the current CV (capped)
    x = runs[(runs["cell_id"] == "noisy") & (runs["status"] == "ok")]["tps"].to_numpy()
    cv = x.std(ddof=1) / x.mean()
    n_needed = next(N for N in range(4, 1000) if sps.t.ppf(0.975, N - 1) * cv / math.sqrt(N) * 100 <= 5.0)
    assert more["noisy"] == min(n_needed, 6) - 3
    for bad, field in ((dict(target_halfwidth_pct=0, max_repetitions=5), "target_halfwidth_pct"),
                       (dict(target_halfwidth_pct=5, max_repetitions=0), "max_repetitions")):
        with pytest.raises(ValueError, match=field):
            adaptive_additions(runs, **bad)
    with pytest.raises(ValueError, match="'qps'"):
        adaptive_additions(runs, 5.0, 6, metric="qps")


def test_adaptive_loop_stops_at_the_target_or_the_cap() -> None:
    """Simulate the runner: one more repetition per round for cells that need some."""
    rng = np.random.default_rng(9)
    sd = {"a": 10.0, "b": 60.0, "c": 400.0}
    runs = pd.DataFrame([{"cell_id": c, "tps": 1000 + rng.normal(0, sd[c])} for c in sd for _ in range(3)])
    for _ in range(50):
        more = adaptive_additions(runs, 3.0, 12)
        if not any(more.values()):
            break
        runs = pd.concat([runs, pd.DataFrame([{"cell_id": c, "tps": 1000 + rng.normal(0, sd[c])}
                                              for c, k in more.items() if k > 0])], ignore_index=True)
    else:
        pytest.fail("the adaptive loop did not stop")
    for c, g in runs.groupby("cell_id"):
        assert len(g) <= 12
        assert len(g) == 12 or t_halfwidth_pct(g["tps"]) <= 3.0
    assert len(runs[runs["cell_id"] == "a"]) == 3 and len(runs[runs["cell_id"] == "c"]) == 12


def test_baseline_cell_against_itself_has_ratio_one_and_no_interval() -> None:
    df = cell_runs()
    r = ratios_to_baseline_cells(df, {"cache_pct": 100}, ["engine", "cache_pct", "block_size"])
    own = r[r["cell_id"] == r["baseline_cell_id"]]
    assert len(own) == 4
    assert (own["ratio"] == 1.0).all() and (own["ratio_gm"] == 1.0).all()
    for c in ("ci_lo", "ci_hi", "welch_ci_lo", "welch_ci_hi", "welch_p"):
        assert own[c].isna().all(), c
    other = r[r["cell_id"] != r["baseline_cell_id"]]
    assert other[["ci_lo", "ci_hi", "welch_ci_lo", "welch_ci_hi", "welch_p"]].notna().all().all()
    # several metrics at once: the same rule for each
    df2 = df.assign(lat=df["tps"] / 100)
    r2 = ratios_to_baseline_cells(df2, {"cache_pct": 100}, ["engine", "cache_pct", "block_size"], ["tps", "lat"])
    own2 = r2[r2["cell_id"] == r2["baseline_cell_id"]]
    assert len(own2) == 8 and (own2["ratio"] == 1.0).all() and own2["welch_ci_lo"].isna().all()
