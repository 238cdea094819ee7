"""MariaDB server options per cell (pure; each engine's own come from :mod:`dbmatrix.engines`), and the
lifecycle of our own `mariadbd`.

We never use the system service: every instance has its own datadir, socket, pid file and error log,
a TCP port on 127.0.0.1 only when something needs one (else ``--skip-networking``), and is stopped by
us: cleanly, or killed when its datadir is thrown away (:data:`STOP_MODES`), by its PID, never pkill.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass

from dbmatrix import engines
from dbmatrix.hosts.builds import SYSTEM_BUILD, ServerBuild
from dbmatrix.hosts.remote import CommandError, Host
from dbmatrix.run.ports import bind_failed
from dbmatrix.spec.experiment import HARNESS_OPTIONS as FACTOR_OPTIONS  # options a factor sets: never constant
from dbmatrix.spec.experiment import STOP_MODES, Cell, SpecError

MiB = 1024 * 1024


class ServerError(RuntimeError):
    """mariadbd did not start, did not become ready, or did not stop."""


class PortInUse(ServerError):
    """mariadbd (or a Galera listener) exited at startup because its port was taken ("Address already in
    use", errno 98): the caller may retry once on other ports."""


@dataclass(frozen=True)
class ServerPaths:
    datadir: str
    socket: str
    pid_file: str
    error_log: str
    port: int | None  # None: no TCP at all (--skip-networking); the client uses the socket

    @property
    def tmpdir(self) -> str:
        """The server's own temporary directory beside its socket: mariadbd deletes every ``#sql*`` file
        in its tmpdir at startup, so servers sharing /tmp delete each other's temporary tables."""
        return self.pid_file.removesuffix(".pid") + ".tmp"

    @classmethod
    def under(cls, rundir: str, datadir: str, name: str, port: int | None = None) -> ServerPaths:
        return cls(datadir, f"{rundir}/{name}.sock", f"{rundir}/{name}.pid", f"{rundir}/{name}.err", port)


def cache_bytes(cell: Cell, data_bytes: int) -> int:
    """Cache size for `cell.cache_pct` of the measured data size, rounded down to MiB,
    and never below the engine's minimum (0 % means that minimum)."""
    minimum = engines.engine(cell.engine).min_cache_bytes(cell.block_size)
    return max(minimum, requested_cache_bytes(cell, data_bytes) // MiB * MiB)


def requested_cache_bytes(cell: Cell, data_bytes: int) -> int:
    """`cell.cache_pct` of the measured data size, before rounding and the engine's minimum."""
    return int(cell.cache_pct / 100 * data_bytes)


def table_engine(cell: Cell) -> str:
    """The engine string sysbench pastes into CREATE TABLE (carries the table options)."""
    return engines.engine(cell.engine).table_engine(cell.compression)


def engine_options(cell: Cell, cache: int | None, log_dir: str | None = None) -> list[str]:
    """Options that depend on the cell (and that must be identical at init, prepare and run).

    `log_dir`: the redo log (InnoDB) or WAL (RocksDB) directory when it lives on another medium."""
    return engines.engine(cell.engine).server_options(cell.block_size, cell.compression, cache, log_dir)


def render_options(
    cell: Cell,
    paths: ServerPaths,
    *,
    user: str,
    cache: int | None,
    constants: Mapping[str, str] | None = None,
    log_dir: str | None = None,
    build: ServerBuild | None = None,
) -> list[str]:
    """The full mariadbd command line for a cell; `--no-defaults` first so no my.cnf leaks in.

    Constant options of a plugin engine (`rocksdb_*`) apply to its cells only (the plugin is not loaded for
    the other cells, where mariadbd would refuse them); see :func:`constants_for`. `build`: the host's build
    of the cell's ``server_build`` level (its basedir, plugin and message directories follow --no-defaults)."""
    build = cell_build(cell, build)
    opts = [
        "--no-defaults",
        *build.server_options(),
        f"--user={user}",
        f"--datadir={paths.datadir}",
        f"--socket={paths.socket}",
        *([f"--port={paths.port}", "--bind-address=127.0.0.1"] if paths.port is not None else
          ["--skip-networking"]),
        f"--pid-file={paths.pid_file}",
        f"--log-error={paths.error_log}",
        f"--tmpdir={paths.tmpdir}",
        "--skip-log-bin",
        "--skip-name-resolve",
        *engines.startup_options(),  # InnoDB's: cold, identical starting state
    ]
    opts += engine_options(cell, cache, log_dir)
    opts += group_commit_options(cell)
    index_option = engines.engine(cell.engine).index_cache_option
    if cell.index_cache == "table" and index_option:  # the index_cache factor (spec.cells.check_combination)
        opts.append(f"--{index_option.replace('_', '-')}=OFF")
    for name in constants or {}:
        if name.replace("-", "_") in FACTOR_OPTIONS:
            raise SpecError(f"server_options.{name}: set by a factor or by the harness; "
                            "remove it from server_options")
    for name, value in sorted(constants_for(cell, constants or {}).items()):
        opts.append(f"--{name.replace('-', '_').replace('_', '-')}={value}")
    return opts


def group_commit_options(cell: Cell) -> list[str]:
    """The group_commit factor's options: none at 0 (MariaDB's default), else the leader waits up to the level's
    microseconds for the cell's client threads to join its group (a full group commits at once)."""
    if not cell.group_commit:
        return []
    return [f"--binlog-commit-wait-count={max(cell.threads, 2)}", f"--binlog-commit-wait-usec={cell.group_commit}"]


def constants_for(cell: Cell, constants: Mapping[str, str]) -> dict[str, str]:
    """The spec's constant server options that apply to this cell's engine."""
    return {k: v for k, v in constants.items() if not engines.plugin_option(k.replace("-", "_"), cell.engine)}


def cell_build(cell: Cell, build: ServerBuild | None) -> ServerBuild:
    """The build a cell runs: `build` (the host's build of that name), the system's server at the default level;
    a mismatch is a bug of the caller, not of the spec (the spec's levels are checked against the inventory)."""
    build = build or SYSTEM_BUILD
    if build.name != cell.server_build:
        raise ValueError(f"cell {cell.cell_id} runs server build {cell.server_build!r}, given {build.name!r}")
    return build


def install_db_command(cell: Cell, datadir: str, user: str, build: ServerBuild | None = None) -> str:
    args = [
        *cell_build(cell, build).install_db_argv(datadir, user),
        # The bootstrap's temporary tables in its own datadir, not /tmp: a server starting meanwhile
        # on the same machine would delete them (its startup removes every #sql* file in its tmpdir).
        f"--tmpdir={datadir}",
    ]
    args += engines.engine(cell.engine).install_db_options(cell.block_size)
    return shlex.join(args)


def client_command(socket: str, sql: str) -> str:
    return shlex.join(["mariadb", "--no-defaults", "-uroot", f"--socket={socket}", "-N", "-B", "-e", sql])


def kill_command(pid: int, wait_s: float = 12.0) -> str:
    """SIGKILL `pid`, then wait until it is gone (a zombie counts as gone: its memory and files are freed);
    exits 1 if it is still there after `wait_s`."""
    state = f"sed -n 's/^.*) \\(.\\).*$/\\1/p' /proc/{int(pid)}/stat 2>/dev/null"
    rounds = max(1, int(wait_s / 0.02))
    return (f"kill -KILL {int(pid)} 2>/dev/null; i=0; while s=$({state}); [ -n \"$s\" ] && [ \"$s\" != Z ]; do "
            f"[ $i -ge {rounds} ] && exit 1; sleep 0.02; i=$((i+1)); done; exit 0")


def parse_tsv_pairs(text: str) -> dict[str, str]:
    """`SHOW GLOBAL VARIABLES`/`STATUS` in batch mode -> {name: value}."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "\t" in line:
            k, v = line.split("\t", 1)
            out[k] = v
        elif line.strip():
            out[line.strip()] = ""
    return out


class MariaDBServer:
    """One of our own mariadbd instances on a Host. Use as a context manager: it is always stopped."""

    def __init__(self, host: Host, paths: ServerPaths, options: list[str], prefix: list[str] | None = None,
                 binary: str = "mariadbd"):
        self.host = host
        self.paths = paths
        self.options = options
        self.binary = binary  # the server build's (hosts.builds.ServerBuild.server)
        # Wrappers that exec mariadbd (taskset/numactl, a cgroup join for throttled media): same PID.
        self.prefix = list(prefix or [])
        self.pid: int | None = None
        self.started_s: float | None = None
        self.stop_s: float | None = None
        self.clean_shutdown: bool | None = None
        self.stop_mode: str | None = None  # how the last stop went: "clean" or "kill"

    @property
    def command(self) -> str:
        return shlex.join([*self.prefix, self.binary, *self.options])

    def _alive(self, pid: int) -> bool:
        return self.host.run(f"kill -0 {pid}", check=False).ok

    def _error_tail(self, lines: int = 30) -> str:
        r = self.host.run(f"tail -n {lines} {shlex.quote(self.paths.error_log)}", check=False)
        return r.stdout

    def reap_orphan(self) -> bool:
        """Stop a server left on our pid file by a killed session (only if it is a mariadbd on our datadir)."""
        r = self.host.run(f"cat {shlex.quote(self.paths.pid_file)}", check=False)
        if not r.ok or not r.stdout.strip().isdigit():
            return False
        pid = int(r.stdout.strip())
        args = self.host.run(f"ps -ww -o args= -p {pid}", check=False).stdout
        if self.binary.rsplit("/", 1)[-1] not in args or self.paths.datadir not in args:
            return False
        self.pid = pid
        self.stop()
        return True

    def start(self, timeout_s: float = 120.0) -> None:
        rundir = self.paths.socket.rsplit("/", 1)[0]
        self.host.run(f"mkdir -p {shlex.quote(rundir)} {shlex.quote(self.paths.tmpdir)}")
        self.reap_orphan()
        q = shlex.quote
        self.host.run(f"rm -f {q(self.paths.socket)} {q(self.paths.pid_file)} {q(self.paths.error_log)}")
        # setsid: the server is not in our process group, so a terminal's Ctrl-C reaches only us,
        # and we shut it down cleanly in our finally blocks.
        r = self.host.run(
            f"setsid nohup {self.command} > {q(self.paths.error_log + '.stdout')} 2>&1 < /dev/null & echo $!"
        )
        self.pid = int(r.stdout.strip().splitlines()[-1])
        t0 = time.monotonic()
        ping = shlex.join(["mariadb-admin", "--no-defaults", "-uroot", f"--socket={self.paths.socket}",
                           "--connect-timeout=2", "ping"])
        while True:
            if self.host.run(ping, check=False).ok:
                self.started_s = time.monotonic() - t0
                return
            if not self._alive(self.pid):
                self.pid = None
                tail = self._error_tail()
                if self.paths.port is not None and bind_failed(tail):
                    raise PortInUse(f"mariadbd could not bind its port (base {self.paths.port}); error log:\n{tail}")
                raise ServerError(f"mariadbd exited during startup; error log:\n{tail}")
            if time.monotonic() - t0 > timeout_s:
                self.stop()
                raise ServerError(f"mariadbd not ready after {timeout_s:.0f}s; error log:\n{self._error_tail()}")
            time.sleep(0.2)

    def stop(self, timeout_s: float = 300.0, mode: str = "clean") -> None:
        """`mode` "clean": shutdown through mariadb-admin, SIGTERM then SIGKILL by PID if it will not stop.
        "kill": SIGKILL and wait for the process to be gone, for a datadir that is thrown away right after
        (nothing reads it again: the next run restores a fresh copy of the snapshot)."""
        if mode not in STOP_MODES:
            raise ValueError(f"stop mode {mode!r}; allowed: {', '.join(STOP_MODES)}")
        if self.pid is None:
            return
        pid = self.pid
        t0 = time.monotonic()
        if mode == "kill":
            r = self.host.run(kill_command(pid), check=False, timeout=60)
            self.clean_shutdown, self.stop_mode = False, "kill"
            if not r.ok:
                raise ServerError(f"mariadbd (pid {pid}) still alive 12 s after SIGKILL")
            self.stop_s = time.monotonic() - t0
            self.pid = None
            return
        self.stop_mode = "clean"
        admin = shlex.join(["mariadb-admin", "--no-defaults", "-uroot", f"--socket={self.paths.socket}",
                            "shutdown"])
        self.host.run(admin, check=False, timeout=timeout_s)
        self.clean_shutdown = True
        while self._alive(pid):
            if time.monotonic() - t0 > timeout_s:
                self.clean_shutdown = False
                self.host.run(f"kill -TERM {pid}", check=False)
                time.sleep(10)
                if self._alive(pid):
                    self.host.run(f"kill -KILL {pid}", check=False)
                break
            time.sleep(0.1)
        self.stop_s = time.monotonic() - t0
        self.pid = None

    def sql(self, query: str, timeout_s: float = 600.0) -> str:
        return self.host.run(client_command(self.paths.socket, query), timeout=timeout_s).stdout

    def global_variables(self) -> dict[str, str]:
        return parse_tsv_pairs(self.sql("SHOW GLOBAL VARIABLES"))

    def global_status(self) -> dict[str, str]:
        return parse_tsv_pairs(self.sql("SHOW GLOBAL STATUS"))

    def __enter__(self) -> MariaDBServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        except CommandError:
            if self.pid is not None:
                self.host.run(f"kill -KILL {self.pid}", check=False)
            raise


def server_user(host: Host) -> str:
    return host.run("id -un").stdout.strip()
