"""The binary log over a run's window, from the server's own variables and status counters (pure).

``variables.tsv`` (``SHOW GLOBAL VARIABLES`` at the run's start) says whether the binary log was on and how
often it was synced; ``status-before.tsv`` / ``status-after.tsv`` bracket the measured window. The group-commit
mechanism is in the deltas: ``Binlog_commits / Binlog_group_commits`` is the mean number of transactions a
binlog write (and, with ``sync_binlog = 1``, an fsync) carried, and ``Binlog_group_commit_trigger_timeout`` /
``_count`` say how many groups a leader closed on its wait's time limit or on its count
(``binlog_commit_wait_usec`` / ``binlog_commit_wait_count``, the group_commit factor)."""

from __future__ import annotations

import math
from collections.abc import Mapping

COLUMNS = ("binlog_on", "sync_binlog", "binlog_commits", "binlog_group_commits", "binlog_group_size",
           "binlog_group_timeouts", "binlog_group_count_triggers")


def _delta(before: Mapping[str, str], after: Mapping[str, str], name: str) -> float:
    try:
        d = float(after[name]) - float(before[name])
    except (KeyError, ValueError):
        return math.nan
    return d if d >= 0 else math.nan  # a counter reset mid-window: unknown


def binlog_counters(variables: Mapping[str, str], before: Mapping[str, str],
                    after: Mapping[str, str]) -> dict[str, float]:
    """The columns of :data:`COLUMNS` for one run; names lower-case (as
    :func:`dbmatrix.parse.cache_counters.parse_status` gives them); NaN where a value is missing."""
    out = dict.fromkeys(COLUMNS, math.nan)
    log_bin = variables.get("log_bin")
    if log_bin is not None:
        out["binlog_on"] = 1.0 if log_bin.strip().upper() in ("ON", "1") else 0.0
    try:
        out["sync_binlog"] = float(variables["sync_binlog"])
    except (KeyError, ValueError):
        pass
    commits = _delta(before, after, "binlog_commits")
    groups = _delta(before, after, "binlog_group_commits")
    out.update(binlog_commits=commits, binlog_group_commits=groups,
               binlog_group_timeouts=_delta(before, after, "binlog_group_commit_trigger_timeout"),
               binlog_group_count_triggers=_delta(before, after, "binlog_group_commit_trigger_count"))
    if groups > 0:
        out["binlog_group_size"] = commits / groups
    return out
