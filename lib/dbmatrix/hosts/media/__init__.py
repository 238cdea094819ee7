"""Storage media recipes: plan -> apply -> verify -> teardown, idempotent.

The recipe of a medium is data (:class:`dbmatrix.hosts.inventory.Medium`); this package turns it into
shell commands and runs them through :class:`dbmatrix.hosts.remote.Host`, so the same code works here
and over SSH (commands go through ``sudo -n`` when the login is not root).

- :func:`plan` / :func:`teardown_plan` (pure): the exact commands, e.g. ``mkfs.xfs -q -b size=4096
  -d sunit=512,swidth=1024 …``, ``parted -s -a optimal … mkpart primary 0% 60%``, ``mdadm --create
  … --level=0 --chunk=256``, ``ndctl create-namespace --force --reconfig=namespace0.0 --mode=fsdax``,
  cgroup writes. Devices whose names the kernel picks (loop devices) appear as lookups from the
  deterministic backing file, ``"$(losetup -nO NAME -j <file>)"``, so every command stands alone.
- :func:`ensure`: verify; if not in place, check prerequisites (tools, devices, PMEM, MD, cgroup
  controller) and fail early naming what is missing; then apply the steps not yet done and verify.
  A second call with everything in place runs no mkfs/mount (``MediumState.commands == ()``).
- :func:`verify`: one round trip gathers ``findmnt``/sysfs/``xfs_info``/cgroup facts; a pure
  evaluation compares them with the recipe and raises :class:`MediaError` listing what is wrong
  (not mounted, wrong file system or geometry, size, partition share, DAX requested but the kernel
  mounted ``dax=never``, throttle limits missing…).
- :func:`teardown`: unmount, detach loop devices, remove backing files and cgroups; safe when
  already torn down. ``blockdev``/``mdraid``/``pmem`` keep their partition tables, file systems,
  RAID superblocks and namespace modes (a later ensure reuses them); only the mount goes.

Names are derived from the medium name: backing files ``<workdir>/media-backing/<name>.img``
(``ram-block``: a tmpfs mounted at ``<workdir>/media-backing/<name>`` holding ``<name>.img``), the
tmpfs source ``dbmatrix-<name>``, the array ``/dev/md/dbmatrix-<name>`` and the cgroup
``<hierarchy>/dbmatrix/<name>``.

Throttling (kind ``throttled``): blk-throttle limits attach to a whole disk (major:minor of the
base medium's loop/md/pmem/real disk; the kernel refuses partitions) in a cgroup. They apply to the
processes in that cgroup, so the runner starts mariadbd through :func:`launch_prefix`, a
``sh -c`` wrapper that writes its own PID into ``cgroup.procs`` and then ``exec``s the server
(same PID). With cgroup v1 (``blkio.throttle.*``, this machine) only direct I/O and reads are
throttled: buffered writeback is issued by kernel flushers outside the cgroup (InnoDB data files
use O_DIRECT, so its data I/O is covered). cgroup v2 (``io.max``) also throttles writeback. When
the login is not root, ensure hands ``cgroup.procs`` to the login user so the prefix works without
sudo (v2 additionally needs a delegated subtree; run as root there).

The package: :mod:`.core` (errors, steps, states, the cgroup layout), :mod:`.devices` (device names as
shell words), :mod:`.filesystem` (mkfs, mount, geometry), a recipe per medium family (:mod:`.local`: dir
and tmpfs; :mod:`.loop`: loop and ram-block; :mod:`.nvme`: blockdev and nvmeof; :mod:`.mdraid`;
:mod:`.pmem`; :mod:`.throttle`: cgroup blk-throttle), :mod:`.plan` and :mod:`.verify` (the planning and
verification core over the families), :mod:`.prereq` (prerequisites) and :mod:`.lifecycle` (ensure,
verify and teardown through a Host). Callers use the names below, as ``media.ensure(...)``.
"""

from __future__ import annotations

from dbmatrix.hosts.media.core import (
    CGROUP_PARENT,
    STEP_TIMEOUT_S,
    V1_BLKIO_ROOT,
    V1_DEFAULT,
    V1_LIMIT_FILES,
    V2_DEFAULT,
    V2_LIMIT_KEYS,
    V2_ROOTS,
    VERIFIABLE_MOUNT_OPTIONS,
    CgroupLayout,
    MediaError,
    MediumState,
    Step,
    checked,
    parse_findmnt,
    parse_kv,
    parse_sections,
)
from dbmatrix.hosts.media.devices import (
    disk_expr,
    loop_file,
    md_device,
    nvmeof_lookup,
    partition_path,
    pmem_device,
    target_expr,
)
from dbmatrix.hosts.media.filesystem import mkfs_command, mount_command, parse_tune2fs, parse_xfs_info, partition_share
from dbmatrix.hosts.media.lifecycle import ensure, teardown, verify
from dbmatrix.hosts.media.mdraid import md_members
from dbmatrix.hosts.media.nvme import nvme_connect_command
from dbmatrix.hosts.media.plan import apply_steps, plan, teardown_plan, teardown_steps
from dbmatrix.hosts.media.pmem import dax_mode, dax_problem, ndctl_command
from dbmatrix.hosts.media.prereq import TOOL_PACKAGES, prerequisite_problems, prerequisite_script, required_tools
from dbmatrix.hosts.media.throttle import (
    candidate_groups,
    cgroup_layout_for,
    choose_cgroup_layout,
    detect_cgroup_layout,
    launch_prefix,
    limit_command,
    parse_io_max,
    parse_v1_limits,
    read_limit,
    set_throttle_limit,
)
from dbmatrix.hosts.media.verify import evaluate, facts_script, facts_sections

__all__ = [
    "CGROUP_PARENT",
    "STEP_TIMEOUT_S",
    "TOOL_PACKAGES",
    "V1_BLKIO_ROOT",
    "V1_DEFAULT",
    "V1_LIMIT_FILES",
    "V2_DEFAULT",
    "V2_LIMIT_KEYS",
    "V2_ROOTS",
    "VERIFIABLE_MOUNT_OPTIONS",
    "CgroupLayout",
    "MediaError",
    "MediumState",
    "Step",
    "apply_steps",
    "candidate_groups",
    "cgroup_layout_for",
    "checked",
    "choose_cgroup_layout",
    "dax_mode",
    "dax_problem",
    "detect_cgroup_layout",
    "disk_expr",
    "ensure",
    "evaluate",
    "facts_script",
    "facts_sections",
    "launch_prefix",
    "limit_command",
    "loop_file",
    "md_device",
    "md_members",
    "mkfs_command",
    "mount_command",
    "ndctl_command",
    "nvme_connect_command",
    "nvmeof_lookup",
    "parse_findmnt",
    "parse_io_max",
    "parse_kv",
    "parse_sections",
    "parse_tune2fs",
    "parse_v1_limits",
    "parse_xfs_info",
    "partition_path",
    "partition_share",
    "plan",
    "pmem_device",
    "prerequisite_problems",
    "prerequisite_script",
    "read_limit",
    "required_tools",
    "set_throttle_limit",
    "target_expr",
    "teardown",
    "teardown_plan",
    "teardown_steps",
    "verify",
]
