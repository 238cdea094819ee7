"""Progress of a matrix run as log lines: one line per run (i/N, run, tps, elapsed, ETA), one per study.

The formatting is pure (:func:`eta_s`, :func:`run_event`, :func:`event_line`, ...); :class:`RunProgress`
keeps the clock and the counts and hands each event to this module's ``logging`` logger, the event as a dict
in the record's ``event`` attribute. Where the lines go, and whether as text or as JSON lines
(:class:`JsonLines`), is the entry point's choice (``dbmatrix`` configures it: ``dbmatrix.cli``); without a
handler (a notebook in JupyterLab, with its progress widget) nothing is printed.

Runs resumed from an earlier session count as already done: the first run measured now is number
``already_done + 1`` of N, and the ETA is the mean wall-clock time per run measured in this session
(so it includes the hosts working in parallel) times the runs left; before the first run, the plan's
estimate.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dbmatrix.record import RunRecord

log = logging.getLogger(__name__)

ERROR_CHARS = 160  # a failed run's error, cut to this length in the text line (JSON keeps it whole)


@dataclass(frozen=True)
class RunOutcome:
    """What the progress line says about one finished run."""

    run_id: str
    cell_id: str
    status: str
    tps: float | None = None
    host: str | None = None
    failed_step: str | None = None
    error: str | None = None


def outcome_of(record: RunRecord) -> RunOutcome:
    """A run's outcome from its committed record (the one place that reads it)."""
    tps = (record.summary or {}).get("tps")
    return RunOutcome(run_id=record.run_id, cell_id=record.cell_id or record.run_id, status=str(record.status),
                      tps=float(tps) if tps is not None else None, host=record.host,
                      failed_step=record.failed_step, error=record.error)


def format_duration(seconds: float) -> str:
    """``1h02m03s``, ``4m05s`` (the plan's format)."""
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def eta_s(elapsed_s: float, done_now: int, remaining: int, planned_s_per_run: float | None = None) -> float | None:
    """Seconds left: the mean wall-clock seconds per run finished in this session times the runs left;
    before any run finished, the plan's estimate per run (None without one). Runs resumed from an earlier
    session took no time now and are not in `done_now`."""
    if remaining <= 0:
        return 0.0
    if done_now > 0:
        return elapsed_s / done_now * remaining
    return planned_s_per_run * remaining if planned_s_per_run is not None else None


def run_event(study: str, index: int, total: int, outcome: RunOutcome, elapsed_s: float,
              eta: float | None, hosts: int = 1) -> dict[str, Any]:
    """One finished run as an event: its place `index` of `total`, counting runs already done (the line
    names the host when the session has several)."""
    return {"event": "run", "study": study, "i": index, "n": total, "run_id": outcome.run_id,
            "cell_id": outcome.cell_id, "status": outcome.status, "tps": outcome.tps, "host": outcome.host,
            "hosts": hosts,
            "failed_step": outcome.failed_step, "error": outcome.error, "elapsed_s": round(elapsed_s, 1),
            "eta_s": None if eta is None else round(eta, 1)}


def study_start_event(study: str, campaign: int | None, planned: int, already_done: int, to_run: int,
                      hosts: int, estimate_s: float | None) -> dict[str, Any]:
    return {"event": "study_start", "study": study, "campaign": campaign, "planned": planned,
            "already_done": already_done, "to_run": to_run, "hosts": hosts,
            "estimate_s": None if estimate_s is None else round(estimate_s, 1)}


def study_end_event(study: str, campaign: int | None, ok: int, failed: int, not_run: int, done: int, total: int,
                    elapsed_s: float) -> dict[str, Any]:
    return {"event": "study_end", "study": study, "campaign": campaign, "ok": ok, "failed": failed,
            "not_run": not_run, "done": done, "n": total, "elapsed_s": round(elapsed_s, 1)}


def _short(text: str | None) -> str:
    one = " ".join((text or "").split())
    return one if len(one) <= ERROR_CHARS else one[:ERROR_CHARS - 1] + "…"


