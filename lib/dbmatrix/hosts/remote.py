"""The one seam for side effects on hosts: run, put and get, locally (invoke) or over SSH (fabric).

Everything above this module is written against :class:`Host`; it is the only module that
imports fabric, invoke or paramiko.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbmatrix.hosts.sections import Section, parse_sections, sections_script


@dataclass(frozen=True)
class CommandResult:
    command: str
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class CommandError(RuntimeError):
    """A command exited non-zero (or timed out) where success was required."""

    def __init__(self, host: str, result: CommandResult, timed_out: bool = False):
        self.host = host
        self.result = result
        self.timed_out = timed_out
        what = "timed out" if timed_out else f"exited {result.exit_code}"
        tail = (result.stderr or result.stdout).strip()[-2000:]
        super().__init__(f"[{host}] command {what}: {result.command}\n{tail}")


class RunInterrupted(BaseException):
    """Ctrl-C/SIGTERM during a long study (raised by the runner's signal handler).

    Not a KeyboardInterrupt on purpose: invoke swallows KeyboardInterrupt while it waits for a
    command (it forwards it and keeps waiting); this one gets out, and the command is killed.
    """


class HostKeyError(RuntimeError):
    """The SSH host key is unknown or does not match the known_hosts file."""


def as_root(command: str, root: bool) -> str:
    """`command` as is for root, else through non-interactive sudo (fails instead of prompting); the
    one place that writes the ``sudo -n`` wrapping (see :meth:`Host.privileged`)."""
    return command if root else f"sudo -n sh -c {shlex.quote(command)}"


_INFLIGHT_LOCK = threading.Lock()
KEEPALIVE_S = 30


class Host(ABC):
    """A machine we can run shell commands on and copy files to and from."""

    name: str
    is_local: bool

    @abstractmethod
    def run(
        self,
        command: str,
        *,
        check: bool = True,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """Run `command` with a POSIX shell; raise CommandError if `check` and it fails.

        `on_output(line)` is called with each complete line of standard output as it arrives (the
        result still holds the whole output), e.g. to show a benchmark's per-second lines live."""

    @abstractmethod
    def put(self, local: str | os.PathLike[str], remote: str) -> None:
        """Copy a local file to `remote` on the host (parent directories must exist)."""

    @abstractmethod
    def get(self, remote: str, local: str | os.PathLike[str]) -> None:
        """Copy a file from the host to a local path."""

    def close(self) -> None:
        """Release connections."""

    def interrupt(self) -> int:
        """Kill every command this Host object is running right now (from any thread): the way a
        controller stops the in-flight runs of a fleet. Returns how many commands were targeted."""
        markers = self._inflight_markers()
        for marker in markers:
            try:
                self._kill_marker(marker)
            except Exception:  # noqa: BLE001 - best effort: the host may be gone
                pass
        return len(markers)

    # In-flight bookkeeping for interrupt(); backends call _track() around each command.
    def _inflight_markers(self) -> list[str]:
        with _INFLIGHT_LOCK:
            return sorted(getattr(self, "_inflight", set()))

    @contextmanager
    def _track(self, marker: str) -> Iterator[None]:
        with _INFLIGHT_LOCK:
            if not hasattr(self, "_inflight"):
                self._inflight: set[str] = set()
            self._inflight.add(marker)
        try:
            yield
        finally:
            with _INFLIGHT_LOCK:
                self._inflight.discard(marker)

    def _kill_marker(self, marker: str) -> None:
        """Kill the processes whose environment holds `marker`."""

    # Conveniences built only on run/put/get, so every backend shares them.
    def read_text(self, path: str) -> str:
        return self.run(f"cat {shlex.quote(path)}").stdout

    def write_text(self, path: str, text: str) -> None:
        with tempfile.NamedTemporaryFile("w", delete=False, suffix=".txt") as f:
            f.write(text)
            tmp = f.name
        try:
            self.put(tmp, path)
        finally:
            os.unlink(tmp)

    def exists(self, path: str) -> bool:
        return self.run(f"test -e {shlex.quote(path)}", check=False).ok

    def which(self, program: str) -> str | None:
        r = self.run(f"command -v {shlex.quote(program)}", check=False)
        return (r.stdout.strip() or None) if r.ok else None

    def is_root(self) -> bool:
        return self.run("id -u").stdout.strip() == "0"

    def privileged(self, command: str, *, root: bool | None = None) -> str:
        """`command` as root: as is when we are root, else through non-interactive sudo. `root`: whether
        we are, when the caller already knows (saves the ``id -u`` round trip)."""
        return as_root(command, self.is_root() if root is None else root)

    def run_sections(self, sections: dict[str, str], *, prelude: str = "", privileged: bool = False,
                     root: bool | None = None, check: bool = False, timeout: float | None = None,
                     env: dict[str, str] | None = None) -> dict[str, Section]:
        """Run every command of `sections` in one round trip; {name: Section(text, rc)}.

        See :func:`~dbmatrix.hosts.sections.sections_script` (`prelude` runs first, in the
        script's shell). `privileged` runs the script as root (:meth:`privileged`, `root` as there)."""
        script = sections_script(sections, prelude=prelude)
        if privileged:
            script = self.privileged(script, root=root)
        res = self.run(script, check=check, timeout=timeout, env=env)
        return parse_sections(res.stdout, names=sections)

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _from_invoke(command: str, res: object, started: float) -> CommandResult:
    return CommandResult(
        command=command,
        stdout=getattr(res, "stdout", "") or "",
        stderr=getattr(res, "stderr", "") or "",
        exit_code=int(getattr(res, "exited", 0) or 0),
        duration_s=time.monotonic() - started,
    )


# On a run with a timeout, this variable (with a fresh id) is put in the command's environment, so
# that everything the command started, its children included, can be found and killed when it times
# out: invoke kills only the shell it started, and over SSH closing the channel kills nothing.
_RUN_ID_VAR = "DBMATRIX_RUN_ID"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _check_env(env: dict[str, str] | None) -> None:
    for key in env or {}:
        if not _ENV_NAME.match(key):
            raise ValueError(f"invalid environment variable name: {key!r}")


class _LineStream:
    """A write-only text stream that hands complete lines to a callback (invoke's `out_stream`)."""

    def __init__(self, on_line: Callable[[str], None]):
        self._on_line, self._buf = on_line, ""

    def write(self, data: str) -> int:
        self._buf += data
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            try:
                self._on_line(line)
            except Exception:  # noqa: BLE001 - a display callback must never break the command
                pass
        return len(data)

    def flush(self) -> None:
        pass


def _run_invoke(ctx: object, host: str, command: str, check: bool, timeout: float | None,
                env: dict[str, str] | None, *, wire_command: str | None = None,
                on_timeout: Callable[[], None] | None = None,
                on_interrupt: Callable[[], None] | None = None,
                on_output: Callable[[str], None] | None = None) -> CommandResult:
    """Run through invoke/fabric; `wire_command` is what is sent (default: `command`), `command` is
    what results and errors report; `on_timeout()` is called after a timeout, before raising."""
    from invoke.exceptions import CommandTimedOut

    started = time.monotonic()
    try:
        streams: dict[str, Any] = {"hide": True}
        if on_output is not None:  # replay stdout into a line splitter; stderr stays hidden
            streams = {"hide": "stderr", "out_stream": _LineStream(on_output)}
        res = ctx.run(  # type: ignore[attr-defined]
            wire_command or command, warn=True, timeout=timeout, env=env or {}, in_stream=False, **streams,
        )
    except RunInterrupted:
        if on_interrupt is not None:
            on_interrupt()
        raise
    except CommandTimedOut as exc:
        result = _from_invoke(command, exc.result, started)
        result = CommandResult(command, result.stdout, result.stderr, 124, result.duration_s)
        if on_timeout is not None:
            try:
                on_timeout()
            except Exception:  # noqa: BLE001 - best effort; the timeout is what we report
                pass
        raise CommandError(host, result, timed_out=True) from None
    result = _from_invoke(command, res, started)
    if timeout is not None and result.exit_code == -1 and result.duration_s >= timeout:
        # fabric sometimes reports its own timeout as a channel closed without exit status (-1).
        if on_timeout is not None:
            try:
                on_timeout()
            except Exception:  # noqa: BLE001 - best effort; the timeout is what we report
                pass
        timed = CommandResult(command, result.stdout, result.stderr, 124, result.duration_s)
        raise CommandError(host, timed, timed_out=True)
    if check and not result.ok:
        raise CommandError(host, result)
    return result


def _local_marked(marker: bytes) -> list[int]:
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _kill_local_marked(marker: str) -> None:
    """TERM (then, after 2 s, KILL) every local process whose environment holds `marker`."""
    wanted = marker.encode()
    for sig, wait_s in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 0.0)):
        pids = _local_marked(wanted)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _local_marked(wanted):
            time.sleep(0.05)


