"""Pytest plugin: a throwaway Slurm cluster over the two network-namespace test hosts of conftest_netns.

``slurm_cluster`` (session scope) starts, all under one temporary directory:

- ``munged`` with a key made at test time and its own socket (a path socket: the namespaces share the
  file system, so every daemon and client reaches it);
- ``slurmctld`` inside h1's namespace (it binds every address *of that namespace*: h1's veth address, the
  h1-h2 link and h1's own loopback), with its own hostname (``unshare --uts``), state directory and port;
- one ``slurmd`` per test host inside that host's namespace, with the host's name as its hostname and
  node name, its own spool directory and port, ``NodeAddr`` = the namespace's address, and the features
  the tests ask for (``tmpfs,disk`` on both);

with a ``slurm.conf`` the fixture writes: ``proctrack/linuxproc``, ``task/none``, ``select/linear`` (no
cgroup set-up), one partition ``bench`` with ``OverSubscribe=EXCLUSIVE``. Clients (``salloc``,
``squeue``, ...) run in the root namespace with ``SLURM_CONF`` pointing at that file and reach
slurmctld over h1's veth. No accounting daemon: ``sacct`` reports accounting as disabled, which the
Slurm leaser answers with the job record from ``scontrol show job`` (the same fields).

Teardown (also after failures): every daemon is stopped by PID (TERM, then KILL), slurmd first. The
daemons run inside the namespaces, so the netns teardown would also find them should this one fail.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = ("munged", "slurmctld", "slurmd", "salloc", "squeue", "scancel", "sinfo", "scontrol", "sacct")
PARTITION = "bench"
CONTROLLER = "dbmxctl"
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SlurmCluster:
    """A running test cluster: its slurm.conf, the env its clients need, its nodes (= netns host names)."""

    conf: str
    directory: str
    nodes: tuple[str, ...]
    partition: str
    munge_socket: str
    pids: dict[str, int]

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.conf}

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm client command (``squeue``, ``scontrol``, ...) against this cluster."""
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, check=check,
                              stdin=subprocess.DEVNULL, timeout=60)

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N|%T", check=False).stdout
        return dict(line.split("|", 1) for line in out.split() if "|" in line)

    def wait_idle(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait until every node is idle (after a test drained one: resume it first)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = self.node_states()
            if states and all(s == "idle" for s in states.values()) and set(states) == set(self.nodes):
                return
            time.sleep(0.3)
        raise RuntimeError(f"slurm nodes not idle after {timeout_s} s: {self.node_states()}; "
                           f"slurmctld log:\n{_tail(Path(self.directory) / 'slurmctld.log')}")

    def reset(self) -> None:
        """Cancel every job, resume every node, wait until all are idle: a clean cluster for the next test."""
        self.run("scancel", "--partition", self.partition, check=False)
        for n in self.nodes:
            if self.node_states().get(n, "idle") != "idle":
                self.run("scontrol", "update", f"nodename={n}", "state=resume", check=False)
        self.wait_idle()


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def _skip_reason() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b) is None and not os.path.exists(f"/usr/sbin/{b}")]
    if missing:
        return (f"slurm/munge not installed ({', '.join(missing)} missing): `dbmatrix setup --roles test` "
                "installs slurm-wlm and munge")
    if shutil.which("unshare") is None:
        return "unshare (util-linux) not found"
    return None


def _free_ports(n: int) -> list[int]:
    """`n` port numbers for the daemons (inside the namespaces nothing else listens; random avoids reuse
    of a port in TIME_WAIT by a previous session)."""
    base = 20000 + secrets.randbelow(20000)
    return [base + i for i in range(n)]


