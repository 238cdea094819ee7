"""MD RAID arrays (pure): ``mdraid`` assembles or creates ``/dev/md/dbmatrix-<name>`` over the
recipe's devices (or their first partitions) with its level and chunk, and checks them in sysfs.
"""

from __future__ import annotations

from collections.abc import Mapping

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import Checks, Step, q
from dbmatrix.hosts.media.devices import md_device, partition_path
from dbmatrix.hosts.media.filesystem import fs_steps, parted


def md_members(m: Medium) -> list[str]:
    o = m.options
    return [partition_path(d) for d in o["devices"]] if o["partition_pct"] else list(o["devices"])


def steps_mdraid(m: Medium) -> list[Step]:
    o = m.options
    steps = []
    if o["partition_pct"]:
        for d in o["devices"]:
            steps.append(Step(f"partition {d}", parted(q(d), o["partition_pct"]),
                              f"test -b {q(partition_path(d))}"))
    members = " ".join(q(d) for d in md_members(m))
    md = q(md_device(m))
    create = (f"mdadm --create {md} --run --metadata=1.2 --level={o['level']} --chunk={o['chunk'] // 1024} "
              f"--raid-devices={len(o['devices'])} {members}")
    steps.append(Step("assemble or create the RAID0 array",
                      f"mdadm --assemble {md} {members} || {create}", f"test -b {md}"))
    return steps + fs_steps(m)


def check_md(m: Medium, block: Mapping[str, str], c: Checks) -> None:
    o = m.options
    got = (block.get("md_level"), block.get("md_chunk_size"), block.get("md_raid_disks"))
    want = (f"raid{o['level']}", str(o["chunk"]), str(len(o["devices"])))
    c.expect(got == want, f"md {want[0]} chunk {o['chunk']} over {want[2]} devices",
             f"md array is level/chunk/devices {got}, the recipe says {want}")
