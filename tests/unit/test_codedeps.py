"""dbmatrix.codedeps: Make's code dependencies from the import graph, on a tiny package and on the real one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dbmatrix import codedeps
from dbmatrix.cli import main

REPO = Path(__file__).resolve().parents[2]

TINY = {
    "pkg/__init__.py": "",
    "pkg/a.py": "def f():\n    from pkg.b import g\n    return g()\n",  # function-local import
    "pkg/b.py": "from pkg import c\n\ndef g():\n    return c.h()\n",  # `from pkg import c`: the submodule
    "pkg/c.py": "import json\n\ndef h():\n    return json.dumps(1)\n",  # outside the package: ignored
    "pkg/sub/__init__.py": "",
    "pkg/sub/d.py": "from ..c import h\nfrom . import e\n",  # relative imports
    "pkg/sub/e.py": "X = 1\n",
    "pkg/lonely.py": "Y = 2\n",
    "pkg/driver.py": ("from pkg import a, lonely\nfrom pkg.sub import d\n\n"
                      "def step():\n    return _helper() + 1\n\n"
                      "def _helper():\n    return a.f()\n\n"
                      "def other():\n    return lonely.Y + d.h()\n"),
}


@pytest.fixture
def tiny(tmp_path: Path) -> codedeps.Graph:
    for name, text in TINY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return codedeps.load_graph(tmp_path, "pkg", relative_to=tmp_path)


def test_edges_resolve_function_local_submodule_and_relative_imports(tiny: codedeps.Graph) -> None:
    assert tiny.edges["pkg.a"] == {"pkg", "pkg.b"}
    assert tiny.edges["pkg.b"] == {"pkg", "pkg.c"}
    assert tiny.edges["pkg.c"] == {"pkg"}
    assert tiny.edges["pkg.sub.d"] == {"pkg", "pkg.sub", "pkg.c", "pkg.sub.e"}


def test_closure_of_a_module_is_transitive_and_sorted(tiny: codedeps.Graph) -> None:
    assert codedeps.closure(tiny, ["pkg.a"]) == ["pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/c.py"]
    assert codedeps.closure(tiny, ["pkg.sub.d"]) == ["pkg/__init__.py", "pkg/c.py", "pkg/sub/__init__.py",
                                                     "pkg/sub/d.py", "pkg/sub/e.py"]


def test_a_function_entry_takes_only_what_its_body_uses(tiny: codedeps.Graph) -> None:
    whole = codedeps.closure(tiny, ["pkg.driver"])
    assert "pkg/lonely.py" in whole and "pkg/sub/d.py" in whole
    step = codedeps.closure(tiny, ["pkg.driver:step"])  # step -> _helper -> a.f -> (local) b -> c
    assert step == ["pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/c.py", "pkg/driver.py"]
    assert "pkg/lonely.py" in codedeps.closure(tiny, ["pkg.driver:other"])
    with pytest.raises(ValueError, match="no function or class 'nope' in pkg.driver; defined there: _helper"):
        codedeps.closure(tiny, ["pkg.driver:nope"])
    with pytest.raises(ValueError, match="no module 'pkg.nope'"):
        codedeps.closure(tiny, ["pkg.nope"])


def test_notebook_entries(tiny: codedeps.Graph) -> None:
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["from pkg import lonely"]},
        {"cell_type": "code", "source": ["%matplotlib inline\n", "from pkg import driver\n",
                                         "from pkg.a import f\n", "driver.step()\n", "f()\n"]},
    ]}
    assert codedeps.notebook_entries(tiny, json.dumps(nb), "pkg") == ["pkg.a:f", "pkg.driver:step"]


# ------------------------------------------------------------------------------ the real package

def test_the_analysis_closure_holds_what_analyse_imports_and_not_publishing() -> None:
    lists = codedeps.code_lists(REPO, "quick")
    analysis = lists["ANALYSIS_CODE"]
    # the run record (its migrations fill a manifest's campaign and boot) and the cache counters parser build
    # runs.csv through store.py; the Makefile's hand-written list had neither (nor the campaigns module then).
    assert "lib/dbmatrix/record.py" in analysis
    assert "lib/dbmatrix/parse/cache_counters.py" in analysis
    assert {"lib/dbmatrix/steps.py", "lib/dbmatrix/store.py", "lib/dbmatrix/analyse/tables.py"} <= set(analysis)
    assert not [f for f in analysis if f.startswith(("lib/dbmatrix/publish/", "lib/dbmatrix/run/session"))]
    assert analysis == sorted(analysis) and all((REPO / f).is_file() for f in analysis)
    figures = lists["FIGURE_CODE"]
    assert "lib/dbmatrix/publish/figures.py" in figures and "lib/dbmatrix/analyse/figure_data.py" in figures
    assert figures[-2:] == ["notebooks/30-figures.ipynb", "notebooks/params/quick.yaml"]


def test_sources_make_sets_the_code_lists_before_the_rules_use_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sources", "--profile", "quick", "--make"]) == 0
    mk = capsys.readouterr().out
    lines = mk.splitlines()
    assigned = {m[1]: i for i, line in enumerate(lines) if (m := re.match(r"^(\w+_CODE) := \\$", line))}
    assert set(assigned) == {"ANALYSIS_CODE", "FIGURE_CODE"}
    first_use = next(i for i, line in enumerate(lines) if "$(ANALYSIS_CODE)" in line)
    assert max(assigned.values()) < first_use
    assert "  lib/dbmatrix/parse/cache_counters.py \\" in lines
    makefile = (REPO / "Makefile").read_text()
    assert not re.search(r"^(ANALYSIS|FIGURE)_CODE\s*:?=", makefile, re.MULTILINE)  # one source: the graph
    assert "$(value FIGURE_CODE)" in makefile and "include $(GEN)/sources.mk" in makefile


def test_sources_make_keeps_its_code_lists_per_profile_and_content(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make asks `dbmatrix sources --make` at every figures/paper build: a second invocation reads the code
    lists from the cache (no parsing), another profile is another key (so is other package or notebook
    content: dbmatrix.cache.content_key), and what is read is what parsing gives."""
    from dbmatrix.commands.studies import with_code_lists

    monkeypatch.setenv("DBMATRIX_CACHE_DIR", str(tmp_path))
    first = with_code_lists("head\n\nrules", "quick")
    assert first == "head\n" + codedeps.make_variables(REPO, "quick") + "\n\nrules"
    parsed: list[str] = []
    real = codedeps.make_variables
    monkeypatch.setattr(codedeps, "make_variables", lambda repo, profile: parsed.append(profile) or real(repo, profile))
    assert with_code_lists("head\n\nrules", "quick") == first and parsed == []
    assert "notebooks/params/paper.yaml" in with_code_lists("head\n\nrules", "paper") and parsed == ["paper"]
    assert len(list((tmp_path / "make-code-lists").glob("*.json"))) == 2
