"""CPU limits on server processes through the cgroup CPU controller: cgroup v2 ``cpu.max`` or, where the
cpu controller is bound to a v1 hierarchy (this machine: cgroup v1 ``cpu`` at /sys/fs/cgroup/cpu, the v2
mount at /sys/fs/cgroup/unified has no controllers), ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (the same
CFS bandwidth limit under its v1 names).

A limit is a percentage of one CPU (100 = one CPU's time per period, 50 = half of one, 150 = one and a half
across threads). A server joins its group through :func:`join_prefix` (a shell that writes its PID into the
group, then execs the server, which keeps the PID), so everything it runs is limited. Galera studies use it to
make their followers' appliers the bottleneck (seed 002: small nodes limited by applying writesets), with the
limit chosen by the study's calibration (``topology.calibrate: {limit: cpu_max, ...}``).
Pure command builders and parsers, plus :func:`detect_cpu_layout`, :func:`set_cpu_limit` and
:func:`read_cpu_limit` through a :class:`~dbmatrix.hosts.remote.Host`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbmatrix.hosts.media.core import CGROUP_PARENT, MediaError
from dbmatrix.hosts.media.throttle import read_cgroup_mounts
from dbmatrix.hosts.remote import Host

q = shlex.quote
PERIOD_US = 100_000  # the CFS period the quota is a share of (the kernel's default)
MIN_QUOTA_US = 1000  # the kernel refuses quotas below 1 ms


@dataclass(frozen=True)
class CpuLayout:
    """Where the cpu controller lives on a host: a cgroup v2 mount with ``cpu`` enabled, or the v1 ``cpu``
    hierarchy."""

    version: int  # 1 or 2
    root: str

    def group(self, name: str) -> str:
        return f"{self.root}/{CGROUP_PARENT}/{name}"


def follower_group(index: int) -> str:
    """The cgroup name of Galera node `index` (its own limit: each follower stands for one small host)."""
    return f"galera-node{index}-cpu"


def quota_us(pct: int, period_us: int = PERIOD_US) -> int:
    """The CFS quota of `pct` % of one CPU per period (at least the kernel's 1 ms)."""
    if isinstance(pct, bool) or not isinstance(pct, int) or pct <= 0:
        raise MediaError(f"cpu limit {pct!r}: must be a positive integer percentage of one CPU")
    return max(MIN_QUOTA_US, pct * period_us // 100)


def choose_cpu_layout(mounts: str, controllers: Mapping[str, str]) -> CpuLayout:
    """The cpu controller's hierarchy from /proc/self/mounts and each cgroup2 mount's controllers: v2 where
    it offers ``cpu``, else the v1 hierarchy mounted with the ``cpu`` option."""
    v1 = v2 = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup2" and "cpu" in controllers.get(parts[1], "").split() and v2 is None:
            v2 = CpuLayout(2, parts[1])
        if parts[2] == "cgroup" and "cpu" in parts[3].split(",") and v1 is None:
            v1 = CpuLayout(1, parts[1])
    chosen = v2 or v1
    if chosen is None:
        have = [f"{p.split()[2]} at {p.split()[1]}" for p in mounts.splitlines()
                if len(p.split()) > 2 and p.split()[2] in ("cgroup", "cgroup2")]
        raise MediaError("no cgroup cpu controller (v2 cpu.max or v1 cpu.cfs_quota_us) to limit the followers' "
                         f"CPU; cgroup mounts: {', '.join(have) or 'none'}")
    return chosen


def detect_cpu_layout(host: Host) -> CpuLayout:
    mounts, controllers = read_cgroup_mounts(host)
    try:
        return choose_cpu_layout(mounts, controllers)
    except MediaError as exc:
        raise MediaError(f"{exc} on host {host.name}") from None


def ensure_command(layout: CpuLayout, group: str) -> str:
    """Create the group (v2: enable the cpu controller for the children of the root and of dbmatrix/)."""
    parent = f"{layout.root}/{CGROUP_PARENT}"
    if layout.version == 1:
        return f"mkdir -p {q(group)}"
    return (f"grep -qw cpu {q(layout.root + '/cgroup.subtree_control')} || echo +cpu > "
            f"{q(layout.root + '/cgroup.subtree_control')}; mkdir -p {q(parent)} && "
            f"(grep -qw cpu {q(parent + '/cgroup.subtree_control')} || echo +cpu > "
            f"{q(parent + '/cgroup.subtree_control')}) && mkdir -p {q(group)}")


def limit_command(layout: CpuLayout, group: str, pct: int | None, period_us: int = PERIOD_US) -> str:
    """Set the group's limit to `pct` % of one CPU (None: no limit); it applies at once to its processes."""
    quota = "max" if pct is None else str(quota_us(pct, period_us))
    if layout.version == 2:
        return f'echo "{quota} {period_us}" > {q(group + "/cpu.max")}'
    return (f"echo {period_us} > {q(group + '/cpu.cfs_period_us')} && "
            f"echo {-1 if pct is None else quota} > {q(group + '/cpu.cfs_quota_us')}")


def read_command(layout: CpuLayout, group: str) -> str:
    if layout.version == 2:
        return f"cat {q(group + '/cpu.max')}"
    return f"cat {q(group + '/cpu.cfs_quota_us')} {q(group + '/cpu.cfs_period_us')}"


def parse_limit(layout: CpuLayout, text: str) -> int | None:
    """The limit in % of one CPU from :func:`read_command`'s output (None: unlimited)."""
    words = text.split()
    if len(words) != 2:
        raise MediaError(f"cpu limit: cannot read {text!r}")
    quota, period = words
    if quota in ("max", "-1"):
        return None
    return round(int(quota) * 100 / int(period))


def set_cpu_limit(host: Host, layout: CpuLayout, names: Sequence[str], pct: int | None) -> dict[str, Any]:
    """Create the groups `names` (idempotent), set each to `pct` % of one CPU and read it back; returns the
    state a record keeps (version, groups, limit)."""
    groups = [layout.group(n) for n in names]
    for g in groups:
        host.run(ensure_command(layout, g))
        host.run(limit_command(layout, g, pct))
        got = parse_limit(layout, host.run(read_command(layout, g)).stdout)
        if got != pct:
            raise MediaError(f"cpu limit: set {pct} % of one CPU on {g} but it reads {got}")
    return {"version": layout.version, "groups": groups, "cpu_pct": pct, "period_us": PERIOD_US,
            "quota_us": None if pct is None else quota_us(pct)}


def read_cpu_limit(host: Host, layout: CpuLayout, name: str) -> int | None:
    return parse_limit(layout, host.run(read_command(layout, layout.group(name))).stdout)


def stat_command(layout: CpuLayout, name: str) -> str:
    return f"cat {q(layout.group(name) + '/cpu.stat')}"


def parse_stat(text: str) -> dict[str, int]:
    """``cpu.stat`` as numbers: nr_periods, nr_throttled and the throttled time in microseconds
    (``throttled_usec`` in v2; v1's ``throttled_time`` is in nanoseconds)."""
    raw = {k: int(v) for k, v in (line.split() for line in text.splitlines() if len(line.split()) == 2)
           if v.lstrip("-").isdigit()}
    usec = raw.get("throttled_usec", raw.get("throttled_time", 0) // 1000)
    return {"nr_periods": raw.get("nr_periods", 0), "nr_throttled": raw.get("nr_throttled", 0),
            "throttled_usec": usec}


def stat_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, Any]:
    """What the limit did between two :func:`parse_stat` readings: periods, throttled periods and their share,
    throttled seconds."""
    d = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in ("nr_periods", "nr_throttled", "throttled_usec")}
    return {**d, "throttled_pct": round(100 * d["nr_throttled"] / d["nr_periods"], 2) if d["nr_periods"] > 0
            else None, "throttled_s": round(d["throttled_usec"] / 1e6, 3)}


def read_stat(host: Host, layout: CpuLayout, name: str) -> dict[str, int]:
    return parse_stat(host.run(stat_command(layout, name)).stdout)


def join_prefix(layout: CpuLayout, name: str) -> list[str]:
    """Argv put before a server command so it runs in the group: the shell writes its PID into the group's
    ``cgroup.procs`` and execs the server (exit 125 when the group does not exist)."""
    g = layout.group(name)
    script = (f"if [ -d {q(g)} ]; then echo $$ > {q(g + '/cgroup.procs')} || exit 125; exec \"$@\"; fi; "
              f"echo 'dbmatrix: no cpu cgroup {g} (the calibration creates it)' >&2; exit 125")
    return ["sh", "-c", script, "dbmatrix-cpu"]


def teardown_command(layout: CpuLayout, names: Sequence[str]) -> str:
    """Remove the groups (empty ones only: rmdir fails while a process is inside)."""
    return "; ".join(f"rmdir {q(layout.group(n))} 2>/dev/null" for n in names) + "; true"


def teardown_followers(host: Host) -> None:
    """Remove the Galera followers' CPU groups a study left (empty ones; none, or no cpu controller: nothing)."""
    try:
        layout = detect_cpu_layout(host)
    except MediaError:
        return
    pattern = f"{q(layout.root + '/' + CGROUP_PARENT)}/{follower_group(0).replace('0', '*', 1)}"
    host.run(f"for g in {pattern}; do [ -d \"$g\" ] && rmdir \"$g\" 2>/dev/null; done; true", check=False)
