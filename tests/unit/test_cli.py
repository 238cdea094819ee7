"""Tests of the `dbmatrix plan` command line (nothing is run; no servers, no network)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from dbmatrix import paths
from dbmatrix.cli import build_parser, main
from dbmatrix.run.matrix import format_duration, summarize_plan
from dbmatrix.spec.experiment import load_spec


@pytest.fixture(autouse=True)
def _isolated_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Results directories resolve under tmp_path, never the repository's data/."""
    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    monkeypatch.setenv("DBMATRIX_WORKDIR", str(tmp_path / "work"))


def test_plan_smoke_prints_runs_and_duration(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    exp = load_spec(paths.repo_root() / "specs" / "smoke.yaml")
    summary = summarize_plan(exp)
    assert f"experiment {exp.name}" in out and exp.digest() in out
    assert f"= {len(summary.runs)} runs on localhost" in out
    for run in summary.runs:
        assert re.search(rf"^\s*{run.order}\s+{run.block}\s+{re.escape(run.run_id)}$", out, re.MULTILINE), run.run_id
    for ds in summary.datasets:
        assert ds in out
    assert f"estimated duration: {format_duration(summary.estimated_s)}" in out
    assert re.search(r"estimated duration: (\d+h)?\d+m\d\ds", out)
    assert str(tmp_path / "out" / "data" / "runs" / "cache-sweep-smoke") in out
    assert not (tmp_path / "out").exists()  # planning writes nothing


def test_plan_unknown_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope'" in err and "allowed" in err
    assert "smoke" in err and "quick" in err


def test_plan_with_a_bad_spec_names_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    raw = yaml.safe_load((paths.repo_root() / "specs" / "smoke.yaml").read_text())
    raw["factors"]["cache_pct"] = [25, 150]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    assert main(["plan", "--profile", "smoke", "--spec", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("dbmatrix: factors.cache_pct:")
    assert "150" in captured.err
    assert captured.out == ""


def test_plan_with_a_missing_spec(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "--profile", "smoke", "--spec", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_plan_with_a_medium_missing_from_the_inventory(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "db1", "media": {"nvme": {"kind": "dir"}}}]}))
    assert main(["plan", "--profile", "smoke", "--inventory", str(inv)]) == 2
    err = capsys.readouterr().err
    assert "factors.medium" in err and "'db1'" in err and "nvme" in err


def test_parser_requires_a_command() -> None:
    with pytest.raises(SystemExit) as ei:
        build_parser().parse_args([])
    assert ei.value.code == 2


def test_media_plan_prints_the_exact_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["media", "plan", "tmpfs"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# localhost tmpfs (tmpfs)\n") and "mount -t tmpfs -o size=" in out


def test_media_unknown_name_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["media", "verify", "nvme"]) == 2
    assert "media: nvme not defined on host 'localhost'" in capsys.readouterr().err


def test_plan_of_the_quick_profile_names_the_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--profile", "quick"]) == 0
    out = capsys.readouterr().out
    assert "design: 2^(5-1) fraction of resolution 5 (generators E=ABCD" in out
    assert "media: disk, tmpfs (emulates pmem-fsdax)" in out


