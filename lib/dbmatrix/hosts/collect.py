"""System metrics captured around a benchmark run: sysstat/procps collectors and exact counters.

Two complementary sources, both kept raw so that everything can be recomputed later:

* **Per-interval series** from ``mpstat``, ``iostat``, ``vmstat`` and ``pidstat`` (sysstat 12.6.1,
  procps-ng 4.0.2), run in the background on the host by :class:`CollectorSet` for the measured
  phase. Their text output is the raw record (kept with the run; nothing parses it today).
* **Exact cumulative counters** (``/proc/stat``, ``/proc/PID/stat``, ``/proc/PID/io``,
  ``/proc/diskstats``) read in one round trip before and after the phase by
  :func:`snapshot_counters`; :func:`dbmatrix.parse.system_counters.counter_deltas` turns two snapshots
  into the per-run totals.

Facts the collectors rely on (checked on this machine, Debian 12, kernel 6.18):

* the commands set ``LC_ALL=C S_TIME_FORMAT=ISO TZ=UTC``: sysstat headers carry an ISO date
  (``Linux 6.18… (vm) \\t2026-11-22 \\t_x86_64_\\t(2 CPU)``), mpstat/pidstat lines a 24-hour
  ``HH:MM:SS``, ``iostat -t`` a line ``2026-11-22T03:02:54+0000`` before each report, ``vmstat -t`` two
  trailing fields ``2026-11-22 03:02:54`` under a header naming the time zone.
* ``iostat -y`` and ``vmstat -y`` skip the since-boot first report, so every row is one interval.
* all four tools flush their output after every interval, so stopping them with SIGTERM loses no
  completed interval. SIGINT would make the sysstat tools print an ``Average:`` block, but only at
  the next tick, and ``vmstat`` started in the background by a non-interactive shell ignores SIGINT.
* ``pidstat -p PID`` exits by itself soon after the process is gone; a collector that exited before
  ``stop()`` is reported in :attr:`CollectorSet.errors`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from dbmatrix.hosts.mounts import parse_findmnt_json
from dbmatrix.hosts.remote import Host
from dbmatrix.parse.system_counters import SECTION_MARK, parse_counters

__all__ = [
    "COLLECTORS",
    "COLLECTOR_ENV",
    "CollectorSet",
    "block_device_for",
    "block_source_of",
    "collector_commands",
    "counters_command",
    "snapshot_counters",
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
        # Until each has exec'd its tool (under load a child can still be `setsid` or `nohup` 0.1 s later, which
        # the check below would take for a collector that died), at most 3 s.
        pids = " ".join(f"$p_{name}" for name in self.commands)
        lines.append(f"sleep 0.1; i=0; while [ $i -lt 29 ]; do w=0; for p in {pids}; do "
                     "case \"$(cat /proc/$p/comm 2>/dev/null)\" in setsid|nohup) w=1;; esac; done; "
                     "[ $w = 0 ] && break; sleep 0.1; i=$((i+1)); done")
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


# --------------------------------------------------------------------------- exact counters

def counters_command(pid: int | None, devices: Sequence[str]) -> str:
    """One shell command printing every counter :func:`dbmatrix.parse.system_counters.parse_counters` reads, in
    marked sections."""
    proc = _check_pid(pid)
    devs = _check_devices(devices)
    parts = [f"echo '{SECTION_MARK} uptime'; cat /proc/uptime",
             f"echo '{SECTION_MARK} clk_tck'; getconf CLK_TCK",
             f"echo '{SECTION_MARK} stat'; grep '^cpu ' /proc/stat"]
    if proc is not None:
        parts += [f"echo '{SECTION_MARK} pid_stat'; cat /proc/{proc}/stat 2>/dev/null",
                  f"echo '{SECTION_MARK} pid_io'; cat /proc/{proc}/io 2>/dev/null"]
    if devs:
        names = " ".join(devs)
        parts.append(f"echo '{SECTION_MARK} diskstats'; "
                     f"awk -v d=' {names} ' 'index(d, \" \" $3 \" \")' /proc/diskstats")
    parts.append(f"echo '{SECTION_MARK} uptime_end'; cat /proc/uptime")
    return "; ".join(parts) + "; exit 0"


def snapshot_counters(host: Host, pid: int | None, devices: Sequence[str]) -> dict[str, Any]:
    """Exact cumulative counters of the host, process `pid` and `devices`, in one round trip."""
    devs = _check_devices(devices)
    res = host.run(counters_command(pid, devs), check=False, timeout=30)
    return parse_counters(res.stdout, pid, devs)


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