def write_slurm_conf(path: Path, d: Path, ctl_addr: str, ctl_port: int, slurmd_port: int, munge_socket: str,
                     nodes: list[tuple[str, str, str]]) -> None:
    """slurm.conf for the test cluster; `nodes` are (name, address, features)."""
    lines = [
        "ClusterName=dbmxtest",
        f"SlurmctldHost={CONTROLLER}({ctl_addr})",
        f"SlurmctldPort={ctl_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool-%n",
        f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmdPidFile={d}/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/slurmctld.log",
        f"SlurmdLogFile={d}/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/linear",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "SchedulerParameters=sched_interval=1",
        "MinJobAge=600",
        "KillWait=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "MessageTimeout=10",
    ]
    for name, addr, features in nodes:
        lines.append(f"NodeName={name} NodeAddr={addr} NodeHostname={name} Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 Features={features} "
                     "State=UNKNOWN")
    lines.append(f"PartitionName={PARTITION} Nodes={','.join(n for n, _, _ in nodes)} Default=YES "
                 "MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE")
    path.write_text("\n".join(lines) + "\n")


def _stop_pid(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            proc.kill()
        proc.wait(timeout=5)


def _in_namespace(ns: str, hostname: str, argv: list[str], log: Path) -> subprocess.Popen:
    """Start `argv` in network namespace `ns` with its own UTS namespace and hostname; the process that
    Popen returns is the daemon itself (nsenter, unshare and sh all exec). ``nsenter --net`` rather than
    ``ip netns exec``: the latter remounts /sys, hiding the cgroup tree slurmd's cgroup plugin needs."""
    cmd = ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "sh", "-c",
           f'hostname {hostname} && exec "$@"', "sh", *argv]
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=f)


@pytest.fixture(scope="session")
def slurm_cluster(netns_hosts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """munged + slurmctld + one slurmd per netns test host (see the module docstring)."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "munge", *(f"spool-{h.name}" for h in netns_hosts)):
        (d / sub).mkdir()
    os.chmod(d / "munge", 0o700)
    key = d / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    sock = str(d / "munge" / "munge.sock")
    h1 = netns_hosts["h1"]
    ctl_port, slurmd_port = _free_ports(2)
    conf = d / "slurm.conf"
    write_slurm_conf(conf, d, h1.address, ctl_port, slurmd_port, sock,
                     [(h.name, h.address, "tmpfs,disk") for h in netns_hosts])
    procs: dict[str, subprocess.Popen] = {}
    with contextlib.ExitStack() as stack:
        munged = subprocess.Popen(
            ["munged", "-F", "--force", f"--key-file={key}", f"--socket={sock}",
             f"--pid-file={d / 'munge' / 'munged.pid'}", f"--seed-file={d / 'munge' / 'munged.seed'}",
             f"--log-file={d / 'munge' / 'munged.log'}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(d / "munged.err", "ab"))
        procs["munged"] = munged
        stack.callback(_stop_pid, munged)
        deadline = time.monotonic() + 10
        while not os.path.exists(sock) and time.monotonic() < deadline and munged.poll() is None:
            time.sleep(0.05)
        if not os.path.exists(sock):
            pytest.fail(f"munged did not start: {_tail(d / 'munged.err')} {_tail(d / 'munge' / 'munged.log')}")
        ctl = _in_namespace(h1.namespace, CONTROLLER, ["slurmctld", "-D", "-i", "-f", str(conf)],
                            d / "slurmctld.out")
        procs["slurmctld"] = ctl
        stack.callback(_stop_pid, ctl)
        for h in netns_hosts:  # registered after slurmctld: stopped before it
            p = _in_namespace(h.namespace, h.name, ["slurmd", "-D", "-N", h.name, "-f", str(conf)],
                              d / f"slurmd-{h.name}.out")
            procs[f"slurmd-{h.name}"] = p
            stack.callback(_stop_pid, p)
        cluster = SlurmCluster(str(conf), str(d), tuple(h.name for h in netns_hosts), PARTITION, sock,
                               {k: p.pid for k, p in procs.items()})
        try:
            cluster.wait_idle()
        except RuntimeError as exc:
            dead = {k: p.returncode for k, p in procs.items() if p.poll() is not None}
            pytest.fail(f"{exc}\nexited: {dead}\nslurmd h1:\n{_tail(d / 'slurmd-h1.out')}\n"
                        f"{_tail(d / 'slurmd-h1.log')}\nslurmctld.out:\n{_tail(d / 'slurmctld.out')}")
        yield cluster
