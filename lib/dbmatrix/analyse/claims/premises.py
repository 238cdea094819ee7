"""Checking a claim's premises on the evidence it is judged on."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.claims.model import Claim, Evidence, Premise, PremiseCheck
from dbmatrix.analyse.contrasts import NotTestable, dataset_ratio
from dbmatrix.analyse.replication import pressured_setting, setting_runs

# ============================================================================ premise checks

MiB = 1024 * 1024


def _pct(x: float) -> str:
    return f"{x:.1f} %" if x < 10 else f"{x:.0f} %"


def _num_col(df: pd.DataFrame, name: str) -> pd.Series:
    return pd.to_numeric(df[name], errors="coerce") if name in df.columns else pd.Series(np.nan, index=df.index)


def _level(ev: Evidence, factor: str, spec: Any) -> Any:
    from dbmatrix.analyse.contrasts import resolve_level

    return resolve_level(ev.runs, factor, spec)


def _at_runs(claim: Claim, ev: Evidence, **extra: Any) -> pd.DataFrame:
    """The runs at the claim's conditions (and the extra factor levels given)."""
    from dbmatrix.analyse.contrasts import resolve_level
    from dbmatrix.analyse.stats import level_key

    runs = ev.runs
    for f, v in {**claim.at, **extra}.items():
        if f not in runs.columns:
            continue
        lv = resolve_level(runs, f, v)
        runs = runs[runs[f].map(level_key) == level_key(lv)]
    return runs


def check_premise(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    """One premise of `claim` on the evidence it is judged on (never raises)."""
    try:
        return _check(p, claim, ev)
    except NotTestable as exc:
        return PremiseCheck(None, f"not checked: {exc}")


def _check(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
    if p.kind == "fc_paused":
        runs = ev.extra.get("replication-runs")
        if runs is None or runs.empty or "fc_paused_pct" not in runs.columns:
            raise NotTestable("the replication study's runs table is missing")
        setting = pressured(ev)
        runs = setting_runs(runs, setting)
        level = pd.to_numeric(runs["slave_threads"], errors="coerce")
        low = runs[level == level.min()]
        paused = float(_num_col(low, "fc_paused_pct").mean())
        where = "" if setting == "all" else f" ({setting.replace('_', ' ')})"
        return PremiseCheck(paused >= p.threshold,
                            f"flow control paused {_pct(paused)} of the time with {int(level.min())} "
                            f"applier{'s' if level.min() != 1 else ''}{where} (needs {p.threshold:g} %)")
    if p.kind == "compresses":
        engine = claim.at.get("engine")
        est = dataset_ratio(ev.runs, "compression", "lz4", "none", {"engine": engine} if engine else {})
        factor = 1 / est.estimate if est.estimate > 0 else math.inf
        return PremiseCheck(factor >= p.threshold,
                            f"lz4 shrinks the data {factor:.2f}x (needs {p.threshold:g}x)")
    if p.kind == "saturated":
        if claim.factor != "threads":
            raise NotTestable("the saturation premise needs a thread comparison")
        lv = [_level(ev, "threads", s) for s in (claim.a, claim.b)]
        lower = min(lv, key=float)
        runs = _at_runs(claim, ev, threads=lower)
        cpus = runs["host"].map(lambda h: ev.host_cpus.get(str(h), math.nan)) if "host" in runs else None
        if cpus is None or runs.empty or cpus.isna().all():
            raise NotTestable("the host's CPU count or the runs' CPU time is missing")
        busy = (_num_col(runs, "host_cpu_busy_s") / _num_col(runs, "window_s") / cpus.astype(float)).mean()
        if not np.isfinite(busy):
            raise NotTestable("no CPU time over the window in the runs")
        return PremiseCheck(bool(busy >= p.threshold),
                            f"CPUs {busy * 100:.0f} % busy at {lower} threads (needs {p.threshold * 100:.0f} %)")
    if p.kind == "cache_below_data":
        specs = (claim.a, claim.b) if claim.factor == "cache_pct" else (claim.at.get("cache_pct", "min"),)
        level = min((_level(ev, "cache_pct", s) for s in specs), key=float)  # the claim's low cache level
        runs = _at_runs(claim, ev, cache_pct=level)
        share = (_num_col(runs, "cache_bytes_effective") / _num_col(runs, "data_logical_bytes")).mean()
        if not np.isfinite(share):
            raise NotTestable("cache bytes or the logical data size are missing from the runs")
        logical = float(_num_col(runs, "data_logical_bytes").median()) / MiB
        return PremiseCheck(bool(share < p.threshold),
                            f"cache {level} % = {share * 100:.0f} % of the {logical:.0f} MiB of logical data "
                            "(needs under 100 %)")
    raise ValueError(f"premise kind {p.kind!r}; allowed: fc_paused, compresses, saturated, cache_below_data")



def pressured(ev: Evidence) -> str:
    """The Galera setting the seed's claims are judged at: where flow control paused most with one applier
    (:func:`dbmatrix.analyse.replication.pressured_setting`)."""
    runs = ev.extra.get("replication-runs")
    return pressured_setting(runs) if runs is not None else "all"


