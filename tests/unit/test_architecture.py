"""The package's shape, checked: imports go one way between packages, no module imports another's private
names, only the host seam (hosts/remote.py) imports fabric, invoke, paramiko or subprocess, the parsers of raw
run outputs (parse/) are pure, and no module is over 800 lines."""

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
    lower_than = {"parse": set(), "spec": set(), "hosts": {"spec", "parse"}, "workload": {"spec", "hosts", "parse"}}
    for low, allowed in lower_than.items():
        assert pkg_edges.get(low, set()) <= allowed, f"{low} imports {pkg_edges.get(low)}"
    for pkg in ("parse", "spec", "hosts", "workload", "store", "analyse"):
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


PARSE = LIB / "parse"
# Names whose use is I/O or a process: a parser takes text and returns values.
IO_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "run", "Popen", "system", "mkdir",
            "unlink", "glob", "rglob", "iterdir", "exists"}
IO_MODULES = {"os", "pathlib", "shutil", "socket", "tempfile", "glob", "io", "urllib", "requests",
              *SIDE_EFFECT_LIBRARIES}


def _io_uses(path: Path) -> list[str]:
    found = [f"imports {target}" for target, _ in _imports(path)
             if target.split(".")[0] in IO_MODULES
             or (target.startswith("dbmatrix") and target.split(".")[1:2] != ["parse"])]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in IO_CALLS:
                found.append(f"calls {name}() at line {node.lineno}")
    return found


def test_the_parse_package_is_pure() -> None:
    """Parsers of raw run outputs import no other dbmatrix package (so neither run/ nor the host seam),
    no fabric/invoke/os/pathlib, and open, read, write or run nothing."""
    modules = sorted(PARSE.glob("*.py"))
    assert len(modules) >= 6
    assert {p.stem for p in modules} >= {"sysbench", "tpcc", "system_counters", "cache_counters", "wsrep"}
    offenders = {_module(p): uses for p in modules if (uses := _io_uses(p))}
    assert offenders == {}


def test_the_purity_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from pathlib import Path\nfrom dbmatrix.hosts.remote import Host\n"
                   "def f(p):\n    return Path(p).read_text()\n")
    assert _io_uses(bad) == ["imports pathlib", "imports dbmatrix.hosts.remote", "calls read_text() at line 4"]


# run/ -> analyse/ imports left (each a known debt, to shrink and never to grow): the run side asks the
# analysis for the adaptive stopping rule, the host-check line and the calibration run rows.
RUN_TO_ANALYSE_ALLOWED = {
    ("dbmatrix.run.calibration", "dbmatrix.analyse.replication"),
    ("dbmatrix.run.matrix", "dbmatrix.analyse.hosts"),
    ("dbmatrix.run.matrix", "dbmatrix.analyse.stats"),
}


def test_run_reads_raw_outputs_through_parse_not_analyse() -> None:
    mod_edges, _ = _graph()
    edges = {(m, t) for m, ts in mod_edges.items() for t in ts
             if _unit(m) == "run" and _unit(t) == "analyse"}
    assert edges <= RUN_TO_ANALYSE_ALLOWED, sorted(edges - RUN_TO_ANALYSE_ALLOWED)
    assert not any("wsrep" in t or "parse" in t for _, t in edges)


MAX_MODULE_LINES = 800


def _too_long(root: Path, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    return {str(p.relative_to(root)): n for p in sorted(root.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > limit}


def test_no_module_is_over_800_lines() -> None:
    """Split a module that grows past this along its seams (as hosts/media/, spec/, analyse/stats/ were)."""
    assert _too_long(LIB) == {}


def test_the_length_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert _too_long(tmp_path) == {"long.py": MAX_MODULE_LINES + 1}
