"""Where things are: the repository, and the output root that tests redirect to a temporary tree.

`DBMATRIX_OUTPUT_ROOT` replaces the repository as the home of data/, figures/ and paper/generated/,
so the smoke profile in tests never touches the committed results.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def repo_root() -> Path:
    env = os.environ.get("DBMATRIX_REPO")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


def output_root() -> Path:
    env = os.environ.get("DBMATRIX_OUTPUT_ROOT")
    return Path(env).resolve() if env else repo_root()


def results_dir(profile: str) -> Path:
    return output_root() / "data" / profile


def figures_dir() -> Path:
    return output_root() / "figures"


def paper_dir() -> Path:
    return output_root() / "paper"


def generated_dir() -> Path:
    return paper_dir() / "generated"


def params_file(profile: str) -> Path:
    return repo_root() / "notebooks" / "params" / f"{profile}.yaml"


def git_state(root: Path | None = None) -> dict[str, object]:
    """Commit and dirtiness of the repository, for manifests and PDF metadata."""
    root = root or repo_root()
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}
