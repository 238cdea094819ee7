"""A claim's estimate with its 95 % CI (or at another `confidence`: a look of a campaign run until decided,
:mod:`dbmatrix.analyse.stats.sequential`) from one study's evidence, pooled over campaigns: the general
estimators (matched cells, the factorial model, dataset sizes, the steady share) and, through the study-kind
registry (:mod:`dbmatrix.analyse.kinds`), a kind's own estimators."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from dbmatrix.analyse.campaign_model import ONE_CAMPAIGN
from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.contrasts import (
    Estimate,
    NotIdentified,
    NotTestable,
    dataset_ratio,
    ratio_estimate,
    steady_share,
)
from dbmatrix.analyse.kinds import find_kind

# ============================================================================ estimates


def estimate(claim: Claim, ev: Evidence, confidence: float = 0.95) -> Estimate:
    """The claim's estimate from one study's evidence, in the campaign-level model when it has several
    campaigns (every estimator, a study kind's own included, pools them itself: one estimator family);
    raises NotTestable with the reason, NotIdentified when the design does not identify the comparison."""
    if claim.kind == "share":
        return steady_share(ev.runs, confidence)
    kind = find_kind(ev.kind)
    if kind is not None and kind.estimates(claim):
        # a kind's estimator takes a level only when one is asked for (one written before levels keeps working)
        return kind.claim_estimate(claim, ev, confidence) if confidence != 0.95 else kind.claim_estimate(claim, ev)
    if claim.factor is None:
        raise NotTestable("no factor to compare")
    if claim.metric == "data_physical_bytes":  # measured sizes: no interval, the level does not matter
        return dataset_ratio(ev.runs, claim.factor, claim.a, claim.b, claim.at)
    runs = ev.runs
    if "rate_fraction" in runs.columns:
        runs = runs[pd.to_numeric(runs["rate_fraction"], errors="coerce").fillna(0) == 0]
    return ratio_estimate(runs, claim.metric, claim.factor, claim.a, claim.b, claim.at,
                          level_order=ev.level_order, design=ev.design, confidence=confidence)


def estimate_all(claim: Claim, ev: Evidence,
                 confidence: float = 0.95) -> tuple[Estimate, list[Estimate | None], list[str]]:
    """Pooled estimate (raises NotTestable / NotIdentified) and each campaign's own (None where it cannot
    be estimated; the notes say why)."""
    ks = ev.campaigns()
    per: list[Estimate | None] = []
    notes: list[str] = []
    for k in ks:
        try:
            per.append(estimate(claim, ev.campaign(k), confidence))
        except NotIdentified:
            raise
        except NotTestable as exc:
            per.append(None)
            notes.append(f"C{k}: {exc}")
    if len(ks) == 1:
        if per[0] is None:
            return estimate(claim, ev, confidence), per, notes  # raises with the reason
        return replace(per[0], basis=f"{per[0].basis}; {ONE_CAMPAIGN}"), per, notes
    return estimate(claim, ev, confidence), per, notes
