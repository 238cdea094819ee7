"""Per-run figures beside throughput (pure): hardware efficiency per transaction (CPU µs, KB read and
written, IOs) and space and write amplification, and latency percentiles from histograms merged by adding
counts (never by averaging percentiles).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

# sysbench's oltp tables: id INT, k INT, c CHAR(120), pad CHAR(60); digits only, so one byte a char.
SYSBENCH_ROW_BYTES = 4 + 4 + 120 + 60
# Rows written per transaction with sysbench's default options (index_updates=1, non_index_updates=1,
# delete_inserts=1: one UPDATE of k, one of c, one DELETE and one INSERT).
# TPC-C: 0, because its rows differ in size per table and its writes per transaction per type, so
# no logical write volume (write_amp) or user data size (space_amp) is estimated: both are NaN.
ROW_WRITES_PER_TXN = {"oltp_read_write": 4, "oltp_write_only": 4, "oltp_read_only": 0,
                      "oltp_point_select": 0, "tpcc": 0}
EFFICIENCY_METRICS = (
    "host_cpu_us_per_txn", "mysqld_cpu_us_per_txn", "read_kb_per_txn", "write_kb_per_txn",
    "read_ios_per_txn", "write_ios_per_txn", "proc_read_kb_per_txn", "proc_write_kb_per_txn",
    "read_mb_s", "write_mb_s", "dev_util_pct", "host_iowait_cpus", "space_amp", "apparent_space_amp",
    "write_amp", "write_amp_proc",
)


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    if name not in df.columns:
        return pd.Series(np.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[name], errors="coerce").astype(float)


def efficiency(runs: pd.DataFrame, *, tables: int, table_size: int,
               workload: str = "oltp_read_write") -> pd.DataFrame:
    """Hardware cost per transaction and space/write amplification, per run (Small Datum style).

    Counters are exact deltas over the measured window (``window_s``); the transactions in that window
    are sysbench's ``transactions`` scaled by ``window_s / total_time_s`` (the collector's window and
    sysbench's run differ only by start/stop latency). Missing counters give NaN, never 0.

    - ``host_cpu_us_per_txn``: busy CPU time of the whole host (server *and* client) per transaction;
      ``mysqld_cpu_us_per_txn``: user+system CPU of mysqld only. Microseconds.
    - ``read_kb_per_txn``/``write_kb_per_txn``, ``read_ios_per_txn``/``write_ios_per_txn``: the data
      medium's block device (KiB, requests); ``proc_*_kb_per_txn``: mysqld's storage I/O from
      /proc/PID/io (0 on tmpfs, where no block device is involved).
    - ``read_mb_s``/``write_mb_s`` (10^6 bytes/s), ``dev_util_pct`` (device busy time / window),
      ``host_iowait_cpus`` (CPU-seconds of iowait per second).
    - ``space_amp``: on-disk (``du``) size of the loaded tables / their user data, rows x 188 bytes
      (id INT + k INT + CHAR(120) + CHAR(60)); indexes and page overhead count as amplification.
      ``apparent_space_amp`` uses the apparent file size instead (equal unless holes are punched).
    - ``write_amp``: device bytes written / logical bytes written, where logical = transactions x rows
      written per transaction (4 for oltp_read_write and oltp_write_only) x 188; NaN for read-only
      workloads. ``write_amp_proc`` uses mysqld's /proc/PID/io write bytes (no file-system overhead).
    The ``workload`` column of ``runs`` wins over the ``workload`` argument where present.
    """
    if tables < 1 or table_size < 1:
        raise ValueError(f"efficiency: tables ({tables!r}) and table_size ({table_size!r}) must be >= 1")
    w = runs["workload"] if "workload" in runs.columns else pd.Series(workload, index=runs.index)
    w = w.fillna(workload)
    unknown = sorted(set(w) - set(ROW_WRITES_PER_TXN))
    if unknown:
        raise ValueError(f"efficiency: unknown workload(s) {unknown}; allowed: {', '.join(ROW_WRITES_PER_TXN)}")
    window = _col(runs, "window_s")
    total = _col(runs, "total_time_s")
    txn = _col(runs, "transactions")
    scaled = txn * window / total
    txn = scaled.where(scaled.notna(), txn).where(lambda s: s > 0)
    user_bytes = pd.Series(float(tables * table_size * SYSBENCH_ROW_BYTES), index=runs.index).where(w != "tpcc")
    logical_w = txn * w.map(ROW_WRITES_PER_TXN).astype(float) * SYSBENCH_ROW_BYTES
    logical_w = logical_w.where(logical_w > 0)
    c = lambda name: _col(runs, name)  # noqa: E731
    out = pd.DataFrame({
        "run_id": runs["run_id"].to_numpy() if "run_id" in runs.columns else runs.index,
        "host_cpu_us_per_txn": c("host_cpu_busy_s") * 1e6 / txn,
        "mysqld_cpu_us_per_txn": (c("cpu_user_s") + c("cpu_sys_s")) * 1e6 / txn,
        "read_kb_per_txn": c("dev_read_bytes") / 1024 / txn,
        "write_kb_per_txn": c("dev_write_bytes") / 1024 / txn,
        "read_ios_per_txn": c("dev_read_ios") / txn,
        "write_ios_per_txn": c("dev_write_ios") / txn,
        "proc_read_kb_per_txn": c("proc_read_bytes") / 1024 / txn,
        "proc_write_kb_per_txn": c("proc_write_bytes") / 1024 / txn,
        "read_mb_s": c("dev_read_bytes") / 1e6 / window,
        "write_mb_s": c("dev_write_bytes") / 1e6 / window,
        "dev_util_pct": c("dev_io_ms") / 10.0 / window,
        "host_iowait_cpus": c("host_cpu_iowait_s") / window,
        "space_amp": c("data_physical_bytes") / user_bytes,
        "apparent_space_amp": c("data_apparent_bytes" if "data_apparent_bytes" in runs.columns
                                else "data_logical_bytes") / user_bytes,
        "write_amp": c("dev_write_bytes") / logical_w,
        "write_amp_proc": c("proc_write_bytes") / logical_w,
    }, index=runs.index)
    return out.replace([np.inf, -np.inf], np.nan)


def merged_percentiles(histograms: pd.DataFrame, by: Sequence[str],
                       percentiles: Sequence[float] = (50, 95, 99)) -> pd.DataFrame:
    """Latency percentiles per group from histograms merged by adding counts (never by averaging
    percentiles), with sysbench's own rule (``sysbench.histogram_percentile``): the first bucket whose
    cumulative count reaches floor(total * q / 100 + 0.5). Columns: by..., events, pQ_ms...,
    max_bucket_ms (the highest non-empty bucket). Vectorised over all groups."""
    by = list(by)
    for col in (*by, "value_ms", "count"):
        if col not in histograms.columns:
            raise ValueError(f"histograms: missing column {col!r}")
    cols = [*by, "events", *[f"p{q:g}_ms" for q in percentiles], "max_bucket_ms"]
    h = histograms[[*by, "value_ms", "count"]]
    h = h[h["count"] > 0]
    if h.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    g = h.groupby([*by, "value_ms"], sort=True, dropna=False)["count"].sum().reset_index()
    grp = g.groupby(by, sort=True, dropna=False)
    cum = grp["count"].cumsum().to_numpy()
    total = grp["count"].transform("sum").to_numpy()
    out = grp["count"].sum().rename("events").reset_index()
    for q in percentiles:
        nmax = np.floor(total * q / 100 + 0.5)
        first = g[cum >= nmax].groupby(by, sort=True, dropna=False)["value_ms"].first()
        out[f"p{q:g}_ms"] = first.to_numpy()
    out["max_bucket_ms"] = grp["value_ms"].last().to_numpy()
    return out[cols]