def test_plan_of_a_profile_covers_every_study(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--profile", "quick"]) == 0
    out = capsys.readouterr().out
    assert "experiment storage-matrix-quick" in out and "experiment threads-quick" in out
    assert re.search(r"profile quick: \d+ studies, estimated (\d+h)?\d+m\d\ds in all", out)


def test_results_dir_needs_one_spec(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["status", "--profile", "quick", "--results", str(tmp_path / "r")]) == 2
    assert "give --spec too, or use --data DIR" in capsys.readouterr().err


def test_sources_say_where_each_study_reads(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["sources", "--profile", "quick"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"storage-matrix-quick\s+storage\s+data/reference/storage-matrix-quick \(reference; "
                     r"completed runs; --data auto: no runs of your own yet\)", out)
    assert re.search(r"threads-quick\s+threads\s+\S+ \((reference|runs); ", out)
    assert main(["sources", "--profile", "quick", "--make"]) == 0
    mk = capsys.readouterr().out
    stamp = "data/reference/storage-matrix-quick/processed/analysis.json"
    assert re.search(rf"^STUDY_STAMPS := (\S+ )*{re.escape(stamp)}( |$)", mk, re.MULTILINE)
    assert re.search(rf"^{re.escape(stamp)}: \$\(wildcard data/reference/storage-matrix-quick/raw/\*/manifest"
                     r"\.json\) specs/quick\.yaml \$\(ANALYSIS_CODE\)$", mk, re.MULTILINE)
    assert "\t$(BIN)/dbmatrix analyse --profile quick --spec specs/quick.yaml --results " \
           "data/reference/storage-matrix-quick" in mk
    assert main(["sources", "--profile", "quick", "--data", str(tmp_path), "--make"]) == 0
    other = capsys.readouterr().out
    assert "STUDY_STAMPS := \n" in other and "storage-matrix-quick" in other.splitlines()[3]  # nothing there


def test_notebook_parameters_make_directories_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Notebooks run in notebooks/: a relative --data or --results must not be read from there."""
    from dbmatrix.commands.notebooks import notebook_parameters

    monkeypatch.chdir(tmp_path)
    p = notebook_parameters("quick", data="data/reference", spec="specs/quick.yaml")
    assert p == {"profile": "quick", "inventory": None, "data": str(tmp_path / "data" / "reference"),
                 "spec": str(tmp_path / "specs" / "quick.yaml")}
    assert notebook_parameters("smoke", results="r")["results_dir"] == str(tmp_path / "r")
    # the data choice: auto unless given (the notebooks' own default is the reference); keywords stay words
    assert notebook_parameters("quick")["data"] == "auto"
    assert notebook_parameters("quick", data="reference")["data"] == "reference"


def test_the_command_line_asks_notebooks_00_and_10_to_act(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As committed 00 and 10 only print their plans; `dbmatrix notebooks` (make reproduce, make smoke) is
    the explicit request, so it injects confirm_install / run = True into those two and no other."""
    import papermill

    from dbmatrix.commands import notebooks

    seen: dict[str, dict[str, object]] = {}
    monkeypatch.setattr(papermill, "execute_notebook",
                        lambda src, dst, parameters, **kw: seen.setdefault(Path(src).stem, parameters))
    notebooks.run_notebooks("smoke", notebooks.NOTEBOOKS, results=str(tmp_path / "r"))
    assert seen["00-host-setup"]["confirm_install"] is True and seen["10-run-matrix"]["run"] is True
    assert not {"confirm_install", "run"} & (set(seen["20-analysis"]) | set(seen["30-figures"]))
    assert seen["20-analysis"]["data"] == "auto"


# ------------------------------------------------------------------------------ paths as a user expects

def test_relative_paths_are_relative_to_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "lab"
    (work / "conf").mkdir(parents=True)
    (work / "conf" / "smoke.yaml").write_text((paths.repo_root() / "specs" / "smoke.yaml").read_text())
    (work / "conf" / "hosts.yaml").write_text(yaml.safe_dump({"hosts": [{"name": "here", "media": {
        "disk": {"kind": "dir", "path": str(tmp_path / "disk")}}}]}))
    monkeypatch.chdir(work)
    assert main(["plan", "--profile", "smoke", "--spec", "conf/smoke.yaml", "--inventory", "conf/hosts.yaml",
                 "--results", "res/smoke"]) == 0
    out = capsys.readouterr().out
    assert f"(spec {work / 'conf' / 'smoke.yaml'}," in out and "runs on here" in out
    assert f"(results in {work / 'res' / 'smoke'})" in out
    assert main(["plan", "--profile", "smoke", "--spec", "conf/smoke.yaml", "--data", "d"]) == 0
    assert f"(results in {work / 'd' / 'cache-sweep-smoke'})" in capsys.readouterr().out


def test_a_relative_path_found_only_in_the_repository_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--profile", "smoke", "--spec", "specs/smoke.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dbmatrix: --spec: file '{tmp_path / 'specs' / 'smoke.yaml'}' does not exist")
    assert f"did you mean {paths.repo_root() / 'specs' / 'smoke.yaml'}?" in err
    assert main(["plan", "--profile", "smoke", "--inventory", "nowhere.yaml"]) == 2
    assert "dbmatrix: --inventory: file" in capsys.readouterr().err


def test_output_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out DIR: DIR/figures and DIR/paper/generated; without it the output root (the repository unless
    DBMATRIX_OUTPUT_ROOT says otherwise), as before."""
    assert paths.figures_dir() == tmp_path / "out" / "figures"  # DBMATRIX_OUTPUT_ROOT (the autouse fixture)
    assert paths.generated_dir() == tmp_path / "out" / "paper" / "generated"
    monkeypatch.chdir(tmp_path)
    assert paths.figures_dir("explore") == tmp_path / "explore" / "figures"
    assert paths.generated_dir("explore") == tmp_path / "explore" / "paper" / "generated"
    assert paths.paper_dir(tmp_path / "x") == tmp_path / "x" / "paper"
    monkeypatch.delenv("DBMATRIX_OUTPUT_ROOT")
    assert paths.figures_dir() == paths.repo_root() / "figures"
    args = build_parser().parse_args(["figures", "--out", "explore"])
    assert args.out == "explore"


def test_figures_without_data_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["figures", "--profile", "smoke", "--results", "empty", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dbmatrix: figures: no study has completed runs: cache-sweep-smoke (")
    assert str(tmp_path / "empty") in err and not (tmp_path / "o").exists()


def test_verdicts_prints_each_interval_with_its_level_the_combination_and_each_condition(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`dbmatrix verdicts`: per claim the pooled estimate with its interval and level, how its conditions
    combine ("one condition" for a claim judged at one), a "depends on" verdict with each condition's
    verdict, the campaigns' consistency test, and the counts per class; no "premise not met" verdict."""
    from types import SimpleNamespace

    import pandas as pd

    from dbmatrix import steps
    from dbmatrix.analyse.judgement import ClaimVerdicts, Judgement
    from dbmatrix.commands import studies as studies_cmd

    claims = pd.DataFrame({
        "id": ["lzFourWrites", "blockSize", "pmemTps", "raid"], "seed": ["003", "003", "003", "004"],
        "kind": "ratio", "estimate": [1.037, float("nan"), 2.01, float("nan")],
        "ci_lo": [1.02, float("nan"), 1.61, float("nan")], "ci_hi": [1.05, float("nan"), 2.49, float("nan")],
        "confidence": [0.9736, 0.9736, 0.9736, float("nan")],
        "verdict": ["not tested", "depends on compression", "agree", "not tested"],
        "reason": ["premise uncertain: flush bytes in 54 of 144 windows", "compression none disagree; ...", "",
                   "no NVMe here"],
        "combine": ["", "all conditions", "primary: medium ramblock; tmpfs as sensitivity", ""],
        "heterogeneity": ["campaigns consistent (F = 0.81 on 1 and 20 df, p = 0.38)", "", "", ""],
        "basis": "", "campaigns": [2, 2, 2, 0], "registration": "", "study": ["t", "t", "t", ""]})
    camps = pd.DataFrame({"id": list(claims["id"]) * 2, "campaign": [1] * 4 + [2] * 4, "estimate": float("nan"),
                          "ci_lo": float("nan"), "ci_hi": float("nan"),
                          "verdict": ["agree", "depends on compression", "agree", ""] * 2})
    levels = pd.DataFrame([
        {"id": "blockSize", "level": "compression none", "campaign": 0, "estimate": 1.009, "ci_lo": 1.0,
         "ci_hi": 1.02, "verdict": "disagree"},
        {"id": "blockSize", "level": "compression lz4", "campaign": 0, "estimate": 1.227, "ci_lo": 1.2,
         "ci_hi": 1.25, "verdict": "agree"},
        {"id": "pmemTps", "level": "medium tmpfs", "campaign": 0, "estimate": 4.25, "ci_lo": 3.42, "ci_hi": 5.29,
         "verdict": "inconclusive"},
        {"id": "pmemTps", "level": "medium ramblock", "campaign": 0, "estimate": 2.01, "ci_lo": 1.61,
         "ci_hi": 2.49, "verdict": "agree"}])
    result = ClaimVerdicts(claims, camps, levels)
    study = SimpleNamespace(has_data=lambda: True, experiment=SimpleNamespace(name="t"), store=None)
    monkeypatch.setattr(studies_cmd, "studies_of", lambda args, for_run=True: [study])
    empty = ClaimVerdicts(claims.iloc[0:0], camps.iloc[0:0])
    monkeypatch.setattr(steps, "judgement_for", lambda s: (Judgement(result, empty), "judgement: judged now"))
    monkeypatch.setattr(steps, "campaign_lines", lambda table, s: [])
    monkeypatch.setattr(studies_cmd, "decision_lines", lambda costs, summary: [])
    out_csv = tmp_path / "v.csv"
    assert main(["verdicts", "--profile", "paper", "--data", "reference", "--csv", str(out_csv)]) == 0
    out = capsys.readouterr().out
    assert "lzFourWrites (003): not tested\n    estimate 1.04 [1.02, 1.05] (97.4 % CI)\n    conditions: one condition" \
        in out
    assert "campaigns consistent (F = 0.81 on 1 and 20 df, p = 0.38)" in out
    assert "why: premise uncertain: flush bytes in 54 of 144 windows" in out
    assert ("blockSize (003): depends on compression\n    compression none: 1.01 [1.00, 1.02] disagree (97.4 % CI)\n"
            "    compression lz4: 1.23 [1.20, 1.25] agree (97.4 % CI)\n    conditions: all conditions") in out
    assert ("pmemTps (003): agree\n    medium tmpfs: 4.25 [3.42, 5.29] inconclusive (97.4 % CI)\n    medium "
            "ramblock: 2.01 [1.61, 2.49] agree (97.4 % CI)") in out  # the primary's interval: said once
    assert "conditions: primary: medium ramblock; tmpfs as sensitivity" in out
    assert "raid (004): not tested; no NVMe here" in out
    assert "claims: 1 agree, 1 depends on a condition, 2 not tested" in out
    assert "premise not met" not in out and "(a consistency check)" in out
    assert (tmp_path / "v-levels.csv").is_file() and (tmp_path / "v-campaigns.csv").is_file()
