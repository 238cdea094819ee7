"""Analysis of the Galera replication study (seed 002): tables, effects with CIs, the seed's figures
(its claims are judged with every other claim in :mod:`dbmatrix.analyse.claims`).

Input: the manifests of galera runs (``manifest["wsrep"]``: per-node figures over the measured window,
see :func:`dbmatrix.run.galera_cluster.wsrep_deltas`; ``manifest["summary"]``: sysbench) and their raw
``wsrep-samples.txt``. Output (``<results>/processed/``, deterministic):

* ``replication-runs.csv``   one row per completed run: levels, throughput, latency, cluster-level
  flow-control figures (mean/max over nodes), cluster start and SST times;
* ``replication-nodes.csv``  one row per (run, node): every wsrep figure of the window;
* ``replication-settings.csv`` per setting (slave_threads within the other varied levels) and metric:
  n, mean, SD, Student-t 95 % CI;
* ``replication-effects.csv`` highest (and every other) slave_threads level against the lowest:
  paused share difference in points (Welch CI), throughput and latency ratios of geometric means
  (Welch CIs on logs);
* ``replication-samples.csv`` the per-second receive queue and paused share of every node;
* ``replication-failed.csv`` failed runs with their step and error;
* ``replication-calibration.csv`` the calibration of a throttled follower medium (one row per calibration
  run: the limit, the paused share it gave, whether it was chosen; :mod:`dbmatrix.run.calibration`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.stats import t_mean_ci, welch_log_ratio
from dbmatrix.analyse.tables import read_csv
from dbmatrix.parse.wsrep import WSREP_KEYS, parse_samples
from dbmatrix.record import RunRecord
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore, write_text_atomic

# Factors that can vary besides slave_threads in a replication study; settings are compared within them.
WITHIN = ("follower_medium", "write_to", "threads", "workload")
# Where a study's calibration of its throttled follower medium is kept (dbmatrix.run.calibration).
CALIBRATION_DIR = "calibration"
LEVEL = "slave_threads"
# Per-setting summaries: metric -> unit.
SETTING_METRICS = {
    "fc_paused_pct": "% of the window", "fc_paused_pct_max": "% of the window", "tps": "tx/s",
    "qps": "queries/s", "lat_p95_ms": "ms", "lat_avg_ms": "ms", "recv_queue_avg": "write-sets",
    "recv_queue_max": "write-sets", "fc_sent": "messages", "fc_recv": "messages",
    "cert_deps_distance": "write-sets", "apply_window": "write-sets", "committed_per_s": "write-sets/s",
    "cluster_start_s": "s", "sst_s": "s",
}
EFFECT_COLUMNS = ["metric", "level_a", "level_b", "estimate", "ci_lo", "ci_hi", "n_a", "n_b", "unit", "within",
                  "mean_a", "mean_b", "p"]
# The seed's claims, slave_threads 16 against 1 (Severalnines' three m5d.xlarge nodes, 4 vCPUs each).
# Latency: the seed reports the average latency of 1 applier 27 % above that of 16, i.e. 16/1 = 1/1.27.
SEED_CLAIMS: dict[str, dict[str, Any]] = {
    "paused": {"metric": "fc_paused_pct_points", "value": 20.0 - 64.0, "null": 0.0,
               "text": "flow control paused the nodes about 64 % of the time with one applier, 20 % with 16"},
    "tps": {"metric": "tps_ratio", "value": 1.11, "null": 1.0, "text": "about 11 % more throughput with 16"},
    "lat": {"metric": "lat_avg_ratio", "value": 1 / 1.27, "null": 1.0,
            "text": "average latency with one applier 27 % above that with 16"},
}
SEED_MACHINE = "three m5d.xlarge nodes (4 vCPUs, 16 GiB, local NVMe each), one node per machine"
# The seed's own figures, quoted in the text through macros.
SEED_FIGURES = {"replSeedNodes": "3", "replSeedLevelLow": "1", "replSeedLevelHigh": "16",
                "replSeedPausedLowPct": "64", "replSeedPausedHighPct": "20", "replSeedTpsPct": "11",
                "replSeedLatPct": "27", "replSeedMeasureS": "600", "replCiPct": "95"}


# =============================================================================== tables (pure)

def _mean_over(nodes: dict[str, dict[str, Any]], key: str, how: str = "mean") -> float | None:
    vals = [float(d[key]) for d in nodes.values() if isinstance(d.get(key), (int, float))]
    if not vals:
        return None
    return {"mean": float(np.mean(vals)), "max": max(vals), "sum": float(sum(vals))}[how]


def _spread(nodes: dict[str, dict[str, Any]], key: str) -> float | None:
    vals = [float(d[key]) for d in nodes.values() if isinstance(d.get(key), (int, float))]
    return max(vals) - min(vals) if vals else None


def run_row(m: RunRecord) -> dict[str, Any]:
    """One completed galera run as a flat row (cluster figures: mean or max over the nodes).

    ``tps`` and ``lat_p95_ms`` are sysbench's summary of the measured window, the window its latency
    histogram covers: the same throughput as the study's processed runs table
    (:func:`dbmatrix.analyse.tables.prepare_runs`), so a run has one throughput in every table."""
    cell = m.cell
    s = m.summary
    w = m.wsrep
    nodes = m.nodes
    sst = [v.get("sst_s") for v in nodes.values() if isinstance(v.get("sst_s"), (int, float))]
    join = [v.get("join_s") for v in nodes.values() if isinstance(v.get("join_s"), (int, float))]
    committed = _mean_over(w, "committed", "max")
    window = _mean_over(w, "window_s")
    return {
        "run_id": m.run_id, "cell_id": m.cell_id, LEVEL: int(cell[LEVEL]),
        "follower_medium": cell["follower_medium"],
        "write_to": cell["write_to"], "threads": cell.get("threads"),
        "workload": cell.get("workload"), "repetition": m.repetition, "block": m.block,
        "order": m.order, "host": m.host, "campaign": m.campaign,
        "nodes": len(w) or None,
        "tps": s.get("tps"), "qps": s.get("qps"), "lat_p95_ms": s.get("lat_pct_ms"),
        "lat_avg_ms": s.get("lat_avg_ms"), "ignored_errors": s.get("ignored_errors"),
        "fc_paused_pct": _mean_over(w, "fc_paused_pct"), "fc_paused_pct_max": _mean_over(w, "fc_paused_pct", "max"),
        "fc_paused_pct_spread": _spread(w, "fc_paused_pct"),
        "fc_sent": _mean_over(w, "fc_sent", "sum"), "fc_recv": _mean_over(w, "fc_recv", "max"),
        "recv_queue_avg": _mean_over(w, "recv_queue_avg", "max"),
        "recv_queue_max": _mean_over(w, "recv_queue_max", "max"),
        "cert_deps_distance": _mean_over(w, "cert_deps_distance"),
        "apply_window": _mean_over(w, "apply_window", "max"),
        "committed_per_s": committed / window if committed is not None and window else None,
        "window_s": window,
        "cluster_start_s": m.cluster.get("start_s"),
        "sst_s": float(np.mean(sst)) if sst else None, "join_s": float(np.mean(join)) if join else None,
    }


def load_calibration(root: Path) -> pd.DataFrame:
    """Every campaign's calibration of the followers' throttled medium (``<results>/calibration/``): one row
    per calibration run (campaign, limit, paused share, throughput, chosen, reached)."""
    d = root / CALIBRATION_DIR
    rows = []
    for p in sorted(d.glob("campaign-*.json")) if d.is_dir() else []:
        rec = json.loads(p.read_text())
        for r in rec.get("runs", []):
            rows.append({"campaign": int(rec.get("campaign", 0)), "medium": rec.get("medium"),
                         "limit_kind": rec.get("limit"), "limit": r.get("limit"), "status": r.get("status"),
                         "fc_paused_pct": r.get("fc_paused_pct"), "tps": r.get("tps"),
                         "target_pct": rec.get("target_fc_paused_pct"),
                         "window_s": rec.get("window_s"), "chosen": r.get("limit") == rec.get("chosen"),
                         "reached": bool(rec.get("reached"))})
    cols = ["campaign", "medium", "limit_kind", "limit", "status", "fc_paused_pct", "tps",
            "target_pct", "window_s", "chosen", "reached"]
    return pd.DataFrame(rows, columns=cols).sort_values(["campaign", "limit"], ascending=[True, False],
                                                        kind="stable").reset_index(drop=True)


def node_rows(m: RunRecord) -> list[dict[str, Any]]:
    cell = m.cell
    return [{"run_id": m.run_id, LEVEL: int(cell[LEVEL]), "write_to": cell["write_to"],
             "node": node, **{k: d.get(k) for k in WSREP_KEYS}}
            for node, d in sorted(m.wsrep.items())]


def group_keys(runs: pd.DataFrame) -> list[str]:
    """The other factors that vary among the runs (settings are compared within their combinations)."""
    return [k for k in WITHIN if k in runs and runs[k].nunique(dropna=False) > 1]


def setting_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting (slave_threads within the other varied levels) and metric: n, mean, SD, t 95 % CI."""
    cols = [LEVEL, *WITHIN, "metric", "unit", "n", "mean", "sd", "ci_lo", "ci_hi"]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in runs.groupby([LEVEL, *WITHIN], sort=True, dropna=False):
        for metric, unit in SETTING_METRICS.items():
            v = pd.to_numeric(g[metric], errors="coerce").dropna().to_numpy(dtype=float)
            if v.size == 0:
                continue
            lo, hi = t_mean_ci(v)
            rows.append({**dict(zip([LEVEL, *WITHIN], key)), "metric": metric, "unit": unit, "n": int(v.size),
                         "mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else math.nan,
                         "ci_lo": lo, "ci_hi": hi})
    return pd.DataFrame(rows, columns=cols)


