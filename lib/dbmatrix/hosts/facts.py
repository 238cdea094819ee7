"""Host facts as small collectors, each filling a dict (in the style of pyperf's metadata).

All the commands the collectors need run as ONE shell script on the host (one SSH round trip
instead of ~30): every command's output comes back in its own ``@@name rc`` section. Each
collector is a pure function of those sections, built on pure ``parse_*`` functions tested on
captured text (``tests/fixtures/hostinfo/``). A collector that fails records its error in
``collector_errors`` instead of hiding the others; a missing tool gives ``None`` facts.

Keys other code reads (do not rename): ``os_pretty``, ``kernel``, ``cpu_model``, ``online_cpus``,
``mem_total_bytes``, ``mariadb_version``, ``sysbench_version``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dbmatrix.hosts.mounts import PSEUDO_FSTYPES, parse_findmnt_json, real_mounts  # noqa: F401 - PSEUDO_FSTYPES re-exported
from dbmatrix.hosts.remote import Host
from dbmatrix.hosts.sections import NOT_FOUND, Section, parse_sections, sections_script  # noqa: F401

Facts = dict[str, Any]

# Packages whose versions are facts (Debian and RHEL names; those not installed are left out).
FACT_PACKAGES = ("mariadb-server", "mariadb-plugin-rocksdb", "mariadb-rocksdb-engine", "galera-4", "galera",
                 "sysbench", "fio", "ndctl", "ipmctl")


# ---------------------------------------------------------------- package queries (shared with hostsetup)

def package_query_command(family: str, packages: tuple[str, ...]) -> str:
    """Lines ``name<TAB>status<TAB>version``; status starts with ``ii`` when installed.

    Debian: dpkg-query (``rc``, ``un``... are not installed); RHEL: rpm, whose "package X is not
    installed" lines have no tab and are skipped by :func:`parse_package_versions`."""
    pkgs = shlex.join(packages)
    if family == "debian":
        return "dpkg-query -W -f='${Package}\\t${db:Status-Abbrev}\\t${Version}\\n' " + pkgs
    if family == "rhel":
        return "rpm -q --qf '%{NAME}\\tii\\t%{VERSION}-%{RELEASE}\\n' " + pkgs
    raise ValueError(f"family: {family!r} is not allowed; allowed: debian, rhel")


def parse_package_versions(text: str) -> dict[str, str]:
    """{package: version} of the installed packages in :func:`package_query_command` output."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[1].strip().startswith("ii") and parts[2].strip():
            out[parts[0].strip()] = parts[2].strip()
    return out


# ---------------------------------------------------------------- pure parsers

def parse_os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out


def parse_cmdline(text: str) -> str | None:
    """The kernel's parameters from /proc/cmdline (arguments after `` -- `` go to init: dropped)."""
    params = text.strip().split(" -- ", 1)[0].strip()
    return params or None


