"""System metrics captured around a benchmark run: sysstat/procps collectors and exact counters.

Two complementary sources, both kept raw so that everything can be recomputed later:

* **Per-interval series** from ``mpstat``, ``iostat``, ``vmstat`` and ``pidstat`` (sysstat 12.6.1,
  procps-ng 4.0.2), run in the background on the host by :class:`CollectorSet` for the measured
  phase. Their text output is the raw record; the pure ``parse_*`` functions turn it into tidy
  DataFrames with a ``time`` column (the host's wall clock as printed) and ``t_s`` (seconds since
  the first sample) for aligning them with sysbench's per-second lines.
* **Exact cumulative counters** (``/proc/stat``, ``/proc/PID/stat``, ``/proc/PID/io``,
  ``/proc/diskstats``) read in one round trip before and after the phase by
  :func:`snapshot_counters`; :func:`counter_deltas` turns two snapshots into the per-run totals that
  hardware-efficiency figures (CPU µs, KB, IOs per transaction) divide by the transaction count.

Output facts the parsers rely on (checked on this machine, Debian 12, kernel 6.18):

* the commands set ``LC_ALL=C S_TIME_FORMAT=ISO TZ=UTC``: sysstat headers carry an ISO date
  (``Linux 6.18… (vm) \\t2026-11-22 \\t_x86_64_\\t(2 CPU)``), mpstat/pidstat lines a 24-hour
  ``HH:MM:SS`` (the date comes from the header; a wrap past midnight adds a day), ``iostat -t``
  a line ``2026-11-22T03:02:54+0000`` before each report, ``vmstat -t`` two trailing fields
  ``2026-11-22 03:02:54`` under a header naming the time zone. The C-locale forms (``11/22/26``,
  ``11/22/26 03:04:37``, an ``AM``/``PM`` token) are accepted too.
* ``iostat -y`` and ``vmstat -y`` skip the since-boot first report, so every row is one interval.
* all four tools flush their output after every interval, so stopping them with SIGTERM loses no
  completed interval. SIGINT would make the sysstat tools print an ``Average:`` block, but only at
  the next tick, and ``vmstat`` started in the background by a non-interactive shell ignores SIGINT;
  the averages are recomputed from the intervals anyway (parsers skip ``Average:`` lines).
* ``pidstat -p PID`` exits by itself soon after the process is gone; a collector that exited before
  ``stop()`` is reported in :attr:`CollectorSet.errors`.
* a text that does not end with a newline has a truncated last line, which is dropped; so are rows
  with the wrong number of fields or non-numeric values.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any

import pandas as pd

from dbmatrix.hosts.mounts import VIRTUAL_FSTYPES, parse_findmnt_json
from dbmatrix.hosts.remote import Host

__all__ = [
    "COLLECTORS",
    "COLLECTOR_ENV",
    "DELTA_KEYS",
    "SECTOR_BYTES",
    "VIRTUAL_FSTYPES",
    "CollectorSet",
    "block_device_for",
    "block_source_of",
    "collector_commands",
    "column_name",
    "counter_deltas",
    "counters_command",
    "empty_frame",
    "parse_collector",
    "parse_counters",
    "parse_iostat",
    "parse_mpstat",
    "parse_pidstat",
    "parse_vmstat",
    "snapshot_counters",
    "summarize_collectors",
]

COLLECTORS: tuple[str, ...] = ("mpstat", "iostat", "vmstat", "pidstat")

#: Environment of every collector: C number format, ISO dates, 24-hour times, UTC wall clock.
COLLECTOR_ENV: dict[str, str] = {"LC_ALL": "C", "S_TIME_FORMAT": "ISO", "TZ": "UTC"}

# Kernel block device names as iostat and /proc/diskstats print them (vda, vda1, nvme0n1p2, dm-0, loop3p1).
_DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]*\Z")


# --------------------------------------------------------------------------- commands

def _check_interval(interval_s: object) -> int:
    if isinstance(interval_s, bool) or not isinstance(interval_s, int) or interval_s < 1:
        raise ValueError(f"interval_s must be a whole number of seconds >= 1 (sysstat takes integers), "
                         f"got {interval_s!r}")
    return interval_s


def _check_devices(devices: object) -> tuple[str, ...]:
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence):
        raise ValueError(f"devices must be a sequence of kernel block device names such as ['vda'], "
                         f"got {devices!r}")
    out = []
    for dev in devices:
        if not isinstance(dev, str) or not _DEVICE_NAME.match(dev):
            raise ValueError(f"devices: {dev!r} is not a kernel block device name (like 'vda', 'vda1', "
                             f"'nvme0n1', 'dm-0'; no '/dev/' prefix)")
        if dev not in out:
            out.append(dev)
    return tuple(out)


def _check_pid(pid: object) -> int | None:
    if pid is None:
        return None
    if isinstance(pid, bool) or not isinstance(pid, int) or pid < 1:
        raise ValueError(f"pid must be a positive process id or None, got {pid!r}")
    return pid


def _env_prefix() -> str:
    return "env " + " ".join(f"{k}={v}" for k, v in COLLECTOR_ENV.items())


def collector_commands(interval_s: int, devices: Sequence[str], pid: int | None) -> dict[str, str]:
    """The shell command of each collector to run for this host, in :data:`COLLECTORS` order.

    iostat is left out when there is no device (tmpfs is invisible to it), pidstat when `pid` is
    None. Each command starts with ``env``, so a wrapper such as ``setsid nohup`` can prefix it and
    the process id stays the tool's own (``exec`` all the way down).
    """
    interval = _check_interval(interval_s)
    devs = _check_devices(devices)
    proc = _check_pid(pid)
    env = _env_prefix()
    cmds = {"mpstat": f"{env} mpstat -P ALL {interval}"}
    if devs:
        cmds["iostat"] = f"{env} iostat -d -x -y -t -k {' '.join(devs)} {interval}"
    cmds["vmstat"] = f"{env} vmstat -n -t -w -y {interval}"
    if proc is not None:
        cmds["pidstat"] = f"{env} pidstat -h -u -d -r -p {proc} {interval}"
    return cmds


# --------------------------------------------------------------------------- background collectors

_STATE_LINE = re.compile(r"^(start|before|after) (\S+) (\d+|-) (\S+) (\S+)$")


def _state_fn() -> str:
    """Shell function `st WHEN NAME PID` printing `WHEN NAME PID COMM STATE` ('-' when gone)."""
    return ("st() { c=$(cat /proc/$3/comm 2>/dev/null); "
            "s=$(sed -n 's/^.*) \\(.\\).*$/\\1/p' /proc/$3/stat 2>/dev/null); "
            "echo \"$1 $2 $3 ${c:--} ${s:--}\"; }")


def _alive(name: str, comm: str, state: str) -> bool:
    """The process is our collector (same comm, so not a reused pid) and not a zombie."""
    return comm == name and state not in ("-", "Z", "X")


class CollectorSet:
    """mpstat/iostat/vmstat/pidstat running in the background on `host` for one measured phase.

    Each collector writes ``<remote_dir>/<name>.txt``. Nothing here raises on a collector problem:
    a collector that could not start or died is recorded in :attr:`errors` (name -> message) and its
    text is whatever it wrote, because a missing metric must never lose a measured run. Invalid
    arguments (interval, devices, pid) do raise ValueError at construction. The output files are
    left in `remote_dir` (the caller owns that directory).
    """

    def __init__(self, host: Host, remote_dir: str, interval_s: int = 1, devices: Sequence[str] = (),
                 pid: int | None = None, *, stop_timeout_s: float = 3.0):
        if not isinstance(remote_dir, str) or not remote_dir.startswith("/"):
            raise ValueError(f"remote_dir must be an absolute path on the host, got {remote_dir!r}")
        self.host = host
        self.remote_dir = remote_dir.rstrip("/") or "/"
        self.interval_s = _check_interval(interval_s)
        self.devices = _check_devices(devices)
        self.pid = _check_pid(pid)
        self.stop_timeout_s = float(stop_timeout_s)
        self.commands = collector_commands(self.interval_s, self.devices, self.pid)
        self.paths = {name: f"{self.remote_dir}/{name}.txt" for name in self.commands}
        self.pids: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        #: Host wall clock (epoch seconds) just before the collectors were launched / signalled.
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self._started = False
        self._stopped = False

    # -- start

    def start_script(self) -> str:
        """The one shell command that launches every collector and reports its pid and state."""
        lines = [_state_fn(), f"mkdir -p {shlex.quote(self.remote_dir)} || exit 0", "cd /",
                 "echo \"clock $(date +%s.%N)\""]
        for name, cmd in self.commands.items():
            # Not a process-group leader (no job control), so setsid does not fork: $! is the tool.
            lines.append(f"setsid nohup {cmd} > {shlex.quote(self.paths[name])} 2>&1 < /dev/null & "
                         f"p_{name}=$!; echo \"pid {name} $p_{name}\"")
        lines.append("sleep 0.1")
        lines.extend(f"st start {name} $p_{name}" for name in self.commands)
        return "\n".join(lines)

    def start(self) -> None:
        """Launch the collectors (once); never raises for a collector or host problem."""
        if self._started:
            return
        self._started = True
        script = self.start_script()  # outside the try: a bug here must not pass for a host problem
        try:
            res = self.host.run(script, check=False, timeout=30)
        except Exception as exc:  # noqa: BLE001 - any host/connection failure: a missing metric must not lose the run
            for name in self.commands:
                self.errors[name] = f"start failed: {exc}"
            return
        for line in res.stdout.splitlines():
            if line.startswith("clock "):
                self.started_at = _float_or_none(line.split()[1])
            elif line.startswith("pid "):
                _, name, pid = line.split()
                if pid.isdigit():
                    self.pids[name] = int(pid)
            elif (m := _STATE_LINE.match(line)) and not _alive(m[2], m[4], m[5]):
                self.errors[m[2]] = "exited right after start"
        for name in self.commands:
            if name not in self.pids:
                self.errors.setdefault(name, f"not started: {(res.stderr or res.stdout).strip()[-300:]}")

    # -- stop

    def stop_script(self) -> str:
        """One shell command: state of each collector, SIGTERM, wait, SIGKILL leftovers, final state."""
        pairs = " ".join(f"{name}:{pid}" for name, pid in self.pids.items())
        rounds = max(1, int(self.stop_timeout_s / 0.1))
        return "\n".join([
            _state_fn(),
            "alive() { [ \"$(cat /proc/$2/comm 2>/dev/null)\" = \"$1\" ] && "
            "! sed -n 's/^.*) \\(.\\).*$/\\1/p' /proc/$2/stat 2>/dev/null | grep -q '[ZX]'; }",
            "echo \"clock $(date +%s.%N)\"",
            f"for np in {pairs}; do n=${{np%%:*}}; p=${{np#*:}}; st before $n $p; "
            "alive $n $p && kill -TERM $p 2>/dev/null; done",
            f"i=0; while [ $i -lt {rounds} ]; do left=0; for np in {pairs}; do "
            "alive ${np%%:*} ${np#*:} && left=1; done; [ $left = 0 ] && break; sleep 0.1; i=$((i+1)); done",
            f"for np in {pairs}; do alive ${{np%%:*}} ${{np#*:}} && kill -KILL ${{np#*:}} 2>/dev/null; done",
            "sleep 0.05",
            f"for np in {pairs}; do st after ${{np%%:*}} ${{np#*:}}; done",
            "exit 0",
        ])

    def stop(self) -> None:
        """Stop the collectors and read their output into :attr:`texts`; idempotent, never raises."""
        if self._stopped:
            return
        self._stopped = True
        if not self._started:
            return
        if self.pids:
            self._signal_all()
        for name, path in self.paths.items():
            if name not in self.pids:  # never launched: there is no output file
                self.texts[name] = ""
                continue
            try:
                self.texts[name] = self.host.read_text(path)
            except Exception as exc:  # noqa: BLE001 - keep the run, report the gap
                self.texts[name] = ""
                self.errors[name] = _join(self.errors.get(name), f"output not readable: {exc}")
        for name, msg in list(self.errors.items()):
            tail = _last_line(self.texts.get(name, ""))
            if tail and "last output" not in msg and not msg.startswith("output not readable"):
                self.errors[name] = f"{msg} (last output: {tail!r})"

    def _signal_all(self) -> None:
        script = self.stop_script()  # outside the try: a bug here must not pass for a host problem
        try:
            res = self.host.run(script, check=False, timeout=self.stop_timeout_s + 30)
        except Exception as exc:  # noqa: BLE001 - any host/connection failure: keep the run, report the gap
            for name in self.pids:
                self.errors[name] = _join(self.errors.get(name), f"stop failed: {exc}")
            return
        for line in res.stdout.splitlines():
            if line.startswith("clock "):
                self.stopped_at = _float_or_none(line.split()[1])
                continue
            m = _STATE_LINE.match(line)
            if not m:
                continue
            when, name, alive = m[1], m[2], _alive(m[2], m[4], m[5])
            if when == "before" and not alive:
                self.errors.setdefault(name, "exited before stop")
            elif when == "after" and alive:
                self.errors[name] = _join(self.errors.get(name), "still running after SIGKILL")

    def __enter__(self) -> CollectorSet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"CollectorSet({self.host!r}, {self.remote_dir!r}, collectors={list(self.commands)})"


def _join(first: str | None, second: str) -> str:
    return f"{first}; {second}" if first else second


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][-200:] if lines else ""


def _float_or_none(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


# --------------------------------------------------------------------------- parsing helpers

#: Raw headers of sysstat 12.6.1 / procps-ng 4.0.2 on kernel 6.18: the columns of an empty frame.
_DEFAULT_HEADERS: dict[str, str] = {
    "mpstat": "CPU %usr %nice %sys %iowait %irq %soft %steal %guest %gnice %idle",
    "iostat": ("Device r/s rkB/s rrqm/s %rrqm r_await rareq-sz w/s wkB/s wrqm/s %wrqm w_await wareq-sz "
               "d/s dkB/s drqm/s %drqm d_await dareq-sz f/s f_await aqu-sz %util"),
    "vmstat": "r b swpd free buff cache si so bi bo in cs us sy id wa st gu",
    "pidstat": ("UID PID %usr %system %guest %wait %CPU CPU minflt/s majflt/s VSZ RSS %MEM kB_rd/s "
                "kB_wr/s kB_ccwr/s iodelay Command"),
}
# Integer columns; text columns are per tool (_text_columns); every other column is float64.
_INT_COLUMNS = ("uid", "pid", "cpu_num")
_OVERRIDES: dict[str, dict[str, str]] = {"pidstat": {"CPU": "cpu_num"}}


def column_name(raw: str, tool: str = "") -> str:
    """Normalised column name: lower case, leading ``%`` dropped, ``/`` and ``-`` -> ``_``.

    The unit ``kB`` keeps its case (``rkB/s`` -> ``rkB_s``: "kb" would read as kilobits).
    pidstat's processor number ``CPU`` becomes ``cpu_num`` (its ``%CPU`` is ``cpu``).
    """
    if raw in _OVERRIDES.get(tool, {}):
        return _OVERRIDES[tool][raw]
    name = re.sub(r"[/\-]", "_", raw.lstrip("%")).lower().replace("kb", "kB")
    return name


def _columns(header: str | Sequence[str], tool: str) -> list[str]:
    tokens = header.split() if isinstance(header, str) else header
    return [column_name(t, tool) for t in tokens]


def empty_frame(tool: str) -> pd.DataFrame:
    """An empty frame with the columns `tool`'s parser returns for sysstat 12.6.1 output."""
    _check_tool(tool)
    return _frame([], _columns(_DEFAULT_HEADERS[tool], tool), tool)


