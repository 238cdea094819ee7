"""Coverage of the campaign-pooled 95 % interval, by simulation (issue 14, acceptance).

Synthetic campaigns with a known truth: log y = mu_cell + b_campaign + u_campaign,cell + e_repetition, with
b ~ N(0, SD_B) (a campaign shifts every cell), u ~ N(0, sd_u) (the campaign x cell variation: a cell runs
differently in another boot) and e ~ N(0, sd_e) (repetitions within a campaign). For each design and
number of campaigns K, every trial draws a study and asks :func:`dbmatrix.analyse.contrasts.ratio_estimate`
(the code the claims use) for one contrast, and counts how often the 95 % interval covers the true ratio:

- ``pooled``: all campaigns (campaign-level cell means, campaign block; the interval from the campaign x
  cell variation);
- ``two-stage``: each campaign's own estimate pooled by a t interval on K-1 df
  (:func:`dbmatrix.analyse.pooling.pool_campaign_estimates`, what non-model estimators use);
- ``ignore campaign``: every run pooled as if one campaign (repetitions as the only noise);
- ``one campaign``: campaign 1's runs alone (what a single ``make reproduce`` gives).

Designs: ``storage`` (the storage matrix's shape: a 2^(5-1) resolution-V fraction, 16 cells, 3 repetitions;
block 4k/16k at MyRocks, cache 25 %, from the two-way model, averaged over compression and medium),
``threads`` (cache 2 x threads 3, full, 6 cells; threads 16/4 at cache 100 %: matched cells) and
``two-cell`` (InnoDB against MyRocks, nothing else: matched cells, the pooled interval has K-1 df).

    nice -n 19 .venv/bin/python benchmarks/bench_campaign_coverage.py               # 1000 trials each
    nice -n 19 .venv/bin/python benchmarks/bench_campaign_coverage.py --trials 200 --k 2 3
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.contrasts import Estimate, NotTestable, ratio_estimate
from dbmatrix.analyse.pooling import per_campaign_estimates, pool_campaign_estimates

SD_B = 0.05  # campaign shift of every cell (cancels from every contrast; ignoring campaigns, it inflates the
# repetitions' residual, which can hide their too-narrow interval)
METHODS = ("pooled", "two-stage", "ignore campaign", "one campaign")


@dataclass(frozen=True)
class Design:
    name: str
    cells: list[dict[str, Any]]
    log_mean: Callable[[dict[str, Any]], float]  # the true log mean of a cell
    factor: str
    a: Any
    b: Any
    at: dict[str, Any]
    factors: tuple[str, ...]
    truth: float  # the true ratio a/b at `at` (averaged over the free factors as the model does)


def _storage() -> Design:
    levels = {"engine": ["innodb", "myrocks"], "cache_pct": [25, 100], "block_size": ["4k", "16k"],
              "compression": ["none", "lz4"], "medium": ["disk", "tmpfs"]}
    names = list(levels)
    cells = []
    for bits in itertools.product((0, 1), repeat=4):
        e = sum(bits) % 2  # E = ABCD: the 2^(5-1) resolution V half the storage matrix runs
        cells.append({n: levels[n][x] for n, x in zip(names, (*bits, e))})

    def log_mean(c: dict[str, Any]) -> float:
        my, small, b4, lz, tm = (c["engine"] == "myrocks", c["cache_pct"] == 25, c["block_size"] == "4k",
                                 c["compression"] == "lz4", c["medium"] == "tmpfs")
        # main effects and two-factor interactions only: what a resolution-V two-way model represents
        return (math.log(1000) - 0.25 * my - 0.9 * small + 0.05 * b4 - 0.1 * lz + 0.4 * tm
                + 0.5 * my * small + 0.2 * my * b4 + 0.1 * small * b4 + 0.15 * b4 * lz - 0.3 * small * tm)

    # at MyRocks, cache 25 %, averaged over compression (two levels) and medium: log 4k/16k is
    # 0.05 + 0.2 + 0.1 + 0.15 * mean(lz)
    truth = math.exp(0.05 + 0.2 + 0.1 + 0.15 * 0.5)
    return Design("storage", cells, log_mean, "block_size", "4k", "16k", {"engine": "myrocks", "cache_pct": 25},
                  ("engine", "cache_pct", "block_size", "compression", "medium"), truth)


def _threads() -> Design:
    cells = [{"cache_pct": c, "threads": t} for c in (25, 100) for t in (1, 4, 16)]
    effect = {1: 0.0, 4: 1.2, 16: 1.3}

    def log_mean(c: dict[str, Any]) -> float:
        return math.log(500) + effect[c["threads"]] + (0.8 if c["cache_pct"] == 100 else 0.0) \
            + (0.3 if c["cache_pct"] == 25 and c["threads"] == 16 else 0.0)

    return Design("threads", cells, log_mean, "threads", 16, 4, {"cache_pct": 100}, ("cache_pct", "threads"),
                  math.exp(0.1))


def _two_cell() -> Design:
    cells = [{"engine": "innodb"}, {"engine": "myrocks"}]
    return Design("two-cell", cells, lambda c: math.log(800) + (0.2 if c["engine"] == "innodb" else 0.0),
                  "engine", "innodb", "myrocks", {}, ("engine",), math.exp(0.2))


DESIGNS = {d.name: d for d in (_storage(), _threads(), _two_cell())}


def simulate_runs(design: Design, k: int, reps: int, sd_u: float, sd_e: float,
                  rng: np.random.Generator, sd_b: float = SD_B, hetero: float = 1.0) -> pd.DataFrame:
    """One study: `k` campaigns of every cell with `reps` repetitions (run ids as the runner names them).
    `hetero`: the campaign x cell SD of the cells at the compared level `a` is `hetero` times sd_u (the
    pooled model assumes one SD for every cell; this breaks it on purpose)."""
    rows = []
    for camp in range(1, k + 1):
        shift = rng.normal(0, sd_b)
        for c in design.cells:
            scale = hetero if c[design.factor] == design.a else 1.0
            mu = design.log_mean(c) + shift + rng.normal(0, sd_u * scale)
            cid = "-".join(str(v) for v in c.values())
            for r in range(1, reps + 1):
                run_id = f"{cid}-r{r}" + (f"-camp{camp}" if camp > 1 else "")
                rows.append({**c, "cell_id": cid, "run_id": run_id, "campaign": camp,
                             "tps": math.exp(mu + rng.normal(0, sd_e))})
    return pd.DataFrame(rows)


def estimates(design: Design, runs: pd.DataFrame, methods: tuple[str, ...] = METHODS) -> dict[str, Estimate]:
    """The intervals of the module docstring for one simulated study."""
    def fn(r: pd.DataFrame) -> Estimate:
        return ratio_estimate(r, "tps", design.factor, design.a, design.b, design.at, factors=design.factors)

    make = {"pooled": lambda: fn(runs),
            "two-stage": lambda: pool_campaign_estimates(per_campaign_estimates(runs, fn)),
            "ignore campaign": lambda: fn(runs.drop(columns="campaign")),
            "one campaign": lambda: fn(runs[runs["campaign"] == 1])}
    return {m: make[m]() for m in methods}


def coverage(design: Design, k: int, trials: int, *, reps: int = 3, sd_u: float = 0.05, sd_e: float = 0.03,
             sd_b: float = SD_B, hetero: float = 1.0, seed: int = 14,
             methods: tuple[str, ...] = METHODS) -> dict[str, Any]:
    """Share of `trials` whose 95 % interval covers the truth, per method, and the median width ratio."""
    rng = np.random.default_rng([seed, k, len(design.cells), int(sd_u * 1e4), int(sd_e * 1e4)])
    hits = {m: 0 for m in methods}
    widths: dict[str, list[float]] = {m: [] for m in methods}
    done = 0
    basis = ""
    for _ in range(trials):
        try:
            got = estimates(design, simulate_runs(design, k, reps, sd_u, sd_e, rng, sd_b, hetero), methods)
        except NotTestable as exc:
            raise RuntimeError(f"{design.name}, K={k}: {exc}") from exc
        done += 1
        basis = got["pooled"].basis
        for m, e in got.items():
            hits[m] += int(e.ci_lo <= design.truth <= e.ci_hi)
            widths[m].append(e.ci_hi / e.ci_lo)
    return {"design": design.name, "cells": len(design.cells), "K": k, "sd_u": sd_u, "sd_e": sd_e, "sd_b": sd_b,
            "hetero": hetero,
            "trials": done, **{m: hits[m] / done for m in methods},
            **{f"width {m}": float(np.median(widths[m])) for m in methods}, "basis": basis}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--k", type=int, nargs="+", default=[2, 3, 5])
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--sd-u", type=float, nargs="+", default=[0.05, 0.0],
                    help="campaign x cell SD on the log scale (0: campaigns differ only by a shift)")
    ap.add_argument("--sd-e", type=float, default=0.03, help="repetition SD on the log scale")
    ap.add_argument("--sd-b", type=float, default=SD_B, help="campaign shift SD on the log scale")
    ap.add_argument("--hetero", type=float, default=1.0,
                    help="campaign x cell SD of the cells at the compared level a, in units of sd_u")
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args(argv)
    rows = []
    t0 = time.perf_counter()
    for sd_u in args.sd_u:
        for name in args.designs:
            for k in args.k:
                rows.append(coverage(DESIGNS[name], k, args.trials, sd_u=sd_u, sd_e=args.sd_e, sd_b=args.sd_b,
                                     hetero=args.hetero, seed=args.seed))
    table = pd.DataFrame(rows)
    se = math.sqrt(0.95 * 0.05 / args.trials)
    pd.set_option("display.width", 200)
    print(f"coverage of the true ratio by the 95 % interval; {args.trials} trials per row (Monte Carlo SE "
          f"{100 * se:.1f} points at 95 %); 3 repetitions per campaign and cell; campaign shift SD {args.sd_b}"
          + (f"; campaign x cell SD x{args.hetero:g} at the compared level" if args.hetero != 1 else ""))
    print(table[["design", "cells", "K", "sd_u", "sd_e", *METHODS]].to_string(
        index=False, formatters={m: "{:.1%}".format for m in METHODS}))
    print("\nmedian interval width (hi/lo):")
    print(table[["design", "K", "sd_u", *[f"width {m}" for m in METHODS]]].to_string(index=False,
                                                                                    float_format="{:.3f}".format))
    print("\npooled basis, per design (last K, first sd_u):")
    for name in args.designs:
        print(f"  {name}: {table.loc[table['design'] == name, 'basis'].iloc[0]}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
