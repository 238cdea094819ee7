"""Boots as the unit: a sensitivity check of the pooled verdicts, never a veto.

The claims table pools a study's campaigns with the campaign as the unit (t on campaigns - 1 df). Campaigns
that ran on one boot share that boot's VM, kernel build and whatever else a boot fixes; when a contrast moves
with the boot, those campaigns are not independent and the campaign-level interval is too narrow. The check
takes each campaign's own estimate of the claim (the claims table's per-campaign rows, per condition where
the claim is judged per condition), averages the campaigns of each boot, and judges the mean of the boot means
with t on boots - 1 df at the claim's own level (the level of the look that judged it): the variance of the
grand mean of a balanced nested design (campaigns within boots), whatever the campaign component is, but
never narrower than the pooled interval (the boots' means carry no within-campaign noise, and three can agree
by chance). Ratios on the log scale, differences as they are. Conditions combine by the claim's registered rule
(:func:`~dbmatrix.analyse.claims.verdicts.combine`).

It needs three boots or more (:data:`MIN_BOOTS`). A claim stays decided under the check when its verdict's
class is the same; with three boots (2 df) the check is conservative by design, so "inconclusive with boots
as the unit" says the decision leans on campaigns of one boot being independent, not that it is wrong. Pure:
the claims tables and the campaign records are the input."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.claims.verdicts import (
    DECIDED,
    Condition,
    claim_verdict,
    combine,
    depends_word,
    verdict_class,
)
from dbmatrix.analyse.judgement import BOOT_COLUMNS

# below 3 boots the check has at most 1 df: its interval is ~13x the normal one at 95 % (t(0.975, 1) = 12.7),
# "inconclusive" by construction, which says nothing about the claim
MIN_BOOTS = 3
ONLY = "only "  # the note of a study on fewer boots ("only 2 boots (t on 1 df)")
COMBINED = ""  # the level of a claim's combined row


def campaign_boots(records: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """campaign -> the boot it ran on (a campaign resumed on another boot: its first, in sorted order; a
    record without a boot id is left out)."""
    out = {}
    for r in records:
        boots = sorted(str(b) for b in (r.get("boot_ids") or []) if b)
        if boots and r.get("campaign") is not None:
            out[int(r["campaign"])] = boots[0]
    return out


def boot_interval(values: Mapping[int, float], boots: Mapping[int, str], confidence: float, log: bool,
                  floor: tuple[float, float] | None = None) -> tuple[float, float, float, int, int] | None:
    """(estimate, lo, hi, boots, campaigns): the mean of the boots' means of the campaigns' `values`, with t on
    boots - 1 df; None with fewer than two boots (or a ratio that is not positive). `floor`: the pooled
    interval (lo, hi), whose half-width (on the same scale) the check's never goes below: the boots' means
    carry no within-campaign noise of their own, and three of them can agree by chance."""
    xs: dict[str, list[float]] = {}
    for k, v in values.items():
        if k in boots and v is not None and np.isfinite(v) and (v > 0 or not log):
            xs.setdefault(boots[k], []).append(math.log(v) if log else float(v))
    if len(xs) < 2:
        return None
    means = np.array([np.mean(v) for _, v in sorted(xs.items())])
    b = len(means)
    se = float(np.std(means, ddof=1)) / math.sqrt(b)
    q = float(sps.t.ppf(0.5 + confidence / 2, b - 1))
    m = float(means.mean())
    half = q * se
    if floor is not None and all(np.isfinite(floor)) and (min(floor) > 0 or not log):
        f_lo, f_hi = (math.log(x) for x in floor) if log else floor
        half = max(half, (f_hi - f_lo) / 2)
    back = math.exp if log else float
    return back(m), back(m - half), back(m + half), b, sum(len(v) for v in xs.values())


def _row(claim: Claim, study: str, level: str, found: tuple[float, float, float, int, int] | None, verdict: str,
         pooled: str, note: str = "") -> dict[str, Any]:
    est, lo, hi, b, k = found if found is not None else (math.nan, math.nan, math.nan, 0, 0)
    return {"id": claim.id, "study": study, "level": level, "boots": b, "campaigns": k, "estimate": est,
            "ci_lo": lo, "ci_hi": hi, "verdict": verdict, "pooled": pooled, "note": note}


def _values(rows: pd.DataFrame) -> dict[int, float]:
    rows = rows[pd.to_numeric(rows["campaign"], errors="coerce").fillna(0) >= 1]
    return {int(c): float(e) for c, e in zip(rows["campaign"], pd.to_numeric(rows["estimate"], errors="coerce"))}


def _pair(row: Mapping[str, Any]) -> tuple[float, float]:
    """A row's (ci_lo, ci_hi) as numbers (NaN where empty)."""
    lo, hi = (pd.to_numeric(row.get(c), errors="coerce") for c in ("ci_lo", "ci_hi"))
    return float(lo), float(hi)


def _missing(values: Mapping[int, float], boots: Mapping[int, str]) -> list[int]:
    return sorted(k for k in boots if not np.isfinite(values.get(k, math.nan)))


