"""When a campaign runs its A/A sentinel (:mod:`dbmatrix.spec.sentinel`), and where the runs are kept.

The sentinel's two runs are full runs through the study's own run path (logs, manifest, counters), kept
apart from the design in ``<results>/sentinel/campaign-<k>/`` (repetition 1 the opening run, 2 the closing
one), so no estimate ever reads them. The opening run is due when a campaign starts (none of its design runs
measured yet), and again while it has failed and no design run has been measured (a host not set up yet
fails it before anything is measured; the retry still opens the sitting); the closing run when the
campaign's last design run is measured in a session that also measured the opening one's campaign, i.e. when
the opening run is there and the closing one is not. A campaign resumed after its first runs gets no opening
run: an A/A pair split over sittings would not measure drift within one, and the analysis says the pair is
missing.
"""

from __future__ import annotations

from collections.abc import Sequence

from dbmatrix.spec.experiment import Experiment, PlannedRun
from dbmatrix.store import ResultStore

START, END = "start", "end"


def sentinel_store(store: ResultStore, campaign: int) -> ResultStore:
    return ResultStore(store.sentinel_dir(campaign))


def sentinel_run(exp: Experiment, campaign: int, position: str) -> PlannedRun | None:
    """The planned opening (``start``) or closing (``end``) sentinel run of `campaign`, or None."""
    cell = exp.sentinel_cell(campaign)
    if cell is None:
        return None
    rep = 1 if position == START else 2
    return PlannedRun(cell, rep, 1, 0, campaign=campaign)


def sentinel_due(exp: Experiment, store: ResultStore, campaign: int, position: str,
                 plan: Sequence[PlannedRun]) -> PlannedRun | None:
    """The sentinel run to measure now at `position` (see the module doc), or None."""
    run = sentinel_run(exp, campaign, position)
    if run is None:
        return None
    sub = sentinel_store(store, campaign)
    design_ok = [store.status(r.run_id) == "ok" for r in plan]
    if position == START:
        return run if sub.status(run.run_id) != "ok" and not any(design_ok) else None
    opening = sentinel_run(exp, campaign, START)
    assert opening is not None
    if sub.status(opening.run_id) != "ok" or sub.status(run.run_id) == "ok" or not all(design_ok):
        return None
    return run


def sentinel_runs_left(exp: Experiment, store: ResultStore, campaign: int) -> list[PlannedRun]:
    """The sentinel runs `campaign` would still measure if it ran from now on (for estimates)."""
    opening, closing = sentinel_run(exp, campaign, START), sentinel_run(exp, campaign, END)
    if opening is None or closing is None:
        return []
    sub = sentinel_store(store, campaign)
    started = any(store.status(r.run_id) == "ok" for r in exp.plan(campaign))
    out = [opening] if sub.status(opening.run_id) != "ok" and not started else []
    if (out or sub.status(opening.run_id) == "ok") and sub.status(closing.run_id) != "ok":
        out.append(closing)
    return out


__all__ = ["END", "START", "sentinel_due", "sentinel_run", "sentinel_runs_left",
           "sentinel_store"]
