"""Two real SSH test hosts (network namespaces with their own addresses and sshd, from the
``netns_hosts`` fixture of tests/conftest_netns.py) driven through the inventory and the `Host`
interface the way a study drives real machines: run, put/get, host-key refusal, package checks,
facts, and a real mariadbd on each host on the same port at the same time.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from dbmatrix.hosts.facts import collect_facts, parse_meminfo, parse_os_release
from dbmatrix.hosts.inventory import load_inventory
from dbmatrix.hosts.remote import HostKeyError, SSHHost
from dbmatrix.hosts.setup import (
    missing_packages,
    os_family,
    setup_packages,
    wanted_packages,
)
from dbmatrix.run.mysqld import MariaDBServer, ServerPaths
from dbmatrix.run.ports import base_port, parse_listening_ports

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def inventory(netns_hosts):
    """The two hosts as a study sees them: an inventory file, loaded."""
    return load_inventory(netns_hosts.inventory_yaml())


@pytest.fixture(scope="module")
def hosts(inventory):
    """One open SSH connection per host (HostSpec.connect()), reused across the module."""
    conns = {spec.name: spec.connect() for spec in inventory.hosts}
    try:
        yield conns
    finally:
        for c in conns.values():
            c.close()


def _root_ns_addresses() -> set[str]:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3].split("/")[0] for line in out.splitlines()} - {"127.0.0.1"}


def test_inventory_describes_both_hosts(netns_hosts, inventory) -> None:
    assert [h.name for h in inventory.hosts] == ["h1", "h2"]
    for spec, nh in zip(inventory.hosts, netns_hosts):
        assert (spec.address, spec.port, spec.user) == (nh.address, 22, "root")
        assert spec.key_file == nh.key_file and spec.known_hosts == nh.known_hosts
        assert spec.workdir == nh.workdir and os.path.isdir(nh.workdir)
        assert spec.media["disk"].kind == "dir" and spec.media["disk"].path == f"{nh.workdir}/media/disk"
        assert not spec.is_local
    assert netns_hosts["h2"] is netns_hosts[1]
    assert netns_hosts[0].address != netns_hosts[1].address
    assert netns_hosts[0].workdir != netns_hosts[1].workdir


def test_run_inside_each_namespace(netns_hosts, hosts) -> None:
    root_addrs = _root_ns_addresses()
    for nh in netns_hosts:
        host = hosts[nh.name]
        assert isinstance(host, SSHHost)
        r = host.run("echo out-$((6*7)); echo err-text >&2; exit 3", check=False)
        assert (r.stdout, r.stderr, r.exit_code) == ("out-42\n", "err-text\n", 3)
        # The shell runs in the host's namespace: it sees the host's address, and none of the
        # root namespace's or the other host's.
        addr = host.run("ip -o -4 addr show").stdout
        assert f"inet {nh.address}/30" in addr
        other = netns_hosts[1 - netns_hosts.hosts.index(nh)]
        assert other.address not in addr
        assert not any(f"inet {a}/" in addr for a in root_addrs)
        assert host.run("ip netns identify $$").stdout.strip() == nh.namespace
        assert host.is_root()


def test_put_get_roundtrip(netns_hosts, hosts, tmp_path) -> None:
    for nh in netns_hosts:
        payload = os.urandom(300_000) + nh.name.encode() + b"\x00\r\n\xff"
        src = tmp_path / f"src-{nh.name}.bin"
        src.write_bytes(payload)
        remote = f"{nh.workdir}/put test.bin"  # a space on purpose
        hosts[nh.name].put(src, remote)
        assert hosts[nh.name].run(f"wc -c < {shlex.quote(remote)}").stdout.strip() == str(len(payload))
        back = tmp_path / f"back-{nh.name}.bin"
        hosts[nh.name].get(remote, back)
        assert back.read_bytes() == payload
        hosts[nh.name].write_text(f"{nh.workdir}/note.txt", f"on {nh.name}\n")
        assert hosts[nh.name].read_text(f"{nh.workdir}/note.txt") == f"on {nh.name}\n"


def _fingerprint(known_hosts: str) -> str:
    return subprocess.run(["ssh-keygen", "-lf", known_hosts], capture_output=True, text=True,
                          check=True).stdout.split()[1]


def test_changed_host_key_is_refused(netns_hosts, inventory, tmp_path) -> None:
    for nh, spec in zip(netns_hosts, inventory.hosts):
        wrong = dataclasses.replace(spec, known_hosts=nh.wrong_known_hosts)
        with wrong.connect() as h, pytest.raises(HostKeyError) as ei:
            h.run("true")
        msg = str(ei.value)
        assert f"host {nh.name!r}: the host key of {nh.address} port 22 does not match {nh.wrong_known_hosts}" in msg
        assert "refusing to connect" in msg
        assert f"ssh-keygen -R '{nh.address}' -f {nh.wrong_known_hosts}" in ei.value.hint
        right_only = tmp_path / f"right-{nh.name}"
        right_only.write_text(f"{nh.address} {nh.host_pubkey}\n")
        assert f"got ssh-ed25519 {_fingerprint(str(right_only))}" in msg
        assert f"expected ssh-ed25519 {_fingerprint(nh.wrong_known_hosts)}" in msg


def test_unknown_host_key_is_refused(netns_hosts, inventory, tmp_path) -> None:
    h1, h2 = inventory.hosts
    # Empty known_hosts, and a known_hosts that knows only the other host.
    only_h2 = tmp_path / "only-h2"
    only_h2.write_text(f"{netns_hosts[1].address} {netns_hosts[1].host_pubkey}\n")
    # Refused before connecting: the known_hosts file has no entry for the host.
    for known in (netns_hosts[0].empty_known_hosts, str(only_h2)):
        with pytest.raises(HostKeyError) as ei:
            dataclasses.replace(h1, known_hosts=known).connect()
        assert f"host 'h1': the host key of {netns_hosts[0].address} port 22 is not in {known}" in str(ei.value)
        assert "refusing an unknown host key" in str(ei.value)
        assert f"ssh-keyscan -p 22 {netns_hosts[0].address}" in ei.value.hint
    # The file that knows h2 lets h2 in.
    with dataclasses.replace(h2, known_hosts=str(only_h2)).connect() as h:
        assert h.run("echo ok").stdout == "ok\n"
    with pytest.raises(HostKeyError, match="does not exist"):
        dataclasses.replace(h1, known_hosts=str(tmp_path / "missing")).connect()


def test_server_packages_present_with_versions(netns_hosts, hosts) -> None:
    local = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "mariadb-server", "sysbench"],
                           capture_output=True, text=True, check=True).stdout
    for nh in netns_hosts:
        host = hosts[nh.name]
        family = os_family(parse_os_release(host.read_text("/etc/os-release")))
        assert missing_packages(host, family, wanted_packages(family, ("server",))) == ()
        rep = setup_packages(host, ("server",), dry_run=True)
        assert rep.host == nh.name and rep.root
        assert rep.missing_before == () and rep.commands == () and not rep.changed
        assert set(rep.versions) == set(rep.wanted)
        # Same machine underneath: the versions are those dpkg reports here.
        assert rep.versions["mariadb-server"] + rep.versions["sysbench"] == local


def test_facts_over_ssh(netns_hosts, hosts) -> None:
    with open("/proc/meminfo") as f:
        mem_total = parse_meminfo(f.read())["mem_total_bytes"]
    for nh in netns_hosts:
        t0 = time.monotonic()
        facts = collect_facts(hosts[nh.name])
        took = time.monotonic() - t0
        assert "collector_errors" not in facts, facts.get("collector_errors")
        assert facts["host"] == nh.name
        assert facts["online_cpus"] == os.cpu_count()
        assert facts["kernel"] == os.uname().release and facts["mem_total_bytes"] == mem_total
        assert facts["cores_per_socket"] * facts["sockets"] * facts["threads_per_core"] >= 1
        assert sum(len(n["cpus"]) for n in facts["numa"]) == facts["logical_cpus"]
        assert facts["transparent_hugepage"] and facts["transparent_hugepage_defrag"]
        assert facts["kernel_cmdline"]
        assert any(d["scheduler"] is not None for d in facts["block_devices"])
        assert any(m["target"] == "/" for m in facts["mounts"])
        assert facts["ndctl"] == {"dimms": [], "regions": [], "namespaces": []}  # ndctl, no PMEM here
        assert facts["mariadb_version"].startswith("10.11") and facts["sysbench_version"] == "1.0.20"
        assert facts["fio_version"] and facts["galera_version"]
        assert set(facts["package_versions"]) >= {"mariadb-server", "sysbench", "fio", "galera-4"}
        assert took < 10, f"facts over SSH took {took:.1f} s"


def _install_db(host, datadir: str) -> None:
    host.run(f"rm -rf {shlex.quote(datadir)} && mkdir -p {shlex.quote(datadir)}")
    host.run(shlex.join(["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", "--user=root",
                         "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
                         # the namespaces share /tmp: a server starting on the other host would delete
                         # this bootstrap's #sql* temporary tables there (seen: "Unknown table tmp_proxies_priv")
                         f"--tmpdir={datadir}"]),
             timeout=120)


def test_mariadbd_on_both_hosts_on_the_same_port(netns_hosts, hosts) -> None:
    port = base_port()
    servers: dict[str, MariaDBServer] = {}
    for nh in netns_hosts:
        assert port not in parse_listening_ports(hosts[nh.name].run("ss -Htln").stdout)
        rundir, datadir = f"{nh.workdir}/run", f"{nh.workdir}/mysql-data"
        paths = ServerPaths.under(rundir, datadir, "m", port)
        options = ["--no-defaults", "--user=root", f"--datadir={datadir}", f"--socket={paths.socket}",
                   f"--port={port}", "--bind-address=127.0.0.1", f"--pid-file={paths.pid_file}",
                   f"--log-error={paths.error_log}", "--skip-log-bin", "--skip-name-resolve",
                   "--innodb-buffer-pool-size=16M", f"--tmpdir={datadir}"]
        servers[nh.name] = MariaDBServer(hosts[nh.name], paths, options)

    def bring_up(name: str) -> None:
        _install_db(hosts[name], servers[name].paths.datadir)
        servers[name].start(timeout_s=60)

    # Both hosts at once (as a fleet would): install, start; later stop.
    with ThreadPoolExecutor(max_workers=2) as pool:
        try:
            for f in [pool.submit(bring_up, n) for n in servers]:
                f.result()
            for nh in netns_hosts:
                host, srv = hosts[nh.name], servers[nh.name]
                # Over TCP on the namespace's own 127.0.0.1:port, each host reaches its own server.
                sql = shlex.join(["mariadb", "--no-defaults", "--protocol=tcp", "-h127.0.0.1", f"-P{port}",
                                  "-uroot", "-N", "-B", "-e", "SELECT @@port, @@datadir"])
                got_port, got_datadir = host.run(sql).stdout.split()
                assert int(got_port) == port and got_datadir.rstrip("/") == srv.paths.datadir
                # Both mariadbd are alive at once, each in its host's namespace.
                ns = subprocess.run(["ip", "netns", "identify", str(srv.pid)], capture_output=True, text=True,
                                    check=True).stdout.strip()
                assert ns == nh.namespace
            assert servers["h1"].pid != servers["h2"].pid
        finally:
            for f in [pool.submit(srv.stop, 60) for srv in servers.values()]:
                f.result()
    assert all(s.clean_shutdown for s in servers.values())