class LocalHost(Host):
    """This machine, through invoke (same call shape as fabric's Connection)."""

    is_local = True

    def __init__(self, name: str = "localhost"):
        from invoke import Context

        self.name = name
        self._ctx = Context()

    def run(self, command, *, check=True, timeout=None, env=None, on_output=None):
        run_id = uuid.uuid4().hex
        marker = f"{_RUN_ID_VAR}={run_id}"
        watchdog = None
        if timeout is not None:
            # invoke kills only its shell on timeout and then waits for the output pipes, which the
            # shell's children still hold open: kill them all just after invoke's own timer fires.
            watchdog = threading.Timer(timeout + 0.2, _kill_local_marked, args=(marker,))
            watchdog.daemon = True
            watchdog.start()
        try:
            with self._track(marker):
                return _run_invoke(
                    self._ctx, self.name, command, check, timeout, {**(env or {}), _RUN_ID_VAR: run_id},
                    on_timeout=lambda: _kill_local_marked(marker),
                    on_interrupt=lambda: _kill_local_marked(marker), on_output=on_output,
                )
        finally:
            if watchdog is not None:
                watchdog.cancel()

    def _kill_marker(self, marker: str) -> None:
        _kill_local_marked(marker)

    def put(self, local, remote):
        shutil.copyfile(local, remote)

    def get(self, remote, local):
        shutil.copyfile(remote, local)


