"""What the paper's method sentences need from the run and campaign records that the processed tables do
not (yet) carry: how each run warmed up (the manifest's ``window_mode``) and the campaign records. Read
through :class:`dbmatrix.store.ResultStore` only (``iter_manifests``, ``campaigns``), in this one place.

TODO(merge): once the runs table carries ``window_mode`` (one column in ``ResultStore.load_runs``),
:func:`window_modes` reads it from the processed runs and no manifest is read at publication time."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from dbmatrix.store import ResultStore


def window_modes(store: ResultStore, runs: pd.DataFrame | None = None) -> tuple[Counter[str], list[str]]:
    """How a study's completed runs warmed up (``one_process``, ``two_process``, ``measure_only``;
    ``unrecorded`` for manifests without it) and the reasons recorded for a two-process window. From the
    processed runs' ``window_mode`` column when it exists, else from the manifests."""
    if runs is not None and "window_mode" in runs.columns:
        return Counter(runs["window_mode"].fillna("unrecorded").astype(str)), []
    modes: Counter[str] = Counter()
    reasons: list[str] = []
    for m in store.iter_manifests():
        if m.get("status") != "ok":
            continue
        modes[str(m.get("window_mode") or "unrecorded")] += 1
        why = m.get("window_mode_reason")
        if why and why not in reasons:
            reasons.append(str(why))
    return modes, reasons


def campaign_records(store: ResultStore) -> list[dict[str, Any]]:
    """The study's campaign records (campaigns/<k>.json), in campaign order."""
    return store.campaigns()
