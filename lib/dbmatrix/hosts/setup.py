"""OS packages for a host, the same code for this machine and for remote hosts.

Plan (pure) -> check what is installed -> install only what is missing (apt-get/dnf; ``sudo -n``
when not root) -> verify: every wanted package installed, its version reported.
Idempotent: when everything is present nothing is installed and no package index is refreshed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from dbmatrix.hosts.facts import package_query_command, parse_os_release, parse_package_versions
from dbmatrix.hosts.remote import CommandError, Host, as_root

# Package roles: `server` on every measured host; `paper` and `test` on the controller.
PACKAGES: dict[str, dict[str, tuple[str, ...]]] = {
    "debian": {
        "server": ("mariadb-server", "mariadb-client", "mariadb-plugin-rocksdb",
                   "mariadb-plugin-provider-lz4", "sysbench", "sysstat", "procps", "iproute2",
                   # storage media (dbmatrix.hosts.media): file systems, partitions, loop, PMEM, RAID, fio
                   "xfsprogs", "e2fsprogs", "parted", "util-linux", "fio", "ndctl", "mdadm",
                   # network block devices (medium kind nbd): the server, the FUSE client
                   "nbdkit", "libnbd-bin", "fuse3",
                   # Galera clusters (topology: galera): the provider and rsync for SST
                   "galera-4", "rsync"),
        "paper": ("latexmk", "texlive-latex-base", "texlive-latex-recommended", "texlive-latex-extra",
                  "texlive-fonts-recommended", "texlive-science", "texlive-binaries", "poppler-utils"),
        # the browser test (tests/browser): headless Chromium and its WebDriver drive JupyterLab;
        # the Slurm tests (tests/conftest_slurm.py): slurmctld, slurmd, the clients and munge
        "test": ("openssh-server", "chromium", "chromium-driver", "slurm-wlm", "munge"),
    },
    "rhel": {
        "server": ("mariadb-server", "mariadb", "mariadb-rocksdb-engine", "sysbench", "sysstat",
                   "procps-ng", "iproute",
                   "xfsprogs", "e2fsprogs", "parted", "util-linux", "fio", "ndctl", "mdadm",
                   "nbdkit", "nbdfuse", "fuse3",
                   "galera", "rsync"),
        "paper": ("latexmk", "texlive-scheme-medium", "texlive-siunitx", "poppler-utils"),
        "test": ("openssh-server", "slurm", "slurm-slurmctld", "slurm-slurmd", "munge"),
    },
}
ROLES = ("server", "paper", "test")
# Where a package does not come from the distribution's base repositories.
HINTS = {"rhel": "sysbench (and slurm for the test role) come from EPEL (dnf install epel-release) on RHEL-likes"}


class SetupError(RuntimeError):
    pass


@dataclass(frozen=True)
class SetupReport:
    host: str
    family: str
    wanted: tuple[str, ...]
    missing_before: tuple[str, ...]
    commands: tuple[str, ...]  # the install plan, exactly as run (or as it would run: dry run)
    versions: dict[str, str] = field(default_factory=dict)  # installed version of every wanted package
    root: bool = True  # False: the commands go through `sudo -n`

    @property
    def changed(self) -> bool:
        return bool(self.missing_before)

    def lines(self) -> list[str]:
        """`package version` per wanted package ("(missing)" for one not installed)."""
        return [f"{p} {self.versions.get(p, '(missing)')}" for p in self.wanted]


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
    return tuple(dict.fromkeys(p for r in roles for p in PACKAGES[family][r]))


def install_commands(family: str, missing: tuple[str, ...], *, root: bool = True) -> tuple[str, ...]:
    """The install plan for `missing` packages (empty when nothing is missing)."""
    if not missing:
        return ()
    pkgs = shlex.join(missing)
    plan: tuple[str, ...]
    if family == "debian":
        plan = ("apt-get update -qq",
                f"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {pkgs}")
    elif family == "rhel":
        plan = (f"dnf install -y {pkgs}",)
    else:
        raise SetupError(f"family: {family!r} is not allowed; allowed: {', '.join(PACKAGES)}")
    return tuple(as_root(c, root) for c in plan)


def sudo_problem(exit_code: int, stderr: str) -> str | None:
    """Why `sudo -n true` failed, in words (None when it worked)."""
    if exit_code == 0:
        return None
    if exit_code == 127:
        return "sudo is not installed"
    if "password" in stderr.lower():
        return "sudo needs a password (sudo -n refuses to prompt); allow this user NOPASSWD in sudoers"
    return f"sudo -n true failed (exit {exit_code}): {stderr.strip() or 'no message'}"


def installed_versions(host: Host, family: str, packages: tuple[str, ...]) -> dict[str, str]:
    """{package: version} of those `packages` that are installed on `host`."""
    if not packages:
        return {}
    return parse_package_versions(host.run(package_query_command(family, packages), check=False).stdout)


def missing_packages(host: Host, family: str, wanted: tuple[str, ...]) -> tuple[str, ...]:
    installed = installed_versions(host, family, wanted)
    return tuple(p for p in wanted if p not in installed)


def setup_packages(host: Host, roles: tuple[str, ...] = ("server",), dry_run: bool = False) -> SetupReport:
    """Install what `roles` need and is missing; verify every package and report its version."""
    family = os_family(parse_os_release(host.run("cat /etc/os-release").stdout))
    wanted = wanted_packages(family, roles)
    versions = installed_versions(host, family, wanted)
    missing = tuple(p for p in wanted if p not in versions)
    root = host.is_root()
    commands = install_commands(family, missing, root=root)
    if commands and not dry_run:
        if not root:
            r = host.run("sudo -n true", check=False)
            problem = sudo_problem(r.exit_code, r.stderr)
            if problem:
                raise SetupError(f"host {host.name!r}: installing {', '.join(missing)} needs root: {problem}; "
                                 "or run as root, or install them by hand")
        for cmd in commands:
            try:
                host.run(cmd, timeout=3600)
            except CommandError as exc:
                hint = f" ({HINTS[family]})" if family in HINTS else ""
                raise SetupError(f"host {host.name!r}: package installation failed{hint}: {exc}") from None
        versions = installed_versions(host, family, wanted)
        still = tuple(p for p in wanted if p not in versions)
        if still:
            raise SetupError(f"host {host.name!r}: packages still missing after install: {', '.join(still)} "
                             f"(ran: {'; '.join(commands)})")
    return SetupReport(host.name, family, wanted, missing, commands, versions, root)
