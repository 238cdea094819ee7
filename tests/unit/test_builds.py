"""Server builds (the server_build factor): inventory parsing and its errors, the paths and commands a build
implies, version checks, the factor's levels, cell ids and dataset keys, and where a build may run."""

from __future__ import annotations

import shlex

import pytest

from dbmatrix.analyse.kinds import kind_of
from dbmatrix.hosts import builds
from dbmatrix.hosts.builds import SYSTEM_BUILD, ServerBuild, parse_build, parse_builds, version_problem
from dbmatrix.hosts.facts import parse_mariadbd_version
from dbmatrix.hosts.inventory import LOCAL_BUILDS, localhost_inventory, parse_inventory
from dbmatrix.run.mysqld import ServerPaths, install_db_command, render_options
from dbmatrix.spec.experiment import Cell, SpecError, check_builds, parse_experiment
from dbmatrix.spec.factors import factor

V18 = "mariadbd  Ver 10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n"
V19 = "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n"
PKGS = ["mariadb-server-core=1:10.11.18-0+deb12u1", "mariadb-plugin-rocksdb=1:10.11.18-0+deb12u1"]
PATHS = ServerPaths.under("/w/run", "/w/data", "bench")


def _build(**raw) -> ServerBuild:
    return parse_build(raw, host="h", name="b18", workdir="/w")


def test_package_build_lives_under_the_workdir():
    b = _build(packages=PKGS, version="10.11.18")
    assert b.basedir == "/w/builds/b18/usr" and b.root == "/w/builds/b18"
    assert b.server == "/w/builds/b18/usr/sbin/mariadbd"
    assert b.plugin_dir == "/w/builds/b18/usr/lib/mysql/plugin"
    assert b.server_options() == ["--basedir=/w/builds/b18/usr", "--plugin-dir=/w/builds/b18/usr/lib/mysql/plugin",
                                  "--lc-messages-dir=/w/builds/b18/usr/share/mysql"]


def test_a_mysql_tarball_build_plans_its_own_commands():
    b = _build(basedir="/opt/greatsql-8.0/", dialect="mysql", version="8.0")
    assert b.basedir == "/opt/greatsql-8.0" and b.server == "/opt/greatsql-8.0/bin/mysqld"
    assert b.plugin_dir == "/opt/greatsql-8.0/lib/plugin"
    argv = b.install_db_argv("/d", "root")
    assert argv[:3] == ["/opt/greatsql-8.0/bin/mysqld", "--no-defaults", "--basedir=/opt/greatsql-8.0"]
    assert "--initialize-insecure" in argv and "--datadir=/d" in argv


@pytest.mark.parametrize(("name", "raw", "says"), [
    ("system", {"packages": PKGS}, "always defined"),
    ("B18", {"packages": PKGS}, "lower-case letters"),
    ("b-18", {"packages": PKGS}, "lower-case letters"),
    ("b18", "x", "must be a mapping"),
    ("b18", {"packages": PKGS, "colour": 1}, "unknown key(s) colour; allowed: basedir, packages"),
    ("b18", {"basedir": "/x", "dialect": "percona"}, "dialect: 'percona'; allowed: mariadb"),
    ("b18", {"packages": "mariadb-server-core"}, "packages: must be a list"),
    ("b18", {"packages": ["mariadb-server-core"]}, "is not name=version"),
    ("b18", {}, "needs basedir"),
    ("b18", {"basedir": "/x", "packages": PKGS}, "not both"),
    ("b18", {"basedir": "opt/x"}, "basedir: 'opt/x' must be an absolute path"),
    ("b18", {"basedir": "/x", "version": "ten"}, "version: 'ten' must be a version prefix"),
    ("b18", {"packages": PKGS, "dialect": "mysql"}, "names its unpacked tarball"),
])
def test_bad_builds_name_the_field(name, raw, says):
    with pytest.raises(SpecError) as e:
        parse_build(raw, host="h", name=name, workdir="/w")
    assert f"inventory.hosts[h].builds.{name}" in str(e.value) and says in str(e.value)


def test_every_host_has_the_system_build():
    inv = parse_inventory({"hosts": [{"name": "a"}, {"name": "b", "builds": {"b18": {"packages": PKGS}}}]})
    assert list(inv.host("a").builds) == ["system"]
    assert list(inv.host("b").builds) == ["system", "b18"]
    assert inv.host("b").builds["b18"].basedir.endswith("/builds/b18/usr")
    assert parse_builds(None, host="x", workdir="/w") == {"system": SYSTEM_BUILD}
    with pytest.raises(SpecError, match=r"inventory.hosts\[x\].builds: must be a mapping"):
        parse_builds(["b18"], host="x", workdir="/w")


def test_this_machines_inventory_offers_the_previous_point_release():
    b = localhost_inventory("/w").host("localhost").builds["mariadb10_11_18"]
    assert b.version == "10.11.18" and b.dialect == "mariadb"
    assert {p.split("=")[0] for p in b.packages} == {"mariadb-server-core", "mariadb-client-core",
                                                      "mariadb-plugin-rocksdb"}
    assert all(p.endswith("=1:10.11.18-0+deb12u1") for p in b.packages)
    assert set(LOCAL_BUILDS) == {"mariadb10_11_18"}