def event_line(e: Mapping[str, Any]) -> str:
    """The text line of an event (:func:`run_event`, :func:`study_start_event`, :func:`study_end_event`)."""
    kind = e.get("event")
    if kind == "run":
        width = len(str(e["n"]))
        head = f"{e['study']} [{e['i']:>{width}}/{e['n']}] {e['run_id']}"
        if e["status"] == "ok":
            what = f"ok {e['tps']:.1f} tps" if e.get("tps") is not None else "ok"
        else:
            what = f"{str(e['status']).upper()} at {e.get('failed_step') or '?'}: {_short(e.get('error'))}"
        where = f" on {e['host']}" if e.get("host") and e.get("hosts", 1) > 1 else ""
        eta = "ETA ?" if e.get("eta_s") is None else f"ETA {format_duration(e['eta_s'])}"
        return f"{head}{where}  {what}  elapsed {format_duration(e['elapsed_s'])}  {eta}"
    if kind == "study_start":
        camp = f"campaign {e['campaign']}: " if e.get("campaign") is not None else ""
        est = f", estimated {format_duration(e['estimate_s'])}" if e.get("estimate_s") is not None else ""
        if not e["to_run"]:
            return f"{e['study']}: {camp}all {e['planned']} runs done already; nothing to run"
        return (f"{e['study']}: {camp}{e['planned']} runs planned, {e['already_done']} done already, "
                f"{e['to_run']} to run on {e['hosts']} host(s){est}")
    if kind == "study_end":
        camp = f"campaign {e['campaign']}: " if e.get("campaign") is not None else ""
        left = f", {e['not_run']} not run" if e.get("not_run") else ""
        return (f"{e['study']}: {camp}{e['ok']} ok, {e['failed']} failed{left} in "
                f"{format_duration(e['elapsed_s'])}; {e['done']}/{e['n']} runs done")
    return str(e.get("message", e))


class RunProgress:
    """The clock and counts of one study's run session; each event is logged at INFO (text in the
    message, the dict in ``record.event``)."""

    def __init__(self, study: str, *, planned: int, already_done: int, to_run: int, campaign: int | None = None,
                 hosts: int = 1, estimate_s: float | None = None, clock: Callable[[], float] = time.monotonic,
                 logger: logging.Logger = log):
        self.study, self.campaign, self.hosts = study, campaign, hosts
        self.total, self.already_done, self.to_run = planned, already_done, to_run
        self.estimate_s = estimate_s
        self.clock, self.log = clock, logger
        self.t0 = clock()
        self.done_now = self.ok = self.failed = 0

    def emit(self, event: dict[str, Any]) -> dict[str, Any]:
        self.log.info(event_line(event), extra={"event": event})
        return event

    def start(self) -> dict[str, Any]:
        return self.emit(study_start_event(self.study, self.campaign, self.total, self.already_done, self.to_run,
                                           self.hosts, self.estimate_s))

    def add_runs(self, n: int) -> None:
        """More runs joined the session (the adaptive mode's next round)."""
        self.total += n
        self.to_run += n

    def run_done(self, outcome: RunOutcome) -> dict[str, Any]:
        self.done_now += 1
        self.ok += outcome.status == "ok"
        self.failed += outcome.status != "ok"
        elapsed = self.clock() - self.t0
        per_run = self.estimate_s / self.to_run if self.estimate_s and self.to_run else None
        eta = eta_s(elapsed, self.done_now, self.to_run - self.done_now, per_run)
        return self.emit(run_event(self.study, self.already_done + self.done_now, self.total, outcome, elapsed,
                                   eta, self.hosts))

    def finish(self, not_run: int = 0) -> dict[str, Any]:
        return self.emit(study_end_event(self.study, self.campaign, self.ok, self.failed, not_run,
                                         self.already_done + self.ok, self.total, self.clock() - self.t0))


class JsonLines(logging.Formatter):
    """One JSON object per record: the event dict (with ``utc``) for progress events, else the level and
    message."""

    def format(self, record: logging.LogRecord) -> str:
        event = getattr(record, "event", None)
        body = dict(event) if isinstance(event, Mapping) else {"event": "log", "level": record.levelname.lower(),
                                                               "logger": record.name, "message": record.getMessage()}
        utc = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="seconds")
        return json.dumps({"utc": utc, **body}, default=str)
