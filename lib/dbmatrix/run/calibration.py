"""Calibrating a Galera study's throttled follower medium (or its followers' CPU limit, ``limit: cpu_max``:
:mod:`dbmatrix.hosts.cpulimit`), as a measured and recorded step of the study.

Seed 002's result rests on the appliers being the bottleneck: flow control paused its nodes 64 % of the
time with one applier. On one small machine the followers keep up (0.36 % paused), so a study that wants
the seed's premise puts the followers' datadirs on a throttled medium (``factors.follower_medium``) and
lets the calibration choose its limit: before a campaign's runs, one short run per candidate limit,
mildest first, with one applier and the followers on that medium; the first limit under which flow
control pauses the cluster at least ``target_fc_paused_pct`` % of the window holds for the campaign (no
candidate reaching it: the strictest holds, and the record says the target was missed, so the claims'
premise check shows it). Every calibration run is a full run with its logs and manifest, kept in
``<results>/calibration/campaign-<k>/``; the choice is ``<results>/calibration/campaign-<k>.json``. A
resumed campaign reuses its record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dbmatrix.analyse.replication import CALIBRATION_DIR, run_row
from dbmatrix.hosts import media
from dbmatrix.record import RunRecord
from dbmatrix.spec.experiment import Calibration, Cell, Experiment, PlannedRun
from dbmatrix.store import ResultStore, utc_now, write_json_atomic


def calibration_cell(exp: Experiment) -> Cell:
    """The cell the calibration runs: every factor at its first level, one applier (the fewest the spec
    lists), the followers on the calibrated medium."""
    cal = _cal(exp)
    first = {f: levels[0] for f, levels in exp.factors.items()}
    medium = first["follower_medium"] if cal.cpu else cal.medium  # a CPU limit applies on any medium
    return Cell(**{**first, "slave_threads": min(exp.factors["slave_threads"]), "follower_medium": medium})


def calibration_experiment(exp: Experiment) -> Experiment:
    """The study's experiment with the calibration's window (its runs are short)."""
    cal = _cal(exp)
    return replace(exp, warmup_s=cal.warmup_s, measure_s=cal.measure_s, repetitions=len(cal.candidates))


def calibration_runs(exp: Experiment, campaign: int) -> list[tuple[int, PlannedRun]]:
    """(limit, run) per candidate, mildest first: repetition i is the i-th candidate."""
    cell = calibration_cell(exp)
    return [(limit, PlannedRun(cell, i, i, i, campaign=campaign))
            for i, limit in enumerate(_cal(exp).candidates, start=1)]


def choose(measured: Sequence[tuple[int, float | None]], cal: Calibration) -> dict[str, Any]:
    """The first limit (in the candidates' order) whose paused share reaches the target; else the
    strictest measured, with ``reached`` False. `measured`: (limit, cluster paused %) per run done."""
    for limit, paused in measured:
        if paused is not None and paused >= cal.target_fc_paused_pct:
            return {"chosen": limit, "reached": True, "paused_pct": paused}
    valid = [(lim, p) for lim, p in measured if p is not None]
    if not valid:
        return {"chosen": None, "reached": False, "paused_pct": None}
    lim, p = valid[-1]
    return {"chosen": lim, "reached": False, "paused_pct": p}


def record_path(root: Path, campaign: int) -> Path:
    return root / CALIBRATION_DIR / f"campaign-{campaign}.json"


def calibrate(exp: Experiment, store: ResultStore, campaign: int, states: Mapping[str, Any],
              set_limit: Callable[[int], None],
              run: Callable[[Experiment, PlannedRun, ResultStore], RunRecord]) -> dict[str, Any]:
    """Choose the campaign's limit (or reuse its record) and leave it set; returns the record.

    `set_limit(value)` sets the limit on every host holding followers; `run(exp, planned, store)` measures
    one calibration run and returns its record (the study's own run path, so the runs are recorded)."""
    cal = _cal(exp)
    path = record_path(store.root, campaign)
    if path.is_file():
        rec: dict[str, Any] = json.loads(path.read_text())
        if rec.get("chosen") is not None:
            set_limit(int(rec["chosen"]))
            return rec
    sub = ResultStore(store.root / CALIBRATION_DIR / f"campaign-{campaign}")
    cexp = calibration_experiment(exp)
    measured: list[tuple[int, float | None]] = []
    rows: list[dict[str, Any]] = []
    started = utc_now()
    for limit, planned in calibration_runs(exp, campaign):
        set_limit(limit)
        m = run(cexp, planned, sub)
        row = run_row(m) if m.ok else {}
        paused = row.get("fc_paused_pct")
        measured.append((limit, paused))
        rows.append({"limit": limit, "run_id": planned.run_id, "status": m.status,
                     "fc_paused_pct": paused, "tps": row.get("tps"),
                     "error": m.error})
        if paused is not None and paused >= cal.target_fc_paused_pct:
            break
    choice = choose(measured, cal)
    rec = {"campaign": campaign, "experiment": exp.name, "medium": cal.medium or None, "limit": cal.limit,
           "candidates": list(cal.candidates), "target_fc_paused_pct": cal.target_fc_paused_pct,
           "window_s": cal.measure_s, "warmup_s": cal.warmup_s, "slave_threads": min(exp.factors["slave_threads"]),
           "medium_state": None if cal.cpu else _state_dict(states.get(cal.medium)), "started_utc": started,
           "finished_utc": utc_now(), "runs": rows, **choice}
    write_json_atomic(path, rec)
    if choice["chosen"] is None:
        raise media.MediaError(f"{exp.name}: no calibration run of {cal.limit} {cal.medium!r} completed "
                               f"({'; '.join(str(r.get('error')) for r in rows)[:500]}); see {sub.root}")
    set_limit(int(choice["chosen"]))
    if not choice["reached"]:
        print(f"{exp.name}: calibration did not reach {cal.target_fc_paused_pct:g} % flow-control pause "
              f"(strictest {cal.limit}={choice['chosen']}: {choice['paused_pct']:.1f} %); add stricter "
              "candidates to topology.calibrate.candidates", flush=True)
    return rec


def _cal(exp: Experiment) -> Calibration:
    cal = exp.topology.calibrate
    if cal is None:
        raise ValueError(f"{exp.name}: the spec has no topology.calibrate")
    return cal


def _state_dict(state: Any) -> dict[str, Any] | None:
    to_dict = getattr(state, "to_dict", None)
    return to_dict() if to_dict is not None else None
