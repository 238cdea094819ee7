"""Acceptance measurement (issue 19, part B): two hosts, one made slower on purpose; the host check,
the cache effect with and without the host block, and the effect measured on one host alone.

Run it (root; two network-namespace hosts with real sshd, as the integration tests; about 3 minutes of
machine time; on a shared machine under its lock):

    flock /tmp/dbmatrix-machine.lock env PYTHONPATH=$PWD/lib .venv/bin/python -m pytest \
        benchmarks/bench_host_blocking.py -s -q -p no:cacheprovider

How h2 is made slower: every process a host runs descends from its sshd, and CPU affinity is inherited,
so h1's sshd is pinned to CPU 0 and h2's to CPU 1, and a busy loop started here (and stopped by its PID)
competes on CPU 1: h2's server and client get about half a CPU, h1's a whole one. (A throttled medium
cannot be used: ``ip netns exec`` hides the cgroup tree; the spec's cpu_placement applies to every host.)
Prints the figures; asserts only that the study ran and the check flagged h2.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import yaml

from dbmatrix.analyse.effects import factorial_model
from dbmatrix.analyse.stats import welch_log_ratio
from dbmatrix.analyse.tables import analyse, closed_loop, factor_columns
from dbmatrix.run.matrix import run_study
from dbmatrix.study import load_study

SPEC = {
    "experiment": "bench-host-blocking",
    "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 20000},
    "factors": {"engine": "innodb", "cache_pct": [25, 100], "threads": [2]},
    "repetitions": int(os.environ.get("BENCH_REPS", "4")),
    "seed": 19,
    "warmup_s": 2,
    "measure_s": int(os.environ.get("BENCH_MEASURE_S", "8")),
    "server_options": {"innodb_flush_log_at_trx_commit": 1},
}


def cache_effect(runs, factors, blocks=()):
    """The model's cache effect 100 % / 25 % with its 95 % CI."""
    fit = factorial_model(runs, factors, blocks=blocks)
    e = fit.effects[fit.effects["term"] == "cache_pct"].set_index("level_1")
    d = float(e.loc[100, "log_effect"] - e.loc[25, "log_effect"])
    half = 2 * float(math.log(e.loc[100, "ci_hi"]) - e.loc[100, "log_effect"])
    return math.exp(d), math.exp(d - half), math.exp(d + half)


def _fmt(t):
    return f"x{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"


def test_two_hosts_one_slower(tmp_path: Path, netns_hosts) -> None:
    h1, h2 = netns_hosts["h1"], netns_hosts["h2"]
    for host, cpu in ((h1, 0), (h2, 1)):
        for pid in host.processes("sshd"):
            os.sched_setaffinity(pid, {cpu})
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                           preexec_fn=lambda: os.sched_setaffinity(0, {1}))
    try:
        spec = tmp_path / "spec.yaml"
        spec.write_text(yaml.safe_dump(SPEC))
        study = load_study("smoke", spec=spec, inventory=netns_hosts.inventory_yaml(tmp_path / "inv.yaml"),
                           results_dir=tmp_path / "res")
        counts = run_study(study, progress=False)
    finally:
        hog.kill()
        hog.wait()
        for host in (h1, h2):
            for pid in host.processes("sshd"):
                os.sched_setaffinity(pid, set(range(os.cpu_count() or 1)))
    assert counts.ok == counts.planned, counts
    a = analyse(study.store, study.experiment)
    runs = closed_loop(a.runs)
    factors = factor_columns(runs)
    pooled = a.hosts[a.hosts["scope"] == "pooled"].iloc[0]
    print(f"\n{counts.planned} runs, blocks per host: "
          + ", ".join(f"{h} {v['runs']} runs" for h, v in counts.hosts.items()))
    for _, r in a.hosts.iterrows():
        print(f"  host check {r['scope']:>6} {r['cell_id']:<34} {r['host']}/{r['reference']} "
              f"x{r['ratio']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}] {r['verdict']}")
    with_host = cache_effect(runs, factors, ("host",))
    without = cache_effect(runs, factors)
    h1_only = runs[runs["host"] == "h1"]
    h2_only = runs[runs["host"] == "h2"]
    alone = cache_effect(h1_only, factors)
    w = welch_log_ratio(h1_only.loc[h1_only["cache_pct"] == 100, "tps"].to_numpy(float),
                        h1_only.loc[h1_only["cache_pct"] == 25, "tps"].to_numpy(float))
    print(f"cache effect 100 % / 25 %: with host block {_fmt(with_host)}; same data without host term "
          f"{_fmt(without)}; h1 alone {_fmt(alone)} (Welch x{w['ratio']:.3f} [{w['ci_lo']:.3f}, {w['ci_hi']:.3f}]); "
          f"h2 alone {_fmt(cache_effect(h2_only, factors))}")
    print(f"model: {a.model}")
    assert pooled["verdict"] == "not interchangeable"
