"""Galera status as numbers: the wsrep counters of a measured window and the per-second sampler's output.

Pure: parses what ``SHOW GLOBAL STATUS`` and the sampler (:func:`dbmatrix.run.galera_cluster.sampler_script`)
printed; both the run (its manifest) and the replication analysis read through here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

CLOCK_KEY = "dbmatrix_clock_s"  # the host clock (epoch s) read in the same client call as a status
SAMPLED = ("wsrep_local_recv_queue", "wsrep_local_send_queue", "wsrep_flow_control_paused_ns",
           "wsrep_flow_control_sent", "wsrep_flow_control_recv", "wsrep_last_committed")


# =============================================================================== status (pure)

# Counters that only grow (FLUSH STATUS leaves them, or the window starts right after the flush):
# the window's figure is after - before.
DELTA_COUNTERS: dict[str, str] = {
    "fc_paused_ns": "wsrep_flow_control_paused_ns",
    "fc_sent": "wsrep_flow_control_sent",
    "fc_recv": "wsrep_flow_control_recv",
    "replicated": "wsrep_replicated",
    "replicated_bytes": "wsrep_replicated_bytes",
    "received": "wsrep_received",
    "received_bytes": "wsrep_received_bytes",
    "local_commits": "wsrep_local_commits",
    "cert_failures": "wsrep_local_cert_failures",
    "bf_aborts": "wsrep_local_bf_aborts",
    "replays": "wsrep_local_replays",
    "committed": "wsrep_last_committed",  # seqno: write-sets committed cluster-wide in the window
}
# Averages and extremes since the last FLUSH STATUS: read at the end of the window.
SINCE_FLUSH: dict[str, str] = {
    "fc_paused_since_flush": "wsrep_flow_control_paused",
    "recv_queue_avg": "wsrep_local_recv_queue_avg",
    "recv_queue_max": "wsrep_local_recv_queue_max",
    "recv_queue_min": "wsrep_local_recv_queue_min",
    "send_queue_avg": "wsrep_local_send_queue_avg",
    "send_queue_max": "wsrep_local_send_queue_max",
    "cert_deps_distance": "wsrep_cert_deps_distance",
    "apply_window": "wsrep_apply_window",
    "commit_window": "wsrep_commit_window",
    "apply_oooe": "wsrep_apply_oooe",
    "apply_oool": "wsrep_apply_oool",
    "commit_oooe": "wsrep_commit_oooe",
    "cert_interval": "wsrep_cert_interval",
}
# State at the end of the window.
STATE: dict[str, str] = {
    "cluster_size": "wsrep_cluster_size",
    "state": "wsrep_local_state_comment",
    "cluster_status": "wsrep_cluster_status",
    "ready": "wsrep_ready",
    "applier_threads": "wsrep_applier_thread_count",
}
WSREP_KEYS = ("window_s", "fc_paused_pct", *DELTA_COUNTERS, *SINCE_FLUSH, *STATE)


def _number(v: object) -> float | None:
    if v is None:
        return None
    try:
        x = float(str(v).strip())
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _int_or_float(x: float | None) -> int | float | None:
    if x is None:
        return None
    return int(x) if float(x).is_integer() else x


def wsrep_deltas(before: Mapping[str, str], after: Mapping[str, str],
                 window_s: float | None = None) -> dict[str, Any]:
    """One node's figures over a window that started with FLUSH STATUS and the `before` snapshot.

    `window_s` defaults to the difference of the snapshots' clocks (:data:`CLOCK_KEY`); the paused
    share is the ``wsrep_flow_control_paused_ns`` delta over the window (in %), None without a window.
    A counter that went down (a restart) gives None."""
    if window_s is None:
        t0, t1 = _number(before.get(CLOCK_KEY)), _number(after.get(CLOCK_KEY))
        window_s = t1 - t0 if t0 is not None and t1 is not None else None
    out: dict[str, Any] = {"window_s": round(window_s, 6) if window_s is not None else None}
    for key, var in DELTA_COUNTERS.items():
        a, b = _number(before.get(var)), _number(after.get(var))
        out[key] = _int_or_float(b - a) if a is not None and b is not None and b >= a else None
    paused = out["fc_paused_ns"]
    out["fc_paused_pct"] = (round(100.0 * paused / (window_s * 1e9), 6)
                            if paused is not None and window_s else None)
    for key, var in SINCE_FLUSH.items():
        out[key] = _int_or_float(_number(after.get(var)))
    for key, var in STATE.items():
        v = after.get(var)
        num = _number(v)
        out[key] = _int_or_float(num) if num is not None and key in ("cluster_size", "applier_threads") else v
    return {k: out[k] for k in WSREP_KEYS}


def sync_problem(status: Mapping[str, str], nodes: int) -> str | None:
    """Why a node is not (yet) a synced member of an N-node primary cluster; None when it is."""
    state = status.get("wsrep_local_state_comment")
    size = status.get("wsrep_cluster_size")
    if state != "Synced":
        return f"wsrep_local_state_comment={state or '(none)'}"
    if size != str(nodes):
        return f"wsrep_cluster_size={size or '(none)'} (want {nodes})"
    if status.get("wsrep_cluster_status", "Primary") != "Primary":
        return f"wsrep_cluster_status={status.get('wsrep_cluster_status')}"
    return None


# =============================================================================== sampler (pure parts)

def parse_samples(text: str) -> pd.DataFrame:
    """Sampler output -> one row per (sample, node): ``t`` (epoch s), ``t_s`` (s since the first sample),
    ``node``, one column per sampled variable (``recv_queue``, ``send_queue``, ``paused_ns``, ``fc_sent``,
    ``fc_recv``, ``last_committed``) and ``paused_frac``, the share of the interval since the node's
    previous sample spent paused by flow control (from the cumulative nanosecond counter).
    Incomplete or malformed lines are dropped."""
    short = {"wsrep_local_recv_queue": "recv_queue", "wsrep_local_send_queue": "send_queue",
             "wsrep_flow_control_paused_ns": "paused_ns", "wsrep_flow_control_sent": "fc_sent",
             "wsrep_flow_control_recv": "fc_recv", "wsrep_last_committed": "last_committed"}
    rows = []
    lines = text.splitlines()
    if text and not text.endswith("\n") and lines:
        lines = lines[:-1]  # a truncated last line
    for line in lines:
        parts = line.split()
        if len(parts) != 4 or parts[2] not in short:
            continue
        t, v = _number(parts[0]), _number(parts[3])
        if t is None or v is None:
            continue
        rows.append((t, parts[1], short[parts[2]], v))
    cols = ["t", "t_s", "node", *short.values(), "paused_frac"]
    if not rows:
        return pd.DataFrame(columns=cols)
    long = pd.DataFrame(rows, columns=["t", "node", "var", "value"])
    wide = long.pivot_table(index=["t", "node"], columns="var", values="value", aggfunc="last").reset_index()
    for c in short.values():
        if c not in wide:
            wide[c] = float("nan")
    wide = wide.sort_values(["node", "t"], kind="stable").reset_index(drop=True)
    wide["t_s"] = (wide["t"] - wide["t"].min()).round(3)
    dt = wide.groupby("node")["t"].diff()
    dp = wide.groupby("node")["paused_ns"].diff()
    wide["paused_frac"] = (dp / (dt * 1e9)).where(dp >= 0).clip(lower=0, upper=1)
    wide.columns.name = None
    return wide[cols]


def summarize_samples(samples: pd.DataFrame) -> dict[str, dict[str, float | int | None]]:
    """Per node: number of samples, mean and max of the receive queue (what FC reacts to)."""
    out: dict[str, dict[str, float | int | None]] = {}
    for node, g in samples.groupby("node", sort=True):
        q = g["recv_queue"].dropna()
        out[str(node)] = {"samples": len(g),
                          "recv_queue_mean": round(float(q.mean()), 3) if len(q) else None,
                          "recv_queue_max": int(q.max()) if len(q) else None}
    return out
