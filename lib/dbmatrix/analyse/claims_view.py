"""The one formatter of the claims table: every view (the paper, the README, the HTML report, ``dbmatrix
verdicts``, ``dbmatrix compare``) shows a claim through :func:`claim_rows` and its view's template, so they
cannot disagree.

:func:`claim_rows` turns a judgement's :class:`~dbmatrix.analyse.judgement.ClaimVerdicts` into
:class:`ClaimRow` s whose every number is already text (:func:`measured`: the estimate with its interval,
per metric kind: ratios to two decimals, differences in points, shares in per cent), with the interval's
level, each condition's estimate and verdict, the verdict, how the conditions combine, the reason and each
campaign's verdict. :func:`render` lays the rows out with the view's jinja2 template
(``templates/claims.<view>.j2``: ``md``, ``html``, ``txt``, ``tex``); a view escapes the text for its markup
and never formats a number itself. Pure.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from dbmatrix.analyse.judgement import ClaimVerdicts
from dbmatrix.analyse.verdict_text import (
    common_level,
    conditions,
    confidence_of,
    has_interval,
    level_label,
    verdict_and_reason,
)

NARROW = "\u202f"  # between a number and its unit (LaTeX's \,)
SHORT = {"agree": "agree", "disagree": "disagree", "inconclusive": "inconcl.", "not identified": "not ident.",
         "not tested": "not tested", "": "no estimate"}  # the paper's narrow column: "depends on ..." as it is
PER_PAIR = ("per pair (", "pairs differ (")  # the reason of a measured quantity judged pair by pair
TEMPLATES = Path(__file__).with_name("templates")


# ------------------------------------------------------------------------------------------ numbers

def _float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def number(v: Any, kind: str) -> str:
    """One number of a claim in its metric's unit: a ratio to two decimals, a difference in points with its
    sign (one decimal), a share in per cent; an unbounded side as ∞; "" for none."""
    x = _float(v)
    if math.isnan(x):
        return ""
    if math.isinf(x):
        return "-∞" if x < 0 else "∞"
    if kind == "difference":
        return f"{x:+.1f}"
    if kind == "share":
        return f"{x * 100:.0f}{NARROW}%"
    if abs(x) >= 1e4 or 0 < abs(x) < 0.01:  # an early look's interval on few df: its order of magnitude
        return f"{x:.1e}"
    return f"{x:.2f}"


def measured(kind: str, est: Any, lo: Any = math.nan, hi: Any = math.nan) -> str:
    """The estimate with its interval ("1.23 [1.10, 1.38]", "+4.1 [+1.0, +7.2] pts", "4 % [0 %, 88 %]"); the
    estimate alone without an interval (a measured value); "" without an estimate."""
    e = number(est, kind)
    if not e:
        return ""
    a, b = number(lo, kind), number(hi, kind)
    body = e + (f" [{a}, {b}]" if a and b else "")
    return body + (" pts" if kind == "difference" else "")


# ------------------------------------------------------------------------------------------ rows

@dataclass(frozen=True)
class ConditionRow:
    """One condition a claim was judged at: its words, its estimate with its interval, its own verdict."""

    words: str
    measured: str  # "" when not estimable
    verdict: str
    interval: bool  # the measured text has an interval (a measured value has none)
    ends: tuple[float, float] = (math.nan, math.nan)  # the interval's ends, as judged


@dataclass(frozen=True)
class CampaignRow:
    """One campaign's own verdict of a claim (a consistency check) and its estimate."""

    campaign: int
    verdict: str
    measured: str


