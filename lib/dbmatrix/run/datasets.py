"""Datasets: prepared once per dataset key and host, cleanly shut down, snapshotted, restored per run.

Every run starts from a copy of the same snapshot, so repetitions are independent and comparable.
Two sizes of the loaded tables are measured: physical (what occupies the medium) and logical (uncompressed,
what the buffer pool or block cache holds); `cache_pct` is a percentage of the spec's `cache_basis`.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from dbmatrix.hosts.remote import Host
from dbmatrix.run.mysqld import (
    MariaDBServer,
    ServerPaths,
    cache_bytes,
    install_db_command,
    render_options,
    requested_cache_bytes,
    table_engine,
)
from dbmatrix.spec.experiment import (
    CACHE_BASES,
    Cell,
    DatasetKey,
    Experiment,
    block_size_bytes,
)
from dbmatrix.workload import commands as workloads
from dbmatrix.workload import sysbench

MiB = 1024 * 1024
PREPARE_CACHE = 256 * MiB  # cache while loading; the snapshot does not depend on it
ROW_COMPRESSED_KEY_BLOCK = 8192  # KEY_BLOCK_SIZE=8 of the row_compressed level (mysqld.table_engine)
# InnoDB's apparent size is the same with and without page compression (the uncompressed page count), but it
# counts the files' free pages too: 4 x 50k sysbench rows, 79.7 MB apparent against 47.9 MB of pages a full
# read of every index takes into the buffer pool (4 x 10k: 41.9 MB against 9.8 MB).
INNODB_LOGICAL = ("apparent size (du --apparent-size) of sbtest/*.ibd: pages x page size, the holes page "
                  "compression punches counted as the uncompressed pages they are")
INNODB_ROW_COMPRESSED_LOGICAL = ("apparent size (du --apparent-size) of sbtest/*.ibd x page size / 8 KiB: "
                                 "one uncompressed page per KEY_BLOCK_SIZE=8 compressed page")
# The block cache holds uncompressed data blocks (and the index and filter blocks). The SST files' properties
# give the key and value bytes before compression; data blocks store keys with prefix encoding, so this is a
# few percent above the blocks' own uncompressed size (4 x 10k sysbench rows: 8.80 MB against 8.51 MB the
# block cache took in after a full scan, for none and lz4 alike).
ROCKSDB_LOGICAL = ("information_schema.ROCKSDB_SST_PROPS over every SST file: raw key + raw value bytes "
                   "(before compression) + index and filter block bytes")
ROCKSDB_LOGICAL_QUERY = ("SELECT COUNT(*), COALESCE(SUM(RAW_KEY_SIZE + RAW_VALUE_SIZE + INDEX_BLOCK_SIZE "
                         "+ FILTER_BLOCK_SIZE), 0) FROM information_schema.ROCKSDB_SST_PROPS")


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
    """Shell words naming the table data files: InnoDB's sbtest/*.ibd, RocksDB's SST files (not its LOG,
    OPTIONS or MANIFEST files)."""
    if engine == "myrocks":
        return f"{shlex.quote(datadir + '/#rocksdb')}/*.sst"
    return f"{shlex.quote(datadir + '/sbtest')}/*.ibd"


def parse_du_total(text: str) -> int:
    """The `total` line of `du -c` output (0 when there were no files)."""
    for line in reversed(text.splitlines()):
        fields = line.split()
        if len(fields) == 2 and fields[1] == "total":
            return int(fields[0])
    return 0


def parse_rocksdb_logical(text: str) -> int:
    """`ROCKSDB_LOGICAL_QUERY`'s one row (``files<TAB>bytes``) -> bytes; refuses a dataset with no SST file."""
    fields = text.split()
    if len(fields) != 2 or not fields[0].isdigit() or int(fields[0]) == 0:
        raise ValueError(f"information_schema.ROCKSDB_SST_PROPS: no SST file to measure ({text.strip()!r})")
    return int(fields[1])


def innodb_logical(apparent: int, cell_compression: str, block_size: str) -> tuple[int, str]:
    """InnoDB's logical size from the .ibd files' apparent size, and how it was reckoned."""
    if cell_compression == "row_compressed":
        return apparent * block_size_bytes(block_size) // ROW_COMPRESSED_KEY_BLOCK, INNODB_ROW_COMPRESSED_LOGICAL
    return apparent, INNODB_LOGICAL


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


def logical_sizes(key: DatasetKey, apparent: int, rocksdb_bytes: int | None) -> dict[str, Any]:
    """data_logical_bytes and logical_method: MyRocks from the SST properties (`rocksdb_bytes`, measured
    while a server is up), InnoDB from the apparent size."""
    if key.engine == "myrocks":
        if rocksdb_bytes is None:
            raise ValueError(f"dataset {key.name}: MyRocks needs its SST properties measured")
        return {"data_logical_bytes": rocksdb_bytes, "logical_method": ROCKSDB_LOGICAL}
    size, method = innodb_logical(apparent, key.compression, key.block_size)
    return {"data_logical_bytes": size, "logical_method": method}


