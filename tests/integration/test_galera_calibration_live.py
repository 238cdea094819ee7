"""Seed 002's premise, for real: a three-node Galera cluster whose followers keep their data on a throttled
RAM block device (node 1 unthrottled), and the calibration step that chooses the throttle's limit before the
campaign, through `dbmatrix run`: the first candidate that leaves the cluster paused by flow control at
least the target share of the window is chosen, its calibration run is recorded with its logs, the limit
is in the cgroup, and the study's run has its followers (only) on the throttled medium.

The other follower limit, ``topology.calibrate: {limit: cpu_max}``, the same way: its calibration puts each
follower's mariadbd in its own cgroup (v2 cpu.max, or v1 cpu.cfs_quota_us where the cpu controller is on v1) at
the candidate share of one CPU; node 1 stays outside any CPU group, the limit is recorded in every run and it
bites (throttled periods in every window, cgroup cpu.stat); a CPU-bound process in such a group gets its
share. (The paper profile uses neither limit but the seed's own condition, a buffer pool at 9 % of the data:
docs/usage.md.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbmatrix import paths
from dbmatrix.hosts import cpulimit
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run.galera_cluster import GALERA_PROVIDER
from dbmatrix.store import ResultStore

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or not Path(GALERA_PROVIDER).is_file() or shutil.which("rsync") is None,
                       reason="needs root, galera-4 and rsync"),
]

TARGET = 20.0


def _dbmatrix(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib")}
    return subprocess.run([sys.executable, "-m", "dbmatrix", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_followers_on_a_calibrated_throttled_medium() -> None:
    base = Path(tempfile.mkdtemp(prefix="dbmatrix-galera-cal-", dir="/var/tmp"))  # the nodes run as mysql
    os.chmod(base, 0o755)
    inv = base / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "localhost", "address": "local", "workdir": str(base / "w"),
                                              "media": {"disk": {"kind": "dir"},
                                                        "slow": {"kind": "throttled", "write_iops": 5000,
                                                                 "base": {"kind": "ram-block", "size": "512M"}}}}]}))
    spec = base / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "experiment": "it-galera-cal",
        "topology": {"kind": "galera", "nodes": 3,
                     "calibrate": {"medium": "slow", "limit": "write_iops", "candidates": [300, 150],
                                   "target_fc_paused_pct": TARGET, "warmup_s": 1, "measure_s": 4}},
        "workload": {"name": "oltp_write_only", "tables": 2, "table_size": 2000},
        "factors": {"cache_pct": 100, "threads": 4, "slave_threads": [1], "follower_medium": ["slow"]},
        "repetitions": 1, "seed": 7, "warmup_s": 1, "measure_s": 4,
        "server_options": {"innodb_log_file_size": "16M", "innodb_flush_log_at_trx_commit": 1},
    }))
    results = base / "results"
    try:
        r = _dbmatrix("run", "--profile", "smoke", "--spec", str(spec), "--inventory", str(inv), "--results",
                      str(results), "--no-progress", "--campaign", "auto")
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
        counts = json.loads(r.stdout.strip().splitlines()[-1])
        assert (counts["ok"], counts["failed"]) == (1, 0), counts

        rec = json.loads((results / "calibration" / "campaign-1.json").read_text())
        assert rec["reached"] is True and rec["chosen"] == 300, rec  # the mildest candidate reaches 20 %
        assert rec["runs"][0]["fc_paused_pct"] >= TARGET and len(rec["runs"]) == 1
        cal_store = ResultStore(results / "calibration" / "campaign-1")
        (cal,) = list(cal_store.records())
        assert cal.status == "ok" and cal.cell["follower_medium"] == "slow"
        assert (cal_store.raw / cal.run_id / "wsrep-samples.txt").is_file()

        throttle = rec["medium_state"]["throttle"]
        limit_file = Path(throttle["cgroup"]) / "blkio.throttle.write_iops_device"
        if throttle.get("version") == 1:
            assert f"{throttle['device']} 300" in limit_file.read_text()

        (m,) = list(ResultStore(results).records())
        assert m.status == "ok" and m.media_state["slow"]["throttle"]["write_iops"] == 300
        nodes = m.nodes
        assert "/media/disk/" in nodes["node1"]["command"] and "dbmatrix-throttle" not in nodes["node1"]["command"]
        for n in ("node2", "node3"):
            assert "/media/slow/" in nodes[n]["command"] and "dbmatrix-throttle" in nodes[n]["command"]
        assert min(v["fc_paused_pct"] for v in m.wsrep.values()) > 0  # the followers held the writer back

        r = _dbmatrix("analyse", "--profile", "smoke", "--spec", str(spec), "--inventory", str(inv),
                      "--results", str(results))
        assert r.returncode == 0, r.stderr[-2000:]
        table = (results / "processed" / "replication-calibration.csv").read_text().splitlines()
        assert table[0].startswith("campaign,medium,limit_kind,limit,status,fc_paused_pct")
        assert table[1].startswith("1,slow,write_iops,300,ok,") and table[1].endswith(",True,True")
    finally:
        _dbmatrix("media", "--inventory", str(inv), "teardown", "slow", timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def _study(base: Path, name: str, calibrate: dict[str, Any] | None, slave_threads: list[int]) -> list[Any]:
    inv = base / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "localhost", "address": "local", "workdir": str(base / "w"),
                                              "media": {"disk": {"kind": "dir"}}}]}))
    topology: dict[str, Any] = {"kind": "galera", "nodes": 3, **({"calibrate": calibrate} if calibrate else {})}
    spec = base / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({
        "experiment": name, "topology": topology,
        "workload": {"name": "oltp_write_only", "tables": 2, "table_size": 2000},
        "factors": {"cache_pct": 100, "threads": 4, "slave_threads": slave_threads},
        "repetitions": 1, "seed": 7, "warmup_s": 1, "measure_s": 4,
        "server_options": {"innodb_log_file_size": "16M", "innodb_flush_log_at_trx_commit": 1},
    }))
    results = base / name
    r = _dbmatrix("run", "--profile", "smoke", "--spec", str(spec), "--inventory", str(inv), "--results",
                  str(results), "--no-progress", "--campaign", "auto")
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    return sorted(ResultStore(results).records(), key=lambda m: m.run_id)


def _paused(m: Any) -> float:
    return max(v["fc_paused_pct"] for v in m.wsrep.values())


def test_followers_limited_in_cpu_hold_the_writer_back() -> None:
    base = Path(tempfile.mkdtemp(prefix="dbmatrix-galera-cpu-", dir="/var/tmp"))  # the nodes run as mysql
    os.chmod(base, 0o755)
    try:
        # one candidate and one cell (the limit's mechanics; what a quota does to flow control on this machine,
        # measured with 4 candidates and an unlimited baseline, is in docs/usage.md)
        limited = _study(base, "it-galera-cpu", {"limit": "cpu_max", "candidates": [25],
                                                 "target_fc_paused_pct": TARGET, "warmup_s": 1, "measure_s": 4},
                         [1])
        rec = json.loads((base / "it-galera-cpu" / "calibration" / "campaign-1.json").read_text())
        summary = {"calibration": [{k: r[k] for k in ("limit", "fc_paused_pct", "tps")} for r in rec["runs"]],
                   "chosen": rec["chosen"], "reached": rec["reached"],
                   "limited": {m.cell["slave_threads"]: {"tps": m.summary["tps"], "fc_paused_pct": _paused(m),
                                                         "follower_cpu": m.cluster["follower_cpu"]}
                               for m in limited}}
        print("GALERA-CPU", json.dumps(summary))
        assert limited and all(m.status == "ok" for m in limited)
        assert rec["limit"] == "cpu_max" and rec["medium"] is None and rec["chosen"] == 25
        for m in limited:
            assert "dbmatrix-cpu" not in m.nodes["node1"]["command"]
            for n in ("node2", "node3"):
                assert "dbmatrix-cpu" in m.nodes[n]["command"]
                assert m.cluster["follower_cpu"][n]["cpu_pct"] == rec["chosen"]
                window = m.cluster["follower_cpu"][n]["window"]
                assert window["nr_periods"] > 0 and window["nr_throttled"] > 0, summary  # the limit bit
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _cpu_seconds(argv: list[str], seconds: float) -> float:
    p = subprocess.Popen(argv)
    try:
        time.sleep(seconds)
        fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups)")
def test_a_cpu_bound_process_gets_its_share() -> None:
    host = LocalHost("localhost")
    layout = cpulimit.detect_cpu_layout(host)
    name = f"it-cpu-{os.getpid()}"
    state = cpulimit.set_cpu_limit(host, layout, [name], 10)
    busy = ["sh", "-c", "while :; do :; done"]
    try:
        limited = _cpu_seconds([*cpulimit.join_prefix(layout, name), *busy], 3.0)
        free = _cpu_seconds(busy, 3.0)
        print("CPU-SHARE", json.dumps({"layout": [layout.version, layout.root], "limit_pct": state["cpu_pct"],
                                       "limited_cpu_s_in_3s": limited, "free_cpu_s_in_3s": free}))
        assert limited <= 0.5 and limited < free, (limited, free)  # 10 % of 3 s = 0.3 s
    finally:
        host.run(cpulimit.teardown_command(layout, [name]))
