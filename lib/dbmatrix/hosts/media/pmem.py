"""Persistent memory (pure): ``pmem`` puts an ndctl namespace in fsdax, sector or devdax mode (a file
system on the first two, the character device for devdax), and tells whether DAX is really active.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import replace

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import Checks, MediumState, Step, q
from dbmatrix.hosts.media.devices import pmem_device
from dbmatrix.hosts.media.filesystem import fs_steps


def ndctl_command(m: Medium) -> str:
    o = m.options
    args = ["ndctl", "create-namespace", "--force", f"--reconfig={o['namespace']}", f"--mode={o['mode']}"]
    if o["mode"] == "fsdax":
        args.append(f"--map={o['map']}")
    if o["mode"] == "sector":
        args.append(f"--sector-size={o['sector_size']}")
    if o.get("align"):
        args.append(f"--align={o['align']}")
    if o.get("size"):
        args.append(f"--size={o['size']}")
    return shlex.join(args)


def steps_pmem(m: Medium) -> list[Step]:
    o = m.options
    ns = q(o["namespace"])
    steps = [Step(f"put {o['namespace']} in {o['mode']} mode", ndctl_command(m),
                  f"ndctl list -n {ns} | grep -q '\"mode\":\"{o['mode']}\"'")]
    if o["mode"] == "devdax":
        return steps
    return steps + fs_steps(m)


def dax_mode(options: str) -> str | None:
    """The DAX mode a mount shows in ``findmnt -no OPTIONS``: always, never, inode or None.

    Old kernels print a bare ``dax`` (= always)."""
    for opt in options.strip().split(","):
        if opt == "dax":
            return "always"
        if opt.startswith("dax="):
            return opt[4:]
    return None


def dax_problem(options: str) -> str | None:
    """Why DAX is not really active on a mount that asked for it (None when it is).

    ``mount -o dax`` exits 0 on a device without DAX support: XFS then mounts ``dax=never``
    ("DAX unsupported by block device. Turning off DAX."), so only the options tell."""
    mode = dax_mode(options)
    if mode == "always":
        return None
    if mode == "never":
        return ("DAX requested but the kernel mounted dax=never (the block device does not support "
                "DAX; mount -o dax succeeded anyway)")
    if mode == "inode":
        return "DAX requested but mounted dax=inode (only files with the DAX flag use it)"
    return "DAX requested but the mount options show no dax"


def ndctl_mode(text: str) -> str | None:
    m = re.search(r'"mode"\s*:\s*"([a-z]+)"', text)
    return m.group(1) if m else None


def check_devdax(m: Medium, sections: Mapping[str, str], c: Checks, state: MediumState) -> MediumState:
    o = m.options
    dev = pmem_device(o["namespace"], "devdax")
    mode = ndctl_mode(sections.get("ndctl", ""))
    c.expect(mode == "devdax", f"namespace {o['namespace']} in devdax mode",
             f"namespace {o['namespace']} is in mode {mode}, the recipe says devdax")
    c.expect(sections.get("chardev", "").strip() == "yes", f"{dev} exists", f"{dev} does not exist")
    return replace(state, source=dev, device=posixpath.basename(dev), dax=True)
