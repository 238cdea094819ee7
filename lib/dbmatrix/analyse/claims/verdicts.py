"""The verdict rule: one for the whole paper (see :mod:`dbmatrix.analyse.claims`).

Three-way regions: with [L, U] the interval, Z the closed no-effect zone and A the claimed region (the
band beyond Z on the claimed side; a "within" claim's band), **agree** iff [L, U] lies inside A,
**disagree** iff [L, U] does not meet A, **inconclusive** otherwise. A and its complement are disjoint, so
an agree on one interval and a disagree on another need disjoint intervals. :data:`RULE` says it in words
and enters the registration digest (:mod:`.registration`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dbmatrix.analyse.claims.model import BOUNDS, DEFAULT_MARGIN, MARGINS, Claim, PremiseCheck
from dbmatrix.analyse.contrasts import Estimate
from dbmatrix.spec.experiment import MAX_CAMPAIGNS  # the rule's (RULE["looks"]), the runner's too
from dbmatrix.spec.factors import DATASET_FACTORS, factor_word

VERDICTS = ("agree", "disagree", "depends", "inconclusive", "not identified", "not tested")  # classes
TESTS = ("direction", "about", "within")
DECIDED = ("agree", "disagree", "depends")  # classes more runs do not change by noise alone
DEPENDS = "depends on"  # "depends on <factor words>": decided conditions that differ (class "depends")
# the factor's name in a "depends on" verdict where its short word (the tables' "block 4k") reads badly alone
DEPENDS_WORDS = {"block_size": "block size", "cache_pct": "cache size"}


def depends_word(factor: str) -> str:
    """'block size' for block_size in "depends on block size"; the factor's word otherwise."""
    return DEPENDS_WORDS.get(factor, factor_word(factor))
UNBOUNDED = "unbounded"
MEASURED_SPLIT = "pairs differ (measured, no CI)"  # an older rule's reason (kept for logs that have it)
PER_PAIR = "per pair (measured, no CI)"  # the reason of a measured quantity judged per pair
# an interval beyond the side a stand-in bounds: it cannot contradict the claim there, and more runs of the
# same stand-in cannot change that (dbmatrix.analyse.claims.looks treats it as not decidable by runs)
STAND_IN_BOUND = "beyond the stand-in's bound"
HETEROGENEITY_ALPHA = 0.05  # "campaigns differ" below it: a consistency check, never a veto
CONFIDENCE = 0.95

# The rule as plain data: its digest enters every campaign's registration (registration.registry, "rule").
RULE: dict[str, Any] = {
    "name": "three-way regions",
    "version": 2,
    "confidence": CONFIDENCE,
    "zone": "Z: the closed no-effect zone, 1/(1+m) .. 1+m for a ratio, -m .. m for a difference (m: the "
            "claim's margin, else its metric's)",
    "margins": {"per_metric": dict(sorted(MARGINS.items())), "default": DEFAULT_MARGIN},
    "region": {"direction": "A: the band beyond Z on the claimed side, (z_hi, hi] within [lo, hi] for an "
                            "increase, [lo, z_lo) for a decrease",
               "about": "A: as for direction (the band around the stated value, beyond Z)",
               "within": "A: the band, closed"},
    "verdicts": {"agree": "[L, U] inside A", "disagree": "[L, U] does not meet A", "inconclusive": "otherwise",
                 "infinite": "an infinite bound never agrees; it disagrees when its finite side proves that "
                             "[L, U] misses A"},
    "bounds": {"upper": "the stand-in's ratio is at least the real one: disagree iff [L, U] lies below A, agree "
                        "iff inside A (the real effect is at most U), inconclusive and not decidable by runs "
                        "when [L, U] reaches above A",
               "lower": "the mirror: disagree iff [L, U] lies above A, agree iff inside A (the real effect is "
                        "at least L), not decidable by runs when [L, U] reaches below A"},
    "premises": "a premise not met or uncertain gives 'not tested' naming it; the estimate is shown",
    "combination": {"all": "all agree: agree; all disagree: disagree; some agree and some disagree: 'depends "
                           "on <factor>'; else inconclusive",
                    "any": "agree iff any agrees; disagree iff all disagree; else inconclusive",
                    "largest": "judge [max L_c, max U_c] (min, min for a decrease), which holds the largest "
                               "effect when each interval holds its own; measured quantities: the largest "
                               "value",
                    "primary": "the primary condition's verdict; the others reported as sensitivity"},
    "looks": {"unit": "campaign: a study with a campaign allocation (spec campaigns:) is judged after each",
              "max_campaigns": MAX_CAMPAIGNS, "alpha": 1 - CONFIDENCE, "spending": "obrien-fleming (Lan-DeMets)",
              "boundaries": "exact group-sequential, canonical joint distribution with equally informative "
                            "campaigns (Armitage-McPherson-Rowe recursion); look k's interval at the boundary's "
                            "nominal level with the t quantile on its own df",
              "beyond_max": "the last look's level; a claim open there is inconclusive at the registered maximum"},
    "campaigns": "one decision on the pooled interval; each campaign's own verdict and a heterogeneity F test "
                 f"(alpha {HETEROGENEITY_ALPHA:g}) are consistency checks",
    "steady_state": "throughput claims use the MSER-trimmed steady window (tps_steady); counter and histogram "
                    "metrics the whole window",
}


