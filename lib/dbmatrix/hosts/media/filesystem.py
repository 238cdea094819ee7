"""File systems on block devices (pure): partitioning, ``mkfs.xfs``/``mkfs.ext4`` with the recipe's
block size and stripe geometry, the mount, and the checks of what ``xfs_info``/``tune2fs``, the mount
options and the partition table show.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import VERIFIABLE_MOUNT_OPTIONS, Checks, Step, fs_medium, has_fs, mounted, q
from dbmatrix.hosts.media.devices import target_expr
from dbmatrix.hosts.mounts import Mount


def _pct(p: int | float) -> str:
    return f"{p:g}%"


def parted(dev: str, pct: int | float) -> str:
    return f"parted -s -a optimal {dev} mklabel gpt mkpart primary 0% {_pct(pct)}"


def mkfs_command(medium: Medium) -> str:
    m = fs_medium(medium)
    o = m.options
    bs = o["block_size"]
    if o["fstype"] == "xfs":
        args = ["mkfs.xfs", "-q", "-b", f"size={bs}"]
        if o["sunit"]:
            args += ["-d", f"sunit={o['sunit']},swidth={o['swidth']}"]
        if (m.kind == "pmem" and o["mode"] == "fsdax"
                and not any("reflink" in x for x in o["mkfs_options"])):
            args += ["-m", "reflink=0"]  # kernels before 6.x refuse DAX on reflink-capable XFS
    else:
        args = ["mkfs.ext4", "-q", "-b", str(bs)]
        if o["sunit"]:
            args += ["-E", f"stride={o['sunit'] * 512 // bs},stripe_width={o['swidth'] * 512 // bs}"]
    return f"{shlex.join([*args, *o['mkfs_options']])} {target_expr(m)}"


def mount_command(medium: Medium) -> str:
    m = fs_medium(medium)
    o = m.options
    opts = f" -o {q(','.join(o['mount_options']))}" if o["mount_options"] else ""
    return f"mkdir -p {q(medium.path)} && mount -t {o['fstype']}{opts} {target_expr(m)} {q(medium.path)}"


def fs_steps(medium: Medium) -> list[Step]:
    target = target_expr(medium)
    return [Step("make the file system", mkfs_command(medium), has_fs(target)),
            Step("mount the file system", mount_command(medium), mounted(medium.path))]


def parse_xfs_info(text: str) -> dict[str, int]:
    """bsize and data sunit/swidth (in file-system blocks) from ``xfs_info``."""
    m = re.search(r"^data\s+=.*?bsize=(\d+).*?\n\s*=\s*sunit=(\d+)\s+swidth=(\d+)\s+blks", text,
                  re.MULTILINE | re.DOTALL)
    if not m:
        return {}
    return {"bsize": int(m.group(1)), "sunit": int(m.group(2)), "swidth": int(m.group(3))}


def parse_tune2fs(text: str) -> dict[str, int]:
    """Block size and RAID stride/stripe width (in blocks) from ``tune2fs -l``."""
    out = {}
    for key, name in (("Block size", "bsize"), ("RAID stride", "stride"), ("RAID stripe width", "stripe_width")):
        m = re.search(rf"^{key}:\s+(\d+)", text, re.MULTILINE)
        if m:
            out[name] = int(m.group(1))
    return out


def check_mount_options(m: Medium, mnt: Mount, c: Checks) -> None:
    shown = (mnt.options or "").split(",")
    for opt in m.options["mount_options"]:
        if opt in VERIFIABLE_MOUNT_OPTIONS:
            c.expect(opt in shown, f"mount option {opt}", f"mount option {opt} is missing ({','.join(shown)})")


def check_geometry(m: Medium, sections: Mapping[str, str], c: Checks) -> None:
    o = m.options
    if o["fstype"] == "xfs":
        g = parse_xfs_info(sections.get("xfs_info", ""))
        if not c.expect(bool(g), "xfs_info read", "xfs_info gave no geometry"):
            return
        c.expect(g["bsize"] == o["block_size"], f"block size {o['block_size']}",
                 f"block size is {g['bsize']}, the recipe says {o['block_size']}")
        if o["sunit"]:
            su, sw = g["sunit"] * g["bsize"] // 512, g["swidth"] * g["bsize"] // 512
            c.expect((su, sw) == (o["sunit"], o["swidth"]),
                     f"xfs sunit={o['sunit']} swidth={o['swidth']} sectors ({g['sunit']}/{g['swidth']} blocks)",
                     f"xfs stripe is sunit={su} swidth={sw} sectors, the recipe says "
                     f"sunit={o['sunit']} swidth={o['swidth']}")
    else:
        g = parse_tune2fs(sections.get("tune2fs", ""))
        if not c.expect("bsize" in g, "tune2fs read", "tune2fs -l gave no block size"):
            return
        c.expect(g["bsize"] == o["block_size"], f"block size {o['block_size']}",
                 f"block size is {g['bsize']}, the recipe says {o['block_size']}")
        if o["sunit"]:
            want = (o["sunit"] * 512 // g["bsize"], o["swidth"] * 512 // g["bsize"])
            got = (g.get("stride"), g.get("stripe_width"))
            c.expect(got == want, f"ext4 stride={want[0]} stripe_width={want[1]} blocks",
                     f"ext4 stride/stripe_width are {got}, the recipe says {want}")


def partition_share(block: Mapping[str, str]) -> float | None:
    """Where the partition ends, as a percentage of its disk (None when not a partition)."""
    if not block.get("start"):
        return None
    end = int(block["start"]) + int(block["sectors"])
    return 100.0 * end / int(block["disk_sectors"])


def check_partition(pct: float, block: Mapping[str, str], c: Checks) -> None:
    share = partition_share(block)
    if not c.expect(share is not None, "partitioned", f"{block.get('device')} is not a partition"):
        return
    disk = int(block["disk_sectors"])
    # parted aligns the end down to 1 MiB and GPT keeps 33 sectors at the end of the disk.
    tol = max(4096 / disk * 100, 0.5)
    c.expect(abs(share - pct) <= tol,  # type: ignore[operator]
             f"partition ends at {share:.2f} % of {block.get('disk')} (recipe {pct:g} %)",
             f"partition ends at {share:.2f} % of {block.get('disk')}, the recipe says {pct:g} %")
