"""Exact cumulative counters read around a measured window, parsed (pure), and their per-run deltas.

The counters command (:func:`dbmatrix.hosts.collect.counters_command`) prints ``/proc/uptime``,
``getconf CLK_TCK``, the ``cpu`` line of ``/proc/stat``, ``/proc/PID/stat`` and ``/proc/PID/io`` and the
asked devices' ``/proc/diskstats`` lines in marked sections, in one round trip before and after the
phase; :func:`parse_counters` reads one such output and :func:`counter_deltas` turns two of them into
the per-run totals that hardware-efficiency figures (CPU µs, KB, IOs per transaction) divide by the
transaction count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DELTA_KEYS", "SECTION_MARK", "SECTOR_BYTES", "counter_deltas", "parse_counters"]

DELTA_KEYS: tuple[str, ...] = (
    "window_s", "host_cpu_busy_s", "host_cpu_iowait_s", "cpu_user_s", "cpu_sys_s",
    "proc_read_bytes", "proc_write_bytes", "dev_read_ios", "dev_write_ios", "dev_read_bytes",
    "dev_write_bytes", "dev_io_ms",
)
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
# /proc/diskstats fields after major, minor, name (Documentation/admin-guide/iostats.rst).
_DISK_FIELDS = ("reads", "reads_merged", "read_sectors", "read_ms", "writes", "writes_merged",
                "write_sectors", "write_ms", "in_flight", "io_ms", "weighted_io_ms")
_PROC_IO_FIELDS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's sector size
#: Starts every section header line of the counters command's output (``@@dbmatrix-counters@@ stat``).
SECTION_MARK = "@@dbmatrix-counters@@"


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(SECTION_MARK):
            current = out.setdefault(line[len(SECTION_MARK):].strip(), [])
        elif current is not None and line.strip():
            current.append(line)
    return out


def _ints(tokens: Sequence[str]) -> list[int] | None:
    try:
        return [int(t) for t in tokens]
    except ValueError:
        return None


def _float_or_none(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _uptime(lines: Sequence[str]) -> float | None:
    return _float_or_none(lines[0].split()[0]) if lines and lines[0].split() else None


def _parse_proc(stat: Sequence[str], io: Sequence[str]) -> dict[str, int | None] | None:
    """utime/stime/starttime from /proc/PID/stat and the /proc/PID/io counters (None if unreadable)."""
    if not stat or ")" not in stat[0]:
        return None
    fields = stat[0].rpartition(")")[2].split()  # fields from 3 (state) on; comm may hold spaces
    nums = _ints(fields[11:13] + fields[19:20]) if len(fields) > 19 else None
    if nums is None:
        return None
    proc: dict[str, int | None] = {"utime": nums[0], "stime": nums[1], "starttime": nums[2]}
    values = dict(line.split(":", 1) for line in io if ":" in line)
    for key in _PROC_IO_FIELDS:
        raw = values.get(key, "").strip()
        proc[key] = int(raw) if raw.isdigit() else None
    return proc


def parse_counters(text: str, pid: int | None, devices: Sequence[str]) -> dict[str, Any]:
    """The output of :func:`dbmatrix.hosts.collect.counters_command` as a JSON-friendly dict.

    Keys: ``uptime_s`` (monotonic, mean of the readings before and after), ``clk_tck``,
    ``cpu_ticks`` (the /proc/stat ``cpu`` line), ``pid``, ``proc`` (None when the process is gone),
    ``devices`` (as asked) and ``disks`` (device -> /proc/diskstats counters; absent devices are
    missing). Unreadable parts are None rather than errors.
    """
    sec = _sections(text)
    start, end = _uptime(sec.get("uptime", [])), _uptime(sec.get("uptime_end", []))
    uptime = (start + end) / 2 if start is not None and end is not None else (start if end is None else end)
    tck = _ints(sec.get("clk_tck", ["x"])[:1])
    cpu_line = sec.get("stat", [""])[0].split()
    cpu_vals = _ints(cpu_line[1:]) if cpu_line[:1] == ["cpu"] else None
    cpu = dict(zip(_CPU_FIELDS, cpu_vals)) if cpu_vals else None
    disks: dict[str, dict[str, int]] = {}
    for line in sec.get("diskstats", []):
        tokens = line.split()
        nums = _ints(tokens[3:3 + len(_DISK_FIELDS)])
        if len(tokens) >= 3 + len(_DISK_FIELDS) and nums is not None and tokens[2] in devices:
            disks[tokens[2]] = dict(zip(_DISK_FIELDS, nums))
    return {
        "uptime_s": uptime,
        "clk_tck": tck[0] if tck and tck[0] > 0 else None,
        "cpu_ticks": cpu,
        "pid": pid,
        "proc": _parse_proc(sec.get("pid_stat", []), sec.get("pid_io", [])) if pid is not None else None,
        "devices": list(devices),
        "disks": disks,
    }


def _delta(before: Any, after: Any) -> float | None:
    if before is None or after is None or after < before:  # a reset counter is not a delta
        return None
    return float(after - before)


def _scaled(value: float | None, factor: float | None) -> float | None:
    return None if value is None or factor is None else value * factor


def _cpu_deltas(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float | None]:
    b, a, tck = before.get("cpu_ticks"), after.get("cpu_ticks"), before.get("clk_tck")
    if not b or not a or not tck or tck != after.get("clk_tck"):
        return {"host_cpu_busy_s": None, "host_cpu_iowait_s": None}
    # Busy = user+nice+system+irq+softirq (guest time is already inside user/nice); idle, iowait and
    # steal are not work this guest did.
    busy = ("user", "nice", "system", "irq", "softirq")
    d_busy = _delta(sum(b.get(k, 0) for k in busy), sum(a.get(k, 0) for k in busy))
    return {"host_cpu_busy_s": _scaled(d_busy, 1 / tck),
            "host_cpu_iowait_s": _scaled(_delta(b.get("iowait"), a.get("iowait")), 1 / tck)}


def _proc_deltas(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float | None]:
    b: Any = before.get("proc")
    a: Any = after.get("proc")
    tck = before.get("clk_tck")
    same = (b is not None and a is not None and before.get("pid") == after.get("pid")
            and b.get("starttime") == a.get("starttime"))  # same pid but a new process is not a delta
    if not same:
        return dict.fromkeys(("cpu_user_s", "cpu_sys_s", "proc_read_bytes", "proc_write_bytes"))
    inv = 1 / tck if tck else None
    return {"cpu_user_s": _scaled(_delta(b["utime"], a["utime"]), inv),
            "cpu_sys_s": _scaled(_delta(b["stime"], a["stime"]), inv),
            "proc_read_bytes": _delta(b.get("read_bytes"), a.get("read_bytes")),
            "proc_write_bytes": _delta(b.get("write_bytes"), a.get("write_bytes"))}


def _disk_deltas(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float | None]:
    keys = {"dev_read_ios": "reads", "dev_write_ios": "writes", "dev_read_bytes": "read_sectors",
            "dev_write_bytes": "write_sectors", "dev_io_ms": "io_ms"}
    devices = list(before.get("devices") or [])
    b, a = before.get("disks") or {}, after.get("disks") or {}
    if not devices or devices != list(after.get("devices") or []) or any(d not in b or d not in a
                                                                          for d in devices):
        return dict.fromkeys(keys)
    out: dict[str, float | None] = {}
    for key, field in keys.items():
        parts = [_delta(b[d][field], a[d][field]) for d in devices]
        total = None if any(p is None for p in parts) else sum(p for p in parts if p is not None)
        out[key] = total * SECTOR_BYTES if total is not None and field.endswith("_sectors") else total
    return out


def counter_deltas(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, float | None]:
    """Per-window totals between two :func:`parse_counters` results (snapshots), keyed by :data:`DELTA_KEYS`.

    None where a figure cannot be measured: no process or device was asked for, the process
    vanished (or its pid was reused), a device disappeared, or a counter went backwards. Device
    figures are summed over the devices (do not list a disk and its own partition together).
    """
    out: dict[str, float | None] = {"window_s": _delta(before.get("uptime_s"), after.get("uptime_s"))}
    out.update(_cpu_deltas(before, after))
    out.update(_proc_deltas(before, after))
    out.update(_disk_deltas(before, after))
    # Seconds come from centisecond counters: round away binary noise (1.2199999999998 -> 1.22).
    return {key: None if (v := out[key]) is None else round(v, 6) for key in DELTA_KEYS}