def _check_tool(tool: str) -> None:
    if tool not in COLLECTORS:
        raise ValueError(f"collector must be one of {', '.join(COLLECTORS)}, got {tool!r}")


def _complete_lines(text: str) -> list[str]:
    """Lines of `text`, without a last line that was cut off (no trailing newline)."""
    lines = text.splitlines()
    if lines and not text.endswith(("\n", "\r")):
        lines.pop()
    return lines


_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_C_DATE = re.compile(r"\b(\d{2})/(\d{2})/(\d{2}|\d{4})\b")
_TOD = re.compile(r"(\d{1,2}):(\d{2}):(\d{2})\Z")


def _parse_date(token: str) -> date | None:
    if m := _ISO_DATE.fullmatch(token):
        return date(int(m[1]), int(m[2]), int(m[3]))
    if m := _C_DATE.fullmatch(token):
        year = int(m[3]) + (2000 if len(m[3]) == 2 else 0)
        return date(year, int(m[1]), int(m[2]))
    return None


def _header_date(lines: Sequence[str]) -> date:
    """The date in sysstat's first line (``Linux … 2026-11-22 …``); 1970-01-01 when absent."""
    for line in lines[:5]:
        if line.startswith("Linux") or "(" in line:
            for tok in line.split():
                if (d := _parse_date(tok)) is not None:
                    return d
    return date(1970, 1, 1)


