"""Two result sets side by side (``dbmatrix compare A B``): per matched cell the ratio B/A of throughput and
of p95 latency with an interval at :data:`LEVEL`, per claim the two verdicts, each interval with its level.

Pure: it takes processed tables (``runs.csv`` rows, the claims table) and returns tables; reading
directories and printing are the command line's.

**Matching.** Cells match on their factor columns (engine, cache_pct, ...; those present on both sides),
never on a run or experiment name, so a quick run matches the reference's cells with the same levels.
A cell measured on one side only is listed as such, never dropped.

**Interval.** The ratio is that of the geometric means of the runs (B over A), and its interval
Welch's t on the log values, as the claims' own rule for two cells (:mod:`dbmatrix.analyse.claims`):
throughput and latency are positive and act multiplicatively, so the log scale gives a positive,
asymmetric interval, and Welch does not assume both sides equally noisy. Runs are the replicates
(per-second samples are autocorrelated and are not). With 2 runs a side the Welch t has 1-2 degrees of
freedom (t(0.975, 1) = 12.7): the interval is wide, by design, not a defect. With one run on one side its
spread is taken from the other side (equal spread assumed, df of the other side; :data:`BASIS_ONE_SIDE`);
with one run on each side there is no interval and the cell is undecided. Runs of several campaigns are
pooled as runs, so the interval leaves out the variation between campaigns (:func:`basis_note` says so).

**Decided** means the interval excludes 1. A **regression** is a decided change for the worse (throughput
down, latency up); ``--fail-above PCT`` fails on a regression whose point estimate exceeds PCT %
(:func:`regressions`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dbmatrix.analyse.campaign_model import campaigns_of
from dbmatrix.analyse.stats import welch_log_ratio
from dbmatrix.analyse.verdict_text import DEFAULT_CONFIDENCE, confidence_of, level_label
from dbmatrix.spec.factors import FACTORS

LEVEL = DEFAULT_CONFIDENCE  # the cells' intervals (every output states it: level_label)
METRICS: dict[str, dict[str, Any]] = {
    # column in runs.csv: label, and whether a higher value is better
    "tps": {"label": "throughput (tps)", "higher_is_better": True},
    "p95_ms": {"label": "p95 latency (ms)", "higher_is_better": False},
}
BASIS_WELCH = "Welch t on log values"
BASIS_ONE_SIDE = "one run on one side: the other side's spread assumed"
BASIS_NONE = "one run on each side: no interval"


@dataclass(frozen=True)
class RatioCI:
    """B/A (ratio of geometric means) with its interval, the t's degrees of freedom and how it was made."""

    ratio: float
    lo: float
    hi: float
    df: float
    basis: str

    @property
    def decided(self) -> bool:
        return not math.isnan(self.lo) and (self.lo > 1.0 or self.hi < 1.0)


def ratio_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> RatioCI:
    """The ratio B/A of geometric means with its `level` interval (see the module's text)."""
    xa = np.asarray([x for x in a if x is not None and x > 0 and np.isfinite(x)], dtype=float)
    xb = np.asarray([x for x in b if x is not None and x > 0 and np.isfinite(x)], dtype=float)
    la, lb = np.log(xa), np.log(xb)
    na, nb = len(la), len(lb)
    if na == 0 or nb == 0:
        return RatioCI(math.nan, math.nan, math.nan, math.nan, "no runs on a side")
    d = float(lb.mean() - la.mean())
    if na >= 2 and nb >= 2:  # the analysis' own Welch test on logs (the ratio of its first argument to its second)
        w = welch_log_ratio(xb, xa, confidence=level)
        return RatioCI(w["ratio"], w["ci_lo"], w["ci_hi"], w["df"], BASIS_WELCH)
    if na >= 2 or nb >= 2:
        other = la if na >= 2 else lb
        v = float(other.var(ddof=1))
        se2, df, basis = v * (1 / na + 1 / nb), float(len(other) - 1), BASIS_ONE_SIDE
    else:
        return RatioCI(math.exp(d), math.nan, math.nan, math.nan, BASIS_NONE)
    half = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(se2)
    return RatioCI(math.exp(d), math.exp(d - half), math.exp(d + half), df, basis)


