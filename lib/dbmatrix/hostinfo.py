"""Host facts as small collectors, each filling a dict (in the style of pyperf's metadata).

Each collector runs commands through a :class:`Host`; the parsing is pure and tested on text.
A collector that fails records its error instead of stopping the others.
"""

from __future__ import annotations

import json
import re
from typing import Callable

from .remote import Host


def parse_os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out


def parse_cpuinfo(text: str) -> dict[str, object]:
    models = re.findall(r"^model name\s*:\s*(.+)$", text, re.M)
    physical = set(re.findall(r"^physical id\s*:\s*(\d+)$", text, re.M))
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    return {
        "cpu_model": models[0].strip() if models else None,
        "logical_cpus": len(re.findall(r"^processor\s*:", text, re.M)),
        "sockets": len(physical) or None,
        "hypervisor": bool(flags and " hypervisor" in f" {flags.group(1)}"),
    }


def parse_meminfo(text: str) -> dict[str, int]:
    out = {}
    for key, name in (("MemTotal", "mem_total_bytes"), ("MemAvailable", "mem_available_bytes"),
                      ("SwapTotal", "swap_total_bytes")):
        m = re.search(rf"^{key}:\s*(\d+) kB", text, re.M)
        if m:
            out[name] = int(m.group(1)) * 1024
    return out


def parse_selected(text: str) -> str | None:
    """The bracketed choice of a sysfs setting such as `always [madvise] never`."""
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else (text.strip() or None)


def parse_mariadbd_version(text: str) -> str | None:
    m = re.search(r"Ver\s+(\S+)", text)
    return m.group(1) if m else None


def parse_sysbench_version(text: str) -> str | None:
    m = re.search(r"sysbench\s+(\S+)", text)
    return m.group(1) if m else None


def _out(host: Host, cmd: str) -> str:
    return host.run(cmd, check=False).stdout


def collect_os(host: Host) -> dict[str, object]:
    rel = parse_os_release(_out(host, "cat /etc/os-release"))
    return {"os_id": rel.get("ID"), "os_like": rel.get("ID_LIKE"), "os_pretty": rel.get("PRETTY_NAME"),
            "os_version": rel.get("VERSION_ID"), "kernel": _out(host, "uname -r").strip(),
            "arch": _out(host, "uname -m").strip(), "hostname": _out(host, "hostname").strip()}


def collect_cpu(host: Host) -> dict[str, object]:
    facts = parse_cpuinfo(_out(host, "cat /proc/cpuinfo"))
    facts["online_cpus"] = int(_out(host, "nproc").strip() or 0)
    nodes = _out(host, "ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null").split()
    facts["numa_nodes"] = len(nodes) or 1
    gov = _out(host, "cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null").strip()
    facts["cpufreq_governor"] = gov or None
    return facts


def collect_memory(host: Host) -> dict[str, object]:
    facts: dict[str, object] = dict(parse_meminfo(_out(host, "cat /proc/meminfo")))
    facts["transparent_hugepage"] = parse_selected(
        _out(host, "cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null"))
    return facts


def collect_block_devices(host: Host) -> dict[str, object]:
    text = _out(host, "lsblk -J -b -o NAME,TYPE,SIZE,ROTA,MODEL,MOUNTPOINT 2>/dev/null")
    try:
        return {"block_devices": json.loads(text).get("blockdevices", [])}
    except json.JSONDecodeError:
        return {"block_devices": None}


def collect_versions(host: Host) -> dict[str, object]:
    return {
        "mariadb_version": parse_mariadbd_version(_out(host, "mariadbd --version 2>/dev/null")),
        "sysbench_version": parse_sysbench_version(_out(host, "sysbench --version 2>/dev/null")),
        "python_remote": _out(host, "python3 --version 2>/dev/null").strip() or None,
    }


COLLECTORS: dict[str, Callable[[Host], dict[str, object]]] = {
    "os": collect_os,
    "cpu": collect_cpu,
    "memory": collect_memory,
    "block_devices": collect_block_devices,
    "versions": collect_versions,
}


def collect_facts(host: Host) -> dict[str, object]:
    facts: dict[str, object] = {"host": host.name}
    errors = {}
    for name, collector in COLLECTORS.items():
        try:
            facts.update(collector(host))
        except Exception as exc:  # a missing tool must not hide the other facts
            errors[name] = f"{type(exc).__name__}: {exc}"
    if errors:
        facts["collector_errors"] = errors
    return facts
