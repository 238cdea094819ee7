"""Clean shutdown vs SIGKILL at the end of a measured run, on the same cells.

A run's datadir is thrown away after it (the next run restores a fresh copy of the snapshot), so its
server need not shut down cleanly. This script runs the same cells twice over, once per stop mode
(``stop_mode: clean`` and ``kill``, two studies sharing one workdir and so the same dataset snapshots),
alternating the modes run by run (ABBA, so a drift of the machine hits both alike), and prints per mode
the stop seconds, every step's mean seconds and the throughput, then the paired kill/clean ratios of
tps and of run wall time with 95 % CIs, and whether the throughputs agree (the CI of their ratio holds 1).

Run it under the machine lock:

    flock /tmp/dbmatrix-machine.lock env PYTHONPATH=lib .venv/bin/python benchmarks/bench_stop.py
    ... --spec specs/smoke.yaml --repetitions 4      # the smoke cells instead of the quick storage cells
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import yaml
from scipy import stats

from dbmatrix import paths
from dbmatrix.run.matrix import run_study
from dbmatrix.study import load_study

MODES = ("clean", "kill")
# The quick storage matrix's cells on tmpfs (its fast medium, where a stop is the largest share of a run):
# both engines at both cache sizes.
QUICK_SUBSET = {"engine": ["innodb", "myrocks"], "cache_pct": [25, 100], "block_size": "16k",
                "compression": "none", "medium": "tmpfs", "threads": 4}


def spec_for(base: dict[str, Any], mode: str, repetitions: int, subset: bool) -> dict[str, Any]:
    spec = {**base, "experiment": f"{base['experiment']}-stop-{mode}", "stop_mode": mode,
            "repetitions": repetitions}
    if subset:
        spec.update(factors=QUICK_SUBSET, design="full")
        spec.pop("comparisons", None)
        spec["baseline"] = {"cache_pct": 100}
    return spec


def paired_ratio(pairs: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Geometric mean of b/a over pairs (a, b) with a 95 % t interval on the log scale."""
    logs = [math.log(b / a) for a, b in pairs if a > 0 and b > 0]
    n = len(logs)
    mean = statistics.fmean(logs)
    if n < 2:
        return math.exp(mean), float("nan"), float("nan")
    half = stats.t.ppf(0.975, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="specs/quick.yaml")
    ap.add_argument("--repetitions", type=int, default=2, help="runs per cell and mode")
    ap.add_argument("--all-cells", action="store_true", help="every cell of the spec, not the tmpfs subset "
                                                              "(the subset applies to the quick spec only)")
    ap.add_argument("--out", help="results root (default: a new temporary directory)")
    args = ap.parse_args()
    spec_path = Path(args.spec) if Path(args.spec).is_absolute() else paths.repo_root() / args.spec
    base = yaml.safe_load(spec_path.read_text())
    subset = not args.all_cells and base["experiment"] == "storage-matrix-quick"
    root = Path(args.out or tempfile.mkdtemp(prefix="bench-stop-"))
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DBMATRIX_WORKDIR", str(root / "w"))
    studies = {}
    for mode in MODES:
        f = root / f"spec-{mode}.yaml"
        f.write_text(yaml.safe_dump(spec_for(base, mode, args.repetitions, subset)))
        studies[mode] = load_study("quick", spec=f, results_dir=root / f"results-{mode}")
    total = len(studies["clean"].experiment.plan())
    for k in range(total):  # ABBA: clean first on even pairs, kill first on odd ones
        for mode in (MODES if k % 2 == 0 else MODES[::-1]):
            counts = run_study(studies[mode], progress=False, max_runs=1)
            print(f"pair {k + 1}/{total} {mode}: ok={counts.ok} failed={counts.failed}", flush=True)

    runs: dict[str, dict[tuple[str, int], Any]] = {m: {} for m in MODES}
    for mode, study in studies.items():
        for m in study.store.records():
            if m.ok:
                runs[mode][(m.cell_id, m.repetition)] = m
    keys = sorted(set(runs["clean"]) & set(runs["kill"]))
    print(f"\n{len(keys)} paired runs (cell x repetition) of {spec_path.name}; results in {root}")
    print(f"{'mode':6} {'stop_s':>8} {'tps':>9} {'wall_s':>7}  steps (mean s)")
    for mode in MODES:
        ms = [runs[mode][k] for k in keys]
        steps = {s: statistics.fmean(m.steps.get(s, 0) for m in ms) for s in ms[0].steps}
        print(f"{mode:6} {statistics.fmean(m.server['stop_s'] for m in ms):8.3f} "
              f"{statistics.fmean(m.summary['tps'] for m in ms):9.1f} "
              f"{statistics.fmean(m.duration_s for m in ms):7.2f}  "
              + " ".join(f"{s}={v:.2f}" for s, v in steps.items()))
        assert all(m.server["stop_mode"] == mode for m in ms)
    for what, get in (("tps", lambda m: m.summary["tps"]), ("stop_s", lambda m: m.server["stop_s"]),
                      ("run wall s", lambda m: m.duration_s)):
        r, lo, hi = paired_ratio([(get(runs["clean"][k]), get(runs["kill"][k])) for k in keys])
        print(f"kill/clean {what}: {r:.3f} [95 % CI {lo:.3f}, {hi:.3f}]")
    r, lo, hi = paired_ratio([(runs["clean"][k].summary["tps"], runs["kill"][k].summary["tps"]) for k in keys])
    agree = lo <= 1 <= hi
    print(f"throughputs agree (CI of the tps ratio holds 1): {'yes' if agree else 'NO'}")
    for k in keys:
        c, x = runs["clean"][k], runs["kill"][k]
        print(f"  {k[0]} r{k[1]}: tps clean {c.summary['tps']:.1f} kill {x.summary['tps']:.1f}; "
              f"stop clean {c.server['stop_s']:.3f} s kill {x.server['stop_s']:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
