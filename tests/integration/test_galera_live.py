"""A real three-node Galera cluster on this machine (mariadbd as user mysql, rsync SST): a short
oltp_write_only cell at wsrep_slave_threads 1 and 4; the second one's node 2 is killed (SIGKILL) in the
middle of the measured window, which records that run as failed with every node's error log while the
first stays; a rerun resumes only the failed run. Afterwards no node, SST or sampler process is left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from tests.integration.factory import WhenMeasuring, kill_by_pid_file, needs_galera, sysbench_lines

from dbmatrix.hosts.inventory import localhost_inventory
from dbmatrix.parse.wsrep import WSREP_KEYS
from dbmatrix.run.context import HostContext, host_facts, prepare_media
from dbmatrix.run.datasets import prepare_dataset
from dbmatrix.run.galera import Galera
from dbmatrix.run.matrix import record_plan
from dbmatrix.run.mysqld import server_user
from dbmatrix.run.ports import free_port
from dbmatrix.run.session import measure
from dbmatrix.spec.experiment import parse_experiment
from dbmatrix.store import ResultStore


def execute_galera_run(ctxs, exp, run, dataset, store):  # type: ignore[no-untyped-def]
    """One Galera run through the run session, as the matrix runs it."""
    return measure(store, exp, run, Galera(ctxs, exp, run, dataset))


pytestmark = [pytest.mark.integration, needs_galera]

SPEC = {
    "experiment": "it-galera",
    "topology": {"kind": "galera", "nodes": 3},
    "workload": {"name": "oltp_write_only", "tables": 2, "table_size": 2000},
    "factors": {"cache_pct": 100, "threads": 2, "slave_threads": [1, 4]},
    "repetitions": 1, "seed": 7, "warmup_s": 1, "measure_s": 4,
    "server_options": {"innodb_log_file_size": "16M", "innodb_flush_log_at_trx_commit": 1},
}
KILLED_RUN = "innodb-c100-b16k-none-disk-t2-wo-st4-r1"
OTHER_RUN = "innodb-c100-b16k-none-disk-t2-wo-r1"


def node_killer(workdir: str) -> WhenMeasuring:
    """SIGKILLs node 2 (by its pid file) two seconds after this session's measured sysbench
    (--histogram=on, on node 1's socket under our workdir) has started."""
    sock = f"{workdir}/run/galera/node1/bench.sock"
    return WhenMeasuring(ready=lambda: any(sock in line and "--histogram=on" in line for line in sysbench_lines()),
                         act=lambda: kill_by_pid_file(f"{workdir}/run/galera/node2/bench.pid"), delay=2.0)


def _ours(base: str) -> list[str]:
    """Processes whose command line mentions our directory (nodes, SST rsync, the sampler)."""
    out = subprocess.run(["ps", "-eww", "-o", "pid=,stat=,args="], check=False, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if base in line and " Z" not in line[:12]]


@pytest.fixture(scope="module")
def env():
    # Not under pytest's 0700 temporary tree: the nodes run as user mysql, which must traverse the path.
    base = tempfile.mkdtemp(prefix="dbmatrix-galera-it-", dir="/var/tmp")
    os.chmod(base, 0o755)
    exp = parse_experiment(SPEC)
    inv = localhost_inventory(f"{base}/w")
    hs = inv.hosts[0]
    store = ResultStore(f"{base}/results")
    record_plan(store, exp)
    host = hs.connect()
    ctx = HostContext(host, hs, host_facts(host, store), server_user(host), free_port(host), {})
    ctx.media.update(prepare_media(host, hs, exp))
    cell = exp.cells()[0]
    dataset = prepare_dataset(host, hs.workdir, exp, cell, ctx.user, None)  # socket only, as the runner loads
    yield {"base": base, "exp": exp, "store": store, "ctx": ctx, "dataset": dataset, "workdir": hs.workdir}
    host.close()
    shutil.rmtree(base, ignore_errors=True)


def _run(env, run_id: str) -> dict:
    exp = env["exp"]
    run = next(r for r in exp.plan() if r.run_id == run_id)
    return execute_galera_run([env["ctx"]] * 3, exp, run, env["dataset"], env["store"])


@pytest.fixture(scope="module")
def first_pass(env):
    t0 = time.monotonic()
    ok = _run(env, OTHER_RUN)
    with node_killer(env["workdir"]) as killer:
        failed = _run(env, KILLED_RUN)
    return ok, failed, killer.result, time.monotonic() - t0


def test_a_short_cell_on_a_synced_three_node_cluster(env, first_pass) -> None:
    m, _, _, _ = first_pass
    assert m.status == "ok", m.error
    assert m.topology["nodes"] == 3 and m.cluster["run_as"] == ["mysql"] * 3
    assert m.cluster["start_s"] > 0 and m.summary["tps"] > 0
    ports = [p for n in m.nodes.values() for p in n["ports"].values()]
    assert len(set(ports)) == 12 and min(ports) >= int(os.environ.get("DBMATRIX_BASE_PORT", "13306"))
    for name in ("node2", "node3"):
        assert m.nodes[name]["sst_s"] is not None and m.nodes[name]["join_s"] >= m.nodes[name]["sst_s"]
    assert set(m.wsrep) == {"node1", "node2", "node3"}
    for name, d in m.wsrep.items():
        assert set(d) == set(WSREP_KEYS)
        assert d["cluster_size"] == 3 and d["state"] == "Synced" and d["cluster_status"] == "Primary"
        assert abs(d["window_s"] - 4) < 3
        assert 0 <= d["fc_paused_pct"] <= 100 and d["applier_threads"] == 1
        assert d["committed"] > 0  # write-sets committed cluster-wide in the window
    n1 = m.wsrep["node1"]
    # Galera opens its window idle (a separate warm-up sysbench): read under load, one node after the
    # other, the nodes' counters would bracket different write sets.
    assert m.window_mode == "two_process" and m.window_mode_reason is not None
    assert n1["local_commits"] == n1["replicated"] > 0
    assert m.wsrep["node2"]["received"] >= m.wsrep["node1"]["replicated"]
    d = env["store"].raw / OTHER_RUN
    variables = (d / "variables-node3.tsv").read_text()
    assert "wsrep_slave_threads\t1\n" in variables and "wsrep_on\tON\n" in variables
    assert {f"mariadbd-node{i}.err" for i in (1, 2, 3)} <= set(env["store"].record(OTHER_RUN).files)
    samples = (d / "wsrep-samples.txt").read_text()
    assert all(f" node{i} wsrep_local_recv_queue" in samples for i in (1, 2, 3))
    assert all(v["samples"] >= 3 for v in m.wsrep_samples["nodes"].values())
    assert all(v.get("stop_mode") == "kill" and v["stop_s"] < 2 for v in m.nodes.values())


def test_a_node_killed_mid_run_fails_that_run_only(env, first_pass) -> None:
    _, m, killed, _ = first_pass
    assert killed is not None, "the killer never saw the measured sysbench"
    assert m.status == "failed" and m.failed_step == "measure"
    assert "node2" in m.error and "died during the measured window" in m.error
    assert m.dead_nodes == ["node2"] and m.nodes["node2"]["pid"] == killed
    store = env["store"]
    files = set(store.record(KILLED_RUN).files)
    assert {f"mariadbd-node{i}.err" for i in (1, 2, 3)} <= files
    assert {"status-before-node2.tsv", "traceback.txt", "sysbench.out", "wsrep-samples.txt"} <= files
    assert "mysqld got signal" not in (store.raw / KILLED_RUN / "mariadbd-node1.err").read_text()
    assert store.status(OTHER_RUN) == "ok" and store.status(KILLED_RUN) == "failed"
    assert not _ours(env["base"]), "processes left after the failed run"


def test_rerun_resumes_the_failed_run_only(env, first_pass) -> None:
    store = env["store"]
    before = (store.raw / OTHER_RUN / "manifest.json").read_text()
    pending = [r.run_id for r in env["exp"].plan() if store.status(r.run_id) != "ok"]
    assert pending == [KILLED_RUN]
    m = _run(env, KILLED_RUN)
    assert m.status == "ok", m.error
    assert all(d["applier_threads"] == 4 and d["cluster_size"] == 3 for d in m.wsrep.values())
    assert (store.raw / OTHER_RUN / "manifest.json").read_text() == before
    kept = [p.name for p in store.failed.iterdir()]
    assert len(kept) == 1 and kept[0].startswith(f"{KILLED_RUN}@")
    assert json.loads((store.failed / kept[0] / "manifest.json").read_text())["failed_step"] == "measure"
    assert not _ours(env["base"]), "processes left after the rerun"


def test_a_missing_sst_tool_fails_the_run_at_plan(env) -> None:
    if shutil.which("mariabackup"):
        pytest.skip("mariabackup is installed: nothing is missing")
    exp = parse_experiment({**SPEC, "topology": {"kind": "galera", "nodes": 3, "sst_method": "mariabackup"}})
    store = ResultStore(f"{env['base']}/results-mariabackup")
    m = execute_galera_run([env["ctx"]] * 3, exp, exp.plan()[0], env["dataset"], store)
    assert m.status == "failed" and m.failed_step == "plan"
    assert "install the mariadb-backup package" in m.error


def test_datadirs_the_mysql_user_cannot_reach_are_refused(env) -> None:
    from dbmatrix.run.galera_cluster import GaleraCluster, GaleraError, plan_nodes
    from dbmatrix.spec.experiment import Topology

    hidden = Path(env["base"]) / "hidden"
    hidden.mkdir(mode=0o700)
    ctx = env["ctx"]
    spec = type(ctx.spec)(ctx.spec.name, workdir=str(hidden / "w"))
    nodes = plan_nodes(Topology("galera", 3), [spec] * 3, [str(hidden / "d")] * 3, 29000)
    cluster = GaleraCluster([ctx.host] * 3, nodes, [[]] * 3, ["mysql"] * 3)
    with pytest.raises(GaleraError, match="node1: user 'mysql' cannot enter or write"):
        cluster.prepare_dirs()
