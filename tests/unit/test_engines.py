"""The engine registry (dbmatrix.engines): what each engine declares, that it is the lowest layer, that no
module outside it branches on an engine's name, and that a new engine needs nothing but its own module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from dbmatrix import engines
from dbmatrix.engines import Engine
from dbmatrix.parse import cache_counters
from dbmatrix.run import mysqld
from dbmatrix.run.datasets import logical_sizes, restore_command
from dbmatrix.spec.experiment import Cell, DatasetKey, SpecError, check_combination
from dbmatrix.spec.sizing import datadir_lower_bound

LIB = Path(__file__).resolve().parents[2] / "lib" / "dbmatrix"
REGISTRY = LIB / "engines"
ROLES = {"requests", "hits", "misses", "data_hits", "data_misses", "flush_bytes", "compaction_bytes",
         "index_misses", "index_insert_bytes", "data_insert_bytes"}
# Engine names outside the registry that stay for now, each with why (shrink, never grow):
KNOWN = {
    # publish/ is another change's (issue 42 item 1); Engine.title holds the same words
    "publish/build.py": 1,
}


def test_the_builtin_engines_in_order() -> None:
    assert engines.names() == ("innodb", "myrocks")
    assert engines.engine("myrocks").title == "MyRocks" and engines.find("aria") is None
    with pytest.raises(ValueError, match="allowed: innodb, myrocks"):
        engines.engine("aria")
    with pytest.raises(ValueError, match="registered already"):
        engines.register(engines.engine("innodb"))


@pytest.mark.parametrize("e", engines.BUILTIN, ids=lambda e: e.name)
def test_each_engine_declares_what_the_harness_asks(e: Engine) -> None:
    assert e.name and e.title and e.block_sizes and "none" in e.compressions and e.table_engine_word
    assert set(e.why_not).isdisjoint(e.compressions)
    assert e.cache_variable in e.harness_options and e.cache_variable.startswith(e.option_prefix)
    assert set(e.status_counters) <= ROLES and "misses" in e.status_counters
    assert {"requests", "hits"} & set(e.status_counters)
    assert "none" in e.oltp_bytes_per_row and e.tpcc_bytes_per_warehouse > 0
    for bs in e.block_sizes:
        assert e.min_cache_bytes(bs) > 0
    for c in e.compressions:
        assert e.table_engine(c).lower().startswith(e.table_engine_word.lower())
        opts = e.server_options("16k", c, 123, "/logs")
        assert f"={123}" in opts[-1] and any("/logs" in o for o in opts)
        assert {o.split("=")[0][2:].replace("-", "_") for o in opts} - {"plugin_load_add"} <= \
            e.harness_options | {o.split("=")[0][2:].replace("-", "_") for o in opts if "direct" in o}
    assert e.logical_size(100, "none", "16k", 100)[0] == 100


def _io_and_dbmatrix_imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                 [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        out += [n for n in names if n.split(".")[0] in {"os", "pathlib", "subprocess", "shutil", "io"}
                or (n.startswith("dbmatrix") and not n.startswith("dbmatrix.engines"))]
    return out


def test_the_registry_is_the_lowest_layer() -> None:
    """It imports no other dbmatrix package and nothing that does I/O: the spec and the run side read it."""
    assert {p.name for p in REGISTRY.glob("*.py")} >= {"__init__.py", "base.py", "innodb.py", "myrocks.py"}
    assert {p.name: u for p in REGISTRY.glob("*.py") if (u := _io_and_dbmatrix_imports(p))} == {}


# ------------------------------------------------------------------------------ no branch on an engine's name

def _engine_constants(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(engines.names())
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_engine_constants(e) for e in node.elts)) if node.elts else set()
    return set()


def engine_name_uses(source: str) -> list[str]:
    """Branches on an engine's name (a comparison or membership test with an engine's name, or a collection of
    them, on one side) and tables keyed by engine names (a dict key that is, or holds, one)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_engine_constants(s) for s in [node.left, *node.comparators]):
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and any(k is not None and _engine_constants(k) for k in node.keys):
            out.append(f"line {node.lineno}: a table keyed by engine names")
    return out


def _uses_outside_the_registry() -> dict[str, int]:
    return {str(p.relative_to(LIB)): n for p in sorted(LIB.rglob("*.py"))
            if REGISTRY not in p.parents and (n := len(engine_name_uses(p.read_text())))}


def test_no_branch_on_an_engine_name_outside_the_registry() -> None:
    """Engine knowledge is asked of dbmatrix.engines; a claim's conditions (``at={"engine": "myrocks"}``) and
    default levels are data, not branches. A known use may go (then drop it from KNOWN), never grow."""
    found = _uses_outside_the_registry()
    assert {f: n for f, n in found.items() if n > KNOWN.get(f, 0)} == {}, found


