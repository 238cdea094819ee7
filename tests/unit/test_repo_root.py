"""The repository is the working directory's checkout (issue 42, item 4): `paths.repo_root()` walks up from
the current directory to the nearest checkout of this project, falls back to the package's own checkout
outside any, and `DBMATRIX_REPO` wins over both."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from dbmatrix import paths
from dbmatrix.cli import main

REPO = Path(__file__).resolve().parents[2]
PACKAGE_CHECKOUT = Path(paths.__file__).resolve().parents[2]


def checkout(root: Path, name: str = "dbmatrix", lib: bool = True) -> Path:
    """A fake checkout: pyproject.toml naming project `name`, and lib/dbmatrix/ (with `lib`)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0"\n')
    if lib:
        (root / "lib" / "dbmatrix").mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBMATRIX_REPO", raising=False)


def test_each_checkout_reads_its_own_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = checkout(tmp_path / "one"), checkout(tmp_path / "two")
    (two / "notebooks" / "params").mkdir(parents=True)
    monkeypatch.chdir(one)
    assert paths.repo_root() == one.resolve()
    monkeypatch.chdir(two / "notebooks" / "params")  # anywhere inside: the nearest checkout up from it
    assert paths.repo_root() == two.resolve()
    assert paths.params_file("quick") == two.resolve() / "notebooks" / "params" / "quick.yaml"
    assert paths.reference_root() == two.resolve() / "data" / "reference"
    monkeypatch.chdir(one)
    assert paths.repo_root() == one.resolve()  # nothing cached between calls


def test_the_nearest_checkout_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outer = checkout(tmp_path / "outer")
    inner = checkout(outer / "vendor" / "inner")
    monkeypatch.chdir(inner / "lib")
    assert paths.repo_root() == inner.resolve()
    monkeypatch.chdir(outer / "vendor")
    assert paths.repo_root() == outer.resolve()


def test_only_a_checkout_of_this_project_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another project's pyproject.toml, or one without lib/dbmatrix/, is not a checkout: the walk goes on
    past it (here to no checkout: the package's own)."""
    other = checkout(tmp_path / "other", name="something-else")
    bare = checkout(tmp_path / "bare", lib=False)
    broken = checkout(tmp_path / "broken")
    (broken / "pyproject.toml").write_text("[project\nname = ")
    for d in (other, bare, broken):
        assert not paths.is_checkout(d)
        monkeypatch.chdir(d)
        assert paths.repo_root() == PACKAGE_CHECKOUT


def test_outside_any_checkout_the_package_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert paths.checkout_of(tmp_path) is None
    assert paths.repo_root() == PACKAGE_CHECKOUT


def test_a_removed_working_directory_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert paths.repo_root() == PACKAGE_CHECKOUT


def test_dbmatrix_repo_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = checkout(tmp_path / "one"), checkout(tmp_path / "two")
    monkeypatch.chdir(two)
    monkeypatch.setenv("DBMATRIX_REPO", str(one))
    assert paths.repo_root() == one.resolve()
    monkeypatch.chdir(tmp_path)  # outside any checkout: still the override
    assert paths.repo_root() == one.resolve()


def test_an_edited_pyproject_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = checkout(tmp_path / "one")
    monkeypatch.chdir(one)
    assert paths.repo_root() == one.resolve()
    (one / "pyproject.toml").write_text('[project]\nname = "renamed-project"\n')
    os.utime(one / "pyproject.toml", ns=(1, 1))  # a different mtime even on a coarse clock
    assert paths.repo_root() == PACKAGE_CHECKOUT


def test_profiles_are_the_checkouts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = checkout(tmp_path / "one")
    (one / "notebooks" / "params").mkdir(parents=True)
    for name in ("alpha", "beta"):
        (one / "notebooks" / "params" / f"{name}.yaml").write_text("spec: specs/x.yaml\n")
    monkeypatch.chdir(one)
    assert paths.profiles() == ["alpha", "beta"]
    monkeypatch.chdir(REPO)
    assert {"smoke", "quick", "paper", "full"} <= set(paths.profiles())


def test_plan_in_a_second_checkout_reads_that_checkouts_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The bug of issue 42: with one .venv, `dbmatrix plan` in a second clone printed the first clone's spec."""
    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    monkeypatch.setenv("DBMATRIX_WORKDIR", str(tmp_path / "work"))
    second = checkout(tmp_path / "second")
    (second / "notebooks" / "params").mkdir(parents=True)
    (second / "specs").mkdir()
    (second / "notebooks" / "params" / "smoke.yaml").write_text((REPO / "notebooks/params/smoke.yaml").read_text())
    spec = yaml.safe_load((REPO / "specs" / "smoke.yaml").read_text())
    spec["seed"] = 4242
    (second / "specs" / "smoke.yaml").write_text(yaml.safe_dump(spec))
    monkeypatch.chdir(second)
    assert main(["plan", "--profile", "smoke", "--no-host-check"]) == 0
    out = capsys.readouterr().out
    assert f"(spec {second.resolve() / 'specs' / 'smoke.yaml'}," in out and "seed 4242" in out
