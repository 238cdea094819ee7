"""The claims' verdicts (:class:`ClaimVerdicts`): every claim judged on the first study that can test it
(one row per claim) and each campaign's own estimate and verdict (one row per claim and campaign)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from dbmatrix.analyse.campaign_model import alias_note
from dbmatrix.analyse.claims.catalogue import CLAIMS
from dbmatrix.analyse.claims.estimators import estimate_all
from dbmatrix.analyse.claims.model import Claim, Evidence, PremiseCheck
from dbmatrix.analyse.claims.premises import check_premise
from dbmatrix.analyse.claims.verdicts import VERDICTS, fmt, judge
from dbmatrix.analyse.contrasts import DependsOn, Estimate, NotTestable

# ============================================================================ the table

VERDICT_COLUMNS = ("id", "seed", "where", "claim", "metric", "kind", "test", "band_lo", "band_hi", "study",
                   "compared", "basis", "n", "estimate", "ci_lo", "ci_hi", "verdict", "reason", "stand_in",
                   "premise", "premise_value", "premise_met", "campaigns")
CAMPAIGN_COLUMNS = ("id", "campaign", "estimate", "ci_lo", "ci_hi", "verdict")
LEVEL_COLUMNS = ("id", "level", "campaign", "estimate", "ci_lo", "ci_hi", "verdict")


@dataclass(frozen=True)
class ClaimVerdicts:
    """What :func:`evaluate` gives: ``claims``, one row per claim (:data:`VERDICT_COLUMNS`, and ``hosts`` when
    a study has several), and ``campaigns``, one row per claim and campaign of the build
    (:data:`CAMPAIGN_COLUMNS`: that campaign's own estimate and verdict; NaN and "" where it has none), and
    ``levels``, for a claim judged per level of a factor it depends on, one row per level and campaign
    (:data:`LEVEL_COLUMNS`; campaign 0: pooled), which the paper's claims table prints.
    Written as ``claims.csv`` and ``claims-campaigns.csv``; the paper and ``dbmatrix verdicts`` read it."""

    claims: pd.DataFrame
    campaigns: pd.DataFrame
    levels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LEVEL_COLUMNS))

    def levels_of(self, claim_id: str) -> pd.DataFrame:
        """The per-level rows of one claim (empty unless it was judged per level)."""
        lv = self.levels
        return lv[lv["id"] == claim_id] if not lv.empty else lv

    def campaign_numbers(self) -> list[int]:
        """The campaigns of the build, in order (1 .. the most any study has)."""
        return sorted({int(k) for k in self.campaigns["campaign"]}) if not self.campaigns.empty else []

    def of(self, claim_id: str) -> pd.DataFrame:
        """The per-campaign rows of one claim, in campaign order."""
        c = self.campaigns
        return c[c["id"] == claim_id].sort_values("campaign", kind="stable")

    def campaign_verdict(self, claim_id: str, k: int) -> str:
        rows = self.campaigns[(self.campaigns["id"] == claim_id) & (self.campaigns["campaign"] == k)]
        v = rows["verdict"].iloc[0] if not rows.empty else ""
        return v if isinstance(v, str) else ""


MAX_SPLIT_DEPTH = 3  # nested interactions judged per combination of levels, at most this deep


def _split(claim: Claim, ev: Evidence, exc: DependsOn, depth: int = 1
           ) -> list[tuple[dict[str, Any], Estimate | None, list[Estimate | None], str]]:
    """The claim judged at each level of the factor it depends on (recursively when the effect at a level
    depends on a further factor): (the levels held, pooled estimate or None, per-campaign estimates,
    note)."""
    out: list[tuple[dict[str, Any], Estimate | None, list[Estimate | None], str]] = []
    for level in exc.per_level:
        sub = replace(claim, at={**claim.at, exc.factor: level})
        held = {exc.factor: level}
        try:
            est, per, _ = estimate_all(sub, ev)
            out.append((held, est, per, ""))
        except DependsOn as inner:
            if depth >= MAX_SPLIT_DEPTH:
                out.append((held, None, [], str(inner)))
                continue
            out += [({**held, **h}, e, p, n) for h, e, p, n in _split(sub, ev, inner, depth + 1)]
        except NotTestable as inner:
            out.append((held, None, [], str(inner)))
    return out


def _depends_verdict(claim: Claim, ev: Evidence, exc: DependsOn, checks: Sequence[PremiseCheck]
                     ) -> tuple[str, str, int, list[str], list[dict[str, Any]]]:
    """The verdict shared by every combination of levels the effect depends on (else inconclusive), the
    per-level estimates and verdicts in words, the runs behind them, each campaign's verdict and the
    per-level rows (:data:`LEVEL_COLUMNS`: pooled and per campaign)."""
    from dbmatrix.spec.factors import factor_unit, factor_word

    parts, verdicts, n = [], [], 0
    rows: list[dict[str, Any]] = []
    leaves = _split(claim, ev, exc)
    per_camp: list[list[str]] = [[] for _ in ev.campaigns()]
    camp_checks = [_campaign_checks(claim, ev, k, checks) for k in ev.campaigns()]
    for held, e, per, note in leaves:
        where = ", ".join(f"{factor_word(f)} {v}{factor_unit(f)}" for f, v in held.items())
        for k in range(len(per_camp)):
            pk = per[k] if len(per) == len(per_camp) else None
            per_camp[k].append(judge(claim, pk, [], camp_checks[k])[0] if pk is not None else "inconclusive")
            if len(per_camp) > 1:
                rows.append(_level_row(claim.id, where, ev.campaigns()[k], pk, per_camp[k][-1]))
        if e is None:
            verdicts.append("inconclusive")
            parts.append(f"{where}: not estimable ({note})")
            rows.append({**_level_row(claim.id, where, 0, None, "inconclusive"), "note": note})
            continue
        v, _ = judge(claim, e, per if len(per) > 1 else [], checks)
        rows.append(_level_row(claim.id, where, 0, e, v))
        verdicts.append(v)
        n += e.n
        parts.append(f"{where}: {fmt(e.estimate)} [{fmt(e.ci_lo)}, {fmt(e.ci_hi)}] {v}")
    common = verdicts[0] if verdicts and all(v == verdicts[0] for v in verdicts) else "inconclusive"
    within = "; within one campaign" if len(ev.campaigns()) < 2 else f"; {len(ev.campaigns())} campaigns pooled"
    aliased = alias_note(dict(ev.design)) if ev.design else ""
    within += f"; {aliased}" if aliased else ""
    camp_v = [vs[0] if vs and all(v == vs[0] for v in vs) else "inconclusive" for vs in per_camp]
    return common, (f"depends on {factor_word(exc.factor)} (interaction p = {exc.p:.2g}), judged per level: "
                    + "; ".join(parts) + within), n, camp_v, rows


def _level_row(claim_id: str, level: str, campaign: int, e: Estimate | None, v: str) -> dict[str, Any]:
    return {"id": claim_id, "level": level, "campaign": campaign,
            "estimate": e.estimate if e is not None else math.nan, "ci_lo": e.ci_lo if e is not None else math.nan,
            "ci_hi": e.ci_hi if e is not None else math.nan, "verdict": v}



def evaluate(evidence: Sequence[Evidence], claims: Sequence[Claim] = CLAIMS) -> ClaimVerdicts:
    """Per claim: the first study (in the claim's preferred order of study kinds, then the order given)
    that can test it, its pooled estimate with the 95 % CI, the premises with their measured values, and
    the verdict, else "not tested" and why; and per claim and campaign that campaign's estimate and
    verdict."""
    rows = []
    camp_rows: list[dict[str, Any]] = []
    level_rows: list[dict[str, Any]] = []
    several = any(len(e.hosts()) > 1 for e in evidence)
    n_camp = max([len(e.campaigns()) for e in evidence if not e.runs.empty] or [1])
    for c in claims:
        row: dict[str, Any] = {"id": c.id, "seed": c.seed, "where": c.where, "claim": c.text, "metric": c.metric,
                               "kind": c.kind, "test": c.test, "band_lo": c.band[0], "band_hi": c.band[1],
                               "study": "", "compared": "", "basis": "", "n": 0, "estimate": math.nan,
                               "ci_lo": math.nan, "ci_hi": math.nan, "verdict": "not tested", "reason": "",
                               "stand_in": c.stand_in, "premise": "; ".join(p.text for p in c.premises),
                               "premise_value": "", "premise_met": "", "campaigns": 0,
                               **({"hosts": ""} if several else {})}
        camp = {k: {"id": c.id, "campaign": k, "estimate": math.nan, "ci_lo": math.nan, "ci_hi": math.nan,
                    "verdict": ""} for k in range(1, n_camp + 1)}
        camp_rows += camp.values()
        if c.not_tested:
            row["reason"] = c.not_tested
            rows.append(row)
            continue
        pool = [e for k in c.sources for e in evidence if e.kind == k]
        if c.kind == "share":  # stability is a property of every standalone run of the build
            pool = [Evidence("+".join(e.experiment for e in pool), "pooled",
                             pd.concat([e.runs for e in pool], ignore_index=True))] if pool else []
        reasons = []
        for ev in pool:
            ev, hosts = ev.for_claims()
            checks = [check_premise(p, c, ev) for p in c.premises]
            try:
                est, per, notes = estimate_all(c, ev)
            except DependsOn as exc:
                v, text, n, camp_v, lv = _depends_verdict(c, ev, exc, checks)
                level_rows += lv
                failed = [ch.value for ch in checks if ch.met is False]
                if len(camp_v) > 1:
                    for k, cv in zip(ev.campaigns(), camp_v):
                        if k <= n_camp:
                            camp[k]["verdict"] = cv
                row.update(study=ev.experiment, compared=exc.compared, basis=text, n=n,
                           verdict="premise not met" if failed else v, reason="; ".join(failed),
                           campaigns=len(ev.campaigns()))
                _premise_cols(row, checks)
                break
            except NotTestable as exc:
                reasons.append(f"{ev.experiment}: {exc}")
                continue
            v, why = judge(c, est, per if len(per) > 1 else [], checks)
            row.update(study=ev.experiment, compared=est.compared, basis=est.basis, n=est.n,
                       estimate=est.estimate, ci_lo=est.ci_lo, ci_hi=est.ci_hi, verdict=v,
                       reason="; ".join([why, *notes]).strip("; "), campaigns=len(ev.campaigns()))
            for k, e in zip(ev.campaigns(), per):
                if e is None or k > n_camp:
                    continue
                camp[k].update(estimate=e.estimate, ci_lo=e.ci_lo, ci_hi=e.ci_hi,
                               verdict=judge(c, e, [], _campaign_checks(c, ev, k, checks))[0])
            _premise_cols(row, checks)
            if several:
                row["hosts"] = hosts
            break
        else:
            row["reason"] = "; ".join(reasons) if reasons else (
                "needs a " + " or ".join(c.sources) + " study; none in this build")
        rows.append(row)
    columns = [*VERDICT_COLUMNS, *(["hosts"] if several else [])]
    return ClaimVerdicts(pd.DataFrame(rows, columns=columns), pd.DataFrame(camp_rows, columns=CAMPAIGN_COLUMNS),
                         pd.DataFrame(level_rows, columns=[*LEVEL_COLUMNS, "note"]))


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
                          else "yes" if all(ch.met for ch in checks) else "unknown")


def verdict_counts(table: pd.DataFrame) -> dict[str, int]:
    return {v: int((table["verdict"] == v).sum()) for v in VERDICTS}


def flips(verdicts: ClaimVerdicts) -> pd.DataFrame:
    """Per claim: each campaign's verdict (a column C<k> per campaign, for display), the pooled one,
    whether the campaigns' verdicts differ (a flip) and whether a campaign says the opposite of a pooled
    agree/disagree (which the rule forbids)."""
    ks = verdicts.campaign_numbers()
    rows = []
    for _, r in verdicts.claims.iterrows():
        own = {f"C{k}": verdicts.campaign_verdict(r["id"], k) for k in ks}
        per = [str(v) for v in own.values() if isinstance(v, str) and v]
        rows.append({"id": r["id"], "seed": r["seed"], **own, "pooled": r["verdict"],
                     "flip": len(per) > 1 and len(set(per)) > 1,
                     "contradicted": r["verdict"] in ("agree", "disagree") and any(
                         v in ("agree", "disagree") and v != r["verdict"] for v in per)})
    return pd.DataFrame(rows)