def welch_difference(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                     confidence: float = 0.95) -> dict[str, float]:
    """Difference of means a - b with Welch's CI (unequal variances, few repetitions)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    out = {"estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan, "p": math.nan,
           "n_a": int(x.size), "n_b": int(y.size), "mean_a": float(x.mean()) if x.size else math.nan,
           "mean_b": float(y.mean()) if y.size else math.nan}
    if x.size == 0 or y.size == 0:
        return out
    diff = float(x.mean() - y.mean())
    out["estimate"] = diff
    if x.size < 2 or y.size < 2:
        return out
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    se = math.sqrt(va + vb)
    if se == 0:
        out.update(ci_lo=diff, ci_hi=diff, p=1.0 if diff == 0 else 0.0)
        return out
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = float(sps.t.ppf((1 + confidence) / 2, df)) * se
    out.update(ci_lo=diff - half, ci_hi=diff + half, p=float(2 * sps.t.sf(abs(diff / se), df)))
    return out


def _ratio(metric: str, a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    a, b = a[np.isfinite(a) & (a > 0)], b[np.isfinite(b) & (b > 0)]
    r = welch_log_ratio(a, b)
    return {"estimate": r["ratio"], "ci_lo": r["ci_lo"], "ci_hi": r["ci_hi"], "p": r["p"], "n_a": int(r["n_a"]),
            "n_b": int(r["n_b"]), "mean_a": r["mean_a"], "mean_b": r["mean_b"]}


def effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Every slave_threads level against the lowest, within each combination of the other varied levels:
    paused share difference (points, Welch), throughput, p95 and average latency ratios (geometric means,
    Welch on logs), receive-queue average difference. The highest level against the lowest comes first."""
    if runs.empty or runs[LEVEL].nunique() < 2:
        return pd.DataFrame(columns=EFFECT_COLUMNS)
    keys = group_keys(runs)
    rows = []
    groups = runs.groupby(keys, sort=True, dropna=False) if keys else [((), runs)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        within = ", ".join(f"{k}={v}" for k, v in zip(keys, key)) or "all"
        levels = sorted(g[LEVEL].unique())
        low = levels[0]
        b = g[g[LEVEL] == low]
        for high in sorted(levels[1:], reverse=True):
            a = g[g[LEVEL] == high]

            def col(df: pd.DataFrame, c: str) -> np.ndarray:
                return pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)

            specs = [
                ("fc_paused_pct_points", "percentage points", welch_difference(col(a, "fc_paused_pct"),
                                                                               col(b, "fc_paused_pct"))),
                ("tps_ratio", "ratio", _ratio("tps", col(a, "tps"), col(b, "tps"))),
                ("lat_p95_ratio", "ratio", _ratio("lat_p95_ms", col(a, "lat_p95_ms"), col(b, "lat_p95_ms"))),
                ("lat_avg_ratio", "ratio", _ratio("lat_avg_ms", col(a, "lat_avg_ms"), col(b, "lat_avg_ms"))),
                ("recv_queue_avg_diff", "write-sets", welch_difference(col(a, "recv_queue_avg"),
                                                                       col(b, "recv_queue_avg"))),
            ]
            for metric, unit, r in specs:
                rows.append({"metric": metric, "level_a": int(high), "level_b": int(low), "estimate": r["estimate"],
                             "ci_lo": r["ci_lo"], "ci_hi": r["ci_hi"], "n_a": r["n_a"], "n_b": r["n_b"],
                             "unit": unit, "within": within, "mean_a": r["mean_a"], "mean_b": r["mean_b"],
                             "p": r["p"]})
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def pressured_setting(runs: pd.DataFrame) -> str:
    """The setting (the effect table's ``within``: "follower_medium=slow", or "all" when nothing else varies)
    where flow control paused the cluster most at the lowest applier level: the one that has the seed's
    premise (its appliers were the bottleneck), so the seed's claims are judged there."""
    if runs.empty or "fc_paused_pct" not in runs.columns:
        return "all"
    keys = group_keys(runs)
    if not keys:
        return "all"
    level = pd.to_numeric(runs[LEVEL], errors="coerce")
    low = runs[level == level.min()]
    paused = low.groupby(keys, sort=True, dropna=False)["fc_paused_pct"].apply(
        lambda x: float(pd.to_numeric(x, errors="coerce").mean()))
    best = paused.idxmax()
    key = best if isinstance(best, tuple) else (best,)
    return ", ".join(f"{k}={v}" for k, v in zip(keys, key))