def _time_of_day(tokens: Sequence[str]) -> tuple[timedelta, int] | None:
    """(time of day, tokens consumed) from ``HH:MM:SS`` optionally followed by ``AM``/``PM``."""
    if not tokens or not (m := _TOD.match(tokens[0])):
        return None
    h, mi, s = int(m[1]), int(m[2]), int(m[3])
    used = 1
    if len(tokens) > 1 and tokens[1] in ("AM", "PM"):
        h = h % 12 + (12 if tokens[1] == "PM" else 0)
        used = 2
    if h > 23 or mi > 59 or s > 60:
        return None
    return timedelta(hours=h, minutes=mi, seconds=s), used


class _Clock:
    """Times of day on a start date -> datetimes, adding a day when the clock wraps past midnight."""

    def __init__(self, start: date):
        self.base = datetime(start.year, start.month, start.day)
        self.days = 0
        self.prev: timedelta | None = None

    def at(self, tod: timedelta) -> datetime:
        # A backward step of more than 12 h is midnight; smaller ones are clock adjustments.
        if self.prev is not None and self.prev - tod > timedelta(hours=12):
            self.days += 1
        self.prev = tod
        return self.base + timedelta(days=self.days) + tod


def _parse_values(tokens: Sequence[str], columns: Sequence[str], text_cols: set[str]) -> dict[str, Any] | None:
    row: dict[str, Any] = {}
    for col, tok in zip(columns, tokens):
        if col in text_cols:
            row[col] = tok
            continue
        try:
            value = float(tok)
        except ValueError:
            return None
        if math.isnan(value):
            return None
        row[col] = value
    return row


