"""The claims table in words, one wording for every renderer (the README, the paper, the HTML report,
``dbmatrix verdicts``, ``dbmatrix compare``): an interval's level, a verdict's class, the counts per class,
a claim's conditions with their own verdicts, and why a claim was not tested.

Pure: reads the claims table's rows (:data:`dbmatrix.analyse.claims.VERDICT_COLUMNS`, as a mapping: a dict,
a CSV row or a pandas row) and its levels table (:data:`dbmatrix.analyse.claims.LEVEL_COLUMNS`). A table
written before the columns ``confidence``, ``combine`` and ``heterogeneity`` existed still reads: an
interval's level from the basis's look ("(look 2: 97.36 % interval)") else :data:`DEFAULT_CONFIDENCE`, the
others empty, and its "premise not met" verdict as "not tested" with the premise as the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dbmatrix.analyse.claims.verdicts import VERDICTS, verdict_class

# The level of every interval that does not state another: the claims' default and the per-cell summaries',
# declared comparisons' and figures' (dbmatrix.analyse.stats computes them at 0.95 unless asked otherwise).
DEFAULT_CONFIDENCE = 0.95
LEGACY_PREMISE = "premise not met"  # a verdict of tables written before issue 38: now "not tested" + reason
PREMISE_REASONS = ("premise not met", "premise uncertain")
DEPENDS = "depends on"
# the counts' words per class: (one, several) as a list's labels, and as a sentence's verbs
CLASS_LABELS = {"depends": ("depends on a condition", "depend on a condition")}
CLASS_VERBS = {"agree": ("agrees", "agree"), "disagree": ("disagrees", "disagree"),
               "depends": ("depends on a condition", "depend on a condition"),
               "inconclusive": ("is inconclusive", "are inconclusive"),
               "not identified": ("is not identified", "are not identified"),
               "not tested": ("is not tested", "are not tested")}
_LOOK = re.compile(r"(?P<pct>\d+(?:\.\d+)?) % interval")


# ------------------------------------------------------------------------------------------ levels

def level_pct(confidence: float) -> str:
    """An interval's level as a percentage with the digits it needs: 0.95 -> "95", 0.9736 -> "97.4",
    0.99995 -> "99.995" (never "100" for a level below 1)."""
    pct = 100 * float(confidence)
    text = f"{pct:.1f}"
    digits = 1
    while float(text) >= 100 > pct and digits < 8:  # 99.995 %: not "100"
        digits += 1
        text = f"{pct:.{digits}f}"
    return text.rstrip("0").rstrip(".")


def level_label(confidence: float, tex: bool = False) -> str:
    """"97.4 % CI" (``tex``: "97.4\\,\\% CI") for an interval at `confidence`."""
    return f"{level_pct(confidence)}" + ("\\,\\% CI" if tex else " % CI")


def _get(row: Mapping[str, Any] | Any, key: str) -> Any:
    try:
        return row.get(key)
    except AttributeError:
        return None


def _float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _text(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return str(x)


def confidence_of(row: Mapping[str, Any]) -> float:
    """The level of a claim row's intervals: its ``confidence`` column; in an older table, the level its
    basis names (a study run until decided: "(look 2: 97.36 % interval)"); else :data:`DEFAULT_CONFIDENCE`."""
    c = _float(_get(row, "confidence"))
    if math.isfinite(c) and 0 < c < 1:
        return c
    m = _LOOK.search(_text(_get(row, "basis")))
    if m and 0 < float(m["pct"]) < 100:
        return float(m["pct"]) / 100
    return DEFAULT_CONFIDENCE


def shared_level(levels: Iterable[float]) -> float | None:
    """The one level all the given intervals share (None: they differ, or there is none)."""
    distinct = sorted({round(float(c), 6) for c in levels})
    return distinct[0] if len(distinct) == 1 else None


def table_level(rows: Iterable[Mapping[str, Any]], levels: pd.DataFrame | None = None) -> float | None:
    """The level every row that shows an interval (its own, or its conditions') shares; None when they
    differ. A table without an interval: :data:`DEFAULT_CONFIDENCE`."""
    shown = [confidence_of(r) for r in rows if shows_interval(r, levels)]
    return shared_level(shown) if shown else DEFAULT_CONFIDENCE


def common_level(rows: Iterable[Mapping[str, Any]], levels: pd.DataFrame | None = None) -> tuple[float, bool]:
    """The level most of the rows' intervals have (ties: the lowest; none: :data:`DEFAULT_CONFIDENCE`) and
    whether every interval has it."""
    shown = [round(confidence_of(r), 6) for r in rows if shows_interval(r, levels)]
    if not shown:
        return DEFAULT_CONFIDENCE, True
    best = min(set(shown), key=lambda c: (-shown.count(c), c))
    return best, len(set(shown)) == 1


def has_interval(row: Mapping[str, Any]) -> bool:
    """The row's own interval is there (an unbounded side counts; a measured value has none)."""
    lo, hi = _float(_get(row, "ci_lo")), _float(_get(row, "ci_hi"))
    return not (math.isnan(lo) or math.isnan(hi))


def shows_interval(row: Mapping[str, Any], levels: pd.DataFrame | None = None) -> bool:
    """The row's own interval, or one of its conditions', is printed."""
    return has_interval(row) or any(not math.isnan(c.ci_lo) for c in conditions(row, levels))


def heading(rows: Sequence[Mapping[str, Any]], levels: pd.DataFrame | None = None, tex: bool = False,
            word: str = "estimate") -> tuple[str, float]:
    """The estimate column's heading and the level it names: "estimate (97.4 % CI)" when every interval
    has that level, else "estimate (95 % CI unless stated)" with the level most of them have (a row at
    another level states its own: :func:`stated`)."""
    lv, every = common_level(rows, levels)
    return f"{word} ({level_label(lv, tex)}{'' if every else ' unless stated'})", lv


def stated(row: Mapping[str, Any], level: float | None, tex: bool = False) -> str:
    """The row's own level label where it differs from `level`, the one its table's heading names (None:
    every row states its own); "" where it is the same."""
    own = confidence_of(row)
    return "" if level is not None and round(own, 6) == round(level, 6) else level_label(own, tex)


# ------------------------------------------------------------------------------------------ verdicts

def verdict_and_reason(row: Mapping[str, Any]) -> tuple[str, str]:
    """The row's verdict and reason as the current rule words them: an older table's "premise not met" is
    "not tested" with "premise not met: <the premise's value>" as the reason."""
    v, reason = _text(_get(row, "verdict")), _text(_get(row, "reason"))
    if v == LEGACY_PREMISE:
        value = reason or _text(_get(row, "premise_value"))
        return "not tested", reason if reason.startswith(PREMISE_REASONS) else f"{LEGACY_PREMISE}: {value}"
    return v, reason


def class_of(verdict: str) -> str:
    """The class of a verdict (:data:`dbmatrix.analyse.claims.VERDICTS`): "depends on <factor>" is
    "depends"; an older table's "premise not met" is "not tested"."""
    v = _text(verdict)
    return "not tested" if v == LEGACY_PREMISE else verdict_class(v)


def is_premise_reason(reason: str) -> bool:
    """A "not tested" whose reason is a premise not met or uncertain (the estimate is still shown)."""
    return _text(reason).startswith(PREMISE_REASONS)


def is_decided(verdict: str) -> bool:
    """agree, disagree or depends on a condition."""
    return class_of(verdict) in ("agree", "disagree", "depends")


def class_counts(verdicts: Iterable[str]) -> dict[str, int]:
    """The claims per verdict class, in :data:`~dbmatrix.analyse.claims.VERDICTS` order."""
    classes = [class_of(v) for v in verdicts]
    return {c: sum(1 for x in classes if x == c) for c in VERDICTS}


def counts_text(verdicts: Iterable[str], verbs: bool = False) -> str:
    """"5 agree, 8 disagree, 2 depend on a condition, 7 inconclusive, 15 not tested" (classes without a
    claim left out); `verbs`: "1 agrees, 2 are inconclusive" (a sentence's words)."""
    parts = []
    for c, n in class_counts(verdicts).items():
        if n:
            one, many = (CLASS_VERBS if verbs else CLASS_LABELS).get(c, (c, c))
            parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join(parts)


def combine_of(row: Mapping[str, Any]) -> str:
    """How the claim's conditions combine ("all conditions", "the largest condition", "primary: ..."; "":
    judged at one condition, or an older table)."""
    return _text(_get(row, "combine"))


def heterogeneity_of(row: Mapping[str, Any]) -> str:
    """The campaigns' consistency test in words ("campaigns consistent (F = ...)"; "": not tested)."""
    return _text(_get(row, "heterogeneity"))


# ------------------------------------------------------------------------------------------ conditions

@dataclass(frozen=True)
class ConditionText:
    """One condition a claim was judged at: its level words, estimate, interval (NaN: a measured value or
    none) and verdict ("" when not estimable)."""

    level: str
    estimate: float
    ci_lo: float
    ci_hi: float
    verdict: str

    def text(self, num: Any = None, unit: str = "") -> str:
        """"compression none: 1.01 [0.99, 1.03] disagree" (`num`: how a number prints, default 3
        significant digits)."""
        f = num or (lambda x: f"{x:.3g}")
        if math.isnan(self.estimate):
            return f"{self.level}: not estimable"
        ci = "" if math.isnan(self.ci_lo) or math.isnan(self.ci_hi) else f" [{f(self.ci_lo)}, {f(self.ci_hi)}]"
        return f"{self.level}: {f(self.estimate)}{unit}{ci}" + (f" {self.verdict}" if self.verdict else "")


_NUM = r"[-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|inf|--)"
_PER_LEVEL = re.compile(r"judged (?:per level|at every level of [^:]*? \(fixed in the claim\)): (?P<body>.*)")
_LEVEL_ITEM = re.compile(rf"(?:^|; )(?P<level>[^:;\[\]()]+?): (?:(?P<est>{_NUM}) \[(?P<lo>{_NUM}), "
                         rf"(?P<hi>{_NUM})\] (?P<verdict>agree|disagree|inconclusive)|(?P<none>not estimable))")
_PAIR = re.compile(r"^(?:per pair|pairs differ) \(measured, no CI\): (?P<body>.*)$")
_PAIR_ITEM = re.compile(rf"(?:^|; )(?P<level>[^:;]+?): (?P<est>{_NUM}) (?P<verdict>agree|disagree|inconclusive)"
                        r"(?=;|$)")


def _num(text: str | None) -> float:
    if text is None or text == "--":
        return math.nan
    return float(text)


def conditions(row: Mapping[str, Any], levels: pd.DataFrame | None = None) -> list[ConditionText]:
    """The conditions a claim was judged at, pooled over campaigns, each with its own verdict: from the
    levels table (its campaign-0 rows) where it has the claim, else from the basis ("judged at every level
    of ...: compression none: 1.01 [0.99, 1.03] disagree; ...") or, for a measured quantity, the reason's
    pairs ("per pair (measured, no CI): ..."; no interval). Empty for a claim judged at one condition."""
    cid = _text(_get(row, "id"))
    if levels is not None and not levels.empty and "id" in levels:
        own = levels[(levels["id"].astype(str) == cid)]
        if "campaign" in own:
            own = own[pd.to_numeric(own["campaign"], errors="coerce").fillna(0) == 0]
        if not own.empty:
            return [ConditionText(_text(lv["level"]), _float(lv["estimate"]), _float(lv["ci_lo"]),
                                  _float(lv["ci_hi"]), _text(lv["verdict"])) for _, lv in own.iterrows()]
    m = _PER_LEVEL.search(_text(_get(row, "basis")))
    if m:
        out = []
        for it in _LEVEL_ITEM.finditer(m["body"]):
            if it["none"]:
                out.append(ConditionText(it["level"].strip(), math.nan, math.nan, math.nan, ""))
            else:
                out.append(ConditionText(it["level"].strip(), _num(it["est"]), _num(it["lo"]), _num(it["hi"]),
                                         it["verdict"]))
        if out:
            return out
    p = _PAIR.match(_text(_get(row, "reason")))
    if p:
        return [ConditionText(it["level"].strip(), _num(it["est"]), math.nan, math.nan, it["verdict"])
                for it in _PAIR_ITEM.finditer(p["body"])]
    return []
