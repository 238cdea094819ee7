"""The host in the analysis: a block term in the factorial model, the host check, claims per class.

Synthetic data: two cache levels with a true effect of x2.00 (100 % against 25 %), two hosts of which
h2 is 20 % slower, lognormal noise of 3 %."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.claims import Claim, Evidence, evaluate
from dbmatrix.analyse.effects import factorial_model
from dbmatrix.analyse.hosts import host_check, host_check_line, host_verdict, pooling_allowed

TRUE_EFFECT = 2.0  # tps at cache 100 % / tps at 25 %


def synthetic(assign: dict[str, list[tuple[str, int]]], slow: float = 0.8, sd: float = 0.03,
              seed: int = 1, classes: dict[str, str] | None = None) -> pd.DataFrame:
    """Runs of cells c25/c100 on hosts: `assign` maps cell -> [(host, repetitions)]."""
    rng = np.random.default_rng(seed)
    rows = []
    for cell, where in assign.items():
        cache = 25 if cell == "c25" else 100
        for host, n in where:
            for rep in range(n):
                tps = 1000.0 * (TRUE_EFFECT if cache == 100 else 1.0) * (slow if host == "h2" else 1.0)
                rows.append({"run_id": f"{cell}-{host}-{rep}", "cell_id": cell, "cache_pct": cache, "host": host,
                             "engine": "innodb", "tps": tps * math.exp(rng.normal(0, sd)),
                             **({"host_class": classes[host]} if classes else {})})
    return pd.DataFrame(rows)


def cache_effect(runs: pd.DataFrame, blocks: tuple[str, ...]) -> tuple[float, float, float, str]:
    """The model's cache effect 100 % / 25 % with its CI."""
    fit = factorial_model(runs, ["cache_pct"], blocks=blocks)
    e = fit.effects[fit.effects["term"] == "cache_pct"].set_index("level_1")
    if len(e) != 2:
        return math.nan, math.nan, math.nan, fit.model
    d = float(e.loc[100, "log_effect"] - e.loc[25, "log_effect"])
    half = 2 * float(math.log(e.loc[100, "ci_hi"]) - e.loc[100, "log_effect"])
    return math.exp(d), math.exp(d - half), math.exp(d + half), fit.model


BLOCKED = {"c25": [("h1", 3), ("h2", 3)], "c100": [("h1", 3), ("h2", 3)]}  # whole blocks on each host
CONFOUNDED = {"c25": [("h1", 6)], "c100": [("h2", 6)]}  # the next free host took the next run (issue 19)


def test_host_blocking_recovers_the_cache_effect_a_confounded_assignment_misses() -> None:
    blocked = synthetic(BLOCKED)
    with_host = cache_effect(blocked, ("host",))
    without = cache_effect(blocked, ())
    confounded = cache_effect(synthetic(CONFOUNDED), ())
    print(f"\ntrue x{TRUE_EFFECT:.2f}; blocked design with host term x{with_host[0]:.3f} "
          f"[{with_host[1]:.3f}, {with_host[2]:.3f}]; same data without host term x{without[0]:.3f} "
          f"[{without[1]:.3f}, {without[2]:.3f}]; confounded assignment without host term x{confounded[0]:.3f} "
          f"[{confounded[1]:.3f}, {confounded[2]:.3f}]")
    assert with_host[1] <= TRUE_EFFECT <= with_host[2] and abs(with_host[0] / TRUE_EFFECT - 1) < 0.03
    # without the host term the balanced design is still unbiased but the host difference is noise
    assert abs(without[0] / TRUE_EFFECT - 1) < 0.03
    assert (without[2] / without[1]) > 2 * (with_host[2] / with_host[1]) - 1
    # the confounded assignment measures the host with the cache: x1.6, its CI far from the truth
    assert abs(confounded[0] / (TRUE_EFFECT * 0.8) - 1) < 0.03 and confounded[2] < TRUE_EFFECT
    # and no model can separate them there: with the host term the effect is not estimable
    fit = factorial_model(synthetic(CONFOUNDED), ["cache_pct"], blocks=("host",))
    assert fit.model == "none" and "aliased" in fit.note


