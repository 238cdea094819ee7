"""The boot check (dbmatrix.analyse.claims.boot_check): campaigns averaged per boot, then t on boots - 1 df;
its coverage where boots vary, and what it says per claim and per condition."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.claims.boot_check import boot_check, boot_interval, campaign_boots, summary
from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.judgement import CAMPAIGN_COLUMNS, LEVEL_COLUMNS
from dbmatrix.publish.boot_tex import boot_check_text, claim_line

CLAIM = Claim("blockTest", "003", "here", "4k up to 20 % faster", "tps", (1.0, 1.2), factor="block_size",
              a="4k", b="16k", at={"engine": "myrocks"})
PER = Claim("perTest", "003", "here", "4k up to 20 % faster", "tps", (1.0, 1.2), factor="block_size",
            a="4k", b="16k", at={"engine": "myrocks"}, per=("compression",), combine="all")
BOOTS = {1: "A", 2: "A", 3: "B", 4: "B", 5: "C", 6: "C"}


def _evidence(boots: dict[int, str] = BOOTS, study: str = "s") -> Evidence:
    records = [{"campaign": k, "boot_ids": [b]} for k, b in boots.items()]
    return Evidence(study, "tpcc", pd.DataFrame(), campaign_records=records, campaign_looks=True)


def _judged(claim: Claim, verdict: str, study: str = "s") -> pd.DataFrame:
    return pd.DataFrame([{"id": claim.id, "study": study, "verdict": verdict, "confidence": 0.9625}])


def _campaigns(claim: Claim, values: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame([{"id": claim.id, "campaign": k, "estimate": v, "ci_lo": math.nan, "ci_hi": math.nan,
                          "verdict": ""} for k, v in values.items()], columns=list(CAMPAIGN_COLUMNS))


def test_campaigns_are_averaged_per_boot_before_the_t_interval() -> None:
    vals = {1: 1.10, 2: 1.12, 3: 1.14, 4: 1.16, 5: 1.12, 6: 1.14}
    est, lo, hi, b, k = boot_interval(vals, BOOTS, 0.95, log=True)
    means = np.log([math.sqrt(1.10 * 1.12), math.sqrt(1.14 * 1.16), math.sqrt(1.12 * 1.14)])
    q = 4.302653  # t(0.975, 2)
    half = q * means.std(ddof=1) / math.sqrt(3)
    assert (b, k) == (3, 6) and est == pytest.approx(math.exp(means.mean()))
    assert (lo, hi) == (pytest.approx(math.exp(means.mean() - half)), pytest.approx(math.exp(means.mean() + half)))
    assert boot_interval(vals, {k: "A" for k in vals}, 0.95, log=True) is None  # one boot: no check
    # three boots that agree by chance: never narrower than the pooled interval (its half-width, log scale)
    same = boot_interval({k: 1.2 for k in BOOTS}, BOOTS, 0.95, log=True, floor=(1.0, 1.44))
    assert same is not None and same[1:3] == (pytest.approx(1.0), pytest.approx(1.44))
    wide = boot_interval(vals, BOOTS, 0.95, log=True, floor=(1.12, 1.13))
    assert wide is not None and (wide[1], wide[2]) == (pytest.approx(lo), pytest.approx(hi))
    d = boot_interval({1: -2.0, 2: -4.0, 3: -3.5, 4: -3.5}, BOOTS, 0.95, log=False)  # differences: as they are
    assert d is not None and d[0] == pytest.approx(-3.25) and d[1] < -3.25 < d[2]
    assert campaign_boots([{"campaign": 2, "boot_ids": ["y", "x"]}, {"campaign": 3, "boot_ids": []}]) == {2: "x"}


def test_where_boots_vary_the_boot_interval_covers_and_the_campaign_one_does_not() -> None:
    """Campaign contrasts = truth + boot effect (SD 0.10) + campaign noise (SD 0.02), two campaigns per boot,
    three boots: the campaign-unit interval (t on 5 df) misses the truth far more often than 5 %, the boot-unit
    one keeps its level; with no boot effect both cover."""
    rng = np.random.default_rng(20261130)
    truth = math.log(1.5)

    def coverage(boot_sd: float) -> tuple[float, float]:
        hit_c = hit_b = 0
        n = 2000
        for _ in range(n):
            boot = rng.normal(0, boot_sd, 3)
            x = truth + np.repeat(boot, 2) + rng.normal(0, 0.02, 6)
            m, se = x.mean(), x.std(ddof=1) / math.sqrt(6)
            q5 = 2.570582  # t(0.975, 5)
            hit_c += abs(m - truth) <= q5 * se
            found = boot_interval(dict(zip(range(1, 7), np.exp(x))), BOOTS, 0.95, log=True)
            assert found is not None
            hit_b += found[1] <= 1.5 <= found[2]
        return hit_c / n, hit_b / n

    camp, boot = coverage(0.10)
    assert camp < 0.85 and 0.93 <= boot <= 0.97, (camp, boot)
    camp, boot = coverage(0.0)
    assert 0.93 <= camp <= 0.97 and 0.93 <= boot <= 0.97, (camp, boot)


def test_a_decided_claim_that_leans_on_one_boot_turns_inconclusive_and_a_robust_one_stays() -> None:
    robust = _campaigns(CLAIM, {1: 1.10, 2: 1.11, 3: 1.12, 4: 1.11, 5: 1.10, 6: 1.12})
    out = boot_check([CLAIM], _judged(CLAIM, "agree"), robust, pd.DataFrame(columns=list(LEVEL_COLUMNS)),
                     [_evidence()])
    assert list(out["verdict"]) == ["agree"] and int(out["boots"].iloc[0]) == 3
    leaning = _campaigns(CLAIM, {1: 1.06, 2: 1.07, 3: 1.16, 4: 1.17, 5: 1.10, 6: 1.11})
    out = boot_check([CLAIM], _judged(CLAIM, "agree"), leaning, pd.DataFrame(columns=list(LEVEL_COLUMNS)),
                     [_evidence()])
    assert list(out["verdict"]) == ["inconclusive"]
    s = summary(out)
    assert (s["decided"], s["kept"], s["opened"], s["changed"]) == (1, [], ["blockTest"], [])
    text = boot_check_text(out)
    assert "1 of the 1 claims" in text and "turns inconclusive (\\texttt{blockTest})" in text
    assert claim_line(out, "blockTest").startswith("with the boot as the unit (3 boots, 6 campaigns): 1.11 [")


def test_per_condition_claims_combine_by_their_rule_and_gaps_are_said() -> None:
    rows = []
    for level, vals in (("compression none", [1.10, 1.11, 1.12, 1.11, 1.10, 1.12]),
                        ("compression lz4", [0.50, 0.52, 0.49, 0.51, 0.50, 0.48])):
        rows.append({"id": PER.id, "level": level, "campaign": 0, "estimate": 1.0, "verdict": "agree"})
        rows += [{"id": PER.id, "level": level, "campaign": k, "estimate": v, "verdict": ""}
                 for k, v in zip(range(1, 7), vals)]
    levels = pd.DataFrame(rows).reindex(columns=list(LEVEL_COLUMNS))
    out = boot_check([PER], _judged(PER, "depends on compression"), pd.DataFrame(columns=list(CAMPAIGN_COLUMNS)),
                     levels, [_evidence()])
    assert list(out["level"]) == ["compression none", "compression lz4", ""]
    assert list(out["verdict"]) == ["agree", "disagree", "depends on compression"]
    assert summary(out)["kept"] == ["perTest"]
    assert "; combined depends on compression" in claim_line(out, "perTest")
    gap = _campaigns(CLAIM, {1: 1.1, 2: 1.1, 3: math.nan, 4: 1.1, 5: 1.1, 6: 1.1})
    out = boot_check([CLAIM], _judged(CLAIM, "agree"), gap, pd.DataFrame(columns=list(LEVEL_COLUMNS)),
                     [_evidence()])
    assert out["note"].iloc[0] == "no estimate of its own in campaign(s) 3" and out["verdict"].iloc[0] == ""
    one = boot_check([CLAIM], _judged(CLAIM, "agree"), gap, pd.DataFrame(columns=list(LEVEL_COLUMNS)),
                     [_evidence({1: "A", 2: "A", 3: "B"})])
    assert one["note"].iloc[0] == "only 2 boots (t on 1 df)" and summary(one)["checked"] == 0
    assert claim_line(one, "blockTest") == "with the boot as the unit: not checked, only 2 boots (t on 1 df)"
    assert summary(one)["unchecked"] == [] and "needs three boots" in boot_check_text(one)
    assert boot_check_text(out.iloc[0:0]).startswith("No study of this build is judged on campaigns")


def test_dbmatrix_verdicts_prints_the_check_and_its_json_carries_the_rows() -> None:
    from types import SimpleNamespace

    from dbmatrix.commands.documents import jsonable
    from dbmatrix.commands.studies import boot_lines

    leaning = _campaigns(CLAIM, {1: 1.06, 2: 1.07, 3: 1.16, 4: 1.17, 5: 1.10, 6: 1.11})
    out = boot_check([CLAIM], _judged(CLAIM, "agree"), leaning, pd.DataFrame(columns=list(LEVEL_COLUMNS)),
                     [_evidence()])
    lines = boot_lines(SimpleNamespace(boots=out))
    assert lines[0].startswith("with the boot as the unit (a sensitivity check, never a veto")
    assert lines[1].startswith("  blockTest (s, 3 boots): 1.11 [") and lines[1].endswith(
        "inconclusive  <- pooled: agree")
    assert lines[2] == "  1 decided of 1 checked: 0 stay decided, 1 turn inconclusive, 0 change verdict"
    assert boot_lines(SimpleNamespace(boots=out.iloc[0:0])) == []
    assert jsonable(out)[0]["verdict"] == "inconclusive"
