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


class HostError(RuntimeError):
    """A host that cannot be used as the inventory describes it: `host` names it, `message` says what is
    wrong and `hint` what to do about it (the command line prints ``dbmatrix: <host>: <message>`` and the
    hint, without a traceback)."""

    def __init__(self, host: str, message: str, hint: str = ""):
        self.host = host
        self.message = message
        self.hint = hint
        super().__init__(f"host {host!r}: {message}" + (f"\n  hint: {hint}" if hint else ""))


class HostConfigError(HostError):
    """Something on the controller is wrong (a key file, a known_hosts file or its entry): found before
    connecting (:func:`check_ssh_access`) and fixed without touching the host."""


class HostKeyError(HostConfigError):
    """The SSH host key is unknown or does not match the known_hosts file (or that file is missing)."""


class HostConnectError(HostError):
    """Connecting failed although the files were in order: the host is unreachable or refused us."""


class HostUnreachableError(HostConnectError):
    """No SSH server answered at the address and port within the connect timeout."""


class HostAuthError(HostConnectError):
    """The SSH server refused the key (or the user)."""


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

    def session_env(self) -> dict[str, str]:
        """Variables put in the environment of every command this Host object runs from now on (the
        run guard's marker: everything our runs start carries it, so a watchdog can find it)."""
        return dict(getattr(self, "_session_env", {}))

    def set_session_env(self, name: str, value: str | None) -> None:
        """Set (or with None remove) one variable of :meth:`session_env`."""
        _check_env({name: ""})
        env = self.session_env()
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
        self._session_env = env

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
RUN_ID_VAR = "DBMATRIX_RUN_ID"
GUARD_VAR = "DBMATRIX_GUARD"  # the run guard's marker in a Host's session environment (dbmatrix.run.guard)


def without_markers() -> str:
    """Shell words that run a command without the markers Host.interrupt and the run guard kill by: for what
    must outlive the command that starts it (the guard itself, a medium's server)."""
    return f"env -u {RUN_ID_VAR} -u {GUARD_VAR}"
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
        marker = f"{RUN_ID_VAR}={run_id}"
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
                    self._ctx, self.name, command, check, timeout,
                    {**self.session_env(), **(env or {}), RUN_ID_VAR: run_id},
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


def _socket_reason(exc: BaseException) -> str:
    """Why a TCP connect failed, in words (paramiko wraps refused/unreachable per address)."""
    errors = getattr(exc, "errors", None)  # paramiko's NoValidConnectionsError
    if isinstance(errors, dict) and errors:
        exc = next(iter(errors.values()))
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == 111:
        return "connection refused (nothing listens on that port)"
    if isinstance(exc, TimeoutError):
        return "no answer (timed out)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


def _fingerprint(key: object) -> str:
    """`ssh-keygen -l` style "TYPE SHA256:…" (a base64 prefix is the same for every key of a type)."""
    fp = getattr(key, "fingerprint", None)  # paramiko >= 3.2
    if not fp:
        import base64
        import hashlib

        digest = hashlib.sha256(key.asbytes()).digest()  # type: ignore[attr-defined]
        fp = "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
    return f"{key.get_name()} {fp}"  # type: ignore[attr-defined]


def known_hosts_name(address: str, port: int) -> str:
    """How known_hosts (and ssh-keygen -F/-R) name a host: ``addr``, or ``[addr]:port`` off port 22."""
    return address if port == 22 else f"[{address}]:{port}"


def default_known_hosts() -> Path:
    return Path.home() / ".ssh" / "known_hosts"


