"""The boot check in the paper (:mod:`dbmatrix.analyse.claims.boot_check`): the threats section's sentence on
campaigns that share a boot, and each claim's line in the claims in detail."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from dbmatrix.analyse.claims.boot_check import COMBINED, summary
from dbmatrix.analyse.claims.verdicts import fmt
from dbmatrix.publish.paper import and_list, latex_escape


def _ids(ids: Sequence[str]) -> str:
    names = [f"\\texttt{{{latex_escape(i)}}}" for i in ids]
    return and_list(names)


def _n(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def boot_check_text(check: pd.DataFrame) -> str:
    """The threats section's sentence: how many decided claims stay decided with the boot as the unit."""
    if check.empty:
        return ("No study of this build is judged on campaigns as its looks, so there is no campaign level to "
                "check with the boot as the unit.")
    s = summary(check)
    if not s["checked"]:
        return ("No study judged on campaigns ran them on three boots or more, so the campaign level cannot "
                "tell a boot's share of the variation from a campaign's; the check with the boot as the unit "
                "needs three boots (two give its interval 1 df).")
    dfs = " or ".join(str(b - 1) for b in s["boots"])
    text = (f"Campaigns that share a boot share its VM and kernel build, and a contrast that moves with the boot "
            f"makes them less independent than the campaign level assumes. Judged again with the boot as the "
            f"unit (each boot's campaigns averaged first, then t on {dfs} df, never narrower than the pooled "
            f"interval; \\texttt{{claims-boots.csv}}), {s['decided']} of the {s['checked']} claims it applies to "
            f"are decided: {_n(len(s['kept']), 'stays', 'stay')} decided")
    if s["opened"]:
        text += f", {_n(len(s['opened']), 'turns', 'turn')} inconclusive ({_ids(s['opened'])})"
    if s["changed"]:
        text += f", and {_n(len(s['changed']), 'changes', 'change')} verdict ({_ids(s['changed'])})"
    else:
        text += ", and none changes to another verdict"
    if s["unchecked"]:
        text += (f"; {_n(len(s['unchecked']), 'claim', 'claims')} of studies on several boots cannot be checked, "
                 f"a campaign having no estimate of its own ({_ids(s['unchecked'])})")
    return text + (". With so few boots the check is conservative: an inconclusive one there says that its "
                   "decision leans on the campaigns within a boot, not that it is wrong." if s["opened"] else ".")


def _interval(r: pd.Series) -> str:
    est, lo, hi = (float(r[c]) for c in ("estimate", "ci_lo", "ci_hi"))
    return f"{fmt(est)} [{fmt(lo)}, {fmt(hi)}] " if all(map(math.isfinite, (est, lo, hi))) else ""


def claim_line(check: pd.DataFrame, claim_id: str) -> str:
    """The claim's check in words for the claims in detail ("" when it was not checked)."""
    mine = check[check["id"] == claim_id] if not check.empty else check
    top = mine[mine["level"] == COMBINED] if not mine.empty else mine
    if top.empty:
        return ""
    r = top.iloc[0]
    if not r["verdict"]:
        return f"with the boot as the unit: not checked, {latex_escape(str(r['note']))}" if r["note"] else ""
    levels = [f"{latex_escape(str(x['level']))}: {_interval(x)}{latex_escape(str(x['verdict']) or 'no estimate')}"
              for _, x in mine[mine["level"] != COMBINED].iterrows()]
    head = f"with the boot as the unit ({int(r['boots'])} boots, {int(r['campaigns'])} campaigns): "
    if levels:
        return head + "; ".join(levels) + f"; combined {latex_escape(str(r['verdict']))}"
    return head + _interval(r) + latex_escape(str(r["verdict"]))
