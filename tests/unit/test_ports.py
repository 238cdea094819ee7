"""Port leases (pure parts, and the compare-and-set scripts run by a real sh on a temporary lease
directory), bind-failure detection, the standalone server without TCP, the stop modes and the guard's script."""

from __future__ import annotations

import subprocess

import pytest

from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.run import guard, ports
from dbmatrix.run.mysqld import MariaDBServer, ServerError, ServerPaths, kill_command, render_options
from dbmatrix.spec.experiment import Cell, SpecError, parse_experiment

STAT = "4242 (my (odd) comm) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615"
BIND_LOG = ("2026-11-23 13:01:02 0 [ERROR] Can't start server: Bind on TCP/IP port. Got error: 98: "
            "Address already in use\n2026-11-23 13:01:02 0 [ERROR] Do you already have another server running "
            "on port: 13306 ?\n")
GCOMM_LOG = ("2026-11-23 13:01:02 0 [ERROR] WSREP: failed to open gcomm backend connection: 98: "
             "error while trying to listen 'tcp://127.0.0.1:13307?socket.non_blocking=1', asio error "
             "'bind: Address already in use': 98 (Address already in use)\n")


def test_proc_start_time_counts_fields_after_the_last_parenthesis() -> None:
    assert ports.proc_start_time(STAT) == "987654"
    assert ports.proc_start_time("garbage") is None
    assert ports.proc_start_time("1 (x) S 1 2") is None


def test_parse_owner() -> None:
    assert ports.parse_owner("4242 987654\n") == ports.Owner(4242, "987654")
    assert ports.parse_owner("4242 987654 extra") == ports.Owner(4242, "987654")
    for bad in ("", "4242", "abc 1", "1 x"):
        assert ports.parse_owner(bad) is None


@pytest.mark.parametrize(("content", "now", "stale"), [
    ("4242 987654", "987654", False),  # owner alive
    ("4242 987654", None, True),  # no such process
    ("4242 987654", "999999", True),  # the pid was reused by a newer process
    ("garbage", "987654", True),  # not a lease
])
def test_stale_lease_detection(content: str, now: str | None, stale: bool) -> None:
    assert ports.Lease(13306, content, now).stale is stale


def test_parse_survey() -> None:
    text = ("LISTEN 0 80 127.0.0.1:13306 0.0.0.0:*\n"
            f"lease 13310\t4242 987654\t{STAT}\n"
            "lease 13311\t4243 5\t\n"
            "lease 13312.999\tpartial\t\n")
    listening, leases = ports.parse_survey(text)
    assert listening == {13306}
    assert set(leases) == {13310, 13311}
    assert not leases[13310].stale and leases[13311].stale


def test_pick_block_skips_listening_live_leases_and_skipped_ports() -> None:
    live = ports.Lease(13310, "1 5", "5")
    stale = ports.Lease(13320, "2 5", None)
    survey = ({13306}, {13310: live, 13320: stale})
    assert ports.pick_block(13300, 4, [survey]) == 13300
    assert ports.pick_block(13304, 4, [survey]) == 13311  # 13306 listens, 13310 is leased by a live owner
    assert ports.pick_block(13318, 4, [survey]) == 13318  # a stale lease is free
    assert ports.pick_block(13300, 4, [survey], skip=set(range(13300, 13304))) == 13311
    # every host must have the block free
    assert ports.pick_block(13300, 4, [survey, ({13301}, {})]) == 13302
    with pytest.raises(ports.PortError, match="no block of 4 free ports"):
        ports.pick_block(13300, 4, [({*range(13300, 13400)}, {})], span=50)


def _sh(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True)


def test_claim_is_a_compare_and_set(tmp_path) -> None:
    d = str(tmp_path / "leases")
    assert _sh(ports.claim_script({20000: "", 20001: ""}, "1 10", d)).returncode == 0
    assert (tmp_path / "leases" / "20000").read_text() == "1 10\n"
    # A second claimant that saw the ports free before the first claim loses, and writes nothing.
    r = _sh(ports.claim_script({20001: "", 20002: ""}, "2 20", d))
    assert r.returncode == 3 and not (tmp_path / "leases" / "20002").exists()
    # Another inventory host that is this same machine (a network namespace) claiming in the same attempt.
    r = _sh(ports.claim_script({20000: ""}, "3 30", d, mine=["1 10"]))
    assert r.returncode == 0 and (tmp_path / "leases" / "20000").read_text() == "3 30\n"
    _sh(ports.claim_script({20000: "3 30"}, "1 10", d))
    # One that saw the (now stale) lease's content takes it over.
    assert _sh(ports.claim_script({20001: "1 10", 20002: ""}, "2 20", d)).returncode == 0
    assert (tmp_path / "leases" / "20001").read_text() == "2 20\n"
    # The survey script reads them back.
    _, leases = ports.parse_survey(_sh(ports.survey_script(d)).stdout)
    assert {p: lease.content for p, lease in leases.items()} == {20000: "1 10", 20001: "2 20", 20002: "2 20"}
    assert all(lease.stale for lease in leases.values())  # pids 1 and 2 exist, but not with these start times
    # Release removes only our own leases.
    _sh(ports.release_script([20000, 20001, 20002], "2 20", d))
    assert sorted(p.name for p in (tmp_path / "leases").iterdir()) == ["20000"]


