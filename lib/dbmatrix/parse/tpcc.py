"""The TPC-C script's output, parsed (pure).

Output formats parsed here (printed by the Lua script):

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

import re
from typing import Any

__all__ = ["TXN_TYPES", "overall_result", "parse_check", "parse_tpcc_report"]

TXN_TYPES: tuple[str, ...] = ("new_order", "payment", "order_status", "delivery", "stock_level")

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