def upgraded_marker(old: dict[str, Any], key: DatasetKey, rocksdb_bytes: int | None) -> dict[str, Any]:
    """A snapshot marker from before the logical size was measured, with it (pure): the old
    data_logical_bytes was the apparent size; MyRocks' logical size comes from `rocksdb_bytes`."""
    apparent = int(old.get("data_apparent_bytes") or old["data_logical_bytes"])
    return {**old, "data_apparent_bytes": apparent, **logical_sizes(key, apparent, rocksdb_bytes)}


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


def rocksdb_logical_bytes(server: MariaDBServer) -> int:
    return parse_rocksdb_logical(server.sql(ROCKSDB_LOGICAL_QUERY))


def measure_cached_logical(host: Host, workdir: str, exp: Experiment, cell: Cell, user: str,
                           port: int | None, info: DatasetInfo) -> DatasetInfo:
    """Add the logical size to a snapshot marker written before it was measured. InnoDB's comes from the
    recorded apparent size; MyRocks' from a server started on a copy of the snapshot (the snapshot itself
    stays untouched: starting writes to the datadir), seconds instead of loading the tables again."""
    key = exp.dataset_key(cell)
    rocksdb_bytes = None
    if key.engine == "myrocks":
        q = shlex.quote
        probe = f"{workdir}/build/{key.name}.measure"
        host.run(f"rm -rf {q(probe)} && mkdir -p {q(workdir)}/build {q(workdir)}/run && "
                 f"cp -a {q(info.snapshot)} {q(probe)}", timeout=3600)
        try:
            paths = ServerPaths.under(f"{workdir}/run", probe, "measure", port)
            options = render_options(cell, paths, user=user, cache=PREPARE_CACHE, constants=exp.server_options)
            with MariaDBServer(host, paths, options) as server:
                rocksdb_bytes = rocksdb_logical_bytes(server)
        finally:
            host.run(f"rm -rf {q(probe)}")
    new = DatasetInfo(**upgraded_marker(info.to_dict(), key, rocksdb_bytes))
    write_marker(host, new)
    return new


def prepare_dataset(host: Host, workdir: str, exp: Experiment, cell: Cell, user: str,
                    port: int | None, log: list[str] | None = None, script: str | None = None,
                    fresh_for: str | None = None) -> DatasetInfo:
    """Load the workload's tables for `cell`'s dataset key, shut down cleanly and snapshot the datadir.

    `script` is the TPC-C Lua script's path on the host (workloads.install_scripts) for tpcc cells.
    `fresh_for` (:func:`fresh_token`, for specs with ``dataset_load: per_campaign``): a snapshot the host holds
    serves only when it was loaded for that campaign; any other is replaced by a fresh load marked with it."""
    key = exp.dataset_key(cell)
    cached = cached_dataset(host, workdir, key)
    if reusable(cached, fresh_for) and cached is not None:
        if cached.logical_method is None:
            return measure_cached_logical(host, workdir, exp, cell, user, port, cached)
        return cached
    q = shlex.quote
    build = f"{workdir}/build/{key.name}"
    snap = snapshot_path(workdir, key)
    t0 = time.monotonic()
    host.run(f"rm -rf {q(build)} && mkdir -p {q(workdir)}/build {q(workdir)}/snapshots {q(workdir)}/run")
    host.run(install_db_command(cell, build, user), timeout=300)
    paths = ServerPaths.under(f"{workdir}/run", build, "prepare", port)
    options = render_options(cell, paths, user=user, cache=PREPARE_CACHE, constants=exp.server_options)
    with MariaDBServer(host, paths, options) as server:
        server.sql("CREATE DATABASE IF NOT EXISTS sbtest")
        argv = workloads.command(exp, cell, "prepare", socket=paths.socket,
                                 threads=workloads.prepare_threads(exp, cell), script=script,
                                 storage_engine=table_engine(cell))
        out = host.run(sysbench.command_string(argv), timeout=24 * 3600)
        if log is not None:
            log.append(out.stdout)
        if cell.engine == "myrocks":
            # Snapshots hold compacted SSTs and no WAL: every run starts from the same LSM shape.
            server.sql("SET GLOBAL rocksdb_force_flush_memtable_now=1")
            server.sql("SET GLOBAL rocksdb_compact_cf='default'", timeout_s=3600)
            rocksdb_bytes: int | None = rocksdb_logical_bytes(server)
        else:
            rocksdb_bytes = None
    host.run(f"rm -f {q(build)}/ib_buffer_pool")
    sizes = measure_sizes(host, build, cell.engine)
    sizes.update(logical_sizes(key, sizes["data_apparent_bytes"], rocksdb_bytes))
    host.run(f"rm -rf {q(snap)} && mv {q(build)} {q(snap)}")
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
        if info.engine == "myrocks":
            cmd += f" && find {q(datadir + '/#rocksdb')} -maxdepth 1 -name '*.log' -exec mv -t {q(log_dir)} {{}} +"
        else:
            cmd += f" && mv {q(datadir)}/ib_logfile* {q(log_dir)}/"
    return cmd


def drop_os_caches(host: Host) -> bool:
    """Drop the page cache where we may (root); returns whether it was done."""
    if not host.is_root():
        return False
    return host.run("sync && echo 3 > /proc/sys/vm/drop_caches", check=False).ok
