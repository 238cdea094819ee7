"""Tests of dbmatrix.hosts.setup: OS family, install plans (apt/dnf, root/non-root), version checks,
and setup on a simulated package database (the real one is exercised over SSH in
tests/integration/test_fleet_hosts.py)."""

from __future__ import annotations

import shlex

import pytest

from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.hosts.setup import (
    PACKAGES,
    ROLES,
    SetupError,
    as_root,
    install_commands,
    installed_versions,
    missing_packages,
    os_family,
    setup_packages,
    sudo_problem,
    wanted_packages,
)

DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'
ROCKY = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n'


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
    test = ("openssh-server", "chromium", "chromium-driver", "slurm-wlm", "munge")
    assert both == PACKAGES["debian"]["server"] + test
    assert wanted_packages("debian", ("test", "test")) == test
    assert "mariadb-rocksdb-engine" in wanted_packages("rhel", ("server",))
    assert wanted_packages("debian", ()) == ()


def test_wanted_packages_unknown_role() -> None:
    with pytest.raises(SetupError) as ei:
        wanted_packages("debian", ("server", "database"))
    msg = str(ei.value)
    assert msg.startswith("roles:") and "'database'" in msg
    assert all(r in msg for r in ROLES)


# ---------------------------------------------------------------- plans

def unwrap(command: str) -> str:
    """The command inside `sudo -n sh -c '<command>'`."""
    argv = shlex.split(command)
    assert argv[:4] == ["sudo", "-n", "sh", "-c"] and len(argv) == 5, command
    return argv[4]


def test_install_plan_apt_root() -> None:
    assert install_commands("debian", ()) == ()
    cmds = install_commands("debian", ("sysbench", "mariadb-server"))
    assert cmds == ("apt-get update -qq",
                    ("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
                     "sysbench mariadb-server"))


def test_install_plan_apt_non_root_goes_through_sudo_n() -> None:
    root = install_commands("debian", ("sysbench", "it's"))
    cmds = install_commands("debian", ("sysbench", "it's"), root=False)
    assert len(cmds) == 2
    assert [unwrap(c) for c in cmds] == list(root)  # same commands, quoted intact
    # DEBIAN_FRONTEND is set inside the root shell, not stripped by sudo's env_reset.
    assert unwrap(cmds[1]).startswith("DEBIAN_FRONTEND=noninteractive apt-get install")


def test_install_plan_dnf_root_and_non_root() -> None:
    assert install_commands("rhel", ()) == ()
    assert install_commands("rhel", ("sysbench", "fio")) == ("dnf install -y sysbench fio",)
    (cmd,) = install_commands("rhel", ("sysbench", "fio"), root=False)
    assert cmd == "sudo -n sh -c 'dnf install -y sysbench fio'"


def test_install_plan_unknown_family() -> None:
    with pytest.raises(SetupError, match="family: 'arch' is not allowed; allowed: debian, rhel"):
        install_commands("arch", ("fio",))


def test_as_root() -> None:
    assert as_root("id -u", True) == "id -u"
    assert as_root("echo 'a b'", False) == "sudo -n sh -c 'echo '\"'\"'a b'\"'\"''"
    assert unwrap(as_root("echo 'a b'", False)) == "echo 'a b'"


@pytest.mark.parametrize("code,stderr,expected", [
    (0, "", None),
    (127, "sh: 1: sudo: not found", "sudo is not installed"),
    (1, "sudo: a password is required\n", "sudo needs a password"),
    (1, "user1 is not in the sudoers file.\n", "sudo -n true failed (exit 1): user1 is not in the sudoers file."),
])
def test_sudo_problem(code: int, stderr: str, expected: str | None) -> None:
    problem = sudo_problem(code, stderr)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(expected)


# ---------------------------------------------------------------- setup on a simulated package database

def package_host(installed: set[str], *, os_release: str = DEBIAN, root: bool = True, sudo: str = "ok",
                 install_works: bool = True, install_fails: bool = False) -> ScriptedHost:
    """A strict ScriptedHost whose package database is a dict: dpkg-query/rpm read it and apt-get/dnf
    change it. `sudo` is ok | password | absent."""
    host = ScriptedHost("fake1", is_local=False, root=root, strict=True)
    db = {p: f"1.0-{p}" for p in installed}

    def dpkg_query(command: str) -> str:
        argv = shlex.split(command)
        assert argv[1:3] == ["-W", "-f=${Package}\\t${db:Status-Abbrev}\\t${Version}\\n"]
        return "".join(f"{p}\tii \t{db[p]}\n" if p in db else f"{p}\tun \t\n" for p in argv[3:])

    def rpm_query(command: str) -> str:
        argv = shlex.split(command)
        assert argv[1:4] == ["-q", "--qf", "%{NAME}\\tii\\t%{VERSION}-%{RELEASE}\\n"]
        return "".join(f"{p}\tii\t{db[p]}\n" if p in db else f"package {p} is not installed\n"
                       for p in argv[4:])

    def package_manager(command: str) -> int:
        argv = shlex.split(command)
        inner = shlex.split(unwrap(command)) if argv[0] == "sudo" else argv
        assert root == (argv[0] != "sudo"), f"root={root} but ran {command!r}"
        if inner[:2] == ["apt-get", "update"]:
            return 0
        assert "install" in inner, f"unexpected command {command!r}"
        if install_fails:
            return 1
        if install_works:
            db.update({p: f"2.0-{p}" for p in inner[inner.index("install") + 1:] if not p.startswith("-")})
        return 0

    host.on(r"^cat /etc/os-release$", stdout=os_release)
    host.on(r"^dpkg-query ", stdout=dpkg_query)
    host.on(r"^rpm ", stdout=rpm_query,
            exit_code=lambda c: 0 if all(p in db for p in shlex.split(c)[4:]) else 1)
    code, err = {"ok": (0, ""), "password": (1, "sudo: a password is required\n"),
                 "absent": (127, "sh: 1: sudo: not found\n")}[sudo]
    host.on(r"^sudo -n true$", stderr=err, exit_code=code)
    host.on(r"\b(apt-get|dnf)\b", exit_code=package_manager,
            stderr="Error: Unable to find a match: sysbench\n" if install_fails else "")
    return host


