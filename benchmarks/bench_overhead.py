"""Benchmark: how much of the wall time is measurement, and what the harness costs in throughput.

(a) The measured fraction of a results directory's wall time (first run's start to last run's finish):
    seconds of measured window (sysbench's own window time, parsed from each run's output) over wall
    time, with the mean seconds per step per run from the manifests. The limit for 5 s warm-ups and 10 s
    windows is 10/15 = 0.67. From existing results (no servers):

        PYTHONPATH=lib .venv/bin/python benchmarks/bench_overhead.py fraction \
            --results data/reference/storage-matrix-quick

    Per campaign instead, from the campaign records (each sitting's wall time, dataset loads included; the
    sentinel and calibration runs' windows counted), with the warm-ups' share and the ceiling they leave:

        PYTHONPATH=lib .venv/bin/python benchmarks/bench_overhead.py campaigns --from 3 \
            $(for d in data/reference/*-paper; do echo --results $d; done)

    or run the quick storage matrix first (about 14 minutes on 2 vCPUs, under the machine lock;
    ``--max-runs 16``, one replicate block, about 5 minutes):

        DBMATRIX_WORKDIR=/tmp/me/work PYTHONPATH=lib .venv/bin/python benchmarks/bench_overhead.py \
            fraction --run /tmp/me/quick-results

(b) Harness throughput over hand-run throughput: one cell of the quick storage matrix, alternating a run
    through the harness (``run_study``, one run at a time) and a run by hand with the same server command
    line (from that run's manifest) on a fresh copy of the same snapshot and the same sysbench command(s),
    ``--pairs`` pairs (the first of each pair alternates); prints each pair and the mean ratio with a 95 %
    t interval (goal >= 0.97). Starts servers: run it under the machine lock.

        PYTHONPATH=lib .venv/bin/python benchmarks/bench_overhead.py ratio --workdir /tmp/me/work --pairs 3

It prints numbers and asserts nothing. $DBMATRIX_WINDOW_MODE (one_process / two_process) picks how the
harness warms up, to compare the two.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.parse import sysbench
from dbmatrix.record import RunRecord
from dbmatrix.run.matrix import run_study
from dbmatrix.store import ResultStore
from dbmatrix.study import load_study

QUICK_SPEC = Path(__file__).resolve().parents[1] / "specs" / "quick.yaml"


# ------------------------------------------------------------------------------------ (a) measured fraction

def _utc(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()


def measured_fraction(results: Path) -> dict[str, Any]:
    """Window seconds over wall seconds of a results directory, and mean seconds per step per run."""
    store = ResultStore(results)
    manifests = [m for m in store.records() if m.started_utc and m.finished_utc]
    if not manifests:
        raise SystemExit(f"{results}: no run manifests under raw/")
    wall = max(_utc(m.finished_utc) for m in manifests) - min(_utc(m.started_utc) for m in manifests)
    ok = [m for m in manifests if m.ok]
    window = sum(store.parsed(m.run_id).summary.get("total_time_s") or 0.0 for m in ok)
    steps: dict[str, list[float]] = {}
    for m in ok:
        for k, v in m.steps.items():
            steps.setdefault(k, []).append(float(v))
        unaccounted = float(m.duration_s or 0) - sum(m.steps.values())
        steps.setdefault("(other, in the run)", []).append(unaccounted)
    gaps = wall - sum(float(m.duration_s or 0) for m in manifests)
    modes = sorted({(m.window_mode or "two_process (before window_mode)") for m in ok})
    return {"results": str(results), "runs": len(manifests), "ok": len(ok), "window_modes": modes,
            "wall_s": round(wall, 1), "window_s": round(window, 1),
            "measured_fraction": round(window / wall, 4) if wall else None,
            "window_over_run_time": round(window / sum(float(m.duration_s or 0) for m in ok), 4),
            "between_runs_s": round(gaps, 1), "per_run_s": {k: round(statistics.fmean(v), 3) for k, v in steps.items()},
            "run_duration_mean_s": round(statistics.fmean(float(m.duration_s or 0) for m in ok), 3)}


def print_fraction(f: dict[str, Any]) -> None:
    print(f"(a) {f['results']}: {f['ok']}/{f['runs']} runs ok, window mode {', '.join(f['window_modes'])}")
    print(f"    wall {f['wall_s']} s (first start to last finish), measured windows {f['window_s']} s "
          f"-> measured fraction {f['measured_fraction']} (limit 10/15 = 0.67, goal >= 0.62)")
    print(f"    windows over the runs' own time (without datasets and gaps): {f['window_over_run_time']}")
    print(f"    mean run {f['run_duration_mean_s']} s; outside runs (datasets, connecting, gaps): "
          f"{f['between_runs_s']} s")
    print("    per-step seconds per run (mean over ok runs):")
    for k, v in sorted(f["per_run_s"].items(), key=lambda kv: -kv[1]):
        print(f"      {k:<22} {v:8.3f}")


def campaign_fractions(results: Path) -> list[dict[str, Any]]:
    """Per campaign of a results directory: the wall time of its sittings (the campaign record's sessions, each
    from its start, dataset loads included, to its end) and the shares of it spent in measured windows, in
    warm-ups and in the rest (loads, restores, server starts, cluster joins, stops), over every run the campaign
    measured: the design's, its A/A sentinels' and its calibration's. Window and warm-up seconds are the
    harness's own step times (``steps.measure``, ``steps.warmup``), which a multi-instance run has once."""
    store = ResultStore(results)
    out = []
    for rec in store.campaigns():
        k = int(rec["campaign"])
        runs = [m for s in (store, ResultStore(store.sentinel_dir(k)),
                            ResultStore(results / "calibration" / f"campaign-{k}"))
                for m in s.records() if m.ok and int(m.campaign or 1) == k]
        wall = sum(_utc(s["ended_utc"]) - _utc(s["started_utc"]) for s in rec.get("sessions") or [])
        window = sum(float(m.steps.get("measure", 0.0)) for m in runs)
        warmup = sum(float(m.steps.get("warmup", 0.0)) for m in runs)
        out.append({"study": rec.get("experiment") or results.name, "campaign": k, "runs": len(runs),
                    "sittings": len(rec.get("sessions") or []), "wall_s": round(wall, 1),
                    "window_s": round(window, 1), "warmup_s": round(warmup, 1),
                    "measured": round(window / wall, 4) if wall else None,
                    "warmup": round(warmup / wall, 4) if wall else None,
                    "rest": round(1 - (window + warmup) / wall, 4) if wall else None})
    return out


def pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The shares over several campaigns (weighted by their wall time)."""
    wall = sum(r["wall_s"] for r in rows)
    window, warmup = sum(r["window_s"] for r in rows), sum(r["warmup_s"] for r in rows)
    return {"campaigns": len(rows), "wall_h": round(wall / 3600, 2), "measured": round(window / wall, 3),
            "warmup": round(warmup / wall, 3), "rest": round(1 - (window + warmup) / wall, 3),
            "ceiling": round(window / (window + warmup), 3)}


def print_campaigns(rows: list[dict[str, Any]], first: int) -> None:
    print(f"(a) measured fraction of each campaign's sittings (loads included), campaigns {first} on; ceiling: "
          "windows / (windows + warm-ups), what no faster harness can pass at the spec's warm-up")
    print(f"    {'study':<20} {'campaigns':>9} {'hours':>6} {'measured':>9} {'warm-up':>8} {'rest':>6} {'ceiling':>8}"
          "   per campaign")
    def line(label: str, p: dict[str, Any], each: str = "") -> None:
        print(f"    {label:<20} {p['campaigns']:>9} {p['wall_h']:>6.2f} {p['measured']:>9.3f} {p['warmup']:>8.3f} "
              f"{p['rest']:>6.3f} {p['ceiling']:>8.3f}   {each}".rstrip())

    kept = [r for r in rows if r["campaign"] >= first and r["wall_s"]]
    studies = sorted({r["study"] for r in kept})
    for study in studies:
        mine = [r for r in kept if r["study"] == study]
        line(study, pooled(mine), ", ".join(f"{r['campaign']}: {r['measured']:.3f}" for r in mine))
    if len(studies) > 1:
        line("all", pooled(kept))


def run_quick(results: Path, max_runs: int | None) -> None:
    study = load_study("quick", spec=QUICK_SPEC, results_dir=results)
    counts = run_study(study, progress=False, max_runs=max_runs)
    print(f"    ran {QUICK_SPEC.name}: {counts}")


# ------------------------------------------------------------------------------------ (b) harness / hand

def ratio_spec(pairs: int) -> dict[str, Any]:
    """The quick storage matrix's workload and timing, one cell (InnoDB, 16k, no compression, disk, 100 %)."""
    spec = yaml.safe_load(QUICK_SPEC.read_text())
    spec.update(experiment="bench-overhead-ratio", design="full", repetitions=pairs,
                factors={"engine": "innodb", "cache_pct": 100, "block_size": "16k", "compression": "none",
                         "medium": "disk", "threads": spec["factors"]["threads"]})
    for k in ("comparisons", "baseline", "noise", "claims"):
        spec.pop(k, None)
    return spec