@dataclass(frozen=True)
class SSHTarget:
    """What connecting to one inventory host takes, and where the inventory says it (for messages)."""

    name: str
    address: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    known_hosts: str | None = None
    connect_timeout: float = 15.0
    field: str = ""  # e.g. "inventory.hosts[db1]": the inventory entry, for "fix <field>.key_file"
    inventory: str | None = None  # the inventory file, when there is one

    @property
    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts).expanduser() if self.known_hosts else default_known_hosts()

    @property
    def key_path(self) -> Path | None:
        return Path(self.key_file).expanduser() if self.key_file else None

    @property
    def login(self) -> str:
        import getpass

        return self.user or getpass.getuser()

    def where(self, key: str, *more: str) -> str:
        """``inventory.hosts[db1].key_file in /path/hosts.yaml`` (or just the key without a field);
        with `more`: ``inventory.hosts[db1].user or .key_file in …``."""
        at = f"{self.field}.{key}" if self.field else key
        at += "".join(f" or .{k}" if self.field else f" or {k}" for k in more)
        return at + (f" in {self.inventory}" if self.inventory else "")

    def keyscan_hint(self) -> str:
        known, scan = self.known_hosts_path, f"ssh-keyscan -p {self.port} {self.address}"
        return (f"inspect the host's key with `{scan}` (fingerprints: `{scan} | ssh-keygen -lf -`), compare "
                "them with the host's own (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the host), "
                f"then add its line to {known}: `{scan} >> {known}` (the file is {self.where('known_hosts')}; "
                "default ~/.ssh/known_hosts)")

    def changed_key_hint(self) -> str:
        known, scan = self.known_hosts_path, f"ssh-keyscan -p {self.port} {self.address}"
        name = known_hosts_name(self.address, self.port)
        return (f"if the host was reinstalled or got new keys, check the new key (`{scan} | ssh-keygen -lf -` "
                "against `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the host), remove the old line "
                f"(`ssh-keygen -R '{name}' -f {known}`) and add the new one (`{scan} >> {known}`); if it was not, "
                "something else answers at that address: do not connect")

    def unknown_key_error(self) -> HostKeyError:
        return HostKeyError(self.name, f"the host key of {self.address} port {self.port} is not in "
                                       f"{self.known_hosts_path}: refusing an unknown host key",
                            self.keyscan_hint())

    def auth_hint(self) -> str:
        if self.key_path is None:
            return f"set {self.where('key_file')} to the private key the host accepts, or fix the user there"
        return (f"authorise the key on the host (`ssh-copy-id -i {self.key_path}.pub -p {self.port} "
                f"{self.login}@{self.address}`, or append {self.key_path}.pub to ~{self.login}/.ssh/authorized_keys "
                f"there), or fix {self.where('user', 'key_file')}")


def check_ssh_access(target: SSHTarget) -> None:
    """What can be checked before connecting: the key file exists and is readable, the known_hosts file
    exists and holds a key for the host (as ``ssh-keygen -F`` finds it). Raises :class:`HostConfigError`
    (:class:`HostKeyError` for known_hosts) with the fix."""
    import paramiko

    key = target.key_path
    if key is not None:
        make = (f"fix {target.where('key_file')}: name the private key this host accepts, or make that key "
                f"(`ssh-keygen -t ed25519 -f {key}`) and authorise it on the host (`ssh-copy-id -i {key}.pub "
                f"-p {target.port} {target.login}@{target.address}`)")
        if not key.exists():
            raise HostConfigError(target.name, f"key file {key} does not exist ({target.where('key_file')})", make)
        if not key.is_file():
            raise HostConfigError(target.name, f"key file {key} is not a file ({target.where('key_file')})", make)
        if not os.access(key, os.R_OK):
            raise HostConfigError(target.name, f"key file {key} is not readable by {_local_user()} "
                                               f"({target.where('key_file')})",
                                  f"make it readable by the user running dbmatrix (`chmod 600 {key}` as its owner)")
    known = target.known_hosts_path
    if not known.is_file():
        raise HostKeyError(target.name, f"known_hosts file {known} does not exist ({target.where('known_hosts')})",
                           target.keyscan_hint())
    try:
        keys = paramiko.HostKeys(str(known))
    except (OSError, paramiko.SSHException, ValueError) as exc:
        raise HostKeyError(target.name, f"known_hosts file {known} cannot be read: {exc}",
                           target.keyscan_hint()) from None
    if not keys.lookup(known_hosts_name(target.address, target.port)):
        raise target.unknown_key_error()


