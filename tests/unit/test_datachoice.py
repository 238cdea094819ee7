"""The data choice: which results analysis, figures and the paper read (dbmatrix.datachoice), as a pure rule
and through load_study / `dbmatrix status` on a temporary output root beside the committed reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbmatrix import cli, paths
from dbmatrix.campaign_state import CampaignState
from dbmatrix.datachoice import choose_source, is_keyword, parse_choice
from dbmatrix.record import RunRecord
from dbmatrix.study import data_source, load_study

RUNS, REF = Path("/r/runs/x"), Path("/r/reference/x")


def pick(choice, states, reference_exists=True):
    return choose_source("x", choice, runs=RUNS, reference=REF, reference_exists=reference_exists,
                         runs_states=states)


def test_parse_choice_keywords_and_directories():
    assert [parse_choice(v) for v in (None, "", " Auto ", "REFERENCE", "runs")] == ["auto", "auto", "auto",
                                                                                   "reference", "runs"]
    assert parse_choice("data/mine") == "data/mine" and not is_keyword("data/mine") and is_keyword(None)


def test_auto_keeps_the_reference_until_a_campaign_of_your_own_is_complete():
    assert pick("auto", []).path == REF
    one_ok = [CampaignState(1, 32, 1)]
    src = pick(None, one_ok)
    assert (src.path, src.origin) == (REF, "reference") and "1/32 runs ok" in src.reason
    assert "--data runs" in src.reason
    done = pick("auto", [CampaignState(1, 32, 32), CampaignState(2, 32, 3)])
    assert (done.path, done.origin) == (RUNS, "runs") and "campaign(s) 1" in done.reason


def test_auto_without_a_reference_reads_whatever_the_runs_hold():
    src = pick("auto", [CampaignState(1, 2, 1)], reference_exists=False)
    assert (src.path, src.origin) == (RUNS, "runs") and "no committed reference" in src.reason


def test_explicit_choices_win_over_the_rule():
    assert pick("runs", [CampaignState(1, 32, 1)]).path == RUNS
    assert pick("reference", [CampaignState(1, 32, 32)]).path == REF
    assert "not run" in pick("reference", [], reference_exists=False).reason
    d = pick("/some/root", [CampaignState(1, 32, 32)])
    assert (d.path, d.origin) == (Path("/some/root/x"), "dir")


@pytest.fixture
def out_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    return tmp_path / "out"


def _ok_runs(study, n: int | None = None) -> None:
    """Manifests of the first `n` planned runs of campaign 1 (all when None), status ok."""
    for r in study.experiment.plan(1)[:n]:
        _ok_run(study, r)


def _ok_run(study, r) -> None:
    d = study.store.raw / r.run_id
    d.mkdir(parents=True)
    d.joinpath("manifest.json").write_text(RunRecord(
        run_id=r.run_id, experiment=study.experiment.name, cell_id=r.cell.cell_id, cell=r.cell.levels(),
        repetition=r.repetition, host="localhost", campaign=1, status="ok").to_json())


def test_one_ok_run_does_not_switch_a_study_off_the_reference(out_root: Path):
    ref = paths.reference_dir("storage-matrix-quick")
    runs = load_study("quick")  # where runs go
    _ok_runs(runs, 1)
    reading = load_study("quick", for_run=False)
    assert reading.store.root == ref and reading.source is not None and reading.source.choice == "auto"
    assert load_study("quick", data="runs", for_run=False).store.root == runs.store.root
    for r in runs.experiment.plan(1)[1:]:  # the rest of campaign 1: now your complete campaign is read
        _ok_run(runs, r)
    assert data_source(runs.experiment).path == runs.store.root
    assert load_study("quick", data="reference", for_run=False).store.root == ref


def test_status_shows_the_data_choice(out_root: Path, capsys: pytest.CaptureFixture[str]):
    assert cli.main(["status", "--profile", "quick", "--spec", "specs/quick.yaml"]) == 0
    out = capsys.readouterr().out
    assert ("storage-matrix-quick: figures and paper read data/reference/storage-matrix-quick (reference; "
            "--data auto: no runs of your own yet)") in out
    assert cli.main(["status", "--profile", "quick", "--spec", "specs/quick.yaml", "--data", "runs"]) == 0
    assert "read data/runs/storage-matrix-quick (runs; --data runs: asked for: no runs)" in capsys.readouterr().out
