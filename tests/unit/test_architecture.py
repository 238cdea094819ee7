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
    lower_than = {"cache": set(), "engines": set(), "parse": set(), "spec": {"engines"},
                  "hosts": {"spec", "parse", "cache"},
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


# ------------------------------------------------------------------------------------ publishing only formats
#
# The rule, followed by calls: starting from every function, method, class and module body under
# dbmatrix/publish, follow what each one uses, transitively: a name it refers to (a function or class of its
# own module, or one it imports, through re-exports), a module's attribute (``mod.f``), a method it calls on
# any object (``x.m(...)``: every method called ``m`` in the package, since the object's class is not known
# here), a property it reads (``x.p``: every property called ``p``), a class's constructors and dunders, and
# the body of every module it reaches (loading a module runs its body: its imports load other modules' bodies,
# never call their functions). Nothing reached may be a function or method of an estimator module
# (ESTIMATORS: the model fits and the claims' evaluation), import a model library (statsmodels), be defined in a
# module that reads raw run outputs (RAW_RECORD_MODULES: run records, parsers, the run side), or call a raw
# loader (RAW_CALLS: store.records(), store.record(), the tidy loaders, the analysis steps). Annotations are
# not uses. Publishing gets what it shows from the judgement's files (dbmatrix.analyse.judgement).

ESTIMATORS = ("dbmatrix.analyse.contrasts", "dbmatrix.analyse.cell_model", "dbmatrix.analyse.campaign_model",
              "dbmatrix.analyse.effects", "dbmatrix.analyse.comparisons", "dbmatrix.analyse.shares",
              "dbmatrix.analyse.pooling", "dbmatrix.analyse.claims.estimators", "dbmatrix.analyse.claims.table",
              "dbmatrix.analyse.claims.premises", "dbmatrix.analyse.claims.evidence", "dbmatrix.analyse.judge")
RAW_RECORD_MODULES = ("dbmatrix.record", "dbmatrix.parse", "dbmatrix.workload", "dbmatrix.run", "dbmatrix.hosts.collect")
MODEL_LIBRARIES = ("statsmodels",)

Node = tuple[str, str]  # (module, qualified name); "" is the module's body


class CallGraph:
    """What each function, method, class and module body of the package uses (see the rule above)."""

    def __init__(self, lib: Path = LIB) -> None:
        self.trees = {".".join(p.relative_to(lib.parent).with_suffix("").parts).removesuffix(".__init__"):
                      ast.parse(p.read_text()) for p in sorted(lib.rglob("*.py"))}
        self.defs: dict[str, dict[str, ast.AST]] = {m: {} for m in self.trees}
        self.methods: dict[str, set[Node]] = {}
        self.properties: dict[str, set[Node]] = {}
        for m, tree in self.trees.items():
            for n in tree.body:
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    self.defs[m][n.name] = n
                if isinstance(n, ast.ClassDef):
                    for f in n.body:
                        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
                            self.defs[m][f"{n.name}.{f.name}"] = f
                            prop = any(ast.unparse(d).endswith(("property", "cached_property")) for d in f.decorator_list)
                            (self.properties if prop else self.methods).setdefault(f.name, set()).add((m, f"{n.name}.{f.name}"))
        self.bindings = {m: self._bindings(m, tree.body) for m, tree in self.trees.items()}

    def _bindings(self, module: str, body: list[ast.stmt] | list[ast.AST]) -> dict[str, Node]:
        """Names the import statements among `body` bind -> (module, name) they stand for ((module, "") for a module)."""
        out: dict[str, Node] = {}
        for n in body:
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("dbmatrix"):
                for a in n.names:
                    sub = f"{n.module}.{a.name}"
                    out[a.asname or a.name] = (sub, "") if sub in self.trees else (n.module, a.name)
            elif isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.startswith("dbmatrix") and a.asname:
                        out[a.asname] = (a.name, "")
        return out

    def resolve(self, node: Node, seen: frozenset[Node] = frozenset()) -> Node:
        """A name through the modules that re-export it, to where it is defined ((module, "") when it is not a
        function or class: a constant, the module itself)."""
        m, name = node
        if not name or m not in self.trees or name in self.defs[m] or node in seen:
            return (m, name if name in self.defs.get(m, {}) else "")
        target = self.bindings[m].get(name)
        return self.resolve(target, seen | {node}) if target else (m, "")

    def body(self, node: Node) -> list[ast.AST]:
        m, q = node
        if not q:  # the module's own statements, with the decorators and class heads of its definitions
            out: list[ast.AST] = []
            for n in self.trees[m].body:
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    out += [*n.decorator_list, *getattr(n, "bases", [])]
                else:
                    out.append(n)
            return out
        d = self.defs[m][q]
        if isinstance(d, ast.ClassDef):  # its class-level statements (fields, defaults), not its methods
            return [*d.decorator_list, *d.bases,
                    *(n for n in d.body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
        return [d]

    def uses(self, node: Node) -> tuple[set[Node], set[str], set[str], set[Node]]:
        """What `node` uses: the functions, classes and module bodies it names; the methods it calls and the
        attributes it reads on objects (by name); the classes it names, annotations included (the types whose
        methods those calls may reach)."""
        m, q = node
        out: set[Node] = {(m, "")}
        calls: set[str] = set()
        reads: set[str] = set()
        stmts = self.body(node)
        local = dict(self.bindings[m])
        for s in stmts:
            local.update(self._bindings(m, [n for n in ast.walk(s) if isinstance(n, ast.Import | ast.ImportFrom)]))
        notes = {id(a) for s in stmts for n in ast.walk(s) for a in _annotations(n)}
        in_notes = {id(x) for s in stmts for n in ast.walk(s) if id(n) in notes for x in ast.walk(n)}
        named: set[Node] = set()
        for s in stmts:
            for n in ast.walk(s):
                target: Node | None = None
                if isinstance(n, ast.Name):
                    if n.id in self.defs[m] and (q == "" or n.id != q.split(".")[0] or "." in q):
                        target = (m, n.id)
                    elif n.id in local:
                        target = self.resolve(local[n.id])
                elif isinstance(n, ast.Attribute):
                    base = n.value.id if isinstance(n.value, ast.Name) else None
                    if base in local and not local[base][1]:  # a module's attribute
                        mod = local[base][0]
                        target = ((f"{mod}.{n.attr}", "") if f"{mod}.{n.attr}" in self.trees
                                  else self.resolve((mod, n.attr)))
                    elif not n.attr.startswith("__"):  # super().__init__(): the class's own (dunders, below)
                        reads.add(n.attr)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                    calls.add(n.func.attr)
                if target is not None:
                    named.add(target)
                    if id(n) not in in_notes:
                        out.add(target)
        classes = {t for t in named if isinstance(self.defs.get(t[0], {}).get(t[1]), ast.ClassDef)}
        for t in classes & out:  # a class used: its constructors and dunders run
            out |= {(t[0], k) for k in self.defs[t[0]] if k.startswith(t[1] + ".__")}
        if not q:  # a decorated function is registered when its module loads (hooks, registries)
            out |= {(m, n.name) for n in self.trees[m].body
                    if isinstance(n, ast.FunctionDef) and n.decorator_list}
        return out - {node}, calls, reads, classes

    @functools.cached_property
    def subclasses(self) -> dict[Node, set[Node]]:
        """Each class -> itself and every class of the package that derives from it, transitively."""
        direct: dict[Node, set[Node]] = {}
        for m, defs in self.defs.items():
            for name, d in defs.items():
                if isinstance(d, ast.ClassDef):
                    for b in d.bases:
                        base = (m, b.id) if isinstance(b, ast.Name) and b.id in defs else (
                            self.resolve(self.bindings[m][b.id]) if isinstance(b, ast.Name) and b.id in self.bindings[m]
                            else None)
                        if base is not None:
                            direct.setdefault(base, set()).add((m, name))
        out: dict[Node, set[Node]] = {}
        for c in {(m, n) for m, defs in self.defs.items() for n, d in defs.items() if isinstance(d, ast.ClassDef)}:
            seen, todo = {c}, [c]
            while todo:
                for sub in direct.get(todo.pop(), ()):
                    if sub not in seen:
                        seen.add(sub)
                        todo.append(sub)
            out[c] = seen
        return out

    def members(self, cls: Node, name: str, calls: bool) -> set[Node]:
        """The methods (`calls`) or properties called `name` of a class and its subclasses."""
        pool = self.methods if calls else self.properties
        return {n for n in pool.get(name, set()) if (n[0], n[1].split(".")[0]) in self.subclasses.get(cls, {cls})}

    def reach(self, starts: list[Node]) -> dict[Node, Node | None]:
        """Every node reached from `starts`, with the node it was reached from (None for a start). A method
        call ``x.m()`` reaches the methods ``m`` of the classes the reached code names (annotations included)
        and of their subclasses; an attribute read ``x.p``, their properties ``p``."""
        parent: dict[Node, Node | None] = dict.fromkeys(starts)
        todo = list(starts)
        known: set[Node] = set()
        wanted: dict[tuple[str, bool], Node] = {}  # (name, a call) -> the first node that asked for it

        def add(t: Node, frm: Node) -> None:
            if t[0] in self.trees and t not in parent:
                parent[t] = frm
                todo.append(t)

        while todo:
            n = todo.pop()
            direct, calls, reads, classes = self.uses(n)
            for t in direct:
                add(t, n)
            for name, call in [*((c, True) for c in calls), *((r, False) for r in reads)]:
                if (name, call) not in wanted:
                    wanted[(name, call)] = n
                    for cls in known:
                        for t in self.members(cls, name, call):
                            add(t, n)
            for cls in classes - known:
                known.add(cls)
                for (name, call), frm in list(wanted.items()):
                    for t in self.members(cls, name, call):
                        add(t, frm)
        return parent

    def starts(self, package: str) -> list[Node]:
        """Every function, method, class and module body of the modules under `package`."""
        return [(m, q) for m in sorted(self.trees) if m == package or m.startswith(package + ".")
                for q in ["", *self.defs[m]]]

    def forbidden(self, node: Node) -> str:
        """Why publishing may not reach `node` ("": it may)."""
        m, q = node
        code = bool(q) and not isinstance(self.defs[m][q], ast.ClassDef)  # a function or method (a class's own
        if code and any(m == p or m.startswith(p + ".") for p in ESTIMATORS):  # code: its methods, as reached)
            return "an estimator"
        if code and any(m == p or m.startswith(p + ".") for p in RAW_RECORD_MODULES):
            return "raw run outputs"
        for s in self.body(node):
            for n in ast.walk(s):
                if isinstance(n, ast.Import | ast.ImportFrom):
                    names = [n.module or ""] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names]
                    if any(x.split(".")[0] in MODEL_LIBRARIES for x in names):
                        return "imports a model library"
                elif isinstance(n, ast.Call):
                    f = n.func
                    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                    if name in RAW_CALLS:
                        return f"calls {ast.unparse(f)}() (raw run outputs)"
        return ""


def _annotations(n: ast.AST) -> list[ast.AST]:
    if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
        args = [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs, n.args.vararg, n.args.kwarg]
        return [a.annotation for a in args if a is not None and a.annotation is not None] + (
            [n.returns] if n.returns is not None else [])
    if isinstance(n, ast.AnnAssign):
        return [n.annotation]
    return []


def reached_offenders(graph: CallGraph, package: str) -> list[str]:
    """What `package` reaches that it may not, each with the chain of uses that reaches it."""
    parent = graph.reach(graph.starts(package))
    out = []
    for node in sorted(parent):
        why = graph.forbidden(node)
        if why:
            chain = [node]
            while (p := parent[chain[-1]]) is not None:
                chain.append(p)
            out.append(f"{why}: " + " <- ".join(f"{m}:{q or '<module>'}" for m, q in chain))
    return out


@functools.cache
def _call_graph() -> CallGraph:
    return CallGraph()


def test_publishing_reaches_no_estimator_and_no_raw_record() -> None:
    """Nothing under publish/ reaches, through any chain of calls, a model fit, the claims' evaluation, a raw
    run record or a parser: the judge step (dbmatrix.analyse.judge) did that once and wrote the judgement, which
    publishing only formats."""
    offenders = reached_offenders(_call_graph(), "dbmatrix.publish")
    assert offenders == [], "\n".join(offenders)


def test_the_views_of_the_claims_reach_no_estimator() -> None:
    """The claims' one formatter and the judgement's files are as light as publishing: the README, the report,
    `verdicts` and `compare` format them through the same code."""
    graph = _call_graph()
    for package in ("dbmatrix.analyse.claims_view", "dbmatrix.analyse.judgement", "dbmatrix.analyse.compare_text"):
        assert reached_offenders(graph, package) == [], package


def test_the_call_check_can_fail(tmp_path: Path) -> None:
    lib = tmp_path / "dbmatrix"
    (lib / "analyse").mkdir(parents=True)
    (lib / "publish").mkdir()
    for d in (lib, lib / "analyse", lib / "publish"):
        (d / "__init__.py").write_text("")
    (lib / "analyse" / "contrasts.py").write_text("X = 1\ndef ratio_estimate(runs):\n    return runs\n")
    (lib / "analyse" / "helper.py").write_text(
        "from dbmatrix.analyse.contrasts import X, ratio_estimate\n\n"
        "def safe():\n    return X\n\n"
        "def fits(runs):\n    return ratio_estimate(runs)\n\n"
        "class Store:\n    def records(self):\n        return []\n")
    (lib / "publish" / "ok.py").write_text("from dbmatrix.analyse.helper import safe\n\ndef f(x: 'Store'):\n"
                                           "    return safe()\n")
    graph = CallGraph(lib)
    assert reached_offenders(graph, "dbmatrix.publish") == []  # a constant read: the module loads, nothing is called
    (lib / "publish" / "bad.py").write_text("from dbmatrix.analyse import helper\n\ndef g(st):\n"
                                            "    return helper.fits(st.store.records())\n")
    bad = reached_offenders(CallGraph(lib), "dbmatrix.publish")
    assert any(b.startswith("an estimator: dbmatrix.analyse.contrasts:ratio_estimate <- dbmatrix.analyse.helper:fits "
                            "<- dbmatrix.publish.bad:g") for b in bad), bad
    assert any(b.startswith("calls st.store.records() (raw run outputs): dbmatrix.publish.bad:g") for b in bad), bad
