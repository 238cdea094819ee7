"""A medium's plan (pure): the steps that build it, from its family's recipe, and those that tear it
down, each with the shell test that tells it is already done.
"""

from __future__ import annotations

import posixpath

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import CgroupLayout, Step, checked, chown, fs_medium, mounted, q
from dbmatrix.hosts.media.devices import loop_file, loop_lookup_all, md_device, nvmeof_lookup
from dbmatrix.hosts.media.filesystem import fs_steps
from dbmatrix.hosts.media.local import steps_dir, steps_tmpfs
from dbmatrix.hosts.media.loop import loop_steps
from dbmatrix.hosts.media.mdraid import steps_mdraid
from dbmatrix.hosts.media.nbd import nbd_client_steps, nbd_reset_steps, nbd_server_steps, nbd_teardown_steps
from dbmatrix.hosts.media.nvme import steps_blockdev, steps_nvmeof
from dbmatrix.hosts.media.pmem import steps_pmem
from dbmatrix.hosts.media.throttle import candidate_groups, cgroup_layout_for, throttle_steps


def apply_steps(medium: Medium, *, layout: CgroupLayout | None = None, owner: str | None = None) -> list[Step]:
    """The steps of :func:`plan` with their done-tests; `owner` (uid:gid) gets the mount point."""
    m = checked(medium)
    fs = fs_medium(m)
    builders = {"dir": steps_dir, "tmpfs": steps_tmpfs, "loop": loop_steps, "ram-block": loop_steps,
                "blockdev": steps_blockdev, "mdraid": steps_mdraid, "pmem": steps_pmem,
                "nvmeof": steps_nvmeof, "nbd": steps_nbd}
    steps = builders[fs.kind](fs)
    if fs.kind != "dir" and not (fs.kind == "pmem" and fs.options["mode"] == "devdax"):
        steps += chown(m.path, owner)
    if m.kind == "throttled":
        steps += throttle_steps(m, cgroup_layout_for(m, layout), owner)
    return steps


def steps_nbd(m: Medium) -> list[Step]:
    return [*nbd_server_steps(m), *nbd_client_steps(m), *fs_steps(m)]


def reset_steps(medium: Medium) -> list[Step]:
    """What a rebuild clears first: the pieces a medium's processes leave when they die with a session (an nbd
    medium's mounts, loop device, namespace); nothing for media without processes of their own."""
    fs = fs_medium(checked(medium))
    return nbd_reset_steps(fs) if fs.kind == "nbd" else []


def plan(medium: Medium, *, layout: CgroupLayout | None = None) -> list[str]:
    """The exact shell commands that build `medium` (as root; ensure adds ``sudo -n`` otherwise)."""
    return [s.command for s in apply_steps(medium, layout=layout)]


def teardown_steps(medium: Medium) -> list[Step]:
    m = checked(medium)
    fs = fs_medium(m)
    o = fs.options
    steps: list[Step] = []
    if m.kind == "throttled":
        for cg in candidate_groups(m):
            steps.append(Step(f"remove the cgroup {cg}", f"rmdir {q(cg)}", f"[ ! -d {q(cg)} ]"))
            parent = posixpath.dirname(cg)
            steps.append(Step(f"remove {parent} if unused", f"rmdir {q(parent)} 2>/dev/null || true",
                              f"[ ! -d {q(parent)} ]"))
    if fs.kind == "dir":
        return steps
    if fs.kind == "nbd":
        return nbd_teardown_steps(fs)
    if not (fs.kind == "pmem" and o["mode"] == "devdax"):
        steps.append(Step("unmount", f"umount {q(m.path)}", f"! {mounted(m.path)}"))
        steps.append(Step("remove the mount point", f"rmdir --ignore-fail-on-non-empty {q(m.path)}",
                          f"[ ! -d {q(m.path)} ]"))
    if fs.kind in ("loop", "ram-block"):
        file = loop_file(fs)
        every = loop_lookup_all(file)
        steps.append(Step("detach the loop device", f'for d in {every}; do losetup -d "$d"; done',
                          f'[ -z "{every}" ]'))
        steps.append(Step("remove the backing file", f"rm -f {q(file)}", f"[ ! -e {q(file)} ]"))
    if fs.kind == "ram-block":
        bdir = o["backing_dir"]
        steps.append(Step("unmount the backing tmpfs", f"umount {q(bdir)}", f"! {mounted(bdir)}"))
        steps.append(Step("remove the backing mount point", f"rmdir --ignore-fail-on-non-empty {q(bdir)}",
                          f"[ ! -d {q(bdir)} ]"))
    if fs.kind == "mdraid":
        md = q(md_device(fs))
        steps.append(Step("stop the RAID array", f"mdadm --stop {md}", f"[ ! -e {md} ]"))
    if fs.kind == "nvmeof":
        steps.append(Step(f"disconnect from {o['nqn']}", f"nvme disconnect -n {q(o['nqn'])}",
                          f'[ -z "$({nvmeof_lookup(o["nqn"], o["namespace"])})" ]'))
    return steps


def teardown_plan(medium: Medium) -> list[str]:
    return [s.command for s in teardown_steps(medium)]