def _frame(rows: list[dict[str, Any]], columns: list[str], tool: str) -> pd.DataFrame:
    """Rows -> frame with ``time``, ``t_s`` (seconds since the first row) and typed columns."""
    df = pd.DataFrame(rows, columns=["time", *columns])
    df["time"] = pd.to_datetime(df["time"]).astype("datetime64[ns]")
    start = df["time"].iloc[0] if len(df) else pd.Timestamp(0)
    df.insert(1, "t_s", (df["time"] - start).dt.total_seconds().astype("float64"))
    text = _text_columns(tool)
    for col in columns:
        if col in text:
            df[col] = df[col].astype(object)
        elif col in _INT_COLUMNS and not df[col].isna().any():
            df[col] = df[col].astype("int64")
        else:
            df[col] = df[col].astype("float64")
    return df


def _text_columns(tool: str) -> set[str]:
    return {"mpstat": {"cpu"}, "iostat": {"device"}, "pidstat": {"command"}}.get(tool, set())


def _new_columns(current: list[str], found: list[str]) -> list[str]:
    """Column order: the first header seen, then any column a later header adds."""
    return current + [c for c in found if c not in current] if current else list(found)


# --------------------------------------------------------------------------- parsers

def parse_mpstat(text: str) -> pd.DataFrame:
    """``mpstat -P ALL N``: one row per interval and CPU (``cpu`` is ``all``, ``0``, ``1``, …).

    Columns: time, t_s, cpu, usr, nice, sys, iowait, irq, soft, steal, guest, gnice, idle (percent).
    """
    lines = _complete_lines(text)
    clock = _Clock(_header_date(lines))
    columns: list[str] = []
    order: list[str] = []
    rows: list[dict[str, Any]] = []
    for line in lines:
        tokens = line.split()
        tod = _time_of_day(tokens)
        if tod is None:  # blank, the "Linux …" banner, "Average:" lines
            continue
        rest = tokens[tod[1]:]
        if rest and rest[0] == "CPU":
            clock.at(tod[0])  # the header carries the interval's start: lets a wrap be seen early
            columns = _columns(rest, "mpstat")
            order = _new_columns(order, columns)
            continue
        if not columns or len(rest) != len(columns):
            continue
        row = _parse_values(rest, columns, {"cpu"})
        if row is not None:
            row["time"] = clock.at(tod[0])
            rows.append(row)
    return _frame(rows, order or _columns(_DEFAULT_HEADERS["mpstat"], "mpstat"), "mpstat")


