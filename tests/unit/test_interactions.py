"""Figures drawn along the interactions (issue 41): the interaction test a figure's table splits by and the
figure check's "averages-interaction" rule, on synthetic runs with a known answer (and the test's size and
power over many seeds)."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.contrasts import fit_log_model
from dbmatrix.analyse.interactions import averaged_in_table, averaged_interactions, interaction_table, split_factors
from dbmatrix.publish.registry import FigureDef, design_findings, shown_factors

DESIGN = ["cache_pct", "block_size", "medium"]


def runs_with(interaction: float, seed: int, sd: float = 0.05, campaigns: int = 3) -> pd.DataFrame:
    """A 2 x 2 x 2 full factorial over `campaigns` (each shifting every cell together), 2 runs per cell per
    campaign: 16k blocks 1.3x faster, except on tmpfs where the ratio is multiplied by exp(`interaction`)."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(1, campaigns + 1):
        shift = rng.normal(0, sd)
        for cache, blk, med in itertools.product([0.0, 8.5], ["4k", "16k"], ["disk", "tmpfs"]):
            log = np.log(100) + 0.5 * (cache > 0) + np.log(1.3) * (blk == "16k") + 0.4 * (med == "tmpfs")
            log += interaction * (blk == "16k") * (med == "tmpfs")
            for r in range(2):
                rows.append({"cell_id": f"c{cache}-{blk}-{med}", "campaign": k, "cache_pct": cache,
                             "block_size": blk, "medium": med, "tps": float(np.exp(log + shift + rng.normal(0, sd)))})
    return pd.DataFrame(rows)


def test_a_factor_that_interacts_with_the_contrast_is_split_not_averaged() -> None:
    runs = runs_with(interaction=0.5, seed=1)
    found = averaged_interactions(runs, DESIGN, ["block_size"], ["cache_pct"], ["tps"])
    assert [(i.factor, i.contrast, i.metric) for i in found] == [("medium", "block_size", "tps")]
    assert found[0].p < 1e-6 and "medium x block_size on tps" in str(found[0])
    assert split_factors(runs, DESIGN, ["block_size"], ["cache_pct"], ["tps"]) == ["medium"]
    # shown (a panel or series per medium): nothing averaged, nothing to find
    assert averaged_interactions(runs, DESIGN, ["block_size"], ["cache_pct", "medium"], ["tps"]) == []
    # a metric the runs lack, a contrast the runs do not vary: nothing testable, nothing found
    assert averaged_interactions(runs, DESIGN, ["block_size"], ["cache_pct"], ["p95_ms"]) == []
    assert averaged_interactions(runs.assign(block_size="4k"), DESIGN, ["block_size"], [], ["tps"]) == []


def test_the_interaction_test_keeps_its_size_and_has_power() -> None:
    """Over 200 seeds: without an interaction the rule splits about 5 % of the time (its alpha); with a 15 %
    change of the block-size ratio on one medium (3 campaigns, 5 % run noise) it nearly always does."""
    def rate(interaction: float) -> float:
        return float(np.mean([bool(split_factors(runs_with(interaction, seed), DESIGN, ["block_size"],
                                                 ["cache_pct"], ["tps"])) for seed in range(200)]))

    null, alt = rate(0.0), rate(np.log(1.15))
    assert 0.01 <= null <= 0.10, null
    assert alt >= 0.95, alt


def test_the_figure_check_fails_a_figure_that_averages_over_a_significant_interaction() -> None:
    """The fixture: a block-size ratio table per cache level alone (averaged over the medium, which changes
    the ratio) is a finding; the same figure with a column per medium, or on runs without the interaction,
    is not. The check reads the judge step's interaction table (publishing fits no model)."""
    def table(interaction: float, seed: int) -> pd.DataFrame:
        return interaction_table("s", runs_with(interaction, seed), DESIGN)

    fd = FigureDef("block-size", "Block size", draw=None, model=True, contrast=("block_size",))
    averaged = pd.DataFrame({"cache_pct": [0.0, 8.5], "estimate": [1.5, 1.5], "ci_lo": [1.4, 1.4],
                             "ci_hi": [1.6, 1.6]})
    t = table(0.5, seed=2)
    assert set(zip(t["factor_a"], t["factor_b"])) == {("cache_pct", "block_size"), ("cache_pct", "medium"),
                                                      ("block_size", "medium")} and set(t["metric"]) == {"tps"}
    findings = design_findings(fd, "s", [averaged], t)
    assert [(f.figure, f.kind, f.artists) for f in findings] == [("block-size", "averages-interaction",
                                                                  ("averaged over medium",))]
    assert "draw medium as panels or series" in str(findings[0])
    # the table holds the model's own partial F test of the term (campaign as a block)
    model = fit_log_model(runs_with(0.5, seed=2), DESIGN, "tps", interactions=True, block="campaign")
    row = t[(t["factor_a"] == "block_size") & (t["factor_b"] == "medium")].iloc[0]
    assert (row["f"], row["p"]) == pytest.approx(model.term_test(("block_size", "medium")))
    assert averaged_in_table(t, "s", ["block_size"], ["cache_pct"], ["tps"])[0].p == pytest.approx(row["p"])
    split = pd.concat([averaged.assign(medium="disk"), averaged.assign(medium="tmpfs")])
    assert design_findings(fd, "s", [split], t) == []
    assert design_findings(fd, "s", [averaged], table(0.0, seed=3)) == []
    assert design_findings(fd, "another study", [averaged], t) == []
    # a table with a row per cell shows every factor; a figure with no contrast is not checked
    assert shown_factors(pd.DataFrame({"cell_id": ["a"]}))[:2] and \
        design_findings(fd, "s", [pd.DataFrame({"cell_id": ["a"], "mean": [1.0]})], t) == []
    assert design_findings(FigureDef("x", "x", draw=None), "s", [averaged], t) == []
    plt.close("all")
