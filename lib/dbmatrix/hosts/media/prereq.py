"""Prerequisites of a medium (pure): the tools, devices, kernel drivers and namespaces it needs, as one
script whose output lists what is missing, and readable messages from that output.
"""

from __future__ import annotations

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import checked, fs_medium, q

TOOL_PACKAGES = {"mkfs.xfs": "xfsprogs", "xfs_info": "xfsprogs", "mkfs.ext4": "e2fsprogs",
                 "tune2fs": "e2fsprogs", "parted": "parted", "ndctl": "ndctl", "mdadm": "mdadm",
                 "losetup": "util-linux", "findmnt": "util-linux", "blkid": "util-linux",
                 "lsblk": "util-linux", "mount": "mount", "fallocate": "util-linux",
                 "truncate": "coreutils", "nvme": "nvme-cli", "modprobe": "kmod", "udevadm": "udev",
                 "nbdkit": "nbdkit", "nbdfuse": "libnbd-bin", "fusermount3": "fuse3", "ip": "iproute2",
                 "tc": "iproute2", "setsid": "util-linux"}


def required_tools(medium: Medium) -> list[str]:
    fs = fs_medium(checked(medium))
    o = fs.options
    tools = ["findmnt"]
    if fs.kind == "dir":
        return tools
    tools += ["mount"]
    if fs.kind in ("loop", "ram-block"):
        tools += ["losetup", "truncate" if fs.kind == "ram-block" else "fallocate"]
    if fs.kind == "mdraid":
        tools.append("mdadm")
    if fs.kind == "nbd":
        tools += ["losetup", "fallocate", "nbdkit", "nbdfuse", "fusermount3", "setsid"]
        tools += ["ip"] + (["tc"] if o["rate"] else []) if o["transport"] == "tcp" else []
    if fs.kind == "pmem":
        tools.append("ndctl")
    if fs.kind == "nvmeof":
        tools += ["nvme", "modprobe", "udevadm"]
    if o.get("partition_pct"):
        tools.append("parted")
    if "fstype" in o:
        tools += ["blkid", f"mkfs.{o['fstype']}", "xfs_info" if o["fstype"] == "xfs" else "tune2fs"]
    return tools


def prerequisite_script(medium: Medium) -> str:
    """Prints one line per missing prerequisite (``tool X``, ``device D``, ``in-use D M``, …)."""
    m = checked(medium)
    fs = fs_medium(m)
    o = fs.options
    lines = [f"for t in {' '.join(required_tools(m))}; do command -v $t >/dev/null 2>&1 || echo \"tool $t\"; done"]
    devices = [o["device"]] if fs.kind == "blockdev" else list(o.get("devices", [])) if fs.kind == "mdraid" else []
    for d in devices:
        lines.append(f"if [ -b {q(d)} ]; then lsblk -nrpo NAME,MOUNTPOINT {q(d)} | "
                     f"awk -v p={q(m.path)} '$2 != \"\" && $2 != p {{print \"in-use \" $1 \" \" $2}}'; "
                     f"else echo 'device {d}'; fi")
    if fs.kind == "mdraid":
        lines.append("[ -e /proc/mdstat ] || echo no-md")
    if fs.kind == "nbd":
        lines.append("[ -c /dev/fuse ] || echo no-fuse")
        if o["delay_ms"]:
            lines.append("command -v nbdkit >/dev/null 2>&1 && { nbdkit --dump-config | grep -q '^filterdir=' && "
                         "[ -e \"$(nbdkit --dump-config | sed -n 's/^filterdir=//p')/nbdkit-delay-filter.so\" ] "
                         "|| echo no-delay-filter; }")
    if fs.kind == "nvmeof":
        t = o["transport"]
        lines.append(f"[ -d /sys/module/nvme_{t} ] || modprobe -n nvme-{t} >/dev/null 2>&1 || echo no-nvmeof-{t}")
    if fs.kind == "pmem":
        ns = q(o["namespace"])
        lines.append(
            "if command -v ndctl >/dev/null 2>&1; then\n"
            "  if ! ndctl list -RN 2>/dev/null | grep -q '\"dev\"'; then echo no-pmem\n"
            f"  elif [ -z \"$(ndctl list -n {ns} 2>/dev/null)\" ]; then\n"
            "    echo \"no-namespace $(ndctl list -N 2>/dev/null"
            " | sed -n 's/.*\"dev\":\"\\(namespace[^\"]*\\)\".*/\\1/p' | tr '\\n' ' ')\"\n"
            "  fi\n"
            "fi")
    return "\n".join(lines)


def prerequisite_problems(medium: Medium, output: str, host: str) -> list[str]:
    """Readable messages from :func:`prerequisite_script` output (empty: all present)."""
    m = checked(medium)
    fs = fs_medium(m)
    tag = fs.kind
    out: list[str] = []
    if "no-md" in output.split():
        out.append(f"mdraid: no MD RAID on host {host}: /proc/mdstat is missing (kernel without the md "
                   "driver); RAID0 cannot be built here")
    if "no-pmem" in output.split():
        out.append(f"pmem: no PMEM namespace/region on host {host}: `ndctl list -RN` shows none (no "
                   "persistent memory here); emulate it with a tmpfs medium (emulates: pmem-fsdax) or a "
                   "ram-block medium (emulates: pmem-sector)")
    if "no-fuse" in output.split():
        out.append(f"nbd: no /dev/fuse on host {host}: the nbd medium's client (nbdfuse) needs FUSE "
                   "(modprobe fuse; in a container, pass /dev/fuse through)")
    if "no-delay-filter" in output.split():
        out.append(f"nbd: nbdkit on host {host} has no delay filter (nbdkit-delay-filter.so), which delay_ms "
                   "needs; install Debian's nbdkit (it ships the filters) or set delay_ms 0")
    for ln in output.split():
        if ln.startswith("no-nvmeof-"):
            t = ln[len("no-nvmeof-"):]
            out.append(f"nvmeof: this kernel on host {host} cannot load nvme-{t} (no /sys/module/nvme_{t}, "
                       f"`modprobe -n nvme-{t}` fails): NVMe over Fabrics needs the nvme-{t} module and nvme-cli; "
                       "the medium cannot be connected here")
    for ln in output.splitlines():
        if ln.startswith("no-namespace"):
            have = ln[len("no-namespace"):].strip() or "none"
            out.append(f"pmem: no namespace {fs.options['namespace']} on host {host}; namespaces: {have}")
    tools = [ln.split()[1] for ln in output.splitlines() if ln.startswith("tool ")]
    if tools:
        pk = ", ".join(f"{t} (package {TOOL_PACKAGES.get(t, t)})" for t in tools)
        out.append(f"{tag}: missing tools on host {host}: {pk}; install them (dbmatrix setup)")
    devs = [ln.split(" ", 1)[1] for ln in output.splitlines() if ln.startswith("device ")]
    if devs:
        out.append(f"{tag}: block device(s) missing on host {host}: {', '.join(devs)}")
    used = [ln.split(" ", 2)[1:] for ln in output.splitlines() if ln.startswith("in-use ")]
    if used:
        where = ", ".join(f"{d} is mounted at {p}" for d, p in used)
        out.append(f"{tag}: refusing to partition/format devices in use on host {host}: {where}")
    return out
