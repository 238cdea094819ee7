"""Pytest plugin: a throwaway real sshd on 127.0.0.1 for integration tests of SSH hosts.

Self-contained (no imports from the test tree), so it loads under either module name:
``pytest_plugins = ["tests.conftest_sshd"]`` (when ``tests`` is importable) or ``["conftest_sshd"]``
from ``tests/conftest.py`` (pytest puts ``tests/`` on sys.path when that conftest has no package).

The daemon runs as a non-daemonised child (``sshd -D -e``) of the test process with its own config,
keys, authorized_keys and pid file in a 0700 temporary directory; it never touches the system ssh
service. It is stopped by PID when the session ends, and it is also asked (PR_SET_PDEATHSIG) to die
with the test process should that be killed without running teardown.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
READY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SSHDInfo:
    """Where the throwaway sshd listens and the files a client needs to reach it."""

    address: str
    port: int
    user: str
    key_file: str  # private client key (its .pub is in authorized_keys)
    known_hosts: str  # "[127.0.0.1]:PORT <host key>": the right key
    wrong_known_hosts: str  # same host entry with another, generated key
    empty_known_hosts: str  # exists but is empty
    host_pubkey: str
    pid: int
    log_file: str  # sshd's stderr (-e)


def _keygen(path: Path, comment: str) -> None:
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True, stdin=subprocess.DEVNULL, capture_output=True,
    )


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: have the kernel SIGTERM sshd if the test process dies without teardown."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:
        pass


def _children(pid: int) -> list[int]:
    """PIDs whose parent is `pid` (per-connection sshd processes of the listener)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[0] != "Z" and int(fields[1]) == pid:
            kids.append(int(entry))
    return kids


def _stop(proc: subprocess.Popen) -> None:
    """Stop sshd by PID. Its per-connection children outlive it (and would be orphaned), so let them
    finish first while the listener can still reap them, then TERM whatever a test left connected."""
    if proc.poll() is None and os.path.isdir("/proc"):
        deadline = time.monotonic() + 3
        while _children(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        for kid in _children(proc.pid):
            try:
                os.kill(kid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + 3
        while _children(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _log_tail(log: Path, n: int = 2000) -> str:
    try:
        return log.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _wait_listening(proc: subprocess.Popen, address: str, port: int, timeout: float) -> bool:
    """Poll until the port accepts connections; False if sshd exited or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def write_sshd_config(config: Path, address: str, port: int, host_key: Path, pid_file: Path,
                      authorized: Path) -> Path:
    """A throwaway sshd's configuration: keys only, root by key, no PAM, sftp built in; checked by `sshd -t`."""
    config.write_text("\n".join([
        f"ListenAddress {address}:{port}",
        f"HostKey {host_key}",
        f"PidFile {pid_file}",
        f"AuthorizedKeysFile {authorized}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",  # keys under /tmp (mode 1777) would be refused otherwise
        "Subsystem sftp internal-sftp",
        "LogLevel VERBOSE",
        "",
    ]))
    subprocess.run([SSHD, "-t", "-f", str(config)], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return config


@pytest.fixture(scope="session")
def sshd_host(tmp_path_factory: pytest.TempPathFactory):
    """Start a real sshd on 127.0.0.1:<free port>; yield :class:`SSHDInfo`; stop it at session end."""
    if not os.path.exists(SSHD):
        pytest.skip(f"{SSHD} not found: install openssh-server to run the SSH integration tests")

    d = tmp_path_factory.mktemp("sshd")
    d.chmod(0o700)
    host_key, client_key, other_key = d / "host_ed25519", d / "client_ed25519", d / "other_ed25519"
    _keygen(host_key, "dbmatrix-test-host")
    _keygen(client_key, "dbmatrix-test-client")
    _keygen(other_key, "dbmatrix-test-wrong-host")
    authorized = d / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    authorized.chmod(0o600)

    # Privilege separation directory; sshd refuses to start without it.
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)

    address = "127.0.0.1"
    user = getpass.getuser()
    pid_file = d / "sshd.pid"
    log = d / "sshd.log"
    config = d / "sshd_config"
    proc: subprocess.Popen | None = None
    port = 0
    for _attempt in range(3):  # another process may grab the probed port before sshd binds it
        port = _free_port(address)
        write_sshd_config(config, address, port, host_key, pid_file, authorized)
        with open(log, "ab") as logf:
            proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        if _wait_listening(proc, address, port, READY_TIMEOUT_S):
            break
        _stop(proc)
        proc = None
    if proc is None:
        pytest.fail(f"throwaway sshd did not start listening on {address}:{port}; log:\n{_log_tail(log)}")

    host_pub = host_key.with_suffix(".pub").read_text().split()
    host_pub_line = f"{host_pub[0]} {host_pub[1]}"
    other_pub = other_key.with_suffix(".pub").read_text().split()
    hostpat = f"[{address}]:{port}"
    known = d / "known_hosts"
    known.write_text(f"{hostpat} {host_pub_line}\n")
    wrong = d / "known_hosts.wrong"
    wrong.write_text(f"{hostpat} {other_pub[0]} {other_pub[1]}\n")
    empty = d / "known_hosts.empty"
    empty.write_text("")

    info = SSHDInfo(
        address=address, port=port, user=user, key_file=str(client_key), known_hosts=str(known),
        wrong_known_hosts=str(wrong), empty_known_hosts=str(empty), host_pubkey=host_pub_line,
        pid=proc.pid, log_file=str(log),
    )
    try:
        yield info
    finally:
        _stop(proc)
