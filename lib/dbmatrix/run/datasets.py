"""Datasets: prepared once per dataset key and host, cleanly shut down, snapshotted, restored per run.

Every run starts from a copy of the same snapshot, so repetitions are independent and comparable.
Two sizes of the loaded tables are measured: physical (what occupies the medium) and logical (uncompressed,
what the buffer pool or block cache holds); `cache_pct` is a percentage of the spec's `cache_basis`.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from dbmatrix import engines
from dbmatrix.engines.innodb import LOGICAL as INNODB_LOGICAL  # noqa: F401 (how the records name the methods)
from dbmatrix.engines.myrocks import LOGICAL as ROCKSDB_LOGICAL  # noqa: F401
from dbmatrix.hosts.builds import ServerBuild
from dbmatrix.hosts.remote import Host
from dbmatrix.run.mysqld import (
    MariaDBServer,
    ServerPaths,
    cache_bytes,
    cell_build,
    install_db_command,
    render_options,
    requested_cache_bytes,
    table_engine,
)
from dbmatrix.spec.errors import SpecError
from dbmatrix.spec.experiment import CACHE_BASES, Cell, DatasetKey, Experiment
from dbmatrix.workload import commands as workloads
from dbmatrix.workload import sysbench

MiB = 1024 * 1024
PREPARE_CACHE = 256 * MiB  # cache while loading; the snapshot does not depend on it


@dataclass(frozen=True)
class DatasetInfo:
    key: str
    host: str
    snapshot: str
    engine: str
    block_size: str
    compression: str
    tables: int
    table_size: int
    data_physical_bytes: int  # `du` of the tables' files: what occupies the medium
    data_logical_bytes: int  # uncompressed size, measured as `logical_method` says
    datadir_physical_bytes: int
    datadir_logical_bytes: int
    prepare_s: float
    created_utc: str
    size_basis: str = ("physical (du) size of the tables' data files after a clean shutdown "
                       "(InnoDB sbtest/*.ibd; MyRocks *.sst after flush and full compaction)")
    schema: str = "oltp"  # oltp (sysbench's sbtest tables) or tpcc (table_size is then warehouses)
    # None: a marker written before the logical size was measured (its data_logical_bytes is the apparent
    # size, which for MyRocks is compressed); prepare_dataset measures it again from the snapshot.
    logical_method: str | None = None
    data_apparent_bytes: int | None = None  # apparent size of the tables' files (du --apparent-size)
    # The campaign this snapshot was loaded for (:func:`fresh_token`) when the spec loads datasets per campaign
    # (``dataset_load: per_campaign``); None: loaded for whoever came first, reused by every later campaign.
    prepared_for: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def basis_bytes(self, basis: str) -> int:
        """The size `cache_pct` is a percentage of under `basis` (spec.experiment.CACHE_BASES)."""
        if basis not in CACHE_BASES:
            raise ValueError(f"cache_basis: {basis!r}; allowed: {', '.join(CACHE_BASES)}")
        if basis == "physical":
            return self.data_physical_bytes
        if self.logical_method is None:
            raise ValueError(f"dataset {self.key}: no measured logical size (a snapshot marker from before "
                             "cache_basis); prepare_dataset measures it")
        return self.data_logical_bytes


def cache_sizing(cell: Cell, info: DatasetInfo, basis: str) -> dict[str, Any]:
    """A cell's cache size and how it was reckoned (manifest fields): cache_pct of the basis size, rounded
    down to MiB and never below the engine's minimum."""
    size = info.basis_bytes(basis)
    cache, requested = cache_bytes(cell, size), requested_cache_bytes(cell, size)
    return {"cache_pct": cell.cache_pct, "cache_basis": basis, "cache_basis_bytes": size, "cache_bytes": cache,
            "cache_bytes_requested": requested, "cache_clamped_to_minimum": cache > requested}


def parse_du(text: str) -> int:
    """First field of `du -sB1` output."""
    return int(text.split()[0])


def data_files_glob(datadir: str, engine: str) -> str:
    """Shell words naming the table data files (InnoDB's sbtest/*.ibd, RocksDB's SST files): the engine's."""
    return engines.engine(engine).data_files_glob(datadir)


def parse_du_total(text: str) -> int:
    """The `total` line of `du -c` output (0 when there were no files)."""
    for line in reversed(text.splitlines()):
        fields = line.split()
        if len(fields) == 2 and fields[1] == "total":
            return int(fields[0])
    return 0


def measure_sizes(host: Host, datadir: str, engine: str) -> dict[str, Any]:
    """Physical and apparent sizes from the files (the logical size is measured per engine besides)."""
    q = shlex.quote
    files = data_files_glob(datadir, engine)
    return {
        "data_physical_bytes": parse_du_total(host.run(f"du -cB1 {files}").stdout),
        "data_apparent_bytes": parse_du_total(host.run(f"du -cB1 --apparent-size {files}").stdout),
        "datadir_physical_bytes": parse_du(host.run(f"du -sB1 {q(datadir)}").stdout),
        "datadir_logical_bytes": parse_du(host.run(f"du -sB1 --apparent-size {q(datadir)}").stdout),
    }


