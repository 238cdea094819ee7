"""The integration tests' set-up, written once: a study from a spec dict (and an inventory), a real server in
a test's work directory, the work directory fixture, the Galera skip, a process probe and a watcher thread
that acts when this session's benchmark reaches a given moment (kill a server, drop a host).

Every test that starts real servers builds them here, so a change to how a study or a server is set up
(a new required field, another options renderer) is made in one place."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run.galera_cluster import GALERA_PROVIDER
from dbmatrix.run.mysqld import MariaDBServer, ServerPaths, install_db_command, render_options, server_user
from dbmatrix.run.ports import lease_block, this_process
from dbmatrix.spec.experiment import Cell
from dbmatrix.study import Study, load_study

# Galera tests need root (the nodes run as mysql), the galera-4 provider and rsync (SST)
needs_galera = pytest.mark.skipif(
    os.geteuid() != 0 or not Path(GALERA_PROVIDER).is_file() or shutil.which("rsync") is None,
    reason="needs root, galera-4 and rsync")


def write_yaml(path: Path, data: Mapping[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(dict(data), sort_keys=False))
    return path


def study_from(directory: Path, spec: Mapping[str, Any], *, inventory: Mapping[str, Any] | Path | None = None,
               profile: str = "smoke", results: str = "results", name: str = "spec") -> Study:
    """A study of `spec` (a spec dict) with its results in `directory/results` (a test's own tree):
    the spec written to `directory/<name>.yaml`, the inventory (a dict, or a file written already) beside
    it; localhost without one."""
    directory.mkdir(parents=True, exist_ok=True)
    spec_path = write_yaml(directory / f"{name}.yaml", spec)
    inv: Path | None
    if inventory is None or isinstance(inventory, Path):
        inv = inventory
    else:
        inv = write_yaml(directory / f"{name}-inventory.yaml", inventory)
    return load_study(profile, spec=spec_path, inventory=inv, results_dir=directory / results)


def alive(pid: int) -> bool:
    """Whether process `pid` exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def session_workdir(name: str) -> Iterator[Path]:
    """A fixture body: `DBMATRIX_WORKDIR/<name>` for one test, removed afterwards (as root may own it)."""
    base = Path(os.environ["DBMATRIX_WORKDIR"]) / name
    base.mkdir(parents=True, exist_ok=True)
    yield base
    LocalHost().run(f"rm -rf {shlex.quote(str(base))}")


def server_in(host: LocalHost, workdir: Path, cell: Cell, cache: int, constants: Mapping[str, str] | None = None,
              *, data: str = "data", tag: str = "t", port_from: int | None = 14306) -> MariaDBServer:
    """A real mariadbd for `cell` in `workdir` (its datadir `workdir/<data>`, initialised once, sockets under
    `workdir/run`), with the options the matrix renders for that cell. Its port is the first from `port_from`
    leased to this process, as the runner leases its own: another pytest-xdist worker's server, started by
    hand or by a run, cannot take it between the choice and the bind. The lease lapses with this process."""
    user = server_user(host)
    datadir = workdir / data
    if not datadir.exists():
        host.run(install_db_command(cell, str(datadir), user), timeout=300)
    port = lease_block([(host, this_process(host))], 1, start=port_from).base
    paths = ServerPaths.under(str(workdir / "run"), str(datadir), tag, port)
    return MariaDBServer(host, paths, render_options(cell, paths, user=user, cache=cache,
                                                     constants=dict(constants) if constants else None))


def sysbench_lines() -> list[str]:
    """The command lines of every running sysbench."""
    ps = subprocess.run(["ps", "-ww", "-C", "sysbench", "-o", "args="], capture_output=True, text=True, check=False)
    return ps.stdout.splitlines()


class WhenMeasuring(threading.Thread):
    """Runs `act` once, `delay` seconds after `ready()` first holds (polled every 50 ms): e.g. SIGKILL a
    server when this session's measured sysbench runs. `done` is set after `act`; `result` holds what it
    returned. As a context manager it watches while the block runs and is stopped and joined after it."""

    def __init__(self, ready: Callable[[], bool], act: Callable[[], Any], delay: float | Callable[[], float] = 0.0):
        super().__init__(daemon=True)
        self.ready, self.act, self.delay = ready, act, delay
        self.result: Any = None
        self.done = threading.Event()
        self.stop_flag = threading.Event()

    def __enter__(self) -> WhenMeasuring:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_flag.set()
        self.join(5)

    def run(self) -> None:
        while not self.stop_flag.is_set():
            if self.ready():
                time.sleep(self.delay() if callable(self.delay) else self.delay)
                self.result = self.act()
                self.done.set()
                return
            time.sleep(0.05)


def kill_by_pid_file(pid_file: str | Path) -> int:
    """SIGKILL the process whose PID the file holds (a server's pid file); its PID."""
    pid = int(Path(pid_file).read_text().strip())
    os.kill(pid, 9)
    return pid
