"""What a study's claims need from its design, checked before any data (dbmatrix.analyse.claims.needs), and
the plan's refusal of a design that aliases a claim's contrast (dbmatrix.claim_plan, `dbmatrix plan`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from dbmatrix import paths
from dbmatrix.analyse.claims import CLAIMS, Claim, Evidence, evaluate
from dbmatrix.analyse.claims.needs import (
    applicable,
    claim_cells,
    claims_for,
    decided_lines,
    design_refusals,
    identification,
)
from dbmatrix.spec.experiment import SpecError, load_spec, parse_experiment
from dbmatrix.study import load_study, recorded_design

EMULATES = {"disk": None, "tmpfs": "pmem-fsdax", "ramblock": "pmem-sector"}
QUICK_TPCC = paths.repo_root() / "specs" / "quick-tpcc.yaml"

# Claims of our own (the registry is being rebuilt; these fix the answers): compression compared at the
# lowest cache level per medium; block sizes averaged over everything else; the media at the lowest cache.
LZ_AT_MIN = Claim("lzAtMin", "003", "test", "lz4 cuts reads", "read_kb_per_txn", (1.0, 2.5),
                  factor="compression", a="none", b="lz4", at={"engine": "myrocks", "cache_pct": "min"},
                  per=("medium",), sources=("tpcc",))
BLOCK_AVG = Claim("blockAvg", "003", "test", "4k vs 16k", "tps", (1.0, 1.1), factor="block_size", a="4k", b="16k",
                  sources=("tpcc",))
PMEM_AT_MIN = Claim("pmemAtMin", "003", "test", "pmem beats nvme", "tps", (1.0, 4.0), factor="medium",
                    a="emulated:pmem-fsdax", b="native", at={"cache_pct": "min"}, sources=("tpcc",))
THREADS_ONLY = Claim("threadsOnly", "001", "test", "threads", "tps", (1.0, 9.0), factor="threads", a="max",
                     b="min", sources=("threads",))
OWN = (LZ_AT_MIN, BLOCK_AVG, PMEM_AT_MIN, THREADS_ONLY)


def _raw(**over: Any) -> dict[str, Any]:
    """The quick TPC-C spec with both block sizes (as its reference was recorded), updated by `over`."""
    raw = yaml.safe_load(QUICK_TPCC.read_text())
    raw["factors"]["block_size"] = ["4k", "16k"]
    raw.update({"comparisons": None, **over})
    return raw


def _tpcc(design: str, **over: Any) -> Any:
    return parse_experiment(_raw(design=design, **over))


def test_a_crossed_design_that_aliases_a_claims_contrast_is_refused_naming_claim_and_alias() -> None:
    crossed = _tpcc("crossed")
    why = identification(LZ_AT_MIN, crossed, EMULATES)
    assert why == ("at medium disk: compression x cache is aliased with the block main effect in this design, so "
                   "the comparison cannot be made at cache 0 % alone")
    assert identification(BLOCK_AVG, crossed, EMULATES) == (
        "block x cache is aliased with the compression main effect; block x compression is aliased with the cache "
        "main effect in this design, so its average over cache, compression is not the effect")
    assert identification(PMEM_AT_MIN, crossed, EMULATES) is None  # medium x cache is crossed, not aliased
    lines = design_refusals(crossed, EMULATES, OWN)
    assert [ln.split(":")[1].strip() for ln in lines] == ["claim lzAtMin needs compression none / lz4 at engine "
                                                          "myrocks, cache 0 % per medium, which the crossed design "
                                                          "does not identify", "claim blockAvg needs block 4k / 16k, "
                                                          "which the crossed design does not identify"]
    assert lines[0].startswith("tpcc-quick: claim lzAtMin needs compression none / lz4")
    assert lines[0].endswith("use design: full, or leave the claim out with `claims:`")
    assert "aliased with the block main effect" in lines[0]


def test_the_full_design_identifies_every_claim() -> None:
    full = _tpcc("full")
    assert [identification(c, full, EMULATES) for c in (LZ_AT_MIN, BLOCK_AVG, PMEM_AT_MIN)] == [None, None, None]
    assert design_refusals(full, EMULATES, OWN) == []
    assert design_refusals(full, EMULATES) == []  # the catalogue's claims too
    assert design_refusals(load_spec(QUICK_TPCC), EMULATES) == []  # the quick spec as committed


def test_claims_for_is_the_kinds_claims_with_levels_in_the_design() -> None:
    full = _tpcc("full")
    assert [c.id for c in claims_for(full, EMULATES, OWN)] == ["lzAtMin", "blockAvg", "pmemAtMin"]
    no_tmpfs = _tpcc("full", factors={**_raw()["factors"], "medium": ["disk", "ramblock"]})
    assert [c.id for c in claims_for(no_tmpfs, EMULATES, OWN)] == ["lzAtMin", "blockAvg"]  # no PMEM fsdax medium
    assert applicable(PMEM_AT_MIN, no_tmpfs, EMULATES) == "medium: no level emulates pmem-fsdax"
    assert applicable(THREADS_ONLY, full, EMULATES) == "judged on threads studies; tpcc-quick is a tpcc study"


def test_a_spec_names_its_claims_checked_against_the_registry() -> None:
    crossed = _tpcc("crossed", claims=["pmemAtMin"])
    assert [c.id for c in claims_for(crossed, EMULATES, OWN)] == ["pmemAtMin"]
    assert design_refusals(crossed, EMULATES, OWN) == []  # the aliased claims left out: the plan passes
    assert decided_lines(crossed, EMULATES, OWN) == [
        "claims decided here (1, the spec's claims:):",
        "  pmemAtMin: medium tmpfs / disk at cache 0 % (4 of 12 cells)"]
    with pytest.raises(SpecError, match=r"claims: 'nope' is not a claim of the registry; allowed for tpcc-quick "
                                        r"\(a tpcc study\): lzAtMin, blockAvg, pmemAtMin$"):
        claims_for(_tpcc("full", claims=["nope"]), EMULATES, OWN)
    with pytest.raises(SpecError, match="claims: threadsOnly cannot be decided by tpcc-quick: judged on threads "
                                        "studies; tpcc-quick is a tpcc study; allowed: lzAtMin"):
        claims_for(_tpcc("full", claims=["threadsOnly"]), EMULATES, OWN)
    with pytest.raises(SpecError, match="claims: .* must be a non-empty list of claim ids"):
        _tpcc("full", claims="pmemAtMin")
    with pytest.raises(SpecError, match="claims: pmemAtMin listed twice"):
        _tpcc("full", claims=["pmemAtMin", "pmemAtMin"])


def test_the_claim_list_is_recorded_but_not_in_the_digest() -> None:
    full, listed = _tpcc("full"), _tpcc("full", claims=["pmemAtMin"])
    assert listed.digest() == full.digest()
    assert listed.to_dict()["claims"] == ["pmemAtMin"] and "claims" not in full.to_dict()


def test_claim_cells_resolves_min_and_emulated_levels_like_the_estimators() -> None:
    crossed = _tpcc("crossed")
    # the half fraction C = AB: at cache 0 the cells are (4k, lz4) and (16k, none), on each of three media
    assert claim_cells(LZ_AT_MIN, crossed, EMULATES) == {
        f"myrocks-c0-b{b}-{c}-{m}-t4-tpcc" for b, c in (("4k", "lz4"), ("16k", "none"))
        for m in ("disk", "tmpfs", "ramblock")}
    assert claim_cells(PMEM_AT_MIN, crossed, EMULATES) == {
        f"myrocks-c0-b{b}-{c}-{m}-t4-tpcc" for b, c in (("4k", "lz4"), ("16k", "none")) for m in ("disk", "tmpfs")}
    assert claim_cells(BLOCK_AVG, crossed, EMULATES) == {c.cell_id for c in crossed.cells()}
    assert claim_cells(THREADS_ONLY, crossed, EMULATES) == frozenset()  # not this study's claim
    assert len(claim_cells(LZ_AT_MIN, _tpcc("full"), EMULATES)) == 12  # 2 blocks x 2 compressions x 3 media


# The processed runs of the quick TPC-C reference as it was recorded until 2026-11-29, in the crossed design
# (the half fraction of cache x block x compression crossed with the media; 48 real runs, commit 15ee651):
# the reference was measured again in the spec's full design, and this table keeps the crossed data.
CROSSED_RUNS = paths.repo_root() / "tests" / "fixtures" / "tpcc" / "quick-crossed-runs.csv"


def _reference_evidence(exp: Any) -> Evidence:
    runs = pd.read_csv(CROSSED_RUNS)
    return Evidence(exp.name, "tpcc", runs, dict(exp.factors), design=exp.design_info())


def test_the_plan_check_agrees_with_the_analysis_on_real_runs_of_the_crossed_tpcc_design() -> None:
    """Real runs of the quick TPC-C study in the crossed design (the quick reference until it was measured
    again): every registry claim (and our own) that the analysis of its runs calls "not identified" is
    refused by the plan-time check on the planned cells, with the same alias, and no other claim is."""
    crossed = _tpcc("crossed")
    assert len(crossed.cells()) == 12
    ev = _reference_evidence(crossed)
    claims = [c for c in (*CLAIMS, *OWN) if applicable(c, crossed, EMULATES) is None]
    assert len(claims) >= 5
    table = evaluate([ev], claims).claims.set_index("id")
    prefix = "not identified by this design: "
    seen = 0
    for c in claims:
        basis = str(table.loc[c.id, "basis"])
        planned = identification(c, crossed, EMULATES)
        assert basis.startswith(prefix) == (planned is not None), (c.id, basis, planned)
        if planned is not None:
            seen += 1
            assert basis.removeprefix(prefix).startswith(planned), (c.id, basis, planned)
    assert seen >= 3  # the block and lz4 claims


def test_reading_results_recorded_under_another_design_uses_the_recorded_design(tmp_path: Path) -> None:
    shipped, crossed = load_spec(QUICK_TPCC), _tpcc("crossed", comparisons=[
        {"factor": "block_size", "levels": ["4k", "16k"], "within": ["medium"]}])
    (tmp_path / "plan.json").write_text(json.dumps({"spec_digest": crossed.digest(), "spec": crossed.to_dict()}))
    back = recorded_design(shipped, tmp_path)
    assert (back.design, back.factors, back.comparisons) == (crossed.design, crossed.factors, crossed.comparisons)
    assert back.measure_s == shipped.measure_s and back.description == shipped.description  # the rest: the spec's
    assert recorded_design(shipped, tmp_path / "missing") is shipped
    (tmp_path / "plan.json").write_text(json.dumps({"spec_digest": shipped.digest(), "spec": crossed.to_dict()}))
    assert recorded_design(shipped, tmp_path) is shipped  # recorded with this very spec
    st = load_study("quick", spec=QUICK_TPCC, for_run=False, data="reference")
    assert st.experiment is not None and st.experiment.digest() == shipped.digest()  # measured in this design
    planned = load_study("quick", spec=QUICK_TPCC).experiment  # what a new run plans
    assert planned.design == "full" and planned.factors["block_size"] == ("16k",) and len(planned.cells()) == 12


def test_plan_and_run_refuse_the_old_quick_tpcc_design_and_plan_lists_the_claims(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from dbmatrix.cli import main

    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    monkeypatch.setenv("DBMATRIX_WORKDIR", str(tmp_path / "work"))
    spec = tmp_path / "crossed.yaml"
    spec.write_text(yaml.safe_dump(_raw(design="crossed")))
    for command in ("plan", "run"):
        assert main([command, "--profile", "quick", "--spec", str(spec), "--no-host-check"
                     if command == "plan" else "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dbmatrix: tpcc-quick: claim ")
        assert ("claim lzFourReads needs compression none / lz4 at engine myrocks, cache 0 % per medium, which the "
                "crossed design does not identify: at medium disk: compression x cache is aliased with the block "
                "main effect" in err) == any(c.id == "lzFourReads" for c in CLAIMS)  # the registry may rename it
        assert err.rstrip().endswith(f"(spec {spec}; nothing was run)")
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()  # nothing was made
    assert main(["plan", "--profile", "quick", "--spec", str(QUICK_TPCC), "--no-host-check"]) == 0
    out = capsys.readouterr().out
    assert "claims decided here (" in out and "(6 of 12 cells)" in out


def test_plan_refuses_a_claim_list_naming_a_claim_the_study_cannot_decide(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from dbmatrix.cli import main

    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    spec = tmp_path / "listed.yaml"
    spec.write_text(yaml.safe_dump({**yaml.safe_load(QUICK_TPCC.read_text()), "claims": ["noSuchClaim"]}))
    assert main(["plan", "--profile", "quick", "--spec", str(spec), "--no-host-check"]) == 2
    err = capsys.readouterr().err
    allowed = ", ".join(c.id for c in claims_for(load_spec(QUICK_TPCC)))
    assert err == (f"dbmatrix: claims: 'noSuchClaim' is not a claim of the registry; allowed for tpcc-quick (a tpcc "
                   f"study): {allowed}\n(spec {spec}; nothing was run)\n")
