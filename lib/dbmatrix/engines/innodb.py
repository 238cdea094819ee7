"""InnoDB, built into mariadbd: page size, page compression, buffer pool, redo log (pure)."""

from __future__ import annotations

import shlex
from types import MappingProxyType

from dbmatrix.engines.base import Engine, MiB, block_size_bytes

# Smallest buffer pool mariadbd 10.11 starts with, by page size (measured here; below it aborts).
MIN_BUFFER_POOL = MappingProxyType({"4k": 2 * MiB, "8k": 3 * MiB, "16k": 6 * MiB, "32k": 12 * MiB, "64k": 24 * MiB})
ROW_COMPRESSED_KEY_BLOCK = 8192  # KEY_BLOCK_SIZE=8 of the row_compressed level (table_engine)
# InnoDB's apparent size is the same with and without page compression (the uncompressed page count), but it
# counts the files' free pages too: 4 x 50k sysbench rows, 79.7 MB apparent against 47.9 MB of pages a full
# read of every index takes into the buffer pool (4 x 10k: 41.9 MB against 9.8 MB).
LOGICAL = ("apparent size (du --apparent-size) of sbtest/*.ibd: pages x page size, the holes page "
           "compression punches counted as the uncompressed pages they are")
ROW_COMPRESSED_LOGICAL = ("apparent size (du --apparent-size) of sbtest/*.ibd x page size / 8 KiB: "
                          "one uncompressed page per KEY_BLOCK_SIZE=8 compressed page")
_TABLE_ENGINE = MappingProxyType({
    "none": "InnoDB",
    "lz4": "InnoDB PAGE_COMPRESSED=1",
    "zlib": "InnoDB PAGE_COMPRESSED=1",
    "row_compressed": "InnoDB ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8",
})


class InnoDB(Engine):
    """Cache hit ratio from ``Innodb_buffer_pool_read_requests`` (logical page reads) and
    ``Innodb_buffer_pool_reads`` (those that read the page from the medium): 1 - reads / read_requests; its
    data files are opened O_DIRECT, so a miss is a read from the medium."""

    name = "innodb"
    title = "InnoDB"
    block_sizes = ("4k", "8k", "16k", "32k", "64k")
    compressions = ("none", "lz4", "zlib", "row_compressed")
    why_not = MappingProxyType({
        "zstd": "MariaDB 10.11 InnoDB page compression has no zstd provider",
        "snappy": "InnoDB page compression with snappy needs the provider_snappy plugin, "
                  "which Debian does not package",
    })
    option_prefix = "innodb_"
    cache_variable = "innodb_buffer_pool_size"
    harness_options = frozenset({
        "innodb_buffer_pool_size", "innodb_page_size", "innodb_compression_algorithm", "innodb_log_group_home_dir",
        "innodb_buffer_pool_load_at_startup", "innodb_buffer_pool_dump_at_shutdown",
    })
    # Cold, identical starting state: never reload a saved buffer pool.
    startup_options = ("--innodb-buffer-pool-load-at-startup=OFF", "--innodb-buffer-pool-dump-at-shutdown=OFF")
    status_counters = MappingProxyType({"requests": "innodb_buffer_pool_read_requests",
                                        "misses": "innodb_buffer_pool_reads"})
    log_dir_holds_redo = True
    galera = True
    table_engine_word = "InnoDB"
    oltp_bytes_per_row = MappingProxyType({
        "none": 300,  # 16k pages: 307 (4 x 100k rows), 398 (4 x 50k); 4k pages: 420
        "lz4": 230,  # 238, 236 (page compression, hole punching)
        "zlib": 120,  # 123
        "row_compressed": 160,  # 170 (KEY_BLOCK_SIZE=8)
    })
    tpcc_bytes_per_warehouse = 140 * MiB  # smallest measured: 149.6 MB

    def check_levels(self, block_size: str, compression: str) -> str | None:
        if compression == "row_compressed" and block_size_bytes(block_size) > 16384:
            return (f"factors: compression 'row_compressed' with block_size {block_size!r} is impossible: "
                    "InnoDB ROW_FORMAT=COMPRESSED needs innodb_page_size of 16k or less")
        return None

    def min_cache_bytes(self, block_size: str) -> int:
        return MIN_BUFFER_POOL[block_size]

    def server_options(self, block_size: str, compression: str, cache: int | None,
                       log_dir: str | None) -> list[str]:
        opts = [f"--innodb-page-size={block_size}"]
        if log_dir:
            opts.append(f"--innodb-log-group-home-dir={log_dir}")
        if compression == "lz4":
            opts += ["--plugin-load-add=provider_lz4", "--innodb-compression-algorithm=lz4"]
        elif compression == "zlib":
            opts += ["--innodb-compression-algorithm=zlib"]
        if cache is not None:
            opts.append(f"--innodb-buffer-pool-size={cache}")
        return opts

    def install_db_options(self, block_size: str) -> list[str]:
        return [f"--innodb-page-size={block_size}"]

    def table_engine(self, compression: str) -> str:
        return _TABLE_ENGINE[compression]

    def data_files_glob(self, datadir: str) -> str:
        return f"{shlex.quote(datadir + '/sbtest')}/*.ibd"

    def logical_size(self, apparent: int, compression: str, block_size: str,
                     measured: int | None) -> tuple[int, str]:
        """From the .ibd files' apparent size (`measured` is not needed)."""
        if compression == "row_compressed":
            return apparent * block_size_bytes(block_size) // ROW_COMPRESSED_KEY_BLOCK, ROW_COMPRESSED_LOGICAL
        return apparent, LOGICAL

    def move_log_command(self, datadir: str, log_dir: str) -> str:
        q = shlex.quote
        return f"mv {q(datadir)}/ib_logfile* {q(log_dir)}/"
