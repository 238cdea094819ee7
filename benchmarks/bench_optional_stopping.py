"""Optional stopping by simulation: naive repeated 95 % intervals against the sequential rule (issue 26).

``dbmatrix run --until-decided`` adds a replicate block, re-judges the claims and stops a claim once it is
decided. This script shows what that does to the error rate, on data like ours, with the verdict rule of
the claims table (:func:`dbmatrix.analyse.claims.verdicts.verdict`) and the one-campaign estimator of a
claim comparing two matched cells (Welch on log values, :func:`dbmatrix.analyse.stats.welch_log_ratio`):

- a campaign of a 2x2 study (4 cells, every cell once per replicate block: a few runs per block); the
  claim compares two cells at the same level of the other factor; log y = cell + campaign shift (sd 0.10,
  cancels) + replicate-block drift shared by the block's runs (sd ``--block-sd``, 0.02) + run noise
  (sd ``--run-sd``, 0.04: log-normal runs);
- the planned blocks (``--first``, 3) then one more block per look, at most ``--looks`` looks (10: 12 blocks);
  after every look the claim is judged and the campaign stops at the first decided verdict (agree or
  disagree) or after the last look;
- **naive**: every look judges the plain 95 % interval; **sequential**: look k judges the interval at level
  1 - a_k of :class:`dbmatrix.analyse.stats.sequential.Schedule` (Lan-DeMets alpha spending, union bound).

Rows: ``null``: true ratio 1.00, claim "up to +10 %" (a direction claim, band 1.00-1.10, margin 5 %): the
correct verdict is disagree, agree is an error; ``effect``: true ratio 1.06 and 1.08, same claim: agree
is correct (the power). Columns: ``miss``: some look up to the stop had an interval excluding the true
ratio (what a 95 % rule promises to keep at 5 %); ``wrong``: the verdict at the stop is the wrong one;
``decided``: share decided by the last look; ``blocks``: mean blocks run when stopped (median of the decided).

    PYTHONPATH=$PWD/lib python benchmarks/bench_optional_stopping.py [--sims 20000] [--seed 26]

Seeded; about 20 s at 20000 simulations per row.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as sps

from dbmatrix.analyse.claims.verdicts import verdict
from dbmatrix.analyse.stats import welch_log_ratio
from dbmatrix.analyse.stats.sequential import SPENDING, Schedule

BAND, MARGIN = (1.0, 1.10), 0.05


def simulate(rng: np.random.Generator, sims: int, blocks: int, ratio: float, run_sd: float,
             block_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Log values of the two compared cells, (sims, blocks) each: the block drift is shared by every run
    of a block (the study's other two cells run in it too and do not enter the matched-cell estimate)."""
    drift = rng.normal(0, block_sd, (sims, blocks))
    shift = rng.normal(0, 0.10, (sims, 1))
    a = math.log(1000) + math.log(ratio) + shift + drift + rng.normal(0, run_sd, (sims, blocks))
    b = math.log(1000) + shift + drift + rng.normal(0, run_sd, (sims, blocks))
    return a, b


def welch(a: np.ndarray, b: np.ndarray, n: int, confidence: np.ndarray | float) -> tuple[np.ndarray, ...]:
    """Welch's interval of the ratio of geometric means from the first n blocks (vectorised
    :func:`dbmatrix.analyse.stats.welch_log_ratio`)."""
    x, y = a[:, :n], b[:, :n]
    d = x.mean(1) - y.mean(1)
    va, vb = x.var(1, ddof=1) / n, y.var(1, ddof=1) / n
    se = np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (n - 1) + vb ** 2 / (n - 1))
    half = sps.t.ppf((1 + np.asarray(confidence)) / 2, df) * se
    return np.exp(d), np.exp(d - half), np.exp(d + half)


