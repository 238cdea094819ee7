"""OS packages for a host, the same code for this machine and for remote hosts.

Plan (pure) -> check what is missing -> install only that (apt-get/dnf; sudo when not root) -> verify.
Idempotent: when everything is present nothing is installed and no package index is refreshed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .hostinfo import parse_os_release
from .remote import Host

# Package roles: `server` on every measured host; `paper` and `test` on the controller.
PACKAGES: dict[str, dict[str, tuple[str, ...]]] = {
    "debian": {
        "server": ("mariadb-server", "mariadb-client", "mariadb-plugin-rocksdb",
                   "mariadb-plugin-provider-lz4", "sysbench", "sysstat", "procps", "iproute2",
                   # storage media (dbmatrix.media): file systems, partitions, loop, PMEM, RAID, fio
                   "xfsprogs", "e2fsprogs", "parted", "util-linux", "fio", "ndctl", "mdadm"),
        "paper": ("latexmk", "texlive-latex-base", "texlive-latex-recommended", "texlive-latex-extra",
                  "texlive-fonts-recommended", "texlive-science", "poppler-utils"),
        "test": ("openssh-server",),
    },
    "rhel": {
        "server": ("mariadb-server", "mariadb", "mariadb-rocksdb-engine", "sysbench", "sysstat",
                   "procps-ng", "iproute",
                   "xfsprogs", "e2fsprogs", "parted", "util-linux", "fio", "ndctl", "mdadm"),
        "paper": ("latexmk", "texlive-scheme-medium", "texlive-siunitx", "poppler-utils"),
        "test": ("openssh-server",),
    },
}
ROLES = ("server", "paper", "test")


class SetupError(RuntimeError):
    pass


@dataclass(frozen=True)
class SetupReport:
    host: str
    family: str
    wanted: tuple[str, ...]
    missing_before: tuple[str, ...]
    commands: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.missing_before)


def os_family(os_release: dict[str, str]) -> str:
    ids = {os_release.get("ID", "")} | set(os_release.get("ID_LIKE", "").split())
    if ids & {"debian", "ubuntu"}:
        return "debian"
    if ids & {"rhel", "fedora", "centos", "rocky", "almalinux"}:
        return "rhel"
    raise SetupError(
        f"unsupported operating system {os_release.get('PRETTY_NAME') or os_release.get('ID') or '(unknown)'}: "
        f"dbmatrix knows how to install packages on {', '.join(PACKAGES)}-family systems; install "
        f"MariaDB (with the RocksDB and lz4 provider plugins), sysbench and sysstat by hand"
    )


def wanted_packages(family: str, roles: tuple[str, ...]) -> tuple[str, ...]:
    for r in roles:
        if r not in ROLES:
            raise SetupError(f"roles: unknown role {r!r}; allowed: {', '.join(ROLES)}")
    return tuple(p for r in roles for p in PACKAGES[family][r])


def parse_dpkg_status(text: str) -> set[str]:
    """Installed packages from `dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n'`."""
    out = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith("ii"):
            out.add(parts[0])
    return out


def install_commands(family: str, missing: tuple[str, ...]) -> tuple[str, ...]:
    if not missing:
        return ()
    pkgs = shlex.join(missing)
    if family == "debian":
        return ("apt-get update -qq",
                f"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {pkgs}")
    return (f"dnf install -y {pkgs}",)


def missing_packages(host: Host, family: str, wanted: tuple[str, ...]) -> tuple[str, ...]:
    if family == "debian":
        cmd = "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' " + shlex.join(wanted)
        installed = parse_dpkg_status(host.run(cmd, check=False).stdout)
    else:
        installed = {p for p in wanted if host.run(f"rpm -q {shlex.quote(p)}", check=False).ok}
    return tuple(p for p in wanted if p not in installed)


def setup_packages(host: Host, roles: tuple[str, ...] = ("server",), dry_run: bool = False) -> SetupReport:
    family = os_family(parse_os_release(host.run("cat /etc/os-release").stdout))
    wanted = wanted_packages(family, roles)
    missing = missing_packages(host, family, wanted)
    commands = install_commands(family, missing)
    if commands and not dry_run:
        if not host.is_root() and not host.run("sudo -n true", check=False).ok:
            raise SetupError(f"host {host.name!r}: installing {', '.join(missing)} needs root or "
                             "passwordless sudo; run as root or install them by hand")
        for cmd in commands:
            host.run(host.privileged(cmd), timeout=3600)
        still = missing_packages(host, family, wanted)
        if still:
            raise SetupError(f"host {host.name!r}: packages still missing after install: {', '.join(still)}")
    return SetupReport(host.name, family, wanted, missing, commands)
