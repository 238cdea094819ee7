"""Every claim of a build's claims table before and after a change of the estimator or the verdict rule.

Reads two ``claims.csv`` files (a build's ``paper/generated/claims.csv``; the old one e.g. from
``git show <commit>:paper/generated/claims.csv``) and prints a Markdown table: per claim the old estimate,
interval and verdict, the new ones with the interval's level, the new combination rule, and what moved the
verdict, read from the new row (its basis, reason, combination and stand-in bound) and the old one. The
reasons are derived, not typed: a reader can rerun the script on the committed files.

    git show 324891e:paper/generated/claims.csv > /tmp/before.csv
    python benchmarks/verdicts_before_after.py /tmp/before.csv paper/generated/claims.csv
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import pandas as pd


def _num(x: object) -> float:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return v


def _fmt(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "--"


def _text(x: object) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


def interval(row: pd.Series, with_level: bool) -> str:
    """'0.663 [0.572, 0.768] (95 % CI)', the per-level summary of a claim judged per level, or '--'."""
    est, lo, hi = _num(row.get("estimate")), _num(row.get("ci_lo")), _num(row.get("ci_hi"))
    basis = _text(row.get("basis"))
    if not math.isfinite(est):
        if basis.startswith("judged at every level"):
            parts = basis.split(": ", 1)[1].split("; ")
            return "; ".join(p for p in parts if "[" in p or "per pair" in p)[:160] or "--"
        return "--"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{_fmt(est)} (measured, no CI)"
    level = _num(row.get("confidence"))
    tail = f" ({level * 100:.3g} % CI)" if with_level and math.isfinite(level) else ""
    return f"{_fmt(est)} [{_fmt(lo)}, {_fmt(hi)}]{tail}"


def _df(basis: str) -> str:
    """The df of a basis's t ("t on 11 df", "t on 4.32 df"), the last one said; '' without."""
    found = re.findall(r"t on ([0-9.]+) df", basis)
    return found[-1] if found else ""


def why(old: pd.Series, new: pd.Series) -> str:
    """What moved the claim, from the rows: the estimator, a premise, the combination, a stand-in bound, the
    rule's regions."""
    reasons = []
    ob, nb = _text(old.get("basis")), _text(new.get("basis"))
    reason = _text(new.get("reason"))
    if "two-way model" in ob and "cell means" in nb:
        reasons.append("estimate from the cell means (the two-way model dropped 3- and 4-way interactions)")
    old_df, new_df = _df(ob), _df(nb)
    if old_df and new_df and old_df != new_df:
        reasons.append(f"t on {new_df} df, the df of the variance it uses (was {old_df}, the runs')"
                       if "runs" in ob else f"t on {new_df} df (was {old_df})")
    if "dataset load" in nb and "dataset load" not in ob:
        reasons.append("dataset load x campaign as a level of variance")
    if reason.startswith(("premise not met", "premise uncertain")):
        reasons.append(reason.split(";")[0])
    combine = _text(new.get("combine"))
    if combine:
        reasons.append(f"conditions combined: {combine}")
    if "upper bound" in reason or "stand-in" in reason:
        reasons.append("one-sided: a RAM stand-in bounds PMEM from above")
    if _text(old.get("verdict")) != _text(new.get("verdict")) and not reasons:
        reasons.append("three-way rule: the whole interval against the claimed region")
    if "steady window" in nb:
        reasons.append("steady-window throughput")
    if "unsaturated runs only" in nb:
        reasons.append("judged on the unsaturated runs only")
    return "; ".join(reasons) or "unchanged"


def table(before: pd.DataFrame, after: pd.DataFrame) -> str:
    old = before.set_index("id")
    lines = ["| claim | before: estimate [95 % CI] | before | after: estimate [CI, level] | after | what moved it |",
             "|---|---|---|---|---|---|"]
    for _, new in after.iterrows():
        cid = new["id"]
        o = old.loc[cid] if cid in old.index else pd.Series(dtype=object)
        ov, nv = _text(o.get("verdict")), _text(new.get("verdict"))
        mark = f"**{nv}**" if ov != nv else nv
        moved = why(o, new) if nv != "not tested" or ov != "not tested" else _text(new.get("reason"))[:80]
        before = interval(o, False) if len(o) else "--"
        lines.append(f"| {cid} | {before} | {ov or '--'} | {interval(new, True)} | {mark} | {moved} |")
    return "\n".join(lines)


def counts(frame: pd.DataFrame) -> str:
    v = frame["verdict"].fillna("").map(lambda s: "depends on a condition" if s.startswith("depends on") else s)
    return ", ".join(f"{n} {k}" for k, n in v.value_counts().sort_index().items())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args()
    before, after = pd.read_csv(args.before), pd.read_csv(args.after)
    changed = sum(_text(r["verdict"]) != _text(before.set_index("id")["verdict"].get(r["id"], ""))
                  for _, r in after.iterrows())
    print(f"Before: {counts(before)}.\n\nAfter: {counts(after)}.\n\nVerdicts changed: {changed} of {len(after)}.\n")
    print(table(before, after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
