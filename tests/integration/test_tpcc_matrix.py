"""TPC-C as a workload of the matrix: the runner installs our Lua script on the host, loads the warehouse
into a dataset snapshot, measures, and checks the TPC-C consistency conditions after the run."""

from __future__ import annotations

import pytest
from tests.integration.factory import study_from

from dbmatrix.run.matrix import run_study

pytestmark = pytest.mark.integration

SPEC = {
    "experiment": "it-tpcc",
    "workload": {"name": "tpcc", "tables": 1, "warehouses": 1, "isolation": "RC"},
    "factors": {"engine": "innodb", "cache_pct": 50, "threads": 2},
    "repetitions": 1,
    "seed": 3,
    "warmup_s": 0,
    "measure_s": 4,
    "server_options": {"innodb_flush_log_at_trx_commit": 1},
}


def test_tpcc_cell_runs_and_passes_the_consistency_check(tmp_path) -> None:
    study = study_from(tmp_path, SPEC)
    counts = run_study(study, progress=False)
    assert counts.ok == 1, list(study.store.records())
    (m,) = list(study.store.records())
    assert m.cell_id == "innodb-c50-b16k-none-disk-t2-tpcc"
    assert m.summary["tpmC"] > 0 and m.summary["tps"] > 0
    tx = m.tpcc["transactions"]
    assert set(tx) == {"new_order", "payment", "order_status", "delivery", "stock_level"}
    assert all(t["committed"] > 0 for t in tx.values()), tx
    assert m.tpcc["new_order_committed"] == tx["new_order"]["committed"]
    check = m.tpcc_consistency
    assert check["passed"] and sorted(c["condition"] for c in check["conditions"]) == [1, 2, 3, 4]
    assert "tpcc.lua" in m.sysbench["command"] and "--trx_level=RC" in m.sysbench["command"]
    assert m.dataset["schema"] == "tpcc" and m.dataset["data_physical_bytes"] > 50 * 2**20
