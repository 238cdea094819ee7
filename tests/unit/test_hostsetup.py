"""Tests of dbmatrix.hostsetup: OS family, package plans, dpkg parsing, and setup on a fake host."""

from __future__ import annotations

import os
import re
import shlex

import pytest

from dbmatrix.hostsetup import (
    PACKAGES,
    ROLES,
    SetupError,
    install_commands,
    os_family,
    parse_dpkg_status,
    setup_packages,
    wanted_packages,
)
from dbmatrix.remote import CommandResult, Host

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'


@pytest.mark.parametrize("rel,family", [
    ({"ID": "debian"}, "debian"),
    ({"ID": "ubuntu", "ID_LIKE": "debian"}, "debian"),
    ({"ID": "linuxmint", "ID_LIKE": "ubuntu debian"}, "debian"),
    ({"ID": "rocky", "ID_LIKE": "rhel centos fedora"}, "rhel"),
    ({"ID": "almalinux", "ID_LIKE": "rhel centos fedora"}, "rhel"),
    ({"ID": "fedora"}, "rhel"),
    ({"ID": "ol", "ID_LIKE": "fedora"}, "rhel"),
])
def test_os_family(rel: dict[str, str], family: str) -> None:
    assert os_family(rel) == family


def test_os_family_unsupported_names_the_supported_families() -> None:
    with pytest.raises(SetupError) as ei:
        os_family({"ID": "alpine", "PRETTY_NAME": "Alpine Linux v3.19"})
    msg = str(ei.value)
    assert "Alpine Linux v3.19" in msg
    assert "debian" in msg and "rhel" in msg
    with pytest.raises(SetupError, match=r"\(unknown\)"):
        os_family({})


def test_wanted_packages() -> None:
    assert wanted_packages("debian", ("server",)) == PACKAGES["debian"]["server"]
    both = wanted_packages("debian", ("server", "test"))
    assert both == PACKAGES["debian"]["server"] + ("openssh-server",)
    assert "mariadb-plugin-rocksdb" in both and "sysbench" in both
    assert "mariadb-rocksdb-engine" in wanted_packages("rhel", ("server",))
    assert wanted_packages("debian", ()) == ()


def test_wanted_packages_unknown_role() -> None:
    with pytest.raises(SetupError) as ei:
        wanted_packages("debian", ("server", "database"))
    msg = str(ei.value)
    assert msg.startswith("roles:") and "'database'" in msg
    assert all(r in msg for r in ROLES)


def test_parse_dpkg_status() -> None:
    text = ("mariadb-server ii \n"
            "sysbench ii \n"
            "mariadb-plugin-rocksdb rc \n"  # removed, config files remain: not installed
            "sysstat un \n"  # known but not installed
            "procps iU \n"  # unpacked, not configured
            "iproute2 iF \n"
            "\n"
            "garbage\n")
    assert parse_dpkg_status(text) == {"mariadb-server", "sysbench"}
    assert parse_dpkg_status("") == set()


def test_install_commands() -> None:
    assert install_commands("debian", ()) == ()
    assert install_commands("rhel", ()) == ()
    cmds = install_commands("debian", ("sysbench", "mariadb-server"))
    assert cmds[0] == "apt-get update -qq"
    assert len(cmds) == 2
    assert "apt-get install -y" in cmds[1] and "DEBIAN_FRONTEND=noninteractive" in cmds[1]
    assert cmds[1].endswith("sysbench mariadb-server")
    assert install_commands("rhel", ("sysbench",)) == ("dnf install -y sysbench",)


