"""Loop devices over a backing file (pure): ``loop`` (a file on the host's disk) and ``ram-block`` (a
sparse file on a private tmpfs: a block device in RAM), optionally partitioned, with direct I/O.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import Checks, MiB, Step, mounted, parse_findmnt, parse_kv, q
from dbmatrix.hosts.media.devices import disk_expr, loop_file, loop_lookup, target_expr
from dbmatrix.hosts.media.filesystem import fs_steps, parted


def loop_steps(m: Medium) -> list[Step]:
    o = m.options
    file = loop_file(m)
    steps: list[Step] = []
    if m.kind == "ram-block":
        bdir = o["backing_dir"]
        # The image plus room for tmpfs rounding; the image never grows beyond `size`.
        tsize = o["size"] + MiB
        steps.append(Step("mount the backing tmpfs",
                          f"mkdir -p {q(bdir)} && mount -t tmpfs -o size={tsize},mode=0700 "
                          f"{q('dbmatrix-' + m.name + '-backing')} {q(bdir)}", mounted(bdir)))
        steps.append(Step("create the sparse backing file", f"truncate -s {o['size']} {q(file)}",
                          f"test -f {q(file)}"))
    else:
        steps.append(Step("create the backing file",
                          f"mkdir -p {q(posixpath.dirname(file))} && fallocate -l {o['size']} {q(file)}",
                          f"test -f {q(file)}"))
    flags = ["--find", "--show"] + (["-P"] if o["partition_pct"] else []) + (
        ["--direct-io=on"] if o["direct_io"] else [])
    steps.append(Step("attach the loop device", f"losetup {' '.join(flags)} {q(file)}",
                      f'[ -n "{loop_lookup(file)}" ]'))
    if o["partition_pct"]:
        steps.append(Step("partition the device", parted(disk_expr(m), o["partition_pct"]),
                          f"test -b {target_expr(m)}"))
    return steps + fs_steps(m)


def check_loop(m: Medium, block: Mapping[str, str], sections: Mapping[str, str], c: Checks) -> None:
    o = m.options
    backing = parse_kv(sections.get("backing", ""))
    if not backing.get("real"):
        c.problems.append(f"the backing file {loop_file(m)} is missing or cannot be read")
        return
    c.expect(block.get("loop_backing") == backing.get("real"), f"loop device backed by {loop_file(m)}",
             f"the loop device's backing file is {block.get('loop_backing') or '(none)'}, not {loop_file(m)}")
    size = int(backing.get("bytes") or 0)
    c.expect(size == o["size"], f"backing file {o['size']} bytes",
             f"the backing file has {size} bytes, the recipe says {o['size']} (teardown to rebuild)")
    if o["direct_io"]:
        c.expect(block.get("loop_dio") == "1", "loop direct I/O on", "loop direct I/O is off")
    if m.kind == "ram-block":
        bm = parse_findmnt(sections.get("backing_mount", ""))
        c.expect(bm is not None and bm.fstype == "tmpfs", f"backing file on tmpfs {o['backing_dir']}",
                 f"{o['backing_dir']} is not a tmpfs mount")