_IOSTAT_TS = re.compile(
    r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:[+-]\d{2}:?\d{2}|Z)?$"
    r"|^(\d{2}/\d{2}/\d{2,4}) (\d{1,2}:\d{2}:\d{2})(?: ([AP]M))?$")


def _iostat_time(line: str) -> datetime | None:
    """An ``iostat -t`` report time, as the host's wall clock printed it (any UTC offset dropped)."""
    m = _IOSTAT_TS.match(line.strip())
    if not m:
        return None
    day = _parse_date(m[1] or m[3])
    tod = _time_of_day([m[2] or m[4], *([m[5]] if m[5] else [])])
    if day is None or tod is None:
        return None
    return datetime(day.year, day.month, day.day) + tod[0]


def parse_iostat(text: str) -> pd.DataFrame:
    """``iostat -d -x -y -t -k DEV… N``: one row per report and device.

    Columns as sysstat 12.6.1 prints them: time, t_s, device, r_s, rkB_s, rrqm_s, rrqm (percent of
    reads merged), r_await, rareq_sz, w_s, wkB_s, wrqm_s, wrqm, w_await, wareq_sz, d_s, dkB_s,
    drqm_s, drqm, d_await, dareq_sz, f_s, f_await, aqu_sz, util (percent). Rows before the first
    timestamp line (iostat without ``-t``) are skipped.
    """
    columns: list[str] = []
    order: list[str] = []
    rows: list[dict[str, Any]] = []
    when: datetime | None = None
    for line in _complete_lines(text):
        if (ts := _iostat_time(line)) is not None:
            when = ts
            continue
        tokens = line.split()
        if not tokens or line.startswith("Linux"):
            continue
        if tokens[0] in ("Device", "Device:"):
            columns = _columns(["Device", *tokens[1:]], "iostat")
            order = _new_columns(order, columns)
            continue
        if when is None or not columns or len(tokens) != len(columns):
            continue
        row = _parse_values(tokens, columns, {"device"})
        if row is not None:
            row["time"] = when
            rows.append(row)
    return _frame(rows, order or _columns(_DEFAULT_HEADERS["iostat"], "iostat"), "iostat")