class FakeHost(Host):
    """A Debian host whose `dpkg-query` reflects an in-memory package set, and apt-get changes it."""

    is_local = False

    def __init__(self, installed: set[str], *, root: bool = True, sudo: bool = False,
                 os_release: str = DEBIAN, install_works: bool = True):
        self.name = "fake1"
        self.installed = set(installed)
        self.root = root
        self.sudo = sudo
        self.os_release = os_release
        self.install_works = install_works
        self.commands: list[str] = []

    def run(self, command: str, *, check: bool = True, timeout: float | None = None,
            env: dict[str, str] | None = None) -> CommandResult:
        self.commands.append(command)
        out, code = "", 0
        if command == "cat /etc/os-release":
            out = self.os_release
        elif command.startswith("dpkg-query"):
            names = shlex.split(command)[3:]
            out = "".join(f"{n} {'ii' if n in self.installed else 'un'} \n" for n in names)
        elif command == "id -u":
            out = "0\n" if self.root else "1000\n"
        elif command == "sudo -n true":
            code = 0 if self.sudo else 1
        elif "apt-get install" in command:
            if self.install_works:
                pkgs = shlex.split(re.sub(r"^sudo -n sh -c ", "", command))
                if len(pkgs) == 1:  # unwrap `sudo -n sh -c '<cmd>'`
                    pkgs = shlex.split(pkgs[0])
                self.installed |= {p for p in pkgs if not p.startswith("-") and "=" not in p
                                   and p not in ("apt-get", "install")}
        elif command.startswith(("apt-get update", "sudo -n sh -c 'apt-get update")):
            pass
        else:
            raise AssertionError(f"unexpected command {command!r}")
        return CommandResult(command, out, "", code, 0.0)

    def put(self, local: str | os.PathLike[str], remote: str) -> None:
        raise AssertionError("no copies expected")

    def get(self, remote: str, local: str | os.PathLike[str]) -> None:
        raise AssertionError("no copies expected")

    def installs(self) -> list[str]:
        return [c for c in self.commands if "apt-get" in c]


SERVER = PACKAGES["debian"]["server"]


def test_setup_nothing_missing_runs_no_install() -> None:
    host = FakeHost(set(SERVER))
    rep = setup_packages(host, ("server",))
    assert rep.host == "fake1" and rep.family == "debian"
    assert rep.wanted == SERVER
    assert rep.missing_before == () and rep.commands == ()
    assert not rep.changed
    assert host.installs() == []
    assert "sudo -n true" not in host.commands


def test_setup_dry_run_lists_missing_and_installs_nothing() -> None:
    host = FakeHost(set(SERVER) - {"sysbench", "sysstat"})
    rep = setup_packages(host, ("server",), dry_run=True)
    assert rep.missing_before == ("sysbench", "sysstat")
    assert rep.changed
    assert rep.commands == install_commands("debian", ("sysbench", "sysstat"))
    assert host.installs() == []
    assert "sysbench" not in host.installed


def test_setup_installs_missing_as_root_and_verifies() -> None:
    host = FakeHost(set(SERVER) - {"sysbench"})
    rep = setup_packages(host, ("server",))
    assert rep.missing_before == ("sysbench",)
    assert host.installs() == list(install_commands("debian", ("sysbench",)))  # root: no sudo wrapper
    assert "sysbench" in host.installed


def test_setup_uses_sudo_when_not_root() -> None:
    host = FakeHost(set(SERVER) - {"sysbench"}, root=False, sudo=True)
    setup_packages(host, ("server",))
    assert host.installs() and all(c.startswith("sudo -n sh -c ") for c in host.installs())
    assert "sysbench" in host.installed


def test_setup_without_root_or_sudo_fails_clearly() -> None:
    host = FakeHost(set(SERVER) - {"sysbench"}, root=False, sudo=False)
    with pytest.raises(SetupError) as ei:
        setup_packages(host, ("server",))
    assert "'fake1'" in str(ei.value) and "sysbench" in str(ei.value) and "sudo" in str(ei.value)
    assert host.installs() == []


def test_setup_reports_packages_still_missing() -> None:
    host = FakeHost(set(SERVER) - {"sysbench"}, install_works=False)
    with pytest.raises(SetupError, match="still missing after install: sysbench"):
        setup_packages(host, ("server",))


def test_setup_unsupported_os() -> None:
    host = FakeHost(set(), os_release='ID=alpine\nPRETTY_NAME="Alpine Linux v3.19"\n')
    with pytest.raises(SetupError, match="Alpine"):
        setup_packages(host, ("server",), dry_run=True)
