"""Media without a block device of their own (pure): a directory (``dir``) and a RAM file system
(``tmpfs``).
"""

from __future__ import annotations

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import Checks, Step, mounted, q
from dbmatrix.hosts.media.filesystem import check_mount_options
from dbmatrix.hosts.mounts import Mount


def steps_dir(m: Medium) -> list[Step]:
    return [Step("create the directory", f"mkdir -p {q(m.path)}", f"test -d {q(m.path)}", privileged=False)]


def steps_tmpfs(m: Medium) -> list[Step]:
    o = m.options
    opts = ",".join([f"size={o['size']}", *o["mount_options"]])
    cmd = f"mkdir -p {q(m.path)} && mount -t tmpfs -o {q(opts)} {q('dbmatrix-' + m.name)} {q(m.path)}"
    return [Step("mount the tmpfs", cmd, mounted(m.path))]


def check_tmpfs(m: Medium, mnt: Mount, c: Checks) -> None:
    c.expect(mnt.fstype == "tmpfs", "file system tmpfs", f"file system is {mnt.fstype}, not tmpfs")
    size = int(mnt.size or 0)
    want = m.options["size"]
    c.expect(size == want, f"size {want} bytes", f"size is {size} bytes, the recipe says {want}")
    check_mount_options(m, mnt, c)
