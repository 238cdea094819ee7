"""Campaigns: one run of a study's matrix from start to end on one boot of one host set (pure logic).

A results directory holds campaigns 1, 2, ...; repetitions within a campaign share the boot, the dataset
snapshots and the hour, so the variation between campaigns is the larger, independent one. Campaign 1
keeps the run ids ``<cell_id>-r<rep>`` (a manifest without a ``campaign`` key is campaign 1: its record's); campaign
k >= 2 runs ``<cell_id>-r<rep>-camp<k>``. Choosing the campaign a command runs (``--campaign``):

- ``auto``: continue the latest campaign if some planned run of it is not ok, else start a new one;
- ``last``: continue the latest campaign (nothing to run if it is complete; the old resume behaviour);
- ``new``: start a new campaign even if the latest is incomplete (its runs stay; it stays incomplete);
- ``<k>``: continue campaign k (or start it when it is the next number).

A study judged by campaign looks has a registered maximum of campaigns (``maximum``): ``auto`` starts none
beyond it (its design is complete: nothing to run), and ``new`` or a number beyond it says that such a campaign
is judged at the last look's level, outside the alpha the rule spends.

The record ``campaigns/<k>.json`` (see :func:`merge_record`) says when the campaign started and finished,
on which hosts and boots, with which git commit, spec digest and dataset snapshots, so a reader sees
whether two campaigns shared a boot or a snapshot. The store owns the files (``ResultStore.campaign_record``,
``write_campaign_record``, ``campaigns``); :mod:`dbmatrix.run.matrix` calls it. How complete each campaign
is (:class:`CampaignState`) is :mod:`dbmatrix.campaign_state`'s, which the study's data choice reads too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.campaign_state import CampaignState, campaign_states, campaigns_found, short_boot

OPTIONS = ("auto", "new", "last")
CampaignOption = str | int


def parse_option(value: str | int) -> CampaignOption:
    """``auto``, ``new``, ``last`` or a campaign number >= 1; anything else is a clear error."""
    if isinstance(value, int) and not isinstance(value, bool):
        number: int | None = value
    else:
        text = str(value).strip().lower()
        if text in OPTIONS:
            return text
        number = int(text) if text.isdigit() else None
    if number is None or number < 1:
        raise ValueError(f"campaign: {value!r} is not allowed; allowed: {', '.join(OPTIONS)} or a campaign "
                         "number >= 1")
    return number


def run_id(cell_id: str, repetition: int, campaign: int = 1) -> str:
    """The run id of repetition `repetition` of a cell in `campaign` (campaign 1: today's ids)."""
    base = f"{cell_id}-r{repetition}"
    return base if campaign == 1 else f"{base}-camp{campaign}"


@dataclass(frozen=True)
class Choice:
    """The campaign a command runs, whether it starts it, and why (one line for the user)."""

    number: int
    new: bool
    reason: str
    previous: tuple[CampaignState, ...] = field(default=(), compare=False)

    def line(self) -> str:
        return f"campaign {self.number} ({'new' if self.new else 'continued'}: {self.reason})"


def choose(option: CampaignOption, states: Sequence[CampaignState], maximum: int | None = None) -> Choice:
    """The campaign `option` selects among the existing campaigns' `states` (see the module doc); `maximum`:
    the registered maximum of campaigns (None: none)."""
    option = parse_option(option)
    by_number = {s.number: s for s in states}
    latest = max(by_number.values(), key=lambda s: s.number) if by_number else None
    nxt = latest.number + 1 if latest else 1
    prev = tuple(states)
    if isinstance(option, int):
        if option in by_number:
            s = by_number[option]
            return Choice(option, False, f"--campaign {option}: {s.describe()}", prev)
        if option == nxt:
            return Choice(option, True, f"--campaign {option}: the next campaign number{_beyond(nxt, maximum)}",
                          prev)
        have = ", ".join(str(n) for n in sorted(by_number)) or "none"
        raise ValueError(f"campaign: {option} does not exist (existing: {have}; the next is {nxt}); "
                         "use --campaign new, last or auto")
    if latest is None:
        return Choice(1, True, "no campaign yet", prev)
    if option == "last":
        what = "nothing to run" if latest.complete else "resuming"
        return Choice(latest.number, False, f"last: {latest.describe()}; {what}", prev)
    if option == "auto" and not latest.complete:
        return Choice(latest.number, False, f"auto: {latest.describe()}; resuming", prev)
    if option == "auto" and maximum is not None and latest.number >= maximum:
        return Choice(latest.number, False, f"auto: {latest.describe()}; the registered maximum of {maximum} "
                      "campaigns is reached, nothing to run (--campaign new runs one more, outside the rule's "
                      "alpha)", prev)
    why = "auto" if option == "auto" else "new requested"
    return Choice(nxt, True, f"{why}: {latest.describe()}{_beyond(nxt, maximum)}", prev)


def _beyond(number: int, maximum: int | None) -> str:
    if maximum is None or number <= maximum:
        return ""
    return (f"; beyond the registered maximum of {maximum} campaigns: judged at the last look's level, outside "
            "the alpha the rule spends")


def merge_record(old: Mapping[str, Any] | None, *, campaign: int, experiment: str, campaign_started_utc: str,
                 session_started_utc: str, now_utc: str, hosts: Mapping[str, str | None],
                 datasets: Iterable[Mapping[str, Any]], git: Mapping[str, Any] | None, spec_digest: str,
                 state: CampaignState, session: bool = True, kernels: Mapping[str, str | None] | None = None,
                 registration: Mapping[str, Any] | None = None,
                 dataset_load: str | None = None) -> dict[str, Any]:
    """The record ``campaigns/<k>.json`` after one session (one command) of campaign k (`session`
    False: the record a campaign gets when it starts, before any run).

    `hosts` maps each host of this session to its boot id; `datasets` are the dataset snapshots the
    session used (``DatasetInfo.to_dict()``; a snapshot created before the session started was reused
    from the host's cache). A campaign continued over several sessions lists them all in ``sessions``;
    ``hosts`` holds every boot id a host had during the campaign (two entries: the campaign spans a
    reboot); ``kernels`` every kernel release it ran. ``finished_utc`` is set when the campaign's plan is
    complete, and kept.

    `registration` (:func:`dbmatrix.analyse.claims.registration.current_registration`: a digest of each
    claim's definition and of the code that computes verdicts) is stored when the campaign's record is
    first written and never replaced: it is what the claims were before this campaign's data existed.

    `dataset_load` (the spec's: ``reuse`` or ``per_campaign``) is recorded as the campaign's dataset policy;
    each dataset says whom it was loaded for (``prepared_for``: this campaign's mark, or None)."""
    rec: dict[str, Any] = dict(old or {})
    sessions = list(rec.get("sessions") or [])
    used = []
    for d in datasets:
        created = str(d.get("created_utc") or "")
        used.append({"key": d.get("key"), "host": d.get("host"), "snapshot": d.get("snapshot"),
                     "created_utc": created or None, "prepare_s": d.get("prepare_s"),
                     "reused": bool(created) and created < session_started_utc,
                     **({"prepared_for": d.get("prepared_for")} if dataset_load is not None else {})})
    used.sort(key=lambda d: (str(d["host"]), str(d["key"])))
    if session:
        sessions.append({"started_utc": session_started_utc, "ended_utc": now_utc,
                         "hosts": dict(sorted(hosts.items())), "datasets": used, "git": dict(git or {})})
    all_hosts: dict[str, list[str]] = {h: list(v) for h, v in (rec.get("hosts") or {}).items()}
    for h, b in sorted(hosts.items()):
        boots = all_hosts.setdefault(h, [])
        if b and b not in boots:
            boots.append(b)
    all_kernels: dict[str, list[str]] = {h: list(v) for h, v in (rec.get("kernels") or {}).items()}
    for h, k in sorted((kernels or {}).items()):
        seen = all_kernels.setdefault(h, [])
        if k and k not in seen:
            seen.append(k)
    snaps: dict[tuple[str, str], dict[str, Any]] = {(str(d["host"]), str(d["key"])): d
                                                    for d in rec.get("datasets") or []}
    for d in used:
        snaps.setdefault((str(d["host"]), str(d["key"])), d)  # the first session's use says if it was reused
    rec.update({
        "campaign": campaign, "experiment": experiment, "spec_digest": spec_digest,
        "started_utc": rec.get("started_utc") or campaign_started_utc,
        "finished_utc": rec.get("finished_utc") or (now_utc if state.complete else None),
        "complete": state.complete, "planned": state.planned, "ok": state.ok, "failed": state.failed,
        "hosts": all_hosts, "boot_ids": sorted({b for v in all_hosts.values() for b in v}),
        **({"kernels": all_kernels} if all_kernels else {}),
        "git": rec.get("git") or dict(git or {}),
        "datasets": [snaps[k] for k in sorted(snaps)], "sessions": sessions,
    })
    if dataset_load is not None:
        rec["dataset_load"] = dataset_load
    if rec.get("registration") is None and registration is not None:
        rec["registration"] = dict(registration)
    return rec


def shared(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, list[str]]:
    """What two campaign records share: boot ids, and dataset snapshots (same host, key and creation)."""
    def snaps(r: Mapping[str, Any]) -> set[str]:
        return {f"{d.get('host')}:{d.get('key')}@{d.get('created_utc')}" for d in r.get("datasets") or []}
    return {"boot_ids": sorted(set(a.get("boot_ids") or []) & set(b.get("boot_ids") or [])),
            "datasets": sorted(snaps(a) & snaps(b))}


__all__ = ["CampaignOption", "CampaignState", "Choice", "campaign_states", "campaigns_found", "choose",
           "merge_record", "parse_option", "run_id", "shared", "short_boot"]
