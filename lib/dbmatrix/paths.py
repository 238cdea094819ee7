"""Where things are: the repository, the data layout, and the output root that tests redirect.

The repository (:func:`repo_root`: specs, params, the committed reference, figures/, paper/) is the checkout the
current directory lies in: the nearest directory at or above it holding ``lib/dbmatrix/`` and a pyproject.toml
whose ``[project] name`` is ``dbmatrix``, so two checkouts sharing one ``.venv`` each read their own tree.
Outside any checkout it is the one the package is installed from. `DBMATRIX_REPO` names it outright and wins
over both.

Data layout (under ``data/``)::

    reference/<experiment>/   the committed reference dataset (a real quick run); never written by runs
    runs/<experiment>/        new runs (gitignored); a rerun resumes there
    notebooks/<profile>/      the executed notebooks of the last `make reproduce`/`make figures`

Which of them figures and paper inputs read is the data choice (:mod:`dbmatrix.datachoice`: ``--data
auto|reference|runs|DIR``, ``make figures DATA=…``), applied in :func:`dbmatrix.study.data_source`.

`DBMATRIX_BUILD_DIR` moves one build's figures/, paper/generated/ and paper/ (not its runs) elsewhere: ``make
reproduce`` and every ``make figures``/``make paper`` other than the committed build (the paper profile on the
committed reference) build under ``build/<profile>/``, so a user's build never changes tracked files.
`DBMATRIX_OUTPUT_ROOT` replaces the repository as the home of data/runs, data/notebooks, figures/ and
paper/generated/, so tests never touch the repository; the committed reference stays where it is
(read-only for tests too; `DBMATRIX_REFERENCE` points it at a copy, as the notebook tests do, whose
analysis writes the processed tables beside the raw runs). An explicit output directory (``dbmatrix
figures --out DIR``) takes precedence over both for figures and paper inputs: ``DIR/figures`` and
``DIR/paper/generated``, the repository's layout, so ``dbmatrix paper --out DIR`` builds the paper there.
"""

from __future__ import annotations

import functools
import os
import shlex
import tomllib
from pathlib import Path
from typing import Any

PROJECT = "dbmatrix"  # the [project] name in pyproject.toml that marks a checkout of this repository


def is_checkout(path: Path) -> bool:
    """Whether `path` is the top of a checkout of this project: it holds ``lib/dbmatrix/`` and a
    pyproject.toml whose ``[project] name`` is ``dbmatrix``."""
    pyproject = path / "pyproject.toml"
    if not (path / "lib" / PROJECT).is_dir():
        return False
    try:
        st = pyproject.stat()
    except OSError:
        return False
    return _names_project(str(pyproject), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _names_project(pyproject: str, mtime_ns: int, size: int) -> bool:
    """Whether this version (path, mtime, size) of a pyproject.toml names this project: parsed once per
    version, so an edited or replaced file is read again."""
    try:
        with open(pyproject, "rb") as f:
            return tomllib.load(f).get("project", {}).get("name") == PROJECT
    except (OSError, tomllib.TOMLDecodeError, AttributeError):
        return False


def checkout_of(start: Path) -> Path | None:
    """The nearest checkout of this project at or above `start`, or None."""
    start = start.resolve()
    return next((d for d in (start, *start.parents) if is_checkout(d)), None)


def repo_root() -> Path:
    """The repository the commands read and write: `DBMATRIX_REPO` if set, else the checkout the current
    directory lies in (the nearest one up from it), else the checkout the package is installed from.
    Looked up on every call, since tests change directory and environment (only the parse of each
    pyproject.toml version is cached)."""
    env = os.environ.get("DBMATRIX_REPO")
    if env:
        return Path(env).resolve()
    try:
        here = checkout_of(Path.cwd())
    except OSError:  # the current directory was removed
        here = None
    return here or Path(__file__).resolve().parents[2]


def output_root() -> Path:
    env = os.environ.get("DBMATRIX_OUTPUT_ROOT")
    return Path(env).resolve() if env else repo_root()


def runs_root() -> Path:
    """Where new runs go: ``data/runs`` under the output root."""
    return output_root() / "data" / "runs"


def reference_root() -> Path:
    """The committed reference data of the repository (never a target of runs), or the copy
    `DBMATRIX_REFERENCE` names."""
    env = os.environ.get("DBMATRIX_REFERENCE")
    return Path(env).resolve() if env else repo_root() / "data" / "reference"


def run_dir(experiment: str) -> Path:
    """The results directory new runs of `experiment` go to (and resume in)."""
    return runs_root() / experiment


def reference_dir(experiment: str) -> Path:
    return reference_root() / experiment


def notebooks_dir(profile: str) -> Path:
    """Executed notebooks of a profile (the notebooks span the profile's studies)."""
    return output_root() / "data" / "notebooks" / profile


def build_root() -> Path:
    """Where figures, paper inputs and the paper of a build go: `DBMATRIX_BUILD_DIR` (a user's build, e.g.
    ``build/quick`` from ``make reproduce``, which must not overwrite the committed build), else the output
    root (the committed build: the repository's tracked figures/ and paper/generated/)."""
    env = os.environ.get("DBMATRIX_BUILD_DIR")
    return Path(env).resolve() if env else output_root()


def figures_dir(out: str | os.PathLike[str] | None = None) -> Path:
    """``<out>/figures`` (``dbmatrix figures --out DIR``), else ``figures/`` under the build root."""
    return (Path(out).resolve() if out else build_root()) / "figures"


def paper_dir(out: str | os.PathLike[str] | None = None) -> Path:
    """``<out>/paper``, else ``paper/`` under the build root (where the paper is built)."""
    return (Path(out).resolve() if out else build_root()) / "paper"


def generated_dir(out: str | os.PathLike[str] | None = None) -> Path:
    """The paper's generated inputs: ``<out>/paper/generated``, else under the output root."""
    return paper_dir(out) / "generated"


def params_file(profile: str) -> Path:
    return repo_root() / "notebooks" / "params" / f"{profile}.yaml"


def profiles() -> list[str]:
    """Every profile of the repository: the names of notebooks/params/<profile>.yaml, sorted."""
    return sorted(p.stem for p in (repo_root() / "notebooks" / "params").glob("*.yaml"))


def has_completed_runs(results: Path) -> bool:
    """Whether a results directory holds at least one completed (status ok) run (read as run records)."""
    from dbmatrix.record import load as load_record

    raw = results / "raw"
    if not raw.is_dir():
        return False
    for m in sorted(raw.glob("*/manifest.json")):
        try:
            if load_record(m.read_text()).ok:
                return True
        except (OSError, ValueError):
            continue
    return False


def is_reference(path: Path) -> bool:
    """Whether `path` lies inside the committed reference data."""
    p, ref = path.resolve(), reference_root().resolve()
    return p == ref or ref in p.parents


def display_path(path: Path) -> str:
    """A path as the paper and provenance print it: relative to the repository when inside it."""
    for root in (repo_root(), output_root()):
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            continue
    return str(path)


def git_state(root: Path | None = None) -> dict[str, Any]:
    """Commit and dirtiness of the repository, for manifests and PDF metadata."""
    from dbmatrix.hosts.remote import CommandError, LocalHost  # the seam for side effects

    host = LocalHost()
    git = f"git -C {shlex.quote(str(root or repo_root()))}"
    try:
        commit = host.run(f"{git} rev-parse HEAD").stdout.strip()
        dirty = bool(host.run(f"{git} status --porcelain --untracked-files=no").stdout.strip())
    except (OSError, CommandError):  # no git, not a repository
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}
