"""Datasets: prepared once per dataset key and host, cleanly shut down, snapshotted, restored per run.

Every run starts from a copy of the same snapshot, so repetitions are independent and comparable.
The measured on-disk size of the loaded tables is what `cache_pct` is a percentage of.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from dbmatrix.hosts.remote import Host
from dbmatrix.run.mysqld import MariaDBServer, ServerPaths, install_db_command, render_options, table_engine
from dbmatrix.spec.experiment import Cell, DatasetKey, Experiment
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
    data_physical_bytes: int  # `du` of the tables' files: what cache_pct refers to
    data_logical_bytes: int  # apparent size (page compression punches holes: physical < logical)
    datadir_physical_bytes: int
    datadir_logical_bytes: int
    prepare_s: float
    created_utc: str
    size_basis: str = ("physical (du) size of the tables' data files after a clean shutdown "
                       "(InnoDB sbtest/*.ibd; MyRocks *.sst after flush and full compaction)")
    schema: str = "oltp"  # oltp (sysbench's sbtest tables) or tpcc (table_size is then warehouses)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


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


def measure_sizes(host: Host, datadir: str, engine: str) -> dict[str, Any]:
    q = shlex.quote
    files = data_files_glob(datadir, engine)
    return {
        "data_physical_bytes": parse_du_total(host.run(f"du -cB1 {files}").stdout),
        "data_logical_bytes": parse_du_total(host.run(f"du -cB1 --apparent-size {files}").stdout),
        "datadir_physical_bytes": parse_du(host.run(f"du -sB1 {q(datadir)}").stdout),
        "datadir_logical_bytes": parse_du(host.run(f"du -sB1 --apparent-size {q(datadir)}").stdout),
    }


def snapshot_path(workdir: str, key: DatasetKey) -> str:
    return f"{workdir}/snapshots/{key.name}"


def cached_dataset(host: Host, workdir: str, key: DatasetKey) -> DatasetInfo | None:
    marker = snapshot_path(workdir, key) + ".json"
    if not host.exists(marker):
        return None
    return DatasetInfo(**json.loads(host.read_text(marker)))


def prepare_dataset(host: Host, workdir: str, exp: Experiment, cell: Cell, user: str,
                    port: int | None, log: list[str] | None = None, script: str | None = None) -> DatasetInfo:
    """Load the workload's tables for `cell`'s dataset key, shut down cleanly and snapshot the datadir.

    `script` is the TPC-C Lua script's path on the host (workloads.install_scripts) for tpcc cells."""
    key = exp.dataset_key(cell)
    cached = cached_dataset(host, workdir, key)
    if cached is not None:
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
    host.run(f"rm -f {q(build)}/ib_buffer_pool")
    sizes = measure_sizes(host, build, cell.engine)
    host.run(f"rm -rf {q(snap)} && mv {q(build)} {q(snap)}")
    info = DatasetInfo(
        key=key.name, host=host.name, snapshot=snap, engine=key.engine, block_size=key.block_size,
        compression=key.compression, tables=key.tables, table_size=key.table_size, schema=key.schema,
        prepare_s=round(time.monotonic() - t0, 3),
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"), **sizes,
    )
    host.write_text(snap + ".json.tmp", json.dumps(info.to_dict(), indent=2, sort_keys=True))
    host.run(f"mv {q(snap)}.json.tmp {q(snap)}.json")  # the marker appears only when complete
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
