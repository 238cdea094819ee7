"""The experiment factors: one :class:`Factor` entry per factor in :data:`REGISTRY`, the single place for its
name, default level, validation of one level, cell-id tag, table label and claim wording.

Everything else derives from the registry: :data:`FACTORS` (the names in order), :data:`FACTOR_DEFAULTS`,
:data:`GALERA_FACTORS`, :data:`DATASET_FACTORS`, :data:`MODEL_FACTORS`, the spec's level validation
(:func:`dbmatrix.spec.experiment._levels`), ``Cell.cell_id``, the paper tables' labels
(:func:`factor_label`) and the claims' wording (:func:`factor_word`).

A factor is validated one level at a time here. Checks that involve more than one factor stay where the
whole spec is known, in :mod:`dbmatrix.spec.experiment` and its parts: which block sizes and compressions
each engine allows (``check_combination``), open-loop levels needing the closed-loop level, Galera-only
factors needing a Galera topology and write targets within the cluster's nodes (``check_topology``), and
media defined on the host (``check_media``). Empty level lists and duplicate levels are rejected there too, for every
factor alike.

How to add a factor
-------------------
1. Add one ``Factor(...)`` entry to :data:`REGISTRY`, at the end: the registry's order is the order of
   ``Cell``'s fields, of the cells of a design (the last factor varies fastest), of cell-id parts and of
   table columns, so appending keeps every existing cell, run id and plan order. Give it

   - a ``default`` that reproduces what the harness did before the factor existed,
   - a ``normalise`` function for one level that returns the canonical level or raises :class:`SpecError`
     starting ``factors.<name>:`` and saying what is allowed,
   - a ``cell_tag`` that returns ``None`` at the default (the level is left out of the cell id, so ids,
     run ids and the stored results of earlier studies stay valid) and a short tag otherwise,
   - ``digest_omits_default=True`` (a spec that keeps the default digests as before, so results stay
     bound to their spec),
   - a ``label`` for the paper's tables and a ``word`` for claim comparisons; ``galera_only``,
     ``dataset`` and ``modelled`` when they apply.
2. Add the field, with the same default, to ``Cell`` in :mod:`dbmatrix.spec.cells` (a frozen dataclass
   the rest of the code reads by attribute; ``tests/unit/test_factors.py`` checks that its fields and
   defaults match the registry).
3. Render the level as server or client options (``dbmatrix.run.mysqld`` / ``dbmatrix.workload``) and add
   any server option it sets to ``HARNESS_OPTIONS``, so a spec cannot also hold it constant.
4. Add its good and bad levels to ``tests/unit/test_factors.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dbmatrix import engines
from dbmatrix.engines import block_size_bytes
from dbmatrix.spec.errors import SpecError

# The built-in engines' levels (dbmatrix.engines, where an engine declares them), by engine.
ENGINES = engines.names()
BLOCK_SIZES = {e.name: e.block_sizes for e in engines.engines()}
COMPRESSIONS = {e.name: e.compressions for e in engines.engines()}
WORKLOADS = ("oltp_read_write", "oltp_read_only", "oltp_point_select", "oltp_write_only", "tpcc")
# Short tags in cell ids (the default workload has none, so ids of read-write cells stay short).
WORKLOAD_TAGS = {"oltp_read_write": "", "oltp_read_only": "ro", "oltp_point_select": "ps",
                 "oltp_write_only": "wo", "tpcc": "tpcc"}
MAX_RATE_FRACTION = 2.0
MAX_SLAVE_THREADS = 512
# Server instances per run of the instances topology (a port block per host holds 40 ports).
MAX_INSTANCES = 64
PINNINGS = ("none", "instance", "numa")
MAX_GROUP_COMMIT_USEC = 1_000_000  # binlog_commit_wait_usec's own limit is larger; a second is plenty


@dataclass(frozen=True)
class Factor:
    """One experiment factor: what a spec may set it to, and how the harness, tables and claims name it."""

    name: str
    default: Any  # the single level when a spec does not vary the factor
    normalise: Callable[[Any], Any]  # one level as written in a spec -> canonical level, else SpecError
    cell_tag: Callable[[Any], str | None]  # the level's part of a cell id; None: left out of the id
    label: str  # short column/row label in the paper's tables ("Cache %")
    word: str  # the factor in claim comparisons and estimate bases ("cache 25 % / 100 %")
    unit: str = ""  # written after a level in claim comparisons
    title: str = ""  # the long name on an axis or a control ("Cache (% of data)"); default: the label
    doc: str = ""  # what the factor is
    galera_only: bool = False  # only a galera topology may vary it; a standalone spec keeps the default
    instances_only: bool = False  # only the instances topology may vary it; other specs keep the default
    dataset: bool = False  # prepared datasets differ by it (cells differing only in other factors share one)
    modelled: bool = True  # a term candidate of the closed-loop throughput models in the claims
    digest_omits_default: bool = False  # left out of the spec digest while the spec keeps the default

    def check(self, level: Any) -> Any:
        """The canonical level; raises :class:`SpecError` naming ``factors.<name>`` and what is allowed."""
        return self.normalise(level)

    def tag(self, level: Any) -> str | None:
        return self.cell_tag(level)


# ------------------------------------------------------------------------- one level of each factor


def _engine(lv: Any) -> Any:
    if lv not in engines.names():
        raise SpecError(f"factors.engine: unknown level {lv!r}; allowed: {', '.join(engines.names())}")
    return lv


def _cache_pct(lv: Any) -> Any:
    if isinstance(lv, bool) or not isinstance(lv, (int, float)) or not 0 <= lv <= 100:
        raise SpecError(f"factors.cache_pct: {lv!r} is not a percentage; allowed: numbers from "
                        "0 (the smallest cache the engine allows) to 100")
    return int(lv) if float(lv).is_integer() else float(lv)


def _block_size(lv: Any) -> Any:
    """Any engine's block size; which engine allows which is checked per cell (``check_combination``)."""
    lv = str(lv).lower()
    allowed = sorted(set().union(*(e.block_sizes for e in engines.engines())), key=block_size_bytes)
    if lv not in allowed:
        raise SpecError(f"factors.block_size: unknown level {lv!r}; allowed: {', '.join(allowed)}")
    return lv


