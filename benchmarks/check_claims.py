"""Issue 25's acceptance checks on a claims table (claims.csv and claims-campaigns.csv of a build):

- every ratio CI positive and finite, or the row's reason says "unbounded";
- every share / share-difference CI inside its range (0..1, -100..+100 points);
- no basis reads "t on 1 df";
- n is never more than the study's unique runs (``--data`` the data folder: <study>/processed/runs.csv or
  replication-runs.csv), i.e. never summed over levels.

    python benchmarks/check_claims.py paper/generated [--data data/reference]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("generated", type=Path)
    ap.add_argument("--data", type=Path)
    args = ap.parse_args()
    claims = pd.read_csv(args.generated / "claims.csv")
    camps = pd.read_csv(args.generated / "claims-campaigns.csv")
    kinds = claims.set_index("id")["kind"]
    problems = []
    rows = [(r["id"], "pooled", r["ci_lo"], r["ci_hi"], str(r["reason"])) for _, r in claims.iterrows()]
    rows += [(r["id"], f"C{r['campaign']}", r["ci_lo"], r["ci_hi"], "") for _, r in camps.iterrows()]
    n_ci = 0
    for cid, where, lo, hi, reason in rows:
        if pd.isna(lo) and pd.isna(hi):
            continue
        n_ci += 1
        kind = kinds[cid]
        finite = math.isfinite(lo) and math.isfinite(hi)
        if kind == "ratio" and not ((finite and 0 < lo <= hi) or "unbounded" in reason):
            problems.append(f"{cid} {where}: ratio CI [{lo}, {hi}]")
        if kind == "share" and not (0 <= lo <= hi <= 1):
            problems.append(f"{cid} {where}: share CI [{lo}, {hi}]")
        if kind == "difference" and not (-100 <= lo <= hi <= 100):
            problems.append(f"{cid} {where}: share-difference CI [{lo}, {hi}]")
    for _, r in claims.iterrows():
        if "t on 1 df" in str(r["basis"]):
            problems.append(f"{r['id']}: basis reads 't on 1 df'")
        if args.data and isinstance(r["study"], str) and "+" not in r["study"]:
            proc = args.data / r["study"] / "processed"
            table = proc / ("replication-runs.csv" if (proc / "replication-runs.csv").is_file() else "runs.csv")
            if table.is_file():
                unique = pd.read_csv(table)["run_id"].nunique()
                if int(r["n"]) > unique:
                    problems.append(f"{r['id']}: n {r['n']} > {unique} unique runs of {r['study']}")
    print(f"{len(claims)} claims, {n_ci} intervals checked (pooled and per campaign): "
          + ("all pass" if not problems else f"{len(problems)} problems"))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