def test_the_engine_check_can_fail() -> None:
    assert engine_name_uses('if cell.engine == "myrocks":\n    pass\n') == ["line 1: cell.engine == 'myrocks'"]
    assert len(engine_name_uses('ok = "myrocks" in factors["engine"] or set(f) != {"innodb"}\n')) == 2
    assert engine_name_uses('T = {("innodb", "none"): 300}\n') == ["line 1: a table keyed by engine names"]
    assert engine_name_uses('at = {"engine": "myrocks"}\nf = Factor("engine", "innodb")\n') == []


# ------------------------------------------------------------------------------ a new engine is one module

class Toy(Engine):
    name = "toy"
    title = "Toy"
    block_sizes = ("16k",)
    compressions = ("none",)
    plugin = "ha_toy.so"
    option_prefix = "toy_"
    cache_variable = "toy_cache_size"
    harness_options = frozenset({"toy_cache_size"})
    status_counters = MappingProxyType({"requests": "toy_reads", "misses": "toy_misses"})
    table_engine_word = "Toy"
    oltp_bytes_per_row = MappingProxyType({"none": 100})
    tpcc_bytes_per_warehouse = 1 << 20

    def min_cache_bytes(self, block_size: str) -> int:
        return 4096

    def server_options(self, block_size: str, compression: str, cache: int | None,
                       log_dir: str | None) -> list[str]:
        return [f"--plugin-load-add={self.plugin}", *([f"--toy-cache-size={cache}"] if cache is not None else [])]

    def table_engine(self, compression: str) -> str:
        return "Toy"

    def data_files_glob(self, datadir: str) -> str:
        return f"{datadir}/toy/*.dat"

    def logical_size(self, apparent: int, compression: str, block_size: str,
                     measured: int | None) -> tuple[int, str]:
        return apparent, "apparent size"

    def move_log_command(self, datadir: str, log_dir: str) -> str:
        return f"mv {datadir}/toy.log {log_dir}/"


@pytest.fixture
def toy() -> Iterator[Engine]:
    e = engines.register(Toy())
    try:
        yield e
    finally:
        engines.unregister("toy")


def test_a_registered_engine_runs_through_spec_server_dataset_and_counters(toy: Engine) -> None:
    cell = Cell(engine="toy", cache_pct=0, block_size="16k", compression="none", medium="disk", threads=4)
    check_combination(cell)
    with pytest.raises(SpecError, match="allowed for toy: none"):
        check_combination(Cell(engine="toy", cache_pct=0, block_size="16k", compression="lz4", medium="disk",
                               threads=4))
    paths = mysqld.ServerPaths.under("/r", "/d", "s")
    opts = mysqld.render_options(cell, paths, user="u", cache=mysqld.cache_bytes(cell, 10 << 20),
                                 constants={"toy_x": "1", "rocksdb_y": "2"})
    assert "--plugin-load-add=ha_toy.so" in opts and "--toy-cache-size=4096" in opts
    assert "--toy-x=1" in opts and "--rocksdb-y=2" not in opts  # a plugin engine's options reach its cells only
    assert "--innodb-buffer-pool-load-at-startup=OFF" in opts  # the built-in InnoDB's, for every server
    inno = Cell(engine="innodb", cache_pct=0, block_size="16k", compression="none", medium="disk", threads=4)
    assert mysqld.constants_for(inno, {"toy_x": "1"}) == {}
    assert mysqld.table_engine(cell) == "Toy"
    assert logical_sizes(DatasetKey("toy", "16k", "none", 1, 10), 123, None)["data_logical_bytes"] == 123
    assert datadir_lower_bound("toy", "none", "oltp", 2, 10, 0).data_bytes == 2000
    got = cache_counters.cache_counters(toy.status_counters, {"toy_reads": "0", "toy_misses": "0"},
                                        {"toy_reads": "10", "toy_misses": "1"})
    assert got["cache_hit_ratio"] == pytest.approx(0.9)


def test_restore_moves_each_engines_log(toy: Engine) -> None:
    from dbmatrix.run.datasets import DatasetInfo

    info = DatasetInfo(key="k", host="h", snapshot="/s", engine="toy", block_size="16k", compression="none",
                       tables=1, table_size=1, data_physical_bytes=1, data_logical_bytes=1,
                       datadir_physical_bytes=1, datadir_logical_bytes=1, prepare_s=0.0, created_utc="x")
    assert restore_command(info, "/m/d", "/m/l").endswith("&& mv /m/d/toy.log /m/l/")
