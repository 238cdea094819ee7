"""Each study's record of its hosts (``processed/host-facts.json``): the facts files under ``hosts/`` and the
host facts, class and media states its runs' records hold, so that the paper's setup table and
macros read processed outputs only. :func:`merge_host_facts` combines the records of several studies."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from dbmatrix.store import ResultStore, write_text_atomic

HOST_FACTS = "host-facts.json"


def host_record(store: ResultStore) -> dict[str, Any]:
    """``files``: [file name, its JSON] of ``hosts/*.json`` in name order; ``runs``: per manifest (in run
    order) its run id, host, host class, and its host facts and media states as keys of ``facts`` and
    ``media`` (the same facts recorded by every run are stored once)."""
    files = [[f.name, json.loads(f.read_text())] for f in sorted(store.hosts.glob("*.json"))] \
        if store.hosts.is_dir() else []
    facts: dict[str, Any] = {}
    media: dict[str, Any] = {}
    runs = []
    for m in store.records():
        runs.append({"run_id": m.run_id, "host": m.host, "host_class": m.host_class,
                     "host_facts": _key(facts, m.host_facts) if m.host_facts else None,
                     "media_state": _key(media, m.media_state) if m.media_state else None})
    return {"files": files, "facts": facts, "media": media, "runs": runs}


def _key(table: dict[str, Any], value: Any) -> str:
    """`value`'s key in `table` (a digest of its JSON), added when new."""
    key = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
    table.setdefault(key, value)
    return key


def _runs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's runs with their host facts and media states resolved."""
    facts, media = record.get("facts", {}), record.get("media", {})
    return [{**m, "host_facts": facts.get(m["host_facts"]) if m.get("host_facts") is not None else None,
             "media_state": media.get(m["media_state"]) if m.get("media_state") is not None else None}
            for m in record["runs"]]


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
    for m in _runs(record):
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
        for m in _runs(rec):
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
