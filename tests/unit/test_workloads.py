"""One place builds a cell's sysbench command: bundled oltp_* scripts, or our TPC-C script."""

from __future__ import annotations

import pytest

from dbmatrix.spec.experiment import parse_experiment
from dbmatrix.workload.commands import command, prepare_threads


def _exp(workload: dict) -> object:
    return parse_experiment({"experiment": "w", "workload": workload, "factors": {"engine": ["innodb", "myrocks"]}})


def test_oltp_run_and_prepare() -> None:
    exp = _exp({"name": "oltp_read_write", "tables": 3, "table_size": 1000})
    cell = exp.cells()[0]
    run = command(exp, cell, "run", socket="/s", threads=4, time_s=10, seed=7, histogram=True)
    assert run[:2] == ["sysbench", "oltp_read_write"] and "--table-size=1000" in run and run[-1] == "run"
    assert "--rand-type=uniform" in run and "--histogram=on" in run and "--tables=3" in run
    prep = command(exp, cell, "prepare", socket="/s", threads=prepare_threads(exp, cell))
    assert prep[-1] == "prepare" and "--threads=3" in prep and not any(a.startswith("--time") for a in prep)


def test_tpcc_uses_the_script_scale_and_isolation() -> None:
    exp = _exp({"name": "tpcc", "tables": 2, "warehouses": 3, "isolation": "RR", "rand_type": "pareto"})
    cell = exp.cells()[1]
    run = command(exp, cell, "run", socket="/s", threads=4, script="/w/lua/tpcc.lua", time_s=5,
                  storage_engine="rocksdb")
    assert run[1] == "/w/lua/tpcc.lua" and "--scale=3" in run and "--tables=2" in run
    assert "--trx_level=RR" in run and "--rand-type=pareto" in run and "--mysql-storage-engine=rocksdb" in run
    assert not any(a.startswith("--table-size") for a in run)
    assert prepare_threads(exp, cell) == 8  # 2 sets x 3 warehouses x 4 units, capped


def test_tpcc_without_its_script_is_refused() -> None:
    exp = _exp({"name": "tpcc"})
    with pytest.raises(ValueError, match="needs the path of its Lua script"):
        command(exp, exp.cells()[0], "run", socket="/s", threads=1)
