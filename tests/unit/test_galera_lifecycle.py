"""GaleraCluster's lifecycle failure paths, driven through ScriptedHost rules and a fake clock:
a bootstrap that never syncs, a joiner that dies, stop() with dead nodes, dead_nodes()."""

from __future__ import annotations

import pytest

from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.run import galera_cluster, mysqld
from dbmatrix.run.galera_cluster import GaleraCluster, GaleraError, NodePlan, port_block
from dbmatrix.run.mysqld import ServerError, ServerPaths


class FakeClock:
    """time.monotonic/time.sleep for the modules under test: sleeping advances the clock at once."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


STATUS = r"^mariadb .*SHOW GLOBAL STATUS LIKE"  # GaleraCluster.status (the SQL is shell-quoted)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(galera_cluster, "time", c)
    monkeypatch.setattr(mysqld, "time", c)
    return c


def node_plan(i: int) -> NodePlan:
    rundir = f"/w/run/galera/node{i}"
    paths = ServerPaths(f"/w/data/galera/node{i}", f"{rundir}/bench.sock", f"{rundir}/bench.pid",
                        f"{rundir}/bench.err", port_block(4000, i).mysql)
    return NodePlan(i, f"h{i}", f"10.0.0.{i}", port_block(4000, i), paths, rundir)


def status(state: str = "Synced", size: int = 1, cluster: str = "Primary") -> str:
    return (f"dbmatrix_clock_s\t1.0\nwsrep_local_state_comment\t{state}\nwsrep_cluster_size\t{size}\n"
            f"wsrep_cluster_status\t{cluster}\n")


def node_host(i: int) -> ScriptedHost:
    """Node i's host: mariadbd starts as pid 100+i, answers its ping, is alive and Synced alone."""
    host = ScriptedHost(f"h{i}", is_local=False, strict=True)
    pid = 100 + i
    host.on(r"^mkdir -p |^rm -f |^cat .*bench\.pid$")  # start's preparation; no orphan on the pid file
    host.on(r"^setsid nohup .*mariadbd", stdout=f"{pid}\n")
    host.on(r"mariadb-admin .* ping$")
    host.on(rf"/proc/{pid}/stat$", stdout="S\n")  # process_alive
    host.on(rf"^kill -0 {pid}$")  # mysqld's own liveness check
    host.on(STATUS, stdout=status())
    host.on(rf"^tail -n \d+ /w/run/galera/node{i}/bench\.err$", stdout=f"[Note] node{i} log tail\n")
    return host


def dies(host: ScriptedHost, pid: int) -> None:
    """From now on the process is gone (an empty /proc/<pid>/stat read, kill -0 fails)."""
    host.on(rf"/proc/{pid}/stat$", exit_code=1, stderr="No such file or directory\n")
    host.on(rf"^kill -0 {pid}$", exit_code=1)


def shuts_down(host: ScriptedHost, pid: int) -> None:
    """mariadb-admin shutdown stops the server: afterwards kill -0 fails."""
    host.on(r"mariadb-admin .* shutdown$", exit_code=lambda c: dies(host, pid) or 0)


def cluster(*hosts: ScriptedHost) -> GaleraCluster:
    n = len(hosts)
    return GaleraCluster(list(hosts), [node_plan(i) for i in range(1, n + 1)], [[] for _ in hosts],
                         [None] * n)


def test_bootstrap_that_never_reaches_synced_times_out_naming_the_node_and_its_log(clock) -> None:
    h1 = node_host(1)
    h1.on(STATUS, stdout=status("Joining", size=0, cluster="non-Primary"))
    c = cluster(h1)
    with pytest.raises(GaleraError) as ei:
        c.bootstrap(timeout_s=30)
    msg = str(ei.value)
    assert msg.startswith("node1 not synced after 30s (wsrep_local_state_comment=Joining)")
    assert "[Note] node1 log tail" in msg
    assert c.servers[0].pid == 101  # still running: the caller stops the cluster
    assert h1.count(r"SHOW GLOBAL STATUS") > 100  # it polled (every 0.2 s) until the timeout


def test_a_node_whose_client_cannot_connect_times_out_as_no_answer(clock) -> None:
    h1 = node_host(1)
    h1.on(STATUS, exit_code=1, stderr="ERROR 2002 (HY000): Can't connect to local server through socket\n")
    with pytest.raises(GaleraError, match=r"node1 not synced after 5s \(no answer \(CommandError\)\)"):
        cluster(h1).bootstrap(timeout_s=5)


