"""The host's per-second samples during a run, from ``vmstat -n -t -w -y 1`` (pure).

Every run keeps ``vmstat.txt`` (:mod:`dbmatrix.hosts.collect`): one line per second of the measured phase,
each ending in its wall-clock time, in the time zone the second header line names (the collector sets
``TZ=UTC``). The columns are read by the names in that header, so a procps that adds one (``gu``, guest
time, since 4.0) or lacks it reads the same. What the analysis needs of a line:

- ``epoch``: the line's time as a POSIX second (vmstat prints whole seconds, when the sample was taken);
- ``busy_pct``: CPU time neither idle nor waiting for I/O, % of all CPUs (``100 - id - wa``, as the
  counters' ``host_cpu_busy_s`` counts it);
- ``iowait_pct`` (``wa``), ``runnable`` (``r``), ``blocked`` (``b``);
- ``read_kib_s`` and ``write_kib_s``: ``bi`` and ``bo``, blocks of 1 KiB per second (Linux's vmstat unit).
"""

from __future__ import annotations

import calendar
import time

import numpy as np
import pandas as pd

COLUMNS = ("epoch", "busy_pct", "iowait_pct", "runnable", "blocked", "read_kib_s", "write_kib_s")
_NEEDED = ("r", "b", "bi", "bo", "id", "wa")


def _utc_epoch(date: str, clock: str) -> int | None:
    try:
        return calendar.timegm(time.strptime(f"{date} {clock}", "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None


def parse_vmstat(text: str) -> pd.DataFrame:
    """The samples of one ``vmstat -n -t -w`` output as rows of :data:`COLUMNS` (in the order printed);
    lines that are not samples (headers, a line cut off when the collector stopped) are skipped. An
    output whose header names another time zone than UTC, or lacks a needed column, gives no rows: its
    times could not be set beside the run's window."""
    names: list[str] | None = None
    rows = []
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] == "r" and "b" in tokens:  # the column header (the zone is its last word)
            if tokens[-1] != "UTC" or any(n not in tokens for n in _NEEDED):
                return pd.DataFrame(columns=list(COLUMNS))
            names = tokens[:-1]  # a sample ends in two more tokens (date, time) where the header has the zone
            continue
        if names is None or len(tokens) != len(names) + 2 or not tokens[0].isdigit():
            continue
        epoch = _utc_epoch(tokens[-2], tokens[-1])
        if epoch is None:
            continue
        v = dict(zip(names, tokens[:-2]))
        try:
            idle, wait = float(v["id"]), float(v["wa"])
            rows.append((epoch, 100.0 - idle - wait, wait, float(v["r"]), float(v["b"]), float(v["bi"]),
                         float(v["bo"])))
        except (KeyError, ValueError):
            continue
    return pd.DataFrame(rows, columns=list(COLUMNS))


def window_seconds(samples: pd.DataFrame, start_epoch: float) -> pd.Series:
    """Each sample's second of the measured window that began at `start_epoch` (POSIX seconds), numbered as
    sysbench numbers its per-second rows there (``t_s`` 1 covers the window's first second).

    vmstat stamps a sample with the whole second it was taken in (the fraction dropped), and a sample covers
    the second that ends when it is taken, so on average it is centred on its stamp: it is given the window
    second its stamp falls in. That is right to within a second (over a half of a 45-s window, one sample of
    twenty at most).
    Samples before the window (the warm-up) get 0 or less."""
    return pd.Series(np.ceil(samples["epoch"].to_numpy(dtype=float) - float(start_epoch)).astype(int),
                     index=samples.index, name="t_s")


__all__ = ["COLUMNS", "parse_vmstat", "window_seconds"]