def hand_run(host: LocalHost, m: RunRecord) -> float:
    """The run of manifest `m` by hand: fresh copy of its snapshot, its server command line, its sysbench
    command(s), a clean shutdown; returns the window's tps."""
    q = shlex.quote
    argv = shlex.split(m.server["command"])
    opt = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("--") and "=" in a}
    datadir, sock = opt["--datadir"], opt["--socket"]
    host.run(f"rm -rf {q(datadir)} && cp -a {q(m.dataset['snapshot'])} {q(datadir)}")
    host.run("sync && echo 3 > /proc/sys/vm/drop_caches", check=False)
    host.run(f"rm -f {q(opt['--pid-file'])}; cd /; setsid nohup {m.server['command']} > /dev/null 2>&1 "
             "< /dev/null &")
    ping = f"mariadb-admin --no-defaults -uroot --socket={q(sock)} ping"
    deadline = time.monotonic() + 60
    while not host.run(ping, check=False).ok:
        if time.monotonic() > deadline:
            raise RuntimeError("hand run: the server did not answer within 60 s")
        time.sleep(0.1)
    try:
        if m.sysbench_warmup:
            host.run(m.sysbench_warmup["command"])
        r = host.run(m.sysbench["command"])
    finally:
        host.run(f"mariadb-admin --no-defaults -uroot --socket={q(sock)} shutdown", check=False, timeout=120)
    parsed = sysbench.parse_output(r.stdout, r.stderr)
    if not parsed.complete:
        raise RuntimeError(f"hand run: sysbench did not complete: {r.stdout[-300:]}")
    return float(parsed.summary["tps"])


def t_interval(xs: list[float]) -> tuple[float, float, float]:
    from scipy import stats

    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, len(xs) - 1)) * statistics.stdev(xs) / math.sqrt(len(xs))
    return mean, mean - half, mean + half


def harness_ratio(workdir: Path, pairs: int) -> dict[str, Any]:
    os.environ["DBMATRIX_WORKDIR"] = str(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    spec_path = workdir / "bench-overhead-ratio.yaml"
    spec_path.write_text(yaml.safe_dump(ratio_spec(pairs)))
    results = workdir / "results"
    study = load_study("quick", spec=spec_path, results_dir=results)
    host = LocalHost()
    rows = []
    for i in range(pairs):
        order = ("harness", "hand") if i % 2 == 0 else ("hand", "harness")
        tps: dict[str, float] = {}
        for who in order:
            if who == "harness":
                before = {m.run_id for m in study.store.records()}
                run_study(study, progress=False, max_runs=1)
                (m,) = [m for m in study.store.records() if m.run_id not in before]
                if m.status != "ok":
                    raise SystemExit(f"harness run {m.run_id} failed: {m.error}")
                tps["harness"], last = float(m.summary["tps"]), m
            else:
                if "last" not in locals():  # the hand run needs a manifest: measure the harness first once
                    raise SystemExit("internal: the first pair must start with the harness")
                tps["hand"] = hand_run(host, last)
        rows.append({"pair": i + 1, "first": order[0], **tps, "ratio": tps["harness"] / tps["hand"]})
        print(f"    pair {i + 1} ({order[0]} first): harness {tps['harness']:.2f} tps, hand {tps['hand']:.2f} tps, "
              f"ratio {rows[-1]['ratio']:.4f}", flush=True)
    mean, lo, hi = t_interval([r["ratio"] for r in rows])
    return {"pairs": rows, "ratio_mean": round(mean, 4), "ci95": [round(lo, 4), round(hi, 4)],
            "window_mode": last.window_mode, "command": last.sysbench["command"]}


# ------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("fraction", help="(a) measured fraction of wall time")
    g = a.add_mutually_exclusive_group(required=True)
    g.add_argument("--results", type=Path, action="append", help="an existing results directory (repeatable)")
    g.add_argument("--run", type=Path, help="run the quick storage matrix into this results directory first")
    a.add_argument("--max-runs", type=int, help="with --run: only the first N runs of the plan (16 = one block)")
    c = sub.add_parser("campaigns", help="(a) measured fraction per campaign, from the campaign records")
    c.add_argument("--results", type=Path, action="append", required=True,
                   help="a results directory with campaign records (repeatable), e.g. data/reference/tpcc-paper")
    c.add_argument("--from", dest="first", type=int, default=1, help="only campaigns from this one on")
    b = sub.add_parser("ratio", help="(b) harness / hand-run throughput")
    b.add_argument("--workdir", type=Path, required=True, help="servers' and results' directory (under /tmp)")
    b.add_argument("--pairs", type=int, default=3)
    for p in (a, b, c):
        p.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args(argv)
    out: dict[str, Any] = {}
    if args.what == "campaigns":
        out["campaigns"] = [r for d in args.results for r in campaign_fractions(d)]
        print_campaigns(out["campaigns"], args.first)
    elif args.what == "fraction":
        dirs = args.results or [args.run]
        if args.run:
            run_quick(args.run, args.max_runs)
        out["fraction"] = [measured_fraction(d) for d in dirs]
        for f in out["fraction"]:
            print_fraction(f)
    else:
        print(f"(b) harness / hand-run throughput, {args.pairs} pairs, alternating:")
        r = harness_ratio(args.workdir, args.pairs)
        out["ratio"] = r
        print(f"    harness/hand = {r['ratio_mean']} (95 % t interval {r['ci95'][0]} .. {r['ci95'][1]}; "
              f"goal >= 0.97), window mode {r['window_mode']}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
