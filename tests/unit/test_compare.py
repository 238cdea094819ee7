"""`dbmatrix compare`: ratios with intervals per matched cell, claims side by side, --fail-above; on synthetic
runs with known answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dbmatrix import cli
from dbmatrix.analyse import compare


def runs(cells: dict[tuple[str, int], list[float]], p95: dict[tuple[str, int], list[float]] | None = None,
         prefix: str = "", campaign: int = 1) -> pd.DataFrame:
    """runs.csv rows: cells keyed by (engine, cache_pct), their tps values (and p95 values)."""
    rows = []
    for (engine, cache), values in cells.items():
        lat = (p95 or {}).get((engine, cache), [10.0] * len(values))
        for i, (v, p) in enumerate(zip(values, lat, strict=True), 1):
            rows.append({"run_id": f"{prefix}{engine}-c{cache}-r{i}", "cell_id": f"{prefix}{engine}-c{cache}",
                         "engine": engine, "cache_pct": cache, "block_size": "16k", "campaign": campaign,
                         "status": "ok", "tps": v, "p95_ms": p})
    return pd.DataFrame(rows)


def test_two_runs_a_side_ten_percent_slower_is_undecided_by_hand() -> None:
    # b = 0.9 a run by run: log ratio log 0.9; both sides' log variance log(1.1)^2 / 2, Welch df = 2
    r = compare.ratio_interval([100.0, 110.0], [90.0, 99.0])
    half = 4.302653 * math.log(1.1) / math.sqrt(2)
    assert r.ratio == pytest.approx(0.9)
    assert (r.lo, r.hi) == (pytest.approx(0.9 * math.exp(-half), rel=1e-5), pytest.approx(0.9 * math.exp(half), rel=1e-5))
    assert r.df == pytest.approx(2.0) and r.basis == compare.BASIS_WELCH
    assert not r.decided  # a 10 % drop inside 10 % run-to-run spread, 2 runs a side: not decided


def test_one_run_on_one_side_takes_the_other_sides_spread() -> None:
    r = compare.ratio_interval([100.0, 104.0, 96.0], [80.0])
    assert r.basis == compare.BASIS_ONE_SIDE and r.df == 2.0
    assert r.ratio == pytest.approx(80.0 / np.exp(np.mean(np.log([100.0, 104.0, 96.0]))))
    assert r.decided and r.hi < 1
    one_each = compare.ratio_interval([100.0], [50.0])
    assert one_each.basis == compare.BASIS_NONE and math.isnan(one_each.lo) and not one_each.decided


def test_the_interval_excludes_one_about_five_percent_of_the_time_when_nothing_changed() -> None:
    rng = np.random.default_rng(20261127)
    decided = sum(compare.ratio_interval(rng.lognormal(6, 0.1, 3), rng.lognormal(6, 0.1, 3)).decided
                  for _ in range(2000))
    assert 0.03 < decided / 2000 < 0.07


def test_a_clear_regression_is_decided_and_fails_above_its_size_only() -> None:
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
    a = runs({("innodb", 25): base, ("innodb", 100): base})
    b = runs({("innodb", 25): [v * 0.8 for v in base], ("innodb", 100): [v * 0.98 for v in base[:2]]},
             p95={("innodb", 25): [13.0] * 5, ("innodb", 100): [10.0, 10.4]})
    cells = compare.compare_cells(a, b)
    slow = cells.set_index("cell_id").loc["innodb-c25"]
    assert slow["tps_ratio"] == pytest.approx(0.8) and slow["tps_decided"] and slow["tps_change"] == "worse"
    assert slow["p95_ms_change"] == "worse"  # 13 ms against 10 ms, no spread: decided
    near = cells.set_index("cell_id").loc["innodb-c100"]
    assert not near["tps_decided"] and near["tps_change"] == "undecided"
    reg = compare.regressions(cells, 10.0)
    assert sorted(reg["metric"]) == ["p95_ms", "tps"] and set(reg["cell_id"]) == {"innodb-c25"}
    assert reg.set_index("metric").loc["tps", "worse_pct"] == pytest.approx(20.0)
    assert compare.regressions(cells, 35.0).empty  # 20 % and 30 % worse: not beyond 35 %


def test_faster_is_not_a_regression() -> None:
    base = [500.0, 505.0, 495.0]
    cells = compare.compare_cells(runs({("x", 1): base}), runs({("x", 1): [v * 1.5 for v in base]}))
    assert cells.loc[0, "tps_change"] == "better" and compare.regressions(cells, 1.0).empty


def test_cells_match_on_factors_and_one_sided_cells_are_listed() -> None:
    a = runs({("innodb", 25): [1.0, 2.0], ("myrocks", 25): [3.0, 4.0]})
    b = runs({("innodb", 25): [1.0, 2.0], ("innodb", 50): [5.0, 6.0]}, prefix="other-")
    cells = compare.compare_cells(a, b)
    assert list(cells["side"]) == ["both", "A only", "B only"]
    assert list(cells["cell_id"]) == ["innodb-c25", "myrocks-c25", "other-innodb-c50"]
    assert cells.loc[0, "tps_ratio"] == pytest.approx(1.0) and (cells.loc[0, "n_a"], cells.loc[0, "n_b"]) == (2, 2)
    assert math.isnan(cells.loc[1, "tps_ratio"]) and cells.loc[2, "n_a"] == 0


def test_failed_runs_are_not_replicates() -> None:
    a = runs({("x", 1): [100.0, 100.0]})
    b = runs({("x", 1): [100.0, 100.0, 1.0]})
    b.loc[2, "status"] = "failed"
    assert compare.compare_cells(a, b).loc[0, "n_b"] == 2


def test_claims_side_by_side() -> None:
    a = pd.DataFrame({"id": ["c1", "c2", "c3"], "claim": ["one", "two", "three"], "estimate": [1.1, 0.9, None],
                      "ci_lo": [1.0, 0.8, None], "ci_hi": [1.2, 1.0, None],
                      "verdict": ["agree", "inconclusive", "not tested"]})
    b = a.assign(verdict=["agree", "disagree", "not tested"]).iloc[[1, 0, 2]]
    c = compare.compare_sets("A", {"s": runs({("x", 1): [1.0]})}, "B", {"s": runs({("x", 1): [1.0]})}, a, b)
    assert c.claims is not None
    assert list(c.claims["id"]) == ["c1", "c2"]  # not tested on both sides: left out
    assert list(c.claims["changed"]) == [False, True]
    assert c.claims.loc[1, "verdict_b"] == "disagree"


def test_sets_pair_experiments_by_name_and_list_the_rest() -> None:
    r = runs({("x", 1): [1.0, 1.1]})
    c = compare.compare_sets("A", {"s1": r, "s2": r}, "B", {"s1": r, "s3": r})
    assert list(c.cells) == ["s1"] and c.only == {"s2": "A only", "s3": "B only"}
    single = compare.compare_sets("A", {"quick": r}, "B", {"smoke": r})
    assert list(single.cells) == ["quick vs smoke"]


def test_campaigns_are_said_to_be_pooled_as_runs() -> None:
    a = pd.concat([runs({("x", 1): [1.0, 1.1]}), runs({("x", 1): [1.0, 1.1]}, campaign=2)])
    assert "pooled as runs" in compare.basis_note(a, a)
    assert "pooled" not in compare.basis_note(runs({("x", 1): [1.0]}), runs({("x", 1): [1.0]}))


def _study_dir(root: Path, name: str, table: pd.DataFrame) -> Path:
    d = root / name
    (d / "processed").mkdir(parents=True)
    table.to_csv(d / "processed" / "runs.csv", index=False)
    (d / "processed" / "analysis.json").write_text(json.dumps({"experiment": name}))
    return d


def test_cli_compare_prints_markdown_and_fails_above(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [1000.0, 1010.0, 990.0]
    a = _study_dir(tmp_path / "a", "synthetic", runs({("innodb", 25): base, ("innodb", 100): base}))
    b = _study_dir(tmp_path / "b", "synthetic", runs({("innodb", 25): [v * 0.85 for v in base],
                                                      ("myrocks", 100): base}))
    assert cli.main(["compare", str(a), str(b), "--no-claims"]) == 0
    out = capsys.readouterr().out
    assert "| innodb-c25 | 3/3 | 1000.0 | 850.0 | 0.850 [" in out and "**worse**" in out
    assert "innodb-c100 (A only)" in out and "myrocks-c100 (B only)" in out
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--fail-above", "10"]) == 1
    assert "1 decided regression(s) beyond 10 %: innodb-c25 tps x0.850" in capsys.readouterr().err
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--no-claims", "--fail-above", "20"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [c["side"] for c in body["cells"]["synthetic"]] == ["both", "A only", "B only"]
    out_csv = tmp_path / "cmp.csv"
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--format", "csv", "--out", str(out_csv)]) == 0
    assert len(pd.read_csv(out_csv)) == 3


def test_cli_compare_campaigns_of_one_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = pd.concat([runs({("x", 1): [100.0, 101.0]}), runs({("x", 1): [50.0, 50.5]}, campaign=2)])
    _study_dir(tmp_path, "s", table)
    assert cli.main(["compare", str(tmp_path), "--study", "s", "--campaigns", "1", "2", "--no-claims",
                     "--fail-above", "5"]) == 1
    assert "campaign 1 with B = " in capsys.readouterr().out
    assert cli.main(["compare", str(tmp_path), "--study", "s", "--campaigns", "1", "3", "--no-claims"]) == 2
    assert "has no campaign 3" in capsys.readouterr().err


def test_cli_compare_without_processed_tables_says_what_to_do(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x" / "raw").mkdir(parents=True)
    assert cli.main(["compare", str(tmp_path / "x"), str(tmp_path / "x")]) == 2
    assert "dbmatrix analyse" in capsys.readouterr().err


def test_a_shift_shared_by_every_cell_is_decided_over_cells() -> None:
    rng = np.random.default_rng(7)
    a_cells = {("e", k): list(rng.lognormal(6, 0.15, 2)) for k in range(12)}
    b_cells = {key: [v * 0.85 * float(rng.lognormal(0, 0.02)) for v in vals] for key, vals in a_cells.items()}
    cells = compare.compare_cells(runs(a_cells), runs(b_cells))
    o = compare.overall_ratio(cells, "tps")
    assert o is not None and o.decided and o.lo < 0.85 < o.hi and o.df == 11
    reg = compare.regressions(cells, 10.0)
    assert compare.ALL_CELLS in set(reg["cell_id"])
    assert compare.ALL_CELLS not in set(compare.regressions(cells, 20.0)["cell_id"])
    same = compare.compare_cells(runs(a_cells), runs(a_cells))
    assert not compare.overall_ratio(same, "tps").decided  # type: ignore[union-attr]
    assert compare.overall_ratio(cells.iloc[:1], "tps") is None


def test_every_interval_says_its_level() -> None:
    """The cells' intervals name their level in the headings; a claim's interval names its own (the claims
    table's confidence column, an older table's look in its basis, else 95 %)."""
    a = pd.DataFrame({"id": ["c1", "c2"], "claim": ["one", "two"], "estimate": [1.1, 0.9], "ci_lo": [1.0, 0.8],
                      "ci_hi": [1.2, 1.0], "verdict": ["agree", "inconclusive"],
                      "basis": ["", "x (look 8: 98.88 % interval)"]})
    b = a.drop(columns="basis").assign(confidence=[0.9736, 0.95], verdict=["agree", "depends on compression"])
    c = compare.compare_sets("A", {"s": runs({("x", 1): [100.0, 101.0]})}, "B",
                             {"s": runs({("x", 1): [99.0, 100.0]})}, a, b)
    assert c.claims is not None
    assert list(c.claims["confidence_a"]) == [0.95, pytest.approx(0.9888)]
    assert list(c.claims["confidence_b"]) == [0.9736, 0.95]
    md = compare.markdown(c)
    assert "| tps B/A [95 % CI] |" in md and "p95 B/A [95 % CI]" in md and md.count("95 % CI of B/A") == 1
    assert "| c1 | 1.100 [1.000, 1.200] 95 % CI | agree | 1.100 [1.000, 1.200] 97.4 % CI | agree |" in md
    assert "0.900 [0.800, 1.000] 98.9 % CI | inconclusive |" in md and "| depends on compression | changed |" in md
    assert json.loads(compare.to_json(c))["level"] == 0.95
