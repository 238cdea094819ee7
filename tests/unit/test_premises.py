"""The premise registry (dbmatrix.analyse.claims.premises): every premise the catalogue names has a registered
check, the dispatch says what is allowed, and a new premise is one registered function."""

from __future__ import annotations

import pandas as pd
import pytest

from dbmatrix.analyse.claims.catalogue import all_claims
from dbmatrix.analyse.claims.model import Claim, Evidence, Premise, PremiseCheck
from dbmatrix.analyse.claims.premises import PREMISES, check_premise, premise


def test_every_catalogue_premise_has_a_registered_check() -> None:
    used = {p.kind for c in all_claims() for p in c.premises}
    assert used and used <= set(PREMISES)
    assert list(PREMISES) == ["fc_paused", "compresses", "saturated", "cache_below_data", "engine_writes", "halves",
                              "doubling_grid", "binlog_synced"]
    assert all(k.description and k.name == name for name, k in PREMISES.items())


def test_an_unknown_kind_names_the_registered_ones() -> None:
    claim = all_claims()[0]
    with pytest.raises(ValueError, match="allowed: fc_paused, compresses, .*, doubling_grid"):
        check_premise(Premise("warm", 1.0, "warm"), claim, Evidence("s", "storage", pd.DataFrame()))
    with pytest.raises(ValueError, match="registered already"):
        premise("halves", "again")(lambda p, c, e: PremiseCheck(True, ""))


def test_a_new_premise_is_one_registered_function() -> None:
    @premise("runs_at_least", "at least `threshold` runs")
    def _runs(p: Premise, claim: Claim, ev: Evidence) -> PremiseCheck:
        return PremiseCheck(len(ev.runs) >= p.threshold, f"{len(ev.runs)} runs")

    try:
        ev = Evidence("s", "storage", pd.DataFrame({"tps": [1.0, 2.0]}))
        got = check_premise(Premise("runs_at_least", 3, "three runs"), all_claims()[0], ev)
        assert got == PremiseCheck(False, "2 runs")
    finally:
        PREMISES.pop("runs_at_least")


def test_a_check_that_cannot_tell_says_so() -> None:
    claim = all_claims()[0]
    got = check_premise(Premise("halves", 5.0, "long windows"), claim, Evidence("s", "scaleout", pd.DataFrame()))
    assert got.met is None and got.value == "not checked: no per-second rows at the best setting"