def _local_user() -> str:
    import getpass

    return getpass.getuser()


class SSHHost(Host):
    """A remote machine over SSH with fabric; host keys are verified against `known_hosts`.

    Unlike fabric's default (accept any key), an unknown or changed key is refused. What can be checked
    before connecting (:func:`check_ssh_access`) is checked when the host is made; what goes wrong on
    connecting is raised as :class:`HostKeyError`, :class:`HostAuthError`, :class:`HostUnreachableError`
    or :class:`HostConfigError` (an unusable key), each with the host, the fix and no paramiko traceback.
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
        field: str = "",
        inventory: str | None = None,
    ):
        import paramiko
        from fabric import Config, Connection

        self.name = name
        self.address = address
        self.port = port
        self.target = SSHTarget(name, address, port, user, key_file, known_hosts, connect_timeout, field, inventory)
        check_ssh_access(self.target)
        known = self.target.known_hosts_path
        connect_kwargs: dict[str, object] = {"look_for_keys": key_file is None, "allow_agent": key_file is None}
        if key_file:
            connect_kwargs["key_filename"] = str(self.target.key_path)
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
        t = self.target
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
                self.name, f"the host key of {self.address} port {self.port} does not match {self._known}: "
                           f"refusing to connect (expected {_fingerprint(exc.expected_key)}, "
                           f"got {_fingerprint(exc.key)})", t.changed_key_hint()) from None
        except paramiko.PasswordRequiredException:
            raise HostConfigError(
                self.name, f"key file {t.key_path} is protected by a passphrase ({t.where('key_file')}); "
                           "dbmatrix does not prompt", "use a key without a passphrase for the study "
                           "(`ssh-keygen -t ed25519 -N '' -f FILE`) and authorise it on the host") from None
        except paramiko.AuthenticationException as exc:
            raise HostAuthError(
                self.name, f"authentication as {t.login} with "
                           + (f"key {t.key_path}" if t.key_path else "the agent's and ~/.ssh's default keys")
                           + f" failed at {self.address} port {self.port} ({exc})", t.auth_hint()) from None
        except paramiko.SSHException as exc:
            text = str(exc)
            if "not found in known_hosts" in text:
                raise t.unknown_key_error() from None
            if "private key" in text or "key file" in text or "not a valid" in text:
                raise HostConfigError(self.name, f"key file {t.key_path} cannot be used: {text} "
                                                 f"({t.where('key_file')})",
                                      "give an OpenSSH private key without a passphrase") from None
            raise HostUnreachableError(
                self.name, f"no SSH session with {self.address} port {self.port} within the "
                           f"{t.connect_timeout:g} s connect timeout: {text}", self._reach_hint()) from None
        except (TimeoutError, OSError) as exc:  # refused, no route, timed out, name not resolved
            raise HostUnreachableError(
                self.name, f"cannot reach {self.address} port {self.port} within the {t.connect_timeout:g} s "
                           f"connect timeout: {_socket_reason(exc)}", self._reach_hint()) from None

    def _reach_hint(self) -> str:
        t = self.target
        return (f"check that the host is up and its sshd listens there (`ssh -p {self.port} "
                f"{t.login}@{self.address} true`), or fix {t.where('address', 'port', 'connect_timeout')}")

    def run(self, command, *, check=True, timeout=None, env=None, on_output=None):
        _check_env(env)
        self._open()
        env = {**self.session_env(), **(env or {})}
        run_id = uuid.uuid4().hex
        env[RUN_ID_VAR] = run_id
        on_timeout = lambda: self._kill_marked(f"{RUN_ID_VAR}={run_id}")  # noqa: E731
        # fabric's own env prefix (`export K=V && …`) does not quote the values; build a quoted one.
        wire = command
        if env:
            exports = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(env.items()))
            wire = f"export {exports}\n{command}"
        with self._track(f"{RUN_ID_VAR}={run_id}"):
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