def setting_runs(runs: pd.DataFrame, within: str) -> pd.DataFrame:
    """The runs of one setting (a ``within`` string of the effect table)."""
    if within == "all" or runs.empty:
        return runs
    mask = pd.Series(True, index=runs.index)
    for part in within.split(", "):
        k, _, v = part.partition("=")
        mask &= runs[k].astype(str) == v
    return runs[mask]


def seed_position(lo: float, hi: float, seed_value: float) -> str:
    """Where the seed's value lies relative to our CI."""
    if pd.isna(lo) or pd.isna(hi):
        return "not testable"
    if seed_value < lo:
        return "below our CI"
    if seed_value > hi:
        return "above our CI"
    return "inside our CI"


# =============================================================================== from the store

def _galera_manifests(store: ResultStore, exp: Experiment) -> list[RunRecord]:
    return [m for m in store.records()
            if m.experiment == exp.name and m.topology.get("kind") == "galera"]


def load_samples(store: ResultStore, manifests: Sequence[RunRecord]) -> pd.DataFrame:
    frames = []
    for m in manifests:
        p = store.raw / m.run_id / "wsrep-samples.txt"
        if not m.ok or not p.is_file():
            continue
        s = parse_samples(p.read_text())
        if s.empty:
            continue
        s.insert(0, "run_id", m.run_id)
        s.insert(1, LEVEL, int(m.cell[LEVEL]))
        s.insert(2, "write_to", m.cell["write_to"])
        s.insert(3, "follower_medium", m.cell["follower_medium"])
        s.insert(4, "repetition", m.repetition)
        frames.append(s)
    cols = ["run_id", LEVEL, "write_to", "follower_medium", "repetition", "t_s", "node", "recv_queue",
            "send_queue", "paused_frac"]
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def _latency_avg(store: ResultStore, run_id: str) -> float | None:
    try:
        return store.parsed(run_id).summary.get("lat_avg_ms")
    except OSError:
        return None