@dataclass(frozen=True)
class ClaimRow:
    """A claim as every view shows it; every number is text (see the module doc)."""

    id: str
    seed: str
    claim: str  # the registry's wording (LaTeX source: :func:`plain` for other markups)
    study: str
    compared: str
    kind: str
    verdict: str
    reason: str
    combine: str  # how its conditions combine ("" for one condition)
    heterogeneity: str
    registration: str
    premise_value: str
    level: float  # its intervals' level
    level_label: str  # "97.4 % CI"
    stated: str  # its level label where it differs from its table's (the heading's), else ""
    measured: str  # its own estimate with its interval ("" without one, or where its conditions say it)
    judged: str  # the interval judged where it is none of its conditions' (the largest condition), else ""
    conditions: tuple[ConditionRow, ...] = ()
    campaigns: tuple[CampaignRow, ...] = ()
    row: Mapping[str, Any] = field(default_factory=dict)  # the claims table's row (for view-specific columns)

    @property
    def shown(self) -> bool:
        """It shows an estimate (its own, a judged one or a condition's)."""
        return bool(self.measured or self.judged or any(c.measured for c in self.conditions))

    @property
    def has_interval(self) -> bool:
        """An interval is shown (so its level is said)."""
        return "[" in self.measured or "[" in self.judged or any(c.interval for c in self.conditions)

    @property
    def pairs(self) -> bool:
        """A measured quantity judged pair by pair (no interval)."""
        return self.reason.startswith(PER_PAIR)

    def lines(self, short: bool = False) -> list[str]:
        """The estimate lines: one "words: estimate (verdict)" per condition, the interval judged first (the
        value judged last, for pairs), else the claim's own estimate (`short`: the paper's short verdicts)."""
        words = SHORT if short else {}
        out = [f"{c.words}: {c.measured or 'not estimable'}" + (f" ({words.get(c.verdict, c.verdict)})"
                                                                 if c.verdict else "")
               for c in self.conditions]
        if self.judged:
            out = [*out, f"judged: {self.judged}"] if self.pairs else [f"judged: {self.judged}", *out]
        return out or ([self.measured] if self.measured else [])

    def cell(self, sep: str = "; ", short: bool = False) -> str:
        """:meth:`lines` in one cell, with its level where it differs from its table's heading ("" without
        an estimate)."""
        text = sep.join(self.lines(short))
        return text + (f" ({self.stated})" if text and self.stated and self.has_interval else "")


def _text(x: Any) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x)


_JUDGED = re.compile(r"(?:^|; )judged: (?P<what>.*)$")


def _conditions(r: Mapping[str, Any], levels: pd.DataFrame | None, kind: str) -> tuple[ConditionRow, ...]:
    out = []
    for c in conditions(r, levels):
        m = measured(kind, c.estimate, c.ci_lo, c.ci_hi)
        out.append(ConditionRow(c.level, m, c.verdict, not (math.isnan(c.ci_lo) or math.isnan(c.ci_hi)),
                                (c.ci_lo, c.ci_hi)))
    return tuple(out)


def _judged(r: Mapping[str, Any], conds: Sequence[ConditionRow], kind: str, reason: str) -> str:
    """The interval the claim was judged on where none of its conditions has it ("the largest": an interval of
    its own); for a measured quantity judged pair by pair, the reason's "judged: ..." words."""
    if reason.startswith(PER_PAIR):
        m = _JUDGED.search(reason)
        return m["what"] if m else ""
    if not conds or not has_interval(r):
        return ""
    ends = (_float(r.get("ci_lo")), _float(r.get("ci_hi")))
    if any(c.ends == ends for c in conds):  # a condition's own interval (the primary one): said there
        return ""
    return measured(kind, r.get("estimate"), *ends)


def _campaigns(verdicts: ClaimVerdicts, cid: str, kind: str) -> tuple[CampaignRow, ...]:
    rows = verdicts.of(cid)
    return tuple(CampaignRow(int(c["campaign"]), _text(c["verdict"]),
                             measured(kind, c["estimate"], c["ci_lo"], c["ci_hi"])) for _, c in rows.iterrows())


def claim_row(r: Mapping[str, Any], verdicts: ClaimVerdicts, level: float | None) -> ClaimRow:
    """One claims-table row as :class:`ClaimRow`; `level`: its table's heading level (None: it states its own)."""
    kind = _text(r.get("kind")) or "ratio"
    verdict, reason = verdict_and_reason(r)
    conds = _conditions(r, verdicts.levels if not verdicts.levels.empty else None, kind)
    own = "" if conds else measured(kind, r.get("estimate"), r.get("ci_lo"), r.get("ci_hi"))
    conf = confidence_of(r)
    label = level_label(conf)
    stated = "" if level is not None and round(conf, 6) == round(level, 6) else label
    return ClaimRow(_text(r.get("id")), _text(r.get("seed")), _text(r.get("claim")), _text(r.get("study")),
                    _text(r.get("compared")), kind, verdict, reason, _text(r.get("combine")),
                    _text(r.get("heterogeneity")), _text(r.get("registration")), _text(r.get("premise_value")),
                    conf, label, stated, own, _judged(r, conds, kind, reason), conds,
                    _campaigns(verdicts, _text(r.get("id")), kind), dict(r))


