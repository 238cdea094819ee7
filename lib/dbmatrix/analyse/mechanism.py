"""What moved behind a verdict: the engine's and the host's own counters of the cells a claim compares (pure).

A verdict says whether a contrast agrees with a seed; the counters say why it came out as it did: the block
cache's hit ratio and its index-block misses, the bytes read and written per transaction, CPU per
transaction, the host's iowait, binlog group sizes. For every claim judged on a study (not a share, and with a
compared factor) and for each condition it was judged at, :func:`mechanism_rows` gives each counter's mean on
the two compared sides (the runs at the claim's conditions, every campaign) and their ratio a / b. Means over
runs, no interval: the counters explain, the claim's interval decides. Written as ``claims-mechanism.csv``
(:mod:`dbmatrix.analyse.judgement`); ``dbmatrix verdicts`` prints the counters that moved most."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.contrasts import NotTestable, runs_at
from dbmatrix.analyse.judgement import MECHANISM_COLUMNS

COLUMNS = MECHANISM_COLUMNS  # the judgement file's (claims-mechanism.csv)
# counter -> its words; per-transaction counters are derived from window totals by mechanism_frame
COUNTERS: dict[str, str] = {
    "cache_hit_ratio": "cache hit ratio",
    "index_misses_per_txn": "index-block cache misses per transaction",
    "index_insert_kb_per_txn": "index KiB the block cache took in per transaction",
    "read_kb_per_txn": "KiB read from the device per transaction",
    "write_kb_per_txn": "KiB written to the device per transaction",
    "host_cpu_us_per_txn": "host CPU µs per transaction",
    "mysqld_cpu_us_per_txn": "mysqld CPU µs per transaction",
    "host_iowait_pct": "host iowait, % of CPU time",
    "binlog_group_size": "transactions per binlog group commit",
    "compaction_kb_per_txn": "compaction KiB written per transaction",
}


# Below these on both sides a counter is noise, not a mechanism (moved() leaves it out; the file keeps it).
FLOORS = {"host_iowait_pct": 0.5, "read_kb_per_txn": 1.0, "write_kb_per_txn": 1.0, "index_misses_per_txn": 0.01,
          "index_insert_kb_per_txn": 1.0, "compaction_kb_per_txn": 1.0}


def _num(x: float) -> str:
    """A counter's mean in words: 12,345 / 123 / 1.23 / 0.0123."""
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def mechanism_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with the per-transaction counters of :data:`COUNTERS` derived from their window totals."""
    out = runs.copy()

    def col(name: str) -> pd.Series:
        return (pd.to_numeric(out[name], errors="coerce") if name in out.columns
                else pd.Series(np.nan, index=out.index, dtype=float))

    txn = (col("tps") * col("window_s")).where(lambda s: s > 0)
    out["index_misses_per_txn"] = col("cache_index_misses") / txn
    out["index_insert_kb_per_txn"] = col("cache_index_insert_bytes") / 1024 / txn
    out["compaction_kb_per_txn"] = col("engine_compaction_bytes") / 1024 / txn
    return out


def _side(runs: pd.DataFrame, factor: str, spec: Any) -> pd.DataFrame:
    """The runs at one compared level (a spec such as "max" or "native" resolved on the runs)."""
    return runs_at(runs, {factor: spec})


def condition_rows(claim: Claim, study: str, runs: pd.DataFrame, condition: str = "") -> list[dict[str, Any]]:
    """One row per counter measured on both sides of one condition of `claim` (runs already derived)."""
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
    for counter, label in COUNTERS.items():
        if counter not in here.columns:
            continue
        va = pd.to_numeric(a[counter], errors="coerce").dropna()
        vb = pd.to_numeric(b[counter], errors="coerce").dropna()
        if va.empty or vb.empty:
            continue
        ma, mb = float(va.mean()), float(vb.mean())
        rows.append({"id": claim.id, "study": study, "condition": condition, "counter": counter, "label": label,
                     "a": str(claim.a), "b": str(claim.b), "value_a": ma, "value_b": mb,
                     "ratio": ma / mb if mb else (math.inf if ma else math.nan),
                     "runs_a": int(va.size), "runs_b": int(vb.size)})
    return rows


def mechanism_rows(claims: Sequence[Claim], judged: pd.DataFrame, evidence: Sequence[Evidence]) -> pd.DataFrame:
    """Per judged claim (``judged``: the claims table, its ``study`` and ``verdict``) and per condition, the
    counters of its compared sides; claims not tested, shares and claims without a factor are left out."""
    from dbmatrix.analyse.claims.table import level_claims

    by_study = {e.experiment: e for e in evidence}
    rows: list[dict[str, Any]] = []
    for c in claims:
        hit = judged[judged["id"] == c.id]
        if hit.empty or c.kind == "share" or c.factor is None:
            continue
        study = str(hit["study"].iloc[0])
        ev = by_study.get(study)
        if ev is None or str(hit["verdict"].iloc[0]) in ("not tested", ""):
            continue
        runs = mechanism_frame(ev.runs)
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


def moved(rows: pd.DataFrame, claim_id: str, top: int = 3) -> list[str]:
    """The counters of a claim that moved most (largest |log ratio|), as words: 'KiB read from the device per
    transaction 13 vs 1.1 (x12)'; per condition when it has several."""
    mine = rows[rows["id"] == claim_id]
    out = []
    for cond, g in mine.groupby("condition", sort=False):
        r = pd.to_numeric(g["ratio"], errors="coerce")
        big = np.maximum(g["value_a"].astype(float).abs(), g["value_b"].astype(float).abs())
        floor = g["counter"].map(FLOORS).fillna(0.0)
        score = np.log(r.where(r > 0)).abs().fillna(0).where(big >= floor, 0.0)
        best = g.assign(_s=score.to_numpy()).sort_values("_s", ascending=False, kind="stable").head(top)
        parts = [f"{x['label']} {_num(x['value_a'])} vs {_num(x['value_b'])}"
                 + (f" (x{x['ratio']:.3g})" if math.isfinite(float(x["ratio"])) else "")
                 for _, x in best.iterrows() if x["_s"] > 0.05]
        if parts:
            out.append((f"{cond}: " if cond else "") + "; ".join(parts))
    return out
