"""ScriptedHost: the test double of the host seam records commands and answers by pattern."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbmatrix.hosts.remote import CommandError, CommandResult, Host, RunInterrupted
from dbmatrix.hosts.scripted import ScriptedHost


def test_is_a_host_with_the_requested_identity() -> None:
    host = ScriptedHost("db1", is_local=False, root=False)
    assert isinstance(host, Host)
    assert host.name == "db1" and host.is_local is False
    assert host.is_root() is False
    assert host.privileged("mount -a") == "sudo -n sh -c 'mount -a'"
    assert ScriptedHost().is_root() is True and ScriptedHost().privileged("mount -a") == "mount -a"


def test_records_every_command_with_its_keywords() -> None:
    host = ScriptedHost()
    host.run("uname -r", timeout=5, env={"A": "1"})
    host.run("true", check=False)
    assert host.commands == ["uname -r", "true"]
    assert (host.calls[0].timeout, host.calls[0].env, host.calls[1].check) == (5, {"A": "1"}, False)


def test_unmatched_command_answers_the_default() -> None:
    assert ScriptedHost().run("anything") == CommandResult("anything", "", "", 0, 0.0)
    host = ScriptedHost(default=CommandResult("", "out", "err", 3, 0.5))
    r = host.run("anything", check=False)
    assert (r.command, r.stdout, r.stderr, r.exit_code, r.duration_s) == ("anything", "out", "err", 3, 0.5)


def test_strict_host_refuses_unexpected_commands() -> None:
    host = ScriptedHost(strict=True)
    with pytest.raises(AssertionError, match="unexpected command: rm -rf /data"):
        host.run("rm -rf /data")
    assert host.commands == ["rm -rf /data"]


def test_pattern_is_searched_and_may_be_a_callable() -> None:
    host = ScriptedHost(strict=True)
    host.on(r"findmnt", stdout="regex")
    host.on(lambda c: c.endswith("--json"), stdout="callable")
    assert host.run("sudo findmnt -n").stdout == "regex"
    assert host.run("lsblk --json").stdout == "callable"


def test_last_matching_rule_wins_so_tests_can_override() -> None:
    host = ScriptedHost()
    host.on(r"^cat ", stdout="default")
    host.on(r"^cat /etc/os-release$", stdout="override")
    assert host.run("cat /etc/os-release").stdout == "override"
    assert host.run("cat /proc/meminfo").stdout == "default"


def test_times_limits_a_rule_then_earlier_rules_answer_again() -> None:
    host = ScriptedHost()
    host.on(r"status", stdout="Synced")
    host.on(r"status", stdout="Joining", times=2)
    assert [host.run("status").stdout for _ in range(3)] == ["Joining", "Joining", "Synced"]


def test_answers_may_be_computed_from_the_command() -> None:
    host = ScriptedHost()
    host.on(r"^echo ", stdout=lambda c: c[5:] + "\n", exit_code=lambda c: 1 if "fail" in c else 0)
    assert host.run("echo hi").stdout == "hi\n"
    assert host.run("echo fail", check=False).exit_code == 1


def test_check_raises_command_error_on_non_zero_exit() -> None:
    host = ScriptedHost("h")
    host.on(r"^mount ", stderr="mount: wrong fs type\n", exit_code=32)
    with pytest.raises(CommandError, match=r"\[h\] command exited 32: mount /dev/x /m\nmount: wrong fs type") as e:
        host.run("mount /dev/x /m")
    assert e.value.result.exit_code == 32 and not e.value.timed_out
    assert host.run("mount /dev/x /m", check=False).exit_code == 32


def test_a_rule_longer_than_the_timeout_times_out() -> None:
    host = ScriptedHost()
    host.on(r"^sleep", duration_s=10.0)
    with pytest.raises(CommandError, match="timed out") as e:
        host.run("sleep 10", timeout=1, check=False)
    assert e.value.timed_out and e.value.result.exit_code == 124
    assert host.run("sleep 10", timeout=20).duration_s == 10.0


@pytest.mark.parametrize("exc", [RunInterrupted(), OSError("connection reset"), EOFError("closed")])
def test_a_rule_can_raise(exc: BaseException) -> None:
    host = ScriptedHost()
    host.on(r"^mariadb ", raises=exc, times=1)
    with pytest.raises(type(exc)):
        host.run("mariadb -e 'select 1'")
    assert host.run("mariadb -e 'select 1'").ok  # times=1: only the first call raised


def test_files_back_put_get_exists_and_read_text(tmp_path) -> None:
    host = ScriptedHost()
    src = tmp_path / "my.cnf"
    src.write_text("[mysqld]\n")
    host.put(src, "/etc/mysql/my.cnf")
    assert host.files == {"/etc/mysql/my.cnf": b"[mysqld]\n"}
    assert host.exists("/etc/mysql/my.cnf") and host.exists("/etc/mysql") and not host.exists("/etc/m")
    assert host.read_text("/etc/mysql/my.cnf") == "[mysqld]\n"
    host.write_text("/tmp/x", "written")
    assert host.files["/tmp/x"] == b"written"
    host.get("/tmp/x", tmp_path / "back")
    assert (tmp_path / "back").read_text() == "written"
    with pytest.raises(FileNotFoundError, match="/nope"):
        host.get("/nope", tmp_path / "nope")
    assert host.commands[:3] == ["put /etc/mysql/my.cnf", "test -e /etc/mysql/my.cnf", "test -e /etc/mysql"]


def test_ran_count_and_matching() -> None:
    host = ScriptedHost()
    for c in ("umount /a", "losetup -d /dev/loop0", "umount /b"):
        host.run(c)
    assert host.ran(r"^umount ") and not host.ran("mkfs")
    assert host.count(r"^umount ") == 2
    assert host.matching(r"^umount ") == ["umount /a", "umount /b"]


def test_rules_answer_file_operations_before_the_file_dict(tmp_path) -> None:
    host = ScriptedHost("gone", is_local=False)
    host.on(r"^test -e /dev/pmem0$", exit_code=1)
    host.on(r"^get /var/log/mysql.err$", stdout="[ERROR] boom\n")
    host.on(r"^cat /proc/version$", stdout="Linux 6.1\n")
    host.files["/dev/pmem0"] = b""
    assert not host.exists("/dev/pmem0")
    host.get("/var/log/mysql.err", tmp_path / "err")
    assert (tmp_path / "err").read_text() == "[ERROR] boom\n"
    assert host.read_text("/proc/version") == "Linux 6.1\n"


def test_one_raising_rule_makes_the_whole_host_unreachable(tmp_path) -> None:
    host = ScriptedHost("gone", is_local=False)
    host.on(r"", raises=EOFError("connection closed"))
    (tmp_path / "f").write_text("x")
    for op in (lambda: host.run("true", check=False), lambda: host.put(tmp_path / "f", "/tmp/f"),
               lambda: host.get("/tmp/f", tmp_path / "g"), lambda: host.exists("/tmp"),
               lambda: host.read_text("/etc/hostname"), host.is_root):
        with pytest.raises(EOFError, match="connection closed"):
            op()
    assert host.files == {}


def test_passthrough_runs_unmatched_commands_on_the_real_host_and_records_them(tmp_path: Path) -> None:
    from dbmatrix.hosts.remote import LocalHost

    host = ScriptedHost("localhost", passthrough=LocalHost())
    host.on(r"^mount ", exit_code=32, stderr="scripted refusal")
    assert host.run("echo real").stdout == "real\n"
    assert host.run("mount /nowhere", check=False).stderr == "scripted refusal"  # a rule still wins
    (tmp_path / "f").write_text("x")
    assert host.exists(str(tmp_path / "f")) and not host.exists(str(tmp_path / "missing"))
    host.put(str(tmp_path / "f"), str(tmp_path / "g"))
    assert (tmp_path / "g").read_text() == "x" and host.read_text(str(tmp_path / "g")) == "x"
    assert host.commands[:2] == ["echo real", "mount /nowhere"]