def test_lease_block_on_a_scripted_host_retries_after_a_lost_claim() -> None:
    host = ScriptedHost(strict=True)
    host.on(r"^ss -Htln", stdout="")
    host.on(r"flock -w 30 .* sh -c", exit_code=0)
    host.on(r"flock -w 30 .* sh -c", exit_code=3, times=1)  # someone else got there first
    block = ports.lease_block([(host, ports.Owner(7, "70"))], 4, start=20000)
    assert block.base == 20000 and host.count(r"^ss -Htln") == 2
    block.release()
    assert host.ran(r"\[ -d /tmp/dbmatrix-ports \] && flock")


def test_bind_failed() -> None:
    assert ports.bind_failed(BIND_LOG)
    assert ports.bind_failed(GCOMM_LOG)
    assert not ports.bind_failed("[ERROR] InnoDB: Cannot allocate memory for the buffer pool\n")
    assert not ports.bind_failed("[Note] Server socket created on IP: '127.0.0.1', port: '13306'.\n")


def _cell() -> Cell:
    return Cell(engine="innodb", cache_pct=50, block_size="16k", compression="none", medium="disk", threads=2)


def test_a_server_without_a_port_listens_on_no_tcp() -> None:
    paths = ServerPaths.under("/w/run", "/w/d", "bench")
    opts = render_options(_cell(), paths, user="root", cache=8 << 20)
    assert "--skip-networking" in opts
    assert not [o for o in opts if o.startswith(("--port", "--bind-address"))]
    tcp = render_options(_cell(), ServerPaths.under("/w/run", "/w/d", "bench", 13306), user="root", cache=8 << 20)
    assert "--port=13306" in tcp and "--bind-address=127.0.0.1" in tcp and "--skip-networking" not in tcp


def test_a_failed_bind_at_startup_is_port_in_use() -> None:
    host = ScriptedHost()
    host.on(r"echo \$!$", stdout="4321\n")
    host.on(r"mariadb-admin .* ping", exit_code=1)
    host.on(r"^kill -0 4321", exit_code=1)
    host.on(r"^tail -n", stdout=BIND_LOG)
    server = MariaDBServer(host, ServerPaths.under("/w/run", "/w/d", "bench", 13306), ["--no-defaults"])
    from dbmatrix.run.mysqld import PortInUse
    with pytest.raises(PortInUse, match="could not bind"):
        server.start()
    # Without a port the same log is an ordinary startup failure.
    server = MariaDBServer(host, ServerPaths.under("/w/run", "/w/d", "bench"), ["--no-defaults"])
    with pytest.raises(ServerError) as exc:
        server.start()
    assert not isinstance(exc.value, PortInUse)


def test_kill_stop_sends_sigkill_and_waits() -> None:
    host = ScriptedHost(strict=True)
    host.on(r"^kill -KILL 4321 ", exit_code=0)
    server = MariaDBServer(host, ServerPaths.under("/w/run", "/w/d", "bench"), [])
    server.pid = 4321
    server.stop(mode="kill")
    assert server.stop_mode == "kill" and server.clean_shutdown is False and server.pid is None
    assert not host.ran(r"shutdown")
    with pytest.raises(ValueError, match="allowed: clean, kill"):
        server.stop(mode="gentle")


def test_kill_command_waits_for_the_process_to_be_gone() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    r = _sh(kill_command(sleeper.pid))
    sleeper.wait(5)  # a zombie until reaped: kill_command counts it as gone
    assert r.returncode == 0 and sleeper.returncode == -9


def test_stop_mode_in_the_spec() -> None:
    base = {"experiment": "x", "factors": {"engine": "innodb"}}
    assert parse_experiment(base).stop_mode == "kill"
    assert "stop_mode" not in parse_experiment(base).to_dict()  # the digest of older specs is unchanged
    assert "stop_mode" not in parse_experiment({**base, "stop_mode": "kill"}).to_dict()
    clean = parse_experiment({**base, "stop_mode": "clean"})
    assert clean.stop_mode == "clean" and clean.to_dict()["stop_mode"] == "clean"
    with pytest.raises(SpecError, match=r"stop_mode: 'fast' .*allowed: clean, kill"):
        parse_experiment({**base, "stop_mode": "fast"})


def test_guard_script_and_hello() -> None:
    script = guard.guard_script("abc", "/w/run/guard-abc.stop", "/tmp/leases")
    assert "trap '' PIPE HUP INT TERM" in script
    assert "DBMATRIX_GUARD=abc" in script and "/w/run/guard-abc.stop" in script
    assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0
    assert guard.parse_hello("guard 12 345") == ports.Owner(12, "345")
    assert guard.parse_hello(".") is None and guard.parse_hello("guard x 1") is None
