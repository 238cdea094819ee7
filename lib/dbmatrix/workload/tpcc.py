"""TPC-C for sysbench: the packaged Lua workload and its installation on hosts.

The workload (``lua/tpcc.lua`` and the ``tpcc_*.lua`` files it loads from its own directory) was
written here from the TPC-C Standard Specification revision 5.11; see the header of ``tpcc.lua``.
Commands are built by :class:`dbmatrix.workload.sysbench.SysbenchCommand` with ``workload="tpcc"``.

Its output is parsed by :mod:`dbmatrix.parse.tpcc`.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dbmatrix import engines
from dbmatrix.hosts.remote import Host
from dbmatrix.parse.tpcc import TXN_TYPES

__all__ = [
    "CONDITIONS",
    "DEFAULT_CONDITIONS",
    "ISOLATION_LEVELS",
    "LUA_FILES",
    "MIX_PCT",
    "SCRIPT_DIR",
    "TABLES",
    "TXN_TYPES",
    "ConsistencyResult",
    "TpccError",
    "conditions_option",
    "install_script",
    "script_path",
    "table_names",
    "validate_isolation",
    "validate_options",
]

SCRIPT_DIR = Path(__file__).resolve().parent / "lua"
LUA_FILES: tuple[str, ...] = (
    "tpcc.lua", "tpcc_lib.lua", "tpcc_load.lua", "tpcc_txn.lua", "tpcc_check.lua", "tpcc_selftest.lua",
)
MIX_PCT: dict[str, int] = {"new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4}
#: Table base names; every table carries its set number (``warehouse1``, ``item1``, ...).
TABLES: tuple[str, ...] = ("warehouse", "district", "customer", "history", "new_order", "orders",
                           "order_line", "item", "stock")
ISOLATION_LEVELS: dict[str, str] = {
    "RC": "READ COMMITTED", "RR": "REPEATABLE READ", "RU": "READ UNCOMMITTED", "SER": "SERIALIZABLE",
}
#: Consistency conditions (clause 3.3.2.x) the check command implements; 1-4 are the default.
CONDITIONS: tuple[int, ...] = tuple(range(1, 10))
DEFAULT_CONDITIONS: tuple[int, ...] = (1, 2, 3, 4)


class TpccError(RuntimeError):
    """The TPC-C script could not do what was asked (not a consistency failure: see ConsistencyResult)."""


def script_path() -> Path:
    """The packaged ``tpcc.lua`` (its ``tpcc_*.lua`` parts sit next to it)."""
    return SCRIPT_DIR / "tpcc.lua"


def table_names(sets: int) -> list[str]:
    """Every TPC-C table of ``sets`` table sets, set by set (``warehouse1`` ... ``stock<sets>``)."""
    _positive_int("tables", sets)
    return [f"{t}{s}" for s in range(1, sets + 1) for t in TABLES]


# --------------------------------------------------------------------------- validation


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _engines_of(storage_engine: str | None) -> list[engines.Engine]:
    """The engines a sysbench storage engine string names (their table engine word in it)."""
    text = (storage_engine or "").lower()
    return [e for e in engines.engines() if e.table_engine_word and e.table_engine_word.lower() in text]


def validate_isolation(isolation: str, storage_engine: str | None = None) -> str:
    """The canonical isolation code (RC, RR, RU, SER) for ``isolation``; the long SQL names are
    accepted too. An engine may allow fewer (its ``tpcc_isolation``: MyRocks, a storage engine string
    containing ``rocksdb``, allows only RC and RR)."""
    if not isinstance(isolation, str):
        raise TypeError(f"isolation must be a string, one of {', '.join(ISOLATION_LEVELS)}; got {isolation!r}")
    key = isolation.strip().upper().replace("-", " ").replace("_", " ")
    by_name = {v: k for k, v in ISOLATION_LEVELS.items()}
    code = key if key in ISOLATION_LEVELS else by_name.get(key)
    if code is None:
        raise ValueError(f"isolation={isolation!r} is not one of: {', '.join(ISOLATION_LEVELS)}")
    for e in _engines_of(storage_engine):
        if e.tpcc_isolation is not None and code not in e.tpcc_isolation:
            raise ValueError(f"isolation={isolation!r} is not supported by {e.title}; allowed: "
                             f"{', '.join(e.tpcc_isolation)}")
    return code


def validate_options(*, scale: int, tables: int, isolation: str | None = None,
                     storage_engine: str | None = None, use_fk: bool = False) -> None:
    """Raise ValueError naming the field for TPC-C options the script would refuse."""
    _positive_int("scale", scale)
    _positive_int("tables", tables)
    if isolation is not None:
        validate_isolation(isolation, storage_engine)
    without = [e for e in _engines_of(storage_engine) if not e.foreign_keys] if use_fk else []
    if without:
        having = " or ".join(e.title for e in engines.engines() if e.foreign_keys)
        raise ValueError(f"use_fk: {without[0].title} has no foreign keys; use_fk=True needs {having}")


def conditions_option(conditions: Iterable[int] | str) -> str:
    """The value of the script's ``--conditions`` option: ``"all"`` or sorted ids like ``"1,2,3,4"``."""
    if isinstance(conditions, str):
        if conditions == "all":
            return "all"
        raise ValueError(f"conditions={conditions!r}: give 'all' or a list of ids from {list(CONDITIONS)}")
    ids = sorted(set(conditions))
    if not ids or any(isinstance(i, bool) or i not in CONDITIONS for i in ids):
        raise ValueError(f"conditions={list(conditions)!r}: allowed ids are {list(CONDITIONS)}")
    return ",".join(str(i) for i in ids)


# --------------------------------------------------------------------------- installation


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install_script(host: Host, remote_dir: str) -> str:
    """Put the Lua files into ``remote_dir`` on ``host`` (created if needed) and return the path of
    ``tpcc.lua`` there. Idempotent: files whose SHA-256 already matches are not copied again, and
    each copy lands under a temporary name first, so a reader never sees a half-written file."""
    if not remote_dir:
        raise ValueError("remote_dir must be a non-empty directory path")
    q = shlex.quote
    if host.is_local and Path(remote_dir).resolve() == SCRIPT_DIR:
        return str(script_path())
    host.run(f"mkdir -p {q(remote_dir)}")
    names = " ".join(q(n) for n in LUA_FILES)
    listing = host.run(f"cd {q(remote_dir)} && sha256sum {names} 2>/dev/null", check=False).stdout
    have = {}
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) == 2:
            have[parts[1].lstrip("*")] = parts[0]
    for name in LUA_FILES:
        local = SCRIPT_DIR / name
        if have.get(name) == _sha256(local):
            continue
        target = f"{remote_dir}/{name}"
        host.put(local, target + ".tmp")
        host.run(f"mv -f {q(target + '.tmp')} {q(target)}")
    return f"{remote_dir}/tpcc.lua"


@dataclass(frozen=True)
class ConsistencyResult:
    """Outcome of the check command; ``passed`` needs every condition to pass and exit status 0."""

    passed: bool
    conditions: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = 0
    command: str = ""
    duration_s: float = 0.0

    @property
    def failed(self) -> list[int]:
        return [c["condition"] for c in self.conditions if not c["passed"]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
