"""The verdict rule's error rates by simulation: the three-way regions (issue 38) against the older rule.

A direction claim "up to 25 %" (band 1.00-1.25, margin 5 %: the no-effect zone 1/1.05 .. 1.05, the claimed
region A = (1.05, 1.25]); one campaign's estimate is normal on the log scale around the true log ratio with
standard error SE (0.01, 0.02, 0.04), its SE estimated on ``--df`` degrees of freedom (a chi-square draw), and
its interval the 95 % t interval. Every interval is judged by the library's rule
(:func:`dbmatrix.analyse.claims.verdicts.verdict`) and by :func:`old_rule`, the rule before issue 38 (copied
here: agree when the interval excludes 1 and the estimate lies in the band, disagree when it misses the band
or lies inside the zone).

Rows: the true ratio at 1.00 (no effect) and at the zone's edge 1.05, where an agree is an error (the new
rule keeps it at <= 2.5 %, one-sided); in the middle of A (geometric, 1.146), where agree is right (power)
and disagree is an error; at the band's edge 1.25; beyond the band, 1.35. Columns: the rates of agree,
disagree and inconclusive; ``flip``: two independent campaigns with the same true ratio, one agree and the
other disagree; ``flip|overlap``: such a pair whose intervals overlap (impossible under the new rule: A and
its complement are disjoint).

    .venv/bin/python benchmarks/bench_verdict_rule.py [--sims 20000] [--seed 38] [--df 10]

Seeded; about 10 s at 20000 simulations per row.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from dbmatrix.analyse.claims.verdicts import verdict

BAND, MARGIN = (1.0, 1.25), 0.05
SES = (0.01, 0.02, 0.04)
TRUE = {"no effect": 1.00, "zone edge": 1.05, "middle of A": math.sqrt(1.05 * 1.25), "band edge": 1.25,
        "beyond band": 1.35}


def old_rule(ci_lo: float, ci_hi: float, band: tuple[float, float], test: str = "direction",
             null: float = 1.0, estimate: float | None = None, margin: float = 0.0) -> str:
    """The verdict rule before issue 38 (dbmatrix.analyse.claims.verdicts.verdict at commit fdc3dc5): it
    agreed when imprecise (the estimate in the band, the null excluded) and disagreed when precise (the
    interval inside the zone), so the same estimate could take both verdicts."""
    if not (np.isfinite(ci_lo) and np.isfinite(ci_hi)):
        return "inconclusive"
    lo, hi = band
    if not (ci_lo <= hi and ci_hi >= lo):
        return "disagree"
    if test in ("within", "about"):
        return "agree" if lo <= ci_lo and ci_hi <= hi else "inconclusive"
    z_lo, z_hi = (1 / (1 + margin), 1 + margin) if null == 1.0 else (null - margin, null + margin)
    if margin > 0 and z_lo <= ci_lo and ci_hi <= z_hi:
        return "disagree"
    if estimate is None or not np.isfinite(estimate):
        estimate = math.sqrt(ci_lo * ci_hi) if null == 1.0 and ci_lo > 0 else (ci_lo + ci_hi) / 2
    up = (lo + hi) / 2 > null if np.isfinite(hi) else lo >= null
    excludes_null = ci_lo > null if up else ci_hi < null
    return "agree" if excludes_null and lo <= estimate <= hi else "inconclusive"


def new_rule(ci_lo: float, ci_hi: float, estimate: float) -> str:
    return verdict(ci_lo, ci_hi, BAND, "direction", 1.0, estimate, MARGIN)


def old(ci_lo: float, ci_hi: float, estimate: float) -> str:
    return old_rule(ci_lo, ci_hi, BAND, "direction", 1.0, estimate, MARGIN)


def intervals(rng: np.random.Generator, sims: int, ratio: float, se: float, df: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`sims` campaigns' estimates and 95 % t intervals (the SE estimated on `df` degrees of freedom)."""
    est = rng.normal(math.log(ratio), se, sims)
    se_hat = se * np.sqrt(rng.chisquare(df, sims) / df)
    half = sps.t.ppf(0.975, df) * se_hat
    return np.exp(est), np.exp(est - half), np.exp(est + half)


def judge_all(rule: Callable[[float, float, float], str], est: np.ndarray, lo: np.ndarray, hi: np.ndarray
              ) -> np.ndarray:
    return np.array([rule(float(a), float(b), float(e)) for e, a, b in zip(est, lo, hi)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--df", type=int, default=10, help="degrees of freedom of the estimated SE (t interval)")
    args = ap.parse_args()
    t0 = time.time()
    print(f"claim 'up to 25 %' (direction, band {BAND[0]:.2f}-{BAND[1]:.2f}, margin {MARGIN:.0%}: zone "
          f"{1 / (1 + MARGIN):.4f}-{1 + MARGIN:.2f}, A = ({1 + MARGIN:.2f}, {BAND[1]:.2f}]); log-normal estimates, "
          f"95 % t intervals on {args.df} df; {args.sims} campaigns per row, flips from pairs of independent "
          "campaigns\n")
    head = (f"{'true':<19} {'SE':>5}  {'rule':<5} {'agree':>7} {'disagree':>9} {'inconcl.':>9} {'flip':>7} "
            f"{'flip|overlap':>13}")
    print(head)
    print("-" * len(head))
    worst: dict[str, float] = {"agree at no effect or zone edge": 0.0, "flip|overlap": 0.0}
    for name, ratio in TRUE.items():
        for se in SES:
            rng = np.random.default_rng([args.seed, int(ratio * 10000), int(se * 1000)])
            one = intervals(rng, args.sims, ratio, se, args.df)
            two = intervals(rng, args.sims, ratio, se, args.df)
            overlap = (one[1] <= two[2]) & (two[1] <= one[2])
            for label, rule in (("new", new_rule), ("old", old)):
                v1, v2 = judge_all(rule, *one), judge_all(rule, *two)
                flip = ((v1 == "agree") & (v2 == "disagree")) | ((v1 == "disagree") & (v2 == "agree"))
                agree, disagree = float((v1 == "agree").mean()), float((v1 == "disagree").mean())
                print(f"{name + f' ({ratio:.3f})':<19} {se:>5.2f}  {label:<5} {agree:>7.1%} {disagree:>9.1%} "
                      f"{1 - agree - disagree:>9.1%} {flip.mean():>7.2%} {(flip & overlap).mean():>13.2%}")
                if label == "new":
                    if name in ("no effect", "zone edge"):
                        worst["agree at no effect or zone edge"] = max(worst["agree at no effect or zone edge"],
                                                                       agree)
                    worst["flip|overlap"] = max(worst["flip|overlap"], float((flip & overlap).mean()))
        print()
    ok_agree = worst["agree at no effect or zone edge"] <= 0.05
    ok_flip = worst["flip|overlap"] == 0.0
    print(f"new rule: agree at a true ratio in the no-effect zone at most "
          f"{worst['agree at no effect or zone edge']:.1%} (limit 5 %: {'ok' if ok_agree else 'FAILED'}); "
          f"agree/disagree flips with overlapping intervals {worst['flip|overlap']:.2%} "
          f"(must be 0: {'ok' if ok_flip else 'FAILED'})")
    print(f"({time.time() - t0:.0f} s)")
    if not (ok_agree and ok_flip):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