_VMSTAT_FIELDS = frozenset(["r", "b", "swpd", "free", "buff", "cache", "inact", "active", "si", "so", "bi", "bo",
                            "in", "cs", "us", "sy", "id", "wa", "st", "gu"])


def parse_vmstat(text: str) -> pd.DataFrame:
    """``vmstat -n -t -w -y N``: one row per interval.

    Columns: time, t_s, r, b, swpd, free, buff, cache (KiB), si, so, bi, bo (KiB/s),
    in, cs (per second), us, sy, id, wa, st, gu (percent; ``gu`` only on kernels that report it).
    Rows without the ``-t`` timestamp are skipped.
    """
    columns: list[str] = []
    order: list[str] = []
    rows: list[dict[str, Any]] = []
    for line in _complete_lines(text):
        tokens = line.split()
        if not tokens or tokens[0].startswith("-"):
            continue
        if tokens[:2] == ["r", "b"]:
            has_tz = tokens[-1] not in _VMSTAT_FIELDS
            columns = _columns(tokens[:-1] if has_tz else tokens, "vmstat")
            order = _new_columns(order, columns)
            continue
        if not columns or len(tokens) != len(columns) + 2:
            continue
        day, tod = _parse_date(tokens[-2]), _time_of_day(tokens[-1:])
        row = _parse_values(tokens[:-2], columns, set())
        if row is not None and day is not None and tod is not None:
            row["time"] = datetime(day.year, day.month, day.day) + tod[0]
            rows.append(row)
    return _frame(rows, order or _columns(_DEFAULT_HEADERS["vmstat"], "vmstat"), "vmstat")


