"""Repetitions where the variance is (Kalibera and Jones, "Rigorous benchmarking in reasonable time", ISMM 2013).

With a study's variance components from a pilot (:func:`dbmatrix.analyse.cell_model.study_components`: runs
within a campaign x cell, and the campaign level, campaign x cell plus dataset load x campaign) and the cost
of one repetition at each level, the optimal number of repetitions at the lower level per repetition of the
upper one is::

    r_i = ceil(sqrt((c_{i+1} / c_i) * (T_i^2 / T_{i+1}^2)))

with T_i^2 the variance component of level i and c_i the cost of one repetition at level i beyond the
repetitions below it: here c_run, one run of a cell (restore, start, warm-up, window, stop), and c_campaign,
what a campaign adds per cell (its share of the dataset loads, a new boot and set-up). When a campaign costs
little beside its runs and campaigns vary about as much as runs, the answer is one run per cell per campaign
and more campaigns.

Pure: the costs and components are inputs (the plan reads them from the pilot's records).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dbmatrix.analyse.cell_model import Components

MAX_RUNS_PER_CELL = 10  # when the campaign level shows no variance at all, the formula has no bound


def kalibera_jones(t2_lower: float, t2_upper: float, cost_lower: float, cost_upper: float,
                   cap: int = MAX_RUNS_PER_CELL) -> tuple[int, float]:
    """(repetitions at the lower level per upper-level repetition, the formula's value before rounding up).
    A zero upper component gives the cap (the formula's value infinite)."""
    if not (t2_lower >= 0 and cost_lower > 0 and cost_upper >= 0):
        raise ValueError(f"kalibera_jones: variances >= 0 and costs > 0 needed (T^2 {t2_lower}, {t2_upper}; "
                         f"c {cost_lower}, {cost_upper})")
    if t2_upper <= 0 or not math.isfinite(t2_upper):
        return cap, math.inf
    raw = math.sqrt((cost_upper / cost_lower) * (t2_lower / t2_upper))
    return max(1, min(cap, math.ceil(raw))), raw


@dataclass(frozen=True)
class Allocation:
    """A study's allocation: its components, the costs, runs per cell per campaign and the campaign's time."""

    study: str
    metric: str
    components: Components
    run_cost_s: float
    campaign_cost_s: float  # per cell
    cells: int
    runs_per_cell: int
    raw: float

    def campaign_s(self) -> float:
        """Estimated wall time of one campaign at this allocation (runs plus the campaign's own costs)."""
        return self.cells * (self.runs_per_cell * self.run_cost_s + self.campaign_cost_s)

    def lines(self) -> list[str]:
        c = self.components

        def sd(v: float) -> str:
            return "--" if not math.isfinite(v) else f"{100 * math.sqrt(max(v, 0.0)):.2f} %"

        formula = (f"  Kalibera-Jones: r = ceil(sqrt(({self.campaign_cost_s:.1f} / {self.run_cost_s:.0f}) x "
                   f"({sd(c.run)}^2 / {sd(c.campaign_level())}^2)))")
        if not math.isfinite(self.raw):
            result = f"{formula}: unbounded (the campaign level estimates at 0)"
        else:
            result = (f"{formula} = ceil({self.raw:.2f}) = {self.runs_per_cell} run(s) per cell per campaign; "
                      f"{self.cells} cells: about {self.campaign_s() / 60:.0f} min per campaign")
        return [
            f"{self.study} ({self.metric}, log scale; pilot of {c.campaigns} campaign(s), "
            f"{c.runs_per_cell:.3g} runs per cell per campaign):",
            f"  components (SD): runs {sd(c.run)} ({c.run_df:g} df), campaign x cell {sd(c.cell)} "
            f"({c.cell_df:g} df), dataset load x campaign {sd(c.load)} ({c.load_df:g} df); campaign level "
            f"T2^2 = {sd(c.campaign_level())}^2",
            f"  costs: a run {self.run_cost_s:.0f} s, a campaign per cell {self.campaign_cost_s:.1f} s (its share "
            "of the dataset loads and set-up)",
            result,
        ]


def allocate(study: str, metric: str, components: Components, run_cost_s: float, campaign_cost_s: float,
             cells: int) -> Allocation:
    """The Kalibera-Jones allocation of one study from its pilot (see the module doc)."""
    t2_run = components.run if math.isfinite(components.run) else 0.0
    r, raw = kalibera_jones(t2_run, components.campaign_level(), run_cost_s, campaign_cost_s)
    return Allocation(study, metric, components, run_cost_s, campaign_cost_s, cells, r, raw)
