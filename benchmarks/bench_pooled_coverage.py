"""Coverage of the pooled (campaign-level) intervals the claims use, by simulation (issue 25).

Not a timed test: it prints, for 2, 3 and 5 campaigns, the share of simulated studies whose 95 % interval
contains the true value, for the estimators of the claims table:

- ``matched``: a ratio between two cells at fixed conditions (additive cell + campaign model over the
  study's cells; :func:`dbmatrix.analyse.contrasts.ratio_estimate`), e.g. pmemNoCache at one compression;
- ``averaged``: a ratio averaged over a free factor (the two-way model on campaign-level cell means);
- ``galera``: three applier levels at one setting, the highest against the lowest (the Galera claims);
- ``share``: a difference of two shares (MOVER on logit-scale shares; applierPause).

Each simulated study: a 2x2x2 factorial (or 3 cells for Galera/share) in K campaigns, 2 repetitions per
cell in randomised replicate blocks; log y = cell + campaign shift (sd 0.10: campaigns differ a lot, and
it cancels from contrasts) + campaign x cell (sd ``--cxc``, 0.02 by default: the reference data estimate it
at or below zero) + replicate-block drift (sd 0.01) + run noise (sd 0.04). Seeded; ``--sims`` per cell of
the table (500 by default: about +-1 point of standard error, ~1.5 minutes on one CPU).

    PYTHONPATH=$PWD/lib python benchmarks/bench_pooled_coverage.py [--sims 500] [--cxc 0.02] [--seed 1]
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
import warnings

import numpy as np
import pandas as pd

from dbmatrix.analyse.contrasts import ratio_estimate
from dbmatrix.analyse.shares import share_difference

SD_CAMPAIGN, SD_BLOCK, SD_RUN, REPS = 0.10, 0.01, 0.04, 2
A_EFFECT = {("lo", "x"): math.log(1.5), ("lo", "y"): math.log(1.2), ("hi", "x"): 0.0, ("hi", "y"): 0.0}


def factorial(rng: np.random.Generator, k: int, cxc: float) -> pd.DataFrame:
    """A 2^3 study (a compared, b and c other factors; a's effect depends on b, not on c)."""
    rows = []
    cells = list(itertools.product(["a1", "a0"], ["lo", "hi"], ["x", "y"]))
    for camp in range(1, k + 1):
        shift = rng.normal(0, SD_CAMPAIGN)
        u = {c: rng.normal(0, cxc) for c in cells}
        for block in range(1, REPS + 1):
            drift = rng.normal(0, SD_BLOCK)
            for c in cells:
                a, b, cc = c
                log = math.log(1000) + (A_EFFECT[(b, cc)] if a == "a1" else 0.0) + (0.3 if b == "hi" else 0.0)
                log += shift + u[c] + drift + rng.normal(0, SD_RUN)
                rows.append({"a": a, "b": b, "c": cc, "campaign": camp, "block": block,
                             "run_id": f"{a}{b}{cc}-{camp}-{block}", "tps": math.exp(log)})
    return pd.DataFrame(rows)


def galera(rng: np.random.Generator, k: int, cxc: float) -> pd.DataFrame:
    """Three applier levels (tps ratio 16/1 = 1.8) and their flow-control paused share (55 % -> 12 %)."""
    rows = []
    levels = {1: (500.0, 0.55), 4: (750.0, 0.25), 16: (900.0, 0.12)}
    for camp in range(1, k + 1):
        shift = rng.normal(0, SD_CAMPAIGN)
        for block in range(1, REPS + 1):
            drift = rng.normal(0, SD_BLOCK)
            for st, (tps, share) in levels.items():
                logit = math.log(share / (1 - share)) + rng.normal(0, cxc * 5) + rng.normal(0, 0.15)
                rows.append({"slave_threads": st, "campaign": camp, "block": block, "run_id": f"{st}-{camp}-{block}",
                             "tps": tps * math.exp(shift + rng.normal(0, cxc) + drift + rng.normal(0, SD_RUN)),
                             "fc_paused_pct": 100 / (1 + math.exp(-logit))})
    return pd.DataFrame(rows)


def covers(lo: float, hi: float, truth: float) -> bool:
    return bool(math.isfinite(lo) and math.isfinite(hi) and lo <= truth <= hi)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=500)
    ap.add_argument("--cxc", type=float, default=0.02, help="sd of the campaign x cell effect (log scale)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--campaigns", default="2,3,5")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    truth = {"matched": 1.5, "averaged": math.exp((math.log(1.5) + math.log(1.2)) / 2 / 2 + 0.0),
             "galera": 900 / 500, "share": 100 * (0.12 - 0.55)}
    # a1/a0 averaged over b and c: mean of the four cells' log effects
    truth["averaged"] = math.exp(float(np.mean(list(A_EFFECT.values()))))
    print(f"coverage of nominal 95 % intervals, {args.sims} simulated studies per cell; campaign sd "
          f"{SD_CAMPAIGN}, campaign x cell sd {args.cxc}, block sd {SD_BLOCK}, run sd {SD_RUN}, {REPS} reps")
    print(f"{'campaigns':>9} | {'matched':>8} {'averaged':>8} {'galera':>8} {'share':>8} | median width (log) "
          "matched / galera")
    t0 = time.time()
    worst = 1.0
    for k in (int(x) for x in args.campaigns.split(",")):
        hits = dict.fromkeys(truth, 0)
        widths: dict[str, list[float]] = {"matched": [], "galera": []}
        for _ in range(args.sims):
            runs = factorial(rng, k, args.cxc)
            m = ratio_estimate(runs, "tps", "a", "a1", "a0", {"b": "lo", "c": "x"}, factors=["a", "b", "c"])
            hits["matched"] += covers(m.ci_lo, m.ci_hi, truth["matched"])
            widths["matched"].append(math.log(m.ci_hi / m.ci_lo))
            v = ratio_estimate(runs, "tps", "a", "a1", "a0", {}, factors=["a", "b", "c"])
            hits["averaged"] += covers(v.ci_lo, v.ci_hi, truth["averaged"])
            g = galera(rng, k, args.cxc)
            e = ratio_estimate(g, "tps", "slave_threads", 16, 1, factors=["slave_threads"])
            hits["galera"] += covers(e.ci_lo, e.ci_hi, truth["galera"])
            widths["galera"].append(math.log(e.ci_hi / e.ci_lo))
            s = share_difference(g, "fc_paused_pct", "slave_threads", 16, 1)
            hits["share"] += covers(s.ci_lo, s.ci_hi, truth["share"])
        rates = {key: h / args.sims for key, h in hits.items()}
        worst = min(worst, *rates.values())
        print(f"{k:>9} | " + " ".join(f"{100 * r:>7.1f}%" for r in rates.values())
              + f" | {np.median(widths['matched']):.3f} / {np.median(widths['galera']):.3f}")
    print(f"lowest coverage {100 * worst:.1f} % (target >= 93 %); {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
