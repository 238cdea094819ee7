"""The four host mistakes as a user sees them: `dbmatrix plan/run/setup` in a subprocess against the SSH
test hosts (network namespaces with their own sshd, tests/conftest_netns.py), checking the message, the
hint, the exit code 2 and that no traceback is printed. What needs no connection (a missing key file, a
host missing from known_hosts) is found by `plan`/`run` before connecting; the rest on connecting
(`setup`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dbmatrix import paths

pytestmark = pytest.mark.integration

FREE_PORT = 2  # nothing listens there in the test namespace: connection refused


def dbmatrix(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib")}
    r = subprocess.run([sys.executable, "-m", "dbmatrix", *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=120)
    print(f"$ dbmatrix {' '.join(args)}  (exit {r.returncode})\n{r.stderr}", end="")  # shown with -s
    return r


def _inventory(tmp: Path, nh, **over: object) -> Path:
    entry = {**nh.inventory_entry(), **over}
    path = tmp / "hosts.yaml"
    path.write_text(yaml.safe_dump({"hosts": [entry]}, sort_keys=False))
    return path


def _no_traceback(r: subprocess.CompletedProcess[str]) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "paramiko" not in r.stderr, r.stderr


def test_unknown_host_key_at_plan_time(tmp_path: Path, netns_hosts) -> None:
    h1 = netns_hosts["h1"]
    inv = _inventory(tmp_path, h1, known_hosts=h1.empty_known_hosts)
    for command in ("plan", "run"):
        r = dbmatrix(tmp_path, command, "--profile", "smoke", "--inventory", "hosts.yaml", "--results", "res")
        _no_traceback(r)
        first, hint = r.stderr.splitlines()[:2]
        assert first == (f"dbmatrix: h1: the host key of {h1.address} port 22 is not in {h1.empty_known_hosts}: "
                         "refusing an unknown host key")
        assert f"`ssh-keyscan -p 22 {h1.address}`" in hint
        assert f"`ssh-keyscan -p 22 {h1.address} >> {h1.empty_known_hosts}`" in hint
        assert f"inventory.hosts[h1].known_hosts in {inv}" in hint
        assert not (tmp_path / "res").exists()  # nothing ran


def test_changed_host_key_on_connecting(tmp_path: Path, netns_hosts) -> None:
    h1 = netns_hosts["h1"]
    _inventory(tmp_path, h1, known_hosts=h1.wrong_known_hosts)
    r = dbmatrix(tmp_path, "setup", "--inventory", "hosts.yaml")
    _no_traceback(r)
    first, hint = r.stderr.splitlines()[:2]
    assert first.startswith(f"dbmatrix: h1: the host key of {h1.address} port 22 does not match "
                            f"{h1.wrong_known_hosts}: refusing to connect (expected ssh-ed25519 SHA256:")
    assert ", got ssh-ed25519 SHA256:" in first
    assert f"ssh-keygen -R '{h1.address}' -f {h1.wrong_known_hosts}" in hint


def test_missing_key_file_at_plan_time(tmp_path: Path, netns_hosts) -> None:
    h1 = netns_hosts["h1"]
    inv = _inventory(tmp_path, h1, key_file="keys/id_missing")
    for command in ("plan", "run"):
        r = dbmatrix(tmp_path, command, "--profile", "smoke", "--inventory", "hosts.yaml", "--results", "res")
        _no_traceback(r)
        first, hint = r.stderr.splitlines()[:2]
        key = tmp_path / "keys" / "id_missing"
        assert first == f"dbmatrix: h1: key file {key} does not exist (inventory.hosts[h1].key_file in {inv})"
        assert hint.startswith(f"  hint: fix inventory.hosts[h1].key_file in {inv}: ")
        assert f"ssh-copy-id -i {key}.pub -p 22 root@{h1.address}" in hint


def test_key_not_authorised(tmp_path: Path, netns_hosts) -> None:
    h1 = netns_hosts["h1"]
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id_other")], check=True)
    _inventory(tmp_path, h1, key_file="keys/id_other")
    r = dbmatrix(tmp_path, "setup", "--inventory", "hosts.yaml")
    _no_traceback(r)
    first, hint = r.stderr.splitlines()[:2]
    assert first == (f"dbmatrix: h1: authentication as root with key {keys / 'id_other'} failed at {h1.address} "
                     "port 22 (Authentication failed.)")
    assert f"ssh-copy-id -i {keys / 'id_other'}.pub -p 22 root@{h1.address}" in hint
    assert r.stderr.splitlines()[-1] == "dbmatrix: setup failed on 1 of 1 host(s)"


def test_unreachable_host(tmp_path: Path, netns_hosts) -> None:
    h1 = netns_hosts["h1"]
    known = tmp_path / "known_hosts"
    known.write_text(f"[{h1.address}]:{FREE_PORT} {h1.host_pubkey}\n")  # passes the check before connecting
    _inventory(tmp_path, h1, port=FREE_PORT, known_hosts=str(known), connect_timeout=2)
    r = dbmatrix(tmp_path, "setup", "--inventory", "hosts.yaml")
    _no_traceback(r)
    first, hint = r.stderr.splitlines()[:2]
    assert first == (f"dbmatrix: h1: cannot reach {h1.address} port {FREE_PORT} within the 2 s connect timeout: "
                     "connection refused (nothing listens on that port)")
    assert f"`ssh -p {FREE_PORT} root@{h1.address} true`" in hint
    assert "inventory.hosts[h1].address or .port or .connect_timeout in " in hint
