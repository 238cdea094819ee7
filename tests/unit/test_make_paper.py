"""`make run` / `make reproduce` with PROFILE=paper pass `--until-decided --budget $(BUDGET)` to `dbmatrix run`;
every other profile's command line is what it always was."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from dbmatrix import paths

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def dry_run(*args: str) -> list[str]:
    # the stamps emptied: only the recipe of `run` itself is printed (nothing is executed: no recursive make)
    r = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(paths.repo_root()), "run", "PY_STAMP=",
                        "OS_SERVER=", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.strip() for line in r.stdout.splitlines() if "dbmatrix" in line]


def test_run_of_the_paper_profile_repeats_until_decided_within_a_budget() -> None:
    assert dry_run("PROFILE=paper") == [".venv/bin/dbmatrix run --profile paper --campaign auto --until-decided "
                                        "--budget 2h15m"]
    assert dry_run("PROFILE=paper", "BUDGET=3h", "CAMPAIGN=new")[0].endswith("--campaign new --until-decided "
                                                                           "--budget 3h")


@pytest.mark.parametrize("profile", ["quick", "smoke", "full"])
def test_other_profiles_run_as_before(profile: str) -> None:
    assert dry_run(f"PROFILE={profile}") == [f".venv/bin/dbmatrix run --profile {profile} --campaign auto"]


def test_reproduce_of_the_paper_profile_runs_then_analyses_that_campaign() -> None:
    text = (paths.repo_root() / "Makefile").read_text()
    block = text.split("\nreproduce:", 1)[1].split("\nrun:", 1)[0]
    assert ("ifeq ($(PROFILE),paper)\n\t$(BIN)/dbmatrix run --profile paper --campaign $(CAMPAIGN) --until-decided "
            "--budget $(BUDGET) $(DATA_ARG)\n\tDBMATRIX_BUILD_DIR=$(CURDIR)/$(REPRO_OUT) $(BIN)/dbmatrix notebooks "
            "--profile paper --campaign last $(DATA_ARG)\nelse\n\tDBMATRIX_BUILD_DIR=$(CURDIR)/$(REPRO_OUT) "
            "$(BIN)/dbmatrix notebooks --profile $(PROFILE) --campaign $(CAMPAIGN) \\\n\t  $(DATA_ARG)\nendif\n"
            "\t$(MAKE) --no-print-directory paper") in block  # its build in build/<profile>/ (REPRO_OUT)


def _help(*args: str, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(paths.repo_root()), "help", *args],
                       capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k not in ("PROFILE", "MAKEFLAGS")} | (env or {}))
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_figures_and_paper_draw_the_paper_profile_unless_profile_is_given() -> None:
    """The tracked figures/ and paper/ are the paper profile's build: `make figures` on a fresh clone redraws
    them; PROFILE picks another profile's studies; reproduce builds the paper of the profile it measured."""
    assert "the paper profile's studies" in _help()
    assert "the quick profile's studies" in _help("PROFILE=quick")
    assert "the quick profile's studies" in _help(env={"PROFILE": "quick"})  # the environment counts as given
    text = (paths.repo_root() / "Makefile").read_text()
    block = text.split("\nreproduce:", 1)[1].split("\nrun:", 1)[0]
    assert "$(MAKE) --no-print-directory paper PROFILE=$(PROFILE)" in block
