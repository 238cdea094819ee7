"""Tests of dbmatrix.stats: bootstrap CIs against scipy, their coverage, and order invariance."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from dbmatrix.stats import (
    bootstrap_mean_ci,
    bootstrap_ratio_ci,
    cell_summary,
    ratios_to_baseline,
    stable_seed,
)


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
        assert row["ci_lo"] <= row["ratio"] <= row["ci_hi"]
    base_rows = r[r["cache_pct"] == 100]
    assert (base_rows["ratio"] == 1.0).all()
    assert (base_rows["ci_lo"] < 1.0).all() and (base_rows["ci_hi"] > 1.0).all()
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