def verdict_class(v: str) -> str:
    """The class of a verdict (:data:`VERDICTS`): "depends on ..." is "depends", the others themselves."""
    return "depends" if v.startswith(DEPENDS) else v


# ============================================================================ regions


def zone(null: float, margin: float) -> tuple[float, float]:
    """The equivalence zone of no effect around `null` (1: a ratio, 1/(1+m) .. 1+m; 0: -m .. m)."""
    return (1 / (1 + margin), 1 + margin) if null == 1.0 else (null - margin, null + margin)


def upward(band: tuple[float, float], null: float) -> bool:
    """Whether a band claims an increase (above the null) rather than a decrease."""
    lo, hi = band
    return (lo + hi) / 2 > null if np.isfinite(hi) and np.isfinite(lo) else lo >= null


@dataclass(frozen=True)
class Region:
    """An interval of the real line with open or closed ends (the claimed region A)."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False

    def empty(self) -> bool:
        return self.lo > self.hi or (self.lo == self.hi and (self.lo_open or self.hi_open))

    def below(self, x: float) -> bool:
        """x lies below every point of the region."""
        return x < self.lo or (x == self.lo and self.lo_open)

    def above(self, x: float) -> bool:
        """x lies above every point of the region."""
        return x > self.hi or (x == self.hi and self.hi_open)

    def contains(self, x: float) -> bool:
        return not (self.below(x) or self.above(x))

    def text(self) -> str:
        return f"{'(' if self.lo_open else '['}{fmt(self.lo)}, {fmt(self.hi)}{')' if self.hi_open else ']'}"


def claimed_region(band: tuple[float, float], test: str = "direction", null: float = 1.0,
                   margin: float = 0.0) -> Region:
    """A: the band beyond the no-effect zone on the claimed side ("direction", "about"), the band itself
    ("within"); closed where the band is, open at the zone's edge."""
    if test not in TESTS:
        raise ValueError(f"test: {test!r}; allowed: {', '.join(TESTS)}")
    lo, hi = band
    if test == "within":
        return Region(lo, hi)
    z_lo, z_hi = zone(null, margin)
    if upward(band, null):
        return Region(z_hi, hi, lo_open=True) if z_hi >= lo else Region(lo, hi)
    return Region(lo, z_lo, hi_open=True) if z_lo <= hi else Region(lo, hi)


# ============================================================================ one interval


