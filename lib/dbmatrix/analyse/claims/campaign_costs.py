"""What deciding a claim cost when campaigns are its looks (issue 39 item 5): per claim, the look (number of
campaigns) it was first decided at and the machine time of the runs of those campaigns; for a claim still open,
its interval's half-width now and the campaigns it would need at the measured variance.

Each look is the claims table re-judged on the study's first k campaigns (:func:`prefix`), at look k's level
(:data:`~dbmatrix.analyse.claims.verdicts.RULE` ``looks``), exactly as the table judges all of them. The
projection for an open claim: the interval's half-width on the log scale (the natural one for a difference)
shrinks as 1/sqrt(campaigns) at the measured spread, its quantile follows the registered look levels (normal
quantiles: an approximation, said so), and the claim is decided at the first look whose half-width is under
the distance from the estimate to the nearest edge of its claimed region. Pure: the evidence is the input."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.campaign_model import campaign_column
from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.claims.verdicts import CONFIDENCE, MAX_CAMPAIGNS, claimed_region, verdict_class
from dbmatrix.analyse.judgement import LOOK_COLUMNS
from dbmatrix.analyse.stats.group_sequential import CampaignLooks

COLUMNS = LOOK_COLUMNS  # the judgement file's (decisions-campaigns.csv)
DECIDED = ("agree", "disagree", "depends")


def prefix(ev: Evidence, k: int) -> Evidence:
    """The evidence of the study's first `k` campaigns."""
    runs = ev.runs[campaign_column(ev.runs) <= k] if not ev.runs.empty else ev.runs
    records = [r for r in ev.campaign_records if int(r.get("campaign") or 1) <= k]
    return replace(ev, runs=runs, campaign_records=records,
                   campaign_extra={c: t for c, t in ev.campaign_extra.items() if c <= k})


def machine_seconds(records: Sequence[Mapping[str, Any]]) -> float:
    """The wall time of the campaigns (their records' start to finish, dataset loads included), seconds."""
    total = 0.0
    for r in records:
        a, b = r.get("started_utc"), r.get("finished_utc")
        if a and b:
            total += (datetime.fromisoformat(str(b)) - datetime.fromisoformat(str(a))).total_seconds()
    return total if total > 0 else math.nan


def _scale(claim: Claim) -> tuple[float, bool]:
    """(null, log scale?) of a claim's metric: ratios on the log scale around 1, differences as they are."""
    return (0.0, False) if claim.kind == "difference" else (1.0, True)


def needed_half_width(claim: Claim, estimate: float) -> float:
    """The half-width under which an interval centred on `estimate` lies inside or wholly outside the claimed
    region (on the metric's scale: log for ratios); nan where the region cannot be computed."""
    null, log = _scale(claim)
    try:
        region = claimed_region(claim.band, claim.test, null, claim.equivalence)
    except ValueError:
        return math.nan
    f = (lambda x: math.log(x) if x > 0 else -math.inf) if log else (lambda x: x)
    if not (math.isfinite(estimate) and (estimate > 0 or not log)):
        return math.nan
    e = f(estimate)
    edges = [f(x) for x in (region.lo, region.hi) if math.isfinite(x) and (x > 0 or not log)]
    return min((abs(e - x) for x in edges), default=math.nan)


def projected_campaigns(half_width: float, needed: float, k: int, max_campaigns: int = MAX_CAMPAIGNS) -> int | None:
    """The first look k' > k whose half-width, shrinking as 1/sqrt(k') with the look's registered level, is
    under `needed`; None beyond the registered maximum (or when it cannot be told)."""
    if not (math.isfinite(half_width) and math.isfinite(needed) and needed > 0 and k >= 1):
        return None
    looks = CampaignLooks(max_campaigns, 1 - CONFIDENCE)
    q_now = float(sps.norm.isf((1 - looks.confidence(k)) / 2))
    for kk in range(k + 1, max_campaigns + 1):
        q = float(sps.norm.isf((1 - looks.confidence(kk)) / 2))
        if half_width * math.sqrt(k / kk) * q / q_now < needed:
            return kk
    return None


def _half_width(row: pd.Series, claim: Claim) -> float:
    lo, hi = float(row.get("ci_lo", np.nan)), float(row.get("ci_hi", np.nan))
    _, log = _scale(claim)
    if log:
        return (math.log(hi) - math.log(lo)) / 2 if lo > 0 and hi > 0 and math.isfinite(hi) else math.nan
    return (hi - lo) / 2


