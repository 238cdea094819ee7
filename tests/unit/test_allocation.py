"""Kalibera-Jones allocation (issue 39): the formula, its edges, and the paper reference's TPC-C figures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.allocation import MAX_RUNS_PER_CELL, allocate, kalibera_jones
from dbmatrix.analyse.cell_model import study_components


def test_the_formula() -> None:
    # costs equal, runs 4x as variable as campaigns: r = ceil(sqrt(1 * 4)) = 2
    assert kalibera_jones(4.0, 1.0, 10.0, 10.0) == (2, 2.0)
    # a campaign nearly free beside a run, variances alike: one run per campaign
    r, raw = kalibera_jones(0.0040, 0.0031, 50.0, 2.7)
    assert r == 1 and raw == pytest.approx(math.sqrt(2.7 / 50 * 0.0040 / 0.0031))
    # an expensive campaign (a reboot of 10 min) and a quiet campaign level: many runs per campaign
    r, raw = kalibera_jones(0.0040, 0.0004, 50.0, 600.0)
    assert raw == pytest.approx(math.sqrt(120)) and r == MAX_RUNS_PER_CELL == 10  # 11, capped
    assert kalibera_jones(0.004, 0.0, 50.0, 2.7) == (MAX_RUNS_PER_CELL, math.inf)
    with pytest.raises(ValueError, match="costs > 0"):
        kalibera_jones(0.004, 0.003, 0.0, 1.0)


def test_components_of_a_simulated_study_give_its_allocation() -> None:
    """A TPC-C-shaped study (4 loads x 6 cells, 4 campaigns, 3 runs) with run SD 6 % and load and campaign x
    cell SD 4 % each: the components come back near the truth and the allocation is one run per cell."""
    rng = np.random.default_rng(7)
    rows = []
    for k in range(1, 5):
        loads = {(b, c): rng.normal(0, 0.04) for b in ("4k", "16k") for c in ("none", "lz4")}
        for (b, c), shift in loads.items():
            for cache in (0, 8.5):
                for medium in ("disk", "ramblock", "tmpfs"):
                    u = rng.normal(0, 0.04)
                    for r in range(3):
                        rows.append({"campaign": k, "block_size": b, "compression": c, "cache_pct": cache,
                                     "medium": medium, "run_id": f"{k}-{b}-{c}-{cache}-{medium}-{r}",
                                     "tps": math.exp(6 + shift + u + rng.normal(0, 0.06))})
    runs = pd.DataFrame(rows)
    comp = study_components(runs, "tps", ["block_size", "compression", "cache_pct", "medium"],
                            ["block_size", "compression"])
    assert comp.campaigns == 4 and comp.runs_per_cell == 3
    assert math.sqrt(comp.run) == pytest.approx(0.06, rel=0.15)
    assert math.sqrt(comp.cell) == pytest.approx(0.04, rel=0.35)
    assert comp.load_df == 9 and comp.cell_df == 60
    a = allocate("tpcc", "tps", comp, run_cost_s=50.0, campaign_cost_s=2.7, cells=24)
    assert a.runs_per_cell == 1 and a.campaign_s() == pytest.approx(24 * 52.7)
    assert any("Kalibera-Jones" in line and "= 1 run(s) per cell per campaign" in line for line in a.lines())


def test_pilot_costs_from_campaign_records() -> None:
    from dbmatrix.allocation_plan import pilot_costs

    rec = {"ok": 10, "sessions": [{"started_utc": "2026-11-27T10:00:00+00:00", "ended_utc": "2026-11-27T10:10:00+00:00"}],
           "datasets": [{"prepare_s": 40.0}, {"prepare_s": 60.0, "reused": True}]}
    run_s, camp_s = pilot_costs([rec, rec], cells=5)
    assert run_s == pytest.approx((1200 - 80) / 20) and camp_s == pytest.approx(40 / 5)
    assert all(math.isnan(x) for x in pilot_costs([], 5))


def test_the_paper_plan_prints_the_allocation_from_the_committed_reference() -> None:
    """dbmatrix plan --profile paper: the TPC-C study's pilot (the committed reference, six campaigns on three
    boots, the third and fourth on a slower VM) gives one run per cell per campaign, and so does scale-out's now that its campaign
    level shows (two campaigns of one boot estimated it at zero, which the formula cannot use)."""
    from dbmatrix.allocation_plan import allocation_lines
    from dbmatrix.study import load_studies

    lines = {s.experiment.name: allocation_lines(s) for s in load_studies("paper", for_run=True)}
    tpcc = "\n".join(lines["tpcc-paper"])
    assert "pilot of 6 campaign(s)" in tpcc and "runs 6.33 %" in tpcc and "dataset load x campaign 1.75 %" in tpcc
    assert "= 1 run(s) per cell per campaign; 24 cells" in tpcc
    assert "the spec's later campaigns run it (campaigns.repetitions: 1); the first, the pilot, ran 3" in tpcc
    assert "= 1 run(s) per cell per campaign; 8 cells" in "\n".join(lines["scaleout-paper"])
