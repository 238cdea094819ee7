"""The command line's conventions (issue 42, item 6): --version, no abbreviations, help when run bare, every
profile in the --profile help, --json for plan, status and verdicts, report files with the user's umask and
no silently created folders."""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from dbmatrix import cli, paths
from dbmatrix.cli import build_parser, main
from dbmatrix.run.matrix import summarize_plan
from dbmatrix.spec.experiment import load_spec
from dbmatrix.store import write_text_atomic

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("plan", "run", "status", "setup", "notebooks", "media", "sources", "analyse", "figures", "verdicts",
            "compare", "report", "readme", "paper")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs under tmp_path; the repository is this checkout."""
    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    monkeypatch.setenv("DBMATRIX_WORKDIR", str(tmp_path / "work"))
    monkeypatch.delenv("DBMATRIX_REPO", raising=False)
    monkeypatch.chdir(REPO)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """The top-level parser and every subcommand's."""
    p = build_parser()
    yield "dbmatrix", p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


# ------------------------------------------------------------------------------------------- --version

def test_version_prints_the_package_version_and_the_commit(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "git_state", lambda root=None: {"commit": "c0ffee" * 6 + "abcd", "dirty": True})
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"dbmatrix {version('dbmatrix')}"
    assert lines[1] == f"repository {REPO} at commit {'c0ffee' * 6}abcd + uncommitted changes"


def test_version_names_the_real_commit_of_this_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    state = paths.git_state(REPO)
    if state["commit"] is None:
        pytest.skip("not a git checkout")
    assert str(state["commit"]) in cli.version_text()


def test_version_outside_a_checkout_has_no_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DBMATRIX_REPO at a directory that is no checkout: the version alone, and where the code is."""
    monkeypatch.setenv("DBMATRIX_REPO", str(tmp_path))
    text = cli.version_text()
    assert text.startswith(f"dbmatrix {version('dbmatrix')}") and "commit" not in text
    assert f"code from {Path(cli.__file__).resolve().parents[1]}" in text


# ------------------------------------------------------------------------------------ no abbreviations

def test_no_parser_allows_abbreviations() -> None:
    seen = {name: p.allow_abbrev for name, p in parsers()}
    assert set(COMMANDS) <= set(seen)
    assert not any(seen.values()), [n for n, a in seen.items() if a]


@pytest.mark.parametrize("argv,bad", [
    (["plan", "--profil", "smoke"], "--profil"),
    (["status", "--prof", "smoke"], "--prof"),
    (["compare", "--fail", "5"], "--fail"),
    (["report", "--htm", "x.html"], "--htm"),
    (["run", "--max", "1", "--profile", "smoke"], "--max"),
])
def test_an_abbreviated_option_is_an_error(argv: list[str], bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Parsed only (not run through main): were abbreviations back, `run --max 1` would measure a run."""
    with pytest.raises(SystemExit) as ei:
        build_parser().parse_args(argv)
    assert ei.value.code == 2
    assert re.search(rf"unrecognized arguments: .*{re.escape(bad)}\b", capsys.readouterr().err)


def test_the_whole_option_still_works() -> None:
    assert build_parser().parse_args(["plan", "--profile", "smoke"]).profile == "smoke"


# ----------------------------------------------------------------------------------------------- bare

def test_bare_dbmatrix_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: dbmatrix") and captured.err == ""
    for command in COMMANDS:
        assert command in captured.out
    assert "--version" in captured.out


def test_options_without_a_command_are_still_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["--json"])
    assert ei.value.code == 2


# -------------------------------------------------------------------------------------- --profile help

def profile_helps() -> dict[str, str]:
    return {name: a.help or "" for name, p in parsers() for a in p._actions if "--profile" in a.option_strings}


def test_every_profile_help_lists_every_profile() -> None:
    helps = profile_helps()
    assert {"plan", "run", "status", "notebooks", "verdicts", "compare", "figures"} <= set(helps)
    profiles = sorted(p.stem for p in (REPO / "notebooks" / "params").glob("*.yaml"))
    assert "paper" in profiles
    for name, text in helps.items():
        for profile in profiles:
            assert re.search(rf"\b{profile}\b", text), (name, profile, text)


