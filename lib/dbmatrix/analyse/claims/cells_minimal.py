"""The cells a claim's estimate reads: a minimal stand-in for ``analyse.claims.needs.claim_cells`` (issue 26,
item 2, another branch), with the same name and signature; :mod:`dbmatrix.analyse.claims.looks` imports it
from here, the one line to swap at merge."""

from __future__ import annotations

from typing import Any

from dbmatrix.analyse.claims.model import Claim
from dbmatrix.spec.experiment import Experiment

EXTREMES = ("min", "max", "second-max")


def _matches(value: Any, spec: Any, levels: tuple[Any, ...]) -> bool:
    """Whether a cell's level `value` is the claim's level `spec` among the spec's `levels` (min/max resolved
    over the numbers; a medium named by what it emulates, or ``native``, cannot be told from the spec alone
    and matches every medium)."""
    if isinstance(spec, str) and spec in EXTREMES:
        try:
            nums = sorted(float(v) for v in levels)
        except (TypeError, ValueError):
            return True
        want = {"min": nums[0], "max": nums[-1], "second-max": nums[-2] if len(nums) > 1 else nums[0]}[spec]
        return float(value) == want
    if isinstance(spec, str) and (spec.startswith("emulated:") or spec == "native"):
        return True
    return str(value) == str(spec)


def claim_cells(claim: Claim, exp: Experiment) -> frozenset[str]:
    """The cell ids of ``exp.cells()`` a claim's estimate reads: the cells at the claim's levels (``at``)
    with its compared factor at ``a`` or ``b`` (every level of the factors it averages over or is judged
    per); every cell for a claim without a compared factor (the steady share); none when the spec has no
    cell at the claim's levels."""
    cells = exp.cells()
    if claim.factor is None or claim.kind == "share":
        return frozenset(c.cell_id for c in cells)
    out = set()
    for c in cells:
        lv = c.levels()
        if claim.factor not in lv:
            continue
        levels = tuple(exp.factors.get(claim.factor, ()))
        if not any(_matches(lv[claim.factor], side, levels) for side in (claim.a, claim.b)):
            continue
        if all(f in lv and _matches(lv[f], v, tuple(exp.factors.get(f, ()))) for f, v in claim.at.items()):
            out.add(c.cell_id)
    return frozenset(out)
