"""`dbmatrix compare`: cells matched on their factor levels, claims side by side, like-for-like sets, the
output (width, --sort change, --only-changed, --json) and the exit status; on synthetic runs (the statistics
of the gate: tests/unit/test_compare_gate.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from dbmatrix import cli
from dbmatrix.analyse import compare, compare_text


def runs(cells: dict[tuple[str, int], list[float]], p95: dict[tuple[str, int], list[float]] | None = None,
         prefix: str = "", campaign: int = 1) -> pd.DataFrame:
    """runs.csv rows: cells keyed by (engine, cache_pct), their tps values (and p95 values)."""
    rows = []
    for (engine, cache), values in cells.items():
        lat = (p95 or {}).get((engine, cache), [10.0] * len(values))
        for i, (v, p) in enumerate(zip(values, lat, strict=True), 1):
            rows.append({"run_id": f"{prefix}{engine}-c{cache}-r{i}-k{campaign}", "cell_id": f"{prefix}{engine}-c{cache}",
                         "engine": engine, "cache_pct": cache, "block_size": "16k", "campaign": campaign,
                         "status": "ok", "tps": v, "p95_ms": p})
    return pd.DataFrame(rows)


def test_cells_match_on_factors_and_one_sided_cells_are_listed() -> None:
    a = runs({("innodb", 25): [1.0, 2.0], ("myrocks", 25): [3.0, 4.0]})
    b = runs({("innodb", 25): [1.0, 2.0], ("innodb", 50): [5.0, 6.0]}, prefix="other-")
    cells = compare.compare_sets("A", {"s": a}, "B", {"s": b}).cells["s"]
    assert list(cells["side"]) == ["both", "A only", "B only"]
    assert list(cells["cell_id"]) == ["innodb-c25", "myrocks-c25", "other-innodb-c50"]
    assert cells.loc[0, "tps_ratio"] == pytest.approx(1.0) and (cells.loc[0, "n_a"], cells.loc[0, "n_b"]) == (2, 2)
    assert math.isnan(cells.loc[1, "tps_ratio"]) and cells.loc[2, "n_a"] == 0


def test_cache_levels_written_as_25_and_25_0_are_one_cell() -> None:
    a = runs({("innodb", 25): [1.0, 2.0]})
    b = a.assign(cache_pct=a["cache_pct"].astype(float))
    assert list(compare.compare_sets("A", {"s": a}, "B", {"s": b}).cells["s"]["side"]) == ["both"]


def test_failed_runs_are_not_replicates() -> None:
    a = runs({("x", 1): [100.0, 100.0]})
    b = runs({("x", 1): [100.0, 100.0, 1.0]})
    b.loc[2, "status"] = "failed"
    assert compare.compare_sets("A", {"s": a}, "B", {"s": b}).cells["s"].loc[0, "n_b"] == 2


def test_the_ratio_is_of_the_campaigns_geometric_means() -> None:
    a = pd.concat([runs({("x", 1): [100.0, 100.0]}), runs({("x", 1): [200.0]}, campaign=2)])
    b = runs({("x", 1): [150.0, 150.0]})
    cell = compare.compare_sets("A", {"s": a}, "B", {"s": b}).cells["s"].iloc[0]
    assert cell["tps_a"] == pytest.approx(math.sqrt(100 * 200))  # each campaign counts once, not each run
    assert cell["tps_ratio"] == pytest.approx(150 / math.sqrt(100 * 200))


def test_different_studies_are_not_compared() -> None:
    r = runs({("x", 1): [1.0, 1.1]})
    with pytest.raises(compare.NotComparable, match="A holds s1, s2, B holds s1, s3"):
        compare.compare_sets("A", {"s1": r, "s2": r}, "B", {"s1": r, "s3": r})
    with pytest.raises(compare.NotComparable):
        compare.compare_sets("A", {"quick": r}, "B", {"smoke": r})


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
    text = compare_text.render(c, width=80, only_changed=True)
    assert "c2: inconclusive -> disagree  CHANGED" in text and "c1:" not in text


def test_claims_on_one_side_only_are_not_compared() -> None:
    a = pd.DataFrame({"id": ["c1"], "claim": ["one"], "estimate": [1.1], "ci_lo": [1.0], "ci_hi": [1.2],
                      "verdict": ["agree"]})
    c = compare.compare_sets("A", {"s": runs({("x", 1): [1.0]})}, "B", {"s": runs({("x", 1): [1.0]})}, a, None,
                             claims_note="claims not compared: B cannot judge them")
    assert c.claims is None and "claims not compared: B cannot judge them" in compare_text.render(c)


def test_every_interval_says_its_level() -> None:
    """The cells' intervals name their (shared) level; a claim's interval names its own (the claims table's
    confidence column, an older table's look in its basis, else 95 %)."""
    a = pd.DataFrame({"id": ["c1", "c2"], "claim": ["one", "two"], "estimate": [1.1, 0.9], "ci_lo": [1.0, 0.8],
                      "ci_hi": [1.2, 1.0], "verdict": ["agree", "inconclusive"],
                      "basis": ["", "x (look 8: 98.88 % interval)"]})
    b = a.drop(columns="basis").assign(confidence=[0.9736, 0.95], verdict=["agree", "depends on compression"])
    c = compare.compare_sets("A", {"s": runs({("x", 1): [100.0, 101.0], ("x", 2): [100.0, 99.0]})}, "B",
                             {"s": runs({("x", 1): [99.0, 100.0], ("x", 2): [100.0, 98.0]})}, a, b)
    assert c.claims is not None
    assert list(c.claims["confidence_a"]) == [0.95, pytest.approx(0.9888)]
    assert list(c.claims["confidence_b"]) == [0.9736, 0.95]
    text = compare_text.render(c, width=100)
    assert c.n_intervals == 4 and "Intervals: 98.8 % CI each, so that all 4 cell x metric intervals" in text
    assert "A 1.10 [1.00, 1.20] 95 % CI; B 1.10 [1.00, 1.20] 97.4 % CI" in text  # the claims' one formatter
    assert "A 0.90 [0.80, 1.00] 98.9 % CI" in text and "inconclusive -> depends on compression  CHANGED" in text
    body = json.loads(compare_text.to_json(c))
    assert body["level"] == 0.95 and body["cell_level"] == pytest.approx(1 - 0.05 / 4)


LONG = "innodb-c100-b16k-none-disk-t4-oltp_read_only-logtmpfs-o50-st16-wnode2-fslow-i2-pinnuma"


def test_text_fits_80_and_100_columns_with_long_cell_ids() -> None:
    a = runs({(LONG + f"-x{i}", 25): [100.0, 101.0, 99.0] for i in range(3)})
    b = runs({(LONG + f"-x{i}", 25): [70.0, 71.0, 69.0] for i in range(3)})
    c = compare.compare_sets("data/runs/a-very-long-directory-name/with/more/parts", {"s": a},
                             "data/runs/another-long-directory-name", {"s": b}, fail_above=10)
    for width in (80, 100):
        text = compare_text.render(c, width=width)
        assert max(len(line) for line in text.splitlines()) <= width, text
    labels, common = compare_text.cell_labels(["myrocks-c0-b16k-t2-tpcc", "myrocks-c8p5-b16k-t2-tpcc"])
    assert labels == ["c0", "c8p5"] and common == ["myrocks", "b16k", "t2", "tpcc"]
    assert compare_text.cell_labels(["innodb-t4-wo", "innodb-t4-wo-st16"])[0] == ["base", "st16"]


def _three_cells() -> compare.Comparison:
    base = [1000.0, 1010.0, 990.0]
    a = runs({("innodb", 25): base, ("innodb", 50): base, ("innodb", 100): base})
    b = runs({("innodb", 25): [v * 0.99 for v in base], ("innodb", 50): [v * 0.6 for v in base],
              ("innodb", 100): [v * 0.85 for v in base]})
    return compare.compare_sets("A", {"s": a}, "B", {"s": b}, fail_above=5)


def test_sort_by_change_puts_the_worst_first_and_only_changed_drops_the_rest() -> None:
    c = _three_cells()
    t = c.cells["s"]
    assert list(compare_text.ordered(t, "change", False)["cache_pct"]) == [50, 100, 25]
    assert list(compare_text.ordered(t, "cell", False)["cache_pct"]) == [25, 50, 100]
    changed = compare_text.ordered(t, "change", True)
    assert list(changed["cache_pct"]) == [50, 100]  # -1 %: its interval does not lie beyond 5 %
    text = compare_text.render(c, width=80, sort="change", only_changed=True)
    assert "c50 " in text and "c100 " in text and "c25 " not in text
    assert "-40.0 [" in text and "worse" in text


def test_json_has_the_gate_the_cells_and_their_percent_change() -> None:
    body = json.loads(compare_text.to_json(_three_cells(), "change"))
    assert body["gate"]["fail_above_pct"] == 5 and body["gate"]["passed"] is False
    assert [r["cell_id"] for r in body["gate"]["regressions"]] == ["innodb-c50", "innodb-c100"]
    cells = body["studies"]["s"]["cells"]
    assert [c["cache_pct"] for c in cells] == [50, 100, 25]
    assert cells[0]["tps_pct"] == pytest.approx(-40.0) and cells[0]["tps_change"] == "worse"
    assert body["studies"]["s"]["campaign_level"]["tps"] == {"a": "unmeasured", "b": "unmeasured"}


def _study_dir(root: Path, name: str, table: pd.DataFrame) -> Path:
    d = root / name
    (d / "processed").mkdir(parents=True)
    table.to_csv(d / "processed" / "runs.csv", index=False)
    (d / "processed" / "analysis.json").write_text(json.dumps({"experiment": name}))
    return d


def test_cli_compare_prints_text_and_fails_above(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [1000.0, 1010.0, 990.0]
    a = _study_dir(tmp_path / "a", "synthetic", runs({("innodb", 25): base, ("innodb", 100): base,
                                                      ("myrocks", 25): base}))
    b = _study_dir(tmp_path / "b", "synthetic", runs({("innodb", 25): [v * 0.7 for v in base],
                                                      ("innodb", 100): base, ("myrocks", 100): base}))
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "innodb-c25 " in out and "-30.0 [" in out and "worse" in out
    assert "In A only (1): myrocks-c25." in out and "In B only (1): myrocks-c100." in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--fail-above", "10"]) == 1
    err = capsys.readouterr().err
    assert "gate --fail-above 10 failed: 1 cell x metric interval: synthetic innodb-c25 tps -30.0 %" in err
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--no-claims", "--fail-above", "40"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert [c["side"] for c in body["studies"]["synthetic"]["cells"]] == ["both", "both", "A only", "B only"]
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--format", "markdown"]) == 0
    assert "## synthetic" in capsys.readouterr().out
    out_csv = tmp_path / "cmp.csv"
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--format", "csv", "--out", str(out_csv)]) == 0
    assert len(pd.read_csv(out_csv)) == 4


def test_cli_compare_exits_2_when_nothing_matched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _study_dir(tmp_path / "a", "synthetic", runs({("innodb", 25): [1.0, 1.1]}))
    b = _study_dir(tmp_path / "b", "synthetic", runs({("innodb", 50): [1.0, 1.1]}))
    assert cli.main(["compare", str(a), str(b), "--no-claims"]) == 2
    captured = capsys.readouterr()
    assert "nothing matched in synthetic" in captured.err and "no cell matched" in captured.out
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--fail-above", "10", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["studies"]["synthetic"]["matched"] == 0


def test_cli_compare_gate_without_any_interval_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _study_dir(tmp_path / "a", "synthetic", runs({("innodb", 25): [100.0]}))
    b = _study_dir(tmp_path / "b", "synthetic", runs({("innodb", 25): [50.0]}))
    assert cli.main(["compare", str(a), str(b), "--no-claims"]) == 0  # no gate: shown, nothing to decide
    capsys.readouterr()
    assert cli.main(["compare", str(a), str(b), "--no-claims", "--fail-above", "10"]) == 2
    assert "the gate has nothing to test" in capsys.readouterr().err


def test_cli_compare_refuses_other_studies_and_narrows_a_root_to_the_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The quick and the paper profile's TPC-C studies are not compared with each other; a root holding both
    is narrowed to the profile of the other side's studies (and says so)."""
    r = runs({("myrocks", 0): [100.0, 101.0, 99.0]})
    _study_dir(tmp_path / "ref", "tpcc-quick", r)
    _study_dir(tmp_path / "ref", "tpcc-paper", r)
    mine = _study_dir(tmp_path / "mine", "tpcc-quick", r)
    assert cli.main(["compare", str(tmp_path / "ref" / "tpcc-paper"), str(mine), "--no-claims"]) == 2
    err = capsys.readouterr().err
    assert "not like for like" in err and "tpcc-paper (paper profile)" in err and "tpcc-quick (quick profile)" in err
    assert cli.main(["compare", str(tmp_path / "ref"), str(tmp_path / "mine"), "--no-claims"]) == 0
    out = capsys.readouterr().out
    assert "A is narrowed to the quick profile's studies; left out: tpcc-paper." in out and "\ntpcc-quick:" in out
    assert cli.main(["compare", str(tmp_path / "ref"), str(tmp_path / "mine"), "--no-claims",
                     "--profile", "paper"]) == 2
    assert "only A" in capsys.readouterr().err
    assert cli.main(["compare", str(tmp_path / "ref"), "--study", "tpcc-paper", "--profile", "quick",
                     "--campaigns", "1", "1", "--no-claims"]) == 2
    assert "tpcc-paper is a study of the paper profile, not of quick" in capsys.readouterr().err


def test_cli_compare_campaigns_of_one_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = pd.concat([runs({("x", 1): [100.0, 101.0]}), runs({("x", 1): [50.0, 50.5]}, campaign=2)])
    _study_dir(tmp_path, "s", table)
    assert cli.main(["compare", str(tmp_path), "--study", "s", "--campaigns", "1", "2", "--no-claims",
                     "--fail-above", "5", "--width", "400"]) == 1  # wide: the path's length varies by machine
    assert "campaign 1\n      with B = " in capsys.readouterr().out
    assert cli.main(["compare", str(tmp_path), "--study", "s", "--campaigns", "1", "3", "--no-claims"]) == 2
    assert "has no campaign 3" in capsys.readouterr().err


def test_cli_compare_without_processed_tables_says_what_to_do(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x" / "raw").mkdir(parents=True)
    assert cli.main(["compare", str(tmp_path / "x"), str(tmp_path / "x")]) == 2
    assert "dbmatrix analyse" in capsys.readouterr().err
