"""The paper's statement of the claims method, generated from the registry (issues 25 and 38): estimates that
follow the design, the three-way verdict rule on the whole interval, one-sided stand-ins, how a claim's
conditions combine, campaigns as a consistency check, the equivalence margin of every metric a claim uses,
the premises and the rule for contrasts the design does not identify. No number in it is typed by hand:
margins, tolerances, levels, counts and the heterogeneity test's alpha come from
:mod:`dbmatrix.analyse.claims` (its registered :data:`~dbmatrix.analyse.claims.verdicts.RULE`). Written as
``paper/generated/claims-method.tex``; the paper's method section ``\\input``s it."""

from __future__ import annotations

from collections.abc import Sequence

from dbmatrix.analyse.claims.catalogue import CLAIMS
from dbmatrix.analyse.claims.model import MARGINS, Claim
from dbmatrix.analyse.claims.verdicts import CONFIDENCE, HETEROGENEITY_ALPHA, MAX_CAMPAIGNS, RULE
from dbmatrix.analyse.contrasts import METRIC_LABELS
from dbmatrix.analyse.shares import SHARE_CLIP
from dbmatrix.analyse.stats.group_sequential import CampaignLooks
from dbmatrix.analyse.stats.sequential import level_text
from dbmatrix.analyse.verdict_text import level_pct
from dbmatrix.spec.factors import factor_word

# The scale-out study's derived metrics in words (its estimators' names otherwise); publish-side so the verdict
# code, whose digest the campaigns record, stays as it was.
MARGIN_LABELS = {"scale_saturation": "throughput past the peak (one instance)",
                 "scale_p95_doubling": "clients under 0.5 ms p95, 2 / 1 instances",
                 "scale_peak_16_8": "peak throughput, 16 / 8 instances"}


def _esc(text: str) -> str:
    return text.replace("\\", "\\textbackslash{}").replace("%", "\\%").replace("_", "\\_").replace("&", "\\&")


def _margin(c: Claim) -> str:
    m = c.equivalence
    if c.kind == "difference":
        return f"$\\pm${m:g} points"
    return f"$\\pm${100 * m:g}\\,\\%"


PER_PAIR_METRIC = "data_physical_bytes"  # measured once per dataset: judged at each pair (claims.estimators)


def method_macros(claims: Sequence[Claim] = CLAIMS) -> dict[str, str]:
    """One macro per metric's margin (``\\claimsMargin<Metric>``), the counts the text quotes (claims per
    test, per combination rule, one-sided), the registered level and the heterogeneity test's alpha."""
    used = sorted({c.metric for c in claims if not c.not_tested})
    out = {}
    for metric in used:
        name = "".join(ch for ch in "".join(p.capitalize() for p in metric.split("_")) if ch.isalpha())
        c = next(c for c in claims if c.metric == metric)
        out[f"claimsMargin{name}"] = _margin(c) if metric in MARGINS or c.margin is not None else "--"
    tested = [c for c in claims if not c.not_tested]
    out["claimsNPerLevel"] = str(sum(1 for c in claims if c.per))
    out["claimsNPerPair"] = str(sum(1 for c in tested if c.metric == PER_PAIR_METRIC and not c.per))
    out["claimsNAbout"] = str(sum(1 for c in tested if c.test == "about"))
    out["claimsNWithin"] = str(sum(1 for c in tested if c.test == "within"))
    out["claimsNDirection"] = str(sum(1 for c in tested if c.test == "direction"))
    # judged at several conditions: per level of a factor, per dataset pair (a measured size), or combined
    several = [c for c in tested if c.per or c.combine != "all" or c.metric == PER_PAIR_METRIC]
    for rule in ("all", "any", "largest", "primary"):
        out[f"claimsNCombine{rule.capitalize()}"] = str(sum(1 for c in several if c.combine == rule))
    out["claimsNBound"] = str(sum(1 for c in tested if c.bound))
    out["claimsConfidence"] = f"{level_pct(float(RULE.get('confidence', CONFIDENCE)))}\\,\\%"
    out["claimsHeterogeneityAlpha"] = f"{HETEROGENEITY_ALPHA:g}"
    looks = CampaignLooks(MAX_CAMPAIGNS, 1 - CONFIDENCE)
    out["claimsMaxCampaigns"] = str(MAX_CAMPAIGNS)
    out["claimsLookLevels"] = ", ".join(
        f"{level_text(looks.confidence(k)).replace(' %', '')}\\,\\%" for k in range(1, MAX_CAMPAIGNS + 1))
    return out


