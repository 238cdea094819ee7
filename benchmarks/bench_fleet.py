"""Benchmark: wall time of a fixed matrix on one vs two SSH test hosts (the fleet's speed-up).

Run it (root; it creates two network-namespace hosts with real sshd, like the integration tests):

    .venv/bin/python -m pytest benchmarks/bench_fleet.py -s -p no:cacheprovider

It prints a table; it asserts nothing about speed. Both test hosts share this machine's CPUs, so the
speed-up is bounded by the CPU the runs leave idle, and the throughput measured in parallel is lower
than alone: the mean tps of both configurations is printed beside the wall times to show it. On real,
separate hosts the runs do not compete and the speed-up approaches the number of hosts.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import yaml

from dbmatrix.run.matrix import run_study
from dbmatrix.study import load_study

RUNS_SPEC = {
    "experiment": "bench-fleet",
    "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 10000},
    "factors": {"engine": "innodb", "cache_pct": [50, 100], "threads": [1, 2]},
    "repetitions": int(os.environ.get("BENCH_FLEET_REPS", "2")),
    "seed": 7,
    "warmup_s": 1,
    "measure_s": int(os.environ.get("BENCH_FLEET_MEASURE_S", "5")),
    "server_options": {"innodb_flush_log_at_trx_commit": 1},
}


def _timed(tmp: Path, netns_hosts, name: str, hosts: list[str]) -> tuple[float, dict]:
    spec = tmp / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({**RUNS_SPEC, "experiment": name}))
    inv = netns_hosts.inventory_dict()
    inv["hosts"] = [h for h in inv["hosts"] if h["name"] in hosts]
    inv_path = tmp / f"{name}-inventory.yaml"
    inv_path.write_text(yaml.safe_dump(inv))
    study = load_study("smoke", spec=spec, inventory=inv_path, results_dir=tmp / name)
    t0 = time.monotonic()
    counts = run_study(study, progress=False)
    wall = time.monotonic() - t0
    tps = [m.summary["tps"] for m in study.store.records() if m.ok]
    return wall, {**counts.as_dict(), "mean_tps": statistics.fmean(tps) if tps else float("nan")}


def test_fleet_speedup(tmp_path: Path, netns_hosts) -> None:
    # Datasets first, on both hosts (cached in each host's workdir): the timed matrices only measure.
    _timed(tmp_path, netns_hosts, "bench-fleet-datasets", ["h1", "h2"])
    one, c1 = _timed(tmp_path, netns_hosts, "bench-fleet-1host", ["h1"])
    two, c2 = _timed(tmp_path, netns_hosts, "bench-fleet-2hosts", ["h1", "h2"])
    runs = c1["planned"]
    print(f"\nfleet speed-up, {runs} runs (warm-up {RUNS_SPEC['warmup_s']} s + measure "
          f"{RUNS_SPEC['measure_s']} s each), {os.cpu_count()} CPUs shared by both test hosts")
    print(f"{'hosts':>5} {'wall_s':>8} {'s/run':>7} {'ok':>4} {'mean_tps':>9}  runs per host")
    for n, wall, c in ((1, one, c1), (2, two, c2)):
        per_host = {h: v["runs"] for h, v in c.get("hosts", {}).items()} or {"h1": c["ok"] + c["failed"]}
        print(f"{n:>5} {wall:>8.1f} {wall / runs:>7.2f} {c['ok']:>4} {c['mean_tps']:>9.1f}  {per_host}")
    print(f"speed-up 2 hosts vs 1: {one / two:.2f}x")