def run(a: np.ndarray, b: np.ndarray, ratio: float, levels: list[float], first: int) -> dict[str, float]:
    """Stop at the first decided look; the rates of the docstring."""
    sims = a.shape[0]
    stopped = np.zeros(sims, dtype=bool)
    missed = np.zeros(sims, dtype=bool)
    final = np.full(sims, "inconclusive", dtype=object)
    blocks = np.full(sims, first + len(levels) - 1)
    for k, level in enumerate(levels):
        n = first + k
        est, lo, hi = welch(a, b, n, level)
        live = ~stopped
        missed |= live & ((lo > ratio) | (hi < ratio))
        for i in np.flatnonzero(live):
            v = verdict(lo[i], hi[i], BAND, "direction", 1.0, est[i], MARGIN)
            if v in ("agree", "disagree"):
                stopped[i], final[i], blocks[i] = True, v, n
    correct = "agree" if 1.0 < ratio <= BAND[1] else "disagree"  # the rows: 1.00, 1.06, 1.08
    decided = final != "inconclusive"
    return {"miss": float(missed.mean()), "wrong": float((decided & (final != correct)).mean()),
            "decided": float(decided.mean()), "right": float((final == correct).mean()),
            "blocks": float(blocks.mean()),
            "median_decided": float(np.median(blocks[decided])) if decided.any() else math.nan}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--first", type=int, default=3, help="planned blocks before the first look")
    ap.add_argument("--looks", type=int, default=10)
    ap.add_argument("--run-sd", type=float, default=0.04)
    ap.add_argument("--block-sd", type=float, default=0.02)
    args = ap.parse_args()
    t0 = time.time()
    blocks = args.first + args.looks - 1
    # the vectorised interval is the library's Welch interval
    rng = np.random.default_rng(args.seed)
    a, b = simulate(rng, 1, blocks, 1.05, args.run_sd, args.block_sd)
    w = welch_log_ratio(np.exp(a[0, :5]), np.exp(b[0, :5]), 0.99)
    mine = welch(a, b, 5, 0.99)
    assert all(abs(float(m[0]) - w[k]) < 1e-9 for m, k in zip(mine, ("ratio", "ci_lo", "ci_hi")))

    rules = {"naive 95 %": [0.95] * args.looks}
    for sp in SPENDING:
        s = Schedule(args.looks, args.first, spending=sp)
        rules[f"sequential, {sp}"] = [s.confidence(k) for k in range(1, args.looks + 1)]
    print(f"{args.sims} simulated campaigns per row; {args.first} planned blocks, then up to {args.looks - 1} "
          f"more (looks: {args.looks}); run sd {args.run_sd}, block sd {args.block_sd}; claim 'up to +10 %' "
          f"(direction, band 1.00-1.10, margin {MARGIN:.0%}); stop at the first agree/disagree\n")
    head = f"{'true ratio':>10}  {'rule':<28} {'miss':>6} {'wrong':>6} {'decided':>8} {'right':>6} " \
           f"{'blocks':>7} {'median@decided':>15}"
    print(head)
    print("-" * len(head))
    for ratio in (1.00, 1.06, 1.08):
        rng = np.random.default_rng([args.seed, int(ratio * 1000)])
        a, b = simulate(rng, args.sims, blocks, ratio, args.run_sd, args.block_sd)
        for name, levels in rules.items():
            r = run(a, b, ratio, levels, args.first)
            print(f"{ratio:>10.2f}  {name:<28} {r['miss']:>6.1%} {r['wrong']:>6.1%} {r['decided']:>8.1%} "
                  f"{r['right']:>6.1%} {r['blocks']:>7.2f} {r['median_decided']:>15.1f}")
    plain = welch(*simulate(np.random.default_rng([args.seed, 1]), args.sims, blocks, 1.0, args.run_sd,
                            args.block_sd), blocks, 0.95)
    miss = ((plain[1] > 1) | (plain[2] < 1)).mean()
    print(f"\none 95 % interval after all {blocks} blocks, no looks: miss {miss:.1%}"
          " (the nominal 5 %, conservative here: Welch ignores the shared block drift)")
    print("levels per look: " + "; ".join(f"{n}: " + " ".join(f"{100 * c:.2f}" for c in lv)
                                          for n, lv in rules.items() if n != "naive 95 %"))
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
