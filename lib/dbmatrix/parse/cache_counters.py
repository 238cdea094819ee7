"""Cache hit ratios from the engines' own status counters over the measured window (pure).

A run saves ``SHOW GLOBAL STATUS`` just before and just after its window (``status-before.tsv``,
``status-after.tsv``); the deltas say how often a read found its page or block in the engine's cache. Which
counters an engine has is the engine's (``Engine.status_counters``, :mod:`dbmatrix.engines`: InnoDB's
buffer pool read requests and reads, MyRocks' block cache hits and misses, all blocks and data blocks, and
its flush and compaction bytes); the caller passes them, so this package imports no other.

With direct reads (the harness sets them for MyRocks; InnoDB opens its data files O_DIRECT) a miss is a
read from the medium, so the ratio is the share of reads the cache saved, which is what "cache size as a
share of the data" is meant to change. A cell whose two cache levels give the same ratio did not test
the cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

COLUMNS = ("cache_lookups", "cache_misses", "cache_hit_ratio", "cache_data_hit_ratio", "engine_flush_bytes",
           "engine_compaction_bytes", "cache_index_misses", "cache_index_insert_bytes", "cache_data_insert_bytes")
# Counters by block type (MyRocks): what a cache that thrashes on index blocks shows (issue 41)
TYPED = {"index_misses": "cache_index_misses", "index_insert_bytes": "cache_index_insert_bytes",
         "data_insert_bytes": "cache_data_insert_bytes"}


def parse_status(text: str) -> dict[str, str]:
    """A saved ``name<TAB>value`` status file -> {lower-case name: value} (the server spells them
    ``Innodb_…``, ``Rocksdb_…``)."""
    return {k.lower(): v for k, v in (line.split("\t", 1) for line in text.splitlines() if "\t" in line)}


def _delta(before: Mapping[str, str], after: Mapping[str, str], name: str) -> float:
    before, after = {k.lower(): v for k, v in before.items()}, {k.lower(): v for k, v in after.items()}
    try:
        d = float(after[name]) - float(before[name])
    except (KeyError, ValueError):
        return math.nan
    return d if d >= 0 else math.nan  # a counter reset (FLUSH STATUS) mid-window: unknown


def cache_counters(counters: Mapping[str, str] | None, before: Mapping[str, str],
                   after: Mapping[str, str]) -> dict[str, float]:
    """Lookups, misses, the hit ratio and the data-block hit ratio over the window, and the bytes the engine
    flushed and compacted, from the engine's `counters` (role -> counter name: ``requests`` and ``misses``,
    or ``hits`` and ``misses``; ``data_hits``/``data_misses``; ``flush_bytes``/``compaction_bytes``); NaN
    where a counter is missing or no lookup happened, or for an engine without counters (None)."""
    out = dict.fromkeys(COLUMNS, math.nan)
    if not counters:
        return out

    def delta(role: str) -> float:
        return _delta(before, after, counters[role])

    if "flush_bytes" in counters:
        out.update(engine_flush_bytes=delta("flush_bytes"), engine_compaction_bytes=delta("compaction_bytes"))
    out.update({col: delta(role) for role, col in TYPED.items() if role in counters})
    if "requests" in counters:  # every lookup counted, and the misses among them
        lookups, misses = delta("requests"), delta("misses")
        out.update(cache_lookups=lookups, cache_misses=misses)
        if lookups > 0:
            out["cache_hit_ratio"] = 1.0 - misses / lookups
        return out
    hits, misses = delta("hits"), delta("misses")
    out.update(cache_lookups=hits + misses, cache_misses=misses)
    if hits + misses > 0:
        out["cache_hit_ratio"] = hits / (hits + misses)
    if "data_hits" in counters:
        dh, dm = delta("data_hits"), delta("data_misses")
        if dh + dm > 0:
            out["cache_data_hit_ratio"] = dh / (dh + dm)
    return out