def factor_columns(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The factor columns both tables have: what cells match on."""
    return [f for f in FACTORS if f in a.columns and f in b.columns]


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "ok"] if "status" in runs.columns else runs


def _key(df: pd.DataFrame, cols: list[str]) -> pd.Series:
    return df[cols].astype(str).agg("|".join, axis=1) if cols else pd.Series("", index=df.index)


def change_word(r: RatioCI, higher_is_better: bool) -> str:
    """better / worse when decided, else undecided."""
    if not r.decided:
        return "undecided"
    return "better" if (r.ratio > 1) == higher_is_better else "worse"


def compare_cells(a_runs: pd.DataFrame, b_runs: pd.DataFrame, metrics: Sequence[str] = tuple(METRICS),
                  level: float = LEVEL) -> pd.DataFrame:
    """One row per cell of either side: its factor levels, ``side`` (both, A only, B only), the runs per
    side and, for each metric found on both sides, the means, the ratio B/A with its interval, ``df``,
    ``basis``, ``decided`` and ``change`` (better, worse, undecided). Matched cells first, in A's order."""
    a, b = _ok(a_runs), _ok(b_runs)
    cols = factor_columns(a, b)
    a = a.assign(_key=_key(a, cols))
    b = b.assign(_key=_key(b, cols))
    present = [m for m in metrics if m in a.columns and m in b.columns]
    keys = list(dict.fromkeys([*a["_key"], *b["_key"]]))
    both = [k for k in keys if k in set(a["_key"]) and k in set(b["_key"])]
    rows = []
    for k in both + [k for k in keys if k not in both]:
        ga, gb = a[a["_key"] == k], b[b["_key"] == k]
        first = ga.iloc[0] if len(ga) else gb.iloc[0]
        side = "both" if len(ga) and len(gb) else ("A only" if len(ga) else "B only")
        row: dict[str, Any] = {"cell_id": first.get("cell_id", k), **{c: first[c] for c in cols},
                               "side": side, "n_a": len(ga), "n_b": len(gb)}
        for m in present:
            va, vb = ga[m].dropna().astype(float), gb[m].dropna().astype(float)
            row[f"{m}_a"] = float(va.mean()) if len(va) else math.nan
            row[f"{m}_b"] = float(vb.mean()) if len(vb) else math.nan
            if side == "both":
                r = ratio_interval(list(va), list(vb), level)
                row.update({f"{m}_ratio": r.ratio, f"{m}_lo": r.lo, f"{m}_hi": r.hi, f"{m}_df": r.df,
                            f"{m}_basis": r.basis, f"{m}_decided": r.decided,
                            f"{m}_change": change_word(r, METRICS[m]["higher_is_better"])})
            else:
                row.update({f"{m}_ratio": math.nan, f"{m}_lo": math.nan, f"{m}_hi": math.nan, f"{m}_df": math.nan,
                            f"{m}_basis": "", f"{m}_decided": False, f"{m}_change": ""})
        rows.append(row)
    return pd.DataFrame(rows)


ALL_CELLS = "all matched cells"


def overall_ratio(cells: pd.DataFrame, metric: str, level: float = LEVEL) -> RatioCI | None:
    """The typical change over the matched cells: the geometric mean of their ratios B/A, with a t
    interval over cells (each cell one observation, n-1 df). A shift shared by every cell, too small to
    decide in any one cell from its few runs, is decided here. None with fewer than two cells."""
    col = f"{metric}_ratio"
    if col not in cells.columns:
        return None
    r = cells[col].astype(float)
    logs = np.log(r[np.isfinite(r) & (r > 0)].to_numpy())
    if len(logs) < 2:
        return None
    d, se = float(logs.mean()), float(logs.std(ddof=1)) / math.sqrt(len(logs))
    half = float(stats.t.ppf(0.5 + level / 2, len(logs) - 1)) * se
    return RatioCI(math.exp(d), math.exp(d - half), math.exp(d + half), float(len(logs) - 1),
                   f"geometric mean of {len(logs)} cell ratios, t over cells")


def regressions(cells: pd.DataFrame, pct: float) -> pd.DataFrame:
    """Decided changes for the worse whose point estimate exceeds `pct` % (throughput below 1 - pct/100
    of A's, latency above 1 + pct/100): one row per cell and metric, and one for all matched cells
    (:func:`overall_ratio`, cell_id :data:`ALL_CELLS`)."""
    rows = []
    for m, meta in METRICS.items():
        if f"{m}_ratio" not in cells.columns:
            continue
        found = [(str(r["cell_id"]), RatioCI(float(r[f"{m}_ratio"]), float(r[f"{m}_lo"]), float(r[f"{m}_hi"]),
                                             float(r[f"{m}_df"]), str(r[f"{m}_basis"])))
                 for _, r in cells[cells[f"{m}_decided"].astype(bool)].iterrows()]
        if (overall := overall_ratio(cells, m)) is not None and overall.decided:
            found.append((ALL_CELLS, overall))
        for cell_id, ci in found:
            worse = (1 - ci.ratio) * 100 if meta["higher_is_better"] else (ci.ratio - 1) * 100
            if worse > pct:
                rows.append({"cell_id": cell_id, "metric": m, "ratio": ci.ratio, "lo": ci.lo, "hi": ci.hi,
                             "worse_pct": worse})
    return pd.DataFrame(rows, columns=["cell_id", "metric", "ratio", "lo", "hi", "worse_pct"])


def compare_claims(a: pd.DataFrame | None, b: pd.DataFrame | None) -> pd.DataFrame:
    """Per claim (either side): its text, each side's estimate, interval, the interval's level
    (``confidence_a``/``_b``: the table's ``confidence`` column, else the level its basis names, else
    :data:`~dbmatrix.analyse.verdict_text.DEFAULT_CONFIDENCE`) and verdict, and ``changed`` (the verdicts
    differ). A table has the claims table's ``id``, ``claim``, ``estimate``, ``ci_lo``, ``ci_hi``, ``verdict``
    columns (``confidence`` and ``basis`` where it has them)."""
    cols = ["id", "claim", "estimate", "ci_lo", "ci_hi", "confidence", "verdict"]
    empty = pd.DataFrame(columns=cols)

    def side(t: pd.DataFrame | None) -> pd.DataFrame:
        if t is None:
            return empty
        levels = [confidence_of(r) for _, r in t.iterrows()]
        return t.assign(confidence=levels).reindex(columns=cols) if len(t) else t.reindex(columns=cols)

    a, b = side(a), side(b)
    m = a.merge(b, on="id", how="outer", suffixes=("_a", "_b"))
    order = list(dict.fromkeys([*a["id"], *b["id"]]))  # A's order, then B's own claims
    m = m.set_index("id").loc[order].reset_index()
    m["claim"] = m["claim_a"].where(m["claim_a"].notna(), m["claim_b"])
    for s in ("a", "b"):
        m[f"verdict_{s}"] = m[f"verdict_{s}"].fillna("").astype(str).replace("", "-")
    m["changed"] = m["verdict_a"] != m["verdict_b"]
    return m[["id", "claim", "estimate_a", "ci_lo_a", "ci_hi_a", "confidence_a", "verdict_a", "estimate_b",
              "ci_lo_b", "ci_hi_b", "confidence_b", "verdict_b", "changed"]].reset_index(drop=True)


def basis_note(a_runs: pd.DataFrame, b_runs: pd.DataFrame, level: float = LEVEL) -> str:
    """What the intervals rest on, said in the output."""
    ka, kb = len(campaigns_of(a_runs)), len(campaigns_of(b_runs))
    note = (f"{level_label(level)} of B/A, the ratio of geometric means of the runs: Welch t on log values (2 runs "
            "a side: 1-2 df, wide by design); one run on one side: the other side's spread assumed; one run each: "
            "no interval. Decided = the interval excludes 1.")
    if ka > 1 or kb > 1:
        note += (f" Runs of several campaigns (A {ka}, B {kb}) are pooled as runs: the intervals leave out the "
                 "variation between campaigns.")
    return note


@dataclass
class Comparison:
    """One study's comparison (or a whole build's, study by study): cells, claims and labels."""

    a_label: str
    b_label: str
    level: float = LEVEL  # the cells' intervals
    cells: dict[str, pd.DataFrame] = field(default_factory=dict)  # study -> compare_cells table
    notes: dict[str, str] = field(default_factory=dict)  # study -> basis note
    only: dict[str, str] = field(default_factory=dict)  # study -> "A only" / "B only" (not compared)
    claims: pd.DataFrame | None = None

    def regressions(self, pct: float) -> pd.DataFrame:
        frames = [regressions(t, pct).assign(study=s) for s, t in self.cells.items()]
        frames = [f for f in frames if not f.empty]
        return pd.concat(frames, ignore_index=True) if frames else regressions(pd.DataFrame(), pct).assign(study=[])

    def cells_table(self) -> pd.DataFrame:
        frames = [t.assign(study=s) for s, t in self.cells.items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _num(x: Any, digits: int = 1) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(v) else f"{v:.{digits}f}"


def _claim_cell(r: pd.Series, s: str) -> str:
    """One side's estimate of a claim with its interval and the interval's level ("-" without one)."""
    est, lo, hi = (r.get(f"{k}_{s}") for k in ("estimate", "ci_lo", "ci_hi"))
    if est is None or pd.isna(est):
        return "-"
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return f"{_num(est, 3)} (no CI)"
    conf = r.get(f"confidence_{s}")
    level = level_label(float(conf) if conf is not None and pd.notna(conf) else DEFAULT_CONFIDENCE)
    return f"{_num(est, 3)} [{_num(lo, 3)}, {_num(hi, 3)}] {level}"


def _ratio_cell(r: pd.Series, m: str) -> str:
    ratio = r.get(f"{m}_ratio")
    if ratio is None or pd.isna(ratio):
        return "-"
    lo, hi = r.get(f"{m}_lo"), r.get(f"{m}_hi")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and not pd.isna(lo) else " [no CI]"
    flag = {"better": " better", "worse": " **worse**"}.get(str(r.get(f"{m}_change")), "")
    return f"{ratio:.3f}{ci}{flag}"


def markdown(c: Comparison, fail_above: float | None = None) -> str:
    """The comparison as markdown: per study a cells table, then the claims table."""
    out = [f"# Compare A = {c.a_label} with B = {c.b_label}", ""]
    for study, note in sorted(c.only.items()):
        out.append(f"- study {study}: {note} (not compared)")
    if c.only:
        out.append("")
    for study, t in c.cells.items():
        out += [f"## {study}", ""]
        if t.empty:
            out += ["no cells", ""]
            continue
        both = t[t["side"] == "both"]
        worse = sum(int((both.get(f"{m}_change", pd.Series(dtype=str)) == "worse").sum()) for m in METRICS)
        better = sum(int((both.get(f"{m}_change", pd.Series(dtype=str)) == "better").sum()) for m in METRICS)
        out.append(f"{len(both)} cells matched, {int((t['side'] == 'A only').sum())} in A only, "
                   f"{int((t['side'] == 'B only').sum())} in B only; decided: {better} better, {worse} worse "
                   "(cell x metric).")
        for m, meta in METRICS.items():
            o = overall_ratio(t, m)
            if o is not None:
                word = change_word(o, meta["higher_is_better"])
                out.append(f"All matched cells, {meta['label']}: B/A {o.ratio:.3f} [{o.lo:.3f}, {o.hi:.3f}] "
                           f"{level_label(c.level)} ({o.basis}){'' if word == 'undecided' else ': ' + word}.")
        ci = level_label(c.level)
        out += ["", f"| cell | runs A/B | tps A | tps B | tps B/A [{ci}] | p95 ms A | p95 ms B | p95 B/A [{ci}] |",
                "|---|---|---|---|---|---|---|---|"]
        for _, r in t.iterrows():
            cell = r["cell_id"] if r["side"] == "both" else f"{r['cell_id']} ({r['side']})"
            out.append(f"| {cell} | {r['n_a']}/{r['n_b']} | {_num(r.get('tps_a'))} | {_num(r.get('tps_b'))} | "
                       f"{_ratio_cell(r, 'tps')} | {_num(r.get('p95_ms_a'), 2)} | {_num(r.get('p95_ms_b'), 2)} | "
                       f"{_ratio_cell(r, 'p95_ms')} |")
        out += ["", c.notes.get(study, ""), ""]
    if c.claims is not None and not c.claims.empty:
        changed = int(c.claims["changed"].sum())
        out += ["## Claims", "", f"{len(c.claims)} claims, {changed} with a different verdict in B.", "",
                "| claim | A estimate [CI] and its level | A verdict | B estimate [CI] and its level | B verdict | |",
                "|---|---|---|---|---|---|"]
        for _, r in c.claims.iterrows():
            ea, eb = _claim_cell(r, "a"), _claim_cell(r, "b")
            out.append(f"| {r['id']} | {ea} | {r['verdict_a']} | {eb} | {r['verdict_b']} | "
                       f"{'changed' if r['changed'] else ''} |")
        out.append("")
    if fail_above is not None:
        reg = c.regressions(fail_above)
        out.append(f"Regressions beyond {fail_above:g} % (decided, throughput down or p95 up): "
                   + (", ".join(f"{r.study} {r.cell_id} {r.metric} {r.ratio:.3f} ({r.worse_pct:.1f} % worse)"
                                for r in reg.itertuples()) if not reg.empty else "none"))
    return "\n".join(out).rstrip() + "\n"


def _jsonable(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    if df is None or df.empty:
        return []
    return json.loads(df.to_json(orient="records"))


def to_json(c: Comparison, fail_above: float | None = None) -> str:
    overall = {s: {m: o.__dict__ for m in METRICS if (o := overall_ratio(t, m)) is not None}
               for s, t in c.cells.items()}
    body: dict[str, Any] = {"a": c.a_label, "b": c.b_label, "level": c.level, "only": c.only, "notes": c.notes,
                            "cells": {s: _jsonable(t) for s, t in c.cells.items()}, "overall": overall,
                            "claims": _jsonable(c.claims)}
    if fail_above is not None:
        body["fail_above_pct"] = fail_above
        body["regressions"] = _jsonable(c.regressions(fail_above))
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def to_csv(c: Comparison) -> str:
    """The cells of every study, one row per cell (a ``study`` column)."""
    return c.cells_table().to_csv(index=False)


def compare_sets(a_label: str, a_runs: dict[str, pd.DataFrame], b_label: str, b_runs: dict[str, pd.DataFrame],
                 a_claims: pd.DataFrame | None = None, b_claims: pd.DataFrame | None = None) -> Comparison:
    """Two result sets, experiment by experiment (runs per experiment name); one experiment on each side
    under different names (a quick run against a smoke run) is compared as one. Claims not tested on
    either side are left out."""
    c = Comparison(a_label, b_label)
    if len(a_runs) == 1 and len(b_runs) == 1 and set(a_runs) != set(b_runs):
        (ea, ra), (eb, rb) = next(iter(a_runs.items())), next(iter(b_runs.items()))
        pairs = {f"{ea} vs {eb}": (ra, rb)}
    else:
        pairs = {e: (r, b_runs[e]) for e, r in a_runs.items() if e in b_runs}
        c.only = {**{e: "A only" for e in a_runs if e not in b_runs},
                  **{e: "B only" for e in b_runs if e not in a_runs}}
    for name, (ra, rb) in pairs.items():
        c.cells[name] = compare_cells(ra, rb)
        c.notes[name] = basis_note(ra, rb)
    if a_claims is not None or b_claims is not None:
        t = compare_claims(a_claims, b_claims)
        untested = {"not tested", "-"}
        c.claims = t[~(t["verdict_a"].isin(untested) & t["verdict_b"].isin(untested))].reset_index(drop=True)
    return c
