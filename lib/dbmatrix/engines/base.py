"""What the harness knows of one storage engine (pure): the :class:`Engine` an engine module subclasses.

An engine declares, in one place, everything that used to be a branch on its name elsewhere: the levels
of the engine-specific factors it runs (block sizes, compressions, and why it cannot run the others), the
server options a cell renders (plugin, page/block size, compression, cache size, log directory), the
variable that holds its cache and the smallest cache it starts with, the status counters its cache and
write metrics come from, how its dataset is measured (data files, logical size, what runs after loading)
and the sizes the plan's space check assumes. Nothing here runs a command: the run side
(:mod:`dbmatrix.run.mysqld`, :mod:`dbmatrix.run.datasets`) turns these answers into commands.

This package is the lowest layer: it imports no other dbmatrix package, so the spec, the parsers and the
run side can all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

MiB = 1024 * 1024
_EMPTY: Mapping[str, str] = MappingProxyType({})


def block_size_bytes(level: str) -> int:
    """A block size level ("16k") in bytes."""
    return int(level[:-1]) * 1024


class Engine:
    """One storage engine. Subclasses set the class attributes and override the methods whose default
    does not fit; one instance of each is registered (:mod:`dbmatrix.engines`)."""

    name: str = ""  # the spec's level of factors.engine
    title: str = ""  # how the text names it ("InnoDB")
    block_sizes: tuple[str, ...] = ()  # levels of factors.block_size it runs
    compressions: tuple[str, ...] = ()  # levels of factors.compression it runs
    why_not: Mapping[str, str] = _EMPTY  # a compression it cannot run -> why (the spec's error says it)
    plugin: str | None = None  # the server plugin it needs (--plugin-load-add); None: built into mariadbd
    # Its server options' prefix: a spec's constant option with a plugin engine's prefix reaches only that
    # engine's cells (mariadbd refuses the option where the plugin is not loaded).
    option_prefix: str = ""
    cache_variable: str = ""  # the server variable holding its cache size (SHOW GLOBAL VARIABLES)
    # Server options its rendering sets (underscores): a spec may not hold them constant.
    harness_options: frozenset[str] = frozenset()
    # Options every server gets while this engine is built in, whatever the cell's engine (before the cell's own).
    startup_options: tuple[str, ...] = ()
    # Role -> SHOW GLOBAL STATUS counter (lower case), read by dbmatrix.parse.cache_counters: "requests" and
    # "misses" (every lookup and those that read the medium), or "hits" and "misses"; "data_hits" and
    # "data_misses" (data blocks alone); "flush_bytes" and "compaction_bytes" (bytes the engine wrote);
    # "index_misses", "index_insert_bytes", "data_insert_bytes" (index and data blocks the cache took in).
    status_counters: Mapping[str, str] = _EMPTY
    # The boolean server option that keeps index and filter blocks in the block cache (factors.index_cache:
    # "table" turns it OFF); None: the engine has no such setting, only index_cache "cache" is allowed.
    index_cache_option: str | None = None
    # Whether the cell's log directory (factors.log_medium) takes InnoDB's redo log; when it takes another
    # log (RocksDB's WAL) the redo log of the server's InnoDB stays in the datadir.
    log_dir_holds_redo: bool = True
    galera: bool = False  # Galera replicates its tables
    foreign_keys: bool = True  # TPC-C's use_fk
    tpcc_isolation: tuple[str, ...] | None = None  # TPC-C isolation levels it allows; None: every level
    # The table engine's first word in CREATE TABLE (sysbench's --mysql-storage-engine starts with it).
    table_engine_word: str = ""
    # Smallest measured bytes per sysbench row (physical size of the tables' files) by compression, with
    # "none" as the fallback; TPC-C: one warehouse's tables, uncompressed (dbmatrix.spec.sizing).
    oltp_bytes_per_row: Mapping[str, int] = MappingProxyType({})
    tpcc_bytes_per_warehouse: int = 0
    # SQL that measures the tables' logical size while a server is up (parsed by parse_logical); None: the
    # logical size comes from the data files' apparent size (logical_size).
    logical_query: str | None = None
    # Statements run after loading the tables, before the clean shutdown and the snapshot: (SQL, timeout s).
    after_load: tuple[tuple[str, float], ...] = ()

    # ------------------------------------------------------------------ levels

    def check_levels(self, block_size: str, compression: str) -> str | None:
        """Why a combination of levels it allows one by one cannot run (the whole message), or None."""
        return None

    # ------------------------------------------------------------------ server

    def min_cache_bytes(self, block_size: str) -> int:
        """The smallest cache mariadbd starts with (what cache_pct 0 means)."""
        raise NotImplementedError

    def server_options(self, block_size: str, compression: str, cache: int | None,
                       log_dir: str | None) -> list[str]:
        """The options a cell sets (identical at init, prepare and run); `cache` None: the server's default,
        `log_dir`: the redo log or WAL directory when it lives on another medium."""
        raise NotImplementedError

    def install_db_options(self, block_size: str) -> list[str]:
        """What mariadb-install-db needs besides the common options (a page size fixed at creation)."""
        return []

    def table_engine(self, compression: str) -> str:
        """The engine string sysbench pastes into CREATE TABLE (carries the table options)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ dataset

    def data_files_glob(self, datadir: str) -> str:
        """Shell words naming the tables' data files in `datadir`."""
        raise NotImplementedError

    def logical_size(self, apparent: int, compression: str, block_size: str,
                     measured: int | None) -> tuple[int, str]:
        """The tables' logical (uncompressed) size and how it was reckoned, from the data files' apparent size
        or `measured` (the answer to logical_query); ValueError when it needs a measurement it lacks."""
        raise NotImplementedError

    def parse_logical(self, text: str) -> int:
        """logical_query's answer -> bytes."""
        raise NotImplementedError(f"{self.title} measures no logical size with a server")

    def move_log_command(self, datadir: str, log_dir: str) -> str:
        """Shell command moving the restored datadir's log files to `log_dir`."""
        raise NotImplementedError
