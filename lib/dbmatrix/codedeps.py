"""The package's code dependencies from its import graph (pure: reads source text, runs nothing).

Make rebuilds the processed tables when the code the analysis imports changes, and the figures when the
code notebook 30 imports changes; these functions say which files those are, so the Makefile's lists
cannot fall behind the code (``dbmatrix sources --make`` writes them into ``paper/generated/sources.mk``).

A module depends on every ``dbmatrix`` module it imports, at module level or inside a function (a
function-local import runs when the function is called, and the package does that to keep start-up
light), on the packages (``__init__``) above it, and transitively on theirs. ``from pkg import name``
means the submodule ``pkg.name`` when there is one, else ``pkg``; relative imports are resolved against
the importing module's package. An entry ``module:function`` narrows the start to what one function's
body uses (its own imports, the module-level names it refers to, and the functions of the same module
it calls), so a driver module such as ``steps`` that imports every package at its top does not drag in
the run side when only its analysis step matters.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["Graph", "closure", "code_lists", "load_graph", "make_variables", "notebook_entries"]

PACKAGE = "dbmatrix"


class Graph:
    """The modules of one package (name -> source text) and their import edges."""

    def __init__(self, sources: Mapping[str, str], files: Mapping[str, str]) -> None:
        self.sources = dict(sources)  # module name -> source text
        self.files = dict(files)  # module name -> file path as the caller wants it printed
        self.trees = {m: ast.parse(text) for m, text in self.sources.items()}
        self.edges = {m: self._module_imports(m) for m in self.sources}

    # ------------------------------------------------------------------ resolution

    def is_package(self, module: str) -> bool:
        return self.files[module].endswith("__init__.py")

    def _absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = module.split(".")
        base = base if self.is_package(module) else base[:-1]
        base = base[:len(base) - node.level + 1]
        return ".".join([*base, node.module] if node.module else base)

    def _with_parents(self, module: str) -> set[str]:
        parts = module.split(".")
        return {p for i in range(1, len(parts) + 1) if (p := ".".join(parts[:i])) in self.sources}

    def bound(self, module: str, node: ast.Import | ast.ImportFrom) -> dict[str, set[str]]:
        """Name each alias of one import statement in `module` binds -> the package's modules it loads
        (with their parent packages)."""
        out: dict[str, set[str]] = {}
        if isinstance(node, ast.Import):
            for alias in node.names:
                out[alias.asname or alias.name.split(".")[0]] = self._with_parents(alias.name)
            return out
        base = self._absolute(module, node)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            out[alias.asname or alias.name] = self._with_parents(sub if sub in self.sources else base)
        return out

    def imported(self, module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
        """The package's modules one import statement in `module` loads."""
        return set().union(*self.bound(module, node).values())

    def _module_imports(self, module: str) -> set[str]:
        out: set[str] = set()
        for node in ast.walk(self.trees[module]):
            if isinstance(node, ast.Import | ast.ImportFrom):
                out |= self.imported(module, node)
        out |= self._with_parents(module)
        return out - {module}

    # ------------------------------------------------------------------ a function as an entry

    def definitions(self, module: str) -> dict[str, ast.AST]:
        """Top-level functions and classes of `module` by name."""
        return {n.name: n for n in self.trees[module].body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}

    def _name_sources(self, module: str) -> dict[str, set[str]]:
        """Module-level imported names of `module` -> the modules binding them loads."""
        names: dict[str, set[str]] = {}
        for node in self.trees[module].body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name, mods in self.bound(module, node).items():
                    names.setdefault(name, set()).update(mods)
        return names

    def function_imports(self, module: str, function: str) -> set[str]:
        """Modules the body of `module.function` uses, following the same module's functions it calls."""
        defs = self.definitions(module)
        if function not in defs:
            raise ValueError(f"entry {module}:{function}: no function or class {function!r} in {module}; "
                             f"defined there: {', '.join(sorted(defs))}")
        names = self._name_sources(module)
        out: set[str] = set()
        seen, todo = set(), [function]
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.add(fn)
            for node in ast.walk(defs[fn]):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    out |= self.imported(module, node)
                elif isinstance(node, ast.Name):
                    out |= names.get(node.id, set())
                    if node.id in defs:
                        todo.append(node.id)
        return (out | self._with_parents(module)) - {module}


