"""The claims' verdicts (:class:`ClaimVerdicts`): every claim judged on the first study that can test it
(one row per claim) and each campaign's own estimate and verdict (one row per claim and campaign)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from dbmatrix.analyse.campaign_records import independence
from dbmatrix.analyse.claims.catalogue import CLAIMS
from dbmatrix.analyse.claims.estimators import estimate_all
from dbmatrix.analyse.claims.model import Claim, Evidence, PremiseCheck
from dbmatrix.analyse.claims.premises import check_premise
from dbmatrix.analyse.claims.registration import first_registration, registration_status
from dbmatrix.analyse.claims.verdicts import (
    CONFIDENCE,
    MAX_CAMPAIGNS,
    VERDICTS,
    Condition,
    combine,
    combine_words,
    depends_word,
    fmt,
    heterogeneity_text,
    is_primary,
    judge,
    verdict_class,
    with_premises,
)
from dbmatrix.analyse.contrasts import Estimate, NotIdentified, NotTestable
from dbmatrix.analyse.judgement import CAMPAIGN_COLUMNS, LEVEL_COLUMNS, VERDICT_COLUMNS, ClaimVerdicts, flips
from dbmatrix.analyse.stats.group_sequential import CampaignLooks
from dbmatrix.analyse.stats.sequential import final_look, level_text

__all__ = ["CAMPAIGN_COLUMNS", "LEVEL_COLUMNS", "VERDICT_COLUMNS", "ClaimVerdicts", "PerLevel", "evaluate", "flips",
           "level_claims", "share_pool", "verdict_counts"]

# ============================================================================ the table
# The table's columns and its container live with the judgement's files (dbmatrix.analyse.judgement), which
# every view reads; they are re-exported here for the estimating side.

@dataclass(frozen=True)
class PerLevel:
    """A claim judged at every level of its ``per`` factors (:func:`_per_levels`)."""

    verdict: str  # combined by the claim's rule (verdicts.combine), premises applied
    reason: str
    judged: tuple[float, float, float] | None  # the interval judged ("largest", "primary"), else None
    compared: str
    basis: str  # the per-level estimates and verdicts in words
    n: int  # the unique runs behind them
    campaigns: list[tuple[str, tuple[float, float, float] | None]]  # per campaign of the study: verdict, judged
    rows: list[dict[str, Any]]  # LEVEL_COLUMNS, campaign 0 pooled, and a ``note`` where a level is not estimable
    heterogeneity: str
    confidence: float
    combine: str  # the combination in words


def _per_levels(claim: Claim, ev: Evidence, checks: Sequence[PremiseCheck], confidence: float = 0.95) -> PerLevel:
    """The claim judged at every level of the factors it names in ``per`` (fixed in the registry, the same
    in every campaign), the levels combined by the claim's rule (:func:`dbmatrix.analyse.claims.verdicts.
    combine`), pooled and per campaign; premises applied to the combined verdicts and the level rows.
    NotIdentified when the design does not identify the comparison at a level."""

    parts: list[str] = []
    conds: list[Condition] = []
    ids: set[str] = set()
    n_max, compared, level_conf = 0, "", math.nan
    camps = ev.campaigns()
    camp_checks = [_campaign_checks(claim, ev, k, checks) for k in camps]
    per_camp: list[list[Condition]] = [[] for _ in camps]
    rows: list[dict[str, Any]] = []
    het: list[str] = []
    for where, combo, sub in _level_combos(claim, ev):
        try:
            e, per, _ = estimate_all(sub, ev, confidence)
        except NotIdentified as exc:
            raise NotIdentified(f"at {where}: {exc}") from None
        except NotTestable as exc:
            conds.append(Condition(where, combo, math.nan, math.nan, math.nan, "inconclusive",
                                   f"not estimable ({exc})"))
            parts.append(f"{where}: not estimable ({exc})")
            rows.append({**_level_row(claim.id, where, 0, None, "inconclusive"), "note": str(exc)})
            for cs in per_camp:
                cs.append(Condition(where, combo, math.nan, math.nan, math.nan, "inconclusive"))
            continue
        v, why = judge(sub, e)
        conds.append(Condition(where, combo, e.estimate, e.ci_lo, e.ci_hi, v, why))
        rows.append(_level_row(claim.id, where, 0, e, with_premises(v, why, checks)[0]))
        compared = compared or e.compared.split(" at ")[0]
        ids |= e.run_ids
        n_max = max(n_max, e.n)
        level_conf = level_conf if not math.isnan(level_conf) else e.confidence
        if h := heterogeneity_text(e.heterogeneity):
            het.append(f"{where}: {h}")
        parts.append(f"{where}: {fmt(e.estimate)} [{fmt(e.ci_lo)}, {fmt(e.ci_hi)}] {v}" + (f" ({why})" if why else ""))
        for k, cs in enumerate(per_camp):
            pk = per[k] if len(per) == len(per_camp) else None
            if pk is None:
                cs.append(Condition(where, combo, math.nan, math.nan, math.nan, "inconclusive"))
            else:
                cs.append(Condition(where, combo, pk.estimate, pk.ci_lo, pk.ci_hi, *judge(sub, pk)))
            if len(per_camp) > 1:
                rows.append(_level_row(claim.id, where, camps[k], pk,
                                       with_premises(cs[-1].verdict, "", camp_checks[k])[0]))
    notes = [r["note"] for r in rows if r.get("note")]
    if rows and len(notes) == len(rows):  # no level could be estimated: the study cannot test the claim
        raise NotTestable(notes[0] if len(set(notes)) == 1 else "; ".join(
            f"{r['level']}: {r['note']}" for r in rows))
    words = ", ".join(depends_word(f) for f in claim.per if f in ev.runs.columns)
    v, why, judged = combine(claim, conds, words)
    v, why = with_premises(v, why, checks)
    camp_v = []
    for cs, ck in zip(per_camp, camp_checks):
        cv, _, cj = combine(claim, cs, words)
        camp_v.append((with_premises(cv, "", ck)[0], cj))
    within = "; within one campaign" if len(camps) < 2 else f"; {len(camps)} campaigns pooled"
    others = [", ".join(str(x) for x in c.level.values()) for c in conds
              if isinstance(c.level, Mapping) and not is_primary(claim, c)]
    return PerLevel(v, why, judged, compared,
                    f"judged at every level of {words} (fixed in the claim): " + "; ".join(parts) + within,
                    len(ids) or n_max, camp_v, rows, "; ".join(het), level_conf,
                    combine_words(claim, others if claim.combine == "primary" else ()))


def level_claims(claim: Claim, ev: Evidence) -> list[tuple[str, Claim]]:
    """The claim at every level of the factors it names in ``per``, as :func:`evaluate` judges it: one
    (words, claim with those levels held and ``per`` empty) per combination present in the study's runs; a
    family spec ("emulated:pmem") in the compared levels or in ``at`` expands to its members only. Raises
    NotTestable when the metric or a ``per`` factor is missing (a sequential re-estimate can loop over these)."""
    from dbmatrix.analyse.contrasts import level_product, positive_values, resolve_level
    from dbmatrix.spec.factors import factor_unit, factor_word

    if claim.kind != "difference":
        data = positive_values(ev.runs, claim.metric)
    else:  # shares of time: 0 is a value (tmpfs has no iowait)
        data = ev.runs[pd.to_numeric(ev.runs[claim.metric], errors="coerce").notna()] \
            if claim.metric in ev.runs.columns else ev.runs.iloc[0:0]
    if data.empty:
        raise NotTestable(f"{claim.metric} was not measured")
    held = {f: resolve_level(data, f, v) for f, v in claim.at.items() if f not in claim.per}
    for f, v in held.items():
        data = data[data[f].astype(str) == str(v)]
    levels = {f: _per_family(claim, data, f, ev.level_order.get(f)) for f in claim.per if f in data.columns}
    if not levels:
        raise NotTestable(f"no {', '.join(claim.per)} column in the runs")
    return [(", ".join(f"{factor_word(f)} {v}{factor_unit(f)}" for f, v in combo.items()), _at_level(claim, combo))
            for combo in level_product(levels)]


def _level_combos(claim: Claim, ev: Evidence) -> list[tuple[str, dict[str, Any], Claim]]:
    """:func:`level_claims` with each combination's levels (``{factor: level}``), for the primary level."""
    out = []
    for where, sub in level_claims(claim, ev):
        combo = {f: (getattr(sub, _family_side(claim)) if f == claim.factor else sub.at[f]) for f in claim.per
                 if f == claim.factor or f in sub.at}
        out.append((where, combo, sub))
    return out


def _family(spec: Any) -> bool:
    """A level spec that names several levels: ``emulated:<device>`` (every medium emulating it) or
    ``native`` (every medium emulating nothing)."""
    return isinstance(spec, str) and (spec.startswith("emulated:") or spec == "native")


def _per_family(claim: Claim, data: pd.DataFrame, factor: str, order: Sequence[Any] | None) -> list[Any]:
    """The levels a claim is judged at for a factor in ``per``: every level present, or, for the compared
    factor or a factor held in ``at`` by a family spec ("emulated:pmem"), the levels of that family only."""
    from dbmatrix.analyse.contrasts import ordered_levels, resolve_level
    from dbmatrix.analyse.stats import level_key

    present = ordered_levels(data[factor], order)
    if factor == claim.factor:
        spec = getattr(claim, _family_side(claim))
    elif factor in claim.at:
        spec = claim.at[factor]
    else:
        return present
    if not _family(spec):
        return [resolve_level(data, factor, spec)]
    if "emulated" not in data.columns:
        raise NotTestable("the runs do not record which media are emulated")
    emu = data.groupby(data[factor].map(level_key), sort=False)["emulated"].first()

    def text(v: Any) -> str:
        return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)

    hits = [lv for lv in present if (not text(emu.get(level_key(lv))) if spec == "native"
                                     else text(emu.get(level_key(lv))).startswith(spec.split(":", 1)[1]))]
    if not hits:
        raise NotTestable(f"{factor}: no level {spec}")
    return hits


def _at_level(claim: Claim, combo: dict[str, Any]) -> Claim:
    """The claim at one combination of its ``per`` levels: the compared factor's family side set to the
    level, the other factors held there."""
    held = {f: v for f, v in combo.items() if f != claim.factor}
    sub = replace(claim, at={**claim.at, **held}, per=())
    if claim.factor in combo:
        sub = replace(sub, **{_family_side(claim): combo[claim.factor]})
    return sub


def _family_side(claim: Claim) -> str:
    """Which compared level ("a" or "b") names the family a claim is judged per level of: the emulated
    device ("emulated:pmem" against "native"), else whichever is a family."""
    for side in ("a", "b"):
        if isinstance(getattr(claim, side), str) and getattr(claim, side).startswith("emulated:"):
            return side
    return "a" if _family(claim.a) else "b"


def _level_row(claim_id: str, level: str, campaign: int, e: Estimate | None, v: str) -> dict[str, Any]:
    return {"id": claim_id, "level": level, "campaign": campaign,
            "estimate": e.estimate if e is not None else math.nan, "ci_lo": e.ci_lo if e is not None else math.nan,
            "ci_hi": e.ci_hi if e is not None else math.nan, "verdict": v}


def evaluate(evidence: Sequence[Evidence], claims: Sequence[Claim] = CLAIMS,
             confidence: float | None = None) -> ClaimVerdicts:
    """Per claim: the first study (in the claim's preferred order of study kinds, then the order given)
    that can test it, its pooled estimate with its interval (``confidence``: the level), the premises with
    their measured values, the verdict (one decision, on the pooled interval), the campaigns' consistency
    test (``heterogeneity``) and how its conditions combine (``combine``), else "not tested" and why; and
    per claim and campaign that campaign's estimate and verdict (a consistency check).

    A study whose campaign records say it was run until decided (``dbmatrix run --until-decided``) is
    judged at its final look's level, and the basis says so (:func:`dbmatrix.analyse.stats.sequential.
    final_look`); `confidence` given: every interval at that level (a look of :mod:`dbmatrix.decide`)."""
    several = any(len(e.hosts()) > 1 for e in evidence)
    n_camp = max([len(e.campaigns()) for e in evidence if not e.runs.empty] or [1])
    rows: list[dict[str, Any]] = []
    camp_rows: list[dict[str, Any]] = []
    level_rows: list[dict[str, Any]] = []
    for c in claims:
        j = _Judged(_blank_row(c, several), _blank_campaigns(c, n_camp), [])
        _judge_claim(j, c, evidence, several, confidence)
        _own_campaigns(j, evidence)
        rows.append(j.row)
        camp_rows += j.campaigns.values()
        level_rows += j.levels
    columns = [*VERDICT_COLUMNS, *(["hosts"] if several else [])]
    return ClaimVerdicts(pd.DataFrame(rows, columns=columns), pd.DataFrame(camp_rows, columns=CAMPAIGN_COLUMNS),
                         pd.DataFrame(level_rows, columns=[*LEVEL_COLUMNS, "note"]))


@dataclass
class _Judged:
    """One claim as :func:`evaluate` fills it: its row, its per-campaign rows (campaign -> row) and level rows."""

    row: dict[str, Any]
    campaigns: dict[int, dict[str, Any]]
    levels: list[dict[str, Any]]


def _blank_row(c: Claim, several: bool) -> dict[str, Any]:
    """A claim's row before any study tested it: "not tested", no estimate."""
    return {"id": c.id, "seed": c.seed, "where": c.where, "claim": c.text, "metric": c.metric,
            "kind": c.kind, "test": c.test, "band_lo": c.band[0], "band_hi": c.band[1],
            "study": "", "compared": "", "basis": "", "n": 0, "estimate": math.nan,
            "ci_lo": math.nan, "ci_hi": math.nan, "verdict": "not tested", "reason": "",
            "stand_in": c.stand_in, "premise": "; ".join(p.text for p in c.premises),
            "premise_value": "", "premise_met": "", "campaigns": 0, "campaign_level": "",
            "registration": "", "heterogeneity": "", "confidence": math.nan,
            "combine": combine_words(c) if c.per else "", **({"hosts": ""} if several else {})}


def _own_campaigns(j: _Judged, evidence: Sequence[Evidence]) -> None:
    """Keep the campaign rows of the campaigns the claim's studies ran: a study with 4 campaigns in a build
    whose oldest study has 6 has no campaigns 5 and 6 to report "no estimate" for."""
    studies = set(str(j.row.get("study") or "").split("+")) - {""}
    ks = {k for e in evidence if e.experiment in studies and not e.runs.empty for k in e.campaigns()}
    if ks:
        j.campaigns = {k: v for k, v in j.campaigns.items() if k in ks}


def _blank_campaigns(c: Claim, n_camp: int) -> dict[int, dict[str, Any]]:
    return {k: {"id": c.id, "campaign": k, "estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan,
                "verdict": ""} for k in range(1, n_camp + 1)}


def _pool(c: Claim, evidence: Sequence[Evidence]) -> list[Evidence]:
    """The studies that may test a claim, in its preferred order of kinds, a study whose spec names the claim
    (``claims:``, registered for it) before the others of its kind; a share claim pools every standalone run
    of the build (stability is a property of them all)."""
    pool = [e for k in c.sources for e in sorted((e for e in evidence if e.kind == k),
                                                 key=lambda e: c.id not in e.registered)]
    if c.kind != "share" or not pool:
        return pool
    return [share_pool(pool)]


def share_pool(pool: Sequence[Evidence]) -> Evidence:
    """Studies' evidence as one, as a share claim judges it: their runs, hosts and campaigns together, named
    by the studies joined with "+"."""
    return Evidence("+".join(e.experiment for e in pool), "pooled",
                    pd.concat([e.runs for e in pool], ignore_index=True),
                    host_cpus={h: n for e in pool for h, n in e.host_cpus.items()},
                    campaign_records=[r for e in pool for r in e.campaign_records],
                    campaign_looks=any(e.campaign_looks for e in pool))


def _judge_claim(j: _Judged, c: Claim, evidence: Sequence[Evidence], several: bool,
                 confidence: float | None) -> None:
    """The claim on the first study that can test it (see :func:`evaluate`), else why none could."""
    if c.not_tested:
        j.row["reason"] = c.not_tested
        return
    reasons: list[str] = []
    unidentified: tuple[Evidence, NotIdentified, list[PremiseCheck]] | None = None
    for ev in _pool(c, evidence):
        level, note = _level(ev, confidence)
        ev, hosts = ev.for_claims()
        checks = [check_premise(p, c, ev) for p in c.premises]
        try:
            if any(f in ev.runs.columns and ev.runs[f].nunique() > 1 for f in c.per):
                _fill_per_level(j, c, ev, checks, level, note, reasons)
            else:
                _fill_estimate(j, c, ev, checks, level, note, reasons)
        except NotIdentified as exc:  # another study's design may identify it
            unidentified = unidentified or (ev, exc, checks)
            reasons.append(f"{ev.experiment}: not identified: {exc}")
            continue
        except NotTestable as exc:
            reasons.append(f"{ev.experiment}: {exc}")
            continue
        _premise_cols(j.row, checks)
        if several:
            j.row["hosts"] = hosts
        _campaign_cols(j.row, c, ev)
        return
    if unidentified:
        _not_identified(j.row, *unidentified)
        _campaign_cols(j.row, c, unidentified[0])
    else:
        j.row["reason"] = _untested_reason(c, reasons)


def _merged(reasons: Sequence[str]) -> list[str]:
    """"<study>: <why>" reasons with the studies that share a reason named once before it, in first-seen order
    ("scaleout-paper, scalegrid-paper: needs 8 and 16 instances; ...")."""
    by: dict[str, list[str]] = {}
    for r in reasons:
        study, _, why = r.partition(": ")
        by.setdefault(why, []).append(study)
    return [f"{', '.join(studies)}: {why}" if why else studies[0] for why, studies in by.items()]


def _skipped(reasons: Sequence[str]) -> str:
    """Why the studies tried before the one that judged the claim could not (said apart from its verdict)."""
    return f"not judged on {'; '.join(_merged(reasons))}" if reasons else ""


def _fill_per_level(j: _Judged, c: Claim, ev: Evidence, checks: Sequence[PremiseCheck], level: float, note: str,
                    reasons: Sequence[str]) -> None:
    """A claim judged at every level of its ``per`` factors (:func:`_per_levels`) into its rows."""
    pl = _per_levels(c, ev, checks, level)
    j.levels += pl.rows
    if len(pl.campaigns) > 1:
        for k, (cv, cj) in zip(ev.campaigns(), pl.campaigns):
            if k in j.campaigns:
                j.campaigns[k]["verdict"] = cv
                if cj is not None:
                    j.campaigns[k].update(estimate=cj[0], ci_lo=cj[1], ci_hi=cj[2])
    if pl.judged is not None:
        j.row.update(estimate=pl.judged[0], ci_lo=pl.judged[1], ci_hi=pl.judged[2])
    j.row.update(study=ev.experiment, compared=pl.compared, basis=pl.basis + note, n=pl.n,
                 verdict=pl.verdict, reason="; ".join([x for x in (pl.reason, _skipped(reasons)) if x]),
                 campaigns=len(ev.campaigns()), heterogeneity=pl.heterogeneity,
                 confidence=pl.confidence, combine=pl.combine)


def _fill_estimate(j: _Judged, c: Claim, ev: Evidence, checks: Sequence[PremiseCheck], level: float, note: str,
                   reasons: Sequence[str]) -> None:
    """A claim judged on one estimate (pooled) and each campaign's own into its rows."""
    est, per, notes = estimate_all(c, ev, level)
    v, why = judge(c, est, checks)
    j.row.update(study=ev.experiment, compared=est.compared,
                 basis=est.basis + (note if est.values == [] else ""), n=len(est.run_ids) or est.n,
                 estimate=est.estimate, ci_lo=est.ci_lo, ci_hi=est.ci_hi, verdict=v,
                 reason="; ".join([why, *notes, _skipped(reasons)]).strip("; "), campaigns=len(ev.campaigns()),
                 heterogeneity=heterogeneity_text(est.heterogeneity),
                 confidence=math.nan if est.values else est.confidence,
                 combine=combine_words(c) if len(est.values) > 1 else "")
    for k, e in zip(ev.campaigns(), per):
        if e is None or k not in j.campaigns:
            continue
        j.campaigns[k].update(estimate=e.estimate, ci_lo=e.ci_lo, ci_hi=e.ci_hi,
                              verdict=judge(c, e, _campaign_checks(c, ev, k, checks))[0])


def _untested_reason(c: Claim, reasons: Sequence[str]) -> str:
    """Why no study of the build tested the claim: a study that lacks the level of the seed's condition says
    so first (the seed's condition is not among its levels: another profile's study decides it)."""
    if not reasons:
        return "needs a " + " or ".join(c.sources) + " study; none in this build"
    text = "; ".join(_merged(reasons))
    if c.conditions is not None and any("was not measured" in r for r in reasons):
        return (f"not tested in this study: the seed's condition is not among its levels ({text}); a study at "
                "the seed's conditions (the paper profile's) decides it")
    return text


def _level(ev: Evidence, confidence: float | None) -> tuple[float, str]:
    """The level a study's claims are judged at and what the basis adds: the look's level of the exact
    group-sequential boundary when campaigns are its looks (RULE["looks"]), the final look's for a campaign
    run until decided, else 95 %; a level asked for (a look within a campaign) wins."""
    if confidence is not None:
        return confidence, "" if confidence == 0.95 else f"; {level_text(confidence)} interval (a look)"
    if ev.campaign_looks:
        looks = CampaignLooks(MAX_CAMPAIGNS, 1 - CONFIDENCE)
        k = max(len(ev.campaigns()), 1)
        return looks.confidence(k), f"; {looks.describe(k)}"
    seq = final_look(ev.campaign_records)
    return (seq[0], f"; {seq[1]}") if seq else (0.95, "")


def _campaign_cols(row: dict[str, Any], c: Claim, ev: Evidence) -> None:
    """What the claim's campaign level captured (:mod:`dbmatrix.analyse.campaign_records`; said in the
    basis too when campaigns are pooled) and whether the claim was fixed before the data
    (:mod:`dbmatrix.analyse.claims.registration`)."""
    recs = list(ev.campaign_records)
    by_study: dict[str, list[dict[str, Any]]] = {}
    for r in recs:  # the pooled share claim: several studies' campaigns
        by_study.setdefault(str(r.get("experiment", "")), []).append(dict(r))
    labels = sorted({independence(v).label for v in by_study.values()}) if recs else []
    row["campaign_level"] = "; ".join(labels)
    if labels and int(row.get("campaigns") or 0) > 1:
        row["basis"] = f"{row['basis']}; campaign level: {row['campaign_level']}"
    row["registration"] = registration_status(c, first_registration(recs))


def _not_identified(row: dict[str, Any], ev: Evidence, exc: NotIdentified, checks: Sequence[PremiseCheck]) -> None:
    """No study identifies the claim's comparison: the first one's alias, never an average over it (a premise
    not met or uncertain still comes first: not tested)."""
    v, why = with_premises("not identified", str(exc), checks)
    row.update(study=ev.experiment, basis=f"not identified by this design: {exc}", verdict=v,
               reason=why if v == "not identified" else f"{why}; also not identified: {exc}",
               campaigns=len(ev.campaigns()))
    _premise_cols(row, checks)


def _campaign_checks(c: Claim, ev: Evidence, k: int, pooled: Sequence[PremiseCheck]) -> list[PremiseCheck]:
    """The premises on campaign `k`'s own runs (a premise can hold in one campaign and not in another;
    where a campaign alone cannot tell, the pooled check stands)."""
    if len(ev.campaigns()) < 2:
        return list(pooled)
    own = [check_premise(p, c, ev.campaign(k)) for p in c.premises]
    return [o if o.met is not None else q for o, q in zip(own, pooled)]


def _premise_cols(row: dict[str, Any], checks: Sequence[PremiseCheck]) -> None:
    row["premise_value"] = "; ".join(ch.value for ch in checks)
    row["premise_met"] = ("" if not checks else "no" if any(ch.met is False for ch in checks)
                          else "yes" if all(ch.met for ch in checks)
                          else "uncertain" if any(ch.uncertain for ch in checks) else "unknown")


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    """The claims per verdict class (:data:`~dbmatrix.analyse.claims.verdicts.VERDICTS`: "depends on ..." is
    "depends")."""
    classes = table["verdict"].fillna("").astype(str).map(verdict_class)
    return {v: int((classes == v).sum()) for v in VERDICTS}
