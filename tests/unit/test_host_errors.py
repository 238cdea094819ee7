"""Host mistakes as errors that say what to fix: the messages, the checks made before connecting (key
files, known_hosts entries) on temporary files, the mapping of paramiko's failures on connecting, and the
command line printing them without a traceback. No network: nothing here connects."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import paramiko
import pytest
import yaml

from dbmatrix.cli import main
from dbmatrix.hosts.inventory import load_inventory
from dbmatrix.hosts.remote import (
    HostAuthError,
    HostConfigError,
    HostError,
    HostKeyError,
    HostUnreachableError,
    SSHHost,
    SSHTarget,
    check_ssh_access,
    known_hosts_name,
)

ADDR = "10.99.0.7"
PUB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.fixture(autouse=True)
def _isolated_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBMATRIX_OUTPUT_ROOT", str(tmp_path / "out"))
    monkeypatch.setenv("DBMATRIX_WORKDIR", str(tmp_path / "work"))


def _files(tmp_path: Path, port: int = 22, hashed: bool = False) -> tuple[Path, Path]:
    key = tmp_path / "id_test"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o600)
    known = tmp_path / "known_hosts"
    name = known_hosts_name(ADDR, port)
    if hashed:
        name = paramiko.HostKeys.hash_host(name)
    known.write_text(f"{name} {PUB}\n")
    return key, known


def _target(key: Path | None, known: Path, port: int = 22, **kw: object) -> SSHTarget:
    return SSHTarget("db1", ADDR, port, "bench", str(key) if key else None, str(known), 3.0,
                     "inventory.hosts[db1]", "/lab/hosts.yaml", **kw)  # type: ignore[arg-type]


def _inventory(tmp_path: Path, **host: object) -> Path:
    inv = tmp_path / "hosts.yaml"
    entry = {"name": "db1", "address": ADDR, "user": "bench", "media": {"disk": {"kind": "dir"}}, **host}
    inv.write_text(yaml.safe_dump({"hosts": [entry]}))
    return inv


# ------------------------------------------------------------------------------ the errors themselves

def test_host_error_names_the_host_and_carries_the_hint() -> None:
    exc = HostAuthError("db1", "authentication as bench with key /k failed", "authorise /k.pub")
    assert isinstance(exc, HostError) and isinstance(exc, RuntimeError)
    assert (exc.host, exc.message, exc.hint) == ("db1", "authentication as bench with key /k failed",
                                                 "authorise /k.pub")
    assert str(exc) == "host 'db1': authentication as bench with key /k failed\n  hint: authorise /k.pub"
    assert issubclass(HostKeyError, HostConfigError)  # fixed on the controller, found before connecting
    assert not issubclass(HostUnreachableError, HostConfigError)


def test_known_hosts_name_follows_ssh() -> None:
    assert known_hosts_name("10.0.0.1", 22) == "10.0.0.1"
    assert known_hosts_name("10.0.0.1", 2222) == "[10.0.0.1]:2222"


# ------------------------------------------------------------------------------ checks before connecting

def test_files_in_order_pass(tmp_path: Path) -> None:
    key, known = _files(tmp_path)
    check_ssh_access(_target(key, known))
    check_ssh_access(_target(None, known))  # no key_file: the agent and ~/.ssh keys, nothing to check


@pytest.mark.parametrize("hashed", [False, True])
def test_entry_on_another_port_needs_the_bracketed_name(tmp_path: Path, hashed: bool) -> None:
    key, known = _files(tmp_path, port=2222, hashed=hashed)
    check_ssh_access(_target(key, known, port=2222))
    with pytest.raises(HostKeyError):
        check_ssh_access(_target(key, known, port=22))


def test_missing_key_file_names_host_field_and_path(tmp_path: Path) -> None:
    _, known = _files(tmp_path)
    missing = tmp_path / "keys" / "id_missing"
    with pytest.raises(HostConfigError) as ei:
        check_ssh_access(_target(missing, known))
    e = ei.value
    assert e.host == "db1" and not isinstance(e, HostKeyError)
    assert e.message == f"key file {missing} does not exist (inventory.hosts[db1].key_file in /lab/hosts.yaml)"
    assert f"ssh-keygen -t ed25519 -f {missing}" in e.hint
    assert f"ssh-copy-id -i {missing}.pub -p 22 bench@{ADDR}" in e.hint


def test_key_file_that_is_a_directory(tmp_path: Path) -> None:
    _, known = _files(tmp_path)
    with pytest.raises(HostConfigError, match=r"key file .* is not a file \(inventory.hosts\[db1\].key_file"):
        check_ssh_access(_target(tmp_path, known))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_key_file(tmp_path: Path) -> None:
    key, known = _files(tmp_path)
    key.chmod(0)
    with pytest.raises(HostConfigError, match="is not readable by"):
        check_ssh_access(_target(key, known))


def test_missing_known_hosts_file(tmp_path: Path) -> None:
    key, _ = _files(tmp_path)
    with pytest.raises(HostKeyError) as ei:
        check_ssh_access(_target(key, tmp_path / "nope", port=2222))
    assert ei.value.message == (f"known_hosts file {tmp_path / 'nope'} does not exist "
                                "(inventory.hosts[db1].known_hosts in /lab/hosts.yaml)")
    assert f"`ssh-keyscan -p 2222 {ADDR} >> {tmp_path / 'nope'}`" in ei.value.hint


def test_host_missing_from_known_hosts(tmp_path: Path) -> None:
    key, known = _files(tmp_path)
    known.write_text(f"10.99.0.8 {PUB}\n")  # another host only
    with pytest.raises(HostKeyError) as ei:
        check_ssh_access(_target(key, known))
    e = ei.value
    assert e.message == f"the host key of {ADDR} port 22 is not in {known}: refusing an unknown host key"
    assert f"`ssh-keyscan -p 22 {ADDR}`" in e.hint and f"`ssh-keyscan -p 22 {ADDR} >> {known}`" in e.hint
    assert "ssh-keygen -lf" in e.hint and "inventory.hosts[db1].known_hosts in /lab/hosts.yaml" in e.hint


def test_ssh_keygen_agrees_with_the_check(tmp_path: Path) -> None:
    """The check finds what `ssh-keygen -F '[addr]:port' -f known_hosts` finds (plain and hashed)."""
    for port, hashed in ((22, False), (2222, False), (2222, True)):
        _, known = _files(tmp_path, port=port, hashed=hashed)
        found = subprocess.run(["ssh-keygen", "-F", known_hosts_name(ADDR, port), "-f", str(known)],
                               capture_output=True, text=True)
        assert found.returncode == 0, (port, hashed)


def test_ssh_host_checks_the_files_when_made(tmp_path: Path) -> None:
    key, known = _files(tmp_path)
    with pytest.raises(HostConfigError, match="does not exist"):
        SSHHost("db1", ADDR, key_file=str(tmp_path / "missing"), known_hosts=str(known))
    with pytest.raises(HostKeyError, match="is not in"):
        SSHHost("db1", "10.99.0.9", key_file=str(key), known_hosts=str(known))


# ------------------------------------------------------------------------------ failures on connecting

def _host_failing_with(tmp_path: Path, exc: BaseException, monkeypatch: pytest.MonkeyPatch) -> SSHHost:
    key, known = _files(tmp_path, port=2222)
    host = SSHHost("db1", ADDR, user="bench", port=2222, key_file=str(key), known_hosts=str(known),
                   connect_timeout=2.0, field="inventory.hosts[db1]")

    def fail() -> None:
        raise exc

    monkeypatch.setattr(host._conn, "open", fail)
    return host


def test_authentication_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = _host_failing_with(tmp_path, paramiko.AuthenticationException("Authentication failed."), monkeypatch)
    with pytest.raises(HostAuthError) as ei:
        host.run("true")
    key = tmp_path / "id_test"
    assert ei.value.message == (f"authentication as bench with key {key} failed at {ADDR} port 2222 "
                                "(Authentication failed.)")
    assert f"ssh-copy-id -i {key}.pub -p 2222 bench@{ADDR}" in ei.value.hint
    assert "~bench/.ssh/authorized_keys" in ei.value.hint and "inventory.hosts[db1].user or .key_file" in ei.value.hint


def test_passphrase_protected_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = _host_failing_with(tmp_path, paramiko.PasswordRequiredException("private key file is encrypted"),
                              monkeypatch)
    with pytest.raises(HostConfigError, match="protected by a passphrase"):
        host.run("true")


@pytest.mark.parametrize(("exc", "reason"), [
    (paramiko.ssh_exception.NoValidConnectionsError({(ADDR, 2222): ConnectionRefusedError(111, "refused")}),
     "connection refused (nothing listens on that port)"),
    (TimeoutError("timed out"), "no answer (timed out)"),
    (OSError(113, "No route to host"), "no route to host"),
])
def test_unreachable_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException,
                          reason: str) -> None:
    host = _host_failing_with(tmp_path, exc, monkeypatch)
    with pytest.raises(HostUnreachableError) as ei:
        host.run("true")
    assert ei.value.message == f"cannot reach {ADDR} port 2222 within the 2 s connect timeout: {reason}"
    assert f"ssh -p 2222 bench@{ADDR} true" in ei.value.hint
    assert "inventory.hosts[db1].address or .port or .connect_timeout" in ei.value.hint


def test_unknown_key_on_connecting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The known_hosts entry went away between the check and the connection: the same message."""
    host = _host_failing_with(
        tmp_path, paramiko.SSHException(f"Server '[{ADDR}]:2222' not found in known_hosts"), monkeypatch)
    with pytest.raises(HostKeyError, match="refusing an unknown host key") as ei:
        host.run("true")
    assert f"ssh-keyscan -p 2222 {ADDR}" in ei.value.hint