def parse_pidstat(text: str) -> pd.DataFrame:
    """``pidstat -h -u -d -r -p PID N``: one row per interval (and process).

    Columns: time, t_s, uid, pid, usr, system, guest, wait, cpu (``%CPU``, of one processor, so up
    to 100 x processors), cpu_num (processor last run on), minflt_s, majflt_s, vsz, rss (KiB), mem
    (percent), kB_rd_s, kB_wr_s, kB_ccwr_s, iodelay (clock ticks), command.
    """
    lines = _complete_lines(text)
    clock = _Clock(_header_date(lines))
    columns: list[str] = []
    order: list[str] = []
    rows: list[dict[str, Any]] = []
    for line in lines:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0] == "#":
            body = tokens[2:] if len(tokens) > 1 and tokens[1] == "Time" else tokens[1:]
            columns = _columns(body, "pidstat")
            order = _new_columns(order, columns)
            continue
        tod = _time_of_day(tokens)
        if tod is None or not columns:
            continue
        # The last column (Command) may contain spaces: split the rest at most len(columns)-1 times.
        rest = line.split(None, tod[1] + len(columns) - 1)[tod[1]:]
        if len(rest) != len(columns):
            continue
        row = _parse_values(rest, columns, {"command"})
        if row is not None:
            row["time"] = clock.at(tod[0])
            rows.append(row)
    return _frame(rows, order or _columns(_DEFAULT_HEADERS["pidstat"], "pidstat"), "pidstat")


_PARSERS = {"mpstat": parse_mpstat, "iostat": parse_iostat, "vmstat": parse_vmstat, "pidstat": parse_pidstat}


def parse_collector(name: str, text: str) -> pd.DataFrame:
    """Parse the raw output of collector `name` (one of :data:`COLLECTORS`)."""
    _check_tool(name)
    return _PARSERS[name](text)


# --------------------------------------------------------------------------- exact counters

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
_MARK = "@@dbmatrix-counters@@"


def counters_command(pid: int | None, devices: Sequence[str]) -> str:
    """One shell command printing every counter :func:`parse_counters` reads, in marked sections."""
    proc = _check_pid(pid)
    devs = _check_devices(devices)
    parts = [f"echo '{_MARK} uptime'; cat /proc/uptime",
             f"echo '{_MARK} clk_tck'; getconf CLK_TCK",
             f"echo '{_MARK} stat'; grep '^cpu ' /proc/stat"]
    if proc is not None:
        parts += [f"echo '{_MARK} pid_stat'; cat /proc/{proc}/stat 2>/dev/null",
                  f"echo '{_MARK} pid_io'; cat /proc/{proc}/io 2>/dev/null"]
    if devs:
        names = " ".join(devs)
        parts.append(f"echo '{_MARK} diskstats'; "
                     f"awk -v d=' {names} ' 'index(d, \" \" $3 \" \")' /proc/diskstats")
    parts.append(f"echo '{_MARK} uptime_end'; cat /proc/uptime")
    return "; ".join(parts) + "; exit 0"


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_MARK):
            current = out.setdefault(line[len(_MARK):].strip(), [])
        elif current is not None and line.strip():
            current.append(line)
    return out


def _ints(tokens: Sequence[str]) -> list[int] | None:
    try:
        return [int(t) for t in tokens]
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
    """The output of :func:`counters_command` as a JSON-friendly dict.

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


def snapshot_counters(host: Host, pid: int | None, devices: Sequence[str]) -> dict[str, Any]:
    """Exact cumulative counters of the host, process `pid` and `devices`, in one round trip."""
    devs = _check_devices(devices)
    res = host.run(counters_command(pid, devs), check=False, timeout=30)
    return parse_counters(res.stdout, pid, devs)


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
    """Per-window totals between two :func:`snapshot_counters` results, keyed by :data:`DELTA_KEYS`.

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


# --------------------------------------------------------------------------- block device of a path

