"""A real mariadbd: initialise, start with rendered options, query, stop cleanly, no orphans."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.integration.factory import alive, server_in, session_workdir

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run.mysqld import MariaDBServer, ServerError, ServerPaths, install_db_command, render_options, server_user
from dbmatrix.spec.experiment import Cell

pytestmark = pytest.mark.integration


@pytest.fixture
def workdir():
    yield from session_workdir("srv")


def _server(host, workdir: Path, cell: Cell, cache: int, extra=None) -> MariaDBServer:
    return server_in(host, workdir, cell, cache, extra)


def test_start_query_variables_stop(workdir: Path):
    host = LocalHost()
    cell = Cell("innodb", 50, "4k", "none", "disk", 2)
    server = _server(host, workdir, cell, 8 * 1024 * 1024, {"innodb_flush_log_at_trx_commit": "2"})
    with server:
        pid = server.pid
        assert pid and alive(pid)
        v = server.global_variables()
        assert v["innodb_page_size"] == "4096"
        assert v["innodb_buffer_pool_size"] == str(8 * 1024 * 1024)
        assert v["innodb_buffer_pool_load_at_startup"] == "OFF"
        assert v["innodb_flush_log_at_trx_commit"] == "2"
        assert v["bind_address"] == "127.0.0.1" and v["port"] == str(server.paths.port)
        assert server.sql("SELECT 1+1").strip() == "2"
        assert "Uptime" in server.global_status()
    assert not alive(pid), "server still running after a clean stop"
    assert server.clean_shutdown is True
    assert "Shutdown complete" in Path(server.paths.error_log).read_text()


def test_bad_option_fails_with_the_error_log(workdir: Path):
    host = LocalHost()
    cell = Cell("innodb", 50, "16k", "none", "disk", 2)
    server = _server(host, workdir, cell, 16 * 1024 * 1024, {"innodb_no_such_option": "1"})
    with pytest.raises(ServerError, match="innodb-no-such-option|unknown variable"):
        server.start(timeout_s=60)
    assert server.pid is None


def test_orphan_from_a_killed_session_is_reaped(workdir: Path):
    host = LocalHost()
    cell = Cell("innodb", 50, "16k", "none", "disk", 2)
    first = _server(host, workdir, cell, 16 * 1024 * 1024)
    first.start()
    orphan = first.pid
    # A new harness process knows nothing but the pid file, as after kill -9 of the controller.
    second = MariaDBServer(host, first.paths, first.options)
    try:
        assert second.reap_orphan() is True
        assert not alive(orphan)
    finally:
        if alive(orphan):
            first.stop()


def test_no_port_means_no_tcp_and_a_taken_port_is_port_in_use(workdir: Path):
    import socket

    from dbmatrix.run.mysqld import PortInUse

    host = LocalHost()
    cell = Cell("innodb", 50, "16k", "none", "disk", 2)
    user = server_user(host)
    datadir = str(workdir / "data")
    host.run(install_db_command(cell, datadir, user), timeout=300)
    paths = ServerPaths.under(str(workdir / "run"), datadir, "t")  # no port
    with MariaDBServer(host, paths, render_options(cell, paths, user=user, cache=8 << 20)) as server:
        v = server.global_variables()
        assert v["skip_networking"] == "ON"
        listening = host.run(f"ss -Htlnp | grep 'pid={server.pid},' || true").stdout
        assert listening == "", listening
    # A port something else holds: the start fails as PortInUse (the caller may retry elsewhere).
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = ServerPaths.under(str(workdir / "run"), datadir, "t", s.getsockname()[1])
        server = MariaDBServer(host, taken, render_options(cell, taken, user=user, cache=8 << 20))
        with pytest.raises(PortInUse, match="could not bind"):
            server.start()
    assert server.pid is None


def test_kill_stop(workdir: Path):
    host = LocalHost()
    cell = Cell("innodb", 50, "16k", "none", "disk", 2)
    server = _server(host, workdir, cell, 8 * 1024 * 1024)
    server.start()
    pid = server.pid
    assert pid and alive(pid)
    server.stop(mode="kill")
    with open(f"/proc/{pid}/stat") if os.path.exists(f"/proc/{pid}/stat") else open(os.devnull) as f:
        state = f.read().rpartition(")")[2].split()[:1]
    assert state in ([], ["Z"]), "mariadbd still running after a kill stop"
    assert server.stop_mode == "kill" and server.clean_shutdown is False and server.stop_s < 2
