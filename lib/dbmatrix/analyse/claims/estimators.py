"""A claim's estimate with its 95 % CI from one study's evidence, pooled over campaigns: the general
estimators (matched cells, the factorial model, dataset sizes, the steady share) and, through the study-kind
registry (:mod:`dbmatrix.analyse.kinds`), a kind's own estimators."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from dbmatrix.analyse.campaign_model import ONE_CAMPAIGN
from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.contrasts import Estimate, NotTestable, dataset_ratio, ratio_estimate, steady_share
from dbmatrix.analyse.kinds import find_kind
from dbmatrix.analyse.pooling import pool_campaign_estimates

# ============================================================================ estimates


def estimate(claim: Claim, ev: Evidence, *, refuse_interacting: bool = True) -> Estimate:
    """The claim's estimate from one study's evidence (all its campaigns pooled when it has several;
    raises NotTestable with the reason, DependsOn when an interacting factor would be averaged over and
    `refuse_interacting`: the pooled estimate decides whether a claim is split, each campaign's own
    estimate follows it)."""
    if claim.kind == "share":
        return steady_share(ev.runs)
    kind = find_kind(ev.kind)
    if kind is not None and kind.estimates(claim):
        return kind.claim_estimate(claim, ev)
    if claim.factor is None:
        raise NotTestable("no factor to compare")
    if claim.metric == "data_physical_bytes":
        return dataset_ratio(ev.runs, claim.factor, claim.a, claim.b, claim.at)
    runs = ev.runs
    if "rate_fraction" in runs.columns:
        runs = runs[pd.to_numeric(runs["rate_fraction"], errors="coerce").fillna(0) == 0]
    return ratio_estimate(runs, claim.metric, claim.factor, claim.a, claim.b, claim.at,
                          level_order=ev.level_order, design=ev.design, refuse_interacting=refuse_interacting)


def _models_campaigns(claim: Claim, ev: Evidence) -> bool:
    """Whether :func:`estimate` on several campaigns' runs pools them itself: the model contrasts
    (campaign-level cell means), dataset sizes and the steady share; a study kind's own estimators
    (Galera's and scale-out's tables) are pooled in two stages instead."""
    kind = find_kind(ev.kind)
    return not (kind is not None and kind.estimates(claim))


def estimate_all(claim: Claim, ev: Evidence) -> tuple[Estimate, list[Estimate | None], list[str]]:
    """Pooled estimate (raises NotTestable / DependsOn) and each campaign's own (None where it cannot
    be estimated; the notes say why)."""
    ks = ev.campaigns()
    per: list[Estimate | None] = []
    notes: list[str] = []
    for k in ks:
        try:
            per.append(estimate(claim, ev.campaign(k), refuse_interacting=False))
        except NotTestable as exc:
            per.append(None)
            notes.append(f"C{k}: {exc}")
    if len(ks) == 1:
        if per[0] is None:
            return estimate(claim, ev), per, notes  # raises with the reason
        return replace(per[0], basis=f"{per[0].basis}; {ONE_CAMPAIGN}"), per, notes
    if _models_campaigns(claim, ev):
        return estimate(claim, ev), per, notes
    got = [e for e in per if e is not None]
    if len(got) < 2:
        texts = [n.split(": ", 1)[1] for n in notes]
        if texts and len(set(texts)) == 1 and len(texts) == len(ks):  # every campaign, the same reason
            raise NotTestable(texts[0])
        raise NotTestable("; ".join(notes) or "fewer than two campaigns give an estimate")
    return pool_campaign_estimates(got, scale="linear" if claim.kind == "difference" else "log"), per, notes


