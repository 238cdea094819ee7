"""How a :class:`~dbmatrix.analyse.compare.Comparison` is shown: text that fits a terminal of `width`
columns (80 and up; markdown is the same text with headings and fenced tables), JSON and CSV. Pure."""

from __future__ import annotations

import json
import math
import textwrap
from typing import Any

import pandas as pd

from dbmatrix.analyse import compare_model as cm
from dbmatrix.analyse.claims_view import measured, terminal
from dbmatrix.analyse.compare import METRICS, Comparison, worst_change
from dbmatrix.analyse.verdict_text import DEFAULT_CONFIDENCE, level_label, level_pct

SORTS = ("cell", "change")
SOURCE_WORDS = {cm.OWN: "its own campaigns", cm.REFERENCE: "the reference's campaigns",
                cm.UNMEASURED: "UNMEASURED (one campaign, no reference with two): runs only, too narrow"}
RUNS_W, CI_W, FLAG_W = 5, 16, 6  # a cell row: label, runs A/B, then per metric its change and flag
MIN_LABEL = 8


def pct_text(x: float, bound: bool = False) -> str:
    """A percent change: "+4.2", "-120"; an interval's `bound` with one decimal only under 10 %: "-35"."""
    if not math.isfinite(x):
        return "-"
    return f"{x:+.1f}" if abs(x) < (9.95 if bound else 99.95) else f"{x:+.0f}"


def change_text(r: pd.Series, m: str) -> str:
    """ "-6.3 [-35,+29]": the percent change with its interval ("[no CI]" without one)."""
    p = r.get(f"{m}_pct")
    if p is None or not math.isfinite(float(p)):
        return "-"
    lo, hi = float(r.get(f"{m}_pct_lo", math.nan)), float(r.get(f"{m}_pct_hi", math.nan))
    ci = f"[{pct_text(lo, True)},{pct_text(hi, True)}]" if math.isfinite(lo) else "[no CI]"
    return f"{pct_text(float(p)):>6} {ci}"


def cell_labels(ids: list[str]) -> tuple[list[str], list[str]]:
    """Cell ids without the parts every one of them has ("myrocks-c0-b16k-lz4-disk-t2-tpcc" ->
    "c0-b16k-lz4-disk" when every cell is myrocks, t2, tpcc); the cell that has only those: "base". And
    the parts left out."""
    parts = [str(i).split("-") for i in ids]
    common = set.intersection(*(set(p) for p in parts)) if len(parts) > 1 else set()
    labels = ["-".join(t for t in p if t not in common) or "base" for p in parts]
    return labels, [t for t in (parts[0] if parts else []) if t in common]


def fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 1)] + "~"


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [indent.rstrip()]


def ordered(t: pd.DataFrame, sort: str, only_changed: bool) -> pd.DataFrame:
    """Matched cells (by change, worst first, with `sort` "change"), then the one-sided ones; `only_changed`:
    only cells with a change (an interval wholly beyond the threshold, either way)."""
    if t.empty:
        return t
    both, rest = t[t["side"] == "both"], t[t["side"] != "both"]
    if sort == "change":
        both = both.assign(_w=worst_change(both)).sort_values("_w", ascending=False, na_position="last",
                                                               kind="stable").drop(columns="_w")
    if only_changed:
        flags = [both[f"{m}_change"] != "" for m in METRICS if f"{m}_change" in both.columns]
        both = both[pd.concat(flags, axis=1).any(axis=1)] if flags else both.iloc[0:0]
        rest = rest.iloc[0:0]
    return pd.concat([both, rest])


def gate_lines(c: Comparison, width: int) -> list[str]:
    """The intervals' shared level and the gate's result."""
    if c.n_intervals == 0:
        out = _wrap("Intervals: none (no matched cell with a change and a variance).", width, "")
        if c.fail_above is not None:
            out += _wrap(f"Gate --fail-above {c.fail_above:g}: nothing to test; FAILED (exit 2).", width, "")
        return out
    each = level_label(c.cell_level)
    out = _wrap(f"Intervals: {each} each, so that all {c.n_intervals} cell x metric intervals hold together at "
                f"{level_pct(c.level)} % (Bonferroni); each holds the runs and the campaign level (dataset load "
                "x campaign, campaign x cell), as the claims' intervals do.", width, "")
    if c.fail_above is None:
        out += _wrap("No gate (--fail-above PCT): worse/better mark an interval that excludes no change.", width, "")
        return out
    reg = c.regressions()
    head = (f"Gate --fail-above {c.fail_above:g}: a cell fails when its whole interval is more than "
            f"{c.fail_above:g} % worse (throughput down, p95 latency up): ")
    if reg.empty:
        return out + _wrap(head + "none; PASSED.", width, "")
    return out + _wrap(head + f"FAILED: {failures(reg)}.", width, "")