def _compression(lv: Any) -> Any:
    """Any engine's compression; which engine allows which is checked per cell (``check_combination``)."""
    allowed = sorted(set().union(*(e.compressions for e in engines.engines())))
    if lv not in allowed:
        raise SpecError(f"factors.compression: unknown level {lv!r}; allowed: {', '.join(allowed)}")
    return lv


def _medium(lv: Any) -> Any:
    """A medium's name; whether the host defines it is checked against the inventory (``check_media``)."""
    if not isinstance(lv, str) or not lv:
        raise SpecError(f"factors.medium: {lv!r} must be the name of a medium in the inventory")
    return lv


def _threads(lv: Any) -> Any:
    if isinstance(lv, bool) or not isinstance(lv, int) or lv < 1:
        raise SpecError(f"factors.threads: {lv!r} must be a positive integer")
    return lv


def _workload(lv: Any) -> Any:
    if lv not in WORKLOADS:
        raise SpecError(f"factors.workload: unknown workload {lv!r}; allowed: {', '.join(WORKLOADS)}")
    return lv


def _log_medium(lv: Any) -> Any:
    if not isinstance(lv, str) or not lv:
        raise SpecError(f"factors.log_medium: {lv!r} must be 'same' (redo log/WAL with the data) "
                        "or the name of a medium in the inventory")
    return lv


def _follower_medium(lv: Any) -> Any:
    if not isinstance(lv, str) or not lv:
        raise SpecError(f"factors.follower_medium: {lv!r} must be 'same' (every Galera node on the cell's "
                        "medium) or the name of a medium in the inventory for nodes 2..N")
    return lv


