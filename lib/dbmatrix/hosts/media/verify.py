"""What verify gathers and how it judges (pure): one script of facts (mount, block device, sysfs,
file-system geometry, cgroup) and their comparison with the recipe, family by family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import (
    V1_LIMIT_FILES,
    CgroupLayout,
    Checks,
    MediaError,
    MediumState,
    checked,
    fs_medium,
    parse_findmnt,
    parse_kv,
    q,
)
from dbmatrix.hosts.media.devices import loop_file, pmem_device, target_expr
from dbmatrix.hosts.media.filesystem import check_geometry, check_mount_options, check_partition
from dbmatrix.hosts.media.local import check_tmpfs
from dbmatrix.hosts.media.loop import check_loop
from dbmatrix.hosts.media.mdraid import check_md
from dbmatrix.hosts.media.nbd import check_nbd, nbd_fact_sections
from dbmatrix.hosts.media.nvme import check_nvmeof
from dbmatrix.hosts.media.pmem import check_devdax, dax_mode, dax_problem, ndctl_mode
from dbmatrix.hosts.media.throttle import cgroup_layout_for, check_throttle
from dbmatrix.hosts.mounts import Mount
from dbmatrix.hosts.sections import sections_script


def facts_sections(medium: Medium, layout: CgroupLayout | None = None) -> tuple[str, dict[str, str]]:
    """The prelude and the sections (name -> command) gathering every fact :func:`evaluate` needs.

    The prelude sets ``$src`` (the mount's source) for the sections that read it. The ``block``
    section prints nothing when the source is not a block device (:func:`evaluate` reads no block
    facts then)."""
    m = checked(medium)
    fs = fs_medium(m)
    o = fs.options
    p = q(m.path)
    where = f"-T {p}" if fs.kind == "dir" else f"--mountpoint {p}"
    prelude = f"src=$(findmnt -rno SOURCE {where} | tail -n 1)"
    sec = {"mount": f"findmnt -J -b -o TARGET,SOURCE,FSTYPE,OPTIONS,SIZE {where}"}
    if fs.kind == "dir":
        sec["dir"] = f"[ -d {p} ] && echo isdir; [ -w {p} ] && echo writable"
    sec["block"] = "\n".join([
        'if [ -b "$src" ]; then',
        ' dev=$(basename "$(readlink -f "$src")"); sys=$(readlink -f "/sys/class/block/$dev")',
        ' echo "device=$dev"; echo "sectors=$(cat "$sys/size")"',
        ' if [ -e "$sys/partition" ]; then disk=$(basename "$(dirname "$sys")"); echo "start=$(cat "$sys/start")";'
        ' else disk=$dev; fi',
        ' echo "disk=$disk"; echo "disk_sectors=$(cat /sys/class/block/$disk/size)"',
        ' echo "devnum=$(cat /sys/class/block/$disk/dev)"; echo "dax=$(cat /sys/block/$disk/queue/dax 2>/dev/null)"',
        ' echo "loop_backing=$(cat /sys/block/$disk/loop/backing_file 2>/dev/null)"',
        ' echo "loop_dio=$(cat /sys/block/$disk/loop/dio 2>/dev/null)"',
        ' for f in level chunk_size raid_disks; do echo "md_$f=$(cat /sys/block/$disk/md/$f 2>/dev/null)"; done',
        "fi",
    ])
    if fs.kind not in ("dir", "tmpfs") and not (fs.kind == "pmem" and o["mode"] == "devdax"):
        sec["expected"] = f'echo "target=$(basename "$(readlink -f {target_expr(fs)})")"'
        if o["fstype"] == "xfs":
            sec["xfs_info"] = f"[ -n \"$src\" ] && xfs_info {p} 2>&1"
        else:
            sec["tune2fs"] = '[ -b "$src" ] && tune2fs -l "$src" 2>&1'
    if fs.kind in ("loop", "ram-block", "nbd"):
        f = q(loop_file(fs))
        sec["backing"] = f"[ -f {f} ] && echo \"real=$(readlink -f {f})\" && echo \"bytes=$(stat -c %s {f})\""
    if fs.kind == "nbd":
        sec.update(nbd_fact_sections(fs))
    if fs.kind == "ram-block":
        sec["backing_mount"] = f"findmnt -J -b -o TARGET,SOURCE,FSTYPE,OPTIONS,SIZE --mountpoint {q(o['backing_dir'])}"
    if fs.kind == "nvmeof":
        sec["nvmeof"] = (f"for s in /sys/class/nvme-subsystem/*; do [ \"$(cat \"$s/subsysnqn\" 2>/dev/null)\" = "
                         f"{q(o['nqn'])} ] || continue; echo found=yes; for c in \"$s\"/nvme[0-9]*; do "
                         "[ -e \"$c/transport\" ] || continue; echo \"transport=$(cat \"$c/transport\")\"; "
                         "echo \"state=$(cat \"$c/state\")\"; echo \"address=$(cat \"$c/address\" | tr -d '\\n')\"; "
                         "done; done")
    if fs.kind == "pmem":
        sec["ndctl"] = f"ndctl list -n {q(o['namespace'])} 2>&1"
        if o["mode"] == "devdax":
            sec["chardev"] = f"[ -c {q(pmem_device(o['namespace'], 'devdax'))} ] && echo yes"
    if m.kind == "throttled":
        cg = cgroup_layout_for(m, layout).group(m.name)
        sec["cgroup"] = f"[ -d {q(cg)} ] && echo exists"
        if cgroup_layout_for(m, layout).version == 1:
            for key, fname in V1_LIMIT_FILES.items():
                sec[f"limit:{key}"] = f"cat {q(cg + '/' + fname)} 2>/dev/null"
        else:
            sec["io.max"] = f"cat {q(cg + '/io.max')} 2>/dev/null"
    return prelude, sec


def facts_script(medium: Medium, layout: CgroupLayout | None = None) -> str:
    """One shell script printing, in ``@@name rc`` sections, every fact :func:`evaluate` needs."""
    prelude, sec = facts_sections(medium, layout)
    return sections_script(sec, prelude=prelude)


def evaluate(medium: Medium, sections: Mapping[str, str], layout: CgroupLayout | None = None,
             host: str = "?") -> MediumState:
    """Compare gathered facts with the recipe; raise MediaError listing every difference."""
    m = checked(medium)
    fs = fs_medium(m)
    o = fs.options
    c = Checks()
    mnt = parse_findmnt(sections.get("mount", ""))
    block = parse_kv(sections.get("block", "")) if "block" in sections else {}
    state = MediumState(m.name, m.kind, m.path, m.emulates, None, None, None, None, (), None, None, None, (),
                        base_kind=fs.kind if m.kind == "throttled" else None)
    if fs.kind == "pmem" and o["mode"] == "devdax":
        state = check_devdax(fs, sections, c, state)
    elif fs.kind == "dir":
        flags = sections.get("dir", "").split()
        c.expect("isdir" in flags, f"directory {m.path} exists", f"{m.path} is not a directory")
        c.expect("writable" in flags, "directory is writable", f"{m.path} is not writable")
        if mnt:
            state = _with_mount(state, mnt, block)
    elif mnt is None:
        c.problems.append(f"nothing is mounted at {m.path}")
    else:
        c.ok.append(f"mounted at {m.path}")
        state = _with_mount(state, mnt, block)
        if fs.kind == "tmpfs":
            check_tmpfs(fs, mnt, c)
        else:
            state = _check_block_fs(fs, mnt, block, sections, c, state)
    if m.kind == "throttled" and not c.problems:
        state = replace(state, throttle=check_throttle(m, block, sections, cgroup_layout_for(m, layout), c))
    if c.problems:
        raise MediaError(f"{m.kind} medium {m.name!r} on host {host}: " + "; ".join(c.problems))
    return replace(state, checks=tuple(c.ok))


def _with_mount(state: MediumState, mnt: Mount, block: Mapping[str, str]) -> MediumState:
    size = mnt.size
    return replace(state, source=mnt.source, fstype=mnt.fstype,
                   mount_options=tuple((mnt.options or "").split(",")),
                   size_bytes=int(size) if size is not None else None,
                   device=block.get("device") or None, disk=block.get("disk") or None)


def _check_block_fs(m: Medium, mnt: Mount, block: Mapping[str, str], sections: Mapping[str, str],
                    c: Checks, state: MediumState) -> MediumState:
    o = m.options
    c.expect(mnt.fstype == o["fstype"], f"file system {o['fstype']}",
             f"file system is {mnt.fstype}, the recipe says {o['fstype']}")
    if m.kind == "nbd":
        # the serving chain first: when its client dies the loop device under the mount can vanish as well,
        # and which of the two a check sees first is a race; the dead process is the cause to name
        check_nbd(m, sections, c)
    expected = parse_kv(sections.get("expected", "")).get("target", "")
    if not c.expect(bool(block) and block.get("device") == expected,
                    f"mounted from {block.get('device')}",
                    f"mounted from {mnt.source}, expected the device {expected or '(not present)'}"):
        return state
    check_mount_options(m, mnt, c)
    check_geometry(m, sections, c)
    if m.kind in ("loop", "ram-block", "nbd"):
        check_loop(m, block, sections, c)
    if o.get("partition_pct") and m.kind in ("loop", "ram-block", "blockdev"):
        check_partition(o["partition_pct"], block, c)
    if m.kind == "mdraid":
        check_md(m, block, c)
    if m.kind == "nvmeof":
        check_nvmeof(m, sections, c)
    if m.kind == "pmem":
        mode = ndctl_mode(sections.get("ndctl", ""))
        c.expect(mode == o["mode"], f"namespace {o['namespace']} in {o['mode']} mode",
                 f"namespace {o['namespace']} is in mode {mode}, the recipe says {o['mode']}")
    requested = [x for x in o["mount_options"] if x in ("dax", "dax=always")]
    options = mnt.options or ""
    if requested:
        problem = dax_problem(options)
        c.expect(problem is None, f"DAX active (dax={dax_mode(options)})", problem or "")
        c.expect(block.get("dax") != "0", "block device supports DAX",
                 f"the block device {block.get('disk')} does not support DAX (/sys/block/{block.get('disk')}"
                 "/queue/dax = 0)")
    return replace(state, dax=dax_mode(options) == "always")
