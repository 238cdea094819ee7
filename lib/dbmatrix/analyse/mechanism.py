"""What moved behind a verdict: the engine's and the host's own counters of the cells a claim compares (pure).

A verdict says whether a contrast agrees with a seed; the counters say why it came out as it did: the block
cache's hit ratio and its index-block misses, the bytes read and written per transaction, CPU per
transaction, the host's CPU use and iowait, binlog group sizes. For every claim judged on a study and for each
condition it was judged at, :func:`mechanism_rows` gives each counter's mean on the two compared sides (the
runs at the claim's conditions, every campaign) and their ratio a / b. The sides are the claim's two levels;
for a claim on a dataset's size, the sizes per pair of datasets it was judged on; for the saturation claim,
the two thread counts its estimate compares; for the share of runs that settle, the two halves of the
drifting runs' windows. Means over runs, no interval: the counters explain, the claim's interval decides.
Written as ``claims-mechanism.csv`` (:mod:`dbmatrix.analyse.judgement`); ``dbmatrix verdicts`` prints the
counters that moved most, and the paper's claims in detail end each decided claim with them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.contrasts import NotTestable, runs_at
from dbmatrix.analyse.judgement import MECHANISM_COLUMNS
from dbmatrix.spec.factors import DATASET_FACTORS, factor_unit, factor_word

COLUMNS = MECHANISM_COLUMNS  # the judgement file's (claims-mechanism.csv)
# counter -> its words; per-transaction counters are derived from window totals by mechanism_frame
COUNTERS: dict[str, str] = {
    "cache_hit_ratio": "cache hit ratio",
    "index_misses_per_txn": "index-block cache misses per transaction",
    "index_insert_kb_per_txn": "index KiB the block cache took in per transaction",
    "read_kb_per_txn": "KiB read from the device per transaction",
    "write_kb_per_txn": "KiB written to the device per transaction",
    "host_cpu_us_per_txn": "host CPU µs per transaction",
    "host_cpu_busy_pct": "host CPUs busy, % of all",
    "mysqld_cpu_us_per_txn": "mysqld CPU µs per transaction",
    "host_iowait_pct": "host iowait, % of CPU time",
    "binlog_group_size": "transactions per binlog group commit",
    "compaction_kb_per_txn": "compaction KiB written per transaction",
}


# a dataset-size claim's own measurements (mechanism_frame derives them from the runs' dataset sizes)
SIZE_COUNTERS: dict[str, str] = {"data_physical_mib": "on-disk size (du), MiB"}


# Below these on both sides a counter is noise, not a mechanism (moved() leaves it out; the file keeps it).
FLOORS = {"host_iowait_pct": 0.5, "read_kb_per_txn": 1.0, "write_kb_per_txn": 1.0, "index_misses_per_txn": 0.01,
          "index_insert_kb_per_txn": 1.0, "compaction_kb_per_txn": 1.0,
          "half_iowait_pct": 0.5, "half_read_kb_per_txn": 1.0, "half_write_kb_per_txn": 1.0}


def number_words(x: float) -> str:
    """A counter's mean in words: 12,345 / 123 / 1.23 / 0.0123."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ratio(a: float, b: float) -> float:
    """a / b, inf when only b is 0, NaN when both are."""
    return a / b if b else (math.inf if a else math.nan)


def mechanism_frame(runs: pd.DataFrame, host_cpus: Mapping[str, int] | None = None) -> pd.DataFrame:
    """The runs with the per-transaction counters of :data:`COUNTERS` derived from their window totals, and
    their hosts' CPU use (busy CPU time over the window and the host's CPUs, `host_cpus`: host -> CPUs)."""
    out = runs.copy()

    def col(name: str) -> pd.Series:
        return (pd.to_numeric(out[name], errors="coerce") if name in out.columns
                else pd.Series(np.nan, index=out.index, dtype=float))

    cpus = (out["host"].map(lambda h: (host_cpus or {}).get(str(h), np.nan)).astype(float)
            if "host" in out.columns else pd.Series(np.nan, index=out.index, dtype=float))
    out["host_cpu_busy_pct"] = 100 * col("host_cpu_busy_s") / col("window_s").where(lambda s: s > 0) / cpus
    out["data_physical_mib"] = col("data_physical_bytes") / 2**20
    txn = (col("tps") * col("window_s")).where(lambda s: s > 0)
    out["index_misses_per_txn"] = col("cache_index_misses") / txn
    out["index_insert_kb_per_txn"] = col("cache_index_insert_bytes") / 1024 / txn
    out["compaction_kb_per_txn"] = col("engine_compaction_bytes") / 1024 / txn
    return out


def _side(runs: pd.DataFrame, factor: str, spec: Any) -> pd.DataFrame:
    """The runs at one compared level (a spec such as "max" or "native" resolved on the runs)."""
    return runs_at(runs, {factor: spec})


def _words(v: Any) -> str:
    """A level as the tables print it: 100.0 -> "100", "4k" -> "4k"."""
    return f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)