def installs(host: ScriptedHost) -> list[str]:
    return host.matching(r"apt-get|dnf")


SERVER = PACKAGES["debian"]["server"]


def test_installed_versions_and_missing() -> None:
    host = package_host({"fio", "sysbench"})
    assert installed_versions(host, "debian", ("fio", "sysbench", "mdadm")) == {
        "fio": "1.0-fio", "sysbench": "1.0-sysbench"}
    assert missing_packages(host, "debian", ("fio", "mdadm", "sysbench", "sysstat")) == ("mdadm", "sysstat")
    assert installed_versions(host, "debian", ()) == {}
    rhel = package_host({"fio"}, os_release=ROCKY)
    assert installed_versions(rhel, "rhel", ("fio", "sysbench")) == {"fio": "1.0-fio"}


def test_setup_nothing_missing_installs_nothing_and_reports_versions() -> None:
    host = package_host(set(SERVER))
    rep = setup_packages(host, ("server",))
    assert rep.host == "fake1" and rep.family == "debian" and rep.root
    assert rep.wanted == SERVER
    assert rep.missing_before == () and rep.commands == () and not rep.changed
    assert rep.versions == {p: f"1.0-{p}" for p in SERVER}
    assert rep.lines()[0] == "mariadb-server 1.0-mariadb-server"
    assert installs(host) == [] and "sudo -n true" not in host.commands


def test_setup_dry_run_shows_the_plan_and_installs_nothing() -> None:
    host = package_host(set(SERVER) - {"sysbench", "sysstat"}, root=False, sudo="password")
    rep = setup_packages(host, ("server",), dry_run=True)
    assert rep.missing_before == ("sysbench", "sysstat") and rep.changed and not rep.root
    assert rep.commands == install_commands("debian", ("sysbench", "sysstat"), root=False)
    assert "sysbench" not in rep.versions and "sysbench (missing)" in rep.lines()
    assert installs(host) == [] and "sudo -n true" not in host.commands


def test_setup_installs_missing_as_root_and_verifies_versions() -> None:
    host = package_host(set(SERVER) - {"sysbench"})
    rep = setup_packages(host, ("server",))
    assert rep.missing_before == ("sysbench",)
    assert installs(host) == list(install_commands("debian", ("sysbench",)))  # root: no sudo
    assert rep.versions["sysbench"] == "2.0-sysbench"  # read back after the install
    assert set(rep.versions) == set(SERVER)


def test_setup_uses_sudo_when_not_root() -> None:
    host = package_host(set(SERVER) - {"sysbench"}, root=False, sudo="ok")
    rep = setup_packages(host, ("server",))
    assert "sudo -n true" in host.commands
    assert installs(host) == list(install_commands("debian", ("sysbench",), root=False))
    assert rep.versions["sysbench"] == "2.0-sysbench" and not rep.root


@pytest.mark.parametrize("sudo,words", [
    ("password", ["sudo needs a password", "NOPASSWD"]),
    ("absent", ["sudo is not installed"]),
])
def test_setup_without_usable_sudo_fails_clearly(sudo: str, words: list[str]) -> None:
    host = package_host(set(SERVER) - {"sysbench"}, root=False, sudo=sudo)
    with pytest.raises(SetupError) as ei:
        setup_packages(host, ("server",))
    msg = str(ei.value)
    assert "'fake1'" in msg and "sysbench" in msg and all(w in msg for w in words)
    assert installs(host) == []


def test_setup_reports_packages_still_missing() -> None:
    host = package_host(set(SERVER) - {"sysbench", "fio"}, install_works=False)
    with pytest.raises(SetupError, match="still missing after install: sysbench, fio"):
        setup_packages(host, ("server",))


def test_setup_rhel_with_dnf() -> None:
    rhel_server = PACKAGES["rhel"]["server"]
    host = package_host(set(rhel_server) - {"sysbench"}, os_release=ROCKY, root=False)
    rep = setup_packages(host, ("server",))
    assert rep.family == "rhel"
    assert installs(host) == ["sudo -n sh -c 'dnf install -y sysbench'"]
    assert rep.versions["sysbench"] == "2.0-sysbench"


def test_setup_failed_install_names_the_host_and_the_hint() -> None:
    host = package_host(set(PACKAGES["rhel"]["server"]) - {"sysbench"}, os_release=ROCKY, install_fails=True)
    with pytest.raises(SetupError) as ei:
        setup_packages(host, ("server",))
    msg = str(ei.value)
    assert "'fake1'" in msg and "EPEL" in msg and "Unable to find a match: sysbench" in msg


def test_setup_unsupported_os() -> None:
    host = package_host(set(), os_release='ID=alpine\nPRETTY_NAME="Alpine Linux v3.19"\n')
    with pytest.raises(SetupError, match="Alpine"):
        setup_packages(host, ("server",), dry_run=True)