def verdict_reason(ci_lo: float, ci_hi: float, band: tuple[float, float], test: str = "direction",
                   null: float = 1.0, margin: float = 0.0, bound: str = "") -> tuple[str, str]:
    """The rule for one interval [ci_lo, ci_hi] and why ("" when the interval speaks for itself).
    `bound`: "upper" when the interval is of a stand-in whose ratio is at least the real one's (a disagree
    only below A; above A not decidable), "lower" the mirror. Raises ValueError for an empty A."""
    if bound not in BOUNDS:
        raise ValueError(f"bound: {bound!r}; allowed: {', '.join(map(repr, BOUNDS))}")
    a = claimed_region(band, test, null, margin)
    if a.empty():
        raise ValueError(f"the claimed region {a.text()} is empty: band {band} lies inside the no-effect zone")
    if math.isnan(ci_lo) or math.isnan(ci_hi):
        return "inconclusive", ""
    below, above = a.below(ci_hi), a.above(ci_lo)  # the whole interval below / above A
    if bound == "upper":
        if below:
            return "disagree", "as an upper bound: even the faster stand-in stays below the claimed region"
        if a.above(ci_hi):
            return "inconclusive", (f"{STAND_IN_BOUND}: the interval reaches above the claimed region, where a "
                                    "stand-in faster than the real medium cannot contradict the claim (the real "
                                    f"effect is at most {fmt(ci_hi)}); more runs cannot decide it")
    elif bound == "lower":
        if above:
            return "disagree", "as a lower bound: even the slower stand-in stays above the claimed region"
        if a.below(ci_lo):
            return "inconclusive", (f"{STAND_IN_BOUND}: the interval reaches below the claimed region, where a "
                                    "stand-in slower than the real medium cannot contradict the claim (the real "
                                    f"effect is at least {fmt(ci_lo)}); more runs cannot decide it")
    elif below or above:
        return "disagree", ""
    if np.isfinite(ci_lo) and np.isfinite(ci_hi) and a.contains(ci_lo) and a.contains(ci_hi):
        why = {"upper": f"as an upper bound: the real medium's effect is at most {fmt(ci_hi)}",
               "lower": f"as a lower bound: the real medium's effect is at least {fmt(ci_lo)}"}
        return "agree", why.get(bound, "")
    return "inconclusive", ""


def verdict(ci_lo: float, ci_hi: float, band: tuple[float, float], test: str = "direction",
            null: float = 1.0, estimate: float | None = None, margin: float = 0.0, bound: str = "") -> str:
    """The verdict of :func:`verdict_reason`. `estimate` is not read (the rule reads the interval only; the
    parameter stays for callers of the older rule)."""
    return verdict_reason(ci_lo, ci_hi, band, test, null, margin, bound)[0]


def claim_verdict(claim: Claim, lo: float, hi: float) -> tuple[str, str]:
    """:func:`verdict_reason` with the claim's band, test, null, margin and bound."""
    return verdict_reason(lo, hi, claim.band, claim.test, claim.null, claim.equivalence, claim.bound)


def not_by_runs(reason: str) -> bool:
    """A reason that says more runs cannot decide the verdict (a stand-in's bound; a measured quantity)."""
    return reason.startswith((STAND_IN_BOUND, MEASURED_SPLIT))


# ============================================================================ several conditions


@dataclass(frozen=True)
class Condition:
    """One condition a claim is judged at: a level of its ``per`` factors, or a measured quantity's pair.
    ``level``: the per factors' levels (``{factor: level}``), or the pair's label."""

    label: str  # "medium tmpfs"
    level: Mapping[str, Any] | str
    estimate: float
    ci_lo: float
    ci_hi: float
    verdict: str
    reason: str = ""


def _same(a: Any, b: Any) -> bool:
    if str(a) == str(b):
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def is_primary(claim: Claim, c: Condition) -> bool:
    """Whether a condition is the claim's primary one (a level of its first ``per`` factor, or every
    factor of a mapping ``primary``)."""
    want = claim.primary
    if isinstance(c.level, str):
        return _same(c.level, want) or c.label.endswith(f" {want}")
    if isinstance(want, Mapping):
        return all(f in c.level and _same(c.level[f], v) for f, v in want.items())
    return bool(claim.per) and claim.per[0] in c.level and _same(c.level[claim.per[0]], want)


def _listed(conds: Sequence[Condition]) -> str:
    return "; ".join(f"{c.label} {c.verdict}" for c in conds)


