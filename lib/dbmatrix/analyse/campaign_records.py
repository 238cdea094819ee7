"""What a study's campaign level captured, stated from its campaign records rather than assumed.

Campaigns pool into claims as independent replications (:mod:`dbmatrix.analyse.pooling`,
:mod:`dbmatrix.analyse.campaign_model`). Whether they were is in ``campaigns/<k>.json``
(:func:`dbmatrix.run.campaigns.merge_record`): the boots and kernels of the hosts, the git commit and dirty
flag, the dataset snapshots (created in the campaign, or reused from before it) and the start and end times.
:func:`summaries` keeps those facts per campaign (``processed/campaigns.json``, what publishing reads) and
:func:`independence` turns them into the label the claims' basis, the paper and the README print:

- ``independent boots, fresh datasets``: no boot and no dataset snapshot shared between two campaigns;
- ``same boot, reused snapshots: within-session replication``: every campaign on one boot, on the same
  snapshots; the campaign level then holds only what varies between passes over the matrix in one session;
- the mixed cases (``independent boots, reused snapshots``, ``same boot, fresh datasets``, or ``partly
  shared``) name what was shared;
- one campaign: ``one campaign: within-campaign replication only``.

A label gains `` (hardware differs between campaigns)`` (or software, or both) when the run records' platforms
(:mod:`dbmatrix.platform_facts`: CPU, caches, memory, kernel, server build) differ between campaigns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbmatrix.platform_facts import platform_changes, record_platforms
from dbmatrix.store import ResultStore, write_text_atomic

CAMPAIGNS_FILE = "campaigns.json"
ONE = "one campaign: within-campaign replication only"
INDEPENDENT = "independent boots, fresh datasets"
WITHIN_SESSION = "same boot, reused snapshots: within-session replication"


def _snapshot_id(d: Mapping[str, Any]) -> str:
    """A snapshot's identity: host, dataset key and when it was created (a re-prepared one is another)."""
    return f"{d.get('host')}:{d.get('key')}@{d.get('created_utc')}"


def summary(record: Mapping[str, Any], platforms: Mapping[str, Sequence[Mapping[str, str]]] | None = None
            ) -> dict[str, Any]:
    """One campaign's facts that bear on independence (missing ones as None / empty); `platforms`: host ->
    the platforms (:func:`dbmatrix.platform_facts.platform_of`) its run records name."""
    started = record.get("started_utc")
    # a snapshot is this campaign's own when it was created after the campaign started, or marked as loaded
    # for it (``prepared_for``, dbmatrix.run.datasets.fresh_token "<experiment>@<root>#campaign-<k>"): a
    # campaign resumed after an interrupted start keeps the snapshot its first attempt loaded for it
    mark = (f"{record.get('experiment')}@", f"#campaign-{int(record.get('campaign') or 0)}")
    datasets = []
    for d in record.get("datasets") or []:
        created = d.get("created_utc")
        pf = str(d.get("prepared_for") or "")
        fresh = bool(created and started and str(created) >= str(started)) or (
            pf.startswith(mark[0]) and pf.endswith(mark[1]))
        datasets.append({"snapshot": _snapshot_id(d), "fresh": fresh})
    kernels = sorted({k for v in (record.get("kernels") or {}).values() for k in v if k})
    git = record.get("git") or {}
    commits = sorted({str((s.get("git") or {}).get("commit")) for s in record.get("sessions") or []
                      if (s.get("git") or {}).get("commit")} | ({str(git["commit"])} if git.get("commit") else set()))
    dirty = any(bool((s.get("git") or {}).get("dirty")) for s in record.get("sessions") or []) or bool(git.get("dirty"))
    return {"campaign": int(record.get("campaign") or 0), "experiment": record.get("experiment"),
            "started_utc": started,
            "finished_utc": record.get("finished_utc"), "complete": bool(record.get("complete")),
            "boot_ids": sorted(record.get("boot_ids") or []), "hosts": sorted(record.get("hosts") or {}),
            "kernels": kernels, "commits": commits,
            "dirty": dirty, "datasets": sorted(datasets, key=lambda d: d["snapshot"]),
            "registration": record.get("registration"),
            # the spec's dataset policy (reuse / per_campaign), in records written since it is recorded
            **({"dataset_load": record["dataset_load"]} if record.get("dataset_load") else {}),
            # a campaign run until decided: its looks' schedule and final look (dbmatrix.decide)
            **({"until_decided": record["until_decided"]} if record.get("until_decided") else {}),
            **({"platforms": {h: [dict(p) for p in ps] for h, ps in sorted(platforms.items())}}
               if platforms else {})}


