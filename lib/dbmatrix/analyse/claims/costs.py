"""What deciding the claims cost: per claim of a study run until decided, the block it was decided at and the
machine time of the runs it read until then; per study and campaign, the machine time per decided claim
(issue 26's acceptance). Read from the ``campaigns/<k>.until-decided.jsonl`` logs
(:mod:`dbmatrix.decide`) and the run records; the arithmetic is pure (:func:`decision_costs`,
:func:`cost_summary`), the reading is :func:`study_costs`."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.analyse.claims.looks import state_of
from dbmatrix.analyse.judgement import COST_COLUMNS as COLUMNS
from dbmatrix.analyse.judgement import SUMMARY_COLUMNS

__all__ = ["COLUMNS", "SUMMARY_COLUMNS", "RunTime", "cost_summary", "decision_costs", "read_log", "study_costs"]


@dataclass(frozen=True)
class RunTime:
    """One run as the costs count it: its cell, block, campaign and measured duration (ok runs only)."""

    cell_id: str
    block: int
    campaign: int
    duration_s: float


def read_log(path: Path) -> list[dict[str, Any]]:
    """The events of one until-decided log, in order (none when the file is absent)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def decision_costs(study: str, events: Sequence[Mapping[str, Any]], runs: Iterable[RunTime]) -> pd.DataFrame:
    """One row per claim of the study's last look in one campaign's log: its verdict and state there (the
    state as :func:`dbmatrix.analyse.claims.looks.state_of` reads the verdict and reason), the
    block it was first decided at (NaN while open or not decided by runs), the blocks and looks run, the
    level of the last look, and the runs of the claim's cells through the block it was decided at (through
    the last block when it was not decided) with their summed durations; `projected_blocks` of an open claim
    from the log's end. Empty when the log has no look."""
    looks = [e for e in events if e.get("event") == "look"]
    if not looks:
        return pd.DataFrame(columns=list(COLUMNS))
    last = looks[-1]
    campaign = int(last["campaign"])
    end: Mapping[str, Any] = next((e for e in reversed(events) if e.get("event") == "end"), {})
    projected = end.get("projected_blocks") or {}
    ok = [r for r in runs if r.campaign == campaign]
    rows = []
    for c in last["claims"]:
        decided_at = c.get("decided_at")
        through = int(decided_at) if decided_at is not None else int(last["blocks"])
        cells = set(c.get("cells") or ())
        used = [r for r in ok if r.cell_id in cells and r.block <= through]
        proj = projected.get(c["id"])
        rows.append({"study": study, "campaign": campaign, "claim": c["id"], "verdict": c["verdict"],
                     "state": state_of(str(c["verdict"]), str(c.get("reason") or "")),
                     "decided_at": float(decided_at) if decided_at is not None else math.nan,
                     "blocks": int(last["blocks"]), "looks": int(last["look"]),
                     "confidence": float(last["confidence"]), "runs": len(used),
                     "run_s": round(sum(r.duration_s for r in used), 1),
                     "projected_blocks": float(proj) if proj is not None else math.nan})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def cost_summary(costs: pd.DataFrame, elapsed: Mapping[tuple[str, int], float],
                 runs: Mapping[tuple[str, int], tuple[int, float]],
                 stopped: Mapping[tuple[str, int], str] | None = None) -> pd.DataFrame:
    """Per study and campaign: claims judged, decided, open and not decided by runs; blocks and looks; the
    last look's confidence level; the campaign's runs and their summed durations (`runs`: (count,
    seconds)); its elapsed time by the log (planned blocks, added blocks, dataset loads and looks:
    `elapsed`); that elapsed time per decided claim (NaN when none was decided); why it stopped."""
    rows = []
    for (study, campaign), g in costs.groupby(["study", "campaign"], sort=True):
        key = (str(study), int(campaign))
        n_dec = int((g["state"] == "decided").sum())
        el = float(elapsed.get(key, math.nan))
        n_runs, run_s = runs.get(key, (0, 0.0))
        rows.append({"study": key[0], "campaign": key[1], "claims": len(g), "decided": n_dec,
                     "open": int((g["state"] == "open").sum()),
                     "not_by_runs": int((g["state"] == "not decided by runs").sum()),
                     "blocks": int(g["blocks"].max()), "looks": int(g["looks"].max()),
                     "confidence": float(g["confidence"].iloc[0]), "runs": int(n_runs),
                     "run_s": round(float(run_s), 1), "elapsed_s": el,
                     "elapsed_s_per_decided": round(el / n_dec, 1) if n_dec else math.nan,
                     "stopped": (stopped or {}).get(key, "")})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def study_costs(name: str, store: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A study's per-claim costs and summary over every campaign with an until-decided log (two empty
    tables when none has one). `store`: its :class:`dbmatrix.store.ResultStore`."""
    logs = sorted((store.root / "campaigns").glob("*.until-decided.jsonl"),
                  key=lambda p: int(p.name.split(".")[0])) if (store.root / "campaigns").is_dir() else []
    if not logs:
        return _empty()
    times = [RunTime(r.cell_id, int(r.block or r.repetition), int(r.campaign), float(r.duration_s))
             for r in store.records() if r.status == "ok" and r.duration_s]
    parts, elapsed, stopped = [], {}, {}
    for path in logs:
        events = read_log(path)
        df = decision_costs(name, events, times)
        if df.empty:
            continue
        parts.append(df)
        key = (name, int(df["campaign"].iloc[0]))
        timed = [e for e in events if e.get("elapsed_s") is not None]
        elapsed[key] = float(timed[-1]["elapsed_s"]) if timed else math.nan
        stopped[key] = next((str(e["reason"]) for e in reversed(events) if e.get("event") == "end"), "")
    if not parts:
        return _empty()
    costs = pd.concat(parts, ignore_index=True)
    totals = {(name, c): (sum(1 for t in times if t.campaign == c),
                          sum(t.duration_s for t in times if t.campaign == c))
              for c in sorted({int(x) for x in costs["campaign"]})}
    return costs, cost_summary(costs, elapsed, totals, stopped)


def _empty() -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.DataFrame(columns=list(COLUMNS)), pd.DataFrame(columns=list(SUMMARY_COLUMNS))
