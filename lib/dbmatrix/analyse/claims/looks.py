"""One look of a campaign run until decided (pure): the study's claims judged at the look's level, which of
them more runs can decide, and the cells the next replicate block runs (:mod:`dbmatrix.decide`
drives the loop; the rule and its levels: :mod:`dbmatrix.analyse.stats.sequential`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.claims.needs import claim_cells
from dbmatrix.analyse.claims.table import evaluate
from dbmatrix.analyse.claims.verdicts import DECIDED, not_by_runs, verdict, verdict_class
from dbmatrix.analyse.stats.sequential import projected_blocks
from dbmatrix.spec.experiment import Experiment

OPEN = ("inconclusive",)
NOT_BY_RUNS = ("not identified", "not tested")  # more repetitions do not change these (premises included)


def state_of(verdict_: str, reason: str = "") -> str:
    """decided (agree, disagree, depends on ...), open (inconclusive: more runs may decide it) or "not
    decided by runs" (not identified, not tested: a design, a premise or a condition, not the noise; an
    interval beyond the side a stand-in bounds, which a faster stand-in cannot contradict however many runs;
    and a measured quantity, a dataset size, which has no noise for more runs to shrink)."""
    if verdict_class(verdict_) in DECIDED:
        return "decided"
    if verdict_ in OPEN and not not_by_runs(reason):
        return "open"
    return "not decided by runs"


def study_claims(claims: Sequence[Claim], kind: str) -> list[Claim]:
    """The claims a study of `kind` may judge (its kind among their sources; never-testable ones left out)."""
    return [c for c in claims if kind in c.sources and not c.not_tested]


@dataclass(frozen=True)
class ClaimLook:
    """A claim at one look: the verdict at the look's level and what the log records of it."""

    id: str
    verdict: str
    estimate: float
    ci_lo: float
    ci_hi: float
    confidence: float
    reason: str
    cells: tuple[str, ...]
    decided_at: int | None = None  # the block it was first decided at (agree/disagree), None while open

    @property
    def state(self) -> str:
        return state_of(self.verdict, self.reason)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["state"] = self.state
        d["cells"] = list(self.cells)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def judge_look(claims: Sequence[Claim], ev: Evidence, exp: Experiment, confidence: float, blocks: int,
               earlier: Mapping[str, ClaimLook] | None = None) -> list[ClaimLook]:
    """The claims judged on one campaign's evidence `ev` at `confidence` (the verdict rule of the claims
    table, premises and all), after `blocks` replicate blocks; `earlier`: the previous look's, for the
    block each claim was first decided at."""
    rows = {str(r["id"]): r for _, r in evaluate([ev], claims, confidence=confidence).claims.iterrows()}
    out = []
    for c in claims:
        r = rows[c.id]
        v = str(r["verdict"])
        prev = (earlier or {}).get(c.id)
        first = prev.decided_at if prev is not None and prev.decided_at is not None else None
        out.append(ClaimLook(c.id, v, float(r["estimate"]), float(r["ci_lo"]), float(r["ci_hi"]), confidence,
                             str(r["reason"] or ""), tuple(sorted(claim_cells(c, exp))),
                             first if first is not None else (blocks if verdict_class(v) in DECIDED else None)))
    return out


def cells_to_add(looks: Sequence[ClaimLook]) -> tuple[str, ...]:
    """The cells of the next block: those of the claims still open (sorted, each once); the cells of
    decided claims and of claims runs cannot decide get nothing unless an open claim needs them too."""
    return tuple(sorted({cell for lk in looks if lk.state == "open" for cell in lk.cells}))


def projection(claim: Claim, lk: ClaimLook, blocks: int) -> int | None:
    """Further blocks that would decide an open claim at the measured noise
    (:func:`dbmatrix.analyse.stats.sequential.projected_blocks`, at the look's level)."""
    if lk.state != "open":
        return None

    def decided(lo: float, hi: float) -> bool:
        return verdict(lo, hi, claim.band, claim.test, claim.null, lk.estimate, claim.equivalence,
                       claim.bound) in DECIDED

    return projected_blocks(lk.estimate, lk.ci_lo, lk.ci_hi, blocks, decided, log=claim.kind != "difference")
