"""The run guard, locally and over SSH: when the controller process is killed (SIGKILL), what it started
through the guarded Host dies within seconds and its port leases are given up; on a normal end the guard
exits and kills nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run import ports

pytestmark = pytest.mark.integration

CONTROLLER = r"""
import json, sys, time
from dbmatrix.hosts.remote import LocalHost, SSHHost
from dbmatrix.run.guard import Guard
from dbmatrix.run.ports import lease_block
how = json.loads(sys.argv[1])
host = LocalHost() if how["kind"] == "local" else SSHHost("guarded", how["address"], user=how["user"],
    port=how["port"], key_file=how["key_file"], known_hosts=how["known_hosts"])
guard = Guard(host, how["rundir"])
owner = guard.start()
block = lease_block([(host, owner)], 2, start=20600)
child = int(host.run("setsid nohup sleep 300 > /dev/null 2>&1 < /dev/null & echo $!").stdout.split()[-1])
print(json.dumps({"child": child, "guard": owner.pid, "ports": list(block.ports)}), flush=True)
if how["end"] == "normal":
    block.release()
    guard.close()
    print("closed", flush=True)
else:
    time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _how(request, kind: str, end: str, tmp_path) -> dict[str, object]:
    how: dict[str, object] = {"kind": kind, "end": end, "rundir": str(tmp_path / "run")}
    if kind == "ssh":
        info = request.getfixturevalue("sshd_host")
        how.update(address=info.address, port=info.port, user=info.user, key_file=info.key_file,
                   known_hosts=info.known_hosts)
    return how


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_kill_9_of_the_controller_kills_what_it_started(request, kind, tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CONTROLLER, json.dumps(_how(request, kind, "kill", tmp_path))],
                            stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None
    started = json.loads(proc.stdout.readline())
    try:
        assert _alive(started["child"]) and _alive(started["guard"])
        leases = ports.parse_survey(LocalHost().run(ports.survey_script()).stdout)[1]
        assert set(started["ports"]) <= set(leases)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        t0 = time.monotonic()
        while (_alive(started["child"]) or _alive(started["guard"])) and time.monotonic() - t0 < 10:
            time.sleep(0.1)
        assert not _alive(started["child"]), "the controller's child outlived it by 10 s"
        assert not _alive(started["guard"]), "the guard did not exit"
        leases = ports.parse_survey(LocalHost().run(ports.survey_script()).stdout)[1]
        assert not set(started["ports"]) & set(leases)
        print(f"{kind}: child and guard gone {time.monotonic() - t0:.1f} s after kill -9")
    finally:
        if proc.poll() is None:
            proc.kill()
        if _alive(started["child"]):
            os.kill(started["child"], signal.SIGKILL)


@pytest.mark.parametrize("kind", ["local", "ssh"])
def test_a_normal_end_stops_the_guard_and_kills_nothing(request, kind, tmp_path) -> None:
    out = subprocess.run([sys.executable, "-c", CONTROLLER, json.dumps(_how(request, kind, "normal", tmp_path))],
                         capture_output=True, text=True, timeout=60, env=os.environ.copy())
    started = json.loads(out.stdout.splitlines()[0])
    try:
        assert out.returncode == 0 and out.stdout.splitlines()[1] == "closed", out.stderr
        t0 = time.monotonic()
        while _alive(started["guard"]) and time.monotonic() - t0 < 5:
            time.sleep(0.1)
        assert not _alive(started["guard"])
        time.sleep(1.5)  # a guard that killed on its way out would have done it by now
        assert _alive(started["child"])
    finally:
        if _alive(started["child"]):
            os.kill(started["child"], signal.SIGKILL)
