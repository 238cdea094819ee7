"""Throttled media (kind ``throttled``): blk-throttle limits on the base medium's whole disk in a
cgroup (v1 ``blkio.throttle.*`` or v2 ``io.max``), the prefix that starts a server inside it, and reading
and changing a limit while it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import (
    CGROUP_PARENT,
    V1_DEFAULT,
    V1_LIMIT_FILES,
    V2_DEFAULT,
    V2_LIMIT_KEYS,
    V2_ROOTS,
    CgroupLayout,
    Checks,
    MediaError,
    MediumState,
    Step,
    checked,
    q,
)
from dbmatrix.hosts.media.devices import disk_expr
from dbmatrix.hosts.remote import Host


def throttle_steps(m: Medium, layout: CgroupLayout, owner: str | None) -> list[Step]:
    o = m.options
    cg = layout.group(m.name)
    devnum = f'$(cat /sys/class/block/"$(basename "$(readlink -f {disk_expr(m)})")"/dev)'
    steps: list[Step] = []
    if layout.version == 1:
        steps.append(Step("create the blkio cgroup", f"mkdir -p {q(cg)}", f"test -d {q(cg)}"))
        for key, fname in V1_LIMIT_FILES.items():
            if o[key] is not None:
                steps.append(Step(f"set {key}", f'echo "{devnum} {o[key]}" > {q(cg + "/" + fname)}'))
        procs = [f"{cg}/cgroup.procs", f"{cg}/tasks"]
    else:
        parent = f"{layout.root}/{CGROUP_PARENT}"
        for d in (layout.root, parent):
            if d != layout.root:
                steps.append(Step(f"create {d}", f"mkdir -p {q(d)}", f"test -d {q(d)}"))
            ctl = f"{d}/cgroup.subtree_control"
            steps.append(Step(f"enable the io controller below {d}", f"echo +io > {q(ctl)}",
                              f"grep -qw io {q(ctl)}"))
        steps.append(Step("create the io cgroup", f"mkdir -p {q(cg)}", f"test -d {q(cg)}"))
        limits = " ".join(f"{V2_LIMIT_KEYS[k]}={o[k]}" for k in V2_LIMIT_KEYS if o[k] is not None)
        steps.append(Step("set io.max", f'echo "{devnum} {limits}" > {q(cg + "/io.max")}'))
        procs = [f"{cg}/cgroup.procs"]
    if owner is not None:
        steps.append(Step(f"let {owner} join the cgroup", f"chown {q(owner)} {' '.join(q(p) for p in procs)}"))
    return steps


def cgroup_layout_for(medium: Medium, layout: CgroupLayout | None = None) -> CgroupLayout:
    """The layout a throttled medium's plan uses: the host's (from :func:`detect_cgroup_layout`)
    when given, else the standard mount of the version the recipe names (``auto``: v2)."""
    if layout is not None:
        return layout
    return V1_DEFAULT if medium.options.get("cgroup") == "v1" else V2_DEFAULT


def candidate_groups(medium: Medium) -> list[str]:
    """Every cgroup directory a throttled medium may use (v2 mounts first, as detection prefers)."""
    version = medium.options.get("cgroup", "auto")
    v2 = [CgroupLayout(2, r).group(medium.name) for r in V2_ROOTS]
    v1 = [V1_DEFAULT.group(medium.name)]
    return {"v1": v1, "v2": v2}.get(version, v2 + v1)


def limit_command(throttle: Mapping[str, Any], key: str, value: int) -> str:
    """The shell command that sets one limit (read_iops, write_iops, read_bps, write_bps) of a throttled
    medium's cgroup on its disk, from the state :func:`verify` recorded; it takes effect at once for the
    processes already in the cgroup."""
    if key not in V1_LIMIT_FILES:
        raise MediaError(f"throttle limit {key!r}; allowed: {', '.join(V1_LIMIT_FILES)}")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MediaError(f"throttle limit {key}={value!r}: must be a positive integer")
    dev, cg = throttle.get("device"), throttle.get("cgroup")
    if not dev or not cg:
        raise MediaError(f"throttle state without a device or cgroup ({dict(throttle)}): run media.ensure first")
    if throttle.get("version") == 2:
        return f'echo "{dev} {V2_LIMIT_KEYS[key]}={value}" > {q(cg + "/io.max")}'
    return f'echo "{dev} {value}" > {q(cg + "/" + V1_LIMIT_FILES[key])}'


def read_limit(throttle: Mapping[str, Any], key: str, text: str) -> int | None:
    """The limit `key` on the medium's disk from the text of its cgroup file (v1 ``blkio.throttle.*`` or
    v2 ``io.max``); None when unset."""
    dev = str(throttle.get("device"))
    if throttle.get("version") == 2:
        return parse_io_max(text).get(dev, {}).get(V2_LIMIT_KEYS[key])
    return parse_v1_limits(text).get(dev)


def set_throttle_limit(host: Host, state: MediumState, key: str, value: int) -> MediumState:
    """Set one limit of a throttled medium on `host` and read it back; the state with the new value."""
    if not state.throttle:
        raise MediaError(f"medium {state.name}: not throttled (kind {state.kind}), no limit to set")
    t = state.throttle
    host.run(limit_command(t, key, value))
    path = f"{t['cgroup']}/io.max" if t.get("version") == 2 else f"{t['cgroup']}/{V1_LIMIT_FILES[key]}"
    got = read_limit(t, key, host.run(f"cat {q(path)}").stdout)
    if got != value:
        raise MediaError(f"medium {state.name}: set {key}={value} on {t.get('device')} but {path} reads {got}")
    return replace(state, throttle={**t, key: value})


def launch_prefix(medium: Medium, state: MediumState | None = None) -> list[str]:
    """Argv to put before the server command so it runs inside the medium's throttle cgroup.

    ``sh -c '…; echo $$ > <cgroup>/cgroup.procs; exec "$@"' dbmatrix-throttle mariadbd …``: the
    shell joins the cgroup and execs the server, which keeps the PID (and everything it starts is
    throttled too). Empty for media without throttling. It tries the cgroup directories the
    medium may use (or exactly the one in `state`) and fails with exit 125 when none exists.
    """
    m = checked(medium)
    if m.kind != "throttled":
        return []
    groups = [state.throttle["cgroup"]] if state is not None and state.throttle else candidate_groups(m)
    script = (f"for g in {' '.join(q(g) for g in groups)}; do "
              'if [ -d "$g" ]; then echo $$ > "$g/cgroup.procs" || exit 125; exec "$@"; fi; done; '
              f"echo 'dbmatrix: no throttle cgroup for medium {m.name} (run media.ensure first)' >&2; "
              "exit 125")
    return ["sh", "-c", script, "dbmatrix-throttle"]


def parse_v1_limits(text: str) -> dict[str, int]:
    """{major:minor: value} from a ``blkio.throttle.*_device`` file."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def parse_io_max(text: str) -> dict[str, dict[str, int | None]]:
    """{major:minor: {riops: 300, wbps: None (max), …}} from a cgroup v2 ``io.max`` file."""
    out: dict[str, dict[str, int | None]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        vals: dict[str, int | None] = {}
        for kv in parts[1:]:
            k, _, v = kv.partition("=")
            vals[k] = None if v == "max" else int(v)
        out[parts[0]] = vals
    return out


def choose_cgroup_layout(mounts: str, controllers: Mapping[str, str], want: str = "auto") -> CgroupLayout:
    """The hierarchy to throttle in, from /proc/self/mounts and each cgroup2 mount's controllers.

    ``auto`` prefers v2 with the io controller (it throttles writeback too), then v1 blkio."""
    v1 = v2 = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup" and "blkio" in parts[3].split(",") and v1 is None:
            v1 = CgroupLayout(1, parts[1])
        if parts[2] == "cgroup2" and "io" in controllers.get(parts[1], "").split() and v2 is None:
            v2 = CgroupLayout(2, parts[1])
    chosen = {"v1": v1, "v2": v2}.get(want, v2 or v1)
    if chosen is None:
        have = [f"{p.split()[2]} at {p.split()[1]}" for p in mounts.splitlines()
                if len(p.split()) > 2 and p.split()[2] in ("cgroup", "cgroup2")]
        need = {"v1": "cgroup v1 blkio hierarchy", "v2": "cgroup2 hierarchy with the io controller"}
        raise MediaError(f"no {need.get(want, 'blkio (v1) or io (v2) cgroup controller')} for throttling; "
                         f"cgroup mounts: {', '.join(have) or 'none'}")
    return chosen


def check_throttle(m: Medium, block: Mapping[str, str], sections: Mapping[str, str], layout: CgroupLayout,
                    c: Checks) -> dict[str, Any]:
    o = m.options
    cg = layout.group(m.name)
    devnum = block.get("devnum", "")
    info: dict[str, Any] = {"cgroup": cg, "version": layout.version, "device": devnum,
                            **{k: o[k] for k in V1_LIMIT_FILES}}
    if not c.expect(sections.get("cgroup", "").strip() == "exists", f"cgroup {cg}", f"cgroup {cg} does not exist"):
        return info
    if layout.version == 1:
        for key in V1_LIMIT_FILES:
            got = parse_v1_limits(sections.get(f"limit:{key}", "")).get(devnum)
            if o[key] is not None:
                c.expect(got == o[key], f"{key}={o[key]} on {devnum}",
                         f"{key} on {devnum} is {got}, the recipe says {o[key]}")
    else:
        limits = parse_io_max(sections.get("io.max", "")).get(devnum, {})
        for key, short in V2_LIMIT_KEYS.items():
            if o[key] is not None:
                c.expect(limits.get(short) == o[key], f"{short}={o[key]} on {devnum}",
                         f"io.max {short} on {devnum} is {limits.get(short)}, the recipe says {o[key]}")
    return info


def read_cgroup_mounts(host: Host) -> tuple[str, dict[str, str]]:
    """The host's /proc/self/mounts and, per cgroup2 mount, its enabled controllers (path -> names): what
    the cgroup layouts are chosen from (the io throttle here, the CPU limit in :mod:`dbmatrix.hosts.cpulimit`)."""
    sec = host.run_sections({
        "mounts": "cat /proc/self/mounts",
        # one line per cgroup2 mount: its path, then its controllers
        "controllers": "for d in $(awk '$3 == \"cgroup2\" {print $2}' /proc/self/mounts); do "
                       'echo "$d $(cat "$d/cgroup.controllers")"; done',
    }, check=True)
    controllers = {}
    for line in (sec["controllers"].text if "controllers" in sec else "").splitlines():
        path, _, names = line.partition(" ")
        if path:
            controllers[path] = names
    return (sec["mounts"].text if "mounts" in sec else ""), controllers


def detect_cgroup_layout(host: Host, want: str = "auto") -> CgroupLayout:
    """The host's throttling hierarchy (see :func:`choose_cgroup_layout`)."""
    mounts, controllers = read_cgroup_mounts(host)
    try:
        return choose_cgroup_layout(mounts, controllers, want)
    except MediaError as exc:
        raise MediaError(f"throttled: {exc} on host {host.name}") from None
