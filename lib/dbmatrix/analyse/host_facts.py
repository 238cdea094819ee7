"""Each study's record of its hosts (``processed/host-facts.json``): the facts files under ``hosts/`` and the
host facts, class and media states its runs' manifests recorded, so that the paper's setup table and
macros read processed outputs only. :func:`merge_host_facts` combines the records of several studies."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dbmatrix.store import ResultStore, write_text_atomic

HOST_FACTS = "host-facts.json"


def host_record(store: ResultStore) -> dict[str, Any]:
    """``files``: [file name, its JSON] of ``hosts/*.json`` in name order; ``runs``: per manifest (in run
    order) its run id, host, host facts, host class and media states."""
    files = [[f.name, json.loads(f.read_text())] for f in sorted(store.hosts.glob("*.json"))] \
        if store.hosts.is_dir() else []
    runs = [{"run_id": m.get("run_id"), "host": m.get("host"), "host_facts": m.get("host_facts"),
             "host_class": m.get("host_class"), "media_state": m.get("media_state")}
            for m in store.iter_manifests()]
    return {"files": files, "runs": runs}


def write_host_record(store: ResultStore) -> None:
    write_text_atomic(store.processed / HOST_FACTS, json.dumps(host_record(store), indent=1) + "\n")


def load_host_record(store: ResultStore) -> dict[str, Any]:
    """The study's host record; empty for processed tables of an analysis older than the record (their
    paper then says the host facts are unknown: re-run `dbmatrix analyse`)."""
    p = store.processed / HOST_FACTS
    return json.loads(p.read_text()) if p.is_file() else {"files": [], "runs": []}


def first_facts(record: dict[str, Any]) -> dict[str, Any]:
    """The facts of the first host facts file (name order), {} without one."""
    facts = [data for name, data in record["files"] if not name.endswith(".media.json")]
    return facts[0] if facts else {}


def run_facts(record: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The host facts the manifest of `run_id` recorded, else those of the first ``hosts/*.json``."""
    for m in record["runs"]:
        if m.get("run_id") == run_id:
            if m.get("host_facts"):
                return m["host_facts"]
            break
    for _, data in record["files"]:
        return data
    return {}


def merge_host_facts(records: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each host's facts and media states, one entry per inventory host name, in name order.

    Facts: ``hosts/<host>.json`` of the first study that recorded it, else the facts in its runs'
    manifests. Media: the verified states recorded in the manifests of the runs that host measured
    (every study, every medium it used), else ``hosts/<host>.media.json``. The inventory class, where
    declared, from the manifests."""
    facts: dict[str, dict[str, Any]] = {}
    media: dict[str, dict[str, Any]] = {}
    for rec in records:
        by_name = dict(rec["files"])
        for fname, data in rec["files"]:
            if fname.endswith(".media.json"):
                continue
            stem = fname.removesuffix(".json")
            name = str(data.get("host") or stem)
            facts.setdefault(name, data)
            media_file = f"{stem}.media.json"
            if media_file in by_name:
                media.setdefault(name, {}).setdefault("_file", by_name[media_file])
        for m in rec["runs"]:
            name = str(m.get("host") or "")
            if not name:
                continue
            if isinstance(m.get("host_facts"), dict):
                facts.setdefault(name, {"host": name, **m["host_facts"]})
            if m.get("host_class") and name in facts:
                facts[name].setdefault("host_class", m["host_class"])
            for medium, state in sorted((m.get("media_state") or {}).items()):
                media.setdefault(name, {}).setdefault("_runs", {}).setdefault(medium, state)
    out = []
    for name in sorted(facts):
        recorded = media.get(name, {})
        out.append(({**facts[name], "host": name}, recorded.get("_runs") or recorded.get("_file") or {}))
    return out
