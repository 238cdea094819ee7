"""Server builds: which server binary a cell runs (the ``server_build`` factor), declared per host.

A host always has the build ``system``: the server its package manager installed, found on ``PATH``. An
inventory adds others under ``builds:``, each a tree with the server, its install script, plugins and
messages (``basedir``: ``sbin/mariadbd``, ``bin/mariadb-install-db``, ``lib/mysql/plugin``, ``share/mysql``,
as a Debian package tree or a MariaDB binary tarball lays them out):

.. code-block:: yaml

    builds:
      mariadb10_11_18:                       # a level of factors.server_build
        packages: [mariadb-server-core=1:10.11.18-0+deb12u1, ...]   # apt-get download + dpkg-deb -x
        version: "10.11.18"                  # what `mariadbd --version` must say (a prefix), checked at plan time
      greatsql80:
        basedir: /opt/greatsql-8.0.32/       # an unpacked tarball already on the host
        dialect: mysql                       # bin/mysqld, mysqld --initialize-insecure
        version: "8.0.32"

Pure here: parsing (errors name the field and the allowed values), the paths and commands a build implies,
and the version check of ``--version`` output. :func:`ensure` (the host side) unpacks a build's packages once
(idempotent: a tree whose server reports the declared version is kept) and verifies it.

The ``mysql`` dialect (MySQL 5.7/8.0, Percona Server, GreatSQL) is planned, not exercised on this machine
(no such build here): its server is ``bin/mysqld`` and its datadir is made by ``mysqld --initialize-insecure``;
whatever option the harness renders that such a server refuses is named at plan time by the same check that
judges the spec's server options (:mod:`dbmatrix.run.preflight`), before any run.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from dbmatrix.hosts.facts import parse_mariadbd_version
from dbmatrix.hosts.remote import Host
from dbmatrix.hosts.server_options import PRELUDE
from dbmatrix.spec.errors import SpecError

SYSTEM = "system"  # the host's installed server: the server_build factor's default level
DIALECTS = ("mariadb", "mysql")
BUILD_KEYS = ("basedir", "packages", "dialect", "version", "description")
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]*=[A-Za-z0-9.+~:-]+\Z")
_VERSION = re.compile(r"\d+(\.\d+)*\Z")


@dataclass(frozen=True)
class ServerBuild:
    """One server build on one host; ``basedir`` None is the system's server on PATH."""

    name: str
    basedir: str | None = None
    dialect: str = "mariadb"
    version: str | None = None  # the version prefix its --version must report ("10.11.18"); None: any
    packages: tuple[str, ...] = ()  # Debian packages (name=version) unpacked under root (basedir = root/usr)
    description: str = ""

    @property
    def is_system(self) -> bool:
        return self.basedir is None

    @property
    def root(self) -> str | None:
        """Where packages are unpacked (basedir's parent for a package tree); None without packages."""
        return self.basedir.removesuffix("/usr") if self.packages and self.basedir else None

    @property
    def server(self) -> str:
        """The server binary: a name on PATH for the system build, else its path in the tree."""
        daemon = "mariadbd" if self.dialect == "mariadb" else "mysqld"
        if self.basedir is None:
            return daemon
        return f"{self.basedir}/{'sbin' if self.dialect == 'mariadb' else 'bin'}/{daemon}"

    @property
    def plugin_dir(self) -> str | None:
        return None if self.basedir is None else f"{self.basedir}/lib/mysql/plugin" if self.dialect == "mariadb" \
            else f"{self.basedir}/lib/plugin"

    def server_options(self) -> list[str]:
        """Options that make the server read its own tree (none for the system build): after --no-defaults."""
        if self.basedir is None:
            return []
        msgs = f"{self.basedir}/share/mysql" if self.dialect == "mariadb" else f"{self.basedir}/share"
        return [f"--basedir={self.basedir}", f"--plugin-dir={self.plugin_dir}", f"--lc-messages-dir={msgs}"]

    def install_db_argv(self, datadir: str, user: str) -> list[str]:
        """The command that makes an empty datadir with this build's system tables (before the engine's own
        options, which the caller appends)."""
        if self.dialect == "mysql":
            return [self.server, "--no-defaults", *self.server_options(), "--initialize-insecure",
                    f"--datadir={datadir}", f"--user={user}"]
        script = "mariadb-install-db" if self.basedir is None else f"{self.basedir}/bin/mariadb-install-db"
        base = [] if self.basedir is None else [f"--basedir={self.basedir}"]
        return [script, "--no-defaults", *base, f"--datadir={datadir}", f"--user={user}",
                "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["packages"] = list(self.packages)
        return d


SYSTEM_BUILD = ServerBuild(SYSTEM, description="the host's installed server (on PATH)")


def parse_build(raw: Any, *, host: str, name: str, workdir: str) -> ServerBuild:
    """One inventory build; errors name ``inventory.hosts[<host>].builds.<name>.<field>``."""
    where = f"inventory.hosts[{host}].builds.{name}"
    _check_name(where, name)
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: must be a mapping with basedir or packages; allowed keys: {', '.join(BUILD_KEYS)}")
    unknown = sorted(set(raw) - set(BUILD_KEYS))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(BUILD_KEYS)}")
    dialect = raw.get("dialect", "mariadb")
    if dialect not in DIALECTS:
        raise SpecError(f"{where}.dialect: {dialect!r}; allowed: mariadb (MariaDB: sbin/mariadbd, "
                        "mariadb-install-db) or mysql (MySQL 5.7/8.0, Percona Server, GreatSQL: bin/mysqld, "
                        "mysqld --initialize-insecure)")
    packages = _packages(where, raw.get("packages"), str(dialect))
    basedir = _basedir(where, raw.get("basedir"), packages, f"{workdir}/builds/{name}")
    version = raw.get("version")
    if version is not None:
        version = str(version)
        if not _VERSION.match(version):
            raise SpecError(f"{where}.version: {version!r} must be a version prefix such as 10.11.18 or 8.0")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{where}.description: must be a string")
    return ServerBuild(name, basedir, str(dialect), version, packages, description)


