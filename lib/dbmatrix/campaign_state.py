"""How complete each campaign of a results directory is, from its run records (pure).

Read by the run side (:mod:`dbmatrix.run.campaigns` chooses the campaign a command runs) and by the study's
data choice (:mod:`dbmatrix.datachoice`: your runs are read once they hold a complete campaign), so it
lives below both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dbmatrix.platform_facts import record_platforms
from dbmatrix.record import RunRecord

#: one host's platform (:func:`dbmatrix.platform_facts.platform_of`) as hashable items
Platform = tuple[str, tuple[tuple[str, str], ...]]


def short_boot(boot_id: str | None) -> str:
    return (boot_id or "unknown")[:8]


@dataclass(frozen=True)
class CampaignState:
    """What the results directory says about one campaign: its planned runs, how many are ok or failed,
    and the boots and platforms (per host) its runs were measured on."""

    number: int
    planned: int
    ok: int
    failed: int = 0
    boot_ids: tuple[str, ...] = ()
    platforms: tuple[Platform, ...] = ()

    @property
    def complete(self) -> bool:
        return self.planned > 0 and self.ok >= self.planned

    def describe(self) -> str:
        boots = ", ".join(short_boot(b) for b in self.boot_ids) or "unknown"
        state = "complete" if self.complete else f"incomplete, {self.ok}/{self.planned} runs ok"
        return f"campaign {self.number} {state} on boot {boots}"


def campaign_states(planned: Mapping[int, Sequence[str]],
                    records: Iterable[RunRecord]) -> list[CampaignState]:
    """The state of every campaign in `planned` (campaign number -> its planned run ids; callers give
    the campaigns found, :func:`campaigns_found`), from the run records of the results directory."""
    status: dict[str, str | None] = {}
    boots: dict[int, list[str]] = {}
    records = list(records)
    for m in records:
        status[m.run_id] = m.status
        b = m.boot_id
        if b and b not in boots.setdefault(m.campaign, []):
            boots[m.campaign].append(b)
    platforms = {k: [(h, tuple(sorted(p.items()))) for h, ps in hosts.items() for p in ps]
                 for k, hosts in record_platforms(records).items()}
    out = []
    for k in sorted(planned):
        ids = planned[k]
        out.append(CampaignState(k, len(ids), sum(status.get(i) == "ok" for i in ids),
                                 sum(status.get(i) == "failed" for i in ids), tuple(boots.get(k, ())),
                                 tuple(sorted(platforms.get(k, ())))))
    return out


def platforms_by_campaign(states: Iterable[CampaignState]) -> dict[int, dict[str, list[dict[str, str]]]]:
    """campaign -> host -> its platforms, the shape :func:`dbmatrix.platform_facts.platform_changes` reads."""
    out: dict[int, dict[str, list[dict[str, str]]]] = {}
    for s in states:
        for host, items in s.platforms:
            out.setdefault(s.number, {}).setdefault(host, []).append(dict(items))
    return out


def campaigns_found(records: Iterable[RunRecord], recorded: Iterable[int] = ()) -> list[int]:
    """Campaign numbers with a run or a campaign record."""
    return sorted({*(m.campaign for m in records), *recorded})
