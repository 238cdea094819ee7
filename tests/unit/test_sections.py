"""dbmatrix.hosts.sections: one script of marked sections, its parser, and Host.run_sections."""

from __future__ import annotations

import subprocess

import pytest

from dbmatrix.hosts.media import CgroupLayout, detect_cgroup_layout
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.hosts.sections import Section, parse_sections, sections_script

SECTIONS = {
    "greeting": "echo hello; echo world",
    "empty": "true",
    "fails": "echo partial; exit 3",
    "missing": "no-such-command-dbmatrix",
    "stderr": "echo out; echo err >&2",
    "uses_prelude": 'echo "$x"',
    "sets": "x=changed; echo set",
    "after": 'echo "$x"',
    "stdin": "cat",
}


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_script_runs_each_command_and_parses_back(shell: str) -> None:
    script = sections_script(SECTIONS, prelude="x=from-prelude")
    r = subprocess.run([shell, "-c", script], capture_output=True, text=True, check=False, timeout=30)
    assert r.returncode == 0 and r.stderr == ""
    s = parse_sections(r.stdout, names=SECTIONS)
    assert list(s) == list(SECTIONS)
    assert s["greeting"] == Section("hello\nworld", 0) and s["greeting"].ok
    assert s["empty"] == Section("", 0)
    assert s["fails"] == Section("partial", 3)
    assert s["missing"].missing and s["missing"].text == ""
    assert s["stderr"] == Section("out", 0)  # stderr dropped
    assert s["uses_prelude"].text == "from-prelude"
    assert s["after"].text == "from-prelude"  # each command runs in its own subshell
    assert s["stdin"] == Section("", 0)  # stdin is /dev/null, nothing hangs


def test_parse_names_markers_and_rc() -> None:
    text = "noise\n@@a 0\nx\n@@zz 1\nkept\n@@b\n\n@@limit:read_bps 0\n8:0 100\n@@io.max 2\n"
    s = parse_sections(text)
    assert s == {"a": Section("x", 0), "zz": Section("kept", 1), "b": Section("", None),
                 "limit:read_bps": Section("8:0 100", 0), "io.max": Section("", 2)}
    only = parse_sections(text, names={"a", "b"})  # an @@ line of another name is text
    assert only["a"] == Section("x\n@@zz 1\nkept", 0)
    assert only["b"] == Section("\n@@limit:read_bps 0\n8:0 100\n@@io.max 2", None)
    assert parse_sections("") == {} and parse_sections("no markers\n") == {}


def test_bad_names_are_refused() -> None:
    for bad in ("two words", "a;rm", "", "x\ny"):
        with pytest.raises(ValueError, match="section name"):
            sections_script({bad: "true"})


def test_run_sections_is_one_round_trip_and_can_run_as_root() -> None:
    host = ScriptedHost("h", is_local=False, root=False)
    host.on(r"", stdout="@@one 0\n1\n@@two 127\n\n")
    got = host.run_sections({"one": "echo 1", "two": "nope"}, timeout=5)
    assert got == {"one": Section("1", 0), "two": Section("", 127)}
    assert host.commands == [sections_script({"one": "echo 1", "two": "nope"})]
    host.run_sections({"one": "echo 1"}, privileged=True, root=False)
    assert host.commands[-1].startswith("sudo -n sh -c ")


def test_detect_cgroup_layout_reads_controllers_per_cgroup2_mount() -> None:
    mounts = ("cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0\n"
              "cgroup /sys/fs/cgroup/blkio cgroup rw,nosuid,blkio 0 0\n")
    host = ScriptedHost("h", is_local=False)
    host.on(r"cgroup\.controllers", stdout=f"@@mounts 0\n{mounts}@@controllers 0\n"
                                           "/sys/fs/cgroup/unified cpu io memory\n")
    assert detect_cgroup_layout(host) == CgroupLayout(2, "/sys/fs/cgroup/unified")
    assert detect_cgroup_layout(host, "v1") == CgroupLayout(1, "/sys/fs/cgroup/blkio")
    host.on(r"cgroup\.controllers", stdout=f"@@mounts 0\n{mounts}@@controllers 0\n/sys/fs/cgroup/unified cpu\n")
    assert detect_cgroup_layout(host) == CgroupLayout(1, "/sys/fs/cgroup/blkio")  # no io controller in v2
