"""Project hygiene: one declaration of dependencies, output-free thin notebooks, profiles that load."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from dbmatrix.study import PROFILES, load_study

ROOT = Path(__file__).resolve().parents[2]


def _norm(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    assert m, req
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = dict(_norm(r) for r in pyproject["dependencies"])
    declared.update(_norm(r) for r in pyproject["optional-dependencies"]["test"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(_norm(d) for d in env["dependencies"] if isinstance(d, str) and not d.startswith(("python", "pip")))
    assert conda == declared, "environment.yml and pyproject.toml declare different dependencies"
    pip_part = [d for d in env["dependencies"] if isinstance(d, dict)]
    assert pip_part == [{"pip": ["-e ."]}], "environment.yml must install dbmatrix itself with pip -e ."


def test_constraints_pin_every_declared_dependency():
    pins = {_norm(line.split("==")[0])[0] for line in (ROOT / "constraints.txt").read_text().splitlines()
            if "==" in line}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_norm(r)[0] for r in pyproject["dependencies"] + pyproject["optional-dependencies"]["test"]}
    assert names <= pins, f"not pinned in constraints.txt: {sorted(names - pins)}"


NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_four_notebooks_exist():
    assert [p.stem for p in NOTEBOOKS] == ["00-host-setup", "10-run-matrix", "20-analysis", "30-figures"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_output_free_thin_and_parameterised(path: Path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    src = "".join(params[0]["source"])
    assert 'profile = "smoke"' in src, "default parameters are the smoke profile"
    for c in cells:
        if c["cell_type"] == "code":
            assert not c.get("outputs") and c.get("execution_count") is None, "source notebooks carry no outputs"
            assert len("".join(c["source"]).splitlines()) <= 12, "logic belongs in lib/dbmatrix"


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_loads_and_plans(profile: str, tmp_path: Path):
    study = load_study(profile, results_dir=tmp_path)
    runs = study.experiment.plan()
    assert runs and len({r.run_id for r in runs}) == len(runs)
    params = yaml.safe_load((ROOT / "notebooks" / "params" / f"{profile}.yaml").read_text())
    assert set(params) <= {"spec", "inventory", "results_dir"}


def test_quick_profile_is_the_storage_matrix():
    """Issue contract: both engines, >= 2 levels of every storage factor, >= 3 repetitions, uniform
    access; a fraction keeps every main effect and two-way interaction estimable."""
    exp = load_study("quick").experiment
    assert exp.factors["engine"] == ("innodb", "myrocks")
    for f in ("cache_pct", "block_size", "compression", "medium"):
        assert len(exp.factors[f]) >= 2, f
    assert set(exp.factors["cache_pct"]) == {25, 100}
    assert exp.workload.name == "oltp_read_write" and exp.workload.rand_type == "uniform"
    assert exp.repetitions >= 3
    info = exp.design_info()
    assert info["design"] == "full" or info["resolution"] >= 5


def test_full_profile_is_the_seed_003_matrix_on_its_example_inventory():
    study = load_study("full")
    exp = study.experiment
    assert set(exp.factors["engine"]) == {"innodb", "myrocks"} and 0 in exp.factors["cache_pct"]
    assert {"nvme", "pmem-fsdax", "pmem-sector"} <= set(study.inventory.hosts[0].media)
    kinds = {m.options.get("mode") for m in study.inventory.hosts[0].media.values() if m.kind == "pmem"}
    assert kinds == {"fsdax", "sector"}