def _primaries(claims: Sequence[Claim]) -> str:
    """The primary conditions the registry names ("pmemNoCache: medium ramblock"), grouped by condition."""
    by: dict[str, list[str]] = {}
    for c in claims:
        if c.combine == "primary" and not c.not_tested:
            where = f"{factor_word(c.per[0]) if c.per else ''} {c.primary}".strip()
            by.setdefault(where, []).append(c.id)
    return "; ".join(f"{_esc(w)} for {', '.join(_esc(i) for i in ids)}" for w, ids in sorted(by.items()))


def _rule_text(key: str) -> str:
    """A registered rule's words (:data:`~dbmatrix.analyse.claims.verdicts.RULE`), LaTeX-escaped."""
    v = RULE.get(key, "")
    return _esc(v) if isinstance(v, str) else ""


def render_claims_method(claims: Sequence[Claim] = CLAIMS) -> str:
    """The method paragraphs and a table of the margins per metric (LaTeX, no hand-typed numbers)."""
    macros = method_macros(claims)
    primaries = _primaries(claims)
    steady = _rule_text("steady_state")
    lines = ["% Generated by dbmatrix (publish.claims_method); do not edit. \\input it in the method section.",
             *(f"\\providecommand{{\\{k}}}{{{v}}}" for k, v in macros.items()),
             "\\paragraph{Estimates that follow the design.} Every claim's contrast comes from the means of the "
             "cells it compares, on the metric's logarithm: where the design is a full factorial, from the cell "
             "means themselves (a saturated model), never from a reduced model that drops interactions the "
             "design measured. A reduced model is fitted only to a fractional design, after a lack-of-fit test, "
             "and a contrast whose left-out interactions are significant is refused with the reason. The "
             "interval's variance comes from the components at every level that varies: the runs within a cell, "
             "each dataset load (a fresh load differs between block sizes or compressions) and each campaign "
             "(campaign $\\times$ cell), random effects~\\cite{laird1982} estimated by their mean squares (Henderson's "
             "method III~\\cite{henderson1953}) rather than "
             "floored at another level's, and a cell whose campaign $\\times$ cell residuals stand out (Cochran's "
             "$C$) keeps its own variance instead of widening every contrast. The $t$ takes the "
             "Satterthwaite~\\cite{satterthwaite1946} degrees of freedom of the combination it uses (with one "
             "campaign, Welch--Satterthwaite over the "
             "cells' own run variances): a variance estimated on one degree of freedom takes the $t$ on one "
             "degree of freedom, never the runs' larger one. The Galera and scale-out claims use the same "
             "estimates on their runs; the basis of each claim says which components it rests on."
             + (f" Steady state: {steady}." if steady else ""),
             "\\paragraph{Intervals that respect their metric.} Ratios are estimated and bounded on the log "
             "scale, so they are positive; an interval that is not finite is reported as \\emph{unbounded}. "
             "Shares are estimated on the logit scale (a run's share clipped to "
             f"{100 * SHARE_CLIP:g}--{100 - 100 * SHARE_CLIP:g}\\,\\%) and a difference of two shares gets the "
             "MOVER (Newcombe) interval, which stays within $\\pm$100 points. A dataset size is measured once "
             "per dataset: it is reported and judged per pair of datasets, never as an interval.",
             "\\paragraph{The verdict rule: three outcomes, each about the whole interval.} Each claim states "
             "its band as the seed states it, and around no effect lies the zone of no effect, the metric's "
             "margin (Table~\\ref{tab:claims-margins}). The claimed region is the part of the band beyond that "
             "zone on the claimed side for an effect in a direction (``up to $X$'', ``grows'', "
             "\\claimsNDirection{} claims) and for ``about $X$'' (\\claimsNAbout{} claims, two-sided around $X$ "
             "with a declared tolerance), and the band itself for ``no effect'' or a bounded effect "
             "(\\claimsNWithin{} claims). A claim \\emph{agrees} when its whole interval lies inside the claimed "
             "region, \\emph{disagrees} when the whole interval misses it (it lies in the zone of no effect or "
             "outside the band), and is \\emph{inconclusive} otherwise. The estimate alone never decides: one "
             "estimate cannot agree while imprecise and disagree once precise, and an agreement and a "
             "disagreement need disjoint intervals. A study run in campaigns is judged after every campaign, at "
             "most \\claimsMaxCampaigns{} of them: look $k$ judges the pooled interval at the level of the "
             "exact group-sequential boundary of its look (O'Brien--Fleming-type alpha spending over the "
             "campaigns, boundaries from the joint normal law of the looks; \\claimsLookLevels{} from the "
             "first look to the last), so that the intervals of all looks together cover the true values "
             "with probability \\claimsConfidence; a claim still open at the last look is inconclusive at the "
             "registered maximum. A study's first campaign is its first look, judged at the first of those levels; "
             "a single campaign of a study not run in campaigns (the quick profile) is judged at "
             "\\claimsConfidence{} (within one campaign, said as such), a campaign run until decided at its "
             "last look's level; every interval printed states its level.",
             "\\paragraph{Stand-ins that bound the real medium.} A stand-in faster than the medium it stands "
             "for (RAM for persistent memory: tmpfs, a RAM block device) bounds the real effect from above, so "
             "the \\claimsNBound{} claims that rest on one are judged one-sided: they disagree only when even the "
             "faster stand-in stays below the claimed region, and agree when its interval lies inside it (the real "
             "effect is then at most its upper end). An interval that reaches above the claimed region cannot "
             "contradict a claim that persistent memory is at most $X$ faster: it is inconclusive, and more runs "
             "of the same stand-in cannot change that."
             + (" A stand-in slower than the real medium is judged as the mirror image (it disagrees only when "
                "even it stays above the claimed region)." if any(c.bound == "lower" for c in claims) else ""),
             "\\paragraph{Conditions, combined by a registered rule.} A claim the seed makes over several "
             "conditions is judged at each of them (\\claimsNPerLevel{} claims at every level of a named factor, "
             "as their seeds measured them; \\claimsNPerPair{} measured dataset sizes at each pair of datasets), "
             "and the conditions combine by the rule registered with the claim: \\emph{all} conditions "
             "(\\claimsNCombineAll{} "
             "claims: agree when every condition agrees, disagree when every one disagrees), \\emph{any} "
             "condition (\\claimsNCombineAny{} claims: agree when one agrees), the \\emph{largest} "
             "(\\claimsNCombineLargest{} claims: the seed's own "
             "reading of ``up to'', judged on the interval from the largest lower to the largest upper end, which "
             "holds the largest effect), or a \\emph{primary} condition with the others as a sensitivity check "
             "(\\claimsNCombinePrimary{} claims" + (f": {primaries}" if primaries else "") + "). When decided "
             "conditions differ, one agreeing and another disagreeing, the verdict is \\emph{depends on} the "
             "factor, with each condition's own verdict in the table, not inconclusive.",
             "\\paragraph{Campaigns: one decision, and a consistency check.} With several campaigns the pooled "
             "interval, which includes the variation between campaigns, is the one decision, at one error rate "
             "for the claim. Each campaign's own estimate and verdict is a consistency check, beside an $F$ test "
             "of the campaigns' contrasts (``campaigns differ'' below $\\alpha$ = \\claimsHeterogeneityAlpha), "
             "never a second decision or a veto.",
             "\\paragraph{Identified contrasts, levels fixed in advance.} A claim is judged only on a contrast "
             "its study's design identifies: when its condition, or the interaction of the compared factor with "
             "a factor it would be averaged over, is aliased with another effect in a fractional design, the "
             "verdict is \\emph{not identified} and names the alias. The conditions a claim is judged at and the "
             "rule that combines them are fixed in the registry, never chosen by a test on the data.",
             "The ``about'' bands: " + "; ".join(
                 f"{_esc(c.id)} {(c.band[0] + c.band[1]) / 2:g} $\\pm$ {(c.band[1] - c.band[0]) / 2:g}"
                 for c in claims if c.test == "about" and not c.not_tested) + ".",
             "\\paragraph{Premises.} A premise is measured with an interval over the runs: \\emph{met} when the "
             "interval lies on the premise's side of its threshold, \\emph{not met} when it lies on the other "
             "side, and \\emph{uncertain} when it straddles the threshold. A premise not met or uncertain leaves "
             "the claim \\emph{not tested}, naming the premise and its measured value: the estimate is shown, "
             "never judged.",
             "\\paragraph{Registration.} The rule, the margins, each claim's conditions and their combination, "
             "and the premises enter a digest that every campaign records before its data; a claim judged under a "
             "definition recorded after its data is marked ``revised after data''.",
             "",
             "\\begin{table}[t]\\centering\\footnotesize",
             "\\caption{Equivalence margins of no effect per metric, declared in the claim registry before the "
             "data.}\\label{tab:claims-margins}",
             "\\begin{tabular}{ll}\\toprule", "Metric & Margin of no effect \\\\ \\midrule"]
    seen = set()
    for c in claims:
        if c.not_tested or c.metric in seen or c.kind == "share":
            continue
        seen.add(c.metric)
        label = MARGIN_LABELS.get(c.metric) or METRIC_LABELS.get(c.metric, c.metric)
        extra = f" ({factor_word(c.factor)})" if c.factor and c.metric in ("tps_ratio", "lat_avg_ratio") else ""
        lines.append(f"{_esc(label)}{_esc(extra)} & {_margin(c)} \\\\")
    lines += ["\\bottomrule\\end{tabular}", "\\end{table}", ""]
    return "\n".join(lines)
