"""Where a sentinel's drift came from, read from the two runs' own counters and the platform probe (pure).

A sentinel pair (:mod:`dbmatrix.analyse.sentinel`) says whether a sitting's closing run was slower than its
opening one; this says how. Throughput factors exactly into how busy the host's CPUs were and the CPU time
each transaction took, over the same measured window::

    tps = (CPU busy s / window s) / (CPU busy s / transactions)

so ln(end/start tps) = ln(CPU use ratio) - ln(CPU per transaction ratio), with nothing left over. Beside
them, the work each transaction did (cache lookups, KiB read and written on the data device) says whether
the engine did something else; and the fixed-work probe of the platform, with the server stopped
(:mod:`dbmatrix.run.platform_probe`), whether the machine itself got slower. A reading, no test: the
sentinel's z (in :mod:`dbmatrix.analyse.sentinel`) is the test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

# the sentinel runs' columns this reads (load_sentinel keeps them), probe fields prefixed with probe_
COUNTERS = ("window_s", "host_cpu_busy_s", "cpu_user_s", "cpu_sys_s", "dev_read_bytes", "dev_write_bytes",
            "cache_lookups")
# end/start ratios in sentinel-drift.csv, and their words
RATIOS: dict[str, str] = {
    "util_ratio": "CPU use",
    "cpu_per_txn_ratio": "host CPU per transaction",
    "mysqld_cpu_per_txn_ratio": "mysqld CPU per transaction",
    "lookups_per_txn_ratio": "cache lookups per transaction",
    "read_kb_per_txn_ratio": "KiB read per transaction",
    "write_kb_per_txn_ratio": "KiB written per transaction",
    "probe_cpu_ratio": "probe CPU speed (1 thread)",
    "probe_cpu_all_ratio": "probe CPU speed (all CPUs)",
    "probe_sync_ratio": "probe synchronous write time",
}
WORK = ("lookups_per_txn_ratio", "read_kb_per_txn_ratio", "write_kb_per_txn_ratio")
# below this |ln ratio| a throughput change is not read at all; a work counter that moves more than
# WORK_TOL is "other work"; a component carrying at least DOMINANT of ln(tps ratio) is named as its source
SMALL = 0.02
WORK_TOL = 0.05
DOMINANT = 2.0 / 3.0
# SD of ln(end/start) of the probe's CPU figure with nothing changed: probes back to back on the idle VM vary
# with SD 2.3-3.1 % each (three series of 10, benchmarks/bench_platform_probe.py), so a ratio of two with up
# to 4.4 %. The probe's CPU figure is the geometric mean of its one-thread and all-CPU ratios. It names the
# platform when it moved the drift's way by PROBE_Z of that (one-sided 5 %) and by half the CPU-per-
# transaction change; the server only when it stayed within one SD while CPU per transaction moved by
# SERVER_SDS of them.
PROBE_SD = 0.045
PROBE_Z = 1.645
SERVER_SDS = 2.5
# KiB per transaction below which a device's traffic is noise at both ends (the floor of analyse.mechanism)
KIB_FLOOR = 1.0


def as_float(v: Any) -> float:
    """`v` as a float, NaN when it is none (None, missing, text)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _f(row: Mapping[str, Any], key: str) -> float:
    return as_float(row.get(key))


def _per_txn(row: Mapping[str, Any], key: str) -> float:
    txn = _f(row, "tps") * _f(row, "window_s")
    v = _f(row, key)
    return v / txn if txn > 0 and math.isfinite(v) else math.nan


def _ratio(a: float, b: float, floor: float = 0.0) -> float:
    """b / a where both are positive and finite and one of them reaches `floor`, else NaN (a counter that is
    noise at both ends says nothing)."""
    ok = a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b) and max(a, b) >= floor
    return b / a if ok else math.nan


def drift_ratios(start: Mapping[str, Any], end: Mapping[str, Any]) -> dict[str, float]:
    """End over start of every :data:`RATIOS` quantity of a sentinel pair (NaN where a counter is missing)."""
    def util(r: Mapping[str, Any]) -> float:
        w = _f(r, "window_s")
        return _f(r, "host_cpu_busy_s") / w if w > 0 else math.nan

    def mysqld(r: Mapping[str, Any]) -> float:
        return _per_txn(r, "cpu_user_s") + _per_txn(r, "cpu_sys_s")

    out = {
        "util_ratio": _ratio(util(start), util(end)),
        "cpu_per_txn_ratio": _ratio(_per_txn(start, "host_cpu_busy_s"), _per_txn(end, "host_cpu_busy_s")),
        "mysqld_cpu_per_txn_ratio": _ratio(mysqld(start), mysqld(end)),
        "lookups_per_txn_ratio": _ratio(_per_txn(start, "cache_lookups"), _per_txn(end, "cache_lookups")),
        "read_kb_per_txn_ratio": _ratio(_per_txn(start, "dev_read_bytes") / 1024,
                                        _per_txn(end, "dev_read_bytes") / 1024, KIB_FLOOR),
        "write_kb_per_txn_ratio": _ratio(_per_txn(start, "dev_write_bytes") / 1024,
                                         _per_txn(end, "dev_write_bytes") / 1024, KIB_FLOOR),
        "probe_cpu_ratio": _ratio(_f(start, "probe_cpu_eps_1"), _f(end, "probe_cpu_eps_1")),
        "probe_cpu_all_ratio": _ratio(_f(start, "probe_cpu_eps_all"), _f(end, "probe_cpu_eps_all")),
        "probe_sync_ratio": _ratio(_f(start, "probe_sync_write_ms"), _f(end, "probe_sync_write_ms")),
    }
    return out


