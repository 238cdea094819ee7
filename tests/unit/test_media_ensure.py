"""hosts.media ensure/verify/teardown failure paths through ScriptedHost: a step failing mid-way, a
silent dax=never, a medium in place but wrong, missing prerequisites, a lost connection, non-root."""

from __future__ import annotations

from typing import Any

import pytest
from test_media import LOOP_FACTS, LOOP_RAW

from dbmatrix.hosts.inventory import Medium, parse_medium
from dbmatrix.hosts.media import MediaError, ensure, teardown, verify
from dbmatrix.hosts.scripted import ScriptedHost

GOOD_FACTS = LOOP_FACTS.replace("dax=never,", "")
FACTS = r"findmnt -J -b -o TARGET"  # the facts script of verify
PREREQS = r"command -v \$t"  # the prerequisite script
DONE_TESTS = r"^(mountpoint -q|test -[fbd] |\[ )"  # the done-tests of the apply steps


def loop_medium(**extra: Any) -> Medium:
    return parse_medium({**LOOP_RAW, **extra}, host="h", name="fx", workdir="/var/tmp/dbm")


def fresh_host(after: str = GOOD_FACTS, *, root: bool = True) -> ScriptedHost:
    """A host where nothing is built yet: verify finds nothing mounted, prerequisites are there, no
    step is done, every step succeeds; verify then sees `after`."""
    host = ScriptedHost("h", is_local=False, root=root)
    host.on(FACTS, stdout=after)
    host.on(FACTS, stdout="", times=1)
    host.on(PREREQS)
    host.on(DONE_TESTS, exit_code=1)
    return host


def applied(host: ScriptedHost) -> list[str]:
    """The apply-step commands that ran (not the done-tests nor the scripts)."""
    return host.matching(r"^(mkdir -p .*&& (fallocate|mount)|losetup --find|parted |mkfs\.)")


def test_ensure_builds_a_loop_medium_step_by_step() -> None:
    host = fresh_host()
    state = ensure(host, loop_medium())
    assert [c.split()[0] for c in state.commands] == ["mkdir", "losetup", "parted", "mkfs.xfs", "mkdir"]
    assert state.device == "loop0p1" and host.count(FACTS) == 2


def test_ensure_step_failing_mid_way_names_medium_step_and_what_was_applied() -> None:
    host = fresh_host()
    host.on(r"mount -t xfs", exit_code=32, stderr="mount: /var/tmp/dbm/media/fx: wrong fs type\n")
    with pytest.raises(MediaError) as ei:
        ensure(host, loop_medium())
    e = ei.value
    msg = str(e)
    assert msg.startswith("loop medium 'fx' on host h: mount the file system failed (exit 32): mkdir -p ")
    assert "wrong fs type" in msg
    # The earlier steps stay applied (no rollback) and the error lists them; teardown removes them.
    assert [c.split()[0] for c in e.applied] == ["mkdir", "losetup", "parted", "mkfs.xfs"]
    assert "already applied (teardown removes them): mkdir -p " in msg
    assert not host.ran(r"umount|losetup -d")
    assert host.count(FACTS) == 1  # no verification after a failed step


def test_ensure_first_step_failing_reports_nothing_applied() -> None:
    host = fresh_host()
    host.on(r"fallocate", exit_code=1, stderr="fallocate: No space left on device\n")
    with pytest.raises(MediaError, match="create the backing file failed") as ei:
        ensure(host, loop_medium())
    assert ei.value.applied == () and "already applied" not in str(ei.value)


def test_ensure_catches_a_silent_dax_never_after_a_successful_mount() -> None:
    host = fresh_host(after=LOOP_FACTS)  # mount -o dax exited 0 but the kernel mounted dax=never
    with pytest.raises(MediaError) as ei:
        ensure(host, loop_medium(mount_options=["noatime", "dax"]))
    msg = str(ei.value)
    assert msg.startswith("loop medium 'fx' on host h: ")
    assert "kernel mounted dax=never" in msg and "teardown, then ensure again" not in msg
    assert host.ran(r"mount -t xfs -o noatime,dax ")


def test_ensure_of_a_medium_in_place_but_wrong_says_to_rebuild() -> None:
    host = fresh_host(after=GOOD_FACTS.replace("loop_dio=1", "loop_dio=0"))
    host.on(DONE_TESTS, exit_code=0)  # every step looks done: nothing runs
    with pytest.raises(MediaError, match=r"loop direct I/O is off.*\(teardown, then ensure again, to rebuild it\)"):
        ensure(host, loop_medium())
    assert applied(host) == []


def test_ensure_missing_prerequisites_fail_before_any_step() -> None:
    host = fresh_host()
    host.on(PREREQS, stdout="tool mkfs.xfs\ntool parted\n")
    with pytest.raises(MediaError, match=r"loop: missing tools on host h: mkfs.xfs \(package xfsprogs\), "
                                         r"parted \(package parted\)"):
        ensure(host, loop_medium())
    assert not host.ran(DONE_TESTS) and applied(host) == []


def test_ensure_lost_connection_mid_way_propagates_as_is() -> None:
    host = fresh_host()
    host.on(r"^losetup --find", raises=EOFError("h: connection closed"))
    with pytest.raises(EOFError):
        ensure(host, loop_medium())


def test_ensure_without_root_needs_passwordless_sudo() -> None:
    host = fresh_host(root=False)
    host.on(r"^echo \$\(id -u\):\$\(id -g\)$", stdout="1000:1000\n")
    host.on(r"^sudo -n true$", exit_code=1, stderr="sudo: a password is required\n")
    with pytest.raises(MediaError, match="loop medium 'fx' on host h: building it needs root or passwordless sudo"):
        ensure(host, loop_medium())


def test_ensure_without_root_runs_every_step_through_sudo() -> None:
    host = fresh_host(root=False)
    host.on(r"^echo \$\(id -u\):\$\(id -g\)$", stdout="1000:1000\n")
    host.on(r"^sudo -n true$")
    host.on(r"^sudo -n sh -c .*(mountpoint -q|test -[fbd] |\[ )", exit_code=1)  # done-tests, wrapped
    state = ensure(host, loop_medium())
    ran = [c for c in host.commands if c not in ("id -u", "sudo -n true") and not c.startswith("echo ")]
    assert ran and all(c.startswith("sudo -n sh -c ") for c in ran)
    assert any("chown 1000:1000 /var/tmp/dbm/media/fx" in c for c in state.commands)


def test_verify_failure_names_the_medium_and_what_differs() -> None:
    host = ScriptedHost("h", is_local=False)
    host.on(FACTS, stdout="")
    with pytest.raises(MediaError, match=r"^loop medium 'fx' on host h: nothing is mounted at /var/tmp/dbm/media/fx$"):
        verify(host, loop_medium())
    host.on(FACTS, stdout=GOOD_FACTS.replace('"fstype": "xfs"', '"fstype": "ext4"'))
    with pytest.raises(MediaError, match="file system is ext4, the recipe says xfs"):
        verify(host, loop_medium())


def test_teardown_step_failure_names_the_step() -> None:
    host = ScriptedHost("h", is_local=False)
    host.on(r"^! mountpoint -q ", exit_code=1)  # still mounted
    host.on(r"^umount ", exit_code=32, stderr="umount: target is busy.\n")
    with pytest.raises(MediaError, match=r"^loop medium 'fx' on host h: unmount failed \(exit 32\): "
                                         r"umount /var/tmp/dbm/media/fx\numount: target is busy\.$"):
        teardown(host, loop_medium())
