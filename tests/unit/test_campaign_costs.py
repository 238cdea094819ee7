"""Tests of dbmatrix.analyse.claims.campaign_costs: the half-width a decision needs and the campaigns an open
claim would take at the measured variance, under the registered look levels."""

from __future__ import annotations

import math

import pytest

from dbmatrix.analyse.claims.campaign_costs import machine_seconds, needed_half_width, projected_campaigns
from dbmatrix.analyse.claims.model import Claim


def test_the_half_width_a_decision_needs() -> None:
    up = Claim("up", "003", "t", "up to +10 %", "tps", (1.0, 1.10))  # A = (1.05, 1.10] with the 5 % margin
    assert needed_half_width(up, 1.08) == pytest.approx(min(math.log(1.08 / 1.05), math.log(1.10 / 1.08)))
    assert needed_half_width(up, 1.00) == pytest.approx(math.log(1.05))  # outside A: its distance to A
    diff = Claim("d", "003", "t", "lowers", "host_iowait_pct", (-100.0, 0.0), kind="difference")
    assert needed_half_width(diff, -20.0) == pytest.approx(18.0)  # A = [-100, -2): 18 points to its edge
    assert math.isnan(needed_half_width(up, math.nan))


def test_projection_under_the_registered_looks() -> None:
    assert projected_campaigns(0.05, 0.06, 3) == 4  # under the need already at the next look
    k = projected_campaigns(0.10, 0.06, 2)
    assert k is not None and 3 <= k <= 6
    assert projected_campaigns(0.50, 0.01, 3) is None  # beyond the registered maximum
    assert projected_campaigns(math.nan, 0.1, 2) is None


def test_machine_time_of_the_campaigns() -> None:
    recs = [{"started_utc": "2026-11-27T09:54:53+00:00", "finished_utc": "2026-11-27T10:54:53+00:00"},
            {"started_utc": "2026-11-29T09:41:00+00:00", "finished_utc": "2026-11-29T10:11:00+00:00"}]
    assert machine_seconds(recs) == 5400.0
    assert math.isnan(machine_seconds([{}]))