def test_a_lost_connection_while_waiting_for_synced_is_not_taken_for_a_slow_node(clock) -> None:
    h1 = node_host(1)
    h1.on(STATUS, raises=EOFError("h1: connection closed"))
    with pytest.raises(EOFError, match="connection closed"):
        cluster(h1).bootstrap(timeout_s=600)
    assert clock.now < 1001  # raised at once, not after the 600 s timeout


def test_bootstrap_waits_for_synced_and_a_one_node_primary(clock) -> None:
    h1 = node_host(1)
    h1.on(STATUS, stdout=status("Joined"), times=3)
    c = cluster(h1)
    c.bootstrap(timeout_s=30)
    assert h1.count(r"SHOW GLOBAL STATUS") == 4


def test_joiner_that_dies_while_syncing_raises_naming_it_with_its_error_log(clock) -> None:
    h1, h2 = node_host(1), node_host(2)
    h1.on(STATUS, stdout=status(size=2))
    h1.on(STATUS, stdout=status(size=1), times=1)  # bootstrap (the later rule answers first)
    # node2 answers its ping (it is receiving the SST), is Joining, then its process is gone.
    h2.on(STATUS, stdout=lambda c: dies(h2, 102) or status("Joiner", size=2))
    h2.on(r"^tail -n 30 /w/run/galera/node2/bench\.err$", stdout="[ERROR] WSREP: SST failed: 32 (Broken pipe)\n")
    c = cluster(h1, h2)
    c.bootstrap(timeout_s=30)
    with pytest.raises(GaleraError) as ei:
        c.join(2, timeout_s=30)
    assert str(ei.value).startswith("node2 (pid 102) is not running; error log tail:\n")
    assert "SST failed: 32 (Broken pipe)" in str(ei.value)
    assert "node2" not in c.join_s
    assert c.dead_nodes() == ["node2"]


def test_joiner_that_dies_during_startup_raises_server_error_with_its_log(clock) -> None:
    h1, h2 = node_host(1), node_host(2)
    h2.on(r"mariadb-admin .* ping$", exit_code=1)
    dies(h2, 102)
    h2.on(r"^tail -n 30 ", stdout="[ERROR] WSREP: gcomm: connection refused\n")
    c = cluster(h1, h2)
    c.bootstrap(timeout_s=30)
    with pytest.raises(ServerError, match=r"mariadbd exited during startup; error log:\n.*connection refused"):
        c.join(2, timeout_s=30)
    assert c.servers[1].pid is None


def test_stop_forgets_dead_nodes_and_stops_the_others_last_joined_first(clock) -> None:
    h1, h2, h3 = node_host(1), node_host(2), node_host(3)
    for h, pid in ((h1, 101), (h3, 103)):
        shuts_down(h, pid)
    c = cluster(h1, h2, h3)
    for s, pid in zip(c.servers, (101, 102, 103)):
        s.pid = pid
    dies(h2, 102)
    assert c.dead_nodes() == ["node2"]
    c.stop()
    assert c.stop_errors == {}
    assert [s.pid for s in c.servers] == [None, None, None]
    assert not h2.ran(r"shutdown|kill -(TERM|KILL)")  # nothing sent to the dead node
    assert h1.count(r"shutdown$") == 1 and h3.count(r"shutdown$") == 1
    assert c.dead_nodes() == []  # stopped nodes are no longer "started"


def test_stop_records_a_failing_node_and_still_stops_the_others(clock) -> None:
    h1, h2 = node_host(1), node_host(2)
    shuts_down(h1, 101)
    h2.on(r"mariadb-admin .* shutdown$", raises=EOFError("h2: connection closed"))
    h2.on(r"^kill -KILL 102$")
    c = cluster(h1, h2)
    c.servers[0].pid, c.servers[1].pid = 101, 102
    c.stop()  # does not raise
    assert c.stop_errors == {"node2": "EOFError: h2: connection closed"}
    assert h2.ran(r"^kill -KILL 102$") and c.servers[1].pid is None
    assert h1.ran(r"shutdown$") and c.servers[0].pid is None


def test_dead_nodes_lists_only_started_nodes_whose_process_is_gone(clock) -> None:
    h1, h2, h3 = node_host(1), node_host(2), node_host(3)
    c = cluster(h1, h2, h3)
    c.servers[0].pid, c.servers[1].pid = 101, 102  # node3 never started
    assert c.dead_nodes() == []
    h1.on(r"/proc/101/stat$", stdout="Z\n")  # a zombie: killed, not reaped
    assert c.dead_nodes() == ["node1"]
    dies(h2, 102)
    assert c.dead_nodes() == ["node1", "node2"]
    assert not h3.ran(r"/proc/")
