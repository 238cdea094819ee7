"""Caption text the figures' data decides: what a figure's marks mean (t intervals, or the runs themselves
when a point rests on fewer than :data:`~dbmatrix.publish.figures.MIN_RUNS_FOR_INTERVAL` runs) and whether
it draws the marks a caption would promise (the timeline's crosses). Returned as macros (letters only)
for paper/fig-*.tex; pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from dbmatrix.analyse.figure_data import StudyTables, efficiency_figure_table, timeline_cells
from dbmatrix.analyse.judgement import Judgement
from dbmatrix.analyse.stats import level_key
from dbmatrix.publish.figures import MIN_RUNS_FOR_INTERVAL, shows_runs
from dbmatrix.publish.paper import and_list
from dbmatrix.publish.registry import shown_factors
from dbmatrix.spec.experiment import FACTORS
from dbmatrix.spec.factors import factor_title


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


# The model figures' tables and what each holds beyond its fixed columns (the factors split by the interaction
# rule, :func:`dbmatrix.analyse.interactions.split_factors`): (stem, table, contrast, fixed columns).
_DESIGN_FIGURES = (("block-size", "ratios", ("block_size",), ("engine", "compression", "cache_pct")),
                   ("compression", "tps", ("compression",), ("engine", "block_size", "cache_pct")),
                   ("medium-cache", "tps", ("medium", "cache_pct"), ("engine",)))


def _words(factors: list[str]) -> str:
    names = [factor_title(f).split(" (")[0].lower() for f in factors]
    return and_list(names)


def design_macros(drawn: Mapping[str, StudyTables], judgement: Judgement) -> dict[str, str]:
    """What the model figures hold and average over, as caption phrases from their judged tables:
    ``blockFigDesign``, ``compFigDesign``, ``mediumFigDesign`` name the factors the interaction rule made
    them draw and how their points are estimated (a cell's own runs once nothing is averaged over, else the
    factorial model over the factors named)."""
    m: dict[str, str] = {}
    for stem, name, contrast, fixed in _DESIGN_FIGURES:
        ft = judgement.figures.get(stem)
        if stem not in drawn or ft is None or name not in ft.tables:
            continue
        table, st = ft.tables[name], drawn[stem]
        shown = shown_factors(table)
        split = [f for f in shown if f not in fixed and f not in contrast]
        over = [f for f in FACTORS if f in st.runs and st.runs[f].map(level_key).nunique() > 1
                and f not in shown and f not in contrast]
        means = (f"geometric means adjusted by the factorial model for the {_words(over)}" if over else
                 "geometric means of each cell's own runs (no factor averaged over)")
        if stem == "block-size":
            m["blockFigDesign"] = (
                (f"one panel per compression and one series per {_words(split)} (which interacts with the block "
                 "size too)" if split else "one series per compression") + ", at each cache level; "
                + (f"averaged over the {_words(over)}" if over else "no factor averaged over"))
        elif stem == "compression":
            m["compFigDesign"] = ((f"and per {_words(split)} (which interacts with compression too: colour and "
                                   "marker, with compression as the fill)" if split else "") + f"; (a) and (c) "
                                  f"are {means}")
        else:
            m["mediumFigDesign"] = ((f"one column of panels per {_words(split)} (which interact with the "
                                     "medium and the cache); " if split else "") + means)
    return m