def logical_sizes(key: DatasetKey, apparent: int, measured: int | None) -> dict[str, Any]:
    """data_logical_bytes and logical_method, as the engine reckons them: from the apparent size (InnoDB) or
    from `measured`, its `logical_query`'s answer while a server was up (MyRocks' SST properties)."""
    try:
        size, method = engines.engine(key.engine).logical_size(apparent, key.compression, key.block_size, measured)
    except ValueError as exc:
        raise ValueError(f"dataset {key.name}: {exc}") from None
    return {"data_logical_bytes": size, "logical_method": method}


def upgraded_marker(old: dict[str, Any], key: DatasetKey, measured: int | None) -> dict[str, Any]:
    """A snapshot marker from before the logical size was measured, with it (pure): the old
    data_logical_bytes was the apparent size; an engine measuring it with a server gets `measured`."""
    apparent = int(old.get("data_apparent_bytes") or old["data_logical_bytes"])
    return {**old, "data_apparent_bytes": apparent, **logical_sizes(key, apparent, measured)}


def fresh_token(results_root: str, experiment: str, campaign: int) -> str:
    """What a snapshot loaded for one campaign of one study is marked with (``DatasetInfo.prepared_for``)."""
    return f"{experiment}@{results_root}#campaign-{campaign}"


def reusable(cached: DatasetInfo | None, fresh_for: str | None) -> bool:
    """Whether a host's snapshot serves this campaign: any snapshot when datasets are reused (`fresh_for`
    None), only one loaded for this very campaign when each campaign loads its own."""
    return cached is not None and (fresh_for is None or cached.prepared_for == fresh_for)


def snapshot_path(workdir: str, key: DatasetKey) -> str:
    return f"{workdir}/snapshots/{key.name}"


def cached_dataset(host: Host, workdir: str, key: DatasetKey) -> DatasetInfo | None:
    marker = snapshot_path(workdir, key) + ".json"
    if not host.exists(marker):
        return None
    return DatasetInfo(**json.loads(host.read_text(marker)))


def write_marker(host: Host, info: DatasetInfo) -> None:
    q = shlex.quote
    host.write_text(info.snapshot + ".json.tmp", json.dumps(info.to_dict(), indent=2, sort_keys=True))
    host.run(f"mv {q(info.snapshot)}.json.tmp {q(info.snapshot)}.json")  # the marker appears only when complete


def server_logical_bytes(server: MariaDBServer, engine: str) -> int | None:
    """The tables' logical size as the engine measures it with a server up (None: it needs no server)."""
    e = engines.engine(engine)
    return e.parse_logical(server.sql(e.logical_query)) if e.logical_query else None


def measure_cached_logical(host: Host, workdir: str, exp: Experiment, cell: Cell, user: str,
                           port: int | None, info: DatasetInfo, build: ServerBuild | None = None) -> DatasetInfo:
    """Add the logical size to a snapshot marker written before it was measured. InnoDB's comes from the
    recorded apparent size; MyRocks' from a server started on a copy of the snapshot (the snapshot itself
    stays untouched: starting writes to the datadir), seconds instead of loading the tables again."""
    key = exp.dataset_key(cell)
    measured = None
    if engines.engine(key.engine).logical_query:
        q = shlex.quote
        probe = f"{workdir}/build/{key.name}.measure"
        host.run(f"rm -rf {q(probe)} && mkdir -p {q(workdir)}/build {q(workdir)}/run && "
                 f"cp -a {q(info.snapshot)} {q(probe)}", timeout=3600)
        try:
            paths = ServerPaths.under(f"{workdir}/run", probe, "measure", port)
            options = render_options(cell, paths, user=user, cache=PREPARE_CACHE, constants=exp.server_options,
                                     build=build)
            with MariaDBServer(host, paths, options, binary=cell_build(cell, build).server) as server:
                measured = server_logical_bytes(server, key.engine)
        finally:
            host.run(f"rm -rf {q(probe)}")
    new = DatasetInfo(**upgraded_marker(info.to_dict(), key, measured))
    write_marker(host, new)
    return new


