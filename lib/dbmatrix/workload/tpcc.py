"""TPC-C for sysbench: the packaged Lua workload, its installation on hosts, and its output parsers.

The workload (``lua/tpcc.lua`` and the ``tpcc_*.lua`` files it loads from its own directory) was
written here from the TPC-C Standard Specification revision 5.11; see the header of ``tpcc.lua``.
Commands are built by :func:`dbmatrix.workload.sysbench.build_command` with ``workload="tpcc"``.

Output formats this module parses (printed by the Lua script):

* ``run``, after sysbench's own report::

      TPC-C statistics:
          new_order:    committed: 2502 rolled_back: 35 retried: 0 avg_ms: 4.700
          payment:      committed: 2413 rolled_back: 0 retried: 0 avg_ms: 1.810
          ... (order_status, delivery, stock_level)
          delivery skipped districts: 0
          measured time: 10.0050s
          tpmC: 15004.57 (New-Order commits per minute)

  and, before the run, ``TPC-C constants: set 1 C_LAST load=150 run=226 delta=76 C_ID=968
  OL_I_ID=1816`` per table set and ``TPC-C run: table_sets=1 warehouses=1 isolation=RC
  engine=innodb mix=45/43/4/4/4``. ``rolled_back`` counts the 1 % New-Order business rollbacks
  (clause 2.4.2.3); ``retried`` counts attempts restarted after an ignored error (deadlock, lock wait
  timeout): the same transaction type is run again, so retries do not skew the mix.
* ``check``: ``    condition 1: PASS checked=1 violations=0 (W_YTD = sum(D_YTD) per warehouse)``
  per condition and ``TPC-C consistency: PASS|FAIL``; the exit status is 1 on failure.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dbmatrix.hosts.remote import Host

__all__ = [
    "CONDITIONS",
    "DEFAULT_CONDITIONS",
    "ISOLATION_LEVELS",
    "LUA_FILES",
    "MIX_PCT",
    "ROCKSDB_ISOLATION",
    "SCRIPT_DIR",
    "TABLES",
    "TXN_TYPES",
    "ConsistencyResult",
    "TpccError",
    "conditions_option",
    "install_script",
    "parse_check",
    "parse_tpcc_report",
    "script_path",
    "table_names",
    "validate_isolation",
    "validate_options",
]

SCRIPT_DIR = Path(__file__).resolve().parent / "lua"
LUA_FILES: tuple[str, ...] = (
    "tpcc.lua", "tpcc_lib.lua", "tpcc_load.lua", "tpcc_txn.lua", "tpcc_check.lua", "tpcc_selftest.lua",
)
TXN_TYPES: tuple[str, ...] = ("new_order", "payment", "order_status", "delivery", "stock_level")
MIX_PCT: dict[str, int] = {"new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4}
#: Table base names; every table carries its set number (``warehouse1``, ``item1``, ...).
TABLES: tuple[str, ...] = ("warehouse", "district", "customer", "history", "new_order", "orders",
                           "order_line", "item", "stock")
ISOLATION_LEVELS: dict[str, str] = {
    "RC": "READ COMMITTED", "RR": "REPEATABLE READ", "RU": "READ UNCOMMITTED", "SER": "SERIALIZABLE",
}
ROCKSDB_ISOLATION: tuple[str, ...] = ("RC", "RR")  # MyRocks refuses the others (error 4057)
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


def _is_rocksdb(storage_engine: str | None) -> bool:
    return storage_engine is not None and "rocksdb" in storage_engine.lower()


def validate_isolation(isolation: str, storage_engine: str | None = None) -> str:
    """The canonical isolation code (RC, RR, RU, SER) for ``isolation``; the long SQL names are
    accepted too. MyRocks (a storage engine string containing ``rocksdb``) allows only RC and RR."""
    if not isinstance(isolation, str):
        raise TypeError(f"isolation must be a string, one of {', '.join(ISOLATION_LEVELS)}; got {isolation!r}")
    key = isolation.strip().upper().replace("-", " ").replace("_", " ")
    by_name = {v: k for k, v in ISOLATION_LEVELS.items()}
    code = key if key in ISOLATION_LEVELS else by_name.get(key)
    if code is None:
        raise ValueError(f"isolation={isolation!r} is not one of: {', '.join(ISOLATION_LEVELS)}")
    if _is_rocksdb(storage_engine) and code not in ROCKSDB_ISOLATION:
        raise ValueError(f"isolation={isolation!r} is not supported by MyRocks; allowed: "
                         f"{', '.join(ROCKSDB_ISOLATION)}")
    return code


def validate_options(*, scale: int, tables: int, isolation: str | None = None,
                     storage_engine: str | None = None, use_fk: bool = False) -> None:
    """Raise ValueError naming the field for TPC-C options the script would refuse."""
    _positive_int("scale", scale)
    _positive_int("tables", tables)
    if isolation is not None:
        validate_isolation(isolation, storage_engine)
    if use_fk and _is_rocksdb(storage_engine):
        raise ValueError("use_fk: MyRocks has no foreign keys; use_fk=True needs InnoDB")


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


# --------------------------------------------------------------------------- parsing

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_TXN_RE = re.compile(
    rf"^\s*(?P<type>{'|'.join(TXN_TYPES)}):\s+committed:\s*(?P<c>\d+)\s+rolled_back:\s*(?P<rb>\d+)"
    rf"\s+retried:\s*(?P<rt>\d+)\s+avg_ms:\s*(?P<ms>{_NUM})\s*$"
)
_SKIPPED_RE = re.compile(r"^\s*delivery skipped districts:\s*(?P<v>\d+)\s*$")
_TIME_RE = re.compile(rf"^\s*measured time:\s*(?P<v>{_NUM})s\s*$")
_TPMC_RE = re.compile(rf"^\s*tpmC:\s*(?P<v>{_NUM})\b")
_CONST_RE = re.compile(
    r"^TPC-C constants: set (?P<set>\d+) C_LAST load=(?P<load>\d+) run=(?P<run>\d+) delta=(?P<delta>\d+)"
    r" C_ID=(?P<cid>\d+) OL_I_ID=(?P<ol>\d+)\s*$"
)
_RUN_RE = re.compile(
    r"^TPC-C run: table_sets=(?P<sets>\d+) warehouses=(?P<w>\d+) isolation=(?P<iso>\S+)"
    r" engine=(?P<engine>.*) mix=(?P<mix>[\d/]+)\s*$"
)
_STATS_HEADER = "TPC-C statistics:"


def _report_block(lines: list[str]) -> list[str] | None:
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == _STATS_HEADER)
    except StopIteration:
        return None
    block = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        block.append(line)
    return block


def parse_tpcc_report(stdout: str) -> dict[str, Any]:
    """The TPC-C block of a ``run``'s stdout as a dict; ``{}`` when there is none (another workload,
    or a run that died before its end).

    Keys: ``transactions`` ({type: {committed, rolled_back, retried, avg_ms}} for the five types),
    ``committed`` (all types), ``new_order_committed``, ``mix_pct`` (each type's share of the
    completed transactions, committed + rolled back), ``delivery_skipped_districts``,
    ``measured_time_s``, ``tpmC`` (New-Order commits per minute of measured time), ``constants``
    (per table set: c_last_load, c_last_run, delta, c_id, ol_i_id) and ``run`` (table_sets,
    warehouses, isolation, engine, mix). A block with a missing line raises ValueError.
    """
    lines = stdout.splitlines()
    block = _report_block(lines)
    if block is None:
        return {}
    txns: dict[str, dict[str, Any]] = {}
    skipped = measured = tpmc = None
    for line in block:
        if m := _TXN_RE.match(line):
            txns[m["type"]] = {"committed": int(m["c"]), "rolled_back": int(m["rb"]),
                               "retried": int(m["rt"]), "avg_ms": float(m["ms"])}
        elif m := _SKIPPED_RE.match(line):
            skipped = int(m["v"])
        elif m := _TIME_RE.match(line):
            measured = float(m["v"])
        elif m := _TPMC_RE.match(line):
            tpmc = float(m["v"])
    missing = [t for t in TXN_TYPES if t not in txns]
    missing += [name for name, v in (("delivery skipped districts", skipped), ("measured time", measured),
                                      ("tpmC", tpmc)) if v is None]
    if missing:
        raise ValueError(f"TPC-C statistics block is missing: {', '.join(missing)}")
    completed = {t: v["committed"] + v["rolled_back"] for t, v in txns.items()}
    total = sum(completed.values())
    report: dict[str, Any] = {
        "transactions": {t: txns[t] for t in TXN_TYPES},
        "committed": sum(v["committed"] for v in txns.values()),
        "new_order_committed": txns["new_order"]["committed"],
        "mix_pct": {t: (100.0 * completed[t] / total if total else 0.0) for t in TXN_TYPES},
        "delivery_skipped_districts": skipped,
        "measured_time_s": measured,
        "tpmC": tpmc,
        "constants": [],
        "run": None,
    }
    for line in lines:
        if m := _CONST_RE.match(line.strip()):
            report["constants"].append({"set": int(m["set"]), "c_last_load": int(m["load"]),
                                        "c_last_run": int(m["run"]), "delta": int(m["delta"]),
                                        "c_id": int(m["cid"]), "ol_i_id": int(m["ol"])})
        elif m := _RUN_RE.match(line.strip()):
            report["run"] = {"table_sets": int(m["sets"]), "warehouses": int(m["w"]), "isolation": m["iso"],
                             "engine": m["engine"], "mix": m["mix"]}
    return report


_COND_RE = re.compile(
    r"^\s*condition (?P<id>\d+): (?P<res>PASS|FAIL) checked=(?P<n>\d+) violations=(?P<v>\d+)"
    r" \((?P<what>.*)\)\s*$"
)
_OVERALL_RE = re.compile(r"^TPC-C consistency: (?P<res>PASS|FAIL)\s*$")


def parse_check(stdout: str) -> list[dict[str, Any]]:
    """One dict per ``condition N:`` line of the check command: condition, passed, checked,
    violations, description (in printed order; empty when the check did not run)."""
    out = []
    for line in stdout.splitlines():
        if m := _COND_RE.match(line):
            out.append({"condition": int(m["id"]), "passed": m["res"] == "PASS", "checked": int(m["n"]),
                        "violations": int(m["v"]), "description": m["what"]})
    return out


def overall_result(stdout: str) -> bool | None:
    for line in stdout.splitlines():
        if m := _OVERALL_RE.match(line.strip()):
            return m["res"] == "PASS"
    return None


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