def test_the_profiles_come_from_the_params_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile added to notebooks/params/ is listed without touching the code (here: a copy of the
    repository's params with one more, named by DBMATRIX_REPO)."""
    fake = tmp_path / "repo"
    (fake / "notebooks" / "params").mkdir(parents=True)
    for p in (REPO / "notebooks" / "params").glob("*.yaml"):
        (fake / "notebooks" / "params" / p.name).write_text(p.read_text())
    (fake / "notebooks" / "params" / "nightly.yaml").write_text("spec: specs/smoke.yaml\n")
    monkeypatch.setenv("DBMATRIX_REPO", str(fake))
    for name, text in profile_helps().items():
        assert "nightly" in text and "paper" in text, name


# ---------------------------------------------------------------------------------------------- --json

def test_plan_json_has_what_the_text_shows(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "--profile", "smoke", "--no-host-check"]) == 0
    text = capsys.readouterr().out
    assert main(["plan", "--profile", "smoke", "--no-host-check", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not text.lstrip().startswith("{")  # the text is unchanged without --json
    exp = load_spec(REPO / "specs" / "smoke.yaml")
    summary = summarize_plan(exp)
    assert doc["profile"] == "smoke" and len(doc["studies"]) == 1
    study = doc["studies"][0]
    assert study["experiment"] == exp.name and study["digest"] == exp.digest() and study["seed"] == exp.seed
    assert f"experiment {exp.name} (spec {study['spec']}, digest {exp.digest()})" in text
    assert study["cells"] == len(exp.cells()) and study["repetitions"] == exp.repetitions
    assert [r["run_id"] for r in study["runs"]] == [r.run_id for r in summary.runs]
    for r in study["runs"]:
        assert re.search(rf"^\s*{r['order']}\s+{r['block']}\s+{re.escape(r['run_id'])}$", text, re.MULTILINE)
    assert study["datasets"] == summary.datasets
    assert study["estimate"]["estimated_wall_s"] == pytest.approx(summary.estimated_s)
    assert study["estimate"]["results_dir"] == str(tmp_path / "out" / "data" / "runs" / exp.name)
    assert [h["name"] for h in study["hosts"]] == ["localhost"]
    assert study["campaigns"]["auto_would_run"] in text
    assert study["claims"] == [line for line in study["claims"] if line in text]


def test_status_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--profile", "smoke"]) == 0
    text = capsys.readouterr().out
    assert main(["status", "--profile", "smoke", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (study,) = doc["studies"]
    assert study["experiment"] == "cache-sweep-smoke"
    line = f"{study['experiment']}: {study['ok']}/{study['planned']} runs done, {len(study['failed'])} failed, " \
           f"{study['pending']} not started"
    assert line in text and study["planned"] == 2 and study["pending"] == 2
    assert f"figures and paper read {study['reads']['path']} ({study['reads']['origin']};" in text
    assert study["next_auto"] in text and study["last_would_run"] in text


def test_verdicts_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Per claim: the verdict, the reason, the interval and its level, each campaign's verdict, each
    condition; the counts; strict JSON (a missing estimate is null, not NaN); the CSV files named."""
    from types import SimpleNamespace

    import pandas as pd

    from dbmatrix import steps
    from dbmatrix.analyse.judgement import ClaimVerdicts, Judgement
    from dbmatrix.commands import documents
    from dbmatrix.commands import studies as studies_cmd

    nan = float("nan")
    claims = pd.DataFrame({
        "id": ["blockSize", "pmemTps", "raid"], "seed": ["003", "003", "004"], "kind": "ratio",
        "estimate": [nan, 2.01, nan], "ci_lo": [nan, 1.61, nan], "ci_hi": [nan, 2.49, nan],
        "confidence": [0.9736, 0.9736, nan], "verdict": ["depends on compression", "agree", "not tested"],
        "reason": ["compression none disagree; ...", "", "no NVMe here"],
        "combine": ["all conditions", "primary: medium ramblock", ""],
        "heterogeneity": ["", "campaigns consistent (F = 0.81 on 1 and 20 df, p = 0.38)", ""],
        "basis": "", "campaigns": [2, 2, 0], "registration": "", "study": ["t", "t", ""]})
    camps = pd.DataFrame({"id": list(claims["id"]) * 2, "campaign": [1] * 3 + [2] * 3, "estimate": nan,
                          "ci_lo": nan, "ci_hi": nan,
                          "verdict": ["depends on compression", "agree", "", "depends on compression", "inconclusive",
                                      ""]})
    levels = pd.DataFrame([
        {"id": "blockSize", "level": "compression none", "campaign": 0, "estimate": 1.009, "ci_lo": 1.0,
         "ci_hi": 1.02, "verdict": "disagree"},
        {"id": "blockSize", "level": "compression lz4", "campaign": 0, "estimate": 1.227, "ci_lo": 1.2,
         "ci_hi": 1.25, "verdict": "agree"}])
    result = ClaimVerdicts(claims, camps, levels)
    study = SimpleNamespace(has_data=lambda: True, experiment=SimpleNamespace(name="t"), store=None)
    monkeypatch.setattr(studies_cmd, "studies_of", lambda args, for_run=True: [study])
    empty = ClaimVerdicts(claims.iloc[0:0], camps.iloc[0:0])
    monkeypatch.setattr(steps, "judgement_for", lambda s: (Judgement(result, empty), "judgement: judged now"))
    monkeypatch.setattr(steps, "campaign_lines", lambda table, s: ["campaign level of t: within-session"])
    monkeypatch.setattr(studies_cmd, "decision_lines", lambda costs, summary: [])
    monkeypatch.setattr(documents, "decisions_doc", lambda costs, summary: [])
    assert main(["verdicts", "--profile", "paper", "--data", "reference"]) == 0
    text = capsys.readouterr().out
    out_csv = tmp_path / "v.csv"
    assert main(["verdicts", "--profile", "paper", "--data", "reference", "--json", "--csv", str(out_csv)]) == 0
    raw = capsys.readouterr().out
    doc = json.loads(raw)  # one document, nothing else on stdout
    assert "NaN" not in raw
    rows = {r["id"]: r for r in doc["claims"]}
    assert list(rows) == ["blockSize", "pmemTps", "raid"]
    assert rows["pmemTps"]["verdict"] == "agree" and rows["pmemTps"]["estimate"] == 2.01
    assert (rows["pmemTps"]["ci_lo"], rows["pmemTps"]["ci_hi"]) == (1.61, 2.49)
    assert rows["pmemTps"]["confidence"] == pytest.approx(0.9736)
    assert rows["pmemTps"]["per_campaign"] == {"1": "agree", "2": "inconclusive"} and rows["pmemTps"]["flip"]
    assert rows["pmemTps"]["heterogeneity"] in text
    assert rows["blockSize"]["estimate"] is None and rows["blockSize"]["combine"] == "all conditions"
    assert [(c["level"], c["verdict"]) for c in rows["blockSize"]["conditions"]] == [
        ("compression none", "disagree"), ("compression lz4", "agree")]
    assert rows["raid"]["verdict"] == "not tested" and rows["raid"]["reason"] == "no NVMe here"
    assert doc["counts"] == {"agree": 1, "depends": 1, "not tested": 1}
    assert "claims: 1 agree, 1 depends on a condition, 1 not tested" in text
    assert doc["flipping"] == 1 and "flipping between campaigns: 1" in text
    assert doc["campaign_notes"] == ["campaign level of t: within-session"]
    assert doc["files"]["claims"] == str(out_csv) and Path(doc["files"]["levels"]).is_file()


# ------------------------------------------------------------------------------------------------ report

def test_report_into_a_missing_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "no" / "such" / "r.html"
    assert main(["report", "--html", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"folder {tmp_path / 'no' / 'such'} does not exist" in err
    assert not (tmp_path / "no").exists()


def test_report_is_written_with_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from dbmatrix.publish import report

    monkeypatch.setattr(report, "load_inputs", lambda out=None: None)
    monkeypatch.setattr(report, "render", lambda inputs: "<!doctype html><title>r</title>")
    target = tmp_path / "r.html"
    assert main(["report", "--html", str(target)]) == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    os.umask(0o027)
    assert main(["report", "--html", str(target)]) == 0  # replacing the file: the umask of now
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_take_the_umask(tmp_path: Path, umask_022: None, mask: int, mode: int) -> None:
    os.umask(mask)
    write_text_atomic(tmp_path / "a.txt", "x")
    write_text_atomic(tmp_path / "b.bin", b"x")
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "b.bin").stat().st_mode) == mode