def _rate_fraction(lv: Any) -> Any:
    if lv in ("closed", None):
        lv = 0
    if isinstance(lv, bool) or not isinstance(lv, (int, float)) or not 0 <= lv <= MAX_RATE_FRACTION:
        raise SpecError(f"factors.rate_fraction: {lv!r} is not allowed; allowed: 'closed' (or 0) for "
                        f"closed-loop runs, or a fraction in (0, {MAX_RATE_FRACTION:g}] of the cell's "
                        "measured closed-loop throughput for open-loop (--rate) runs")
    return int(lv) if float(lv).is_integer() else float(lv)


def _slave_threads(lv: Any) -> Any:
    if isinstance(lv, bool) or not isinstance(lv, int) or not 1 <= lv <= MAX_SLAVE_THREADS:
        raise SpecError(f"factors.slave_threads: {lv!r} must be an integer from 1 to {MAX_SLAVE_THREADS} "
                        "(wsrep_slave_threads of every Galera node)")
    return lv


def _write_to(lv: Any) -> Any:
    """``nodeN`` (an integer N is accepted) or ``all``; N within the cluster is checked with the topology."""
    lv = f"node{lv}" if isinstance(lv, int) and not isinstance(lv, bool) else lv
    if not isinstance(lv, str) or not (lv == "all" or (lv.startswith("node") and lv[4:].isdigit()
                                                       and int(lv[4:]) >= 1)):
        raise SpecError(f"factors.write_to: {lv!r} is not allowed; allowed: 'node1', 'node2', ... "
                        "(the client writes to that node) or 'all' (client threads spread over every node)")
    return lv


def _instances(lv: Any) -> Any:
    if isinstance(lv, bool) or not isinstance(lv, int) or not 1 <= lv <= MAX_INSTANCES:
        raise SpecError(f"factors.instances: {lv!r} must be an integer from 1 to {MAX_INSTANCES} "
                        "(server instances of the run, dealt over topology.hosts)")
    return lv


def _pinning(lv: Any) -> Any:
    if lv in (None, False):
        lv = "none"
    if lv not in PINNINGS:
        raise SpecError(f"factors.pinning: unknown level {lv!r}; allowed: none (no CPU sets), instance (one "
                        "CPU set per instance on its host), numa (instances grouped per NUMA node)")
    return lv


def _group_commit(lv: Any) -> Any:
    if lv in ("off", None, False):
        lv = 0
    if isinstance(lv, bool) or not isinstance(lv, int) or not 0 <= lv <= MAX_GROUP_COMMIT_USEC:
        raise SpecError(f"factors.group_commit: {lv!r} is not allowed; allowed: 0 or 'off' (MariaDB's default: "
                        "binlog_commit_wait_count 0, commits group only when they queue behind a sync) or the "
                        f"microseconds, 1 to {MAX_GROUP_COMMIT_USEC}, the group's leader waits for the cell's "
                        "client threads to join it (binlog_commit_wait_usec; needs server_options.log_bin)")
    return lv


INDEX_CACHES = ("cache", "table")


def _index_cache(lv: Any) -> Any:
    if lv not in INDEX_CACHES:
        raise SpecError(f"factors.index_cache: unknown level {lv!r}; allowed: cache (MyRocks' default: index and "
                        "filter blocks compete with data blocks in the block cache) or table (index and filter "
                        "blocks held by the table readers, outside the block cache: "
                        "rocksdb_cache_index_and_filter_blocks OFF); MyRocks only")
    return lv


SYSTEM_BUILD = "system"  # the host's installed server (dbmatrix.hosts.builds.SYSTEM)