def summaries(records: Sequence[Mapping[str, Any]],
              platforms: Mapping[int, Mapping[str, Sequence[Mapping[str, str]]]] | None = None
              ) -> list[dict[str, Any]]:
    """Every campaign's :func:`summary`; `platforms`: campaign -> host -> platforms (:func:`run_platforms`)."""
    return sorted((summary(r, (platforms or {}).get(int(r.get("campaign") or 0))) for r in records),
                  key=lambda s: s["campaign"])


def run_platforms(store: ResultStore) -> dict[int, dict[str, list[dict[str, str]]]]:
    """campaign -> host -> the distinct platforms the study's run records name."""
    return record_platforms(store.records())


@dataclass(frozen=True)
class Independence:
    """The label (see the module doc) and the facts behind it, in words."""

    label: str
    details: tuple[str, ...]
    campaigns: int

    def sentence(self) -> str:
        return f"{self.label} ({'; '.join(self.details)})" if self.details else self.label


def _pairs_share(sets: Sequence[set[str]]) -> tuple[bool, bool]:
    """(some pair of campaigns shares an element, every pair does)."""
    pairs = [(a, b) for i, a in enumerate(sets) for b in sets[i + 1:]]
    shared = [bool(a & b) for a, b in pairs]
    return any(shared), bool(pairs) and all(shared)


def independence(camps: Sequence[Mapping[str, Any]]) -> Independence:
    """What the campaign level of `camps` (:func:`summary` of each campaign) captured."""
    if len(camps) < 2:
        return Independence(ONE, (), len(camps))
    boots = [set(c["boot_ids"]) for c in camps]
    snaps = [{d["snapshot"] for d in c["datasets"]} for c in camps]
    any_boot, all_boot = _pairs_share(boots)
    any_snap, all_snap = _pairs_share(snaps)
    fresh = all(d["fresh"] for c in camps for d in c["datasets"])
    unknown_boot = any(not b for b in boots)
    boot_word = ("boots unknown" if unknown_boot else "same boot" if all_boot
                 else "partly shared boots" if any_boot else "independent boots")
    data_word = ("reused snapshots" if all_snap else "partly reused snapshots" if any_snap
                 else "fresh datasets" if fresh else "datasets reused from before the campaigns")
    if boot_word == "independent boots" and data_word == "fresh datasets":
        label = INDEPENDENT
    elif boot_word == "same boot" and data_word == "reused snapshots":
        label = WITHIN_SESSION
    else:
        label = f"{boot_word}, {data_word}"
    changes = platform_changes({int(c["campaign"]): c["platforms"] for c in camps if c.get("platforms")})
    moved = [w for w in ("hardware", "software") if any(x.startswith(w) for x in changes)]
    if moved:  # the campaign level also holds a change of machine: say so wherever the label is printed
        # in parentheses: a "; " would read as another label where labels are joined
        label = f"{label} ({' and '.join(moved)} {'differ' if len(moved) > 1 else 'differs'} between campaigns)"
    details = []
    n_boots = len(set().union(*boots))
    details.append(f"{len(camps)} campaigns on {n_boots} boot{'s' if n_boots != 1 else ''}")
    kernels = sorted(set().union(*(set(c["kernels"]) for c in camps)))
    if kernels:
        details.append("kernel " + ", ".join(kernels))
    commits = sorted(set().union(*(set(c["commits"]) for c in camps)))
    if commits:
        details.append(f"{len(commits)} commit{'s' if len(commits) != 1 else ''}"
                       + (" (uncommitted changes)" if any(c["dirty"] for c in camps) else ""))
    n_snap = len(set().union(*snaps))
    details.append(f"{n_snap} dataset snapshot{'s' if n_snap != 1 else ''}")
    details += changes
    return Independence(label, tuple(details), len(camps))


# ---------------------------------------------------------------------------- files

def write_campaign_summaries(store: ResultStore) -> None:
    """``processed/campaigns.json`` from the study's campaign records (empty list without any)."""
    text = json.dumps(summaries(store.campaigns(), run_platforms(store)), indent=1, sort_keys=True) + "\n"
    write_text_atomic(store.processed / CAMPAIGNS_FILE, text)


def load_campaign_summaries(store: ResultStore) -> list[dict[str, Any]]:
    p = store.processed / CAMPAIGNS_FILE
    return json.loads(p.read_text()) if p.is_file() else []
