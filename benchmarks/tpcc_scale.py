"""TPC-C on this machine: prepare time per warehouse, on-disk size and tpmC, for InnoDB and MyRocks.

For each engine: a fresh datadir and our own mariadbd (cache large enough for the data), a parallel
``prepare`` of W warehouses with T threads (timed), MyRocks flushed and compacted, the data size
measured like the matrix does (``du`` of ``sbtest/*.ibd`` or of the SST files), one fixed closed-loop
run, the consistency conditions 1-4, then the server is stopped and the datadir removed.
One run per engine: expect noise (shared 2-vCPU machine); this is an indication, not a result.

    DBMATRIX_BASE_PORT=20000 .venv/bin/python benchmarks/tpcc_scale.py
    .venv/bin/python benchmarks/tpcc_scale.py --warehouses 4 --prepare-threads 2 --time 120 --threads 8
"""

from __future__ import annotations

import argparse
import json
import shlex
import time
from pathlib import Path
from typing import Any

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.parse.sysbench import parse_output
from dbmatrix.run.datasets import measure_sizes
from dbmatrix.run.mysqld import (
    MariaDBServer,
    ServerPaths,
    install_db_command,
    render_options,
    server_user,
    table_engine,
)
from dbmatrix.run.ports import lease_block, this_process
from dbmatrix.spec.experiment import Cell
from dbmatrix.workload import sysbench, tpcc
from dbmatrix.workload.commands import check_consistency

MiB = 1024 * 1024


def measure_engine(host: LocalHost, workdir: Path, engine: str, args: argparse.Namespace) -> dict[str, Any]:
    cell = Cell(engine, 100, args.block_size, "none", "disk", args.threads, workload="tpcc")
    user = server_user(host)
    datadir = str(workdir / f"data-{engine}")
    host.run(f"rm -rf {shlex.quote(datadir)}")
    host.run(install_db_command(cell, datadir, user), timeout=300)
    # leased as runs lease theirs (held until this process exits): no other process's server takes it
    port = lease_block([(host, this_process(host))], 1).base
    paths = ServerPaths.under(str(workdir / "run"), datadir, engine, port)
    script = tpcc.install_script(host, str(workdir / "lua"))
    common = {"tables": args.tables, "scale": args.warehouses, "script": script, "storage_engine": table_engine(cell)}
    row: dict[str, Any] = {"engine": engine, "warehouses": args.warehouses * args.tables}
    try:
        with MariaDBServer(host, paths, render_options(cell, paths, user=user, cache=args.cache_mib * MiB)) as srv:
            srv.sql("CREATE DATABASE sbtest")
            argv = sysbench.SysbenchCommand("tpcc", "prepare", sysbench.Target(paths.socket),
                                            threads=args.prepare_threads, seed=args.seed, **common).argv()
            t0 = time.monotonic()
            host.run(sysbench.command_string(argv), timeout=24 * 3600)
            row["prepare_s"] = round(time.monotonic() - t0, 2)
            row["prepare_s_per_warehouse"] = round(row["prepare_s"] / row["warehouses"], 2)
            if engine == "myrocks":
                srv.sql("SET GLOBAL rocksdb_force_flush_memtable_now=1")
                srv.sql("SET GLOBAL rocksdb_compact_cf='default'", timeout_s=3600)
            sizes = measure_sizes(host, datadir, engine)
            row["data_mib"] = round(sizes["data_physical_bytes"] / MiB, 1)
            run = sysbench.RunOptions(time_s=args.time, rand_type=args.rand_type, report_interval=10)
            argv = sysbench.SysbenchCommand("tpcc", "run", sysbench.Target(paths.socket), threads=args.threads,
                                            seed=args.seed, isolation=args.isolation, run=run, **common).argv()
            r = host.run(sysbench.command_string(argv), timeout=args.time + 600)
            out = parse_output(r.stdout, r.stderr)
            rep = out.summary["tpcc"]
            row.update(tpmC=round(rep["tpmC"], 1), tps=out.summary["tps"],
                       retries=sum(v["retried"] for v in rep["transactions"].values()),
                       new_order_avg_ms=rep["transactions"]["new_order"]["avg_ms"])
            check = check_consistency(host, socket=paths.socket, script=script, tables=args.tables,
                                           scale=args.warehouses)
            row["consistent_1_4"] = check.passed
    finally:
        if not args.keep:
            host.run(f"rm -rf {shlex.quote(datadir)}")
    return row


def print_table(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    cols = [("engine", "engine"), ("warehouses", "W"), ("prepare_s", "prepare s"),
            ("prepare_s_per_warehouse", "s/W"), ("data_mib", "data MiB"), ("tpmC", "tpmC"), ("tps", "tps"),
            ("retries", "retries"), ("new_order_avg_ms", "NO avg ms"), ("consistent_1_4", "check 1-4")]
    print(f"TPC-C: {args.warehouses} warehouses x {args.tables} set(s), prepare with {args.prepare_threads} "
          f"threads; run {args.time} s, {args.threads} threads, {args.isolation}, rand-type {args.rand_type}, "
          f"cache {args.cache_mib} MiB, {args.block_size} pages/blocks (one run each: noisy)")
    table = [[h for _, h in cols]] + [[str(r.get(k, "")) for k, _ in cols] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(cols))]
    for line in table:
        print("  ".join(v.rjust(w) for v, w in zip(line, widths)))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--warehouses", type=int, default=2, help="warehouses per table set (scale)")
    p.add_argument("--tables", type=int, default=1, help="table sets")
    p.add_argument("--prepare-threads", type=int, default=2)
    p.add_argument("--threads", type=int, default=4, help="client threads of the measured run")
    p.add_argument("--time", type=int, default=60, help="seconds of the measured run")
    p.add_argument("--isolation", default="RC")
    p.add_argument("--rand-type", default="uniform", choices=sysbench.RAND_TYPES)
    p.add_argument("--block-size", default="16k")
    p.add_argument("--cache-mib", type=int, default=1024, help="buffer pool / block cache")
    p.add_argument("--engines", default="innodb,myrocks")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", default="/var/tmp/dbmatrix-tpcc-bench")
    p.add_argument("--keep", action="store_true", help="keep the datadirs")
    p.add_argument("--json", action="store_true", help="also print the rows as JSON")
    args = p.parse_args(argv)
    tpcc.validate_options(scale=args.warehouses, tables=args.tables, isolation=args.isolation)
    host = LocalHost()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rows = [measure_engine(host, workdir, e.strip(), args) for e in args.engines.split(",") if e.strip()]
    print_table(rows, args)
    if args.json:
        print(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
