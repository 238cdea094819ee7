"""Project hygiene: one declaration of dependencies, output-free thin notebooks, profiles that load, the
data layout (runs vs the committed reference), the Makefile's real targets, the paper's fragments."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from dbmatrix import paths
from dbmatrix.publish.paper_inputs import macro_prefixes
from dbmatrix.spec.experiment import SpecError
from dbmatrix.study import (
    PARAM_KEYS,
    PROFILES,
    load_studies,
    load_study,
    studies_with_data,
)

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


def test_the_notebooks_exist():
    assert [p.stem for p in NOTEBOOKS] == ["00-host-setup", "10-run-matrix", "20-analysis", "30-figures",
                                           "40-explore"]


ACTING = {"00-host-setup": "confirm_install", "10-run-matrix": "run"}  # notebooks that install or measure


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_output_free_thin_and_parameterised(path: Path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    src = "".join(params[0]["source"])
    first = "".join(cells[0]["source"]) if cells[0]["cell_type"] == "markdown" else ""
    if path.stem == "40-explore":  # defaults: the committed reference, so it runs anywhere
        assert "run_dir = None" in src and "metric = " in src and "filters = " in src
    elif path.stem in ACTING:  # Run All as committed is a dry plan; the first cell says what acting does
        flag = ACTING[path.stem]
        assert f"{flag} = False" in src and 'profile = "quick"' in src and "data = None" in src
        assert f"`{flag} = True`" in first and "only when you ask" in first
        assert "changes nothing" in first or "measures nothing" in first
    else:  # analysis notebooks: the committed reference unless told otherwise
        assert 'profile = "quick"' in src and 'data = "reference"' in src
    for c in cells:
        if c["cell_type"] == "code":
            assert not c.get("outputs") and c.get("execution_count") is None, "source notebooks carry no outputs"
            assert len("".join(c["source"]).splitlines()) <= 12, "logic belongs in lib/dbmatrix"


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_loads_and_plans(profile: str, tmp_path: Path):
    for study in load_studies(profile, data=tmp_path):
        runs = study.experiment.plan()
        assert runs and len({r.run_id for r in runs}) == len(runs)
        assert study.store.root == tmp_path / study.experiment.name
    params = yaml.safe_load((ROOT / "notebooks" / "params" / f"{profile}.yaml").read_text())
    assert set(params) <= set(PARAM_KEYS)


def test_quick_profile_runs_the_storage_matrix_then_the_thread_sweep():
    studies = load_studies("quick")
    assert [s.experiment.name for s in studies][:2] == ["storage-matrix-quick", "threads-quick"]
    assert [s.kind for s in studies][:2] == ["storage", "threads"]
    assert all((ROOT / "specs").joinpath(s.spec_path.name).is_file() for s in studies)
    assert load_studies("smoke")[0].experiment.name == "cache-sweep-smoke" and len(load_studies("smoke")) == 1


# ------------------------------------------------------------------------------------ data layout


@pytest.fixture
def out_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    return tmp_path / "out"


def _complete_run(root: Path, status: str = "ok") -> None:
    d = root / "raw" / "r1"
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"run_id": "r1", "experiment": "e", "cell_id": "c", "cell": {},
                                                 "repetition": 1, "host": "h", "status": status}))


def test_runs_go_to_data_runs_and_never_into_the_reference(out_root: Path):
    study = load_study("quick")
    assert study.store.root == out_root / "data" / "runs" / "storage-matrix-quick"
    ref = paths.reference_dir("storage-matrix-quick")
    with pytest.raises(SpecError, match="inside the committed reference"):
        load_study("quick", results_dir=ref)
    with pytest.raises(SpecError, match="inside the committed reference"):
        load_study("quick", data=paths.reference_root())


def test_figures_read_the_reference_until_your_campaign_is_complete(out_root: Path, tmp_path: Path):
    """The rule itself: tests/unit/test_datachoice.py; here, stray manifests never switch the source."""
    reading = load_study("quick", for_run=False)
    assert reading.store.root == paths.reference_dir("storage-matrix-quick") and reading.has_data()
    runs = out_root / "data" / "runs" / "storage-matrix-quick"
    _complete_run(runs, status="failed")  # only failed runs: still the reference
    assert load_study("quick", for_run=False).store.root == paths.reference_dir("storage-matrix-quick")
    (runs / "raw" / "r1").rename(runs / "raw" / "old")
    _complete_run(runs)  # an ok run, but no complete campaign: still the reference, unless asked
    assert load_study("quick", for_run=False).store.root == paths.reference_dir("storage-matrix-quick")
    assert load_study("quick", data="runs", for_run=False).store.root == runs
    other = tmp_path / "elsewhere"
    assert load_study("quick", data=other, for_run=False).store.root == other / "storage-matrix-quick"
    have, _missing = studies_with_data(load_studies("quick", for_run=False))
    assert "storage-matrix-quick" in [s.experiment.name for s in have]


def test_several_specs_need_a_data_root_not_one_results_dir(out_root: Path, tmp_path: Path):
    with pytest.raises(SpecError, match="--results names one study's directory"):
        load_studies("quick", results_dir=tmp_path)
    assert len(load_studies("quick", spec="specs/quick.yaml", results_dir=tmp_path)) == 1


def test_macro_prefixes_by_kind():
    studies = load_studies("quick")
    assert macro_prefixes(studies)["storage-matrix-quick"] == ""
    assert macro_prefixes(studies)["threads-quick"] == "thr"
    twice = [studies[0], studies[0]]
    assert list(macro_prefixes(twice).values()) == ["storageMatrixQuick"]  # same name: the second wins


# ------------------------------------------------------------------------------------ make, paper, git


def test_makefile_has_real_file_targets_for_figures_and_paper():
    mk = (ROOT / "Makefile").read_text()
    assert ".DELETE_ON_ERROR:" in mk and ".SHELLFLAGS := -eu -o pipefail -c" in mk
    assert re.search(r"^figures: \$\(GEN\)/provenance\.json$", mk, re.MULTILINE)
    assert re.search(r"^\$\(PAPER_PDF\): \$\(GEN\)/provenance\.json", mk, re.MULTILINE)
    assert "GEN := $(BUILD_OUT)/paper/generated" in mk and "PAPER_PDF := $(BUILD_OUT)/paper/main.pdf" in mk
    assert re.search(r"^\$\(GEN\)/provenance\.json: \$\(GEN\)/sources\.mk \$\(STUDY_STAMPS\)", mk, re.MULTILINE)
    assert "DATA ?=" in mk and "include $(GEN)/sources.mk" in mk


def test_gitignore_keeps_new_runs_out_and_the_reference_in():
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "data/runs/" in ignored and "data/notebooks/" in ignored
    assert not any(line.startswith("data/reference") for line in ignored)
    assert (ROOT / "data" / "reference" / "storage-matrix-quick" / "plan.json").is_file()


def test_every_figure_has_its_paper_fragment():
    from dbmatrix.publish.registry import FIGURES

    for fd in FIGURES:
        frag = (ROOT / "paper" / f"fig-{fd.stem}.tex").read_text()
        assert "\\includegraphics[width=\\" in frag and f"{{{fd.stem}.pdf}}" in frag, fd.stem
        # the CI level comes from a macro: \ciPct, or a generated interval phrase that carries it
        assert "\\ciPct" in frag or "IntervalText" in frag or "CI" not in frag, f"{fd.stem}: CI level"
    main = (ROOT / "paper" / "main.tex").read_text()
    for name in ("generated/figures.tex", "generated/table-claims.tex", "generated/table-setup.tex",
                 "generated/replication-section.tex", "generated/tpcc-section.tex", "generated/scaleout-section.tex",
                 "generated/provenance.tex"):
        assert f"\\input{{{name}}}" in main


def test_quick_profile_is_the_storage_matrix():
    """Issue contract: both engines, >= 2 levels of every storage factor, uniform access; a fraction keeps
    every main effect and two-way interaction estimable. Repetitions: 2 per campaign since the quick profile
    gained seed 003's TPC-C study and the throttled Galera study within its 30 minutes (each further
    `make reproduce` adds an independent campaign of 2)."""
    exp = load_study("quick").experiment
    assert exp.factors["engine"] == ("innodb", "myrocks")
    for f in ("cache_pct", "block_size", "compression", "medium"):
        assert len(exp.factors[f]) >= 2, f
    assert set(exp.factors["cache_pct"]) == {25, 100}
    assert exp.workload.name == "oltp_read_write" and exp.workload.rand_type == "uniform"
    assert exp.repetitions >= 2
    info = exp.design_info()
    assert info["design"] == "full" or info["resolution"] >= 5


def test_full_profile_is_the_seed_003_matrix_on_its_example_inventory():
    study = load_study("full")
    exp = study.experiment
    assert set(exp.factors["engine"]) == {"innodb", "myrocks"} and 0 in exp.factors["cache_pct"]
    assert {"nvme", "pmem-fsdax", "pmem-sector"} <= set(study.inventory.hosts[0].media)
    kinds = {m.options.get("mode") for m in study.inventory.hosts[0].media.values() if m.kind == "pmem"}
    assert kinds == {"fsdax", "sector"}


def test_git_state_reads_commit_and_dirtiness_through_the_host_seam(tmp_path) -> None:
    import subprocess

    from dbmatrix.paths import git_state

    assert git_state(tmp_path) == {"commit": None, "dirty": None}  # not a repository
    repo = tmp_path / "r"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "f.txt").write_text("a\n")
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert git_state(repo) == {"commit": head, "dirty": False}
    (repo / "untracked.txt").write_text("ignored\n")
    assert git_state(repo)["dirty"] is False  # untracked files do not count
    (repo / "f.txt").write_text("b\n")
    assert git_state(repo) == {"commit": head, "dirty": True}
