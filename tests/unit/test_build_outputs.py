"""Where a build goes (issue 42, item 3): the committed build (the paper profile on the committed reference)
writes the tracked figures/ and paper/ and carries no commit, so rebuilding it leaves `git status` clean; every
other build (make reproduce, PROFILE=..., DATA=...) goes under build/<profile>[-<data>]/ through
DBMATRIX_BUILD_DIR, never into a tracked file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dbmatrix import paths
from dbmatrix.publish import paper


def make_var(name: str, *args: str) -> str:
    """A Makefile variable as make computes it with these command-line arguments (`make print-NAME`)."""
    return subprocess.run(["make", "-s", "-C", str(paths.repo_root()), f"print-{name}", *args],
                          capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.mark.parametrize(("args", "out"), [
    ((), "."),  # make figures / make paper: the committed build
    (("PROFILE=paper", "DATA=reference"), "."),
    (("PROFILE=quick",), "build/quick"),
    (("PROFILE=paper",), "build/paper"),  # the paper profile on your runs (DATA auto)
    (("DATA=runs",), "build/paper-runs"),
    (("PROFILE=quick", "DATA=reference"), "build/quick-reference"),
])
def test_only_the_paper_profile_on_the_reference_writes_the_tracked_build(args: tuple[str, ...], out: str) -> None:
    assert make_var("BUILD_OUT", *args) == out
    assert make_var("GEN", *args) == f"{out}/paper/generated"
    env = make_var("BUILD_ENV", *args)
    assert env == ("" if out == "." else f"DBMATRIX_BUILD_DIR={paths.repo_root()}/{out}")
    assert make_var("BUILD_DATA", *args) == {(): "reference", ("DATA=runs",): "runs"}.get(
        args, dict(a.split("=") for a in args).get("DATA", ""))


def test_make_reproduce_builds_under_build_whatever_the_profile() -> None:
    assert make_var("REPRO_OUT") == "build/quick"
    assert make_var("REPRO_OUT", "PROFILE=paper") == "build/paper"
    assert "build/" in (paths.repo_root() / ".gitignore").read_text().splitlines()


def test_the_build_dir_moves_figures_and_paper_but_not_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = paths.runs_root()
    monkeypatch.setenv("DBMATRIX_BUILD_DIR", str(tmp_path / "build" / "quick"))
    assert paths.figures_dir() == tmp_path / "build" / "quick" / "figures"
    assert paths.generated_dir() == tmp_path / "build" / "quick" / "paper" / "generated"
    assert paths.figures_dir(tmp_path / "x") == tmp_path / "x" / "figures"  # --out still wins
    assert paths.runs_root() == runs


def test_the_commit_is_in_the_untracked_build_macros(tmp_path: Path) -> None:
    assert paper.build_macros({"commit": "0123456789abcdef", "dirty": False}) == {"gitCommit": "0123456789ab"}
    assert paper.build_macros({"commit": "0123456789abcdef", "dirty": True}) == {"gitCommit": "0123456789ab-dirty"}
    assert paper.build_macros({"commit": None, "dirty": None})["gitCommit"].startswith("none")
    written = paper.write_build_macros(tmp_path / "generated")
    assert written.name == "build-macros.tex" and "\\gitCommit" in written.read_text()
    ignored = (paths.repo_root() / ".gitignore").read_text().splitlines()
    assert "paper/generated/build-macros.tex" in ignored and "paper/generated/build.json" in ignored
    tracked = subprocess.run(["git", "-C", str(paths.repo_root()), "grep", "-l", "gitCommit", "--", "paper/generated",
                              "figures"], capture_output=True, text=True).stdout
    assert tracked == "", f"a tracked generated file names the commit: {tracked}"