# ------------------------------------------------------------------------------ the inventory

def test_inventory_resolves_key_files_next_to_it_and_knows_its_file(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lab").mkdir()
    inv = tmp_path / "lab" / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "db1", "address": ADDR, "key_file": "keys/id",
                                              "known_hosts": "known_hosts", "connect_timeout": 4}]}))
    monkeypatch.chdir(tmp_path)
    h = load_inventory("lab/hosts.yaml").hosts[0]
    assert h.key_file == str(tmp_path / "lab" / "keys" / "id")
    assert h.known_hosts == str(tmp_path / "lab" / "known_hosts")
    assert h.connect_timeout == 4.0 and h.source == str(inv)
    with pytest.raises(HostConfigError) as ei:
        h.check_access()
    assert ei.value.message == (f"key file {tmp_path / 'lab' / 'keys' / 'id'} does not exist "
                                f"(inventory.hosts[db1].key_file in {inv})")


@pytest.mark.parametrize("bad", [0, -1, "soon", True, 601])
def test_inventory_connect_timeout_is_checked(tmp_path: Path, bad: object) -> None:
    from dbmatrix.spec.experiment import SpecError

    with pytest.raises(SpecError, match=r"inventory.hosts\[db1\].connect_timeout"):
        load_inventory(_inventory(tmp_path, connect_timeout=bad))


