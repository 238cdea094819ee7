"""A fixed-work probe of the platform beside each A/A sentinel run: is the machine slower, or the server?

When a sentinel's closing run is slower than its opening one, the runs' own counters say whether the same work
per transaction took more CPU (:mod:`dbmatrix.analyse.sentinel_mechanism`), but not whether the CPU itself
got slower (a neighbour on the host, a throttled vCPU) or the server spent more of it waiting (spinning on
a mutex while a commit's flush took longer). This probe measures the platform with the server stopped, the
same fixed work at both ends of a sitting:

- **CPU**: ``sysbench cpu`` (primes up to 10,000) for :data:`CPU_SECONDS` on one thread and on every
  online CPU: events per second;
- **a synchronous write**: :data:`SYNC_WRITES` 4 KiB overwrites with ``O_DSYNC`` of a preallocated file on
  the sentinel cell's data medium (what a redo-log or binlog commit does): milliseconds per write.

It runs after each sentinel run (the server stopped, before the next run restores its datadir) and takes
about ``2 * CPU_SECONDS + 1`` seconds. Its result is ``platform-probe.json`` beside the run's manifest; the
run's own measurements never include it. A probe that fails leaves a file that says why (the sentinel and
the matrix go on).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from dbmatrix.store import PROBE_FIGURES

CPU_SECONDS = 2
CPU_MAX_PRIME = 10000
# 8 MiB: 10 probes of 256 writes varied with SD 48 % back to back on the VM disk, 6 of 2,048 with 12.7 %
SYNC_WRITES = 2048
BLOCK = 4096
PROBE_S = 2 * CPU_SECONDS + 1  # its wall time, about (the two sysbench runs, dd and their starts; for estimates)
_MARK = "dbmatrix-probe:"


def probe_command(directory: str, cpus: int) -> str:
    """The probe's shell command (POSIX sh, sysbench and dd on the host); each part's output follows a
    marker line so that :func:`parse_probe` reads them apart."""
    if cpus < 1:
        raise ValueError(f"probe_command: cpus ({cpus!r}) must be >= 1")
    f = shlex.quote(f"{directory.rstrip('/')}/.dbmatrix-probe")
    cpu = f"sysbench cpu --cpu-max-prime={CPU_MAX_PRIME} --time={CPU_SECONDS} --threads={{n}} run"
    return "; ".join([
        f"echo {_MARK}cpu1", cpu.format(n=1),
        f"echo {_MARK}cpuall", cpu.format(n=cpus),
        # preallocated and flushed first: the timed writes overwrite blocks, as a log's commits do
        f"LC_ALL=C dd if=/dev/zero of={f} bs={BLOCK} count={SYNC_WRITES} conv=fsync 2>/dev/null",
        f"echo {_MARK}sync",
        f"LC_ALL=C dd if=/dev/zero of={f} bs={BLOCK} count={SYNC_WRITES} conv=notrunc oflag=dsync 2>&1",
        f"rm -f {f}",
    ])


_EPS = re.compile(r"events per second:\s*([0-9.]+)")
_DD = re.compile(r"(\d+) bytes .*copied, ([0-9.]+) s")


def parse_probe(stdout: str) -> dict[str, float | None]:
    """{cpu_eps_1, cpu_eps_all, sync_write_ms} from :func:`probe_command`'s output; a part that printed
    no result gives None."""
    parts: dict[str, str] = {}
    key = ""
    for line in stdout.splitlines():
        if line.startswith(_MARK):
            key = line[len(_MARK):].strip()
            parts[key] = ""
        elif key:
            parts[key] += line + "\n"

    def eps(name: str) -> float | None:
        m = _EPS.search(parts.get(name, ""))
        return float(m.group(1)) if m else None

    sync = None
    if m := _DD.search(parts.get("sync", "")):
        writes = int(m.group(1)) // BLOCK
        sync = float(m.group(2)) * 1000.0 / writes if writes > 0 else None
    return dict(zip(PROBE_FIGURES, (eps("cpu1"), eps("cpuall"), sync), strict=True))


def probe_record(stdout: str, *, directory: str, medium: str, cpus: int, when_utc: str,
                 error: str | None = None) -> dict[str, Any]:
    """What ``platform-probe.json`` holds: the parsed figures, where and when, and the error if any."""
    figures = parse_probe(stdout) if error is None else dict.fromkeys(PROBE_FIGURES)
    missing = [k for k, v in figures.items() if v is None]
    if error is None and missing:
        error = "the probe printed no " + ", ".join(missing)
    return {**figures, "cpus": cpus, "directory": directory, "medium": medium, "utc": when_utc,
            "cpu_seconds": CPU_SECONDS, "cpu_max_prime": CPU_MAX_PRIME, "sync_writes": SYNC_WRITES,
            "block_bytes": BLOCK, "error": error}


def probe_line(rec: dict[str, Any]) -> str:
    """One line for the run log."""
    if rec.get("error") and all(rec.get(k) is None for k in PROBE_FIGURES):
        return f"platform probe failed: {rec['error']}"

    def f(v: Any, fmt: str) -> str:
        return "?" if v is None else format(v, fmt)

    return (f"platform probe: CPU {f(rec.get('cpu_eps_1'), '.0f')} events/s on 1 thread, "
            f"{f(rec.get('cpu_eps_all'), '.0f')} on {rec.get('cpus')}; a synchronous 4 KiB write on "
            f"{rec.get('medium')} {f(rec.get('sync_write_ms'), '.3f')} ms")


__all__ = ["BLOCK", "CPU_MAX_PRIME", "CPU_SECONDS", "PROBE_S", "SYNC_WRITES", "parse_probe",
           "probe_command", "probe_line", "probe_record"]
