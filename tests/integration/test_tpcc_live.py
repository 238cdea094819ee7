"""Our TPC-C workload for real, on InnoDB and MyRocks: parallel prepare of one warehouse (TPC-C
cardinalities), a short run with all five transaction types, the consistency conditions after it, a
deliberate corruption that the check must catch, and cleanup."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.integration.factory import server_in, session_workdir

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.parse.sysbench import parse_output
from dbmatrix.run.mysqld import (
    MariaDBServer,
)
from dbmatrix.spec.experiment import Cell
from dbmatrix.workload import sysbench, tpcc
from dbmatrix.workload.commands import check_consistency

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
ENGINES = {"innodb": "InnoDB", "myrocks": "rocksdb"}


@pytest.fixture
def workdir():
    yield from session_workdir("tpcc")


def _server(host: LocalHost, workdir: Path, engine: str) -> MariaDBServer:
    cell = Cell(engine, 100, "16k", "none", "disk", 2, workload="tpcc")
    return server_in(host, workdir, cell, 256 * MiB, data=f"data-{engine}", tag=engine, port_from=None)


def _sysbench(host: LocalHost, phase: str, socket: str, script: str, engine: str, *, time_s: int | None = None,
              **kw):
    argv = sysbench.SysbenchCommand("tpcc", phase, sysbench.Target(socket), tables=1, scale=1, script=script,
                                    storage_engine=ENGINES[engine], run=sysbench.RunOptions(time_s=time_s),
                                    **kw).argv()
    return host.run(sysbench.command_string(argv), check=False, timeout=300)


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_prepare_run_check_cleanup(workdir: Path, engine: str):
    host = LocalHost()
    script = tpcc.install_script(host, str(workdir / "lua"))
    with _server(host, workdir, engine) as server:
        server.sql("CREATE DATABASE sbtest")
        sock = server.paths.socket

        t0 = time.monotonic()
        prep = _sysbench(host, "prepare", sock, script, engine, threads=2, seed=5)
        prepare_s = time.monotonic() - t0
        assert prep.ok, prep.stdout + prep.stderr
        assert prepare_s < 60, f"one warehouse took {prepare_s:.1f} s to load"
        counts = dict(line.split("\t") for line in server.sql(
            "SELECT 'item', COUNT(*) FROM sbtest.item1 UNION ALL SELECT 'stock', COUNT(*) FROM sbtest.stock1 "
            "UNION ALL SELECT 'customer', COUNT(*) FROM sbtest.customer1 "
            "UNION ALL SELECT 'new_order', COUNT(*) FROM sbtest.new_order1").splitlines())
        assert counts == {"item": "100000", "stock": "100000", "customer": "30000", "new_order": "9000"}
        assert server.sql("SELECT LOWER(ENGINE) FROM information_schema.TABLES WHERE TABLE_SCHEMA='sbtest' "
                          "GROUP BY 1").split() == [ENGINES[engine].lower()]

        run = _sysbench(host, "run", sock, script, engine, threads=2, time_s=5, seed=7, isolation="RC")
        assert run.ok, run.stdout + run.stderr
        out = parse_output(run.stdout, run.stderr)
        assert out.complete and out.fatal == []
        rep = out.summary["tpcc"]
        assert all(v["committed"] > 0 for v in rep["transactions"].values()), rep["transactions"]
        completed = sum(v["committed"] + v["rolled_back"] for v in rep["transactions"].values())
        assert completed == out.summary["transactions"]
        assert out.summary["tpmC"] > 0 and rep["run"]["isolation"] == "RC"

        result = check_consistency(host, socket=sock, script=script, tables=1, scale=1, conditions="all")
        assert result.passed, result.conditions
        assert [c["condition"] for c in result.conditions] == list(tpcc.CONDITIONS)

        # The check can fail: D_YTD off by one breaks conditions 1 and 9 for that district's warehouse.
        server.sql("UPDATE sbtest.district1 SET d_ytd = d_ytd + 1 WHERE d_w_id = 1 AND d_id = 4")
        bad = check_consistency(host, socket=sock, script=script, tables=1, scale=1, conditions="all")
        assert not bad.passed and bad.exit_code == 1 and bad.failed == [1, 9]

        # Loading twice is an error with a non-zero exit status (sysbench alone would exit 0).
        again = _sysbench(host, "prepare", sock, script, engine, threads=2)
        assert again.exit_code == 1 and "already exists" in again.stderr

        with pytest.raises(tpcc.TpccError, match="table set 2 is not loaded"):
            check_consistency(host, socket=sock, script=script, tables=2, scale=1)

        clean = _sysbench(host, "cleanup", sock, script, engine, threads=1)
        assert clean.ok, clean.stdout + clean.stderr
        assert server.sql("SHOW TABLES FROM sbtest").strip() == ""


def test_benchmark_script_runs_small(workdir: Path, capsys):
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "tpcc_scale.py"
    spec = importlib.util.spec_from_file_location("tpcc_scale", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (row,) = mod.main(["--warehouses", "1", "--time", "3", "--threads", "2", "--engines", "innodb",
                       "--cache-mib", "256", "--workdir", str(workdir / "bench")])
    assert row["engine"] == "innodb" and row["warehouses"] == 1
    assert row["prepare_s"] > 0 and row["data_mib"] > 100 and row["tpmC"] > 0
    assert row["consistent_1_4"] is True
    assert "tpmC" in capsys.readouterr().out
    assert not (workdir / "bench" / "data-innodb").exists()
