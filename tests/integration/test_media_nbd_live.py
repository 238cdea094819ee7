"""The nbd medium for real (root): nbdkit in a network namespace of its own serving over TCP through a shaped
veth pair, and over a unix socket (the control); nbdfuse, a loop device and XFS on top. Data written through
the file system reaches the server's backing file; ensure is idempotent; a medium whose client died with its
session (nbdfuse gone, mounts stale) is rebuilt from what is left; teardown leaves no process, namespace,
link, mount or loop device. Speed is measured by benchmarks/bench_nbd.py, not asserted here."""

from __future__ import annotations

import os
import shlex
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.hosts.inventory import Medium, parse_medium
from dbmatrix.hosts.media import ensure, teardown, verify
from dbmatrix.hosts.media.nbd import nbd_names
from dbmatrix.hosts.remote import LocalHost

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces, FUSE mounts and loop devices need root"),
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse on this machine"),
]


def _alive(pidfile: str) -> bool:
    try:
        os.kill(int(Path(pidfile).read_text().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def _leftovers(m: Medium) -> list[str]:
    h = LocalHost()
    n = nbd_names(m)
    out = []
    if h.run(f"findmnt -rn --target {shlex.quote(m.path)} -o TARGET", check=False).stdout.strip() == m.path:
        out.append(f"mount {m.path}")
    if h.run(f"findmnt -rn --mountpoint {shlex.quote(n.fuse_dir)}", check=False).ok:
        out.append(f"mount {n.fuse_dir}")
    if n.netns and os.path.exists(f"/run/netns/{n.netns}"):
        out.append(f"namespace {n.netns}")
    if n.host_if and os.path.exists(f"/sys/class/net/{n.host_if}"):
        out.append(f"link {n.host_if}")
    loops = h.run("losetup -nO NAME,BACK-FILE", check=False).stdout
    out += [f"loop {ln}" for ln in loops.splitlines() if n.run_dir in ln]
    procs = h.run("ps -eo pid=,args=", check=False).stdout
    out += [f"process {ln.strip()}" for ln in procs.splitlines() if n.run_dir in ln and "ps -eo" not in ln]
    return out


@pytest.fixture
def build() -> Iterator[Callable[[str, dict[str, Any]], Medium]]:
    workdir = str(Path(os.environ.get("DBMATRIX_WORKDIR", "/var/tmp/dbmatrix")) / f"nbd-{uuid.uuid4().hex[:8]}")
    made: list[Medium] = []

    def make(prefix: str, raw: dict[str, Any]) -> Medium:
        m = parse_medium({"kind": "nbd", "size": "512M", **raw}, host="localhost",
                         name=f"{prefix}{uuid.uuid4().hex[:6]}", workdir=workdir)
        made.append(m)
        return m

    try:
        yield make
    finally:
        for m in reversed(made):
            teardown(LocalHost(), m)
        left = [x for m in made for x in _leftovers(m)]
        LocalHost().run(f"rm -rf {shlex.quote(workdir)}", check=False)
        assert not left, left


def test_tcp_medium_in_its_own_namespace_carries_the_data(build) -> None:
    m = build("nt", {"transport": "tcp", "rate": "1gbit", "delay_ms": 1})
    st = ensure(LocalHost(), m)
    n = nbd_names(m)
    assert st.kind == "nbd" and st.fstype == "xfs" and st.disk and st.disk.startswith("loop")
    assert "link shaped to 1gbit" in st.checks and f"server at {n.server_addr} in namespace {n.netns}" in st.checks
    # the server listens only inside its namespace: the host reaches it over the veth pair
    h = LocalHost()
    ss = h.run(f"ip netns exec {n.netns} ss -Htln", check=False).stdout
    assert f"{n.server_addr}:{m.options['port']}" in ss
    assert f"{n.server_addr}:{m.options['port']}" not in h.run("ss -Htln").stdout
    est = h.run(f"ss -Htn state established dst {n.server_addr}", check=False).stdout
    assert est.count(n.server_addr) == m.options["connections"]  # nbdfuse's multi-conn
    # data written through XFS reaches the server's backing file (written, synced, dropped, read back)
    token = uuid.uuid4().hex * 64
    h.run(f"printf %s {token} > {m.path}/probe && sync {m.path}/probe && echo 3 > /proc/sys/vm/drop_caches")
    assert Path(m.path, "probe").read_text() == token
    assert h.run(f"grep -c {token[:32]} {shlex.quote(m.options['backing_file'])}", check=False).stdout.strip() != "0"
    assert ensure(h, m).commands == ()
    # both processes outlive whatever started them: their own sessions, none of our kill markers (a notebook
    # kernel's shutdown signalled its process group, and nbdkit stopped serving while it kept running)
    for pidfile in (n.nbdkit_pid, n.nbdfuse_pid):
        pid = int(Path(pidfile).read_text())
        assert os.getsid(pid) not in (os.getsid(0), os.getpid())
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert not any(e.startswith((b"DBMATRIX_RUN_ID=", b"DBMATRIX_GUARD=")) for e in env)


def test_unix_control_and_a_rebuild_after_the_client_died(build) -> None:
    m = build("nu", {"transport": "unix"})
    h = LocalHost()
    ensure(h, m)
    n = nbd_names(m)
    assert os.path.exists(n.socket or "") and _alive(n.nbdkit_pid) and _alive(n.nbdfuse_pid)
    Path(m.path, "kept").write_text("survives a rebuild")
    h.run("sync")
    # what the end of a session does to it: the client is killed (its FUSE mount goes stale under the loop
    # device and XFS); verify says so, and ensure clears the pieces and builds it again over the same file
    os.kill(int(Path(n.nbdfuse_pid).read_text()), signal.SIGKILL)
    time.sleep(0.5)
    with pytest.raises(Exception, match="nbdfuse is not serving"):
        verify(h, m)
    st = ensure(h, m)
    assert any("umount" in c for c in st.commands) and any("setsid nbdfuse" in c for c in st.commands)
    assert not any(c.startswith("mkfs") for c in st.commands)  # the file system on the backing file is kept
    assert Path(m.path, "kept").read_text() == "survives a rebuild"
