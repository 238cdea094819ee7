"""What changed inside a run between the first and the second half of its window (pure).

The steady-state test (:mod:`dbmatrix.analyse.stats.steady`) says whether a run's per-second throughput
drifted; the host's per-second samples taken beside it (``vmstat``, :mod:`dbmatrix.parse.vmstat`) say what
the machine did meanwhile. For each run the window the test kept (its MSER-trimmed steady window, the whole
series for a run found drifting) is split into two halves of equal length (the middle second of an odd
window is in neither), and each half gets:

- ``tps``: sysbench's mean per-second throughput;
- ``busy_pct``, ``iowait_pct``: the host's CPU busy and waiting on I/O, % of all CPUs, mean of its samples;
- ``runnable``: processes runnable or running (vmstat ``r``), mean;
- ``read_kb_per_txn``, ``write_kb_per_txn``: KiB the block devices read and wrote per transaction, over
  the seconds that have both a sample and a sysbench row (the host's devices, the data medium's and others).

A half with fewer than half of its seconds sampled has no host figures (NaN). The columns are
``first_half_<x>`` and ``second_half_<x>`` (:data:`COLUMNS`), merged into the processed runs table; the
share claim on stable runs reads them as its mechanism (:mod:`dbmatrix.analyse.mechanism`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

FIGURES = ("tps", "busy_pct", "iowait_pct", "runnable", "read_kb_per_txn", "write_kb_per_txn")
COLUMNS = tuple(f"{half}_half_{x}" for x in FIGURES for half in ("first", "second"))
_HOST = ("busy_pct", "iowait_pct", "runnable")
MIN_SAMPLED = 0.5  # the share of a half's seconds that must have a host sample


def _half(tps: pd.Series, host: pd.DataFrame) -> dict[str, float]:
    """The figures of one half: its report lines `tps` (indexed by their second; a reporter that a stalled
    host delayed can label two lines with one second and skip the next, so the mean is over the lines and
    the transactions per second sum the lines of a label), the run's samples."""
    out = {"tps": float(tps.mean())}
    seconds = tps.index.unique()
    h = host[host.index.isin(seconds)]
    if len(h) < MIN_SAMPLED * len(tps):
        return out | {x: np.nan for x in FIGURES[1:]}
    out |= {x: float(h[x].mean()) for x in _HOST}
    txn = tps.groupby(level=0).sum().reindex(h.index)
    both = txn.notna()
    total = float(txn[both].sum())
    for col, name in (("read_kib_s", "read_kb_per_txn"), ("write_kib_s", "write_kb_per_txn")):
        out[name] = float(h.loc[both.to_numpy(), col].sum()) / total if total > 0 else np.nan
    return out


def window_halves(intervals: pd.DataFrame, host: pd.DataFrame, steady: pd.DataFrame) -> pd.DataFrame:
    """Per run (``run_id`` and :data:`COLUMNS`), the two halves of the window the steady-state test kept.

    `intervals`: sysbench's per-second rows (run_id, t_s, tps) of the measured window; `host`: the
    samples in the same seconds (:meth:`dbmatrix.store.ResultStore.load_host_series`); `steady`: the
    steady-state table (run_id, trim_s). A run with fewer than four seconds kept has no row; a run without
    samples has throughput only."""
    cols = ["run_id", *COLUMNS]
    if intervals.empty or steady.empty or "trim_s" not in steady.columns:
        return pd.DataFrame(columns=cols)
    trim = pd.to_numeric(steady.set_index("run_id")["trim_s"], errors="coerce")
    samples = {r: g.set_index("t_s") for r, g in host.groupby("run_id", sort=False)} if not host.empty else {}
    empty = pd.DataFrame(columns=["t_s", *_HOST, "read_kib_s", "write_kib_s"]).set_index("t_s")
    rows = []
    for run_id, g in intervals.groupby("run_id", sort=True):
        t = int(trim.get(run_id, 0)) if pd.notna(trim.get(run_id, np.nan)) else 0
        series = g.sort_values("t_s", kind="stable")
        kept = series["t_s"].to_numpy(dtype=int)[t:]
        if kept.size < 4:
            continue
        n = kept.size // 2
        tps = pd.Series(series["tps"].to_numpy(dtype=float)[t:], index=kept)
        h = samples.get(run_id, empty)
        h = h[~h.index.duplicated(keep="first")]
        first, second = _half(tps.iloc[:n], h), _half(tps.iloc[-n:], h)
        rows.append({"run_id": run_id, **{f"first_half_{x}": first[x] for x in FIGURES},
                     **{f"second_half_{x}": second[x] for x in FIGURES}})
    return pd.DataFrame(rows, columns=cols)


__all__ = ["COLUMNS", "FIGURES", "MIN_SAMPLED", "window_halves"]