def prepare_dataset(host: Host, workdir: str, exp: Experiment, cell: Cell, user: str,
                    port: int | None, log: list[str] | None = None, script: str | None = None,
                    fresh_for: str | None = None, build: ServerBuild | None = None) -> DatasetInfo:
    """Load the workload's tables for `cell`'s dataset key, shut down cleanly and snapshot the datadir.

    `script` is the TPC-C Lua script's path on the host (workloads.install_scripts) for tpcc cells.
    `fresh_for` (:func:`fresh_token`, for specs with ``dataset_load: per_campaign``): a snapshot the host holds
    serves only when it was loaded for that campaign; any other is replaced by a fresh load marked with it.
    `build`: the host's server build of the cell's level (None: the installed server)."""
    key = exp.dataset_key(cell)
    cached = cached_dataset(host, workdir, key)
    if reusable(cached, fresh_for) and cached is not None:
        if cached.logical_method is None:
            return measure_cached_logical(host, workdir, exp, cell, user, port, cached, build)
        return cached
    q = shlex.quote
    loading = f"{workdir}/build/{key.name}"
    snap = snapshot_path(workdir, key)
    t0 = time.monotonic()
    host.run(f"rm -rf {q(loading)} && mkdir -p {q(workdir)}/build {q(workdir)}/snapshots {q(workdir)}/run")
    host.run(install_db_command(cell, loading, user, build), timeout=300)
    paths = ServerPaths.under(f"{workdir}/run", loading, "prepare", port)
    options = render_options(cell, paths, user=user, cache=PREPARE_CACHE, constants=exp.server_options, build=build)
    with MariaDBServer(host, paths, options, binary=cell_build(cell, build).server) as server:
        server.sql("CREATE DATABASE IF NOT EXISTS sbtest")
        argv = workloads.command(exp, cell, "prepare", socket=paths.socket,
                                 threads=workloads.prepare_threads(exp, cell), script=script,
                                 storage_engine=table_engine(cell))
        out = host.run(sysbench.command_string(argv), timeout=24 * 3600)
        if log is not None:
            log.append(out.stdout)
        for sql, timeout_s in engines.engine(cell.engine).after_load:  # MyRocks: flush and compact
            server.sql(sql, timeout_s=timeout_s)
        measured = server_logical_bytes(server, cell.engine)
    host.run(f"rm -f {q(loading)}/ib_buffer_pool")
    sizes = measure_sizes(host, loading, cell.engine)
    sizes.update(logical_sizes(key, sizes["data_apparent_bytes"], measured))
    host.run(f"rm -rf {q(snap)} && mv {q(loading)} {q(snap)}")
    info = DatasetInfo(
        key=key.name, host=host.name, snapshot=snap, engine=key.engine, block_size=key.block_size,
        compression=key.compression, tables=key.tables, table_size=key.table_size, schema=key.schema,
        prepare_s=round(time.monotonic() - t0, 3),
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"), prepared_for=fresh_for, **sizes,
    )
    write_marker(host, info)
    return info


def restore(host: Host, info: DatasetInfo, datadir: str, log_dir: str | None = None) -> float:
    """Replace `datadir` with a fresh copy of the snapshot; returns seconds taken.

    With `log_dir` (redo log or WAL on another medium) the log files move there: InnoDB's
    ib_logfile0, RocksDB's *.log WAL files (empty after the snapshot's flush, moved for consistency)."""
    t0 = time.monotonic()
    host.run(restore_command(info, datadir, log_dir), timeout=3600)
    return time.monotonic() - t0


def restore_command(info: DatasetInfo, datadir: str, log_dir: str | None = None) -> str:
    q = shlex.quote
    parent = datadir.rsplit("/", 1)[0]
    cmd = f"rm -rf {q(datadir)} && mkdir -p {q(parent)} && cp -a {q(info.snapshot)} {q(datadir)}"
    if log_dir:
        cmd += f" && rm -rf {q(log_dir)} && mkdir -p {q(log_dir)}"
        cmd += f" && {engines.engine(info.engine).move_log_command(datadir, log_dir)}"
    return cmd


OS_CACHE_ENV = "DBMATRIX_OS_CACHE"
OS_CACHE_POLICIES = ("drop", "keep")


def os_cache_policy() -> str:
    """Whether a run drops the hosts' page cache before its server starts: ``drop`` (the default: every run
    reads its data cold from the medium) or ``keep``, set by $DBMATRIX_OS_CACHE for a shared host where
    dropping would disturb others, and by the test suite, where each drop makes every other test's processes
    read their libraries and binaries again. A kept cache is in every record (``os_cache_dropped: false``)."""
    value = os.environ.get(OS_CACHE_ENV, "").strip() or "drop"
    if value not in OS_CACHE_POLICIES:
        raise SpecError(f"${OS_CACHE_ENV}={value!r}; allowed: {', '.join(OS_CACHE_POLICIES)}")
    return value


def drop_os_caches(host: Host) -> bool:
    """Drop the page cache where we may (root) unless :func:`os_cache_policy` keeps it; returns whether it
    was done."""
    if os_cache_policy() == "keep" or not host.is_root():
        return False
    return host.run("sync && echo 3 > /proc/sys/vm/drop_caches", check=False).ok