def parse_cpuinfo(text: str) -> dict[str, object]:
    models = re.findall(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    physical = set(re.findall(r"^physical id\s*:\s*(\d+)$", text, re.MULTILINE))
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    return {
        "cpu_model": models[0].strip() if models else None,
        "logical_cpus": len(re.findall(r"^processor\s*:", text, re.MULTILINE)),
        "sockets": len(physical) or None,
        "hypervisor": bool(flags and " hypervisor" in f" {flags.group(1)}"),
    }


def parse_lscpu(text: str) -> dict[str, str]:
    """``lscpu -J`` as {field: value}, the trailing ':' dropped; nested ``children`` (util-linux
    >= 2.39 groups fields under the vendor and model) are flattened."""
    if not text.strip():
        return {}

    def walk(items: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for item in items:
            if item.get("data") is not None:
                yield str(item["field"]).rstrip(":").strip(), str(item["data"]).strip()
            yield from walk(item.get("children") or [])

    return dict(walk(json.loads(text).get("lscpu", [])))


def _int(value: str | None) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(str(value).strip())
    except (TypeError, ValueError):
        return None


def lscpu_facts(fields: Mapping[str, str]) -> Facts:
    """CPU topology from :func:`parse_lscpu` (None where lscpu does not say)."""
    return {
        "cpu_vendor": fields.get("Vendor ID"),
        "lscpu_model": fields.get("Model name"),
        "sockets": _int(fields.get("Socket(s)")),
        "cores_per_socket": _int(fields.get("Core(s) per socket")),
        "threads_per_core": _int(fields.get("Thread(s) per core")),
        "cpu_max_mhz": _float(fields.get("CPU max MHz")),
        "hypervisor_vendor": fields.get("Hypervisor vendor"),
        "caches": {k.split()[0].lower(): v for k, v in fields.items() if re.fullmatch(r"L\d[di]?( cache)?", k)},
    }


def parse_cpulist(text: str) -> list[int]:
    """Kernel CPU list syntax (``0-3,8,10-11``) -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus: list[int] = []
    for part in text.replace(" ", ",").split(","):
        if not part.strip():
            continue
        lo, _, hi = part.strip().partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def parse_numa_nodes(text: str) -> list[dict[str, Any]]:
    """Lines ``nodeN|<cpulist>|<MemTotal kB>`` (:data:`NUMA_COMMAND`) -> one dict per node.

    A memory-only node (PMEM as system RAM, CXL) has an empty CPU list."""
    nodes = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not re.fullmatch(r"node\d+", parts[0]):
            continue
        kb = _int(parts[2])
        nodes.append({"node": int(parts[0][4:]), "cpus": parse_cpulist(parts[1]),
                      "mem_total_bytes": kb * 1024 if kb is not None else None})
    return sorted(nodes, key=lambda n: n["node"])


def numa_from_lscpu(fields: Mapping[str, str]) -> list[dict[str, Any]]:
    """Fallback without /sys/devices/system/node: ``NUMA nodeN CPU(s)`` fields (no memory sizes)."""
    nodes = []
    for key, value in fields.items():
        m = re.fullmatch(r"NUMA node(\d+) CPU\(s\)", key)
        if m:
            nodes.append({"node": int(m.group(1)), "cpus": parse_cpulist(value), "mem_total_bytes": None})
    return sorted(nodes, key=lambda n: n["node"])


def parse_cpufreq(text: str) -> dict[str, dict[str, Any]]:
    """Lines ``policyN|<governor>|<driver>|<affected cpus>`` (:data:`CPUFREQ_COMMAND`)
    -> {policyN: {governor, driver, cpus}}; a file the driver lacks gives None."""
    out = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 4 and re.fullmatch(r"policy\d+", parts[0]):
            out[parts[0]] = {"governor": parts[1] or None, "driver": parts[2] or None,
                             "cpus": parse_cpulist(parts[3])}
    return out


def parse_meminfo(text: str) -> dict[str, int]:
    out = {}
    for key, name in (("MemTotal", "mem_total_bytes"), ("MemAvailable", "mem_available_bytes"),
                      ("SwapTotal", "swap_total_bytes"), ("Hugepagesize", "hugepage_size_bytes")):
        m = re.search(rf"^{key}:\s*(\d+) kB", text, re.MULTILINE)
        if m:
            out[name] = int(m.group(1)) * 1024
    m = re.search(r"^HugePages_Total:\s*(\d+)", text, re.MULTILINE)
    if m:
        out["hugepages_total"] = int(m.group(1))
    return out


def parse_selected(text: str) -> str | None:
    """The bracketed choice of a sysfs setting such as `always [madvise] never`."""
    m = re.search(r"\[([\w+]+)\]", text)
    return m.group(1) if m else (text.strip() or None)


def parse_lsblk(text: str) -> list[dict[str, Any]]:
    """``lsblk -J -b -o NAME,TYPE,SIZE,ROTA,MODEL,MOUNTPOINT,SCHED,LOG-SEC,PHY-SEC,TRAN`` -> devices
    with snake_case keys; partitions stay nested under ``children``."""

    def norm(dev: Mapping[str, Any]) -> dict[str, Any]:
        model = dev.get("model")
        out = {
            "name": dev.get("name"),
            "type": dev.get("type"),
            "size": _int(dev.get("size")),
            "rota": _bool(dev.get("rota")),
            "model": model.strip() if isinstance(model, str) and model.strip() else None,
            "mountpoint": dev.get("mountpoint"),
            "scheduler": dev.get("sched"),
            "logical_block_size": _int(dev.get("log-sec")),
            "physical_block_size": _int(dev.get("phy-sec")),
            "transport": dev.get("tran"),
        }
        if dev.get("children"):
            out["children"] = [norm(c) for c in dev["children"]]
        return out

    return [norm(d) for d in json.loads(text).get("blockdevices", [])]


def _bool(value: Any) -> bool | None:
    """lsblk prints ROTA as true/false (JSON) or "1"/"0" (util-linux < 2.33)."""
    if isinstance(value, bool) or value is None:
        return value
    return str(value).strip() in ("1", "true")


def _json_values(text: str) -> Iterator[Any]:
    """Every JSON value in `text`: ndctl prints several top-level objects one after another."""
    dec, i = json.JSONDecoder(), 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return
        value, i = dec.raw_decode(text, i)
        yield value


def parse_ndctl(text: str) -> dict[str, list[dict[str, Any]]]:
    """``ndctl list -N -R -D`` -> {"dimms", "regions", "namespaces"} (empty lists without devices).

    ndctl prints ``{"dimms": [...], "regions": [{..., "namespaces": [...]}]}`` when several kinds
    are listed, a bare array or a single object when one kind is, one object per bus after
    another with ``-B``, and nothing when there are no devices. Namespaces are listed flat, each
    with its ``region`` when it came inside one (regions keep their own ``namespaces`` too)."""
    out: dict[str, list[dict[str, Any]]] = {"dimms": [], "regions": [], "namespaces": []}
    kinds = (("nmem", "dimms"), ("region", "regions"), ("namespace", "namespaces"))

    def add(obj: Mapping[str, Any], region: str | None = None) -> None:
        dev = str(obj.get("dev", ""))
        kind = next((key for prefix, key in kinds if dev.startswith(prefix)), None)
        if kind is not None:
            item = dict(obj)
            if kind == "namespaces" and region is not None:
                item.setdefault("region", region)
            out[kind].append(item)
        # The top-level object, buses and regions hold lists of further devices.
        for key in ("dimms", "regions", "namespaces"):
            for child in obj.get(key) or []:
                if isinstance(child, Mapping):
                    add(child, region=dev if kind == "regions" else region)

    for value in _json_values(text):
        for obj in value if isinstance(value, list) else [value]:
            if isinstance(obj, Mapping):
                add(obj)
    return out


def parse_ipmctl_table(text: str) -> list[dict[str, str]]:
    """An ipmctl text table (``ipmctl show -dimm`` / ``-region``) -> one dict per row.

    A header row of ``|``-separated names, a row of ``=``, then data rows. Messages such as
    "There are no Regions defined in the system." give an empty list."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.strip() or set(line.strip()) <= {"=", "-"}:
            continue
        if "|" not in line:
            continue
        cells = [c.strip() for c in line.split("|")]
        if header is None:
            header = cells
        else:
            rows.append(dict(zip(header, cells)))
    return rows


def parse_mariadbd_version(text: str) -> str | None:
    m = re.search(r"Ver\s+(\S+)", text)
    return m.group(1) if m else None


def parse_sysbench_version(text: str) -> str | None:
    m = re.search(r"sysbench\s+(\S+)", text)
    return m.group(1) if m else None


def parse_fio_version(text: str) -> str | None:
    m = re.search(r"fio-(\S+)", text)
    return m.group(1) if m else None


def parse_plain_version(text: str) -> str | None:
    """``ndctl --version`` prints just the version (``76.1``)."""
    m = re.match(r"\s*v?(\d[\w.+~-]*)\s*$", text)
    return m.group(1) if m else None


# ---------------------------------------------------------------- the facts script

NUMA_COMMAND = ('for n in /sys/devices/system/node/node[0-9]*; do [ -d "$n" ] || continue; '
                'echo "${n##*/}|$(cat "$n/cpulist")|$(awk \'/MemTotal/ {print $4}\' "$n/meminfo")"; done')
CPUFREQ_COMMAND = ('for p in /sys/devices/system/cpu/cpufreq/policy[0-9]*; do [ -d "$p" ] || continue; '
                   'echo "${p##*/}|$(cat "$p/scaling_governor")|$(cat "$p/scaling_driver")|'
                   '$(cat "$p/affected_cpus")"; done')
LSBLK_COMMAND = "lsblk -J -b -e 7 -o NAME,TYPE,SIZE,ROTA,MODEL,MOUNTPOINT,SCHED,LOG-SEC,PHY-SEC,TRAN"
PACKAGES_COMMAND = (f"if command -v dpkg-query >/dev/null; then {package_query_command('debian', FACT_PACKAGES)}; "
                    f"else {package_query_command('rhel', FACT_PACKAGES)}; fi")

# Section name -> command. Loop devices (major 7) are left out of lsblk: they are our own media
# (recorded with their recipe) or other tools' images, not the host's hardware.
COMMANDS: dict[str, str] = {
    "os_release": "cat /etc/os-release",
    "uname_r": "uname -r",
    "uname_v": "uname -v",
    "uname_m": "uname -m",
    "hostname": "hostname",
    "cmdline": "cat /proc/cmdline",
    "boot_id": "cat /proc/sys/kernel/random/boot_id",
    "cpuinfo": "cat /proc/cpuinfo",
    "nproc": "nproc",
    "lscpu": "lscpu -J",
    "numa": NUMA_COMMAND,
    "cpufreq": CPUFREQ_COMMAND,
    "meminfo": "cat /proc/meminfo",
    "thp_enabled": "cat /sys/kernel/mm/transparent_hugepage/enabled",
    "thp_defrag": "cat /sys/kernel/mm/transparent_hugepage/defrag",
    "lsblk": LSBLK_COMMAND,
    "findmnt": "findmnt -J -o TARGET,SOURCE,FSTYPE,OPTIONS",
    "ndctl": "ndctl list -N -R -D",
    "ipmctl_dimm": "ipmctl show -dimm",
    "ipmctl_region": "ipmctl show -region",
    "mariadbd": "mariadbd --version",
    "sysbench": "sysbench --version",
    "fio": "fio --version",
    "ndctl_version": "ndctl --version",
    "python": "python3 --version",
    "packages": PACKAGES_COMMAND,
}


Output = Section  # one command's stdout and exit code (127: the command does not exist)
Sections = Mapping[str, Output]

# PATH gains the sbin directories: a non-root SSH session often lacks them (mariadbd is in /usr/sbin).
_PRELUDE = 'PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"'


def facts_script(names: tuple[str, ...] | None = None) -> str:
    """One script printing ``@@name rc`` and then the stdout of each command (stderr dropped);
    see :func:`~dbmatrix.hosts.sections.sections_script`."""
    return sections_script({name: COMMANDS[name] for name in names or tuple(COMMANDS)}, prelude=_PRELUDE)


def parse_facts_output(text: str) -> dict[str, Output]:
    """Split :func:`facts_script` output into {name: Output} (only known command names are markers)."""
    return parse_sections(text, names=COMMANDS)


# ---------------------------------------------------------------- collectors (pure, on sections)

def _text(s: Sections, name: str) -> str:
    """A section's text; KeyError if the script did not report it (a collector error)."""
    return s[name].text


def os_facts(s: Sections) -> Facts:
    rel = parse_os_release(_text(s, "os_release"))
    return {"os_id": rel.get("ID"), "os_like": rel.get("ID_LIKE"), "os_pretty": rel.get("PRETTY_NAME"),
            "os_version": rel.get("VERSION_ID"), "kernel": _text(s, "uname_r").strip() or None,
            "kernel_build": _text(s, "uname_v").strip() or None,
            "kernel_cmdline": parse_cmdline(_text(s, "cmdline")),
            "arch": _text(s, "uname_m").strip() or None, "hostname": _text(s, "hostname").strip() or None,
            # Changes at every boot: runs with the same boot id shared one boot (dbmatrix.run.campaigns).
            "boot_id": (_text(s, "boot_id").strip() or None) if "boot_id" in s else None}


def cpu_facts(s: Sections) -> Facts:
    facts: Facts = dict(parse_cpuinfo(_text(s, "cpuinfo")))
    facts["online_cpus"] = _int(_text(s, "nproc")) or 0
    fields = parse_lscpu(_text(s, "lscpu")) if not s["lscpu"].missing else {}
    topo = lscpu_facts(fields)
    model = topo.pop("lscpu_model")
    facts["cpu_model"] = facts["cpu_model"] or model  # /proc/cpuinfo has no "model name" on ARM
    if topo["sockets"] is None:
        topo["sockets"] = facts["sockets"]
    facts.update(topo)
    return facts


def numa_facts(s: Sections) -> Facts:
    nodes = parse_numa_nodes(_text(s, "numa"))
    if not nodes and not s["lscpu"].missing:
        nodes = numa_from_lscpu(parse_lscpu(_text(s, "lscpu")))
    return {"numa_nodes": len(nodes) or 1, "numa": nodes}


def cpufreq_facts(s: Sections) -> Facts:
    """Governor per cpufreq policy; None in VMs without cpufreq. ``cpufreq_governor`` is the
    governor of CPU 0's policy (the key the runner has always recorded)."""
    policies = parse_cpufreq(_text(s, "cpufreq"))
    cpu0 = next((p for p in policies.values() if 0 in p["cpus"]), None)
    return {"cpufreq_governor": cpu0["governor"] if cpu0 else None,
            "cpufreq_policies": policies or None}


def memory_facts(s: Sections) -> Facts:
    facts: Facts = dict(parse_meminfo(_text(s, "meminfo")))
    facts["transparent_hugepage"] = parse_selected(_text(s, "thp_enabled"))
    facts["transparent_hugepage_defrag"] = parse_selected(_text(s, "thp_defrag"))
    return facts


def block_device_facts(s: Sections) -> Facts:
    out = s["lsblk"]
    return {"block_devices": parse_lsblk(out.text) if out.rc == 0 and out.text.strip() else None}


def mount_facts(s: Sections) -> Facts:
    out = s["findmnt"]
    if out.rc != 0 or not out.text.strip():
        return {"mounts": None}
    return {"mounts": [m.as_fact() for m in real_mounts(parse_findmnt_json(out.text))]}


def pmem_facts(s: Sections) -> Facts:
    """PMEM inventories: None where the tool is missing or failed (ipmctl needs root), empty lists
    where it found no devices."""
    nd, dimm, region = s["ndctl"], s["ipmctl_dimm"], s["ipmctl_region"]
    return {"ndctl": parse_ndctl(nd.text) if nd.rc == 0 else None,
            "ipmctl_dimms": parse_ipmctl_table(dimm.text) if dimm.rc == 0 else None,
            "ipmctl_regions": parse_ipmctl_table(region.text) if region.rc == 0 else None}


def version_facts(s: Sections) -> Facts:
    packages = parse_package_versions(_text(s, "packages"))
    return {
        "mariadb_version": parse_mariadbd_version(_text(s, "mariadbd")),
        "sysbench_version": parse_sysbench_version(_text(s, "sysbench")),
        "fio_version": parse_fio_version(_text(s, "fio")),
        "ndctl_version": parse_plain_version(_text(s, "ndctl_version")),
        "galera_version": packages.get("galera-4") or packages.get("galera"),
        "package_versions": packages,
        "python_remote": _text(s, "python").strip() or None,
    }


@dataclass(frozen=True)
class Collector:
    sections: tuple[str, ...]
    facts: Callable[[Sections], Facts]


COLLECTORS: dict[str, Collector] = {
    "os": Collector(("os_release", "uname_r", "uname_v", "uname_m", "hostname", "cmdline", "boot_id"), os_facts),
    "cpu": Collector(("cpuinfo", "nproc", "lscpu"), cpu_facts),
    "numa": Collector(("numa", "lscpu"), numa_facts),
    "cpufreq": Collector(("cpufreq",), cpufreq_facts),
    "memory": Collector(("meminfo", "thp_enabled", "thp_defrag"), memory_facts),
    "block_devices": Collector(("lsblk",), block_device_facts),
    "mounts": Collector(("findmnt",), mount_facts),
    "pmem": Collector(("ndctl", "ipmctl_dimm", "ipmctl_region"), pmem_facts),
    "versions": Collector(("mariadbd", "sysbench", "fio", "ndctl_version", "python", "packages"), version_facts),
}


def facts_from_sections(sections: Sections, host: str, only: tuple[str, ...] | None = None) -> Facts:
    """Run the collectors on gathered sections; one failing collector never hides the others."""
    facts: Facts = {"host": host}
    errors = {}
    for name in only or tuple(COLLECTORS):
        try:
            facts.update(COLLECTORS[name].facts(sections))
        except Exception as exc:  # noqa: BLE001 - a missing tool or odd output must not hide the others
            errors[name] = f"{type(exc).__name__}: {exc}"
    if errors:
        facts["collector_errors"] = errors
    return facts


def collect_facts(host: Host, only: tuple[str, ...] | None = None) -> Facts:
    """Host facts in one round trip: the script of the wanted collectors' commands, then the parsers."""
    for name in only or ():
        if name not in COLLECTORS:
            raise ValueError(f"collector {name!r} is not allowed; allowed: {', '.join(COLLECTORS)}")
    names = tuple(dict.fromkeys(sec for c in (only or tuple(COLLECTORS)) for sec in COLLECTORS[c].sections))
    sections = host.run_sections({name: COMMANDS[name] for name in names}, prelude=_PRELUDE, timeout=120)
    return facts_from_sections(sections, host.name, only)
