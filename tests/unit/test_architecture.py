"""The package's shape, checked: imports go one way between packages, no module imports another's private
names, only the host seam (hosts/remote.py) imports fabric, invoke, paramiko or subprocess, the parsers of raw
run outputs (parse/) are pure, and no module is over 800 lines."""

from __future__ import annotations

import ast
import functools
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


@functools.cache
def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names) of every runtime import (type-checking-only blocks left out); parsed once per
    file and session (the tests only read the result)."""
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


@functools.cache  # one parse of the package for every test that reads the graph (read only)
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
    lower_than = {"engines": set(), "parse": set(), "spec": {"engines"}, "hosts": {"spec", "parse"},
                  "workload": {"spec", "hosts", "parse", "engines"}}
    for low, allowed in lower_than.items():
        assert pkg_edges.get(low, set()) <= allowed, f"{low} imports {pkg_edges.get(low)}"
    for pkg in ("parse", "spec", "hosts", "workload", "store", "analyse"):
        assert "run" not in pkg_edges.get(pkg, set()) and "publish" not in pkg_edges.get(pkg, set()), pkg


def test_the_run_record_is_pure_and_read_below_run() -> None:
    """The run record (dbmatrix.record) is read by the store, analysis and publishing and written by run/:
    it imports only spec/ (factor defaults) and nothing that does I/O; the store reads it, never run/."""
    mod_edges, pkg_edges = _graph()
    assert pkg_edges.get("record", set()) <= {"spec"}, pkg_edges.get("record")
    assert "dbmatrix.record" in mod_edges["dbmatrix.store"]
    assert "run" not in pkg_edges.get("store", set())
    assert {t for t, _ in _imports(LIB / "record.py")} <= {"__future__", "json", "collections.abc", "dataclasses",
                                                          "typing", "dbmatrix.spec.experiment", "dbmatrix.spec.factors"}


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


def test_the_commands_sit_under_the_entry_point_only() -> None:
    """dbmatrix.commands (the subcommands besides plan and run) is loaded by dbmatrix.cli, the entry point, and
    by nothing else of the package; it never imports the entry point back."""
    mod_edges, _ = _graph()
    users = {m for m, targets in mod_edges.items() if any(t.startswith("dbmatrix.commands") for t in targets)}
    assert {u for u in users if not u.startswith("dbmatrix.commands")} == {"dbmatrix.cli"}
    assert not [m for m in mod_edges if m.startswith("dbmatrix.commands") and "dbmatrix.cli" in mod_edges[m]]


def test_the_checks_can_fail() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == ["a", "b"]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# ------------------------------------------------------------------------------------ study kinds

KIND_NAMES = {"storage", "threads", "tpcc", "galera", "scaleout"}
KIND_ONLY = {"galera", "scaleout"}  # words that, in analysis and publishing, name nothing but a study kind
KIND_REGISTRY = LIB / "analyse" / "kinds"
CLAIM_CATALOGUE = LIB / "analyse" / "claims" / "catalogue.py"  # claims name the kinds that test them: data
KIND_SCOPE = [LIB / "analyse", LIB / "publish", LIB / "steps.py", LIB / "study.py", LIB / "explore.py",
              LIB / "cli.py", LIB / "commands"]


def _kind_constants(node: ast.AST) -> set[str]:
    """The study-kind names a constant, or a tuple/list/set of constants, spells."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & KIND_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_kind_constants(e) for e in node.elts)) if node.elts else set()
    return set()


def _dict_kinds(node: ast.Dict) -> set[str]:
    """The kind names among a dict's keys ("threads" and "tpcc" alone are a column and a workload)."""
    return set().union(*(_kind_constants(k) for k in node.keys if k is not None)) if node.keys else set()


def kind_string_uses(source: str) -> list[str]:
    """Branches on a study-kind string (a comparison of something named ``kind`` with a kind's name), tables
    keyed by kind names, and the kind-only words anywhere. A topology's kind (``...topology...kind ==
    "galera"``, what a run's manifest records) is not a study's, and the claim catalogue's ``sources=`` is
    data naming kinds."""
    tree = ast.parse(source)
    skip: set[int] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and "topology" in ast.unparse(node):
            skip.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.keyword) and node.arg == "sources":
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = [s for s in sides if _kind_constants(s)]
            if named and any("kind" in ast.unparse(s) for s in sides if s not in named):
                out.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and _dict_kinds(node) & (KIND_NAMES - {"threads", "tpcc"}):
            out.append(f"line {node.lineno}: a table keyed by study kinds")
        elif isinstance(node, ast.Constant) and node.value in KIND_ONLY:
            out.append(f"line {node.lineno}: {node.value!r}")
    return out


def test_no_branch_on_a_study_kind_string_outside_the_registry() -> None:
    """Analysis, claims and publishing dispatch through dbmatrix.analyse.kinds; a kind's name is spelt
    only there (and as data in the claim catalogue's sources)."""
    files = sorted(p for root in KIND_SCOPE for p in ([root] if root.is_file() else root.rglob("*.py")))
    assert len(files) > 30
    offenders = [f"{p.relative_to(LIB)} {use}" for p in files
                 if KIND_REGISTRY not in p.parents for use in kind_string_uses(p.read_text())]
    assert offenders == [], "\n".join(offenders)
    assert kind_string_uses(CLAIM_CATALOGUE.read_text()) == []


