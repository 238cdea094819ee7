"""Campaigns as looks, by simulation: exact group-sequential boundaries against the union bound (issue 39).

A study judged after every campaign looks at its pooled estimate: the mean of the campaigns' contrasts with a
t interval on K - 1 df (the campaign-level model of :mod:`dbmatrix.analyse.campaign_model`), at most
``--max`` campaigns (the registered maximum). Each campaign's contrast of two cells (log scale) is the true
effect + a campaign x contrast deviation (SD ``--campaign-sd`` x sqrt 2: each cell its own) + the runs' noise
(run SD ``--run-sd``, ``--runs`` per cell per campaign, two cells). The first look comes after 2 campaigns
(1 df: the campaign level needs two); the study stops at the first decided verdict of the claims table's rule
(:func:`dbmatrix.analyse.claims.verdicts.verdict`) or after the last campaign.

Rules: **naive 95 %** at every look; **union bound**: look k at level 1 - a_k, the O'Brien-Fleming-type
spending function's increment (:mod:`dbmatrix.analyse.stats.sequential`); **exact**: the nominal level of the
exact group-sequential boundary of look k (:mod:`dbmatrix.analyse.stats.group_sequential`), each with the t
quantile on the look's df. Claims: "up to +10 %" (direction, band 1.00-1.10, margin 5 %), true ratios 1.00
(disagree is right: the error is agree), 1.05 (the edge of the zone: either verdict at the boundary) and
1.08 (agree is right). Columns: ``miss`` some look up to the stop excluded the true ratio; ``wrong`` the
verdict at the stop is wrong; ``right``; ``campaigns`` the mean number run.

    PYTHONPATH=$PWD/lib python benchmarks/bench_campaign_looks.py [--sims 20000] [--seed 39] [--max 6]

Seeded; about a minute at 20000 simulations per row.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as sps

from dbmatrix.analyse.claims.verdicts import verdict
from dbmatrix.analyse.stats.group_sequential import CampaignLooks, union_bound_levels

BAND, MARGIN = (1.0, 1.10), 0.05


def contrasts(rng: np.random.Generator, sims: int, campaigns: int, ratio: float, run_sd: float,
              campaign_sd: float, runs: int) -> np.ndarray:
    """(sims, campaigns) campaign contrasts on the log scale."""
    sd = math.sqrt(2 * campaign_sd ** 2 + 2 * run_sd ** 2 / runs)
    return math.log(ratio) + rng.normal(0, sd, (sims, campaigns))


def run(d: np.ndarray, ratio: float, levels: list[float]) -> dict[str, float]:
    """Looks after campaigns 2..K at `levels` (index k-1 for look k); stop at the first decided verdict."""
    sims, kmax = d.shape
    stopped = np.zeros(sims, dtype=bool)
    missed = np.zeros(sims, dtype=bool)
    final = np.full(sims, "inconclusive", dtype=object)
    used = np.full(sims, kmax)
    truth = math.log(ratio)
    for k in range(2, kmax + 1):
        x = d[:, :k]
        m, se = x.mean(1), x.std(1, ddof=1) / math.sqrt(k)
        half = sps.t.ppf((1 + levels[k - 1]) / 2, k - 1) * se
        lo, hi = m - half, m + half
        live = ~stopped
        missed |= live & ((lo > truth) | (hi < truth))
        for i in np.flatnonzero(live):
            v = verdict(math.exp(lo[i]), math.exp(hi[i]), BAND, "direction", 1.0, math.exp(m[i]), MARGIN)
            if v in ("agree", "disagree"):
                stopped[i], final[i], used[i] = True, v, k
    if ratio <= 1 + MARGIN - 1e-9:
        wrong = final == "agree"
    elif ratio >= 1 + MARGIN + 1e-9:
        wrong = final == "disagree"
    else:  # at the zone's edge neither verdict is wrong; an error is a missed interval
        wrong = np.zeros(sims, dtype=bool)
    right = (final != "inconclusive") & ~wrong
    return {"miss": float(missed.mean()), "wrong": float(wrong.mean()), "right": float(right.mean()),
            "campaigns": float(used.mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--max", type=int, default=6, help="the registered maximum number of campaigns")
    ap.add_argument("--run-sd", type=float, default=0.063)
    ap.add_argument("--runs", type=int, default=1, help="runs per cell per campaign")
    args = ap.parse_args()
    t0 = time.time()
    looks = CampaignLooks(args.max)
    rules = {"naive 95 %": [0.95] * args.max,
             "union bound": union_bound_levels(looks.fractions()),
             "exact": [looks.confidence(k) for k in range(1, args.max + 1)]}
    print(f"{args.sims} simulated studies per row; looks after campaigns 2..{args.max}; run sd {args.run_sd}, "
          f"{args.runs} run(s) per cell per campaign; claim 'up to +10 %' (direction, band 1.00-1.10, margin "
          f"{MARGIN:.0%}); stop at the first agree/disagree\n")
    head = (f"{'campaign sd':>11} {'true':>5}  {'rule':<12} {'miss':>6} {'wrong':>6} {'right':>6} "
            f"{'campaigns':>9}")
    print(head)
    print("-" * len(head))
    for csd in (0.0, 0.01, 0.02, 0.04):
        for ratio in (1.00, 1.05, 1.08):
            rng = np.random.default_rng([args.seed, int(csd * 1000), int(ratio * 1000)])
            d = contrasts(rng, args.sims, args.max, ratio, args.run_sd, csd, args.runs)
            for name, levels in rules.items():
                r = run(d, ratio, levels)
                print(f"{csd:>11.0%} {ratio:>5.2f}  {name:<12} {r['miss']:>6.1%} {r['wrong']:>6.1%} "
                      f"{r['right']:>6.1%} {r['campaigns']:>9.2f}")
    print("\nlevels per look (campaigns 1..max): " + "; ".join(
        f"{n}: " + " ".join(f"{100 * c:.3f}" for c in lv) for n, lv in rules.items() if n != "naive 95 %"))
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