def _check_name(where: str, name: str) -> None:
    if name == SYSTEM:
        raise SpecError(f"{where}: {SYSTEM!r} is the host's installed server, always defined; give the build "
                        "another name")
    if not _NAME.match(name):
        raise SpecError(f"{where}: the name must be lower-case letters, digits and '_', starting with a letter "
                        "(it is a level of factors.server_build and part of run ids), e.g. mariadb10_11_18")


def _packages(where: str, raw: Any, dialect: str) -> tuple[str, ...]:
    packages = raw or []
    if isinstance(packages, str) or not isinstance(packages, list):
        raise SpecError(f"{where}.packages: must be a list of Debian packages as name=version")
    for p in packages:
        if not isinstance(p, str) or not _PACKAGE.match(p):
            raise SpecError(f"{where}.packages: {p!r} is not name=version (e.g. "
                            "mariadb-server-core=1:10.11.18-0+deb12u1)")
    if packages and dialect != "mariadb":
        raise SpecError(f"{where}.packages: Debian packages lay out a MariaDB tree; a {dialect} build names its "
                        "unpacked tarball as basedir")
    return tuple(packages)


def _basedir(where: str, basedir: Any, packages: tuple[str, ...], root: str) -> str:
    """The build's tree: the given basedir, or ``<root>/usr`` where its packages are unpacked."""
    if basedir is None and not packages:
        raise SpecError(f"{where}: needs basedir (the unpacked server tree on the host) or packages "
                        "(Debian packages to unpack under the workdir)")
    if basedir is not None and packages:
        raise SpecError(f"{where}: give basedir or packages, not both (packages are unpacked under {root})")
    if basedir is None:
        return f"{root}/usr"
    if not isinstance(basedir, str) or not basedir.startswith("/"):
        raise SpecError(f"{where}.basedir: {basedir!r} must be an absolute path on the host")
    return basedir.rstrip("/") or "/"


