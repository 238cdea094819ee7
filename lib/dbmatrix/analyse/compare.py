"""Two result sets of the same studies side by side (``dbmatrix compare A B``): per matched cell the change
B/A of throughput and of p95 latency with an interval that holds the campaign level, per claim the two
verdicts; and the gate ``--fail-above PCT``.

Pure: it takes processed tables (``runs.csv`` rows, the claims table) and returns tables; reading
directories, choosing like-for-like sets and printing are :mod:`dbmatrix.resultsets` and the command's;
the text is :mod:`dbmatrix.analyse.compare_text`.

**Like for like.** Both sides hold the same studies (experiments): :func:`compare_sets` refuses others. Cells
match on their factor columns, never on a run name; a cell measured on one side only is listed, not dropped.

**Interval.** The change of a cell is the ratio of B's to A's geometric mean (over campaigns, of each
campaign's runs), its variance from the runs and from the campaign level (dataset load x campaign and
campaign x cell components, each side's own when it has two campaigns, else the reference's:
:mod:`dbmatrix.analyse.compare_model`), df by Satterthwaite. The intervals of a comparison hold together:
each is at the level that makes all of them (every cell x metric with an interval, every study) hold at
:data:`LEVEL` (Bonferroni), so an unchanged study crosses a threshold by chance in at most 5 % of
comparisons however many cells it has.

**The gate.** ``--fail-above PCT`` fails on a cell whose interval lies wholly beyond PCT % for the worse
(throughput below 1 - PCT/100 of A's, p95 latency above 1 + PCT/100): "worse by more than PCT %" must be
shown by the interval, not by the point estimate. A shift of every cell together (the mean over cells) is
reported, not gated: a campaign's own shift is part of it, and one campaign a side cannot tell them apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse import compare_model as cm
from dbmatrix.analyse.verdict_text import DEFAULT_CONFIDENCE, confidence_of
from dbmatrix.spec.factors import FACTORS

LEVEL = DEFAULT_CONFIDENCE  # all of a comparison's cell intervals together
METRICS: dict[str, dict[str, Any]] = {
    # column in runs.csv: label, and whether a higher value is better
    "tps": {"label": "throughput (tps)", "short": "tps", "higher_is_better": True},
    "p95_ms": {"label": "p95 latency (ms)", "short": "p95", "higher_is_better": False},
}
WORSE, BETTER = "worse", "better"


class NotComparable(ValueError):
    """The two sides do not hold the same studies."""


def factor_columns(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The factor columns both tables have: what cells match on."""
    return [f for f in FACTORS if f in a.columns and f in b.columns]


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "ok"] if "status" in runs.columns else runs


