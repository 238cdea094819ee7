"""What `dbmatrix plan` says about where a study's repetitions should go (issue 39): the Kalibera-Jones
allocation (:mod:`dbmatrix.analyse.allocation`) from the study's pilot, the committed reference of its
experiment: its variance components (:func:`dbmatrix.analyse.cell_model.study_components`) and the costs its
campaign records measured (a run: the sessions' wall time less the dataset loads, per run; a campaign per
cell: its dataset loads over the cells). A top-level module: it joins the study (files) and the analysis."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import pandas as pd

from dbmatrix.analyse.allocation import Allocation, allocate
from dbmatrix.analyse.cell_model import study_components
from dbmatrix.analyse.tables import read_csv
from dbmatrix.spec.errors import SpecError
from dbmatrix.spec.factors import DATASET_FACTORS
from dbmatrix.study import Study, load_study

METRIC = {"scaleout": "qps"}  # the metric a study kind's claims mostly judge; tps otherwise


def _seconds(a: str, b: str) -> float:
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def pilot_costs(records: list[dict[str, Any]], cells: int) -> tuple[float, float]:
    """(seconds per run, seconds a campaign adds per cell) from campaign records: sessions' wall time less
    the dataset loads over the runs that completed; the loads (``prepare_s``) over the cells."""
    wall = loads = 0.0
    runs = 0
    for r in records:
        wall += sum(_seconds(s["started_utc"], s["ended_utc"]) for s in r.get("sessions", [])
                    if s.get("started_utc") and s.get("ended_utc"))
        loads += sum(float(d.get("prepare_s") or 0.0) for d in r.get("datasets", []) if not d.get("reused"))
        runs += int(r.get("ok") or 0)
    if runs == 0 or not records:
        return math.nan, math.nan
    return (wall - loads) / runs, loads / len(records) / max(cells, 1)


def study_allocation(study: Study) -> Allocation | str:
    """The allocation of one study from its pilot, or why there is none (words)."""
    try:
        pilot = load_study(study.profile, study.spec_path, data="reference", for_run=False)
    except SpecError as exc:
        return f"no pilot: {exc}"
    runs_file = pilot.store.processed / "runs.csv"
    if not runs_file.is_file():
        return "no pilot: the committed reference of this experiment has no processed runs"
    runs = read_csv(runs_file)
    metric = METRIC.get(study.kind, "tps")
    cols = [f for f in study.experiment.varied_factors() if f in runs.columns and runs[f].nunique() > 1]
    if metric not in runs.columns or not cols:
        return f"no pilot: the reference has no {metric} or no varied factor"
    records = [r for k in sorted(pd.to_numeric(runs.get("campaign", pd.Series([1])), errors="coerce")
                                 .dropna().astype(int).unique())
               if (r := pilot.store.campaign_record(int(k))) is not None]
    comp = study_components(runs, metric, cols, [f for f in cols if f in DATASET_FACTORS])
    cells = int(runs.groupby(cols).ngroups)
    run_s, camp_s = pilot_costs(records, cells)
    if not (math.isfinite(run_s) and run_s > 0):
        return "no pilot costs: the reference's campaign records have no sessions"
    return allocate(study.experiment.name, metric, comp, run_s, camp_s, cells)


def looks_line(study: Study) -> list[str]:
    """The campaign looks of a study with a campaign allocation: each look's level (the registered rule)."""
    from dbmatrix.analyse.claims.verdicts import CONFIDENCE, MAX_CAMPAIGNS
    from dbmatrix.analyse.stats.group_sequential import CampaignLooks
    from dbmatrix.analyse.stats.sequential import level_text
    from dbmatrix.run.matrix import next_campaign

    if study.experiment.campaign_repetitions is None:
        return []
    looks = CampaignLooks(MAX_CAMPAIGNS, 1 - CONFIDENCE)
    n = next_campaign(study)[0]
    levels = ", ".join(f"{k}: {level_text(looks.confidence(k))}" for k in range(1, MAX_CAMPAIGNS + 1))
    return [f"  looks: judged after every campaign, at most {MAX_CAMPAIGNS} (exact O'Brien-Fleming-type "
            f"boundaries): {levels}; the next campaign ({n}) is look {min(n, MAX_CAMPAIGNS)}"]


def allocation_lines(study: Study) -> list[str]:
    """The plan's lines: the allocation with its inputs, against the spec's repetitions, and the looks."""
    a = study_allocation(study)
    if isinstance(a, str):
        return [f"repetitions (Kalibera-Jones): {a}", *looks_line(study)]
    lines = a.lines()
    exp = study.experiment
    later = exp.repetitions_in(2)
    where = ("campaigns.repetitions" if exp.campaign_repetitions is not None else
             "repetitions (no campaigns.repetitions: every campaign runs the pilot's)")
    if not math.isfinite(a.raw):
        lines.append(f"  the campaign level is not distinguishable from 0 in the pilot ({a.components.cell_df:g} df): "
                     f"the formula is unbounded; the spec's later campaigns run {later} per cell ({where})")
    elif a.runs_per_cell != later:
        lines.append(f"  the spec's later campaigns run {later} per cell per campaign ({where}), not the allocation's "
                     f"{a.runs_per_cell}: set campaigns.repetitions: {a.runs_per_cell}")
    else:
        lines.append(f"  the spec's later campaigns run it ({where}: {later}); the first, the pilot, ran "
                     f"{exp.repetitions}")
    return [*lines, *looks_line(study)]