def parse_builds(raw: Any, *, host: str, workdir: str) -> dict[str, ServerBuild]:
    """The host's builds, ``system`` first (always there)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise SpecError(f"inventory.hosts[{host}].builds: must be a mapping of build name to recipe")
    out = {SYSTEM: SYSTEM_BUILD}
    out.update({str(n): parse_build(r, host=host, name=str(n), workdir=workdir) for n, r in raw.items()})
    return out


def build_line(build: ServerBuild) -> str:
    """A build in one line for the plan: its name and where its server comes from."""
    if build.is_system:
        return f"{build.name} (the installed server on PATH)"
    source = (f"packages {', '.join(build.packages)} unpacked under {build.root}" if build.packages
              else f"basedir {build.basedir}")
    version = f"version {build.version}, " if build.version else ""
    return f"{build.name} ({build.dialect} {version}{build.server}; {source})"


# ---------------------------------------------------------------- versions (pure)

def parse_version(text: str) -> str | None:
    """``mariadbd  Ver 10.11.18-MariaDB-0+deb12u1 for ...`` / ``mysqld  Ver 8.0.32 for ...`` -> 10.11.18: the
    numeric prefix of the version word (:func:`dbmatrix.hosts.facts.parse_mariadbd_version`)."""
    m = re.match(r"\d+(?:\.\d+)*", parse_mariadbd_version(text) or "")
    return m.group(0) if m else None


def version_problem(build: ServerBuild, text: str, rc: int) -> str | None:
    """What is wrong with a build's ``--version`` answer, or None."""
    if rc == 127 or (rc != 0 and not text.strip()):
        fix = ("`dbmatrix setup --roles server` installs it" if build.is_system else
               "its packages are unpacked when a study that uses it starts" if build.packages else
               f"unpack the build so that {build.server} exists")
        return f"server build {build.name}: {build.server} not found ({fix})"
    v = parse_version(text)
    if v is None:
        return f"server build {build.name}: {build.server} --version said {text.strip()[:120]!r}, no version"
    if build.version is not None and not (v == build.version or v.startswith(build.version + ".")):
        return (f"server build {build.name}: {build.server} is version {v}, the inventory says {build.version} "
                "(inventory.hosts[...].builds." + build.name + ".version)")
    return None


# ---------------------------------------------------------------- the host side

def unpack_command(build: ServerBuild) -> str:
    """Download the build's packages and unpack them under its root, atomically (a half-unpacked tree is never
    taken for a build: the tree appears by one rename)."""
    root = build.root
    if root is None:
        raise ValueError(f"server build {build.name}: no packages to unpack")
    q = shlex.quote
    tmp = f"{root}.unpack"
    return (f"rm -rf {q(tmp)} && mkdir -p {q(tmp)}/debs && cd {q(tmp)}/debs && "
            f"apt-get download -q {' '.join(q(p) for p in build.packages)} && "
            f"for f in *.deb; do dpkg-deb -x \"$f\" {q(tmp)}/tree || exit 1; done && "
            f"rm -rf {q(root)} && mv {q(tmp)}/tree {q(root)} && rm -rf {q(tmp)}")


@dataclass(frozen=True)
class BuildState:
    """What a build on a host was found to be (recorded with each run)."""

    name: str
    server: str
    version: str  # the whole --version word
    basedir: str | None
    dialect: str
    unpacked: bool = False  # whether this ensure unpacked its packages

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ensure(host: Host, build: ServerBuild) -> BuildState:
    """The build ready on the host: a package build is unpacked when its server is missing or reports another
    version; then its --version is checked. Raises RuntimeError naming the build and what to do."""
    check = f"{PRELUDE}; {shlex.quote(build.server)} --version"  # the system's server is in an sbin directory
    r = host.run(check, check=False, timeout=60)
    problem = version_problem(build, r.stdout, r.exit_code)
    unpacked = False
    if problem is not None and build.packages:
        if not host.run("command -v apt-get && command -v dpkg-deb", check=False).ok:
            raise RuntimeError(f"server build {build.name}: its packages need apt-get and dpkg-deb (Debian); on "
                               "other systems name an unpacked tree as basedir")
        u = host.run(unpack_command(build), check=False, timeout=1800)
        if not u.ok:
            raise RuntimeError(f"server build {build.name}: unpacking {', '.join(build.packages)} failed: "
                               f"{(u.stderr or u.stdout).strip()[-400:]}")
        unpacked = True
        r = host.run(check, check=False, timeout=60)
        problem = version_problem(build, r.stdout, r.exit_code)
    if problem is not None:
        raise RuntimeError(problem)
    version = parse_mariadbd_version(r.stdout) or "?"
    return BuildState(build.name, build.server, version, build.basedir, build.dialect, unpacked)
