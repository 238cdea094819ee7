"""The A/A sentinel of a study's campaigns (``campaigns: {sentinel: ...}``), parsed and checked (pure).

Kalibera and Jones' allocation spends a paper campaign on one run per cell, so nothing in the design says
whether the machine drifted during a sitting (a neighbour's load, a file system ageing, a throttled vCPU):
randomised order turns drift into noise, but unmeasured. A sentinel is one fixed cell measured at the start
and at the end of every campaign, outside the design (its runs live in ``<results>/sentinel/campaign-<k>/``,
never in an estimate): the pair is an A/A comparison whose expected ratio is 1, and the series of sentinel
runs over campaigns is what a change-point test reads (:mod:`dbmatrix.analyse.sentinel`).

    campaigns:
      repetitions: 1
      sentinel:
        cell: {cache_pct: 8.5, block_size: 16k, compression: none, medium: disk}   # or: first
        from_campaign: 5      # campaigns before it ran without (a reference that goes on keeps its campaigns)

``cell`` names a level of every factor the study varies (the cell must be one of the design's, and closed
loop: it runs before the open-loop phase ends); ``first`` is the design's first cell in spec order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbmatrix.spec.errors import SpecError
from dbmatrix.spec.factors import FACTORS
from dbmatrix.spec.factors import factor as registry_factor

WHERE = "campaigns.sentinel"


@dataclass(frozen=True)
class Sentinel:
    """Which cell the sentinel runs (its levels, or empty for ``first``) and from which campaign on."""

    levels: tuple[tuple[str, Any], ...] = ()
    from_campaign: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"cell": dict(self.levels) if self.levels else "first", "from_campaign": self.from_campaign}

    def runs_in(self, campaign: int) -> bool:
        return campaign >= self.from_campaign


def parse_sentinel(raw: Any) -> Sentinel | None:
    """``campaigns.sentinel`` (absent: no sentinel); every error names the field and what it allows."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not set(raw) <= {"cell", "from_campaign"} or "cell" not in raw:
        raise SpecError(f"{WHERE}: {raw!r} must be a mapping with cell (a level of every varied factor, or "
                        "first) and optionally from_campaign (an integer >= 1)")
    start = raw.get("from_campaign", 1)
    if isinstance(start, bool) or not isinstance(start, int) or start < 1:
        raise SpecError(f"{WHERE}.from_campaign: {start!r} must be an integer >= 1")
    cell = raw["cell"]
    if cell == "first":
        return Sentinel((), start)
    if not isinstance(cell, Mapping) or not cell:
        raise SpecError(f"{WHERE}.cell: {cell!r} must be first or a mapping of factor -> level")
    levels = []
    for name, value in cell.items():
        if name not in FACTORS:
            raise SpecError(f"{WHERE}.cell: unknown factor {name!r}; allowed: {', '.join(FACTORS)}")
        levels.append((str(name), registry_factor(name).check(value)))
    return Sentinel(tuple(levels), start)


def sentinel_cell_index(sentinel: Sentinel, cells: Sequence[Any], varied: Sequence[str],
                        factor_levels: Mapping[str, Sequence[Any]]) -> int:
    """The position of the sentinel's cell among the design's `cells` (each with ``levels()`` and
    ``open_loop``); the levels must name every varied factor and pick one closed-loop cell."""
    if not sentinel.levels:
        first = next((i for i, c in enumerate(cells) if not c.open_loop), None)
        if first is None:
            raise SpecError(f"{WHERE}.cell: the design has no closed-loop cell to run as a sentinel")
        return first
    given = dict(sentinel.levels)
    for name, value in given.items():
        if value not in factor_levels[name]:
            raise SpecError(f"{WHERE}.cell.{name}: {value!r} is not a level of the study; allowed: "
                            f"{', '.join(map(str, factor_levels[name]))}")
    missing = [f for f in varied if f not in given]
    if missing:
        raise SpecError(f"{WHERE}.cell: name a level of every varied factor; missing: {', '.join(missing)}")
    hits = [i for i, c in enumerate(cells) if all(c.levels()[k] == v for k, v in given.items())]
    if len(hits) != 1:
        raise SpecError(f"{WHERE}.cell: {given} matches {len(hits)} cells of the design; it must match one")
    if cells[hits[0]].open_loop:
        raise SpecError(f"{WHERE}.cell: {given} is an open-loop cell; the sentinel must be closed loop")
    return hits[0]


__all__ = ["Sentinel", "parse_sentinel", "sentinel_cell_index"]
