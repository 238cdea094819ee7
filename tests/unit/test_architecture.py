"""The package's shape, checked: imports go one way between packages, no module imports another's private
names, and only the host seam (hosts/remote.py) imports fabric, invoke, paramiko or subprocess."""

from __future__ import annotations

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "lib" / "dbmatrix"
SEAM = LIB / "hosts" / "remote.py"
SIDE_EFFECT_LIBRARIES = {"fabric", "invoke", "paramiko", "subprocess"}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(LIB.parent).with_suffix("").parts).removesuffix(".__init__")


def _unit(module: str) -> str:
    """dbmatrix.<package>.<module> -> <package>; a top-level module is its own unit."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names) of every runtime import (type-checking-only blocks left out)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = []
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return out


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = {_module(p): p for p in LIB.rglob("*.py")}
    mod_edges: dict[str, set[str]] = {m: set() for m in modules}
    for m, p in modules.items():
        for target, names in _imports(p):
            if not target.startswith("dbmatrix"):
                continue
            candidates = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules] or [target]
            mod_edges[m].update(c for c in candidates if c in modules and c != m)
    pkg_edges: dict[str, set[str]] = {}
    for m, targets in mod_edges.items():
        for t in targets:
            if _unit(m) != _unit(t):
                pkg_edges.setdefault(_unit(m), set()).add(_unit(t))
    return mod_edges, pkg_edges


def _cycles(edges: dict[str, set[str]]) -> list[str]:
    def reaches(a: str) -> set[str]:
        seen, stack = set(), [a]
        while stack:
            for b in edges.get(stack.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    stack.append(b)
        return seen
    return sorted(a for a in edges if a in reaches(a))


def test_no_package_imports_one_that_imports_it_back() -> None:
    _, pkg_edges = _graph()
    assert _cycles(pkg_edges) == [], pkg_edges


def test_no_import_cycles_between_modules() -> None:
    mod_edges, _ = _graph()
    assert _cycles(mod_edges) == []


def test_the_layers_point_one_way() -> None:
    _, pkg_edges = _graph()
    lower_than = {"spec": set(), "hosts": {"spec"}, "workload": {"spec", "hosts"}}
    for low, allowed in lower_than.items():
        assert pkg_edges.get(low, set()) <= allowed, f"{low} imports {pkg_edges.get(low)}"
    for pkg in ("spec", "hosts", "workload", "store", "analyse"):
        assert "run" not in pkg_edges.get(pkg, set()) and "publish" not in pkg_edges.get(pkg, set()), pkg


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = []
    for p in LIB.rglob("*.py"):
        for target, names in _imports(p):
            if target.startswith("dbmatrix"):
                offenders += [f"{_module(p)}: {target}.{n}" for n in names if n.startswith("_")]
    assert offenders == []


def test_only_the_host_seam_imports_side_effect_libraries() -> None:
    offenders = []
    for p in LIB.rglob("*.py"):
        if p == SEAM:
            continue
        for target, _ in _imports(p):
            if target.split(".")[0] in SIDE_EFFECT_LIBRARIES:
                offenders.append(f"{_module(p)} imports {target}")
    assert offenders == []


def test_the_checks_can_fail() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == ["a", "b"]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_fleet_knows_leasers_only_through_the_leasing_seam() -> None:
    """run/fleet.py and run/leasing.py name no scheduler: Slurm lives in run/slurm.py alone."""
    mod_edges, _ = _graph()
    for m in ("dbmatrix.run.fleet", "dbmatrix.run.leasing"):
        assert "dbmatrix.run.slurm" not in mod_edges[m], m
    assert "dbmatrix.run.leasing" in mod_edges["dbmatrix.run.fleet"]
