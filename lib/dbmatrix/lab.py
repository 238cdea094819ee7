"""The project's notebooks in JupyterLab: their kernel, metadata in the form Lab writes, and a save hook that
keeps the tracked notebooks output-free.

`make setup` installs the kernel ``dbmatrix`` into the virtual environment (``ipykernel install --sys-prefix``)
and the notebooks name it. Their metadata are stored exactly as JupyterLab 4 writes them once the kernel has
started (kernelspec, the kernel's ``language_info``, nbformat 4.5 with cell ids, keys sorted, one-space
indent), so opening a notebook does not mark it modified and autosave has nothing to write.
`make lab` runs the server with :func:`pre_save_hook`: saving a tracked notebook (``notebooks/*.ipynb`` under
the server's root) drops outputs, execution counts and view state, so running one and saving leaves the
file as committed. Executed copies with outputs are what `dbmatrix notebooks` writes under data/notebooks.
"""

from __future__ import annotations

import copy
import sys
from pathlib import PurePosixPath
from typing import Any

KERNEL_NAME = "dbmatrix"
KERNEL_DISPLAY_NAME = "dbmatrix (.venv)"
# The Python the study runs on (environment.yml, the machines' python3): the kernel reports its version in
# language_info, and JupyterLab rewrites the metadata (marking the notebook modified) when it differs.
PYTHON_VERSION = "3.11.7"

TRACKED_DIR = "notebooks"  # the tracked notebooks, relative to the repository (the server's root under make lab)
# Cell metadata that only record how a notebook was last viewed or run.
VIEW_STATE = ("execution", "scrolled", "collapsed")


def notebook_metadata(python_version: str = PYTHON_VERSION) -> dict[str, Any]:
    """The notebook-level metadata JupyterLab 4 writes for the project's kernel (sorted keys)."""
    return {
        "kernelspec": {"display_name": KERNEL_DISPLAY_NAME, "language": "python", "name": KERNEL_NAME},
        "language_info": {
            "codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
            "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
            "pygments_lexer": "ipython3", "version": python_version,
        },
    }


def running_python_matches() -> bool:
    """Whether this interpreter reports the version the notebooks store (else Lab updates language_info)."""
    return "{}.{}.{}".format(*sys.version_info[:3]) == PYTHON_VERSION


def strip_outputs(nb: dict[str, Any]) -> dict[str, Any]:
    """A copy of notebook JSON (a dict) without outputs, execution counts, view state or widget state."""
    out = copy.deepcopy(nb)
    out.get("metadata", {}).pop("widgets", None)
    for cell in out.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        for k in VIEW_STATE:
            cell.get("metadata", {}).pop(k, None)
    return out


def is_tracked_notebook(path: str) -> bool:
    """Whether a server path (relative to its root) is one of the tracked notebooks."""
    p = PurePosixPath(path.strip("/"))
    return p.suffix == ".ipynb" and p.parent == PurePosixPath(TRACKED_DIR)


def pre_save_hook(model: dict[str, Any], path: str, contents_manager: Any = None, **kwargs: Any) -> None:
    """jupyter_server's ``ContentsManager.pre_save_hook``: tracked notebooks are saved output-free."""
    if model.get("type") != "notebook" or not is_tracked_notebook(path) or not isinstance(model.get("content"), dict):
        return
    stripped = strip_outputs(model["content"])
    model["content"].clear()
    model["content"].update(stripped)


def notebook_text(nb: dict[str, Any]) -> str:
    """A notebook serialised byte for byte as jupyter_server saves it (nbformat: sorted keys, one-space
    indent, sources split in lines, a final newline)."""
    import nbformat

    return nbformat.writes(nbformat.from_dict(nb), version=nbformat.NO_CONVERT) + "\n"


def normalise_notebook(nb: dict[str, Any]) -> dict[str, Any]:
    """The tracked form of a notebook: output-free, the project's kernel metadata, nbformat 4.5."""
    out = strip_outputs(nb)
    out["metadata"] = {**{k: v for k, v in out.get("metadata", {}).items()
                          if k not in ("kernelspec", "language_info")}, **notebook_metadata()}
    out["nbformat"], out["nbformat_minor"] = 4, 5
    return out
