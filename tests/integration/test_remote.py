"""The Host contract, checked the same way on LocalHost (invoke) and on SSHHost (fabric -> real sshd).

The SSH side talks to the throwaway daemon of the ``sshd_host`` fixture (tests/conftest_sshd.py) on
127.0.0.1, so "remote" paths are on this machine too and both backends can share tmp_path.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from dbmatrix.hosts.remote import CommandError, Host, HostKeyError, LocalHost, SSHHost

pytestmark = pytest.mark.integration


def _ssh(info, known_hosts: str | None = None, name: str = "sshd-test") -> SSHHost:
    return SSHHost(
        name, info.address, user=info.user, port=info.port, key_file=info.key_file,
        known_hosts=known_hosts or info.known_hosts, connect_timeout=5.0,
    )


@pytest.fixture(scope="module", params=["local", "ssh"])
def host(request) -> Host:
    """The same tests against both backends; the SSH connection is reused across a module."""
    if request.param == "local":
        h: Host = LocalHost("local-test")
    else:
        h = _ssh(request.getfixturevalue("sshd_host"))
    try:
        yield h
    finally:
        h.close()


# --- run -------------------------------------------------------------------------------------------


def test_run_stdout_stderr_exit_code(host):
    cmd = "echo hello; echo warn >&2"
    r = host.run(cmd)
    assert r.command == cmd
    assert r.stdout == "hello\n"
    assert r.stderr == "warn\n"
    assert r.exit_code == 0 and r.ok
    assert r.duration_s >= 0


def test_run_check_false_returns_nonzero(host):
    r = host.run("echo partial; exit 3", check=False)
    assert r.exit_code == 3
    assert not r.ok
    assert r.stdout == "partial\n"


def test_run_failure_raises_command_error(host):
    cmd = "echo out-text; echo boom-on-stderr >&2; exit 7"
    with pytest.raises(CommandError) as ei:
        host.run(cmd)
    err = ei.value
    assert err.host == host.name
    assert not err.timed_out
    assert err.result.exit_code == 7
    assert cmd in str(err)
    assert "boom-on-stderr" in str(err)
    assert "exited 7" in str(err)


def test_run_timeout_raises_timed_out(host):
    started = time.monotonic()
    with pytest.raises(CommandError) as ei:
        host.run("sleep 5", timeout=1)
    elapsed = time.monotonic() - started
    assert ei.value.timed_out
    assert ei.value.result.exit_code == 124
    assert "timed out" in str(ei.value)
    assert "sleep 5" in str(ei.value)
    assert elapsed < 4, f"timeout=1 took {elapsed:.1f} s"
    # The host (for SSH: the same connection) is still usable afterwards.
    assert host.run("echo still-alive").stdout == "still-alive\n"


def test_run_env(host):
    r = host.run('printf "%s|%s" "$DBM_A" "$DBM_B"', env={"DBM_A": "plain", "DBM_B": "with space 'q' $x"})
    assert r.stdout == "plain|with space 'q' $x"


# --- files -----------------------------------------------------------------------------------------


def test_put_get_binary_roundtrip(host, tmp_path):
    payload = bytes(range(256)) * 512 + os.urandom(70_001) + b"\x00\r\n\xff"
    src = tmp_path / "src.bin"
    src.write_bytes(payload)
    remote = str(tmp_path / "remote copy.bin")  # a space in the remote path on purpose
    back = tmp_path / "back.bin"

    host.put(src, remote)
    assert host.run(f"wc -c < '{remote}'").stdout.strip() == str(len(payload))
    host.get(remote, back)
    assert back.read_bytes() == payload


def test_write_text_read_text(host, tmp_path):
    path = str(tmp_path / "notes.txt")
    text = "line 1\nzwei: äöü ✓\n\ttabbed $HOME `x`\nno trailing newline"
    host.write_text(path, text)
    assert host.read_text(path) == text
    host.write_text(path, "replaced\n")
    assert host.read_text(path) == "replaced\n"


def test_read_text_missing_raises(host, tmp_path):
    with pytest.raises(CommandError):
        host.read_text(str(tmp_path / "no-such-file"))


def test_exists(host, tmp_path):
    f = tmp_path / "a file with spaces"
    f.write_text("x")
    assert host.exists(str(f))
    assert host.exists(str(tmp_path))
    assert not host.exists(str(tmp_path / "missing"))


def test_which(host):
    sh = host.which("sh")
    assert sh is not None and sh.endswith("/sh") and os.path.isabs(sh)
    assert host.which("dbmatrix-no-such-program-xyz") is None


def test_is_root(host):
    # Both backends are this machine as the current user.
    assert host.is_root() == (os.geteuid() == 0)


# --- host keys (SSH only) --------------------------------------------------------------------------


def test_ssh_wrong_host_key_refused(sshd_host):
    with _ssh(sshd_host, known_hosts=sshd_host.wrong_known_hosts) as h:
        with pytest.raises(HostKeyError, match="does not match") as ei:
            h.run("true")
    # The message names both keys by fingerprint, as `ssh-keygen -lf` would.
    msg = str(ei.value)
    fp = subprocess.run(["ssh-keygen", "-lf", sshd_host.known_hosts], capture_output=True, text=True,
                        check=True).stdout.split()[1]
    wrong_fp = subprocess.run(["ssh-keygen", "-lf", sshd_host.wrong_known_hosts], capture_output=True,
                              text=True, check=True).stdout.split()[1]
    assert f"got ssh-ed25519 {fp}" in msg
    assert f"expected ssh-ed25519 {wrong_fp}" in msg


def test_ssh_unknown_host_refused(sshd_host):
    # Refused before connecting: the known_hosts file has no entry for the host.
    with pytest.raises(HostKeyError, match=r"not in .*known_hosts"):
        _ssh(sshd_host, known_hosts=sshd_host.empty_known_hosts)


def test_ssh_missing_known_hosts_file_refused_at_construction(sshd_host, tmp_path):
    missing = str(tmp_path / "nope" / "known_hosts")
    with pytest.raises(HostKeyError, match="does not exist"):
        _ssh(sshd_host, known_hosts=missing)


def test_ssh_right_host_key_accepted(sshd_host):
    with _ssh(sshd_host) as h:
        assert h.run("echo ok").stdout == "ok\n"
        assert not h.is_local


# --- regressions (fixed in remote.py) ---------------------------------------------------------------


def _running(token: str) -> list[str]:
    """Command lines of live processes on this machine containing `token` (both backends are local)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if token in cmdline:
            out.append(f"{entry}: {cmdline}")
    return out


def test_timeout_kills_the_whole_command(host):
    # A compound command: the shell forks `sleep`, which used to survive the timeout (over SSH even a
    # plain `sleep` did: closing the channel kills nothing).
    token = "31.4159"
    with pytest.raises(CommandError) as ei:
        host.run(f"sleep {token}; echo never", timeout=1)
    assert ei.value.timed_out
    assert "DBMATRIX_RUN_ID" not in str(ei.value)
    assert _running(f"sleep {token}") == []


def test_env_names_are_validated_over_ssh(sshd_host):
    with _ssh(sshd_host) as h, pytest.raises(ValueError, match="invalid environment variable name"):
        h.run("true", env={"A; touch /tmp/x": "1"})


def test_env_value_with_newline_and_quotes(host):
    value = "two\nlines \"dq\" 'sq' \\ back"
    assert host.run('printf "%s" "$DBM_V"', env={"DBM_V": value}).stdout == value
