"""The controller killed outright (SIGKILL) in the middle of a measured window: the run guard kills its
mariadbd, sysbench and collectors within seconds (they would otherwise run on: mariadbd and the
collectors are in sessions of their own)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbmatrix import paths

pytestmark = pytest.mark.integration


def processes_with(marker: str) -> dict[int, str]:
    """Live (non-zombie) processes whose environment holds `marker`, with their command names."""
    found: dict[int, str] = {}
    want = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[0] not in ("Z", "X"):
            found[int(entry)] = stat[stat.index("(") + 1:stat.rindex(")")]
    return found


def dbmatrix_run(workdir: Path, results: Path, spec: str = "specs/smoke.yaml") -> subprocess.Popen[str]:
    """`dbmatrix run` of `spec` in a process of its own, with its own workdir and results directory."""
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib"), "DBMATRIX_WORKDIR": str(workdir)}
    return subprocess.Popen([sys.executable, "-m", "dbmatrix", "run", "--profile", "smoke", "--spec",
                             str(paths.repo_root() / spec), "--results", str(results), "--no-progress"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_kill_9_of_the_controller_stops_its_servers_and_clients(tmp_path) -> None:
    workdir = tmp_path / "w"
    marker = f"DBMATRIX_WORKDIR={workdir}"  # every process the run starts inherits it
    proc = dbmatrix_run(workdir, tmp_path / "results")
    try:
        deadline = time.monotonic() + 300
        ours: dict[int, str] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            ours = processes_with(marker)
            if "sysbench" in ours.values() and "mpstat" in ours.values():
                ps = subprocess.run(["ps", "-ww", "-o", "args=", "-p", ",".join(map(str, ours))],
                                    capture_output=True, text=True).stdout
                if "--histogram=on" in ps:  # the measured window
                    break
            time.sleep(0.1)
        else:
            pytest.fail(f"the run never reached its measured window (exit {proc.poll()}): {proc.communicate()}")
        time.sleep(0.5)
        ours = {p: c for p, c in processes_with(marker).items() if p != proc.pid}
        bench_pid = int((workdir / "run" / "bench.pid").read_text())
        assert bench_pid in ours and ours[bench_pid] == "mariadbd"
        assert {"mariadbd", "sysbench", "mpstat", "vmstat"} <= set(ours.values()), ours
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        t0 = time.monotonic()
        left = ours
        while left and time.monotonic() - t0 < 10:
            time.sleep(0.2)
            left = {p: c for p, c in processes_with(marker).items() if p in ours}
        assert not left, f"still running {time.monotonic() - t0:.1f} s after the controller died: {left}"
        print(f"{len(ours)} processes ({', '.join(sorted(set(ours.values())))}) gone "
              f"{time.monotonic() - t0:.1f} s after kill -9")
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in processes_with(marker):  # never leave anything behind, whatever failed
            os.kill(pid, signal.SIGKILL)