def change_word(lo: float, hi: float, pct: float, higher_is_better: bool) -> str:
    """worse / better when the interval [lo, hi] of B/A lies wholly beyond `pct` % that way, else ''."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    if hi < 1 - pct / 100 or lo > 1 + pct / 100:
        return WORSE if (hi < 1) == higher_is_better else BETTER
    return ""


Models = dict[str, tuple[cm.SideModel, cm.SideModel]]  # metric -> the two sides' variance models


def study_cells(a_runs: pd.DataFrame, b_runs: pd.DataFrame, reference: pd.DataFrame | None = None,
                metrics: Sequence[str] = tuple(METRICS)) -> tuple[pd.DataFrame, Models]:
    """One row per cell of either side, matched cells first in A's order: its factor levels, ``side`` (both,
    A only, B only), runs per side ``n_a``/``n_b`` and, per metric on both sides, the geometric means
    ``{m}_a``/``{m}_b`` and the change ``{m}_d`` (log B/A) with ``{m}_var`` and ``{m}_df``. And per metric
    the two sides' variance models (where each side's campaign level comes from)."""
    a, b = _ok(a_runs), _ok(b_runs)
    cols = factor_columns(a, b)
    ka, kb = cm.cell_key(a, cols), cm.cell_key(b, cols)
    keys = list(dict.fromkeys([*ka, *kb]))
    in_a, in_b = set(ka), set(kb)
    both = [k for k in keys if k in in_a and k in in_b]
    present = [m for m in metrics if m in a.columns and m in b.columns]
    changes, models, means = {}, {}, {}
    for m in present:
        ch, ma, mb = cm.cell_changes(a, b, m, cols, reference)
        changes[m], models[m] = ch, (ma, mb)
        means[m] = [_geomeans(side, m, cols) for side in (a, b)]
    rows = []
    for k in both + [k for k in keys if k not in in_a or k not in in_b]:
        ga, gb = a[(ka == k).to_numpy()], b[(kb == k).to_numpy()]
        first = ga.iloc[0] if len(ga) else gb.iloc[0]
        side = "both" if len(ga) and len(gb) else ("A only" if len(ga) else "B only")
        row: dict[str, Any] = {"cell_id": first.get("cell_id", k), **{c: first[c] for c in cols},
                               "side": side, "n_a": len(ga), "n_b": len(gb)}
        for m in present:
            row[f"{m}_a"], row[f"{m}_b"] = (float(g.get(k, math.nan)) for g in means[m])
            ch = changes[m]
            hit = k in ch.index
            row[f"{m}_d"] = float(ch.at[k, "d"]) if hit else math.nan
            row[f"{m}_var"] = float(ch.at[k, "var"]) if hit else math.nan
            row[f"{m}_df"] = float(ch.at[k, "df"]) if hit else math.nan
        rows.append(row)
    return pd.DataFrame(rows), models


def _geomeans(runs: pd.DataFrame, m: str, cols: Sequence[str]) -> pd.Series:
    """Per cell key: exp of the mean over campaigns of the campaign's mean log (the side's estimate)."""
    data = cm.positive(runs, m)
    return np.exp(cm.per_cell(data, m, cols)["mean"]) if not data.empty else pd.Series(dtype=float)


def intervals_in(cells: pd.DataFrame) -> int:
    """How many cell x metric changes have an interval (the family the gate's level is shared over)."""
    return sum(int((np.isfinite(cells[f"{m}_var"].astype(float)) & (cells["side"] == "both")).sum())
               for m in METRICS if f"{m}_var" in cells.columns)


def with_intervals(cells: pd.DataFrame, level: float, pct: float) -> pd.DataFrame:
    """`cells` with, per metric, ``{m}_ratio``, ``{m}_lo``/``{m}_hi`` at `level`, the percent change
    ``{m}_pct`` (``_pct_lo``/``_pct_hi``) and ``{m}_change`` (:func:`change_word` at `pct` %)."""
    out = cells.copy()
    for m, meta in METRICS.items():
        if f"{m}_d" not in out.columns:
            continue
        bounds = [cm.interval(d, v, df, level) for d, v, df in
                  zip(out[f"{m}_d"].astype(float), out[f"{m}_var"].astype(float), out[f"{m}_df"].astype(float))]
        out[f"{m}_ratio"] = np.exp(out[f"{m}_d"].astype(float))
        out[f"{m}_lo"] = [math.exp(lo) if math.isfinite(lo) else math.nan for lo, _ in bounds]
        out[f"{m}_hi"] = [math.exp(hi) if math.isfinite(hi) else math.nan for _, hi in bounds]
        for s in ("", "_lo", "_hi"):
            out[f"{m}_pct{s}"] = (out[f"{m}_{'ratio' if not s else s[1:]}"] - 1) * 100
        out[f"{m}_change"] = [change_word(lo, hi, pct, meta["higher_is_better"])
                              for lo, hi in zip(out[f"{m}_lo"], out[f"{m}_hi"])]
    return out


def worst_change(cells: pd.DataFrame) -> pd.Series:
    """Per cell the largest change for the worse by point estimate, in % (throughput down, p95 up)."""
    parts = []
    for m, meta in METRICS.items():
        if f"{m}_pct" in cells.columns:
            p = cells[f"{m}_pct"].astype(float)
            parts.append(-p if meta["higher_is_better"] else p)
    if not parts:
        return pd.Series(math.nan, index=cells.index)
    return pd.concat(parts, axis=1).max(axis=1)


REGRESSION_COLUMNS = ["cell_id", "metric", "ratio", "lo", "hi", "pct", "worse_pct"]


def regressions(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells x metrics whose interval lies wholly beyond the threshold for the worse, the worst first
    (``worse_pct``: the change for the worse by point estimate, in %)."""
    rows = []
    for m, meta in METRICS.items():
        if f"{m}_change" not in cells.columns:
            continue
        for _, r in cells[cells[f"{m}_change"] == WORSE].iterrows():
            pct = float(r[f"{m}_pct"])
            rows.append({"cell_id": r["cell_id"], "metric": m, "ratio": r[f"{m}_ratio"], "lo": r[f"{m}_lo"],
                         "hi": r[f"{m}_hi"], "pct": pct, "worse_pct": -pct if meta["higher_is_better"] else pct})
    out = pd.DataFrame(rows, columns=REGRESSION_COLUMNS)
    return out.sort_values("worse_pct", ascending=False, kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class Overall:
    """The mean change over a study's matched cells (a ratio B/A) with its interval: reported, not gated."""

    ratio: float
    lo: float
    hi: float
    df: float
    campaign_shift: float | None  # how far the reference's own campaigns moved over all cells (a ratio), if known


def overall(a_runs: pd.DataFrame, b_runs: pd.DataFrame, cells: pd.DataFrame, metric: str, models: Models,
            reference: pd.DataFrame | None, level: float = LEVEL) -> Overall | None:
    """:func:`compare_model.overall_change` over the matched cells with a change of `metric`."""
    if f"{metric}_d" not in cells.columns or metric not in models:
        return None
    a, b = _ok(a_runs), _ok(b_runs)
    cols = factor_columns(a, b)
    both = cells[(cells["side"] == "both") & np.isfinite(cells[f"{metric}_d"].astype(float))]
    found = cm.overall_change(a, b, metric, cols, list(cm.cell_key(both, cols)), *models[metric])
    if found is None:
        return None
    d, var, df = found
    lo, hi = cm.interval(d, var, df, level)
    shift = cm.campaign_shift(reference, metric)
    return Overall(math.exp(d), math.exp(lo) if math.isfinite(lo) else math.nan,
                   math.exp(hi) if math.isfinite(hi) else math.nan, df,
                   math.exp(shift) if shift is not None else None)


def compare_claims(a: pd.DataFrame | None, b: pd.DataFrame | None) -> pd.DataFrame:
    """Per claim (either side): its text, each side's estimate, interval, the interval's level
    (``confidence_a``/``_b``: the table's ``confidence`` column, else the level its basis names, else
    :data:`~dbmatrix.analyse.verdict_text.DEFAULT_CONFIDENCE`) and verdict, and ``changed`` (the verdicts
    differ). A table has the claims table's ``id``, ``claim``, ``estimate``, ``ci_lo``, ``ci_hi``, ``verdict``
    columns (``confidence``, ``basis`` and ``kind`` where it has them; ``kind``: the metric's, how the claims'
    formatter prints its numbers)."""
    cols = ["id", "claim", "estimate", "ci_lo", "ci_hi", "confidence", "verdict", "kind"]
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
    m["kind"] = m["kind_a"].where(m["kind_a"].notna(), m["kind_b"]).astype(object).fillna("ratio")
    return m[["id", "claim", "estimate_a", "ci_lo_a", "ci_hi_a", "confidence_a", "verdict_a", "estimate_b",
              "ci_lo_b", "ci_hi_b", "confidence_b", "verdict_b", "changed", "kind"]].reset_index(drop=True)


@dataclass
class Comparison:
    """A comparison of the same studies: per study its cells (with intervals), the sources of the campaign
    level and the mean change; the claims; the gate's threshold and the intervals' shared level."""

    a_label: str
    b_label: str
    level: float = LEVEL  # all cell intervals together
    fail_above: float | None = None  # the gate's threshold in %, None: no gate (changes at 0 %)
    cells: dict[str, pd.DataFrame] = field(default_factory=dict)  # study -> cells (with_intervals)
    sources: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # study -> metric -> (A, B)
    overall: dict[str, dict[str, Overall]] = field(default_factory=dict)  # study -> metric -> mean change
    claims: pd.DataFrame | None = None
    claims_note: str = ""  # why the claims are not compared, when they are not
    n_intervals: int = 0
    notes: list[str] = field(default_factory=list)  # what was left out or may differ (shown first)
    references: dict[str, str] = field(default_factory=dict)  # study -> whose campaigns a one-campaign side uses

    @property
    def cell_level(self) -> float:
        """Each cell interval's level: all :attr:`n_intervals` of them hold together at :attr:`level`."""
        return cm.family_level(self.level, self.n_intervals)

    def matched(self, study: str) -> int:
        t = self.cells.get(study)
        return 0 if t is None or t.empty else int((t["side"] == "both").sum())

    def unmatched_studies(self) -> list[str]:
        return [s for s in self.cells if self.matched(s) == 0]

    def regressions(self) -> pd.DataFrame:
        """Every study's :func:`regressions` (a ``study`` column); empty without a gate."""
        frames = [regressions(t).assign(study=s) for s, t in self.cells.items() if not t.empty]
        frames = [f for f in frames if not f.empty]
        if self.fail_above is None or not frames:
            return pd.DataFrame(columns=[*REGRESSION_COLUMNS, "study"])
        return pd.concat(frames, ignore_index=True).sort_values("worse_pct", ascending=False, kind="stable")

    def cells_table(self) -> pd.DataFrame:
        frames = [t.assign(study=s) for s, t in self.cells.items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def compare_sets(a_label: str, a_runs: Mapping[str, pd.DataFrame], b_label: str, b_runs: Mapping[str, pd.DataFrame],
                 a_claims: pd.DataFrame | None = None, b_claims: pd.DataFrame | None = None, *,
                 references: Mapping[str, pd.DataFrame | None] | None = None, fail_above: float | None = None,
                 level: float = LEVEL, claims_note: str = "", notes: Sequence[str] = (),
                 reference_labels: Mapping[str, str] | None = None) -> Comparison:
    """The same studies on both sides (runs per experiment name; else :class:`NotComparable`), each study's
    cells with intervals at the shared level, the mean change per metric and the claims side by side (claims
    not tested on either side left out). `references`: per study the runs whose campaigns give a
    one-campaign side its campaign level."""
    if set(a_runs) != set(b_runs):
        raise NotComparable(f"A holds {', '.join(sorted(a_runs)) or 'no study'}, B holds "
                            f"{', '.join(sorted(b_runs)) or 'no study'}")
    c = Comparison(a_label, b_label, level=level, fail_above=fail_above, claims_note=claims_note,
                   notes=list(notes), references=dict(reference_labels or {}))
    raw = {}
    for name, ra in a_runs.items():
        ref = (references or {}).get(name)
        t, models = study_cells(ra, b_runs[name], ref)
        raw[name] = t
        c.sources[name] = {m: (ma.source, mb.source) for m, (ma, mb) in models.items()}
        c.overall[name] = {m: o for m in METRICS
                           if not t.empty and (o := overall(ra, b_runs[name], t, m, models, ref)) is not None}
    c.n_intervals = sum(intervals_in(t) for t in raw.values() if not t.empty)
    for name, t in raw.items():
        c.cells[name] = t if t.empty else with_intervals(t, c.cell_level, fail_above or 0.0)
    if a_claims is not None and b_claims is not None:
        t = compare_claims(a_claims, b_claims)
        untested = {"not tested", "-"}
        c.claims = t[~(t["verdict_a"].isin(untested) & t["verdict_b"].isin(untested))].reset_index(drop=True)
    return c
