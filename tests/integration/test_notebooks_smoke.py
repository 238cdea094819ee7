"""The notebooks with the smoke profile's parameters, for real (what `make smoke` runs): `dbmatrix notebooks
--profile smoke` asks 00 to install and 10 to measure (notebooks as committed only print their plans, which
nbval checks), then 20 and 30 analyse and draw the new runs. Everything goes to the session's temporary output
root (DBMATRIX_OUTPUT_ROOT), never into the repository."""

from __future__ import annotations

import json

import pytest

from dbmatrix import cli, paths
from dbmatrix.commands.notebooks import NOTEBOOKS
from dbmatrix.store import ResultStore

pytestmark = pytest.mark.integration


def test_notebooks_with_smoke_parameters_install_measure_analyse_and_draw(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["notebooks", "--profile", "smoke", "--campaign", "new"]) == 0
    executed = paths.notebooks_dir("smoke")
    for name in NOTEBOOKS:
        nb = json.loads((executed / f"{name}.ipynb").read_text())
        errors = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
                  if o["output_type"] == "error"]
        assert not errors, f"{name}: {errors}"
        injected = nb["metadata"]["papermill"]["parameters"]
        assert injected.get("confirm_install", False) is (name == "00-host-setup")
        assert injected.get("run", False) is (name == "10-run-matrix")
    store = ResultStore(paths.run_dir("cache-sweep-smoke"))
    assert [m.status for m in store.records()].count("ok") >= 2, "notebook 10 measured"
    assert (store.processed / "analysis.json").is_file(), "notebook 20 analysed"
    assert list(paths.figures_dir().glob("*.png")), "notebook 30 drew figures into the output root"
    assert paths.output_root() != paths.repo_root()