def bounded_outcome(reason: str) -> str:
    """"cannot agree" (or "cannot disagree") where an inconclusive claim's reason says so (:func:`_bounded`);
    "" otherwise."""
    head = reason.split(":", 1)[0]
    return head if head in ("cannot agree", "cannot disagree") else ""


def _bounded(claim: Claim, conds: Sequence[Condition], words: str) -> str:
    """An "all" claim left inconclusive although some of its conditions are decided: which outcomes the
    open ones can still give (a condition that disagrees already rules out agree, and one that agrees rules
    out disagree), so a reader sees the decided part instead of a bare "inconclusive"."""
    decided = [c for c in conds if c.verdict in ("agree", "disagree")]
    if claim.combine != "all" or not decided or len({c.verdict for c in decided}) > 1:
        return ""
    said = decided[0].verdict
    other = "agree" if said == "disagree" else "disagree"
    open_ = [c.label for c in conds if c not in decided]
    return (f"cannot {other}: {said} at {', '.join(c.label for c in decided)}; "
            f"{', '.join(open_)} open, between {said} and {DEPENDS} {words}")


def combine(claim: Claim, conds: Sequence[Condition], words: str
            ) -> tuple[str, str, tuple[float, float, float] | None]:
    """The claim's verdict over its conditions by its ``combine`` rule (:data:`RULE`), why, and the
    interval judged (estimate, lo, hi) where one interval is ("largest", "primary"; None otherwise).
    `words`: the factors that vary between the conditions, for "depends on <words>"."""
    if not conds:
        return "inconclusive", "no condition estimated", None
    vs = [c.verdict for c in conds]
    open_ = [c for c in conds if c.verdict not in ("agree", "disagree")]
    fixed = bool(open_) and all(not_by_runs(c.reason) for c in open_)
    stuck = f"{STAND_IN_BOUND} at {', '.join(c.label for c in open_)}" if fixed else ""
    if claim.combine in ("all", "any"):
        if claim.combine == "all":
            v = ("agree" if all(x == "agree" for x in vs) else "disagree" if all(x == "disagree" for x in vs)
                 else f"{DEPENDS} {words}" if "agree" in vs and "disagree" in vs else "inconclusive")
        else:
            v = ("agree" if "agree" in vs else "disagree" if all(x == "disagree" for x in vs) else "inconclusive")
        why = (_listed(conds) if v.startswith(DEPENDS)
               else (stuck or _bounded(claim, conds, words)) if v == "inconclusive"
               else "; ".join(f"{c.label}: {c.reason}" for c in conds if c.reason and v == c.verdict))
        return v, why, None
    if claim.combine == "primary":
        main = [c for c in conds if is_primary(claim, c)]
        if not main:
            return "not tested", f"the primary condition ({claim.primary}) was not among the study's levels", None
        p = main[0]
        rest = [c for c in conds if c is not p]
        why = "; ".join([*([p.reason] if p.reason else []),
                         *([f"sensitivity: {_listed(rest)}"] if rest else [])])
        return p.verdict, why, (p.estimate, p.ci_lo, p.ci_hi)
    # largest: the interval that holds the largest effect when each interval holds its own
    up = upward(claim.band, claim.null)
    los = [-math.inf if math.isnan(c.ci_lo) else c.ci_lo for c in conds]  # no interval: (-inf, inf)
    his = [math.inf if math.isnan(c.ci_hi) else c.ci_hi for c in conds]
    lo, hi = (max(los), max(his)) if up else (min(los), min(his))
    ests = [c.estimate for c in conds if np.isfinite(c.estimate)]
    est = (max(ests) if up else min(ests)) if ests else math.nan
    top = [c for c in conds if c.estimate == est]
    v, why = claim_verdict(claim, lo, hi)
    said = (f"judged: the {'largest' if up else 'smallest'} of {len(conds)} conditions"
            + (f" ({top[0].label})" if top else "") + f", [{fmt(lo)}, {fmt(hi)}]")
    return v, (f"{why}; {said}" if why else said), (est, lo, hi)


