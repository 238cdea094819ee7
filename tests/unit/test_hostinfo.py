"""Tests of the pure parsers in dbmatrix.hostinfo, and of collect_facts on a fake host."""

from __future__ import annotations

import json
import os

import pytest

from dbmatrix.hostinfo import (
    collect_facts,
    parse_cpuinfo,
    parse_mariadbd_version,
    parse_meminfo,
    parse_os_release,
    parse_selected,
    parse_sysbench_version,
)
from dbmatrix.remote import CommandResult, Host

OS_RELEASE = """\
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
# a comment = not a key
"""

UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n'

PROC = """\
processor	: {n}
vendor_id	: GenuineIntel
cpu family	: 6
model		: 85
model name	: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz
physical id	: 0
core id		: {n}
flags		: fpu vme de pse tsc msr pae mce cx8 sse sse2 ht syscall nx rdtscp lm hypervisor lahf_lm
"""
CPUINFO = PROC.format(n=0) + "\n" + PROC.format(n=1)

MEMINFO = """\
MemTotal:        8137892 kB
MemFree:          412344 kB
MemAvailable:    6043120 kB
Buffers:          123456 kB
SwapTotal:       2097148 kB
SwapFree:        2097148 kB
"""


def test_parse_os_release() -> None:
    rel = parse_os_release(OS_RELEASE)
    assert rel["ID"] == "debian"
    assert rel["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert rel["VERSION_ID"] == "12"
    assert rel["HOME_URL"] == "https://www.debian.org/"  # '=' only split once, quotes stripped
    assert not any(k.startswith("#") for k in rel)
    assert parse_os_release(UBUNTU)["ID_LIKE"] == "debian"
    assert parse_os_release("") == {}


def test_parse_cpuinfo_two_processors_under_a_hypervisor() -> None:
    facts = parse_cpuinfo(CPUINFO)
    assert facts == {
        "cpu_model": "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz",
        "logical_cpus": 2,
        "sockets": 1,
        "hypervisor": True,
    }


def test_parse_cpuinfo_bare_metal_and_empty() -> None:
    bare = CPUINFO.replace(" hypervisor", "")
    assert parse_cpuinfo(bare)["hypervisor"] is False
    assert parse_cpuinfo("") == {"cpu_model": None, "logical_cpus": 0, "sockets": None, "hypervisor": False}


def test_parse_meminfo() -> None:
    assert parse_meminfo(MEMINFO) == {
        "mem_total_bytes": 8137892 * 1024,
        "mem_available_bytes": 6043120 * 1024,
        "swap_total_bytes": 2097148 * 1024,
    }
    assert parse_meminfo("MemTotal: 1024 kB\n") == {"mem_total_bytes": 1024 * 1024}


@pytest.mark.parametrize("text,expected", [
    ("always [madvise] never\n", "madvise"),
    ("[always] madvise never", "always"),
    ("always madvise [never]", "never"),
    ("performance\n", "performance"),
    ("", None),
    ("   \n", None),
])
def test_parse_selected(text: str, expected: str | None) -> None:
    assert parse_selected(text) == expected


def test_version_parsers_on_real_strings() -> None:
    maria = "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n"
    assert parse_mariadbd_version(maria) == "10.11.19-MariaDB-0+deb12u1"
    assert parse_sysbench_version("sysbench 1.0.20\n") == "1.0.20"
    assert parse_sysbench_version("sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)") == "1.0.20"
    assert parse_mariadbd_version("") is None
    assert parse_sysbench_version("bash: sysbench: command not found") is None


class FakeHost(Host):
    is_local = True

    def __init__(self, outputs: dict[str, str], failing: frozenset[str] = frozenset()):
        self.name = "fake"
        self.outputs = outputs
        self.failing = failing

    def run(self, command: str, *, check: bool = True, timeout: float | None = None,
            env: dict[str, str] | None = None) -> CommandResult:
        for prefix in self.failing:
            if command.startswith(prefix):
                raise RuntimeError(f"no {prefix}")
        for prefix, out in self.outputs.items():
            if command.startswith(prefix):
                return CommandResult(command, out, "", 0, 0.0)
        return CommandResult(command, "", "not found", 127, 0.0)

    def put(self, local: str | os.PathLike[str], remote: str) -> None:
        raise AssertionError

    def get(self, remote: str, local: str | os.PathLike[str]) -> None:
        raise AssertionError


OUTPUTS = {
    "cat /etc/os-release": OS_RELEASE,
    "uname -r": "6.1.0-18-amd64\n",
    "uname -m": "x86_64\n",
    "hostname": "db1\n",
    "cat /proc/cpuinfo": CPUINFO,
    "nproc": "2\n",
    "ls -d /sys/devices/system/node": "/sys/devices/system/node/node0\n",
    "cat /proc/meminfo": MEMINFO,
    "cat /sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
    "lsblk": json.dumps({"blockdevices": [{"name": "vda", "type": "disk", "size": 10737418240, "rota": True,
                                           "model": None, "mountpoint": None}]}),
    "mariadbd --version": "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n",
    "sysbench --version": "sysbench 1.0.20\n",
    "python3 --version": "Python 3.11.2\n",
}


def test_collect_facts_on_a_fake_host() -> None:
    facts = collect_facts(FakeHost(OUTPUTS))
    assert facts["host"] == "fake"
    assert facts["os_id"] == "debian" and facts["os_version"] == "12" and facts["kernel"] == "6.1.0-18-amd64"
    assert facts["logical_cpus"] == 2 and facts["online_cpus"] == 2 and facts["numa_nodes"] == 1
    assert facts["cpufreq_governor"] is None
    assert facts["mem_total_bytes"] == 8137892 * 1024
    assert facts["transparent_hugepage"] == "madvise"
    assert facts["block_devices"][0]["name"] == "vda"
    assert facts["mariadb_version"] == "10.11.19-MariaDB-0+deb12u1"
    assert facts["sysbench_version"] == "1.0.20"
    assert "collector_errors" not in facts


def test_collect_facts_keeps_going_when_a_collector_fails() -> None:
    facts = collect_facts(FakeHost({**OUTPUTS, "lsblk": "not json"}, failing=frozenset({"cat /proc/cpuinfo"})))
    assert facts["block_devices"] is None
    assert set(facts["collector_errors"]) == {"cpu"}
    assert "RuntimeError" in facts["collector_errors"]["cpu"]
    assert facts["mem_total_bytes"] == 8137892 * 1024  # later collectors still ran
    assert facts["sysbench_version"] == "1.0.20"