def block_source_of(text: str) -> str | None:
    """The device path in ``findmnt -J -o SOURCE,FSTYPE,TARGET -T PATH`` output (the first mount findmnt
    lists, as the text output's first line was), or None for a virtual source or no mount
    (see :attr:`Mount.block_source`)."""
    mounts = parse_findmnt_json(text)
    return mounts[0].block_source if mounts else None


def block_device_for(host: Host, path: str) -> str | None:
    """The kernel block device name behind directory `path` (``vda``, ``vda1``, ``loop3``, ``dm-0``).

    None for tmpfs, overlay and other sources without a block device. When the file system sits on
    a partition, the partition's name is returned (``vda1``, ``loop3p1``, ``nvme0n1p2``): iostat and
    /proc/diskstats count partitions separately, and the partition is exactly the file system's IO.
    Symlinked sources (``/dev/mapper/vg-lv``) resolve to the kernel name (``dm-0``); a source that
    does not resolve (``/dev/root``) is looked up through the mount's MAJ:MIN in /sys/dev/block.
    """
    q = shlex.quote(path)
    res = host.run(f"findmnt -J -o SOURCE,FSTYPE,TARGET -T {q}", check=False, timeout=30)
    if not res.ok or not res.stdout.strip():
        raise ValueError(f"block_device_for: path {path!r} does not exist on {host.name} "
                         f"(findmnt: {res.stderr.strip() or 'no mount found'})")
    source = block_source_of(res.stdout)
    if source is None:
        return None
    script = (f"n=$(basename \"$(readlink -f {shlex.quote(source)})\"); "
              "if [ -e \"/sys/class/block/$n\" ]; then echo \"$n\"; else "
              f"mm=$(findmnt -no MAJ:MIN -T {q} | tr -d ' '); "
              "l=$(readlink -f \"/sys/dev/block/$mm\" 2>/dev/null) && [ -e \"$l\" ] && basename \"$l\"; fi; exit 0")
    name = host.run(script, check=False, timeout=30).stdout.strip()
    return name if name and _DEVICE_NAME.match(name) else None


# --------------------------------------------------------------------------- summaries

def _mean(series: pd.Series) -> float | None:
    values = pd.to_numeric(series, errors="coerce").dropna()
    return float(values.mean()) if len(values) else None


def summarize_collectors(parsed: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """Per-run means for quick display; a figure whose collector is missing or empty is left out.

    ``host_cpu_busy_pct`` = 100 - idle - iowait - steal and ``host_iowait_pct`` (mpstat, all CPUs);
    ``dev_util_pct`` (the busiest device in each interval), ``dev_r_s``, ``dev_w_s``, ``dev_rkB_s``,
    ``dev_wkB_s`` (summed over devices); ``cs_s``, ``in_s`` (vmstat); ``proc_cpu_pct`` (pidstat
    ``%CPU`` of the watched process, 100 = one processor).
    """
    out: dict[str, float | None] = {}
    mp = parsed.get("mpstat")
    if mp is not None and len(mp) and "cpu" in mp:
        all_cpu = mp[mp["cpu"] == "all"]
        if len(all_cpu) and {"idle", "iowait", "steal"} <= set(all_cpu.columns):
            out["host_cpu_busy_pct"] = _mean(100 - all_cpu["idle"] - all_cpu["iowait"] - all_cpu["steal"])
            out["host_iowait_pct"] = _mean(all_cpu["iowait"])
    io = parsed.get("iostat")
    if io is not None and len(io):
        per_t = io.groupby("time", sort=True)
        if "util" in io:
            out["dev_util_pct"] = _mean(per_t["util"].max())
        for col in ("r_s", "w_s", "rkB_s", "wkB_s"):
            if col in io:
                out[f"dev_{col}"] = _mean(per_t[col].sum())
    vm = parsed.get("vmstat")
    if vm is not None and len(vm):
        for col in ("cs", "in"):
            if col in vm:
                out[f"{col}_s"] = _mean(vm[col])
    ps = parsed.get("pidstat")
    if ps is not None and len(ps) and "cpu" in ps:
        out["proc_cpu_pct"] = _mean(ps.groupby("time", sort=True)["cpu"].sum())
    return {k: v for k, v in out.items() if v is not None}
