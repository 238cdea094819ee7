"""The scale-out study (seed 000): throughput and p95 per instance count and client threads, saturation,
the clients kept under a p95 threshold, per-instance shares and CPU, per-second stability. Pure: tables in,
tables out.

Rules (stated once, used by the figures and the claims):

- **QPS per cell**: mean over repetitions of sysbench's queries per second, with a Student-t 95 % CI
  (repetitions are independent restarts; per-second samples are not replicates).
- **p95 per cell**: from the latency histograms of the cell's repetitions merged by adding counts.
- **Per-instance QPS**: a run's QPS times the instance's share of the window's ``Questions`` deltas
  (SHOW GLOBAL STATUS before and after the window), then mean and CI over repetitions.
- **Saturation point** (per instance count): the thread count with the highest mean QPS is the peak;
  the saturation point is the *smallest* thread count whose QPS CI overlaps the peak's CI (more threads
  add no throughput the repetitions can tell apart). Its interval runs from that thread count to the
  largest thread count whose CI overlaps the peak's. Saturation is *reached* only when some tested thread
  count above the saturation point exists (the curve stopped rising inside the tested range); when the
  saturation point is the largest thread count tested, it is not reached.
- **Clients under the p95 threshold** (per instance count): the largest thread count such that the
  merged p95 of it and of every smaller thread count is at or under the threshold. The true crossing lies
  between that level and the next tested one: the interval [level, next level). A description of the
  grid; the claim reads the crossing ratio of :mod:`dbmatrix.analyse.scaleout_crossing` (per campaign,
  from log-log fits near the threshold, pooled over campaigns), whose table is ``scaleout-crossing``.
- **Stability at the best setting** (the cell with the highest mean QPS): per run, the mean per-second
  QPS of the second half of the window over that of the first half; mean and t CI over repetitions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from dbmatrix.analyse.contrasts import Estimate, NotTestable
from dbmatrix.analyse.scaleout_crossing import crossing_table
from dbmatrix.analyse.stats import merged_percentiles, t_mean_ci
from dbmatrix.record import RunRecord

P95_THRESHOLD_MS = 0.5  # the seed's threshold
KEYS = ["instances", "threads"]


def _ci(values: Sequence[float]) -> tuple[float, float]:
    v = [float(x) for x in values if x is not None and np.isfinite(x)]
    return t_mean_ci(v) if len(v) > 1 else (math.nan, math.nan)


# ------------------------------------------------------------------------------------ per-run rows

def instance_rows(manifests: Iterable[RunRecord]) -> pd.DataFrame:
    """One row per instance of every completed run: its host, share of the window's queries, status
    QPS and mysqld CPU."""
    rows = []
    for m in manifests:
        if not m.ok:
            continue
        window = m.instances_window
        for name, f in sorted((window.get("per_instance") or {}).items(), key=lambda kv: int(kv[0][1:])):
            info = m.instances.get(name, {})
            rows.append({"run_id": m.run_id, "cell_id": m.cell_id, "instance": name,
                         "instance_index": int(name[1:]), "host": info.get("host"), "cpus": info.get("cpus"),
                         "questions": f.get("questions"), "com_select": f.get("com_select"),
                         "share": f.get("share"), "qps_status": f.get("qps_status"), "cpu_s": f.get("cpu_s"),
                         "cpu_pct": f.get("cpu_pct"), "elapsed_s": window.get("elapsed_s")})
    cols = ["run_id", "cell_id", "instance", "instance_index", "host", "cpus", "questions", "com_select",
            "share", "qps_status", "cpu_s", "cpu_pct", "elapsed_s"]
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------------------------ cells

def cell_table(runs: pd.DataFrame, histograms: pd.DataFrame) -> pd.DataFrame:
    """Per (instances, threads): repetitions, mean QPS with its CI, QPS per instance, merged p95 (and the
    p95 of sysbench's own per-run reports, min-max, for reference)."""
    if runs.empty:
        return pd.DataFrame(columns=[*KEYS, "cell_id", "n", "qps", "ci_lo", "ci_hi", "qps_per_instance", "p95_ms"])
    p95 = pd.DataFrame(columns=["cell_id", "p95_ms", "p99_ms"])
    if not histograms.empty:
        h = histograms[histograms["run_id"].isin(set(runs["run_id"]))]
        if not h.empty:
            p95 = merged_percentiles(h, ["cell_id"], (95, 99))[["cell_id", "p95_ms", "p99_ms"]]
    rows = []
    for (inst, thr), g in runs.groupby(KEYS, sort=True):
        lo, hi = _ci(g["qps"])
        rows.append({"instances": int(inst), "threads": int(thr), "cell_id": g["cell_id"].iloc[0], "n": len(g),
                     "qps": float(g["qps"].mean()), "ci_lo": lo, "ci_hi": hi,
                     "qps_per_instance": float(g["qps"].mean()) / int(inst),
                     "run_p95_min_ms": float(g["lat_pct_ms"].min()), "run_p95_max_ms": float(g["lat_pct_ms"].max())})
    out = pd.DataFrame(rows).merge(p95, on="cell_id", how="left")
    return out.sort_values(KEYS).reset_index(drop=True)


def per_instance_table(runs: pd.DataFrame, inst: pd.DataFrame) -> pd.DataFrame:
    """Per (instances, threads, instance): QPS (run QPS x the instance's share) with its CI, and mysqld
    CPU (% of one CPU) with its CI, over repetitions."""
    cols = [*KEYS, "instance", "n", "qps", "ci_lo", "ci_hi", "share", "cpu_pct", "cpu_ci_lo", "cpu_ci_hi"]
    if runs.empty or inst.empty:
        return pd.DataFrame(columns=cols)
    df = inst.merge(runs[["run_id", *KEYS, "qps"]], on="run_id", how="inner")
    df["qps_instance"] = df["qps"] * df["share"].astype(float)
    rows = []
    for (i, t, name), g in df.groupby([*KEYS, "instance_index"], sort=True):
        lo, hi = _ci(g["qps_instance"])
        clo, chi = _ci(g["cpu_pct"].astype(float))
        rows.append({"instances": int(i), "threads": int(t), "instance": f"i{name}", "n": len(g),
                     "qps": float(g["qps_instance"].mean()), "ci_lo": lo, "ci_hi": hi,
                     "share": float(g["share"].mean()), "cpu_pct": float(g["cpu_pct"].astype(float).mean()),
                     "cpu_ci_lo": clo, "cpu_ci_hi": chi})
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------------------------ saturation

def saturation(cells: pd.DataFrame) -> pd.DataFrame:
    """Per instance count: peak thread count and QPS, the saturation point with its interval and whether
    it was reached (the rule of the module docstring). Without CIs (one repetition) a cell overlaps the
    peak only when its mean equals it."""
    rows = []
    for inst, g in cells.groupby("instances", sort=True):
        g = g.sort_values("threads")
        peak = g.loc[g["qps"].idxmax()]
        plo = peak["ci_lo"] if np.isfinite(peak["ci_lo"]) else peak["qps"]
        lo_ok = g["ci_hi"].where(np.isfinite(g["ci_hi"]), g["qps"]) >= plo
        phi = peak["ci_hi"] if np.isfinite(peak["ci_hi"]) else peak["qps"]
        hi_ok = g["ci_lo"].where(np.isfinite(g["ci_lo"]), g["qps"]) <= phi
        overlap = g[lo_ok & hi_ok]
        sat = int(overlap["threads"].min())
        largest = int(g["threads"].max())
        rows.append({"instances": int(inst), "peak_threads": int(peak["threads"]), "peak_qps": float(peak["qps"]),
                     "peak_ci_lo": float(peak["ci_lo"]), "peak_ci_hi": float(peak["ci_hi"]),
                     "saturation_threads": sat, "saturation_lo": sat, "saturation_hi": int(overlap["threads"].max()),
                     "reached": sat < largest, "largest_threads": largest,
                     "qps_at_largest": float(g["qps"].iloc[-1])})
    return pd.DataFrame(rows)


def p95_capacity(cells: pd.DataFrame, threshold_ms: float = P95_THRESHOLD_MS) -> pd.DataFrame:
    """Per instance count: the largest thread count keeping the merged p95 at or under `threshold_ms` (and
    every smaller thread count too), with the next tested level as the interval's open end (inf: every
    level passed; capacity 0: even the smallest failed)."""
    rows = []
    for inst, g in cells.groupby("instances", sort=True):
        g = g.sort_values("threads")
        cap, nxt = 0, None
        for t, p in zip(g["threads"], g["p95_ms"]):
            if pd.notna(p) and float(p) <= threshold_ms:
                cap = int(t)
                continue
            nxt = int(t)
            break
        rows.append({"instances": int(inst), "threshold_ms": threshold_ms, "max_threads_under": cap,
                     "next_threads": math.inf if nxt is None else nxt,
                     "smallest_threads": int(g["threads"].min()), "largest_threads": int(g["threads"].max())})
    return pd.DataFrame(rows)


def doubling(capacity: pd.DataFrame) -> pd.DataFrame:
    """For every instance count n whose double 2n was measured: clients under the threshold at 2n over
    those at n, with the interval from the levels bracketing each crossing."""
    by = capacity.set_index("instances")
    rows = []
    for n in by.index:
        if 2 * n not in by.index:
            continue
        a, b = by.loc[2 * n], by.loc[n]
        if b["max_threads_under"] <= 0 or a["max_threads_under"] <= 0:
            ratio, lo, hi = math.nan, math.nan, math.nan
        else:
            ratio = a["max_threads_under"] / b["max_threads_under"]
            lo = a["max_threads_under"] / b["next_threads"]
            hi = a["next_threads"] / b["max_threads_under"]
        rows.append({"instances_a": int(2 * n), "instances_b": int(n), "threads_a": a["max_threads_under"],
                     "threads_b": b["max_threads_under"], "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi,
                     "censored": bool(np.isinf(a["next_threads"]) or np.isinf(b["next_threads"]))})
    return pd.DataFrame(rows, columns=["instances_a", "instances_b", "threads_a", "threads_b", "ratio",
                                       "ratio_lo", "ratio_hi", "censored"])


# ------------------------------------------------------------------------------------ over time

def best_cell(cells: pd.DataFrame) -> pd.Series:
    if cells.empty:
        raise NotTestable("no completed scale-out runs")
    return cells.loc[cells["qps"].idxmax()]


def stability(intervals: pd.DataFrame, runs: pd.DataFrame, cell_id: str) -> pd.DataFrame:
    """Per run of `cell_id`: per-second QPS mean, CV, and the second half's mean over the first half's;
    per-second p95 (sysbench's per-interval percentile) median and max."""
    ids = set(runs.loc[runs["cell_id"] == cell_id, "run_id"])
    rows = []
    iv = intervals[intervals["run_id"].isin(ids)] if not intervals.empty else intervals
    for rid, g in (iv.groupby("run_id", sort=True) if not iv.empty else []):
        q = g.sort_values("t_s")["qps"].to_numpy(float)
        half = len(q) // 2
        lat = pd.to_numeric(g["lat_ms"], errors="coerce")
        rows.append({"run_id": rid, "cell_id": cell_id, "seconds": len(q), "qps_mean": float(q.mean()),
                     "qps_cv_pct": float(100 * q.std(ddof=1) / q.mean()) if len(q) > 1 and q.mean() else math.nan,
                     "half_ratio": float(q[half:].mean() / q[:half].mean()) if half and q[:half].mean() else math.nan,
                     "p95_median_ms": float(lat.median()), "p95_max_ms": float(lat.max())})
    return pd.DataFrame(rows, columns=["run_id", "cell_id", "seconds", "qps_mean", "qps_cv_pct", "half_ratio",
                                       "p95_median_ms", "p95_max_ms"])


def timeline(intervals: pd.DataFrame, runs: pd.DataFrame, cell_id: str) -> pd.DataFrame:
    """Per-second QPS and p95 of every run of `cell_id` (for the over-time figure)."""
    ids = runs.loc[runs["cell_id"] == cell_id, ["run_id", "repetition"]]
    if intervals.empty:
        return pd.DataFrame(columns=["run_id", "repetition", "t_s", "qps", "lat_ms"])
    iv = intervals.merge(ids, on="run_id")
    iv = iv[["run_id", "repetition", "t_s", "qps", "lat_ms"]]
    return iv.sort_values(["repetition", "t_s"]).reset_index(drop=True)


# ------------------------------------------------------------------------------------ all tables

def scaleout_tables(runs: pd.DataFrame, histograms: pd.DataFrame, intervals: pd.DataFrame,
                    manifests: Iterable[RunRecord], threshold_ms: float = P95_THRESHOLD_MS
                    ) -> dict[str, pd.DataFrame]:
    """Every table of the study, under the names they are written as (processed/<name>.csv)."""
    runs = runs[runs["status"] == "ok"] if "status" in runs else runs
    cells = cell_table(runs, histograms)
    inst = instance_rows(manifests)
    out = {"scaleout-cells": cells, "scaleout-instances": per_instance_table(runs, inst),
           "scaleout-instance-runs": inst, "scaleout-saturation": saturation(cells) if not cells.empty else
           pd.DataFrame(), "scaleout-capacity": p95_capacity(cells, threshold_ms) if not cells.empty else
           pd.DataFrame()}
    out["scaleout-doubling"] = doubling(out["scaleout-capacity"]) if not cells.empty else pd.DataFrame()
    try:
        out["scaleout-crossing"] = crossing_table(runs, threshold_ms)
    except NotTestable:  # runs without p95 columns
        out["scaleout-crossing"] = pd.DataFrame()
    if not cells.empty:
        best = best_cell(cells)
        out["scaleout-stability"] = stability(intervals, runs, best["cell_id"])
        out["scaleout-timeline"] = timeline(intervals, runs, best["cell_id"])
    else:
        out["scaleout-stability"] = out["scaleout-timeline"] = pd.DataFrame()
    return out


# ------------------------------------------------------------------------------------ claims

def saturation_point(cells: pd.DataFrame | None, instances: int = 1) -> tuple[pd.Series, pd.DataFrame]:
    """The saturation row of :func:`saturation` at `instances` and that instance count's cells; NotTestable
    when it has fewer than three thread counts, or throughput still rises at the largest (the premise of the
    saturation claim: the saturation point lies below the largest thread count)."""
    g = cells[cells["instances"] == instances] if cells is not None and not cells.empty else pd.DataFrame()
    if g.empty or g["threads"].nunique() < 3:
        raise NotTestable(f"needs three or more thread counts at {instances} instance(s)")
    sat = saturation(g).iloc[0]
    if not sat["reached"]:
        raise NotTestable(f"throughput still rises at the largest thread count ({sat['largest_threads']})")
    return sat, g


def saturation_estimate(tables: Mapping[str, pd.DataFrame], instances: int = 1) -> Estimate:
    """QPS at the largest thread count over QPS at the saturation point, at `instances` (about 1 when
    throughput stays flat past saturation, < 1 when it declines); the interval from the two cells' t
    intervals (ratio of the bounds). Premise: the saturation point lies below the largest thread count."""
    sat, g = saturation_point(tables.get("scaleout-cells"), instances)
    g = g.sort_values("threads")
    last = g.iloc[-1]
    knee = g[g["threads"] == sat["saturation_threads"]].iloc[0]
    return Estimate(float(last["qps"] / knee["qps"]), float(last["ci_lo"] / knee["ci_hi"]),
                    float(last["ci_hi"] / knee["ci_lo"]) if knee["ci_lo"] > 0 else math.inf,
                    f"QPS at {int(last['threads'])} threads / at the saturation point {sat['saturation_threads']} "
                    f"(interval {sat['saturation_lo']}-{sat['saturation_hi']}; peak at {sat['peak_threads']})",
                    int(last["n"] + knee["n"]), f"{int(last['threads'])} vs {int(knee['threads'])} threads, "
                    f"{instances} instance(s)")


def peak_ratio_estimate(tables: Mapping[str, pd.DataFrame], a: int, b: int) -> Estimate:
    """Peak QPS at `a` instances over the peak at `b` (CI from the peaks' t intervals)."""
    sat = tables.get("scaleout-saturation", pd.DataFrame())
    have = set(sat["instances"]) if not sat.empty else set()
    if a not in have or b not in have:
        raise NotTestable(f"needs {b} and {a} instances; measured: {', '.join(map(str, sorted(have))) or 'none'}")
    pa, pb = sat.set_index("instances").loc[a], sat.set_index("instances").loc[b]
    return Estimate(float(pa["peak_qps"] / pb["peak_qps"]), float(pa["peak_ci_lo"] / pb["peak_ci_hi"]),
                    float(pa["peak_ci_hi"] / pb["peak_ci_lo"]), "peak QPS over client threads", 0,
                    f"{a} vs {b} instances")


def stability_estimate(tables: Mapping[str, pd.DataFrame]) -> Estimate:
    """Second-half over first-half per-second QPS at the best setting, mean and t CI over repetitions."""
    st = tables.get("scaleout-stability", pd.DataFrame())
    if st is None or st.empty or st["half_ratio"].notna().sum() < 2:
        raise NotTestable("needs two or more runs with per-second rows at the best setting")
    v = st["half_ratio"].dropna()
    lo, hi = _ci(v)
    return Estimate(float(v.mean()), lo, hi, "per-second QPS, second half of the window / first half, "
                    "mean over repetitions", len(v), f"cell {st['cell_id'].iloc[0]}")
