"""A watchdog per host: when the controller dies without cleaning up (kill -9, a lost SSH connection),
everything our runs started on that host is killed within about a second.

The guard is a small shell loop started on the host through :meth:`Host.run` (invoke locally, an SSH
channel remotely), so its standard output is a pipe whose reading end belongs to the controller. It
writes a heartbeat line every second; once the controller is gone (its pipe closed, or its SSH session
torn down) the write fails with EPIPE (SIGPIPE is ignored), and the guard SIGKILLs every process whose
environment holds its marker ``DBMATRIX_GUARD=<token>``. The marker is in the session environment of the
:class:`Host` (:meth:`Host.set_session_env`) from the moment the guard runs, so every mariadbd, sysbench
and collector started through that Host carries it (``setsid``/``nohup``/``setpriv`` keep the environment).
The guard itself runs with no marker (neither ours nor the per-command one that :meth:`Host.interrupt`
kills by). It is also the owner of the host's port leases (:mod:`dbmatrix.run.ports`): they go stale
when it exits, and it removes them itself on the way out.

On a normal end :meth:`Guard.close` creates the stop file; the guard exits within a second, killing nothing.
"""

from __future__ import annotations

import shlex
import threading
import uuid

from dbmatrix.hosts.remote import GUARD_VAR, Host, without_markers
from dbmatrix.run.ports import LEASE_DIR, Owner, PortError


def guard_script(token: str, stop_path: str, lease_dir: str = LEASE_DIR, interval_s: float = 1.0) -> str:
    """The watchdog loop (POSIX sh). First line out: ``guard PID STARTTIME``; then a heartbeat a second."""
    q = shlex.quote
    marker = q(f"{GUARD_VAR}={token}")
    find = (f"grep -lxaz -e {marker} /proc/[0-9]*/environ 2>/dev/null"
            " | sed -n 's#^/proc/\\([0-9]*\\)/environ$#\\1#p'")
    return "\n".join([
        "trap '' PIPE HUP INT TERM",
        "me=$$",
        "st=$(sed 's/^.*) //' /proc/$me/stat | cut -d' ' -f20)",
        "echo \"guard $me $st\" || exit 0",
        "gone=0",
        "while :; do",
        f"  if [ -e {q(stop_path)} ]; then break; fi",
        "  if ! echo . 2>/dev/null; then gone=1; break; fi",
        f"  sleep {interval_s:g}",
        "done",
        "if [ $gone = 1 ]; then",
        # Twice: a process being started while we looked (a sysbench forking) is caught the second time.
        f"  for round in 1 2; do pids=$({find} | grep -vx \"$me\"); [ -n \"$pids\" ] && kill -KILL $pids 2>/dev/null;"
        " sleep 0.2; done",
        "fi",
        f"for f in {q(lease_dir)}/[0-9]*; do",
        "  [ \"$(head -n 1 \"$f\" 2>/dev/null)\" = \"$me $st\" ] && rm -f \"$f\"",
        "done",
        f"rm -f {q(stop_path)}",
        "exit 0",
    ]) + "\n"


def parse_hello(line: str) -> Owner | None:
    """The guard's first line ``guard PID STARTTIME`` -> the guard as a lease owner."""
    f = line.split()
    if len(f) == 3 and f[0] == "guard" and f[1].isdigit() and f[2].isdigit():
        return Owner(int(f[1]), f[2])
    return None


class Guard:
    """The watchdog of one Host object (see the module docstring). Start it before anything else runs on
    the host; close it after everything has stopped (and before closing the host)."""

    def __init__(self, host: Host, rundir: str):
        self.host = host
        self.token = uuid.uuid4().hex
        self.stop_path = f"{rundir}/guard-{self.token}.stop"
        self.rundir = rundir
        self.owner: Owner | None = None
        self._hello = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def _on_line(self, line: str) -> None:
        if self.owner is None:
            owner = parse_hello(line)
            if owner is not None:
                self.owner = owner
                self._hello.set()

    def _serve(self, command: str) -> None:
        try:
            r = self.host.run(command, check=False, on_output=self._on_line)
            if self.owner is None:
                self.error = f"guard exited {r.exit_code}: {(r.stderr or r.stdout)[-300:]}"
        except BaseException as exc:  # noqa: BLE001 - reported through start()/error
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._hello.set()

    def start(self, timeout_s: float = 30.0) -> Owner:
        q = shlex.quote
        self.host.run(f"mkdir -p {q(self.rundir)} && rm -f {q(self.stop_path)}")
        script = guard_script(self.token, self.stop_path)
        # exec: the guard replaces the shell, and runs without our markers (it must not find itself, and
        # Host.interrupt, which kills the in-flight commands of a run, must not kill it).
        command = f"cd /; exec {without_markers()} sh -c {q(script)} < /dev/null"
        self._thread = threading.Thread(target=self._serve, args=(command,), daemon=True,
                                        name=f"guard-{self.host.name}")
        self._thread.start()
        if not self._hello.wait(timeout_s) or self.owner is None:
            raise PortError(f"[{self.host.name}] the run guard did not start: {self.error or 'no answer'}")
        self.host.set_session_env(GUARD_VAR, self.token)
        return self.owner

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the guard without killing anything (idempotent; never raises)."""
        self.host.set_session_env(GUARD_VAR, None)
        if self._thread is None:
            return
        try:
            self.host.run(f"touch {shlex.quote(self.stop_path)}", check=False, timeout=30)
        except Exception:  # noqa: BLE001 - the host may be gone; so is the guard then
            pass
        self._thread.join(timeout_s)
        self._thread = None

