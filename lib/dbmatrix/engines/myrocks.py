"""MyRocks (RocksDB, the ha_rocksdb plugin): block size, block compression, block cache, WAL, direct I/O (pure)."""

from __future__ import annotations

import shlex
from types import MappingProxyType

from dbmatrix.engines.base import Engine, MiB, block_size_bytes

MIN_BLOCK_CACHE = 1024  # bytes: "block cache disabled" in the seeds' sense
COMPRESSION = MappingProxyType({
    "none": "kNoCompression", "lz4": "kLZ4Compression", "zlib": "kZlibCompression",
    "zstd": "kZSTD", "snappy": "kSnappyCompression",
})
# The block cache holds uncompressed data blocks (and the index and filter blocks). The SST files' properties
# give the key and value bytes before compression; data blocks store keys with prefix encoding, so this is a
# few percent above the blocks' own uncompressed size (4 x 10k sysbench rows: 8.80 MB against 8.51 MB the
# block cache took in after a full scan, for none and lz4 alike).
LOGICAL = ("information_schema.ROCKSDB_SST_PROPS over every SST file: raw key + raw value bytes "
           "(before compression) + index and filter block bytes")
LOGICAL_QUERY = ("SELECT COUNT(*), COALESCE(SUM(RAW_KEY_SIZE + RAW_VALUE_SIZE + INDEX_BLOCK_SIZE "
                 "+ FILTER_BLOCK_SIZE), 0) FROM information_schema.ROCKSDB_SST_PROPS")


def parse_logical(text: str) -> int:
    """`LOGICAL_QUERY`'s one row (``files<TAB>bytes``) -> bytes; refuses a dataset with no SST file."""
    fields = text.split()
    if len(fields) != 2 or not fields[0].isdigit() or int(fields[0]) == 0:
        raise ValueError(f"information_schema.ROCKSDB_SST_PROPS: no SST file to measure ({text.strip()!r})")
    return int(fields[1])


class MyRocks(Engine):
    """Cache hit ratio from ``rocksdb_block_cache_hit`` / ``rocksdb_block_cache_miss`` (data, index and
    filter blocks) and the data blocks alone (``rocksdb_block_cache_data_hit`` / ``_miss``): hit / (hit +
    miss); the harness sets direct reads, so a miss is a read from the medium. The bytes written by memtable
    flushes and by compactions over the window (lz4 compresses these SST writes, never the WAL): a claim about
    compressed writes needs them above zero."""

    name = "myrocks"
    title = "MyRocks"
    block_sizes = ("4k", "8k", "16k", "32k", "64k")
    compressions = ("none", "lz4", "zlib", "zstd", "snappy")
    why_not = MappingProxyType({"row_compressed": "ROW_FORMAT=COMPRESSED is an InnoDB table format"})
    plugin = "ha_rocksdb.so"
    option_prefix = "rocksdb_"
    cache_variable = "rocksdb_block_cache_size"
    harness_options = frozenset({"rocksdb_block_cache_size", "rocksdb_block_size", "rocksdb_default_cf_options",
                                 "rocksdb_wal_dir", "rocksdb_cache_index_and_filter_blocks"})
    index_cache_option = "rocksdb_cache_index_and_filter_blocks"
    status_counters = MappingProxyType({
        "hits": "rocksdb_block_cache_hit", "misses": "rocksdb_block_cache_miss",
        "data_hits": "rocksdb_block_cache_data_hit", "data_misses": "rocksdb_block_cache_data_miss",
        "flush_bytes": "rocksdb_flush_write_bytes", "compaction_bytes": "rocksdb_compact_write_bytes",
        "index_misses": "rocksdb_block_cache_index_miss",
        "index_insert_bytes": "rocksdb_block_cache_index_bytes_insert",
        "data_insert_bytes": "rocksdb_block_cache_data_bytes_insert",
    })
    log_dir_holds_redo = False  # the WAL moves; the server's InnoDB keeps its redo log in the datadir
    foreign_keys = False
    tpcc_isolation = ("RC", "RR")  # MyRocks refuses the others (error 4057)
    table_engine_word = "rocksdb"
    oltp_bytes_per_row = MappingProxyType({
        "none": 200,  # 212-215 after flush and full compaction
        "lz4": 195,  # 204
        "snappy": 195,  # like lz4 on sysbench's random digits
        "zstd": 100,  # 105
        "zlib": 100,  # zlib and zstd halve sysbench's strings
    })
    tpcc_bytes_per_warehouse = 70 * MiB  # smallest measured: 76.1 MB
    logical_query = LOGICAL_QUERY
    # Snapshots hold compacted SSTs and no WAL: every run starts from the same LSM shape.
    after_load = (("SET GLOBAL rocksdb_force_flush_memtable_now=1", 600.0),
                  ("SET GLOBAL rocksdb_compact_cf='default'", 3600.0))

    def min_cache_bytes(self, block_size: str) -> int:
        return MIN_BLOCK_CACHE

    def server_options(self, block_size: str, compression: str, cache: int | None,
                       log_dir: str | None) -> list[str]:
        opts = [
            f"--plugin-load-add={self.plugin}",
            f"--rocksdb-block-size={block_size_bytes(block_size)}",
            f"--rocksdb-default-cf-options=compression={COMPRESSION[compression]}",
            "--rocksdb-use-direct-reads=ON",
            "--rocksdb-use-direct-io-for-flush-and-compaction=ON",
        ]
        if log_dir:
            opts.append(f"--rocksdb-wal-dir={log_dir}")
        if cache is not None:
            opts.append(f"--rocksdb-block-cache-size={cache}")
        return opts

    def table_engine(self, compression: str) -> str:
        return "rocksdb"

    def data_files_glob(self, datadir: str) -> str:
        """The SST files (not RocksDB's LOG, OPTIONS or MANIFEST files)."""
        return f"{shlex.quote(datadir + '/#rocksdb')}/*.sst"

    def logical_size(self, apparent: int, compression: str, block_size: str,
                     measured: int | None) -> tuple[int, str]:
        """From the SST properties (`measured`, read while a server is up)."""
        if measured is None:
            raise ValueError("MyRocks needs its SST properties measured")
        return measured, LOGICAL

    def parse_logical(self, text: str) -> int:
        return parse_logical(text)

    def move_log_command(self, datadir: str, log_dir: str) -> str:
        """The *.log WAL files (empty after the snapshot's flush, moved for consistency)."""
        q = shlex.quote
        return f"find {q(datadir + '/#rocksdb')} -maxdepth 1 -name '*.log' -exec mv -t {q(log_dir)} {{}} +"