def claim_rows(claim: Claim, row: Mapping[str, Any], campaigns: pd.DataFrame, levels: pd.DataFrame,
               ev: Evidence) -> list[dict[str, Any]]:
    """The check of one judged claim (its claims-table `row`; its per-campaign rows, `campaigns`, and per
    condition, `levels`): one row per condition and the combined row (level ""), or one row saying why the
    check does not apply."""
    study, pooled = str(row.get("study") or ""), str(row.get("verdict") or "")
    boots = campaign_boots(ev.campaign_records)
    conf = float(pd.to_numeric(row.get("confidence"), errors="coerce"))
    conf = conf if math.isfinite(conf) and 0 < conf < 1 else 0.95
    log = claim.kind != "difference"
    if (nb := len(set(boots.values()))) < MIN_BOOTS:
        return [_row(claim, study, COMBINED, None, "", pooled,
                     f"{ONLY}{nb} boot{'s' if nb != 1 else ''} (t on {max(nb - 1, 0)} df)")]
    if claim.kind not in ("ratio", "difference"):
        return [_row(claim, study, COMBINED, None, "", pooled, f"a {claim.kind}, not a contrast of campaigns")]
    mine = levels[levels["id"] == claim.id] if not levels.empty else levels
    if mine.empty:
        vals = _values(campaigns[campaigns["id"] == claim.id])
        if gaps := _missing(vals, boots):
            return [_row(claim, study, COMBINED, None, "", pooled,
                         "no estimate of its own in campaign(s) " + ", ".join(map(str, gaps)))]
        found = boot_interval(vals, boots, conf, log, _pair(row))
        v = claim_verdict(claim, found[1], found[2])[0] if found else ""
        return [_row(claim, study, COMBINED, found, v, pooled)]
    out, conds = [], []
    for level, sub in mine.groupby("level", sort=False):
        vals = _values(sub)
        own = sub[pd.to_numeric(sub["campaign"], errors="coerce").fillna(0) == 0]
        level_pooled = str(own["verdict"].iloc[0]) if len(own) else ""
        floor = _pair(own.iloc[0]) if len(own) else None
        found = None if _missing(vals, boots) else boot_interval(vals, boots, conf, log, floor)
        v, why = claim_verdict(claim, found[1], found[2]) if found else ("inconclusive", "")
        conds.append(Condition(str(level), str(level), *(found[:3] if found else (math.nan,) * 3), v, why))
        out.append(_row(claim, study, str(level), found, v if found else "", level_pooled,
                        "" if found else "no estimate of its own in some campaign"))
    if not any(r["boots"] for r in out):
        return [*out, _row(claim, study, COMBINED, None, "", pooled, "no estimate of its own in some campaign")]
    words = ", ".join(depends_word(f) for f in claim.per)
    v, _, judged = combine(claim, conds, words)
    total = judged if judged is not None else (math.nan, math.nan, math.nan)
    out.append(_row(claim, study, COMBINED, (*total, max(r["boots"] for r in out),
                                             max(r["campaigns"] for r in out)), v, pooled))
    return out


def boot_check(claims: Sequence[Claim], judged: pd.DataFrame, campaigns: pd.DataFrame, levels: pd.DataFrame,
               evidence: Sequence[Evidence]) -> pd.DataFrame:
    """The check (:data:`~dbmatrix.analyse.judgement.BOOT_COLUMNS`) for every claim the table judged on one
    study with campaigns as its looks (a claim pooled over several studies, a measured quantity without an
    interval, one not tested: left out)."""
    by_id = {c.id: c for c in claims}
    by_study = {ev.experiment: ev for ev in evidence}
    rows: list[dict[str, Any]] = []
    for _, r in judged.iterrows():
        claim, ev = by_id.get(str(r["id"])), by_study.get(str(r.get("study") or ""))
        if claim is None or ev is None or not ev.campaign_looks or str(r["verdict"]) in ("not tested",
                                                                                      "not identified"):
            continue
        if claim.metric == "data_physical_bytes":  # measured once per pair: no campaign-level interval
            continue
        rows.extend(claim_rows(claim, r, campaigns, levels, ev))
    return pd.DataFrame(rows, columns=list(BOOT_COLUMNS))


def summary(check: pd.DataFrame) -> dict[str, Any]:
    """Of the combined rows with :data:`MIN_BOOTS` boots or more: the decided claims (pooled), those still
    decided with the boot as the unit (same class), those that turn inconclusive, and those that change class
    otherwise; and the claims of such studies the check could not judge (a campaign without its own estimate)."""
    top = check.loc[(check["level"] == COMBINED) & (pd.to_numeric(check["boots"]) >= MIN_BOOTS)]
    dec = top.loc[top["pooled"].map(lambda v: verdict_class(str(v)) in DECIDED).astype(bool)]
    same = dec.loc[pd.Series([verdict_class(str(a)) == verdict_class(str(b))
                              for a, b in zip(dec["verdict"], dec["pooled"])], index=dec.index, dtype=bool)]
    opened = dec.loc[dec["verdict"] == "inconclusive"]
    other = dec.loc[~dec.index.isin(same.index) & ~dec.index.isin(opened.index)]
    rest = check[(check["level"] == COMBINED) & (check["verdict"] == "")]
    unchecked = [i for i, n in zip(rest["id"], rest["note"]) if not str(n).startswith(ONLY)]
    return {"checked": len(top), "decided": len(dec), "kept": list(same["id"]), "opened": list(opened["id"]),
            "changed": list(other["id"]), "unchecked": unchecked,
            "boots": sorted({int(b) for b in top["boots"]})}
