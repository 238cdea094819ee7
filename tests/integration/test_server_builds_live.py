"""Two real server builds: Debian 12's MariaDB 10.11.18, unpacked from the archive's packages under the workdir
(the localhost inventory's mariadb10_11_18), and the installed 10.11.19. Unpacked once, its version checked;
each build's own server, install script and MyRocks plugin; the plan's option check asks both builds; a tiny
study across the builds runs both, each with its own dataset, and records which server ran."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from tests.integration.factory import session_workdir, study_from

from dbmatrix.hosts import builds
from dbmatrix.hosts.inventory import localhost_inventory
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run.matrix import run_study
from dbmatrix.run.mysqld import MariaDBServer, ServerPaths, install_db_command, render_options, server_user
from dbmatrix.run.preflight import check_host
from dbmatrix.spec.experiment import Cell, SpecError
from dbmatrix.store import ResultStore

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None,
                                 reason="the build's packages come from Debian's archive")]

NAME = "mariadb10_11_18"
SPEC = {
    "experiment": "it-builds",
    "workload": {"name": "oltp_read_write", "tables": 1, "table_size": 2000},
    "factors": {"engine": "innodb", "cache_pct": 50, "threads": 2, "server_build": ["system", NAME]},
    "repetitions": 1, "seed": 5, "warmup_s": 1, "measure_s": 2,
    "server_options": {"innodb_flush_log_at_trx_commit": 2},
}


@pytest.fixture(scope="module")
def build() -> builds.ServerBuild:
    """The previous point release, unpacked under this session's workdir."""
    return localhost_inventory(os.environ["DBMATRIX_WORKDIR"]).host("localhost").builds[NAME]


@pytest.fixture(scope="module")
def unpacked(build):
    host = LocalHost()
    first = builds.ensure(host, build)
    second = builds.ensure(host, build)
    return first, second


@pytest.fixture
def workdir():
    yield from session_workdir("server-builds")  # not "builds": the builds live in <workdir>/builds


def test_unpacked_once_and_its_version_checked(build, unpacked):
    first, second = unpacked
    assert first.version.startswith("10.11.18-MariaDB") and second.version == first.version
    assert second.unpacked is False  # a tree whose server reports the declared version is kept
    assert Path(build.server).is_file() and Path(build.plugin_dir, "ha_rocksdb.so").is_file()
    assert not Path(f"{build.root}.unpack").exists()
    with pytest.raises(RuntimeError, match=f"server build {NAME}: .* is version 10.11.18, the inventory says 10.11.17"):
        builds.ensure(LocalHost(), replace(build, version="10.11.17", packages=()))
    missing = builds.ServerBuild("gone", basedir="/nonexistent/usr")
    with pytest.raises(RuntimeError, match="server build gone: /nonexistent/usr/sbin/mariadbd not found"):
        builds.ensure(LocalHost(), missing)


def test_each_build_runs_its_own_server_and_plugin(build, unpacked, workdir: Path):
    host = LocalHost()
    user = server_user(host)
    for engine in ("innodb", "myrocks"):
        cell = Cell(engine, 50, "16k", "none", "disk", 2, server_build=NAME)
        datadir = workdir / f"data-{engine}"
        host.run(install_db_command(cell, str(datadir), user, build), timeout=300)
        paths = ServerPaths.under(str(workdir / "run"), str(datadir), f"b-{engine}")
        options = render_options(cell, paths, user=user, cache=16 << 20, build=build)
        with MariaDBServer(host, paths, options, binary=build.server) as server:
            assert server.sql("SELECT VERSION()").strip().startswith("10.11.18-MariaDB")
            assert server.sql("SELECT @@plugin_dir").strip().rstrip("/") == build.plugin_dir
            assert os.readlink(f"/proc/{server.pid}/exe") == build.server
            if engine == "myrocks":
                assert server.sql("SELECT PLUGIN_STATUS FROM information_schema.PLUGINS "
                                  "WHERE PLUGIN_NAME = 'ROCKSDB'").strip() == "ACTIVE"
                server.sql("CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY) ENGINE=ROCKSDB; "
                           "INSERT INTO d.t VALUES (1)")


def test_the_plan_asks_every_build(tmp_path, unpacked):
    study = study_from(tmp_path, SPEC)
    hs = study.inventory.host("localhost")
    with hs.connect() as host:
        checked = check_host(host, hs, study.experiment)
    assert checked.missing == {}  # this machine is set up: sysbench, the collectors, the medium's tools
    assert checked.version is not None and "10.11.19-MariaDB" in checked.version and checked.version.endswith(
        f"10.11.18-MariaDB-0+deb12u1 ({NAME})")
    bad = study_from(tmp_path / "bad", {**SPEC, "server_options": {"innodb_flush_log_at_trx_comit": 2}})
    with hs.connect() as host, pytest.raises(SpecError, match="innodb_flush_log_at_trx_comit: not an option of "
                                                               f"mariadbd 10.11.18-MariaDB-0\\+deb12u1 \\({NAME}\\)"):
        check_host(host, hs, bad.experiment)


def test_a_study_across_builds_runs_both(tmp_path, unpacked):
    study = study_from(tmp_path, SPEC)
    counts = run_study(study, progress=False)
    assert counts.planned == 2 and counts.ok == 2, counts
    store: ResultStore = study.store
    by_build = {m.cell["server_build"]: m for m in store.records()}
    assert by_build["system"].versions["mariadb"].startswith("10.11.19")
    assert by_build[NAME].versions["mariadb"].startswith("10.11.18")
    assert f"/builds/{NAME}/usr/sbin/mariadbd" in by_build[NAME].server["command"]
    assert "/builds/" not in by_build["system"].server["command"]
    assert by_build[NAME].server["build"]["name"] == NAME and by_build["system"].server["build"]["basedir"] is None
    assert by_build[NAME].dataset["key"].endswith(f"-{NAME}") and not by_build["system"].dataset["key"].endswith(NAME)
    for m in by_build.values():
        variables = (store.raw / m.run_id / "variables.tsv").read_text()
        assert ("10.11.18" in variables) == (m.cell["server_build"] == NAME)