def _open_projection(c: Claim, now: pd.Series, levels: pd.DataFrame, k: int) -> dict[str, Any]:
    """An open claim's half-width, the half-width a decision needs and the projected campaigns, from its pooled
    interval; a claim judged per condition without one (combined: all) from its open conditions' pooled
    intervals, the one that needs the most campaigns deciding (beyond the maximum if any is)."""
    hw, need = _half_width(now, c), needed_half_width(c, float(now.get("estimate", np.nan)))
    which = ""
    if not math.isfinite(hw) and levels is not None and not levels.empty:
        rows = levels[(levels["id"] == c.id) & (pd.to_numeric(levels["campaign"], errors="coerce") == 0)
                      & (levels["verdict"].astype(str) == "inconclusive")]
        per = [(_half_width(r, c), needed_half_width(c, float(r.get("estimate", np.nan))), str(r["level"]))
               for _, r in rows.iterrows()]
        if per and all(math.isfinite(h) and math.isfinite(n) and n > 0 for h, n, _ in per):
            projections = [projected_campaigns(h, n, k) for h, n, _ in per]
            worst = max(range(len(per)), key=lambda i: (projections[i] is None, projections[i] or 0,
                                                        per[i][0] / per[i][1]))
            hw, need, which = per[worst][0], per[worst][1], per[worst][2]
    proj = projected_campaigns(hw, need, k)
    if not (math.isfinite(hw) and math.isfinite(need)):
        note = "no finite interval to project"
    elif proj:
        note = f"the condition needing the most: {which}" if which else ""
    else:
        note = (f"open beyond the registered maximum of {MAX_CAMPAIGNS} campaigns at the measured variance"
                + (f" ({which})" if which else ""))
    return {"half_width": hw, "needed_half_width": need, "projected_campaigns": proj or "", "note": note}


def campaign_decisions(claims: Sequence[Claim], evidence: Sequence[Evidence],
                       judged: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per claim judged on a study whose campaigns are looks (`judged`: the build's claims table, which says on
    which study each claim was judged; without it every study that can judge it): its first decided look, the
    machine time of the campaigns up to it, or for an open claim its half-width, the half-width a decision
    needs and the projected campaigns (see the module doc)."""
    from dbmatrix.analyse.claims.table import evaluate

    rows: list[dict[str, Any]] = []
    for ev in evidence:
        ks = ev.campaigns()
        if not ev.campaign_looks or ev.runs.empty:
            continue
        on = (None if judged is None else
              {str(i): str(st) for i, st in zip(judged["id"], judged["study"])})
        mine = [c for c in claims if ev.kind in c.sources and not c.not_tested and c.kind != "share"
                and (on is None or on.get(c.id) == ev.experiment)]
        if not mine:
            continue
        results = {k: evaluate([prefix(ev, k)], mine) for k in ks}
        series = {k: r.claims.set_index("id") for k, r in results.items()}
        last, last_levels = series[ks[-1]], results[ks[-1]].levels
        for c in mine:
            now = last.loc[c.id]
            if str(now.get("study", "")) != ev.experiment:
                continue
            first = next((k for k in ks if verdict_class(str(series[k].loc[c.id, "verdict"])) in DECIDED), None)
            row: dict[str, Any] = {"id": c.id, "study": ev.experiment, "campaigns": len(ks),
                                   "verdict": str(now["verdict"]), "decided_at": first or "",
                                   "machine_s": math.nan, "half_width": math.nan, "needed_half_width": math.nan,
                                   "projected_campaigns": "", "note": "",
                                   "study_machine_s": round(machine_seconds(ev.campaign_records), 1)}
            if first is not None:
                row["machine_s"] = round(machine_seconds(prefix(ev, first).campaign_records), 1)
                was = str(series[first].loc[c.id, "verdict"])
                if verdict_class(str(now["verdict"])) not in DECIDED:  # the pooled interval moved back
                    row["note"] = (f"{was} at look {first}, {now['verdict']} at look {len(ks)}: the verdict the "
                                   "table reports is the last look's")
            elif verdict_class(str(now["verdict"])) == "inconclusive":
                row.update(_open_projection(c, now, last_levels, len(ks)))
            else:
                row["note"] = f"{now['verdict']}: not something more campaigns decide"
            rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))