def test_host_block_enters_the_model_as_a_main_effect_only() -> None:
    runs = synthetic(BLOCKED)
    runs["threads"] = np.tile([1, 2], len(runs) // 2)
    fit = factorial_model(runs, ["cache_pct", "threads"], blocks=("host",))
    assert fit.blocks == ["host"] and fit.model == "main+2way"
    assert set(fit.anova["term"]) == {"cache_pct", "threads", "cache_pct x threads", "host", "residual"}
    assert fit.anova.set_index("term").loc["host", "kind"] == "block"
    r = fit.block_ratios.iloc[0]
    assert r["level"] == "h2" and r["reference"] == "h1" and r["ci_lo"] <= 0.8 <= r["ci_hi"]
    # one host: no block term, the same fit as without blocks
    one = runs[runs["host"] == "h1"]
    a, b = factorial_model(one, ["cache_pct"], blocks=("host",)), factorial_model(one, ["cache_pct"])
    assert a.blocks == [] and a.block_ratios.empty
    pd.testing.assert_frame_equal(a.effects, b.effects)


@pytest.mark.parametrize(("slow", "verdict"), [(0.8, "not interchangeable"), (0.99, "interchangeable")])
def test_host_check_flags_a_slower_host_and_passes_a_like_one(slow: float, verdict: str) -> None:
    runs = synthetic(BLOCKED, slow=slow, sd=0.01)
    check = host_check(runs, ["cache_pct"])
    pooled = check[check["scope"] == "pooled"].iloc[0]
    cells = check[check["scope"] == "cell"]
    print(f"\nh2 x{slow}: pooled x{pooled['ratio']:.3f} [{pooled['ci_lo']:.3f}, {pooled['ci_hi']:.3f}] "
          f"{pooled['verdict']}")
    assert pooled["verdict"] == verdict and bool(pooled["pool"]) == (verdict != "not interchangeable")
    assert pooled["ci_lo"] <= slow <= pooled["ci_hi"]
    assert list(cells["cell_id"]) == ["c100", "c25"] and (cells["host"] == "h2").all()
    assert all(lo <= slow * 1.03 and hi >= slow * 0.97 for lo, hi in zip(cells["ci_lo"], cells["ci_hi"]))
    assert pooling_allowed(check) == (verdict != "not interchangeable")
    assert verdict in host_check_line(check)


def test_host_verdict_band() -> None:
    assert host_verdict(0.75, 0.85) == "not interchangeable"
    assert host_verdict(1.06, 1.2) == "not interchangeable"
    assert host_verdict(0.97, 1.02) == "interchangeable"
    assert host_verdict(0.9, 1.02) == "inconclusive"
    assert host_verdict(float("nan"), 1.0) == "inconclusive"
    assert host_check(synthetic({"c25": [("h1", 2)], "c100": [("h1", 2)]}), ["cache_pct"]).empty


CLAIM = Claim("cacheUp", "001", "s3", "more cache, more throughput", "tps", (1.5, 3.0), factor="cache_pct",
              a="max", b="min", sources=("storage",))


def test_claims_pool_hosts_only_when_the_check_allows_else_one_class() -> None:
    like = synthetic(BLOCKED, slow=0.99, sd=0.01, classes={"h1": "big", "h2": "big"})
    table = evaluate([Evidence("s", "storage", like, host_check=host_check(like, ["cache_pct"]))], [CLAIM]).claims
    assert table["hosts"].iloc[0] == "pooled: h1, h2" and table["verdict"].iloc[0] == "agree"
    unlike = synthetic(BLOCKED, slow=0.8, sd=0.01, classes={"h1": "big", "h2": "small"})
    table = evaluate([Evidence("s", "storage", unlike, host_check=host_check(unlike, ["cache_pct"]))],
                     [CLAIM]).claims
    row = table.iloc[0]
    assert row["hosts"] == "class big: h1" and row["n"] == 6 and row["verdict"] == "agree"
    # one host: no hosts column at all (the claims table of a one-host build is as it was)
    one = like[like["host"] == "h1"].drop(columns="host_class")
    assert "hosts" not in evaluate([Evidence("s", "storage", one)], [CLAIM]).claims.columns