def analyse_replication(store: ResultStore, exp: Experiment) -> dict[str, pd.DataFrame]:
    """Read the galera runs of `exp`, write ``processed/replication-*.csv`` and return the tables."""
    manifests = _galera_manifests(store, exp)
    ok = [m for m in manifests if m.ok]
    rows = []
    for m in ok:
        row = run_row(m)
        row["lat_avg_ms"] = _latency_avg(store, m.run_id)
        rows.append(row)
    runs = pd.DataFrame(rows)
    if not runs.empty:
        runs = runs.sort_values("run_id", kind="stable").reset_index(drop=True)
    nodes = pd.DataFrame([r for m in ok for r in node_rows(m)])
    failed = pd.DataFrame([{"run_id": m.run_id, "cell_id": m.cell_id, "failed_step": m.failed_step,
                            "error": (m.error or "").splitlines()[0][:300] if m.error else "",
                            "dead_nodes": ",".join(m.dead_nodes)}
                           for m in manifests if m.failed],
                          columns=["run_id", "cell_id", "failed_step", "error", "dead_nodes"])
    settings = setting_summary(runs)
    eff = effects(runs)
    tables = {"runs": runs, "nodes": nodes, "settings": settings, "effects": eff,
              "samples": load_samples(store, ok), "failed": failed, "calibration": load_calibration(store.root)}
    out = store.processed
    out.mkdir(parents=True, exist_ok=True)
    for name, df in tables.items():
        write_text_atomic(out / f"replication-{name}.csv", df.to_csv(index=False, float_format="%.6g",
                                                                     lineterminator="\n"))
    return tables


def load_replication(store: ResultStore) -> dict[str, pd.DataFrame]:
    """The processed tables written by :func:`analyse_replication`."""
    out = {}
    for name in ("runs", "nodes", "settings", "effects", "samples", "failed", "calibration"):
        p = store.processed / f"replication-{name}.csv"
        out[name] = read_csv(p) if p.is_file() and p.stat().st_size > 1 else pd.DataFrame()
    return out