def load_graph(root: Path, package: str = PACKAGE, relative_to: Path | None = None) -> Graph:
    """The import graph of the package in ``root/<package>`` (``root`` is e.g. ``lib``); file paths are
    printed relative to `relative_to` (the repository) when given."""
    sources, files = {}, {}
    for path in sorted((root / package).rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        sources[name] = path.read_text()
        files[name] = str(path.relative_to(relative_to) if relative_to else path)
    return Graph(sources, files)


def closure(graph: Graph, entries: Iterable[str]) -> list[str]:
    """Sorted file paths of the entry modules and every module they load, transitively.

    An entry is a module (``dbmatrix.analyse.tables``) or one function of it (``dbmatrix.steps:analyse_study``:
    that module's file plus what the function uses)."""
    todo: list[str] = []
    own_file_only: set[str] = set()  # a function entry's module: its file, not all of its imports
    for entry in entries:
        module, _, function = entry.partition(":")
        if module not in graph.sources:
            raise ValueError(f"entry {entry!r}: no module {module!r} in the package")
        if function:
            own_file_only.add(module)
            todo.extend(graph.function_imports(module, function))
        else:
            todo.append(module)
    found: set[str] = set()
    while todo:
        m = todo.pop()
        if m not in found:
            found.add(m)
            todo.extend(graph.edges[m])
    found |= own_file_only
    return sorted(graph.files[m] for m in found)


def notebook_entries(graph: Graph, notebook_text: str, package: str = PACKAGE) -> list[str]:
    """Entries for the package code a notebook's code cells call: ``from pkg.mod import f`` gives
    ``pkg.mod:f`` (or the module ``pkg.mod.f``), ``from pkg import mod`` then ``mod.f(...)`` gives
    ``pkg.mod:f``. Cell lines starting with ``%`` or ``!`` (IPython magics) are left out."""
    cells = json.loads(notebook_text)["cells"]
    code = "\n".join("".join(line for line in c["source"] if not line.lstrip().startswith(("%", "!")))
                     for c in cells if c["cell_type"] == "code")
    tree = ast.parse(code)
    entries: set[str] = set()
    module_aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                if sub in graph.sources:
                    module_aliases[alias.asname or alias.name] = sub
                else:
                    entries.add(f"{node.module}:{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package and alias.asname:
                    module_aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in module_aliases):
            mod = module_aliases[node.value.id]
            defs = graph.definitions(mod)
            entries.add(f"{mod}:{node.attr}" if node.attr in defs else mod)
    entries |= {m for m in module_aliases.values() if not any(e.startswith(f"{m}:") for e in entries)}
    return sorted(entries)


#: What ``dbmatrix analyse`` runs to write a study's processed tables.
ANALYSIS_ENTRIES: tuple[str, ...] = ("dbmatrix.steps:analyse_study",)
#: The notebook that draws the figures and writes the paper's inputs (``dbmatrix figures`` runs its step).
FIGURES_NOTEBOOK = "notebooks/30-figures.ipynb"
FIGURE_ENTRIES: tuple[str, ...] = ("dbmatrix.steps:make_figures",)


def code_lists(repo: Path, profile: str) -> dict[str, list[str]]:
    """``ANALYSIS_CODE`` and ``FIGURE_CODE``: the files (relative to `repo`) whose change makes a study's
    processed tables, and the figures and paper inputs, stale."""
    graph = load_graph(repo / "lib", relative_to=repo)
    notebook = repo / FIGURES_NOTEBOOK
    figures = closure(graph, [*FIGURE_ENTRIES, *notebook_entries(graph, notebook.read_text())])
    return {"ANALYSIS_CODE": closure(graph, ANALYSIS_ENTRIES),
            "FIGURE_CODE": [*figures, FIGURES_NOTEBOOK, f"notebooks/params/{profile}.yaml"]}


def make_variables(repo: Path, profile: str) -> str:
    """The lists of :func:`code_lists` as makefile assignments (``NAME := a \\`` one file a line)."""
    return "".join(f"{name} := \\\n" + " \\\n".join(f"  {f}" for f in files) + "\n"
                   for name, files in code_lists(repo, profile).items())
