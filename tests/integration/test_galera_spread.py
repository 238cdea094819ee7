"""A Galera cluster spread over two inventory hosts (the network-namespace test hosts of
tests/conftest_netns.py, which reach each other over their own link): node 1 on h1, nodes 2 and 3 on h2,
joined by rsync SST across hosts, driven over SSH by `dbmatrix run` as a user would. One short
oltp_write_only run; every node reports Synced in a 3-node cluster, the wsrep deltas come from all three,
each node's error log lands in the run, and afterwards no node is left on either host."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from tests.integration.factory import needs_galera, study_from

from dbmatrix.run.matrix import run_study

pytestmark = [pytest.mark.integration, needs_galera]

SPEC = {
    "experiment": "it-galera-spread",
    "topology": {"kind": "galera", "nodes": 3, "hosts": ["h1", "h2", "h2"]},
    "workload": {"name": "oltp_write_only", "tables": 1, "table_size": 2000},
    "factors": {"cache_pct": 100, "threads": 2, "slave_threads": 2},
    "repetitions": 1, "seed": 11, "warmup_s": 1, "measure_s": 4,
    "server_options": {"innodb_log_file_size": "16M", "innodb_flush_log_at_trx_commit": 1},
}


@pytest.fixture
def spread_study(tmp_path: Path, netns_hosts):
    # The nodes run as user mysql, which must traverse the workdirs: not pytest's 0700 temporary tree.
    base = tempfile.mkdtemp(prefix="dbmatrix-galera-spread-", dir="/var/tmp")
    os.chmod(base, 0o755)
    inventory = netns_hosts.inventory_dict()
    for entry in inventory["hosts"]:
        entry["workdir"] = f"{base}/{entry['name']}-work"
        entry["media"] = {"disk": {"kind": "dir", "path": f"{base}/{entry['name']}-disk"}}
    yield study_from(tmp_path, SPEC, inventory=inventory)
    shutil.rmtree(base, ignore_errors=True)


def test_a_cluster_spread_over_two_hosts_runs_a_cell(spread_study, netns_hosts) -> None:
    counts = run_study(spread_study, progress=False)
    manifests = list(spread_study.store.records())
    assert len(manifests) == 1
    m = manifests[0]
    assert counts.ok == 1 and m.status == "ok", (m.failed_step, m.error)
    assert m.host == "h1" and m.topology["hosts"] == ["h1", "h2", "h2"]
    h1, h2 = netns_hosts["h1"].address, netns_hosts["h2"].address
    assert {k: (n["host"], n["address"]) for k, n in m.nodes.items()} == {
        "node1": ("h1", h1), "node2": ("h2", h2), "node3": ("h2", h2)}
    assert all(n["sst_s"] is None or n["sst_s"] >= 0 for k, n in m.nodes.items() if k != "node1")
    assert m.summary["tps"] > 0
    # at the end of the window every node was a Synced member of the 3-node cluster, and the write sets
    # node 1 replicated were received by the nodes on the other host
    assert set(m.wsrep) == {"node1", "node2", "node3"}
    for name, d in m.wsrep.items():
        assert (d["cluster_size"], d["state"]) == (3, "Synced"), (name, d)
    assert m.wsrep["node1"]["replicated"] > 0
    for name in ("node2", "node3"):
        assert m.wsrep[name]["received"] >= m.wsrep["node1"]["replicated"] * 0.9, m.wsrep
    run_dir = spread_study.store.root / "raw" / m.run_id
    assert {p.name for p in run_dir.glob("mariadbd-node*.err")} == {f"mariadbd-node{i}.err" for i in (1, 2, 3)}
    for h in netns_hosts:
        assert h.processes("mariadbd") == [], f"a node left running on {h.name}"