def table_level(verdicts: ClaimVerdicts, rows: pd.DataFrame | None = None) -> tuple[float, bool]:
    """The level most of the table's intervals have (its heading's) and whether every interval has it."""
    table = verdicts.claims if rows is None else rows
    return common_level([r for _, r in table.iterrows()], verdicts.levels if not verdicts.levels.empty else None)


def claim_rows(verdicts: ClaimVerdicts, rows: pd.DataFrame | None = None,
               level: float | None = None) -> list[ClaimRow]:
    """Every claim of `verdicts` (or the given rows of its table) as :class:`ClaimRow` s, each stating its
    level where it differs from `level` (default: the table's, :func:`table_level`)."""
    table = verdicts.claims if rows is None else rows
    lv = table_level(verdicts, table)[0] if level is None else level
    return [claim_row(r, verdicts, lv) for _, r in table.iterrows()]


def heading(verdicts: ClaimVerdicts, rows: pd.DataFrame | None = None, word: str = "estimate") -> str:
    """The estimate column's heading: "estimate (97.4 % CI)" when every interval has that level, else
    "estimate (95 % CI unless stated)"."""
    lv, every = table_level(verdicts, rows)
    return f"{word} ({level_label(lv)}{'' if every else ' unless stated'})"


# ------------------------------------------------------------------------------------------ markup

def plain(text: str) -> str:
    """A claim's LaTeX wording as plain text (``4$\\times$`` -> ``4×``, ``10\\,\\%`` -> ``10 %``, ``2--3`` ->
    ``2–3``)."""
    for a, b in (("\\,", NARROW), ("\\%", "%"), ("$\\times$", "×"), ("--", "–"), ("~", " ")):
        text = text.replace(a, b)
    text = re.sub(r"\\([&_#])", r"\1", text)
    text = re.sub(r"\\[a-zA-Z]+\{([^}]*)\}", r"\1", text)
    return re.sub(r"\\[a-zA-Z]+|[$\\{}]", "", text)


def tex(text: str) -> str:
    """Plain text (this module's) as LaTeX: escaped, a narrow space before % as \\,, ∞ in math."""
    from_escape = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                   "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    out = "".join(from_escape.get(c, c) for c in str(text))
    out = out.replace("-∞", "$-\\infty$").replace("∞", "$\\infty$").replace(NARROW, "\\,")
    return re.sub(r"(\d) \\% CI", r"\1\\,\\% CI", out)  # an interval's level: "95\,\% CI"


def markdown(text: str) -> str:
    """Plain text in a markdown table cell."""
    return str(text).replace("|", "\\|")


def terminal(text: str) -> str:
    """Plain text for a terminal (a narrow space as a space)."""
    return str(text).replace(NARROW, " ")


ESCAPES: dict[str, Callable[[str], str]] = {"md": markdown, "html": html.escape, "txt": terminal, "tex": tex}


@cache
def _environment(view: str) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    if view == "tex":  # LaTeX's braces: other delimiters
        env.block_start_string, env.block_end_string = "<%", "%>"
        env.variable_start_string, env.variable_end_string = "<<", ">>"
        env.comment_start_string, env.comment_end_string = "<#", "#>"
    env.filters["e"] = ESCAPES[view]
    env.filters["plain"] = plain
    env.globals["SHORT"] = SHORT
    return env


def render(view: str, rows: Sequence[ClaimRow], **context: Any) -> str:
    """The claims rows in one view's template (``templates/claims.<view>.j2``; `context`: what it asks for)."""
    if view not in ESCAPES:
        raise ValueError(f"claims view {view!r}: one of {', '.join(ESCAPES)}")
    return _environment(view).get_template(f"claims.{view}.j2").render(rows=list(rows), **context)