# ------------------------------------------------------------------------------ the command line

@pytest.mark.parametrize("command", ["plan", "run", "setup"])
def test_cli_reports_a_missing_key_before_connecting(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     command: str) -> None:
    _, known = _files(tmp_path)
    inv = _inventory(tmp_path, key_file=str(tmp_path / "nokey"), known_hosts=str(known))
    args = [command, "--inventory", str(inv)] + (["--profile", "smoke"] if command != "setup" else [])
    assert main(args) == 2
    out = capsys.readouterr()
    assert out.err.splitlines()[0] == (f"dbmatrix: db1: key file {tmp_path / 'nokey'} does not exist "
                                       f"(inventory.hosts[db1].key_file in {inv})")
    assert out.err.splitlines()[1].startswith(f"  hint: fix inventory.hosts[db1].key_file in {inv}: name the private key")
    assert "Traceback" not in out.err and out.out == ""


def test_cli_reports_every_host_with_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key, known = _files(tmp_path)
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [
        {"name": "db1", "address": "10.99.0.8", "key_file": str(key), "known_hosts": str(known)},
        {"name": "db2", "address": ADDR, "key_file": str(tmp_path / "nokey"), "known_hosts": str(known)}]}))
    assert main(["plan", "--profile", "smoke", "--inventory", str(inv)]) == 2
    err = capsys.readouterr().err
    assert "dbmatrix: db1: the host key of 10.99.0.8 port 22 is not in" in err
    assert "dbmatrix: db2: key file" in err and err.count("  hint: ") == 2


def test_cli_plan_with_hosts_in_order_names_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key, known = _files(tmp_path)
    inv = _inventory(tmp_path, key_file=str(key), known_hosts=str(known))
    # --no-host-check: the host is fictional (a unit test connects nowhere); plan then checks only the inventory
    assert main(["plan", "--profile", "smoke", "--inventory", str(inv), "--no-host-check"]) == 0
    out = capsys.readouterr().out
    assert f"host db1: bench@{ADDR} port 22, key {key}, host key in {known}" in out
    assert "= 2 runs on db1" in out