def failures(reg: pd.DataFrame, shown: int = 5) -> str:
    """ "2 cell x metric: tpcc-paper myrocks-c0-... tps -30.0 % [-45, -11], ..." (the first `shown`)."""
    items = [f"{r.study} {r.cell_id} {METRICS[r.metric]['short']} {pct_text(r.pct)} % "
             f"[{pct_text((r.lo - 1) * 100, True)}, {pct_text((r.hi - 1) * 100, True)}]"
             for r in reg.head(shown).itertuples()]
    more = f", and {len(reg) - shown} more (marked worse in the tables)" if len(reg) > shown else ""
    return f"{len(reg)} cell x metric interval{'s' if len(reg) != 1 else ''}: {', '.join(items)}{more}"


def study_lines(c: Comparison, study: str, width: int, sort: str, only_changed: bool, markdown: bool) -> list[str]:
    t = c.cells[study]
    out = [f"## {study}" if markdown else f"{study}:"]
    if t.empty:
        return [*out, "  no cells on either side", ""]
    n_a, n_b = int((t["side"] == "A only").sum()), int((t["side"] == "B only").sum())
    out += _wrap(f"{c.matched(study)} cells matched, {n_a} in A only, {n_b} in B only.", width)
    src = c.sources.get(study, {})
    words = {f"A {SOURCE_WORDS[a]}, B {SOURCE_WORDS[b]}" if a != b else f"both sides {SOURCE_WORDS[a]}"
             for a, b in src.values()}
    ref = c.references.get(study, "")
    if words:
        uses_ref = any(cm.REFERENCE in pair for pair in src.values())
        out += _wrap(f"Campaign level: {'; '.join(sorted(words))}"
                     + (f" ({ref})" if ref and uses_ref else "") + ".", width)
    for m, o in c.overall.get(study, {}).items():
        shift = (f"; the reference's own campaigns differ by {(1 - 1 / o.campaign_shift) * 100:.1f} % over all cells"
                 if o.campaign_shift is not None else "")
        out += _wrap(f"All cells, {METRICS[m]['label']}: {pct_text((o.ratio - 1) * 100)} % "
                     f"[{pct_text((o.lo - 1) * 100)}, {pct_text((o.hi - 1) * 100)}] "
                     f"{level_label(DEFAULT_CONFIDENCE)}: reported, not gated (a whole campaign's shift is part "
                     f"of it){shift}.", width)
    shown = ordered(t, sort, only_changed)
    labels, common = cell_labels(list(t["cell_id"].astype(str)))
    label_of = dict(zip(t.index, labels))
    if common:
        out += _wrap(f"Cell labels leave out what every cell shares: {'-'.join(common)}.", width)
    one_sided = shown[shown["side"] != "both"]
    shown = shown[shown["side"] == "both"]
    if shown.empty:
        out += ["  no cell changed" if only_changed else "  no cell matched"]
    for side in ("A only", "B only"):
        ids = [label_of[i] for i in one_sided[one_sided["side"] == side].index]
        if ids:
            out += _wrap(f"In {side} ({len(ids)}): {', '.join(ids)}.", width)
    if shown.empty:
        return [*out, ""]
    metrics = [m for m in METRICS if f"{m}_pct" in t.columns]
    fixed = 1 + RUNS_W + len(metrics) * (2 + CI_W + FLAG_W)
    lw = max(MIN_LABEL, min(width - fixed, max(len(label_of[i]) for i in shown.index)))
    head = f"{'cell':<{lw}} {'runs':>{RUNS_W}}" + "".join(
        f" {METRICS[m]['short'] + ' B/A % [CI]':<{CI_W}} {'':<{FLAG_W}}" for m in metrics)
    out += ["", "```"] if markdown else [""]
    out.append(head.rstrip())
    for i, r in shown.iterrows():
        line = f"{fit(label_of[i], lw):<{lw}} {str(r['n_a']) + '/' + str(r['n_b']):>{RUNS_W}}"
        for m in metrics:
            line += f" {change_text(r, m):<{CI_W}} {r.get(f'{m}_change') or ''!s:<{FLAG_W}}"
        out.append(line.rstrip())
    if markdown:
        out.append("```")
    return [*out, ""]