def test_versions_are_checked_by_prefix():
    b = _build(packages=PKGS, version="10.11.18")
    assert builds.parse_version(V18) == "10.11.18" and parse_mariadbd_version(V18) == "10.11.18-MariaDB-0+deb12u1"
    assert version_problem(b, V18, 0) is None
    assert "is version 10.11.19, the inventory says 10.11.18" in version_problem(b, V19, 0)
    assert version_problem(_build(packages=PKGS, version="10.11.1"), V18, 0) is not None  # 10.11.18 is not 10.11.1
    assert version_problem(_build(packages=PKGS, version="10.11"), V18, 0) is None
    assert "not found" in version_problem(b, "", 127) and "unpacked when a study" in version_problem(b, "", 127)
    assert "no version" in version_problem(b, "hello", 0)
    assert "dbmatrix setup" in version_problem(SYSTEM_BUILD, "", 127)


def test_unpacking_is_atomic_and_quotes_the_packages():
    cmd = builds.unpack_command(_build(packages=PKGS))
    assert "apt-get download -q " + " ".join(shlex.quote(p) for p in PKGS) in cmd
    assert cmd.index("dpkg-deb -x") < cmd.index("mv /w/builds/b18.unpack/tree /w/builds/b18")
    with pytest.raises(ValueError):
        builds.unpack_command(_build(basedir="/opt/x"))


def test_the_system_build_renders_what_the_harness_always_did():
    cell = Cell("innodb", 50, "16k", "none", "disk", 4)
    assert install_db_command(cell, "/d", "root") == install_db_command(cell, "/d", "root", SYSTEM_BUILD) == (
        "mariadb-install-db --no-defaults --datadir=/d --user=root --auth-root-authentication-method=normal "
        "--skip-test-db --skip-name-resolve --tmpdir=/d --innodb-page-size=16k")
    assert render_options(cell, PATHS, user="root", cache=1 << 20) == \
        render_options(cell, PATHS, user="root", cache=1 << 20, build=SYSTEM_BUILD)


def test_a_build_reads_its_own_tree():
    b = _build(packages=PKGS)
    cell = Cell("myrocks", 50, "16k", "none", "disk", 4, server_build="b18")
    opts = render_options(cell, PATHS, user="root", cache=1 << 20, build=b)
    assert opts[:4] == ["--no-defaults", *b.server_options()]
    assert "--plugin-load-add=ha_rocksdb.so" in opts
    install = shlex.split(install_db_command(cell, "/d", "root", b))
    assert install[:3] == ["/w/builds/b18/usr/bin/mariadb-install-db", "--no-defaults", "--basedir=/w/builds/b18/usr"]
    with pytest.raises(ValueError, match="runs server build 'b18', given 'system'"):
        render_options(cell, PATHS, user="root", cache=1 << 20)


def test_the_factor_its_ids_and_datasets():
    f = factor("server_build")
    assert f.check("mariadb10_11_18") == "mariadb10_11_18" and f.default == "system"
    for bad in ("Mariadb", "10.11", 5, ""):
        with pytest.raises(SpecError, match="factors.server_build"):
            f.check(bad)
    base = Cell("innodb", 25, "16k", "none", "disk", 8)
    other = Cell("innodb", 25, "16k", "none", "disk", 8, server_build="b18")
    assert base.cell_id == "innodb-c25-b16k-none-disk-t8" and other.cell_id == "innodb-c25-b16k-none-disk-t8-b18"
    exp = parse_experiment(_spec())
    keys = {c.server_build: exp.dataset_key(c).name for c in exp.cells()}
    assert keys == {"system": "innodb-b16k-none-oltp-2x1000", "b18": "innodb-b16k-none-oltp-2x1000-b18"}


def _spec(**over) -> dict:
    spec = {"experiment": "b", "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 1000},
            "factors": {"engine": "innodb", "cache_pct": [25, 100], "block_size": "16k", "compression": "none",
                        "medium": "disk", "threads": 8, "server_build": ["system", "b18"]},
            "repetitions": 1, "warmup_s": 1, "measure_s": 2}
    spec.update(over)
    return spec


def test_a_build_must_be_the_hosts_and_runs_standalone():
    exp = parse_experiment(_spec())
    check_builds(exp, ["system", "b18"], "h")
    with pytest.raises(SpecError, match=r"factors.server_build: 'b18' is not a build of host 'h'; its builds are: "
                                        r"system \(inventory.hosts\[h\].builds\)"):
        check_builds(exp, ["system"], "h")
    with pytest.raises(SpecError, match="standalone topology only .* galera"):
        parse_experiment(_spec(topology={"kind": "galera", "nodes": 3}))


def test_a_sweep_across_builds_is_a_builds_study():
    assert kind_of(parse_experiment(_spec())).name == "builds"
    threads = _spec()
    threads["factors"] = {**threads["factors"], "threads": [2, 8]}
    assert kind_of(parse_experiment(threads)).name == "builds"
    one = _spec()
    one["factors"] = {**one["factors"], "server_build": "system", "threads": [2, 8]}
    assert kind_of(parse_experiment(one)).name == "threads"