def test_the_kind_check_can_fail() -> None:
    assert len(kind_string_uses('if st.kind == "galera":\n    pass\n')) == 2  # the branch and the word
    assert kind_string_uses('x = kind in ("tpcc", "storage")\n') == ['line 1: kind in (\'tpcc\', \'storage\')']
    assert kind_string_uses('P = {"storage": "", "threads": "thr"}\n') == ["line 1: a table keyed by study kinds"]
    assert kind_string_uses('ok = m.get("topology", {}).get("kind") == "galera"\n') == []
    assert kind_string_uses('w = factors.get("threads")\nrow = {"threads": 4, "tps": 1.0}\n') == []


# ------------------------------------------------------------------------------------ publishing's inputs

RAW_MODULES = ("dbmatrix.workload", "dbmatrix.parse", "dbmatrix.hosts.collect", "dbmatrix.record", "dbmatrix.run",
               "dbmatrix.store")
RAW_CALLS = {"records", "record", "parsed", "load_runs", "load_intervals", "load_histograms",
             "analyse", "analyse_replication", "scaleout_tables", "write_host_record"}


def raw_reads(source: str) -> list[str]:
    """What in a module reads raw run outputs or recomputes processed tables: imports of the parsers, the
    store's loaders or the run package; calls of the store's raw loaders and manifest readers or of the
    analysis steps; reads of the hosts/ directory."""
    out = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {a.name for a in node.names}
            if node.module.startswith(RAW_MODULES) and not (node.module == "dbmatrix.store"
                                                            and names <= {"write_text_atomic", "ResultStore"}):
                out.append(f"line {node.lineno}: from {node.module} import {', '.join(sorted(names))}")
            bad = names & RAW_CALLS
            if bad:
                out.append(f"line {node.lineno}: imports {', '.join(sorted(bad))}")
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in RAW_CALLS:
                out.append(f"line {node.lineno}: calls {ast.unparse(f)}")
        elif isinstance(node, ast.Attribute) and node.attr == "hosts" and ast.unparse(node.value).endswith("store"):
            out.append(f"line {node.lineno}: reads {ast.unparse(node)}")
    return out


def test_publishing_reads_processed_outputs_only() -> None:
    """publish/ draws and typesets the processed tables analysis wrote (dbmatrix analyse); it parses no raw
    output, reads no manifest and fits nothing it could read back."""
    offenders = [f"{p.relative_to(LIB)} {r}" for p in sorted((LIB / "publish").rglob("*.py"))
                 for r in raw_reads(p.read_text())]
    assert offenders == [], "\n".join(offenders)


def test_compare_and_report_read_processed_outputs_only() -> None:
    """`dbmatrix compare` and `dbmatrix report` read processed tables (runs.csv, cells.csv, the claims),
    never the raw run records; the comparison itself opens no file."""
    pure = [LIB / "analyse" / f"{m}.py" for m in ("compare", "compare_model", "compare_text")]
    files = [LIB / "resultsets.py", *pure, LIB / "publish" / "report.py"]
    offenders = [f"{p.relative_to(LIB)} {r}" for p in files for r in raw_reads(p.read_text())]
    assert offenders == [], "\n".join(offenders)
    io = [f"{p.name} {u}" for p in pure for u in _io_uses(p) if not u.startswith("imports dbmatrix.")]
    assert io == []


def test_the_raw_read_check_can_fail() -> None:
    assert raw_reads("from dbmatrix.workload.sysbench import parse_output\n")
    assert raw_reads("m = st.store.record(run_id)\n") == ["line 1: calls st.store.record"]
    assert raw_reads("for m in store.records():\n    pass\n")
    assert raw_reads("files = st.store.hosts.glob('*.json')\n")
    assert raw_reads("from dbmatrix.store import write_text_atomic\nx = st.a.hosts\n") == []


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


def test_the_figure_check_is_pure() -> None:
    """publish/figure_check.py reads a drawn figure and returns findings: it imports no dbmatrix module and
    no I/O library, and opens, reads, writes or runs nothing (the build decides what to do with findings)."""
    path = LIB / "publish" / "figure_check.py"
    assert _io_uses(path) == []


def test_the_purity_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from pathlib import Path\nfrom dbmatrix.hosts.remote import Host\n"
                   "def f(p):\n    return Path(p).read_text()\n")
    assert _io_uses(bad) == ["imports pathlib", "imports dbmatrix.hosts.remote", "calls read_text() at line 4"]


def test_the_claim_needs_are_pure() -> None:
    """analyse/claims/needs.py judges a design before any data (what `dbmatrix plan` refuses): it imports the
    analysis, the spec and, for this machine's default media, the inventory; never run/, the store or the host
    seam; and it opens, reads, writes or runs nothing."""
    path = LIB / "analyse" / "claims" / "needs.py"
    targets = {t for t, _ in _imports(path) if t.startswith("dbmatrix")}
    assert {_unit(t) for t in targets} <= {"analyse", "spec", "hosts"}, targets
    assert {t for t in targets if _unit(t) == "hosts"} == {"dbmatrix.hosts.inventory"}
    assert [u for u in _io_uses(path) if not u.startswith("imports dbmatrix")] == []


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

def test_the_fleet_knows_leasers_only_through_the_leasing_seam() -> None:
    """run/fleet.py and run/leasing.py name no scheduler: Slurm lives in run/slurm.py alone."""
    mod_edges, _ = _graph()
    for m in ("dbmatrix.run.fleet", "dbmatrix.run.leasing"):
        assert "dbmatrix.run.slurm" not in mod_edges[m], m
    assert "dbmatrix.run.leasing" in mod_edges["dbmatrix.run.fleet"]
