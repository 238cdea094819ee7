"""Light targets need light dependencies (issue 28): the Makefile's dependency graph, as make itself reads it
(`make -pq`, which runs nothing), says which OS package roles each target installs. figures, paper and lab
need only the Python environment; reproduce the server and LaTeX roles; smoke and run the server role; only
make test (and test-browser) the test role."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dbmatrix.commands.studies import with_code_lists
from dbmatrix.study import load_studies, make_rules

ROOT = Path(__file__).resolve().parents[2]
OS_ROLES = {".venv/.os-server": {"server"}, ".venv/.os-paper": {"paper"}, ".venv/.os-test": {"test"},
            ".venv/.os-all": {"server", "paper", "test"}}
RULE = re.compile(r"^([^#\t\s][^:=]*?)::?(?!=)\s*(.*)$")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def make_database(makefiles: list[Path], cwd: Path = ROOT) -> str:
    """make's printed database: nothing is run (-q asks whether `help` is up to date, -p prints the rules)."""
    args = ["make", "-pq", "--no-print-directory"] + [a for m in makefiles for a in ("-f", str(m))] + ["help"]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True).stdout


def make_graph(makefiles: list[Path], cwd: Path = ROOT) -> dict[str, set[str]]:
    """target -> prerequisites (normal and order-only) from make's printed database."""
    out = make_database(makefiles, cwd)
    graph: dict[str, set[str]] = {}
    for line in out.splitlines():
        m = RULE.match(line)
        if m and not line.startswith((" ", "define ", "export ")) and "=" not in m.group(1):
            for target in m.group(1).split():
                graph.setdefault(target, set()).update(p for p in m.group(2).split() if p != "|")
    return graph


def reach(graph: dict[str, set[str]], goal: str) -> set[str]:
    seen, stack = set(), [goal]
    while stack:
        for p in graph.get(stack.pop(), ()):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def roles(graph: dict[str, set[str]], goal: str) -> set[str]:
    return {r for t in reach(graph, goal) if t in OS_ROLES for r in OS_ROLES[t]}


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The Makefile plus the fragment `dbmatrix sources --make` writes for the quick profile (make includes
    it only for the figure goals), so the per-study analysis rules are in the graph too."""
    tmp = tmp_path_factory.mktemp("mk")
    frag = tmp / "sources.mk"
    frag.write_text(with_code_lists(make_rules(load_studies("quick", for_run=False), "quick", None), "quick"))
    text = (ROOT / "Makefile").read_text()
    guard, include = "ifneq ($(filter $(FIGURE_GOALS),$(MAKECMDGOALS)),)", "include $(GEN)/sources.mk"
    assert guard in text and include in text, "the Makefile includes sources.mk for the figure goals"
    mk = tmp / "Makefile"  # the same Makefile, reading the fragment whatever the goal
    mk.write_text(text.replace(guard, "ifeq (1,1)").replace(include, f"include {frag}"))
    return make_graph([mk])


def test_light_targets_install_no_os_package(graph: dict[str, set[str]]) -> None:
    assert "paper/generated/provenance.json" in reach(graph, "paper")  # the graph is read through
    assert any(t.endswith("processed/analysis.json") for t in reach(graph, "figures"))
    for goal in ("figures", "paper", "lab", "test-unit", "lint"):
        assert roles(graph, goal) == set(), f"make {goal} installs OS packages"


def test_each_heavy_target_installs_only_its_roles(graph: dict[str, set[str]]) -> None:
    assert roles(graph, "smoke") == roles(graph, "run") == {"server"}
    assert roles(graph, "reproduce") == {"server", "paper"}, "reproduce: the run role and LaTeX, never test"
    assert roles(graph, "setup-paper") == {"paper"} and roles(graph, "test-browser") == {"test"}
    # make test's recipe builds test-ready (the OS roles beside the lint, -j2) before pytest
    assert roles(graph, "test-ready") == roles(graph, "setup") == {"server", "paper", "test"}
    assert "lint" in reach(graph, "test-ready")


def test_make_test_installs_every_role_beside_the_lint_before_pytest() -> None:
    db = make_database([ROOT / "Makefile"])
    recipe = db.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    lines = [ln.strip() for ln in recipe.splitlines() if ln.startswith("\t")]
    assert lines[0] == "$(MAKE) --no-print-directory -j2 --output-sync=target test-ready", recipe
    assert lines[1] == "$(BIN)/python -m compileall -q -j 0 lib/dbmatrix >/dev/null", recipe
    assert "pytest" in lines[2], recipe


def test_the_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "Makefile"
    bad.write_text("help:\n\t@true\npaper: paper/main.pdf\npaper/main.pdf: x.tex | .venv/.os-test\n")
    g = make_graph([bad], cwd=tmp_path)
    assert roles(g, "paper") == {"test"}