def combine_words(claim: Claim, others: Sequence[str] = ()) -> str:
    """How the claim's conditions combine, in words ("" for a claim judged at one condition); `others`: the
    levels beside the primary one, named as its sensitivity check."""
    if claim.combine == "primary":
        f = factor_word(claim.per[0]) if claim.per else ""
        return f"primary: {f} {claim.primary}".replace("  ", " ") + (
            f"; {', '.join(others)} as sensitivity" if others else "")
    return {"all": "all conditions", "any": "any condition", "largest": "the largest condition"}[claim.combine]


# ============================================================================ a claim's verdict


def _pair_words(claim: Claim, labels: Sequence[str]) -> str:
    """The dataset factors a measured quantity's pairs differ in (from the pairs' labels)."""
    factors = [f for f in DATASET_FACTORS if f != claim.factor and f not in claim.at]
    hit = [depends_word(f) for f in factors
           if any(p.startswith(factor_word(f) + " ") for lab in labels for p in lab.split(", "))]
    return ", ".join(hit) or "the pair"


def _deterministic(claim: Claim, est: Estimate) -> tuple[str, str]:
    """A measured quantity (dataset sizes per pair): each value judged on its own (a degenerate interval),
    combined by the claim's rule (:func:`combine`)."""
    conds = [Condition(label, label, v, v, v, *claim_verdict(claim, v, v)) for label, v in est.values]
    shown = "; ".join(f"{c.label}: {fmt(c.estimate)} {c.verdict}" for c in conds)
    if len(conds) == 1:
        return conds[0].verdict, f"{PER_PAIR}: {shown}" + (f"; {conds[0].reason}" if conds[0].reason else "")
    v, why, judged = combine(claim, conds, _pair_words(claim, [c.label for c in conds]))
    if claim.combine == "largest" and judged is not None:
        why = f"judged: the {'largest' if upward(claim.band, claim.null) else 'smallest'} value, {fmt(judged[0])}"
    extra = "" if not why or v.startswith(DEPENDS) else f"; {why}"
    return v, f"{PER_PAIR}: {shown}{extra}"


def with_premises(v: str, reason: str, premises: Sequence[PremiseCheck]) -> tuple[str, str]:
    """A premise not met or uncertain makes the claim "not tested", naming the premise's measured value
    (the estimate stays shown); otherwise the verdict stands."""
    failed = [f"premise not met: {c.value}" for c in premises if c.met is False]
    unsure = [f"premise uncertain: {c.value}" for c in premises if c.met is None and c.uncertain]
    if failed or unsure:
        return "not tested", "; ".join(failed + unsure)
    return v, reason


def judge(claim: Claim, est: Estimate, premises: Sequence[PremiseCheck] = ()) -> tuple[str, str]:
    """The verdict of the module docstring for one estimate and its reason ("" when the interval speaks
    for itself). One decision: campaigns are consistency checks (:func:`heterogeneity_text`), never a veto."""
    if est.values:
        v, reason = _deterministic(claim, est)
    else:
        v, reason = claim_verdict(claim, est.ci_lo, est.ci_hi)
        if not (np.isfinite(est.ci_lo) and np.isfinite(est.ci_hi)):
            bounded = [x for x in (est.ci_lo, est.ci_hi) if np.isfinite(x)]
            said = UNBOUNDED if bounded or np.isfinite(est.estimate) else "no interval (too few repetitions)"
            reason = f"{reason}; {said}" if reason else said
    return with_premises(v, reason, premises)


def heterogeneity_text(h: tuple[float, float, float, float] | None) -> str:
    """The campaigns' consistency test in words ("" when not tested)."""
    if h is None or any(x is None or not np.isfinite(x) for x in h):
        return ""
    f, d1, d2, p = h
    word = "campaigns differ" if p < HETEROGENEITY_ALPHA else "campaigns consistent"
    shown = "p < 0.001" if p < 0.001 else f"p = {p:.2g}"
    return f"{word} (F = {f:.3g} on {d1:.3g} and {d2:.3g} df, {shown})"


def fmt(x: float) -> str:
    """A number of a basis or reason: 3 significant digits; an unbounded side as inf (nan as --)."""
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.3g}" if np.isfinite(x) else "--"