def _level_of(side: pd.DataFrame, factor: str, spec: Any) -> str:
    """The level a compared side's runs have (a spec such as "max" resolved: "100"), else the spec."""
    levels = side[factor].dropna().unique()
    return _words(levels[0]) if len(levels) == 1 else str(spec)


def condition_rows(claim: Claim, study: str, runs: pd.DataFrame, condition: str = "",
                   counters: Mapping[str, str] = COUNTERS) -> list[dict[str, Any]]:
    """One row per counter (of `counters`) measured on both sides of one condition of `claim` (runs already
    derived)."""
    if claim.factor is None or claim.factor not in runs.columns:
        return []
    try:
        here = runs_at(runs, claim.at)
        a, b = _side(here, claim.factor, claim.a), _side(here, claim.factor, claim.b)
    except NotTestable:  # a level the runs do not have: nothing to show
        return []
    if a.empty or b.empty:
        return []
    rows = []
    for counter, label in counters.items():
        if counter not in here.columns:
            continue
        va = pd.to_numeric(a[counter], errors="coerce").dropna()
        vb = pd.to_numeric(b[counter], errors="coerce").dropna()
        if va.empty or vb.empty:
            continue
        ma, mb = float(va.mean()), float(vb.mean())
        rows.append({"id": claim.id, "study": study, "condition": condition, "counter": counter, "label": label,
                     "a": _level_of(a, claim.factor, claim.a), "b": _level_of(b, claim.factor, claim.b),
                     "value_a": ma, "value_b": mb,
                     "ratio": _ratio(ma, mb), "runs_a": int(va.size), "runs_b": int(vb.size)})
    return rows


def size_rows(claim: Claim, study: str, runs: pd.DataFrame,
              level_order: Mapping[str, Sequence[Any]] | None = None) -> list[dict[str, Any]]:
    """A dataset-size claim is judged per pair of datasets that differ only in its factor
    (:func:`~dbmatrix.analyse.contrasts.dataset_ratio`): per pair (one condition per level of the other
    dataset factors that vary, in the spec's order of levels, `level_order`), the sizes on both sides, never
    the runs' counters pooled over the pairs."""
    try:
        here = runs_at(runs, claim.at)
    except NotTestable:
        return []
    others = [f for f in DATASET_FACTORS if f != claim.factor and f in here.columns and here[f].nunique() > 1]
    plain = replace(claim, at={})
    if not others:
        return condition_rows(plain, study, here, "", SIZE_COUNTERS)
    order = {f: list((level_order or {}).get(f, ())) for f in others}

    def rank(levels: tuple[Any, ...]) -> tuple[int, ...]:  # the spec's order; levels it does not list last
        return tuple(order[f].index(v) if v in order[f] else len(order[f]) for f, v in zip(others, levels))

    groups = [(key if isinstance(key, tuple) else (key,), g) for key, g in here.groupby(others, sort=True)]
    rows: list[dict[str, Any]] = []
    for key, g in sorted(groups, key=lambda kg: rank(kg[0])):
        levels = dict(zip(others, key))
        where = ", ".join(f"{factor_word(f)} {_words(v)}{factor_unit(f)}" for f, v in levels.items())
        rows += condition_rows(plain, study, g, where, SIZE_COUNTERS)
    return rows


def saturation_sides(claim: Claim, ev: Evidence, instances: int = 1) -> Claim | None:
    """The saturation claim as the two thread levels its estimate compares (the largest against the
    saturation point, at one instance, read from the study's cells as the estimate reads them), or None
    where the study has no saturation point."""
    from dbmatrix.analyse.scaleout import saturation_point

    try:
        sat, _ = saturation_point(ev.extra.get("scaleout-cells"), instances)
    except NotTestable:
        return None
    return replace(claim, factor="threads", a=int(sat["largest_threads"]), b=int(sat["saturation_threads"]),
                   at={"instances": instances})


# the window halves' figures (dbmatrix.analyse.window_halves) -> their words in the mechanism table, where
# each is the counter HALF + figure ("half_tps")
HALF = "half_"
HALF_COUNTERS: dict[str, str] = {
    "tps": "throughput, transactions/s",
    "busy_pct": "host CPUs busy, % of all",
    "iowait_pct": "host iowait, % of CPU time",
    "runnable": "runnable processes",
    "read_kb_per_txn": "KiB read per transaction, all devices",
    "write_kb_per_txn": "KiB written per transaction, all devices",
}


def drift_rows(claim: Claim, study: str, runs: pd.DataFrame) -> list[dict[str, Any]]:
    """The share claim on stable runs: in the runs the steady-state test found drifting (of `runs`, the ones
    its estimate counted), what changed from the first half of the window to the second, one condition for
    the runs that slowed and one for those that sped up (their changes would cancel in one mean)."""
    if "steady_reason" not in runs.columns or "drift_pct" not in runs.columns:
        return []
    drifting = runs[runs["steady_reason"].astype(str) == "drift"]
    drift = pd.to_numeric(drifting["drift_pct"], errors="coerce")
    rows: list[dict[str, Any]] = []
    for words, part in (("slowed", drifting[drift < 0]), ("sped up", drifting[drift > 0])):
        condition = f"{len(part)} of {len(drifting)} drifting runs {words}"
        for x, label in HALF_COUNTERS.items():
            a, b = f"second_half_{x}", f"first_half_{x}"
            if part.empty or a not in part.columns:
                continue
            both = part[[a, b]].apply(pd.to_numeric, errors="coerce").dropna()
            if both.empty:
                continue
            ma, mb = float(both[a].mean()), float(both[b].mean())
            rows.append({"id": claim.id, "study": study, "condition": condition, "counter": HALF + x,
                         "label": label, "a": "second half", "b": "first half", "value_a": ma, "value_b": mb,
                         "ratio": _ratio(ma, mb), "runs_a": len(both), "runs_b": len(both)})
    return rows


