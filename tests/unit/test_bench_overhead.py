"""benchmarks/bench_overhead.py's per-campaign measured fraction, on a committed study whose campaigns are
known: threads-paper has 6 campaigns, a pilot of 18 runs in each of the first two, 6 runs from the third on
and the A/A sentinel's two runs beside them from the fifth."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests import benchmark_scripts

ROOT = Path(__file__).resolve().parents[2]


BENCH = benchmark_scripts.load("bench_overhead")


def test_each_campaign_counts_its_sittings_and_every_run_it_measured(capsys: pytest.CaptureFixture[str]) -> None:
    rows = BENCH.campaign_fractions(ROOT / "data" / "reference" / "threads-paper")
    assert [r["campaign"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["runs"] for r in rows] == [18, 18, 6, 6, 8, 8]  # the sentinel's runs are in campaigns 5 and 6
    for r in rows:
        assert r["sittings"] >= 1 and r["wall_s"] > r["window_s"] + r["warmup_s"] > 0
        assert r["measured"] + r["warmup"] + r["rest"] == pytest.approx(1, abs=1e-3)
        assert 45 * r["runs"] * 0.98 < r["window_s"] < 45 * r["runs"] * 1.02  # the spec's 45 s windows
    p = BENCH.pooled(rows[2:])
    assert p["campaigns"] == 4 and p["measured"] < p["ceiling"] < 1
    BENCH.print_campaigns(rows, 3)
    out = capsys.readouterr().out
    assert "threads-paper" in out and "3: " in out and "1: " not in out.split("threads-paper")[1]