def _fingerprint(key: object) -> str:
    """`ssh-keygen -l` style "TYPE SHA256:…" (a base64 prefix is the same for every key of a type)."""
    fp = getattr(key, "fingerprint", None)  # paramiko >= 3.2
    if not fp:
        import base64
        import hashlib

        digest = hashlib.sha256(key.asbytes()).digest()  # type: ignore[attr-defined]
        fp = "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
    return f"{key.get_name()} {fp}"  # type: ignore[attr-defined]


class SSHHost(Host):
    """A remote machine over SSH with fabric; host keys are verified against `known_hosts`.

    Unlike fabric's default (accept any key), an unknown or changed key is refused.
    """

    is_local = False

    def __init__(
        self,
        name: str,
        address: str,
        *,
        user: str | None = None,
        port: int = 22,
        key_file: str | None = None,
        known_hosts: str | None = None,
        connect_timeout: float = 15.0,
    ):
        import paramiko
        from fabric import Config, Connection

        self.name = name
        self.address = address
        self.port = port
        known = Path(known_hosts or Path.home() / ".ssh" / "known_hosts").expanduser()
        if not known.is_file():
            raise HostKeyError(
                f"host {name!r}: known_hosts file {str(known)!r} does not exist; add the host's key "
                f"first (e.g. ssh-keyscan -p {port} {address} >> {known}) after checking its fingerprint"
            )
        connect_kwargs: dict[str, object] = {"look_for_keys": key_file is None, "allow_agent": key_file is None}
        if key_file:
            connect_kwargs["key_filename"] = str(Path(key_file).expanduser())
        self._conn = Connection(
            host=address,
            user=user,
            port=port,
            connect_timeout=connect_timeout,
            connect_kwargs=connect_kwargs,
            config=Config(overrides={"load_ssh_configs": False}),
        )
        self._conn.client.load_host_keys(str(known))
        self._conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        self._known = known
        self._open_lock = threading.Lock()

    def _open(self) -> None:
        # One connection per SSHHost even when several threads (a fleet's worker and the controller's
        # interrupt) use it first at the same time.
        with self._open_lock:
            self._open_locked()

    def _open_locked(self) -> None:
        import paramiko

        if self._conn.is_connected:
            return
        try:
            try:
                self._conn.open()
                # Multi-day runs: keep idle connections through NAT/firewall timeouts.
                self._conn.transport.set_keepalive(KEEPALIVE_S)
            except BaseException:
                # paramiko leaves the transport of a failed connect (e.g. a refused host key) open,
                # and fabric's close() skips it as not connected: close it here.
                self._conn.client.close()
                raise
        except paramiko.BadHostKeyException as exc:
            raise HostKeyError(
                f"host {self.name!r} ({self.address}:{self.port}) presented a key that does not match "
                f"{self._known}: refusing to connect (expected {_fingerprint(exc.expected_key)}, "
                f"got {_fingerprint(exc.key)})"
            ) from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(
                    f"host {self.name!r} ({self.address}:{self.port}) is not in {self._known}: refusing "
                    f"an unknown host key ({exc})"
                ) from None
            raise

    def run(self, command, *, check=True, timeout=None, env=None, on_output=None):
        _check_env(env)
        self._open()
        env = dict(env or {})
        run_id = uuid.uuid4().hex
        env[_RUN_ID_VAR] = run_id
        on_timeout = lambda: self._kill_marked(f"{_RUN_ID_VAR}={run_id}")  # noqa: E731
        # fabric's own env prefix (`export K=V && …`) does not quote the values; build a quoted one.
        wire = command
        if env:
            exports = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(env.items()))
            wire = f"export {exports}\n{command}"
        with self._track(f"{_RUN_ID_VAR}={run_id}"):
            return _run_invoke(self._conn, self.name, command, check, timeout, None,
                               wire_command=wire, on_timeout=on_timeout, on_interrupt=on_timeout,
                               on_output=on_output)

    def _kill_marker(self, marker: str) -> None:
        self._kill_marked(marker)

    def _kill_marked(self, marker: str) -> None:
        """TERM (then, after 2 s, KILL) every remote process whose environment holds `marker`."""
        find = (f"grep -lxaz -e {shlex.quote(marker)} /proc/[0-9]*/environ 2>/dev/null"
                " | sed -n 's#^/proc/\\([0-9]*\\)/environ$#\\1#p'")
        script = (
            f"pids=$({find}); [ -z \"$pids\" ] && exit 0; kill -TERM $pids 2>/dev/null; i=0; "
            f"while [ $i -lt 20 ]; do sleep 0.1; pids=$({find}); [ -z \"$pids\" ] && exit 0; "
            f"i=$((i+1)); done; kill -KILL $pids 2>/dev/null; exit 0"
        )
        self._conn.run(script, hide=True, warn=True, timeout=15, in_stream=False)

    def put(self, local, remote):
        self._open()
        self._conn.put(str(local), remote=remote)

    def get(self, remote, local):
        self._open()
        self._conn.get(remote, local=str(local))

    def close(self) -> None:
        self._conn.close()