def claim_side(r: pd.Series, s: str) -> str:
    """One side's estimate of a claim with its interval and the interval's level ("-" without one), as the
    claims' one formatter prints them (:func:`dbmatrix.analyse.claims_view.measured`)."""
    est, lo, hi = (r.get(f"{k}_{s}") for k in ("estimate", "ci_lo", "ci_hi"))
    kind = str(r.get("kind") or "ratio")
    if est is None or pd.isna(est):
        return "-"
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return f"{terminal(measured(kind, est))} (no CI)"
    conf = r.get(f"confidence_{s}")
    level = level_label(float(conf) if conf is not None and pd.notna(conf) else DEFAULT_CONFIDENCE)
    return f"{terminal(measured(kind, est, lo, hi))} {level}"


def claims_lines(c: Comparison, width: int, only_changed: bool, markdown: bool) -> list[str]:
    out = ["## Claims" if markdown else "Claims:"]
    if c.claims is None or c.claims.empty:
        return out + _wrap(c.claims_note or "none compared", width) + [""]
    changed = int(c.claims["changed"].sum())
    out += _wrap(f"{len(c.claims)} claims judged on the same studies on both sides, {changed} with a different "
                 "verdict in B.", width)
    rows = c.claims[c.claims["changed"]] if only_changed else c.claims
    for _, r in rows.iterrows():
        flag = "  CHANGED" if r["changed"] else ""
        out += _wrap(f"{r['id']}: {r['verdict_a']} -> {r['verdict_b']}{flag}", width)
        out += _wrap(f"A {claim_side(r, 'a')}; B {claim_side(r, 'b')}", width, "      ")
    return [*out, ""]


def render(c: Comparison, width: int = 100, sort: str = "cell", only_changed: bool = False,
           markdown: bool = False, claims: bool = True) -> str:
    """The comparison as text no wider than `width` (cell labels shortened to fit), or markdown."""
    out = _wrap(("# " if markdown else "") + f"Compare A = {c.a_label}", width, "")
    out += [*_wrap(f"with B = {c.b_label}", width, "" if markdown else " " * 6), ""]
    out += gate_lines(c, width)
    for note in c.notes:
        out += _wrap(note, width, "")
    out.append("")
    for study in c.cells:
        out += study_lines(c, study, width, sort, only_changed, markdown)
    if claims:
        out += claims_lines(c, width, only_changed, markdown)
    return "\n".join(out).rstrip() + "\n"


def _records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    if df is None or df.empty:
        return []
    return json.loads(df.to_json(orient="records"))


def to_json(c: Comparison, sort: str = "cell", only_changed: bool = False) -> str:
    """One JSON document: the level, the gate and its result, per study its cells (ordered as the text),
    the campaign level's sources and the mean changes, and the claims."""
    reg = c.regressions()
    studies = {}
    for s, t in c.cells.items():
        studies[s] = {
            "matched": c.matched(s),
            "a_only": int((t["side"] == "A only").sum()) if not t.empty else 0,
            "b_only": int((t["side"] == "B only").sum()) if not t.empty else 0,
            "campaign_level": {m: {"a": a, "b": b} for m, (a, b) in c.sources.get(s, {}).items()},
            "reference": c.references.get(s, ""),
            "overall": {m: {**o.__dict__, "level": DEFAULT_CONFIDENCE, "gated": False}
                        for m, o in c.overall.get(s, {}).items()},
            "cells": _records(ordered(t, sort, only_changed)),
        }
    body: dict[str, Any] = {
        "a": c.a_label, "b": c.b_label, "level": c.level, "cell_level": c.cell_level, "intervals": c.n_intervals,
        "gate": {"fail_above_pct": c.fail_above, "passed": None if c.fail_above is None else reg.empty,
                 "regressions": _records(reg)},
        "studies": studies, "claims": _records(c.claims), "claims_note": c.claims_note, "notes": c.notes,
    }
    return json.dumps(body, indent=2, sort_keys=True) + "\n"


def to_csv(c: Comparison) -> str:
    """The cells of every study, one row per cell (a ``study`` column)."""
    return c.cells_table().to_csv(index=False)
