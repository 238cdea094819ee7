"""Cache hit ratios from the engines' own status counters over the measured window (pure).

A run saves ``SHOW GLOBAL STATUS`` just before and just after its window (``status-before.tsv``,
``status-after.tsv``); the deltas say how often a read found its page or block in the engine's cache:

- InnoDB: ``Innodb_buffer_pool_read_requests`` (logical page reads) and ``Innodb_buffer_pool_reads``
  (those that had to read the page from the medium): hit ratio = 1 - reads / read_requests.
- MyRocks: ``rocksdb_block_cache_hit`` / ``rocksdb_block_cache_miss`` (data, index and filter blocks)
  and the data blocks alone (``rocksdb_block_cache_data_hit`` / ``_miss``): hit / (hit + miss).

With direct reads (the harness sets them for MyRocks; InnoDB opens its data files O_DIRECT) a miss is a
read from the medium, so the ratio is the share of reads the cache saved, which is what "cache size as a
share of the data" is meant to change. A cell whose two cache levels give the same ratio did not test
the cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

COUNTERS = {
    "innodb": {"requests": "innodb_buffer_pool_read_requests", "misses": "innodb_buffer_pool_reads"},
    "myrocks": {"hits": "rocksdb_block_cache_hit", "misses": "rocksdb_block_cache_miss",
                "data_hits": "rocksdb_block_cache_data_hit", "data_misses": "rocksdb_block_cache_data_miss"},
}
COLUMNS = ("cache_lookups", "cache_misses", "cache_hit_ratio", "cache_data_hit_ratio", "engine_flush_bytes",
           "engine_compaction_bytes")
# MyRocks' bytes written by memtable flushes and by compactions over the window (lz4 compresses these SST
# writes, never the WAL): a claim about compressed writes needs them above zero
ENGINE_WRITES = {"myrocks": ("rocksdb_flush_write_bytes", "rocksdb_compact_write_bytes")}


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


def cache_counters(engine: str, before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, float]:
    """Lookups, misses, the hit ratio and (MyRocks) the data-block hit ratio over the window; NaN where a
    counter is missing or no lookup happened."""
    nan = math.nan
    out = dict.fromkeys(COLUMNS, nan)
    names = COUNTERS.get(engine)
    if names is None:
        return out
    if engine == "innodb":
        lookups, misses = _delta(before, after, names["requests"]), _delta(before, after, names["misses"])
        out.update(cache_lookups=lookups, cache_misses=misses)
        if lookups > 0:
            out["cache_hit_ratio"] = 1.0 - misses / lookups
        return out
    flush, compact = ENGINE_WRITES[engine]
    out.update(engine_flush_bytes=_delta(before, after, flush), engine_compaction_bytes=_delta(before, after, compact))
    hits, misses = _delta(before, after, names["hits"]), _delta(before, after, names["misses"])
    dh, dm = _delta(before, after, names["data_hits"]), _delta(before, after, names["data_misses"])
    out.update(cache_lookups=hits + misses, cache_misses=misses)
    if hits + misses > 0:
        out["cache_hit_ratio"] = hits / (hits + misses)
    if dh + dm > 0:
        out["cache_data_hit_ratio"] = dh / (dh + dm)
    return out