def _server_build(lv: Any) -> Any:
    """A build's name; whether the host defines it is checked against the inventory (``check_builds``)."""
    if not isinstance(lv, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", lv):
        raise SpecError(f"factors.server_build: {lv!r} must be 'system' (the host's installed server) or the name "
                        "of a build in the host's inventory (lower-case letters, digits, '_')")
    return lv


# ------------------------------------------------------------------------------ the registry

REGISTRY: tuple[Factor, ...] = (
    Factor("engine", "innodb", _engine, lambda v: f"{v}",
           title="Engine",
           label="Engine", word="engine", dataset=True,
           doc="storage engine: InnoDB or MyRocks"),
    Factor("cache_pct", 100, _cache_pct, lambda v: f"c{v:g}".replace(".", "p"),
           title="Cache (% of data)",
           label="Cache %", word="cache", unit=" %",
           doc="buffer pool / block cache as a share of the dataset (0: the engine's minimum)"),
    Factor("block_size", "16k", _block_size, lambda v: f"b{v}",
           title="Block size",
           label="Page", word="block", dataset=True,
           doc="InnoDB page size / RocksDB block size"),
    Factor("compression", "none", _compression, lambda v: f"{v}",
           title="Compression",
           label="Compr.", word="compression", dataset=True,
           doc="page or block compression (row_compressed: InnoDB ROW_FORMAT=COMPRESSED)"),
    Factor("medium", "disk", _medium, lambda v: f"{v}",
           title="Medium",
           label="Medium", word="medium",
           doc="the inventory medium holding the datadir"),
    Factor("threads", 4, _threads, lambda v: f"t{v}",
           title="Client threads",
           label="Thr.", word="threads",
           doc="sysbench client threads"),
    Factor("workload", "oltp_read_write", _workload, lambda v: WORKLOAD_TAGS.get(v, v) or None,
           title="Workload",
           label="Workload", word="workload", dataset=True,  # word: the name itself (no shorter word yet)
           doc="sysbench workload; the default is the spec's workload.name"),
    Factor("log_medium", "same", _log_medium, lambda v: None if v == "same" else f"log{v}",
           title="Log medium",
           label="Log medium", word="log_medium",  # word: the name itself (no shorter word yet)
           doc="redo log / RocksDB WAL: 'same' as the data, or another medium's name"),
    Factor("rate_fraction", 0, _rate_fraction, lambda v: f"o{v * 100:g}".replace(".", "p") if v else None,
           title="Rate (fraction of peak)",
           label="Rate", word="rate_fraction", modelled=False,  # word: the name itself (no shorter word yet)
           doc="0: closed loop; f > 0: open loop at f x the cell's measured closed-loop peak"),
    # The two Galera factors keep their names as table labels (as before the registry), so the generated
    # tables stay byte-identical; a nicer label is a separate, visible change.
    Factor("slave_threads", 1, _slave_threads, lambda v: None if v == 1 else f"st{v}",
           title="Applier threads",
           label="slave_threads", word="appliers", galera_only=True, digest_omits_default=True,
           doc="galera topology: wsrep_slave_threads on every node"),
    Factor("write_to", "node1", _write_to,
           lambda v: None if v == "node1" else f"w{v.removeprefix('node')}",
           title="Writes to",
           label="write_to", word="write_to", galera_only=True, digest_omits_default=True,
           doc="galera topology: the node the client writes to ('nodeN'), or 'all' (round robin)"),
    Factor("follower_medium", "same", _follower_medium, lambda v: None if v == "same" else f"f{v}",
           title="Follower medium",
           label="Followers", word="followers' medium", galera_only=True, digest_omits_default=True,
           doc="galera topology: the medium of nodes 2..N ('same': the cell's medium); a throttled medium "
               "makes the followers the bottleneck (topology.calibrate sets its limit)"),
    Factor("instances", 1, _instances, lambda v: None if v == 1 else f"i{v}",
           title="Server instances",
           label="Inst.", word="instances", instances_only=True, digest_omits_default=True,
           doc="instances topology: mariadbd instances per run (each its own datadir), client threads "
               "spread over their sockets"),
    Factor("pinning", "none", _pinning, lambda v: None if v == "none" else f"pin{v}",
           title="CPU pinning",
           label="Pinning", word="pinning", instances_only=True, digest_omits_default=True,
           doc="instances topology: none, one CPU set per instance, or instances grouped per NUMA node"),
    Factor("group_commit", 0, _group_commit, lambda v: None if v == 0 else f"gc{v}",
           title="Binlog group-commit wait (µs)",
           label="Group commit", word="group-commit wait", unit=" µs", digest_omits_default=True,
           doc="binary-log group commit: 0, MariaDB's default (binlog_commit_wait_count 0: commits group only "
               "when they queue behind a sync); U > 0, the group's leader waits up to U µs for the cell's "
               "client threads to join (binlog_commit_wait_count = threads, binlog_commit_wait_usec = U), as "
               "MySQL's binlog_group_commit_sync_delay with its no_delay_count; needs the binary log on"),
    Factor("index_cache", "cache", _index_cache, lambda v: None if v == "cache" else f"ix{v}",
           title="Index and filter blocks",
           label="Index blocks", word="index blocks in", digest_omits_default=True,
           doc="MyRocks: index and filter blocks in the block cache (cache, the default) or held by the table "
               "readers outside it (table: rocksdb_cache_index_and_filter_blocks OFF); a diagnostic factor"),
    Factor("server_build", SYSTEM_BUILD, _server_build, lambda v: None if v == SYSTEM_BUILD else v,
           title="Server build",
           label="Build", word="server build", dataset=True, digest_omits_default=True,
           doc="the server binary: 'system' (the host's installed server) or a build the inventory names under "
               "builds: (a basedir with its own server, install script, plugins; hosts.builds); each build loads "
               "its own datasets"),
)

BY_NAME: Mapping[str, Factor] = MappingProxyType({f.name: f for f in REGISTRY})

FACTORS: tuple[str, ...] = tuple(f.name for f in REGISTRY)
# Factor name -> default single level when a spec does not vary it.
FACTOR_DEFAULTS: Mapping[str, Any] = MappingProxyType({f.name: f.default for f in REGISTRY})
# Factors that only exist for a galera topology; a standalone spec keeps them at their defaults.
GALERA_FACTORS: tuple[str, ...] = tuple(f.name for f in REGISTRY if f.galera_only)
# Factors that only exist for the instances topology (several servers per host).
INSTANCES_FACTORS: tuple[str, ...] = tuple(f.name for f in REGISTRY if f.instances_only)
# Factors a prepared dataset depends on.
DATASET_FACTORS: tuple[str, ...] = tuple(f.name for f in REGISTRY if f.dataset)
# Term candidates of the closed-loop throughput models (every factor but the open-loop rate).
MODEL_FACTORS: tuple[str, ...] = tuple(f.name for f in REGISTRY if f.modelled)


def factor(name: str) -> Factor:
    """The registry entry of `name`; a :class:`SpecError` listing the factors if there is none."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise SpecError(f"factors: unknown factor {name!r}; allowed: {', '.join(FACTORS)}") from None


def factor_label(name: str) -> str:
    """The factor's table label; any other name (a model term, a column) as it is."""
    f = BY_NAME.get(name)
    return f.label if f else name


def factor_title(name: str) -> str:
    """The factor's long name for axes and controls; any other name as it is."""
    f = BY_NAME.get(name)
    return (f.title or f.label) if f else name


def factor_word(name: str) -> str:
    """The factor's word in claim comparisons; any other name as it is."""
    f = BY_NAME.get(name)
    return f.word if f else name


def factor_unit(name: str) -> str:
    """What claim comparisons write after a level of the factor (" %" for cache_pct); "" otherwise."""
    f = BY_NAME.get(name)
    return f.unit if f else ""


def cell_id(levels: Mapping[str, Any]) -> str:
    """The cell id of one level per factor: the factors' tags in registry order, joined by '-'."""
    return "-".join(t for f in REGISTRY if (t := f.tag(levels[f.name])) is not None)
