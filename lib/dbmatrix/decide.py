"""Repetitions until decided: ``dbmatrix run --until-decided [--budget DURATION]`` (issue 26, item 4).

After the campaign's planned runs (the spec's repetitions: the first replicate blocks) the study's runs of
the campaign are analysed and its claims judged; while some claim is still open (inconclusive) and the next
block fits in the budget, one more replicate block runs, made of only the cells of the open claims (in a
seeded random order), and the claims are judged again. A claim decided (agree, disagree, depends on a
condition) gets no more runs of its own; one that more runs cannot decide (not identified; not tested, a
premise not met or uncertain included; an interval beyond the side its stand-in bounds) is said so and
gets none (:func:`dbmatrix.analyse.claims.looks.state_of`). The adding of runs is the adaptive mode's
(:func:`dbmatrix.run.matrix.run_study` calls :meth:`UntilDecided.next_round` after the planned runs, and
again after every block it returns).

Stopping whenever a claim is decided is optional stopping; every look judges the claims at the interval of
its level in a schedule fixed before the first look (:mod:`dbmatrix.analyse.stats.sequential`: alpha
spending over K looks, union bound), K from the budget, the measured run durations and the cells the
study's claims need. The claims table later judges the study at the final look's level
(:func:`dbmatrix.analyse.stats.sequential.final_look`, from the campaign record's ``until_decided``).

The log, one JSON object per line in ``campaigns/<k>.until-decided.jsonl`` of the study's results
directory: ``schedule`` (looks, first blocks, alpha, spending, budget, the run and block times it was
derived from), one ``look`` per look (elapsed, blocks, the level, per claim its estimate, interval, verdict,
state and the block it was decided at, the cells and runs the next block adds) and ``end`` (why it stopped,
per open claim the projected further blocks at the measured noise). One text line per look goes to the
``dbmatrix`` logger (the style of :mod:`dbmatrix.run.progress`). The budget of one invocation is its studies'
together, split in proportion to their planned durations (:func:`budget_shares`), and what a study leaves of
its share goes to the studies after it (:class:`BudgetPool`); a study's share counts from the start of its
run, planned runs included (for a campaign resumed, the log's last elapsed time is carried over).
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from dbmatrix.analyse.claims.catalogue import CLAIMS
from dbmatrix.analyse.claims.costs import read_log
from dbmatrix.analyse.claims.evidence import claims_evidence
from dbmatrix.analyse.claims.looks import ClaimLook, cells_to_add, claim_cells, judge_look, projection, study_claims
from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.claims.verdicts import MAX_CAMPAIGNS
from dbmatrix.analyse.stats.sequential import DEFAULT_SPENDING, MAX_LOOKS, RECORD_KEY, Schedule, level_text, max_looks
from dbmatrix.analyse.tables import analyse
from dbmatrix.run.progress import format_duration
from dbmatrix.spec.experiment import PlannedRun, SpecError
from dbmatrix.store import utc_now, write_json_atomic
from dbmatrix.study import Study, study_kind

log = logging.getLogger(__name__)

DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")
DURATION_FORMS = "a number with h, m or s, e.g. 7200s, 90m, 2h, 1h30m"


def parse_duration(text: str) -> float:
    """Seconds of a duration ``7200s``, ``90m``, ``2h``, ``1h30m`` (a bare number: seconds)."""
    t = str(text).strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", t):
        seconds = float(t)
    else:
        m = DURATION.match(t)
        if not t or m is None or not any(m.groups()):
            raise ValueError(f"budget: {text!r} is not a duration; allowed: {DURATION_FORMS}")
        h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        seconds = 3600 * h + 60 * mi + s
    if seconds <= 0:
        raise ValueError(f"budget: {text!r} is not a positive duration; allowed: {DURATION_FORMS}")
    return seconds


def budget_shares(studies: Sequence[Study], seconds: float) -> dict[str, float]:
    """One budget for the whole invocation (a profile's campaign: ``make reproduce PROFILE=paper``), split
    over its studies in proportion to their planned durations (``dbmatrix plan``'s estimates): each study may
    spend the same fraction over its base design, fixed before any run (so each study's looks are fixed
    before its data, as the stopping rule needs)."""
    from dbmatrix.run.matrix import summarize_study

    est = {s.experiment.name: max(summarize_study(s).estimated_wall_s, 1.0) for s in studies}
    total = sum(est.values())
    return {name: seconds * e / total for name, e in est.items()}


def rounds_option(until_decided: bool, budget: str | None, studies: Sequence[Study] = ()
                  ) -> Callable[[Study], Callable[[int], list[PlannedRun]]] | None:
    """What ``dbmatrix run --until-decided [--budget DURATION]`` gives each study's run: its
    :meth:`UntilDecided.next_round`; None without --until-decided. With several `studies` the budget is
    theirs together, split by :func:`budget_shares`; a study not among them gets all of it. A bad or lone
    --budget is a SpecError naming the field and the allowed forms."""
    if budget is not None and not until_decided:
        raise SpecError("budget: --budget needs --until-decided")
    if not until_decided:
        return None
    looked = [s.experiment.name for s in studies if s.experiment.campaign_repetitions is not None]
    if looked:
        raise SpecError(f"--until-decided: {', '.join(looked)} run in campaigns, which are the looks of its claims "
                        "(judged after every campaign at the exact group-sequential level, at most "
                        f"{MAX_CAMPAIGNS}): blocks added within a campaign would be looks the rule does not "
                        "count; run the next campaign instead (dbmatrix run --campaign new), or leave out the "
                        "spec's campaigns: key")
    try:
        seconds = parse_duration(budget) if budget is not None else None
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    shares = budget_shares(studies, seconds) if seconds is not None and len(studies) > 1 else {}
    if shares and seconds is not None:
        return BudgetPool(shares, seconds)
    return lambda study: UntilDecided(study, shares.get(study.experiment.name, seconds)).next_round


class BudgetPool:
    """The studies of one invocation in turn (``rounds(study)`` right before each study's run), each with its
    share of the budget (:func:`budget_shares`) plus what the studies before it left unused: the budget is
    the total minus what the earlier studies spent minus the shares of this study and the later ones, when that
    is positive. A study whose block does not fit its slack (the TPC-C study's 24 cells) passes its unused
    time on, not to nobody. What a study gets depends only on the earlier studies' elapsed times, never on its
    own data, so its looks are still fixed before its first look; the schedule's log says what was carried."""

    def __init__(self, shares: dict[str, float], total_s: float):
        self.shares, self.total_s = dict(shares), total_s
        self.loops: list[UntilDecided] = []

    def carried(self) -> float:
        """What the studies so far left of their shares (0 when they overran them)."""
        started = {loop.study.experiment.name for loop in self.loops}
        spent = sum(loop.spent_s() for loop in self.loops)
        ahead = sum(s for name, s in self.shares.items() if name not in started)
        return max(0.0, self.total_s - spent - ahead)

    def __call__(self, study: Study) -> Callable[[int], list[PlannedRun]]:
        name = study.experiment.name
        if name not in self.shares:  # not among the invocation's studies: all of the budget, as without a pool
            return UntilDecided(study, self.total_s).next_round
        carried = self.carried()
        loop = UntilDecided(study, self.shares[name] + carried, carried_s=carried)
        self.loops.append(loop)
        return loop.next_round


def block_runs(exp: Any, campaign: int, cells: Sequence[str], block: int, attempted: set[str],
               first_order: int) -> list[PlannedRun]:
    """One replicate block of the given cells (repetition = block number, or the next unattempted one after
    a failed attempt), in a seeded random order continuing the campaign's run order."""
    by_id = {c.cell_id: c for c in exp.cells()}
    order = [c for c in cells if c in by_id]
    camp = "" if campaign == 1 else f"camp{campaign}:"
    random.Random(f"{exp.seed}:{camp}until-decided:{block}").shuffle(order)
    out: list[PlannedRun] = []
    for cell_id in order:
        rep = block
        while PlannedRun(by_id[cell_id], rep, block, 0, campaign=campaign).run_id in attempted:
            rep += 1
        out.append(PlannedRun(by_id[cell_id], rep, block, first_order + len(out), adaptive=True, campaign=campaign))
    return out


def look_line(study: str, e: dict[str, Any]) -> str:
    """The text line of a look (or the end) event."""
    if e["event"] == "end":
        proj = ", ".join(f"{k} +{v if v is not None else '?'}" for k, v in e["projected_blocks"].items())
        return (f"{study}: until decided: stopped after look {e['look']} ({e['reason']}); "
                + (f"open: {proj} more blocks projected" if proj else "no claim open")
                + f"  elapsed {format_duration(e['elapsed_s'])}")
    counts = {s: sum(c["state"] == s for c in e["claims"]) for s in ("decided", "open", "not decided by runs")}
    budget = f" of {format_duration(e['budget_s'])}" if e.get("budget_s") else ""
    adds = (f"+1 block: {len(e['runs_added'])} runs for {', '.join(e['open'])}" if e["runs_added"]
            else "no block added")
    return (f"{study}: look {e['look']}/{e['looks']} after {e['blocks']} blocks ({level_text(e['confidence'])} "
            f"intervals): {counts['decided']} decided, {counts['open']} open, {counts['not decided by runs']} not "
            f"decided by runs; {adds}  elapsed {format_duration(e['elapsed_s'])}{budget}")


class UntilDecided:
    """The loop of the module docstring for one study; :meth:`next_round` is ``run_study``'s `next_round`."""

    def __init__(self, study: Study, budget_s: float | None = None, claims: Sequence[Claim] = CLAIMS,
                 spending: str = DEFAULT_SPENDING, clock: Callable[[], float] = time.monotonic,
                 evidence: Callable[[int], Evidence] | None = None, carried_s: float = 0.0):
        self.study, self.budget_s, self.spending, self.clock = study, budget_s, spending, clock
        self.carried_s = carried_s  # of budget_s: what earlier studies of the invocation left (BudgetPool)
        self.stopped_at: float | None = None
        self.claims = study_claims(claims, study.kind)
        self.t0 = clock()
        self.offset = 0.0
        self.schedule: Schedule | None = None
        self.last: dict[str, ClaimLook] = {}
        self.look = 0
        self.added = 0
        self.stopped: str | None = None
        self._evidence = evidence or self._analysed
        self._loaded_for: int | None = None

    # ---------------------------------------------------------------- files

    def log_path(self, campaign: int) -> Any:
        return self.study.store.root / "campaigns" / f"{campaign}.until-decided.jsonl"

    def _write(self, campaign: int, event: dict[str, Any]) -> None:
        path = self.log_path(campaign)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps({"utc": utc_now(), **event}, sort_keys=True, default=str) + "\n")

    def _resume(self, campaign: int) -> None:
        """Carry a resumed campaign's schedule, looks, blocks and elapsed time over from its log."""
        self._loaded_for = campaign
        for e in read_log(self.log_path(campaign)):
            if e["event"] == "schedule":
                s = e["schedule"]
                self.schedule = Schedule(s["looks"], s["first_blocks"], s["alpha"], s["spending"])
            elif e["event"] == "look":
                self.look, self.offset = int(e["look"]), float(e["elapsed_s"])
                self.added += bool(e["runs_added"])
                self.last = {c["id"]: ClaimLook(c["id"], c["verdict"], _num(c["estimate"]), _num(c["ci_lo"]),
                                                _num(c["ci_hi"]), c["confidence"], c["reason"], tuple(c["cells"]),
                                                c["decided_at"]) for c in e["claims"]}
            elif e["event"] == "end":
                self.stopped = str(e["reason"])

    def _record(self, campaign: int) -> None:
        """The campaign record's ``until_decided``: what the claims table judges the study at."""
        store = self.study.store
        rec = store.campaign_record(campaign) or {"campaign": campaign, "experiment": self.study.experiment.name}
        assert self.schedule is not None
        rec[RECORD_KEY] = {"schedule": self.schedule.as_dict(), "last_look": self.look,
                           "blocks": self.schedule.first_blocks + self.added, "stopped": self.stopped,
                           "log": f"campaigns/{campaign}.until-decided.jsonl"}
        write_json_atomic(store.campaign_file(campaign), rec)

    # ---------------------------------------------------------------- the loop

    def elapsed(self) -> float:
        return self.offset + self.clock() - self.t0

    def spent_s(self) -> float:
        """The study's elapsed time when its loop ended (until then: so far)."""
        return self.stopped_at if self.stopped_at is not None else self.elapsed()

    def _analysed(self, campaign: int) -> Evidence:
        """The study re-analysed (as ``dbmatrix analyse`` does) and its evidence of this campaign alone."""
        study = self.study
        exp, store = study.experiment, study.store
        kind = study_kind(exp)
        kind.before_analysis(store, exp)
        kind.after_analysis(store, exp, analyse(store, exp))
        st = kind.load_tables(store, exp, "", study.spec_path)
        return claims_evidence([st])[0].campaign(campaign)

    def _run_s(self, campaign: int) -> float:
        """Mean measured seconds per run of this campaign (the plan's estimate before any)."""
        exp = self.study.experiment
        ds = [float(m.duration_s) for m in self.study.store.records()
              if m.campaign == campaign and m.status == "ok" and m.duration_s]
        return sum(ds) / len(ds) if ds else float(exp.warmup_s + exp.measure_s)

    def next_round(self, campaign: int) -> list[PlannedRun]:
        """Look at the claims; the next block's runs, or [] to stop (the end is logged)."""
        if self._loaded_for != campaign:
            self._resume(campaign)
        if self.stopped is not None or (self.schedule is not None and self.look >= self.schedule.looks):
            if self.stopped_at is None:
                self.stopped_at = self.elapsed()
            return []  # a campaign whose loop ended (resumed): nothing more
        exp = self.study.experiment
        t_look = self.clock()
        ev = self._evidence(campaign)
        run_s = self._run_s(campaign)
        if self.schedule is None:  # fixed before the first look: budget, run time, the cells claims need
            needed = {c for cl in self.claims for c in claim_cells(cl, exp)} or {c.cell_id for c in exp.cells()}
            block_s = run_s * len(needed)
            looks = max_looks(self.budget_s, self.elapsed(), block_s) if self.budget_s else MAX_LOOKS
            self.schedule = Schedule(looks, exp.repetitions, spending=self.spending)
            self._write(campaign, {"event": "schedule", "schedule": self.schedule.as_dict(),
                                   "budget_s": self.budget_s, "carried_s": round(self.carried_s, 1),
                                   "run_s": round(run_s, 1), "block_s": round(block_s, 1),
                                   "cells_needed": len(needed), "claims": [c.id for c in self.claims]})
        self.look += 1
        k, blocks = self.look, self.schedule.first_blocks + self.added
        found = judge_look(self.claims, ev, exp, self.schedule.confidence(k), blocks, self.last)
        self.last = {lk.id: lk for lk in found}
        open_ = [lk for lk in found if lk.state == "open"]
        cells = cells_to_add(found)
        analysis_s = self.clock() - t_look
        next_s = run_s * len(cells) + analysis_s
        if not open_:
            n_dec = sum(lk.state == "decided" for lk in found)
            self.stopped = ("no claim of this study" if not found else "every claim decided" if n_dec == len(found)
                            else f"no claim open ({n_dec} decided, "
                                 f"{len(found) - n_dec} not decided by runs)")
        elif k >= self.schedule.looks:
            self.stopped = f"the schedule's {self.schedule.looks} looks are done"
        elif self.budget_s is not None and self.elapsed() + next_s > self.budget_s:
            self.stopped = (f"budget: the next block (~{format_duration(next_s)}) would end after "
                            f"{format_duration(self.budget_s)}")
        runs: list[PlannedRun] = []
        if self.stopped is None:
            manifests = [m for m in self.study.store.records() if m.campaign == campaign]
            first_order = len(exp.cells()) * exp.repetitions + sum(m.adaptive for m in manifests) + 1
            runs = block_runs(exp, campaign, cells, blocks + 1, {m.run_id for m in manifests}, first_order)
            self.added += 1
        event = {"event": "look", "campaign": campaign, "look": k, "looks": self.schedule.looks, "blocks": blocks,
                 "confidence": self.schedule.confidence(k), "elapsed_s": round(self.elapsed(), 1),
                 "budget_s": self.budget_s, "analysis_s": round(analysis_s, 1),
                 "open": [lk.id for lk in open_], "cells_added": list(cells) if runs else [],
                 "runs_added": [r.run_id for r in runs], "claims": [lk.as_dict() for lk in found]}
        self._write(campaign, event)
        log.info(look_line(exp.name, event), extra={"event": {**event, "event": "until_decided_look"}})
        if self.stopped is not None:
            self.stopped_at = self.elapsed()
            by_id = {c.id: c for c in self.claims}
            proj = {lk.id: projection(by_id[lk.id], lk, blocks) for lk in open_}
            end = {"event": "end", "campaign": campaign, "look": k, "blocks": blocks, "reason": self.stopped,
                   "elapsed_s": round(self.elapsed(), 1), "projected_blocks": proj,
                   "decided_at": {lk.id: lk.decided_at for lk in found if lk.decided_at is not None},
                   "not_decided_by_runs": {lk.id: f"{lk.verdict}: {lk.reason}" for lk in found
                                           if lk.state == "not decided by runs"}}
            self._write(campaign, end)
            log.info(look_line(exp.name, end), extra={"event": {**end, "event": "until_decided_end"}})
        self._record(campaign)
        return runs


def _num(v: Any) -> float:
    return math.nan if v is None else float(v)
