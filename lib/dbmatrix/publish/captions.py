"""Caption text the figures' data decides: what a figure's marks mean (t intervals, or the runs themselves
when a point rests on fewer than :data:`~dbmatrix.publish.figures.MIN_RUNS_FOR_INTERVAL` runs) and whether
it draws the marks a caption would promise (the timeline's crosses). Returned as macros (letters only)
for paper/fig-*.tex; pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from dbmatrix.analyse.figure_data import StudyTables, efficiency_figure_table, timeline_cells
from dbmatrix.publish.figures import MIN_RUNS_FOR_INTERVAL, shows_runs


def _n_text(n: Any) -> str:
    values = sorted({int(v) for v in pd.to_numeric(pd.Series(n), errors="coerce").dropna()})
    if not values:
        return "n unknown"
    return f"$n = {values[0]}$" if len(values) == 1 else f"$n = {values[0]}$--${values[-1]}$"


def interval_text(n: Any, *, per: str = "cell", interval: str = "Student-$t$ \\ciPct\\,\\% CIs") -> str:
    """What the figure's marks around a point are, from the runs per point `n` (a number or a column):
    the runs themselves below :data:`MIN_RUNS_FOR_INTERVAL`, else the interval named."""
    if shows_runs(n):
        return (f"points are the individual runs, {_n_text(n)} per {per} (with fewer than "
                f"{MIN_RUNS_FOR_INTERVAL} runs no interval is drawn)")
    return f"error bars: {interval} over the runs, {_n_text(n)} per {per}"


def caption_macros(drawn: Mapping[str, StudyTables], opts: Mapping[str, Any]) -> dict[str, str]:
    """The figure captions' data-decided phrases, for the figures drawn (stem -> the study drawn from)."""
    m: dict[str, str] = {}
    if "throughput-vs-cache" in drawn:
        m["cacheIntervalText"] = interval_text(drawn["throughput-vs-cache"].cells["n"])
    if "throughput-vs-threads" in drawn:
        m["threadsIntervalText"] = interval_text(drawn["throughput-vs-threads"].cells["n"])
    if "scaleout-qps" in drawn:
        cells = drawn["scaleout-qps"].extra.get("scaleout-cells", pd.DataFrame())
        if "n" in cells:
            m["scaleoutIntervalText"] = interval_text(cells["n"])
    if "efficiency" in drawn:
        table, _ = efficiency_figure_table(drawn["efficiency"])
        m["effIntervalText"] = interval_text(table["n"], interval="Welch \\ciPct\\,\\% CIs of the ratio")
    if "throughput-over-time" in drawn:
        st = drawn["throughput-over-time"]
        ids, _ = timeline_cells(st, opts.get("timeline_cells"))
        steady = st.analysis.steady
        trims = steady.loc[steady["cell_id"].isin(ids), "trim_s"] if "trim_s" in steady else pd.Series([], dtype=float)
        m["timelineMarksText"] = (
            "Crosses: where the warm-up truncation (\\steadyTrimMethod) starts a run's steady window."
            if (pd.to_numeric(trims, errors="coerce") > 0).any() else
            "The steady-state test trimmed no warm-up from these runs: every steady window starts with the "
            "measured window, so no run is marked.")
    return m