def pooled_ratios(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The geometric mean of each ratio over campaigns; NaN unless every campaign has it (a mean of the
    campaigns that happen to have a counter would speak for the others)."""
    out: dict[str, float] = {}
    for key in ("ratio", *RATIOS):
        v = np.array([_f(r, key) for r in rows], dtype=float)
        ok = len(v) > 0 and bool((np.isfinite(v) & (v > 0)).all())
        out[key] = float(np.exp(np.log(v).mean())) if ok else math.nan
    return out


def _pct(r: float) -> str:
    return f"{100 * (r - 1):+.1f} %"


def _named(ratios: Mapping[str, float], keys: Sequence[str], pct: Callable[[float], str] = _pct) -> list[str]:
    return [f"{RATIOS[k]} {pct(ratios[k])}" for k in keys if math.isfinite(ratios.get(k, math.nan))]


def _probe_cpu(ratios: Mapping[str, float]) -> float:
    """The probe's CPU ratio: the geometric mean of its one-thread and all-CPU figures (either where only one)."""
    v = [r for r in (ratios.get("probe_cpu_ratio", math.nan), ratios.get("probe_cpu_all_ratio", math.nan))
         if math.isfinite(r) and r > 0]
    return math.exp(sum(math.log(r) for r in v) / len(v)) if v else math.nan


def drift_reading(tps_ratio: float, ratios: Mapping[str, float], pct: Callable[[float], str] = _pct,
                  say_unprobed: bool = True) -> str:
    """What the counters say about a sentinel pair's end/start throughput `tps_ratio` (or a pooled one):
    the factors, then which carried the change, and what the probe adds. Empty without the CPU counters.
    `pct` writes a ratio as a change (the paper's is LaTeX); `say_unprobed`: say when no probe was recorded."""
    u, c = ratios.get("util_ratio", math.nan), ratios.get("cpu_per_txn_ratio", math.nan)
    if not (math.isfinite(tps_ratio) and tps_ratio > 0 and math.isfinite(u) and math.isfinite(c)):
        return ""
    lt, lu, lc = math.log(tps_ratio), math.log(u), -math.log(c)
    facts = "; ".join(x for x in (", ".join(_named(ratios, ("util_ratio", "cpu_per_txn_ratio",
                                                            "mysqld_cpu_per_txn_ratio"), pct)),
                                  ", ".join(_named(ratios, WORK, pct))) if x)
    if abs(lt) < SMALL:
        return facts
    slower = lt < 0
    moved = [k for k in WORK if math.isfinite(ratios.get(k, math.nan)) and abs(math.log(ratios[k])) > WORK_TOL]
    work = ("the same work per transaction" if not moved else
            "the work per transaction, which changed too (" + ", ".join(_named(ratios, moved, pct)) + "),")
    probe_cpu, probe_sync = _probe_cpu(ratios), ratios.get("probe_sync_ratio", math.nan)
    rest = (1.0 - DOMINANT) * abs(lt)
    if lc * lt > 0 and abs(lc) >= DOMINANT * abs(lt) and abs(lu) <= max(SMALL, rest):
        why = (f"{work} took {'more' if slower else 'less'} CPU time, at the same CPU use: "
               "the platform's speed or the server's own waiting (spinning)")
        if math.isfinite(probe_cpu):
            lp = math.log(probe_cpu)
            if lp * lt > 0 and abs(lp) >= max(0.5 * abs(lc), PROBE_Z * PROBE_SD):
                why += (f"; the fixed-work probe ran {'slower' if slower else 'faster'} too "
                        f"({pct(probe_cpu)} events/s): the platform")
            elif abs(lp) < PROBE_SD and abs(lc) >= SERVER_SDS * PROBE_SD:
                why += (f"; the fixed-work probe did not change ({pct(probe_cpu)} events/s): the server, "
                        "not the platform")
            else:
                why += f"; the fixed-work probe moved {pct(probe_cpu)} events/s, which does not settle it"
        elif say_unprobed:
            why += "; no platform probe was recorded to tell them apart"
    elif lu * lt > 0 and abs(lu) >= DOMINANT * abs(lt) and abs(lc) <= max(SMALL, rest):
        why = (f"the CPUs were {'less' if slower else 'more'} busy at the same CPU time per transaction: the server "
               f"waited {'more' if slower else 'less'} (I/O or locks)")
        if math.isfinite(probe_sync):
            why += f"; the probe's synchronous write took {pct(probe_sync)}"
    else:
        why = "CPU use and CPU time per transaction both moved"
    return f"{facts}: {why}" if facts else why


__all__ = ["COUNTERS", "RATIOS", "as_float", "drift_ratios", "drift_reading", "pooled_ratios"]
