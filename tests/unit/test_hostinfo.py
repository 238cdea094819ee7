"""Tests of the pure parsers and collectors of dbmatrix.hosts.facts on captured (and documented) outputs.

`localhost.facts.txt` is the real facts-script output of the study VM; the ndctl/ipmctl/nested
lscpu fixtures are written from the tools' documentation (see tests/fixtures/hostinfo/README.md).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dbmatrix.hosts.facts import (
    COLLECTORS,
    COMMANDS,
    FACT_PACKAGES,
    PSEUDO_FSTYPES,
    Output,
    collect_facts,
    cpu_facts,
    cpufreq_facts,
    facts_from_sections,
    facts_script,
    lscpu_facts,
    mount_facts,
    numa_facts,
    numa_from_lscpu,
    package_query_command,
    parse_cmdline,
    parse_cpufreq,
    parse_cpuinfo,
    parse_cpulist,
    parse_facts_output,
    parse_fio_version,
    parse_ipmctl_table,
    parse_lsblk,
    parse_lscpu,
    parse_mariadbd_version,
    parse_meminfo,
    parse_ndctl,
    parse_numa_nodes,
    parse_os_release,
    parse_package_versions,
    parse_plain_version,
    parse_selected,
    parse_sysbench_version,
    pmem_facts,
)
from dbmatrix.hosts.scripted import ScriptedHost

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hostinfo"
LOCAL = (FIX / "localhost.facts.txt").read_text()


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def sections(**override: str | Output) -> dict[str, Output]:
    """The captured sections, some replaced (a str keeps the captured exit code)."""
    s = parse_facts_output(LOCAL)
    for name, value in override.items():
        s[name] = value if isinstance(value, Output) else Output(value, s[name].rc)
    return s


# ---------------------------------------------------------------- the captured host, end to end

# Every key the runner/steps/analysis/paper read, and every key facts had before this module grew.
LEGACY_KEYS = {"arch", "block_devices", "cpu_model", "cpufreq_governor", "host", "hostname", "hypervisor",
               "kernel", "logical_cpus", "mariadb_version", "mem_available_bytes", "mem_total_bytes",
               "numa_nodes", "online_cpus", "os_id", "os_like", "os_pretty", "os_version", "python_remote",
               "sockets", "swap_total_bytes", "sysbench_version", "transparent_hugepage"}


def test_captured_host_facts() -> None:
    facts = facts_from_sections(parse_facts_output(LOCAL), "vm1")
    assert "collector_errors" not in facts
    assert set(facts) >= LEGACY_KEYS
    assert facts["host"] == "vm1"
    assert facts["os_pretty"] == "Debian GNU/Linux 12 (bookworm)" and facts["os_id"] == "debian"
    assert facts["kernel"] == "6.18.44-fc-v669" and facts["arch"] == "x86_64"
    assert facts["kernel_cmdline"].startswith("mitigations=auto")
    assert facts["boot_id"] == "3f0c2a9e-5b7d-4e61-9a0f-2c8d1e4b7a65"  # which boot: campaigns compare it
    # CPU: /proc/cpuinfo and lscpu agree on this VM.
    assert facts["cpu_model"] == "Intel(R) Xeon(R) Processor"
    assert facts["online_cpus"] == facts["logical_cpus"] == 2
    assert (facts["sockets"], facts["cores_per_socket"], facts["threads_per_core"]) == (1, 2, 1)
    assert facts["hypervisor"] is True and facts["hypervisor_vendor"] == "KVM"
    assert facts["caches"]["l3"] == "480 MiB (1 instance)"
    # NUMA from sysfs: one node holding both CPUs.
    assert facts["numa_nodes"] == 1
    assert facts["numa"][0]["node"] == 0 and facts["numa"][0]["cpus"] == [0, 1]
    assert facts["numa"][0]["mem_total_bytes"] > 0
    # A VM without cpufreq.
    assert facts["cpufreq_governor"] is None and facts["cpufreq_policies"] is None
    assert facts["mem_total_bytes"] == 25276502016
    assert facts["transparent_hugepage"] == "madvise" and facts["transparent_hugepage_defrag"] == "madvise"
    assert facts["hugepage_size_bytes"] == 2 * 2**20
    vda = next(d for d in facts["block_devices"] if d["name"] == "vda")
    assert vda == {"name": "vda", "type": "disk", "size": 274877906944, "rota": True, "model": None,
                   "mountpoint": "/", "scheduler": "mq-deadline", "logical_block_size": 512,
                   "physical_block_size": 4096, "transport": None}
    root = next(m for m in facts["mounts"] if m["target"] == "/")
    assert root["source"] == "/dev/vda" and root["fstype"] == "ext4"
    assert not {m["fstype"] for m in facts["mounts"]} & PSEUDO_FSTYPES
    # ndctl installed without devices; ipmctl not installed.
    assert facts["ndctl"] == {"dimms": [], "regions": [], "namespaces": []}
    assert facts["ipmctl_dimms"] is None and facts["ipmctl_regions"] is None
    assert facts["mariadb_version"] == "10.11.19-MariaDB-0+deb12u1"
    assert facts["sysbench_version"] == "1.0.20" and facts["fio_version"] == "3.33"
    assert facts["ndctl_version"] == "76.1"
    assert facts["galera_version"] == "26.4.23-0+deb12u1"
    assert facts["package_versions"]["mariadb-server"] == "1:10.11.19-0+deb12u1"
    assert "ipmctl" not in facts["package_versions"]
    json.dumps(facts)  # facts are stored as JSON


def test_every_collector_reads_only_sections_the_script_has() -> None:
    for name, collector in COLLECTORS.items():
        assert set(collector.sections) <= set(COMMANDS), name
    assert set(parse_facts_output(LOCAL)) == set(COMMANDS)


def test_one_broken_output_does_not_hide_the_others() -> None:
    s = sections(lsblk="lsblk: unknown column: SCHED")
    del s["cpuinfo"]  # a section the script never printed
    facts = facts_from_sections(s, "h")
    assert set(facts["collector_errors"]) == {"block_devices", "cpu"}
    assert "JSONDecodeError" in facts["collector_errors"]["block_devices"]
    assert "KeyError" in facts["collector_errors"]["cpu"]
    assert "block_devices" not in facts and "cpu_model" not in facts
    assert facts["mem_total_bytes"] == 25276502016 and facts["sysbench_version"] == "1.0.20"
    assert facts["mounts"]


def test_failed_tool_gives_none_not_an_error() -> None:
    facts = facts_from_sections(sections(lsblk=Output("", 32), findmnt=Output("", 127)), "h")
    assert facts["block_devices"] is None and facts["mounts"] is None
    assert "collector_errors" not in facts


# ---------------------------------------------------------------- the script and its sections

def test_parse_facts_output() -> None:
    text = "noise before\n@@uname_r 0\n6.1.0\n@@ndctl 0\n\n@@ipmctl_dimm 127\n\n@@lscpu 0\n{\n}\n@@bogus 0\nkept\n"
    s = parse_facts_output(text)
    assert s["uname_r"] == Output("6.1.0", 0)
    assert s["ndctl"] == Output("", 0) and not s["ndctl"].missing
    assert s["ipmctl_dimm"].missing
    # Only known names start a section: an unknown @@ line is text of the current one.
    assert s["lscpu"].text == "{\n}\n@@bogus 0\nkept"
    assert parse_facts_output("") == {}


def test_facts_script_shape() -> None:
    script = facts_script(("uname_r", "ndctl"))
    assert "uname -r" in script and "ndctl list -N -R -D" in script
    assert "lscpu" not in script
    assert script.rstrip().endswith("exit 0")
    assert "/usr/sbin" in script.splitlines()[0]  # mariadbd for non-root SSH users
    # POSIX sh syntax (remote login shells may be dash): parse only, nothing runs.
    for shell in ("sh", "bash"):
        r = subprocess.run([shell, "-n"], input=facts_script(), text=True, capture_output=True, check=False)
        assert r.returncode == 0, (shell, r.stderr)


def replay_host(output: str) -> ScriptedHost:
    """A ScriptedHost answering every command (the facts script) with a captured output (a fixture)."""
    host = ScriptedHost("replay")
    host.on(r"", stdout=output)
    return host


def test_collect_facts_is_one_round_trip() -> None:
    host = replay_host(LOCAL)
    facts = collect_facts(host)
    assert len(host.commands) == 1 and host.commands[0] == facts_script(tuple(COMMANDS))
    assert facts["host"] == "replay" and facts["online_cpus"] == 2


def test_collect_facts_only_some_collectors() -> None:
    host = replay_host(LOCAL)
    facts = collect_facts(host, only=("memory", "pmem"))
    assert set(facts) == {"host", "mem_total_bytes", "mem_available_bytes", "swap_total_bytes",
                          "hugepage_size_bytes", "hugepages_total", "transparent_hugepage",
                          "transparent_hugepage_defrag", "ndctl", "ipmctl_dimms", "ipmctl_regions"}
    assert "cat /proc/meminfo" in host.commands[0] and "lscpu" not in host.commands[0]
    with pytest.raises(ValueError, match="collector 'gpu' is not allowed; allowed: os, cpu"):
        collect_facts(host, only=("gpu",))


# ---------------------------------------------------------------- CPU, NUMA, cpufreq

def test_lscpu_nested_two_sockets() -> None:
    fields = parse_lscpu(fixture("lscpu_nested_2socket.json"))
    assert fields["Model name"] == "Intel(R) Xeon(R) Gold 6252 CPU @ 2.10GHz"
    topo = lscpu_facts(fields)
    assert (topo["sockets"], topo["cores_per_socket"], topo["threads_per_core"]) == (2, 24, 2)
    assert topo["cpu_max_mhz"] == 3700.0 and topo["hypervisor_vendor"] is None
    assert topo["caches"] == {"l1d": "1.5 MiB (48 instances)", "l1i": "1.5 MiB (48 instances)",
                              "l2": "48 MiB (48 instances)", "l3": "71.5 MiB (2 instances)"}
    nodes = numa_from_lscpu(fields)
    assert [n["node"] for n in nodes] == [0, 1]
    assert nodes[0]["cpus"] == [*range(24), *range(48, 72)]
    assert nodes[1]["cpus"] == [*range(24, 48), *range(72, 96)]
    assert nodes[0]["mem_total_bytes"] is None
    assert parse_lscpu("") == {}


def test_cpu_facts_prefers_lscpu_and_falls_back_to_cpuinfo() -> None:
    two = sections(lscpu=fixture("lscpu_nested_2socket.json"))
    facts = cpu_facts(two)
    assert facts["sockets"] == 2 and facts["cores_per_socket"] == 24
    assert facts["cpu_model"] == "Intel(R) Xeon(R) Processor"  # /proc/cpuinfo's model name first
    # No lscpu: topology unknown, sockets from the physical ids of /proc/cpuinfo.
    facts = cpu_facts(sections(lscpu=Output("", 127)))
    assert facts["sockets"] == 1 and facts["cores_per_socket"] is None
    # ARM: /proc/cpuinfo has no model name, lscpu does.
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n"
    assert cpu_facts(sections(cpuinfo=arm, lscpu=fixture("lscpu_nested_2socket.json")))["cpu_model"] \
        == "Intel(R) Xeon(R) Gold 6252 CPU @ 2.10GHz"


@pytest.mark.parametrize("text,cpus", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
    ("0", [0]),
    ("0 1", [0, 1]),  # cpufreq's affected_cpus
    ("", []),
])
def test_parse_cpulist(text: str, cpus: list[int]) -> None:
    assert parse_cpulist(text) == cpus


def test_numa_nodes_with_a_memory_only_node() -> None:
    text = "node0|0-3|16303412\nnode1|4-7|16510220\nnode2||263979008\n"
    nodes = parse_numa_nodes(text)
    assert [(n["node"], n["cpus"], n["mem_total_bytes"]) for n in nodes] == [
        (0, [0, 1, 2, 3], 16303412 * 1024), (1, [4, 5, 6, 7], 16510220 * 1024), (2, [], 263979008 * 1024)]
    facts = numa_facts(sections(numa=text))
    assert facts["numa_nodes"] == 3
    # No /sys/devices/system/node (kernel without NUMA): lscpu's node lines, else one node.
    assert numa_facts(sections(numa="", lscpu=fixture("lscpu_nested_2socket.json")))["numa_nodes"] == 2
    assert numa_facts(sections(numa="", lscpu=Output("", 127))) == {"numa_nodes": 1, "numa": []}


def test_cpufreq_policies() -> None:
    text = ("policy0|performance|intel_pstate|0 1\n"
            "policy2|powersave|intel_pstate|2 3\n"
            "policy4||acpi-cpufreq|4\n")
    policies = parse_cpufreq(text)
    assert policies["policy0"] == {"governor": "performance", "driver": "intel_pstate", "cpus": [0, 1]}
    assert policies["policy4"]["governor"] is None
    facts = cpufreq_facts(sections(cpufreq=text))
    assert facts["cpufreq_governor"] == "performance"
    assert set(facts["cpufreq_policies"]) == {"policy0", "policy2", "policy4"}
    assert cpufreq_facts(sections(cpufreq="")) == {"cpufreq_governor": None, "cpufreq_policies": None}


# ---------------------------------------------------------------- block devices, mounts, PMEM

def test_parse_lsblk_partitions_and_old_util_linux() -> None:
    text = json.dumps({"blockdevices": [{
        "name": "nvme0n1", "type": "disk", "size": "3200631791616", "rota": "0",
        "model": "SAMSUNG MZWLJ3T8HBLS-00007              ", "mountpoint": None, "sched": "none",
        "log-sec": "4096", "phy-sec": "4096", "tran": "nvme",
        "children": [{"name": "nvme0n1p1", "type": "part", "size": "1920379076608", "rota": "0",
                      "model": None, "mountpoint": "/mnt/nvme", "sched": "none", "log-sec": "4096",
                      "phy-sec": "4096", "tran": "nvme"}]}]})
    (dev,) = parse_lsblk(text)
    assert dev["size"] == 3200631791616 and dev["rota"] is False
    assert dev["model"] == "SAMSUNG MZWLJ3T8HBLS-00007"
    assert dev["logical_block_size"] == 4096 and dev["transport"] == "nvme" and dev["scheduler"] == "none"
    assert dev["children"][0]["mountpoint"] == "/mnt/nvme" and dev["children"][0]["type"] == "part"


def test_parse_findmnt_flattens_and_drops_pseudo_file_systems() -> None:
    text = json.dumps({"filesystems": [{
        "target": "/", "source": "/dev/vda", "fstype": "ext4", "options": "rw", "children": [
            {"target": "/proc", "source": "proc", "fstype": "proc", "options": "rw"},
            {"target": "/sys", "source": "sysfs", "fstype": "sysfs", "options": "rw", "children": [
                {"target": "/sys/fs/cgroup", "source": "cgroup2", "fstype": "cgroup2", "options": "rw"}]},
            {"target": "/mnt/pmem0", "source": "/dev/pmem0", "fstype": "xfs", "options": "rw,dax=always"},
            {"target": "/dev/hugepages", "source": "hugetlbfs", "fstype": "hugetlbfs", "options": "rw"}]}]})
    facts = mount_facts(sections(findmnt=Output(text, 0)))["mounts"]
    assert [m["target"] for m in facts] == ["/", "/mnt/pmem0", "/dev/hugepages"]
    assert facts[1] == {"target": "/mnt/pmem0", "source": "/dev/pmem0", "fstype": "xfs",
                        "options": "rw,dax=always"}


def test_parse_ndctl_regions_dimms_namespaces() -> None:
    nd = parse_ndctl(fixture("ndctl_list_NRD.json"))
    assert [d["dev"] for d in nd["dimms"]] == ["nmem1", "nmem0"]
    assert [r["dev"] for r in nd["regions"]] == ["region1", "region0"]
    by_dev = {n["dev"]: n for n in nd["namespaces"]}
    assert by_dev["namespace0.0"]["mode"] == "fsdax" and by_dev["namespace0.0"]["region"] == "region0"
    assert by_dev["namespace1.0"]["mode"] == "sector" and by_dev["namespace1.0"]["sector_size"] == 4096
    assert by_dev["namespace1.0"]["region"] == "region1"


def test_parse_ndctl_single_object_stream_and_empty() -> None:
    single = parse_ndctl(fixture("ndctl_list_N_single.json"))
    assert single["namespaces"][0]["blockdev"] == "pmem0" and "region" not in single["namespaces"][0]
    assert single["dimms"] == [] and single["regions"] == []
    stream = parse_ndctl(fixture("ndctl_list_buses_stream.json"))
    assert [n["dev"] for n in stream["namespaces"]] == ["namespace9.0", "namespace0.0"]
    assert parse_ndctl("") == parse_ndctl("[]") == {"dimms": [], "regions": [], "namespaces": []}
    as_array = parse_ndctl(json.dumps([json.loads(fixture("ndctl_list_N_single.json"))] * 2))
    assert len(as_array["namespaces"]) == 2


def test_parse_ipmctl_tables() -> None:
    dimms = parse_ipmctl_table(fixture("ipmctl_show_dimm.txt"))
    assert len(dimms) == 4
    assert dimms[0] == {"DimmID": "0x0001", "Capacity": "252.4 GiB", "HealthState": "Healthy",
                        "ActionRequired": "0", "LockState": "Disabled", "FWVersion": "01.02.00.5375"}
    regions = parse_ipmctl_table(fixture("ipmctl_show_region.txt"))
    assert [r["FreeCapacity"] for r in regions] == ["0.0 GiB", "1512.0 GiB"]
    assert regions[0]["PersistentMemoryType"] == "AppDirect"
    assert parse_ipmctl_table(fixture("ipmctl_show_region_none.txt")) == []


def test_pmem_facts_present_absent() -> None:
    s = sections(ndctl=Output(fixture("ndctl_list_NRD.json"), 0),
                 ipmctl_dimm=Output(fixture("ipmctl_show_dimm.txt"), 0),
                 ipmctl_region=Output(fixture("ipmctl_show_region_none.txt"), 0))
    facts = pmem_facts(s)
    assert len(facts["ndctl"]["namespaces"]) == 2 and len(facts["ipmctl_dimms"]) == 4
    assert facts["ipmctl_regions"] == []
    assert pmem_facts(sections(ndctl=Output("", 127)))["ndctl"] is None
    # ipmctl as a non-root user fails: unknown, not "no modules".
    assert pmem_facts(sections(ipmctl_dimm=Output("Error: insufficient privileges", 1)))["ipmctl_dimms"] is None


# ---------------------------------------------------------------- small parsers

def test_parse_os_release() -> None:
    rel = parse_os_release(parse_facts_output(LOCAL)["os_release"].text + "\n# a comment = not a key\n")
    assert rel["ID"] == "debian" and rel["VERSION_ID"] == "12"
    assert rel["HOME_URL"] == "https://www.debian.org/"  # '=' only split once, quotes stripped
    assert not any(k.startswith("#") for k in rel)
    assert parse_os_release('NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\n')["ID_LIKE"] == "debian"
    assert parse_os_release("") == {}


def test_parse_cmdline() -> None:
    assert parse_cmdline("BOOT_IMAGE=/vmlinuz root=UUID=x ro quiet transparent_hugepage=never\n") \
        == "BOOT_IMAGE=/vmlinuz root=UUID=x ro quiet transparent_hugepage=never"
    assert parse_cmdline("console=ttyS0 panic=1 -- --init-arg x") == "console=ttyS0 panic=1"
    assert parse_cmdline("\n") is None


CPUINFO = "".join(
    f"processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz\n"
    f"physical id\t: {n // 2}\ncore id\t\t: {n % 2}\nflags\t\t: fpu vme de pse tsc msr ht hypervisor lahf_lm\n\n"
    for n in range(4))


def test_parse_cpuinfo() -> None:
    assert parse_cpuinfo(CPUINFO) == {"cpu_model": "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz",
                                      "logical_cpus": 4, "sockets": 2, "hypervisor": True}
    assert parse_cpuinfo(CPUINFO.replace(" hypervisor", ""))["hypervisor"] is False
    assert parse_cpuinfo("") == {"cpu_model": None, "logical_cpus": 0, "sockets": None, "hypervisor": False}


def test_parse_meminfo() -> None:
    text = ("MemTotal:        8137892 kB\nMemAvailable:    6043120 kB\nSwapTotal:       2097148 kB\n"
            "HugePages_Total:     512\nHugepagesize:       2048 kB\n")
    assert parse_meminfo(text) == {"mem_total_bytes": 8137892 * 1024, "mem_available_bytes": 6043120 * 1024,
                                   "swap_total_bytes": 2097148 * 1024, "hugepages_total": 512,
                                   "hugepage_size_bytes": 2 * 2**20}
    assert parse_meminfo("MemTotal: 1024 kB\n") == {"mem_total_bytes": 1024 * 1024}


@pytest.mark.parametrize("text,expected", [
    ("always [madvise] never\n", "madvise"),
    ("[always] madvise never", "always"),
    ("always defer [defer+madvise] madvise never", "defer+madvise"),
    ("performance\n", "performance"),
    ("", None),
    ("   \n", None),
])
def test_parse_selected(text: str, expected: str | None) -> None:
    assert parse_selected(text) == expected


def test_version_parsers() -> None:
    maria = "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)\n"
    assert parse_mariadbd_version(maria) == "10.11.19-MariaDB-0+deb12u1"
    assert parse_sysbench_version("sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)") == "1.0.20"
    assert parse_fio_version("fio-3.33\n") == "3.33"
    assert parse_plain_version("76.1\n") == "76.1" and parse_plain_version("v78\n") == "78"
    for parse in (parse_mariadbd_version, parse_sysbench_version, parse_fio_version, parse_plain_version):
        assert parse("") is None
        assert parse("sh: 1: tool: not found") is None


def test_package_query_commands_and_parsing() -> None:
    deb = package_query_command("debian", ("sysbench", "fio"))
    assert deb == "dpkg-query -W -f='${Package}\\t${db:Status-Abbrev}\\t${Version}\\n' sysbench fio"
    rpm = package_query_command("rhel", ("sysbench",))
    assert rpm == "rpm -q --qf '%{NAME}\\tii\\t%{VERSION}-%{RELEASE}\\n' sysbench"
    with pytest.raises(ValueError, match="'arch' is not allowed; allowed: debian, rhel"):
        package_query_command("arch", ("x",))
    dpkg_out = ("fio\tii \t3.33-3\n"
                "mariadb-plugin-rocksdb\trc \t1:10.11.6-0+deb12u1\n"  # removed, config kept
                "sysstat\tun \t\n"
                "procps\tiU \t2:4.0.2-3\n")  # unpacked, not configured
    assert parse_package_versions(dpkg_out) == {"fio": "3.33-3"}
    rpm_out = "sysbench\tii\t1.0.20-6.el9\npackage galera is not installed\n"
    assert parse_package_versions(rpm_out) == {"sysbench": "1.0.20-6.el9"}
    assert set(FACT_PACKAGES) >= {"mariadb-server", "galera-4", "sysbench", "fio", "ndctl"}