def _share_runs(study: str, evidence: Sequence[Evidence]) -> pd.DataFrame:
    """The runs a share claim judged on `study` (its studies joined by "+") counted: the pooled runs of
    those studies, on the hosts the claims use, unsaturated (:func:`~dbmatrix.analyse.claims.estimators.
    unsaturated`, as the estimate keeps them)."""
    from dbmatrix.analyse.claims.estimators import unsaturated
    from dbmatrix.analyse.claims.table import share_pool

    pool = [e for name in study.split("+") for e in evidence if e.experiment == name]
    if not pool:
        return pd.DataFrame()
    ev, _ = share_pool(pool).for_claims()
    try:
        return unsaturated(ev)[0]
    except NotTestable:
        return pd.DataFrame()


def mechanism_rows(claims: Sequence[Claim], judged: pd.DataFrame, evidence: Sequence[Evidence]) -> pd.DataFrame:
    """Per judged claim (``judged``: the claims table, its ``study`` and ``verdict``) and per condition, the
    counters of its compared sides; for the saturation claim the two thread levels its estimate compares, for
    the share of stable runs the halves of the drifting runs' windows (:func:`drift_rows`). Claims not tested
    and claims with nothing to compare are left out."""
    from dbmatrix.analyse.claims.table import level_claims

    by_study = {e.experiment: e for e in evidence}
    rows: list[dict[str, Any]] = []
    for c in claims:
        hit = judged[judged["id"] == c.id]
        if hit.empty or str(hit["verdict"].iloc[0]) in ("not tested", ""):
            continue
        study = str(hit["study"].iloc[0])
        if c.kind == "share":
            if c.metric == "steady":
                rows += drift_rows(c, study, _share_runs(study, evidence))
            continue
        ev = by_study.get(study)
        if ev is None:
            continue
        if c.metric == "data_physical_bytes":
            rows += size_rows(c, study, mechanism_frame(ev.runs, ev.host_cpus), ev.level_order)
            continue
        if c.factor is None and c.metric == "scale_saturation":
            sides = saturation_sides(c, ev)
            if sides is not None:
                rows += condition_rows(sides, study, mechanism_frame(ev.runs, ev.host_cpus))
            continue
        if c.factor is None:
            continue
        runs = mechanism_frame(ev.runs, ev.host_cpus)
        if any(f in runs.columns and runs[f].nunique() > 1 for f in c.per):
            try:
                subs = level_claims(c, Evidence(ev.experiment, ev.kind, runs, ev.level_order))
            except NotTestable:
                continue
            for where, sub in subs:
                rows += condition_rows(sub, study, runs, where)
        else:
            rows += condition_rows(c, study, runs)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def moved_parts(rows: pd.DataFrame, claim_id: str, top: int = 3) -> list[tuple[str, list[dict[str, Any]]]]:
    """The counters of a claim that moved most (largest |log ratio|, each above its floor on one side at
    least), per condition in the table's order: (condition, rows of ``label``, ``value_a``, ``value_b``,
    ``ratio``); conditions where nothing moved by 5 % or more are left out."""
    mine = rows[rows["id"] == claim_id]
    out = []
    for cond, g in mine.groupby("condition", sort=False):
        r = pd.to_numeric(g["ratio"], errors="coerce")
        big = np.maximum(g["value_a"].astype(float).abs(), g["value_b"].astype(float).abs())
        floor = g["counter"].map(FLOORS).fillna(0.0)
        score = np.log(r.where(r > 0)).abs().fillna(0).where(big >= floor, 0.0)
        best = g.assign(_s=score.to_numpy()).sort_values("_s", ascending=False, kind="stable").head(top)
        parts = [{k: x[k] for k in ("label", "value_a", "value_b", "ratio")} for _, x in best.iterrows()
                 if x["_s"] > 0.05]
        if parts:
            out.append((str(cond), parts))
    return out


def moved(rows: pd.DataFrame, claim_id: str, top: int = 3) -> list[str]:
    """:func:`moved_parts` as words: 'KiB read from the device per transaction 13 vs 1.1 (x12)'; per condition
    when it has several."""
    out = []
    for cond, parts in moved_parts(rows, claim_id, top):
        words = [f"{x['label']} {number_words(x['value_a'])} vs {number_words(x['value_b'])}"
                 + (f" (x{x['ratio']:.3g})" if math.isfinite(float(x["ratio"])) else "") for x in parts]
        out.append((f"{cond}: " if cond else "") + "; ".join(words))
    return out
