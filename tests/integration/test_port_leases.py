"""Port leases across real processes: two dbmatrix processes leasing at once never share a port, and the
leases of a process killed with SIGKILL are given up by its guard (or, were it gone too, found stale)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run import ports

pytestmark = pytest.mark.integration

START = 20400  # the ports helper's range; nothing listens there in tests
HOLDER = r"""
import sys
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run.guard import Guard
from dbmatrix.run.ports import lease_block
host = LocalHost()
guard = Guard(host, sys.argv[1])
owner = guard.start()
print("owner", owner.pid, owner.start, flush=True)
blocks = [lease_block([(host, owner)], 4, start=int(sys.argv[2])) for _ in range(int(sys.argv[3]))]
print("bases", *[b.base for b in blocks], flush=True)
sys.stdin.readline()  # hold the leases until told
for b in blocks:
    b.release()
guard.close()
print("released", flush=True)
"""


def _holder(tmp_path, name: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / name), str(START), str(count)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy())


def _read(p: subprocess.Popen[str], word: str) -> list[str]:
    assert p.stdout is not None
    line = p.stdout.readline().split()
    assert line and line[0] == word, line
    return line[1:]


def _leases() -> dict[int, ports.Lease]:
    return ports.parse_survey(LocalHost().run(ports.survey_script()).stdout)[1]


def test_two_processes_never_share_a_port_and_a_killed_ones_leases_are_freed(tmp_path) -> None:
    a, b = _holder(tmp_path, "a", 8), _holder(tmp_path, "b", 8)
    try:
        owner_a, owner_b = _read(a, "owner"), _read(b, "owner")
        bases_a, bases_b = [int(x) for x in _read(a, "bases")], [int(x) for x in _read(b, "bases")]
        taken_a = {p for base in bases_a for p in range(base, base + 4)}
        taken_b = {p for base in bases_b for p in range(base, base + 4)}
        assert len(taken_a) == len(taken_b) == 32 and not taken_a & taken_b
        leases = _leases()
        assert all(leases[p].content == " ".join(owner_a) and not leases[p].stale for p in taken_a)
        assert all(leases[p].content == " ".join(owner_b) for p in taken_b)
        # A dies without releasing anything: its guard gives its leases up within about a second.
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        deadline = time.monotonic() + 10
        while taken_a & set(_leases()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not taken_a & set(_leases())
        assert taken_b <= set(_leases())
        # A third process gets A's old ports again (the lowest free ones), never B's.
        c = _holder(tmp_path, "c", 1)
        _read(c, "owner")
        (base_c,) = (int(x) for x in _read(c, "bases"))
        assert base_c == min(bases_a)
        assert not set(range(base_c, base_c + 4)) & taken_b
        c.communicate("\n", timeout=30)
        b.communicate("\n", timeout=30)
        assert not (taken_b | set(range(base_c, base_c + 4))) & set(_leases())  # released on a normal end
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()


def test_a_stale_lease_without_its_guard_is_taken_over(tmp_path) -> None:
    # A lease whose owner pid does not exist (e.g. the whole machine rebooted): stale, taken over.
    d = ports.LEASE_DIR
    LocalHost().run(f"mkdir -p {d} && printf '999999999 1\\n' > {d}/{START + 200}")
    host = LocalHost()
    block = ports.lease_block([(host, ports.this_process(host))], 1, start=START + 200)
    try:
        assert block.base == START + 200
        assert _leases()[START + 200].content == ports.this_process(host).text()
    finally:
        block.release()
    assert START + 200 not in _leases()
