"""How well the A/A sentinel (dbmatrix.analyse.sentinel) sees drift and change points, on synthetic series with a
known answer.

Each simulated study has K campaigns; each campaign's sentinel pair is two runs of one cell on one load: log tps
= campaign effect (SD `campaign_sd`) + run noise (SD `run_sd`), plus, in the drift rows, a drift `d` between
the opening and closing run of one campaign, or, in the shift rows, a step `s` in every campaign from the middle
one on (a platform change). Printed per row: how often the drift test flags the drifted campaign (and any
campaign without drift: its false-alarm rate, nominal 1 %), and how often Pettitt's test finds a change point
(nominal 5 % without one) and places it where it is.

    PYTHONPATH=lib .venv/bin/python benchmarks/bench_sentinel.py [--sims 400] [--campaigns 5]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

from dbmatrix.analyse.sentinel import DRIFT_ALPHA, change_point, drift_table


def series(rng: np.random.Generator, k: int, run_sd: float, campaign_sd: float, drift: float, shift: float
           ) -> pd.DataFrame:
    rows = []
    for c in range(1, k + 1):
        base = math.log(100.0) + rng.normal(0, campaign_sd) + (shift if c > k // 2 else 0.0)
        for pos, hour in (("start", "00"), ("end", "12")):
            y = base + rng.normal(0, run_sd) + (drift if (pos == "end" and c == k) else 0.0)
            rows.append({"campaign": c, "position": pos, "run_id": f"s-{c}-{pos}", "cell_id": "s", "status": "ok",
                         "tps": math.exp(y), "started_utc": f"2026-01-{c:02d}T{hour}:00:00+00:00"})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--campaigns", type=int, default=5)
    ap.add_argument("--permutations", type=int, default=499)
    a = ap.parse_args()
    run_sd = 0.063  # the TPC-C reference's run SD (log scale)
    print(f"{a.sims} simulated studies per row, {a.campaigns} campaigns (2 sentinel runs each), run SD 6.3 %, "
          f"drift test at {DRIFT_ALPHA:g}, Pettitt at 0.05 ({a.permutations} permutations)")
    print(f"{'campaign SD':>11} {'drift':>6} {'shift':>6} | {'drift flagged':>13} {'false alarm':>11} | "
          f"{'change found':>12} {'placed right':>12}")
    rows = [(0.0, 0.0, 0.0), (0.05, 0.0, 0.0), (0.0, 0.10, 0.0), (0.0, 0.20, 0.0), (0.0, 0.30, 0.0),
            (0.0, 0.0, 0.10), (0.0, 0.0, 0.20), (0.05, 0.0, 0.20), (0.0, 0.0, 0.69)]
    for campaign_sd, drift, shift in rows:
        rng = np.random.default_rng(20261129)
        flagged = alarms = alarm_n = found = placed = 0
        for _ in range(a.sims):
            s = series(rng, a.campaigns, run_sd, campaign_sd, drift, shift)
            d = drift_table(s, run_sd)
            flagged += d.iloc[-1]["drift"] == "yes"
            alarms += (d.iloc[:-1]["drift"] == "yes").sum()
            alarm_n += len(d) - 1
            cp = change_point(s, permutations=a.permutations)
            if cp is not None and cp.significant:
                found += 1
                placed += cp.where == f"between campaigns {a.campaigns // 2} and {a.campaigns // 2 + 1}"
        print(f"{campaign_sd:>10.0%} {drift:>6.0%} {shift:>6.0%} | {flagged / a.sims:>13.1%} "
              f"{alarms / alarm_n:>11.1%} | {found / a.sims:>12.1%} {placed / max(found, 1):>12.1%}")


if __name__ == "__main__":
    main()
