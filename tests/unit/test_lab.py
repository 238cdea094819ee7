"""The notebooks as JupyterLab sees them: the project's kernel, metadata stored in the form Lab writes (so
opening one does not mark it modified), output-free, and the save hook that keeps them so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dbmatrix import lab

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stored_as_lab_writes_it(path: Path) -> None:
    text = path.read_text()
    nb = json.loads(text)
    assert nb["metadata"] == lab.notebook_metadata(), "metadata: the dbmatrix kernel, as JupyterLab 4 writes it"
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5)
    ids = [c.get("id") for c in nb["cells"]]
    assert all(ids) and len(set(ids)) == len(ids) and all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids)
    assert lab.strip_outputs(nb) == nb, "no outputs, execution counts, view or widget state"
    assert text == lab.notebook_text(nb), "serialised as jupyter_server saves (sorted keys, indent 1)"


def test_the_kernel_the_notebooks_name_is_the_one_make_installs() -> None:
    mk = (ROOT / "Makefile").read_text()
    install = re.search(r"ipykernel install --sys-prefix --name (\S+) --display-name \"([^\"]+)\"", mk)
    assert install and install.groups() == (lab.KERNEL_NAME, lab.KERNEL_DISPLAY_NAME)
    assert "--ContentsManager.pre_save_hook=dbmatrix.lab.pre_save_hook" in mk
    env = (ROOT / "environment.yml").read_text()
    assert re.search(r"python=(\d+\.\d+)", env).group(1) == ".".join(lab.PYTHON_VERSION.split(".")[:2])


def test_pre_save_hook_strips_tracked_notebooks_only() -> None:
    nb = json.loads(NOTEBOOKS[-1].read_text())
    run = json.loads(json.dumps(nb))
    run["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    for i, c in enumerate(c for c in run["cells"] if c["cell_type"] == "code"):
        c["execution_count"] = i + 1
        c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}]
        c["metadata"]["execution"] = {"iopub.status.idle": "2026-11-23T10:00:00Z"}
    model = {"type": "notebook", "content": json.loads(json.dumps(run))}
    lab.pre_save_hook(model, "notebooks/40-explore.ipynb")
    assert model["content"] == nb
    elsewhere = {"type": "notebook", "content": json.loads(json.dumps(run))}
    lab.pre_save_hook(elsewhere, "data/notebooks/quick/40-explore.ipynb")  # executed copies keep outputs
    assert elsewhere["content"] == run
    lab.pre_save_hook({"type": "file", "content": "x"}, "notebooks/notes.txt")
    assert lab.is_tracked_notebook("/notebooks/20-analysis.ipynb")
    assert not lab.is_tracked_notebook("notebooks/params/quick.yaml")
