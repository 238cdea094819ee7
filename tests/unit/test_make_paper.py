"""`make run` / `make reproduce` run one campaign of any profile (the paper profile's claims are judged after
every campaign: no --until-decided within one)."""

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


@pytest.mark.parametrize("profile", ["paper", "quick", "smoke", "full"])
def test_every_profile_runs_one_campaign(profile: str) -> None:
    assert dry_run(f"PROFILE={profile}") == [f".venv/bin/dbmatrix run --profile {profile} --campaign auto"]
    assert dry_run(f"PROFILE={profile}", "CAMPAIGN=new") == [
        f".venv/bin/dbmatrix run --profile {profile} --campaign new"]


def test_reproduce_runs_the_notebooks_of_one_campaign_then_builds_its_paper() -> None:
    text = (paths.repo_root() / "Makefile").read_text()
    block = text.split("\nreproduce:", 1)[1].split("\nrun:", 1)[0]
    assert ("\tDBMATRIX_BUILD_DIR=$(CURDIR)/$(REPRO_OUT) $(BIN)/dbmatrix notebooks --profile $(PROFILE) --campaign "
            "$(CAMPAIGN) \\\n\t  $(DATA_ARG)\n\t$(MAKE) --no-print-directory paper") in block
    assert "until-decided" not in text and "BUDGET" not in text


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
