"""Tests of dbmatrix.analyse.stats.group_sequential: exact boundaries spend the error rate they promise (by
the recursion and by an independent Monte Carlo), are less conservative than the union bound, and keep the
power of a single final analysis nearly whole."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from dbmatrix.analyse.stats.group_sequential import (
    CampaignLooks,
    boundaries,
    crossing_probability,
    look_levels,
    nominal_confidence,
    union_bound_levels,
)
from dbmatrix.analyse.stats.sequential import increments

T5 = [0.2, 0.4, 0.6, 0.8, 1.0]


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_boundaries_spend_exactly_alpha(spending: str) -> None:
    b = boundaries(T5, spending=spending)
    assert crossing_probability(b, T5) == pytest.approx(0.05, abs=1e-6)
    assert b[0] == pytest.approx(sps.norm.isf(increments(T5, spending=spending)[0] / 2))
    if spending == "obrien-fleming":
        assert all(x > y for x, y in itertools.pairwise(b))  # most of alpha kept for the later looks
    # the cumulative crossing probability at each look is the spending function's
    for k in range(1, 6):
        assert crossing_probability(b[:k], T5[:k]) == pytest.approx(sum(increments(T5, spending=spending)[:k]),
                                                                    abs=1e-6)


def test_monte_carlo_agrees_with_the_recursion() -> None:
    t = np.array(T5)
    b = np.array(boundaries(T5))
    rng = np.random.default_rng(39)
    w = np.cumsum(rng.normal(size=(200_000, 5)) * np.sqrt(np.diff(np.r_[0, t])), axis=1)
    cross = np.abs(w / np.sqrt(t)) >= b
    first = np.where(cross.any(1), cross.argmax(1), -1)
    assert (first >= 0).mean() == pytest.approx(0.05, abs=0.002)
    for k, a in enumerate(increments(T5)):
        assert (first == k).mean() == pytest.approx(a, abs=0.0015)


def test_exact_levels_are_below_the_union_bounds_and_keep_the_power() -> None:
    looks = CampaignLooks(6)
    exact, union = look_levels(6), union_bound_levels(looks.fractions())
    assert exact[0] == pytest.approx(union[0], abs=1e-9)
    assert all(e < u for e, u in zip(exact[1:], union[1:]))
    assert exact[-1] < 0.97 < union[-1]  # the last look: about 96 %, not 98 %
    b = looks.bounds()
    single = sps.norm.sf(1.96 - 2.8) + sps.norm.cdf(-1.96 - 2.8)  # one analysis at the end: ~80 %
    assert crossing_probability(b, looks.fractions(), drift=2.8) == pytest.approx(single, abs=0.02)
    assert looks.confidence(9) == looks.confidence(6) == pytest.approx(nominal_confidence(b[-1]))
    assert "look 3 of at most 6 campaigns" in looks.describe(3)
    with pytest.raises(ValueError, match="max_campaigns"):
        CampaignLooks(0)
    with pytest.raises(ValueError, match="campaigns: 0"):
        looks.confidence(0)
