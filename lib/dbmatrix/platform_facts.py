"""The platform a run was measured on, and what changed in it between campaigns (pure).

Campaigns pool into claims as replications of one experiment on one kind of machine. A campaign on another VM
type (another L2 size, kernel build or CPU count) shifts every cell at once: the campaign block absorbs a
shift, but the reader must know it happened, and a 2-3x change (seen between the paper reference's campaigns
1-2 and 3) is not the "between-session noise" the campaign level is meant to hold. Each run record keeps its
host's facts (:mod:`dbmatrix.hosts.facts`); :func:`platform_of` keeps the few that define the platform, split
into hardware and software, and :func:`platform_changes` says, per host, which of them differ between
campaigns and where.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

#: (key, what a reader calls it, hardware?) in the order they are printed
FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("cpu", "CPU", True),
    ("cpus", "logical CPUs", True),
    ("l1d", "L1d cache", True),
    ("l2", "L2 cache", True),
    ("l3", "L3 cache", True),
    ("memory", "memory", True),
    ("hypervisor", "hypervisor", True),
    ("kernel", "kernel", False),
    ("kernel_cmdline", "kernel command line", False),
    ("os", "OS", False),
    ("mariadb", "MariaDB", False),
    ("sysbench", "sysbench", False),
)
LABELS = {k: label for k, label, _ in FIELDS}
HARDWARE = frozenset(k for k, _, hw in FIELDS if hw)


def _s(v: Any) -> str:
    return "" if v is None else str(v).strip()


def platform_of(facts: Mapping[str, Any]) -> dict[str, str]:
    """The platform-defining facts of one host-facts record (missing ones are left out, never guessed)."""
    caches = facts.get("caches") or {}
    mem = facts.get("mem_total_bytes")
    cmdline = _s(facts.get("kernel_cmdline"))
    hyper = facts.get("hypervisor_vendor") or ("yes" if facts.get("hypervisor") else "")
    out = {
        "cpu": " ".join(x for x in (_s(facts.get("cpu_vendor")), _s(facts.get("cpu_model"))) if x),
        "cpus": _s(facts.get("logical_cpus")),
        "l1d": _s(caches.get("l1d")), "l2": _s(caches.get("l2")), "l3": _s(caches.get("l3")),
        # rounded: the kernel's total moves by a few pages between boots of one VM type
        "memory": f"{round(float(mem) / 2**30)} GiB" if isinstance(mem, int | float) and mem > 0 else "",
        "hypervisor": _s(hyper),
        "kernel": _s(facts.get("kernel")),
        "kernel_cmdline": ("sha256:" + hashlib.sha256(cmdline.encode()).hexdigest()[:8]) if cmdline else "",
        "os": _s(facts.get("os_pretty")),
        "mariadb": _s(facts.get("mariadb_version")),
        "sysbench": _s(facts.get("sysbench_version")),
    }
    return {k: v for k, v in out.items() if v}


def record_platforms(records: Iterable[Any]) -> dict[int, dict[str, list[dict[str, str]]]]:
    """campaign -> host -> the distinct platforms the run records (``campaign``, ``host``, ``host_facts``) name,
    in the order first seen: what :func:`platform_changes` reads."""
    out: dict[int, dict[str, list[dict[str, str]]]] = {}
    for m in records:
        p = platform_of(m.host_facts or {})
        seen = out.setdefault(int(m.campaign), {}).setdefault(str(m.host), [])
        if p and p not in seen:
            seen.append(p)
    return out


def _ranges(numbers: Iterable[int]) -> str:
    """1, 2, 3, 5 -> '1-3, 5'."""
    xs = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        parts.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(parts)


def platform_changes(by_campaign: Mapping[int, Mapping[str, Iterable[Mapping[str, str]]]]) -> list[str]:
    """Sentences naming each platform fact that differs between (or within) campaigns, per host.

    `by_campaign`: campaign -> host -> the platforms (:func:`platform_of`) its runs on that host recorded.
    A fact only some campaigns recorded is not a difference (older records lack it). Empty: nothing changed.
    """
    values: dict[str, dict[str, dict[str, set[int]]]] = {}  # host -> key -> value -> campaigns
    for k, hosts in by_campaign.items():
        for host, platforms in hosts.items():
            for p in platforms:
                for key, v in p.items():
                    values.setdefault(host, {}).setdefault(key, {}).setdefault(v, set()).add(int(k))
    out = []
    many_hosts = len(values) > 1
    for host in sorted(values):
        for hardware in (True, False):
            diffs = []
            for key, _, _ in FIELDS:
                vals = values[host].get(key, {})
                if (key in HARDWARE) != hardware or len(vals) < 2:
                    continue
                where = sorted(vals.items(), key=lambda kv: (min(kv[1]), kv[0]))
                diffs.append(f"{LABELS[key]} " + ", ".join(
                    f"{v} in {'campaign' if len(c) == 1 else 'campaigns'} {_ranges(c)}" for v, c in where))
            if diffs:
                what = "hardware" if hardware else "software"
                out.append(f"{what} differs{f' on {host}' if many_hosts else ''}: " + "; ".join(diffs))
    return out


def platform_summary(by_campaign: Mapping[int, Mapping[str, Iterable[Mapping[str, str]]]]) -> str:
    """One line for a study whose platform did not change: its hardware, in a few words."""
    for k in sorted(by_campaign):
        for host in sorted(by_campaign[k]):
            for p in by_campaign[k][host]:
                bits = [p.get("cpu", ""), f"{p['cpus']} CPUs" if p.get("cpus") else "",
                        f"L2 {p['l2']}" if p.get("l2") else "", p.get("memory", ""),
                        f"kernel {p['kernel']}" if p.get("kernel") else ""]
                return ", ".join(b for b in bits if b)
    return ""


__all__ = ["FIELDS", "HARDWARE", "platform_changes", "platform_of", "platform_summary", "record_platforms"]
