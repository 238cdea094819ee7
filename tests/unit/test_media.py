"""Tests of dbmatrix.hosts.media without side effects: exact plans per kind, the DAX check on real findmnt
output, fact parsing and evaluation (fed output captured from real media on this machine)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.hosts import media
from dbmatrix.hosts.inventory import Medium, parse_medium
from dbmatrix.hosts.media import (
    V1_DEFAULT,
    V2_DEFAULT,
    CgroupLayout,
    MediaError,
    MediumState,
    choose_cgroup_layout,
    dax_mode,
    dax_problem,
    evaluate,
    launch_prefix,
    parse_io_max,
    parse_sections,
    parse_tune2fs,
    parse_v1_limits,
    parse_xfs_info,
    partition_path,
    plan,
    pmem_device,
    prerequisite_problems,
    teardown_plan,
)
from dbmatrix.spec.errors import SpecError

WD = "/w"
LOOKUP = '"$(losetup -nO NAME -j /w/media-backing/m.img)"'
LOOKUP_P1 = '"$(losetup -nO NAME -j /w/media-backing/m.img)p1"'


def med(raw: dict[str, Any], name: str = "m") -> Medium:
    return parse_medium(raw, host="db1", name=name, workdir=WD)


# ---------------------------------------------------------------- plans

def test_dir_plan() -> None:
    m = med({"kind": "dir"})
    assert plan(m) == ["mkdir -p /w/media/m"]
    assert teardown_plan(m) == []
    assert launch_prefix(m) == []


def test_tmpfs_plan() -> None:
    m = med({"kind": "tmpfs", "size": "4G", "mount_options": ["huge=always"]})
    assert plan(m) == ["mkdir -p /w/media/m && mount -t tmpfs -o size=4294967296,huge=always dbmatrix-m /w/media/m"]
    assert teardown_plan(m) == ["umount /w/media/m", "rmdir --ignore-fail-on-non-empty /w/media/m"]


def test_loop_plan_xfs_stripe_and_over_provisioning() -> None:
    m = med({"kind": "loop", "size": "1G", "partition_pct": 60, "sunit": 512, "swidth": 1024,
             "mount_options": ["noatime", "nodiratime"]})
    assert plan(m) == [
        "mkdir -p /w/media-backing && fallocate -l 1073741824 /w/media-backing/m.img",
        "losetup --find --show -P --direct-io=on /w/media-backing/m.img",
        f"parted -s -a optimal {LOOKUP} mklabel gpt mkpart primary 0% 60%",
        f"mkfs.xfs -q -b size=4096 -d sunit=512,swidth=1024 {LOOKUP_P1}",
        f"mkdir -p /w/media/m && mount -t xfs -o noatime,nodiratime {LOOKUP_P1} /w/media/m",
    ]
    td = teardown_plan(m)
    assert td[:2] == ["umount /w/media/m", "rmdir --ignore-fail-on-non-empty /w/media/m"]
    assert td[2].startswith("for d in $({ losetup -nO NAME -j /w/media-backing/m.img 2>/dev/null;")
    assert td[2].endswith('; do losetup -d "$d"; done')
    assert td[3] == "rm -f /w/media-backing/m.img"


def test_loop_plan_ext4_stride_and_extra_options() -> None:
    m = med({"kind": "loop", "size": "256M", "fstype": "ext4", "block_size": 2048, "sunit": 16, "swidth": 32,
             "mkfs_options": ["-m", "0"], "direct_io": False, "mount_options": []})
    cmds = plan(m)
    assert cmds[1] == "losetup --find --show /w/media-backing/m.img"
    assert cmds[2] == f"mkfs.ext4 -q -b 2048 -E stride=4,stripe_width=8 -m 0 {LOOKUP}"
    assert cmds[3] == f"mkdir -p /w/media/m && mount -t ext4 {LOOKUP} /w/media/m"


def test_ram_block_plan_puts_a_sparse_file_on_its_own_tmpfs() -> None:
    m = med({"kind": "ram-block", "size": "1G"}, name="rb")
    look = '"$(losetup -nO NAME -j /w/media-backing/rb/rb.img)"'
    assert plan(m) == [
        "mkdir -p /w/media-backing/rb && mount -t tmpfs -o size=1074790400,mode=0700 dbmatrix-rb-backing "
        "/w/media-backing/rb",
        "truncate -s 1073741824 /w/media-backing/rb/rb.img",
        "losetup --find --show /w/media-backing/rb/rb.img",
        f"mkfs.xfs -q -b size=4096 {look}",
        f"mkdir -p /w/media/rb && mount -t xfs -o noatime {look} /w/media/rb",
    ]
    assert teardown_plan(m)[-2:] == ["umount /w/media-backing/rb",
                                     "rmdir --ignore-fail-on-non-empty /w/media-backing/rb"]


def test_blockdev_plan_seed_004_over_provisioning() -> None:
    m = med({"kind": "blockdev", "device": "/dev/nvme0n1", "partition_pct": 60, "sunit": 512, "swidth": 512,
             "mount_options": "noatime,nodiratime"}, name="ndb_data1")
    assert plan(m) == [
        "parted -s -a optimal /dev/nvme0n1 mklabel gpt mkpart primary 0% 60%",
        "mkfs.xfs -q -b size=4096 -d sunit=512,swidth=512 /dev/nvme0n1p1",
        "mkdir -p /w/media/ndb_data1 && mount -t xfs -o noatime,nodiratime /dev/nvme0n1p1 /w/media/ndb_data1",
    ]
    # the partition table and file system stay: only the mount goes
    assert teardown_plan(m) == ["umount /w/media/ndb_data1", "rmdir --ignore-fail-on-non-empty /w/media/ndb_data1"]
    whole = med({"kind": "blockdev", "device": "/dev/sdb", "fstype": "ext4"})
    assert plan(whole)[0] == "mkfs.ext4 -q -b 4096 /dev/sdb"


@pytest.mark.parametrize("dev,part", [("/dev/nvme0n1", "/dev/nvme0n1p1"), ("/dev/sdb", "/dev/sdb1"),
                                      ("/dev/loop3", "/dev/loop3p1"), ("/dev/vdb", "/dev/vdb1"),
                                      ("/dev/disk/by-id/nvme-X", "/dev/disk/by-id/nvme-X-part1")])
def test_partition_path(dev: str, part: str) -> None:
    assert partition_path(dev) == part


def test_mdraid_plan_seed_004_raid0() -> None:
    m = med({"kind": "mdraid", "devices": ["/dev/nvme6n1", "/dev/nvme7n1"], "chunk": "256K",
             "mount_options": ["noatime", "nodiratime"]}, name="ndb")
    md = "/dev/md/dbmatrix-ndb"
    create = (f"mdadm --create {md} --run --metadata=1.2 --level=0 --chunk=256 --raid-devices=2 "
              "/dev/nvme6n1 /dev/nvme7n1")
    assert plan(m) == [
        f"mdadm --assemble {md} /dev/nvme6n1 /dev/nvme7n1 || {create}",
        f"mkfs.xfs -q -b size=4096 -d sunit=512,swidth=1024 {md}",
        f"mkdir -p /w/media/ndb && mount -t xfs -o noatime,nodiratime {md} /w/media/ndb",
    ]
    assert teardown_plan(m)[-1] == f"mdadm --stop {md}"


def test_mdraid_plan_partitions_every_member() -> None:
    m = med({"kind": "mdraid", "devices": ["/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme2n1"], "chunk": "64K",
             "partition_pct": 80})
    cmds = plan(m)
    assert cmds[:3] == [f"parted -s -a optimal /dev/nvme{i}n1 mklabel gpt mkpart primary 0% 80%" for i in range(3)]
    assert "--chunk=64 --raid-devices=3 /dev/nvme0n1p1 /dev/nvme1n1p1 /dev/nvme2n1p1" in cmds[3]
    assert "-d sunit=128,swidth=384" in cmds[4]


@pytest.mark.parametrize("ns,mode,dev", [
    ("namespace0.0", "fsdax", "/dev/pmem0"), ("namespace0.0", "sector", "/dev/pmem0s"),
    ("namespace1.0", "fsdax", "/dev/pmem1"), ("namespace0.1", "sector", "/dev/pmem0.1s"),
    ("namespace0.0", "devdax", "/dev/dax0.0"), ("namespace1.2", "devdax", "/dev/dax1.2"),
])
def test_pmem_device_names(ns: str, mode: str, dev: str) -> None:
    assert pmem_device(ns, mode) == dev


def test_pmem_fsdax_plan() -> None:
    m = med({"kind": "pmem", "mode": "fsdax", "align": "2M"}, name="pm")
    assert plan(m) == [
        "ndctl create-namespace --force --reconfig=namespace0.0 --mode=fsdax --map=mem --align=2M",
        "mkfs.xfs -q -b size=4096 -m reflink=0 /dev/pmem0",
        "mkdir -p /w/media/pm && mount -t xfs -o noatime,dax /dev/pmem0 /w/media/pm",
    ]
    assert teardown_plan(m) == ["umount /w/media/pm", "rmdir --ignore-fail-on-non-empty /w/media/pm"]
    ext4 = med({"kind": "pmem", "mode": "fsdax", "fstype": "ext4", "namespace": "namespace1.0", "size": "64G"})
    assert plan(ext4)[0].endswith("--reconfig=namespace1.0 --mode=fsdax --map=mem --size=68719476736")
    assert plan(ext4)[1] == "mkfs.ext4 -q -b 4096 /dev/pmem1"


def test_pmem_sector_and_devdax_plans() -> None:
    sector = med({"kind": "pmem", "mode": "sector", "sector_size": 512}, name="ps")
    assert plan(sector) == [
        "ndctl create-namespace --force --reconfig=namespace0.0 --mode=sector --sector-size=512",
        "mkfs.xfs -q -b size=4096 /dev/pmem0s",
        "mkdir -p /w/media/ps && mount -t xfs -o noatime /dev/pmem0s /w/media/ps",
    ]
    devdax = med({"kind": "pmem", "mode": "devdax", "align": "1G"})
    assert plan(devdax) == ["ndctl create-namespace --force --reconfig=namespace0.0 --mode=devdax --align=1G"]
    assert teardown_plan(devdax) == []
    steps = media.apply_steps(devdax)
    assert steps[0].done == "ndctl list -n namespace0.0 | grep -q '\"mode\":\"devdax\"'"


THROTTLED = {"kind": "throttled", "base": {"kind": "loop", "size": "1G", "partition_pct": 60},
             "read_iops": 300, "write_iops": 100, "read_bps": "10M"}
DEVNUM = '$(cat /sys/class/block/"$(basename "$(readlink -f "$(losetup -nO NAME -j /w/media-backing/slow.img)")")"/dev)'


def test_throttled_plan_cgroup_v1() -> None:
    m = med({**THROTTLED, "cgroup": "v1"}, name="slow")
    cmds = plan(m)
    cg = "/sys/fs/cgroup/blkio/dbmatrix/slow"
    assert cmds[:5] == plan(med(THROTTLED["base"], name="slow"))  # the base medium first, at the same path
    assert cmds[5:] == [
        f"mkdir -p {cg}",
        f'echo "{DEVNUM} 300" > {cg}/blkio.throttle.read_iops_device',
        f'echo "{DEVNUM} 100" > {cg}/blkio.throttle.write_iops_device',
        f'echo "{DEVNUM} 10485760" > {cg}/blkio.throttle.read_bps_device',
    ]
    # the limit is on the whole loop device, never on the partition (the kernel refuses partitions)
    assert "p1" not in "".join(cmds[5:])
    assert plan(med(THROTTLED, name="slow"), layout=V1_DEFAULT) == cmds


def test_throttled_plan_cgroup_v2() -> None:
    m = med({**THROTTLED, "cgroup": "v2"}, name="slow")
    assert plan(m)[5:] == [
        "echo +io > /sys/fs/cgroup/cgroup.subtree_control",
        "mkdir -p /sys/fs/cgroup/dbmatrix",
        "echo +io > /sys/fs/cgroup/dbmatrix/cgroup.subtree_control",
        "mkdir -p /sys/fs/cgroup/dbmatrix/slow",
        f'echo "{DEVNUM} riops=300 wiops=100 rbps=10485760" > /sys/fs/cgroup/dbmatrix/slow/io.max',
    ]
    hybrid = plan(m, layout=CgroupLayout(2, "/sys/fs/cgroup/unified"))
    assert hybrid[-1].endswith("> /sys/fs/cgroup/unified/dbmatrix/slow/io.max")


def test_throttled_teardown_removes_cgroups_then_the_base() -> None:
    td = teardown_plan(med(THROTTLED, name="slow"))
    assert td[:6] == ["rmdir /sys/fs/cgroup/dbmatrix/slow", "rmdir /sys/fs/cgroup/dbmatrix 2>/dev/null || true",
                      "rmdir /sys/fs/cgroup/unified/dbmatrix/slow",
                      "rmdir /sys/fs/cgroup/unified/dbmatrix 2>/dev/null || true",
                      "rmdir /sys/fs/cgroup/blkio/dbmatrix/slow",
                      "rmdir /sys/fs/cgroup/blkio/dbmatrix 2>/dev/null || true"]
    assert td[6:] == teardown_plan(med(THROTTLED["base"], name="slow"))
    assert teardown_plan(med({**THROTTLED, "cgroup": "v1"}, name="slow"))[0] == "rmdir /sys/fs/cgroup/blkio/dbmatrix/slow"


def test_non_root_steps_hand_the_mount_point_and_cgroup_to_the_login() -> None:
    steps = media.apply_steps(med({**THROTTLED, "cgroup": "v1"}, name="slow"), owner="1000:1000")
    cmds = [s.command for s in steps]
    assert "chown 1000:1000 /w/media/slow" in cmds
    assert cmds[-1] == ("chown 1000:1000 /sys/fs/cgroup/blkio/dbmatrix/slow/cgroup.procs "
                        "/sys/fs/cgroup/blkio/dbmatrix/slow/tasks")
    assert all(s.privileged for s in steps)
    assert not media.apply_steps(med({"kind": "dir"}))[0].privileged


def test_every_apply_step_but_the_limit_writes_has_a_done_test() -> None:
    for raw in (THROTTLED, {"kind": "mdraid", "devices": ["/dev/a1", "/dev/b1"], "partition_pct": 50},
                {"kind": "pmem", "mode": "fsdax"}, {"kind": "ram-block", "size": "1G"}):
        for s in media.apply_steps(med(raw), owner="1:1"):
            assert s.done or s.what.startswith(("set ", "let ")), s


def test_hand_built_media_are_validated() -> None:
    with pytest.raises(MediaError, match=r"medium 'x': inventory\.hosts\[\?\]\.media\.x\.size: required"):
        plan(Medium("x", "tmpfs", "/t"))
    assert plan(Medium("x", "tmpfs", "/t", options={"size": 2**20, "mount_options": []}))[0].startswith("mkdir")


# ---------------------------------------------------------------- launch prefix

def test_launch_prefix_candidates_and_state() -> None:
    m = med(THROTTLED, name="slow")
    pre = launch_prefix(m)
    assert pre[:2] == ["sh", "-c"] and pre[3] == "dbmatrix-throttle"
    assert ("for g in /sys/fs/cgroup/dbmatrix/slow /sys/fs/cgroup/unified/dbmatrix/slow "
            "/sys/fs/cgroup/blkio/dbmatrix/slow; do") in pre[2]
    state = MediumState("slow", "throttled", "/w/media/slow", None, None, None, None, None, (), None, None,
                        {"cgroup": "/x/dbmatrix/slow", "version": 1}, ())
    assert "for g in /x/dbmatrix/slow; do" in launch_prefix(m, state)[2]
    assert "for g in /sys/fs/cgroup/blkio/dbmatrix/slow; do" in launch_prefix(med({**THROTTLED, "cgroup": "v1"},
                                                                                   name="slow"))[2]


def test_launch_prefix_joins_the_group_and_execs_with_the_same_pid(tmp_path: Path) -> None:
    """Run the prefix for real with a plain directory standing in for the cgroup directory."""
    group = tmp_path / "dbmatrix" / "slow"
    group.mkdir(parents=True)
    state = MediumState("slow", "throttled", "/w", None, None, None, None, None, (), None, None,
                        {"cgroup": str(group)}, ())
    pre = launch_prefix(med(THROTTLED, name="slow"), state)
    out = subprocess.run([*pre, "sh", "-c", "echo $$; echo \"$0 $1\"", "arg0", "arg 1"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == (group / "cgroup.procs").read_text().strip()  # exec kept the PID
    assert out[1] == "arg0 arg 1"
    missing = launch_prefix(med(THROTTLED, name="slow"),
                            MediumState("slow", "throttled", "/w", None, None, None, None, None, (), None, None,
                                        {"cgroup": str(tmp_path / "gone")}, ()))
    r = subprocess.run([*missing, "true"], capture_output=True, text=True)
    assert r.returncode == 125 and "run media.ensure first" in r.stderr
    assert shlex.join(pre)  # the runner joins it into a command line


# ---------------------------------------------------------------- DAX check (real findmnt output)

# `findmnt -no OPTIONS` on this machine after `mount -o dax,noatime /dev/loop0p1 …` (exit 0)
DAX_NEVER = "rw,noatime,dax=never,inode64,logbufs=8,logbsize=256k,sunit=512,swidth=1024,noquota"
PLAIN_XFS = "rw,relatime,inode64,logbufs=8,logbsize=256k,sunit=512,swidth=1024,noquota"
DAX_ALWAYS = "rw,noatime,dax=always,inode64,logbufs=8,logbsize=32k,noquota"  # XFS on a real pmem0
OLD_EXT4_DAX = "rw,relatime,dax"  # kernels before 5.8 print a bare dax


def test_dax_mode() -> None:
    assert dax_mode(DAX_NEVER) == "never"
    assert dax_mode(PLAIN_XFS) is None
    assert dax_mode(DAX_ALWAYS) == "always"
    assert dax_mode(OLD_EXT4_DAX + "\n") == "always"
    assert dax_mode("rw,dax=inode") == "inode"


def test_dax_problem_catches_a_silent_dax_never() -> None:
    assert "kernel mounted dax=never" in (dax_problem(DAX_NEVER) or "")
    assert "show no dax" in (dax_problem(PLAIN_XFS) or "")
    assert "dax=inode" in (dax_problem("rw,dax=inode") or "")
    assert dax_problem(DAX_ALWAYS) is None and dax_problem(OLD_EXT4_DAX) is None


# ---------------------------------------------------------------- facts and evaluation

# Output of facts_script() for a 1G loop, 60 % partition, XFS sunit=512/swidth=1024, mounted -o noatime,dax
# (captured on this machine, workdir /var/tmp/dbm).
LOOP_FACTS = """@@mount
{
   "filesystems": [
      {
         "target": "/var/tmp/dbm/media/fx",
         "source": "/dev/loop0p1",
         "fstype": "xfs",
         "options": "rw,noatime,dax=never,inode64,logbufs=8,logbsize=256k,sunit=512,swidth=1024,noquota",
         "size": 575668224
      }
   ]
}
@@block
device=loop0p1
sectors=1255424
start=2048
disk=loop0
disk_sectors=2097152
devnum=7:0
dax=0
loop_backing=/var/tmp/dbm/media-backing/fx.img
loop_dio=1
md_level=
md_chunk_size=
md_raid_disks=
@@expected
target=loop0p1
@@xfs_info
meta-data=/dev/loop0p1           isize=512    agcount=8, agsize=19648 blks
         =                       sectsz=512   attr=2, projid32bit=1
         =                       crc=1        finobt=1, sparse=1, rmapbt=0
         =                       reflink=1    bigtime=1 inobtcount=1 nrext64=0
data     =                       bsize=4096   blocks=156928, imaxpct=25
         =                       sunit=64     swidth=128 blks
naming   =version 2              bsize=4096   ascii-ci=0, ftype=1
log      =internal log           bsize=4096   blocks=16384, version=2
         =                       sectsz=512   sunit=64 blks, lazy-count=1
realtime =none                   extsz=4096   blocks=0, rtextents=0
@@backing
real=/var/tmp/dbm/media-backing/fx.img
bytes=1073741824
"""
LOOP_RAW = {"kind": "loop", "size": "1G", "partition_pct": 60, "sunit": 512, "swidth": 1024}


def loop_medium(**extra: Any) -> Medium:
    return parse_medium({**LOOP_RAW, **extra}, host="h", name="fx", workdir="/var/tmp/dbm")


def test_parse_sections_and_xfs_info() -> None:
    sec = parse_sections(LOOP_FACTS)
    assert list(sec) == ["mount", "block", "expected", "xfs_info", "backing"]
    assert parse_xfs_info(sec["xfs_info"]) == {"bsize": 4096, "sunit": 64, "swidth": 128}
    assert parse_xfs_info("garbage") == {}


def test_evaluate_a_good_loop_medium() -> None:
    sections = parse_sections(LOOP_FACTS.replace("dax=never,", ""))
    st = evaluate(loop_medium(), sections, host="h")
    assert (st.source, st.device, st.disk, st.fstype) == ("/dev/loop0p1", "loop0p1", "loop0", "xfs")
    assert st.size_bytes == 575668224 and st.dax is False and st.throttle is None
    assert "xfs sunit=512 swidth=1024 sectors (64/128 blocks)" in st.checks
    assert "partition ends at 59.96 % of loop0 (recipe 60 %)" in st.checks
    assert "loop direct I/O on" in st.checks
    d = st.to_dict()
    assert json.loads(json.dumps(d)) == d and d["commands"] == []


def test_evaluate_catches_dax_never_from_a_real_mount() -> None:
    with pytest.raises(MediaError) as ei:
        evaluate(loop_medium(mount_options=["noatime", "dax"]), parse_sections(LOOP_FACTS), host="h")
    msg = str(ei.value)
    assert msg.startswith("loop medium 'fx' on host h: ")
    assert "kernel mounted dax=never" in msg
    assert "/sys/block/loop0/queue/dax = 0" in msg


@pytest.mark.parametrize("change,expected", [
    (("sunit=64     swidth=128", "sunit=64     swidth=64 "), "xfs stripe is sunit=512 swidth=512 sectors"),
    (("bytes=1073741824", "bytes=2147483648"), "backing file has 2147483648 bytes"),
    (("start=2048", "start=1048576"), "partition ends at 109.86 %"),
    (("loop_dio=1", "loop_dio=0"), "loop direct I/O is off"),
    (('"fstype": "xfs"', '"fstype": "ext4"'), "file system is ext4, the recipe says xfs"),
    (("target=loop0p1", "target=loop1p1"), "expected the device loop1p1"),
    (("rw,noatime,", "rw,relatime,"), "mount option noatime is missing"),
    (("loop_backing=/var/tmp/dbm/media-backing/fx.img", "loop_backing=/other.img"), "backing file is /other.img"),
])
def test_evaluate_names_what_differs(change: tuple[str, str], expected: str) -> None:
    text = LOOP_FACTS.replace("dax=never,", "").replace(*change)
    with pytest.raises(MediaError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        evaluate(loop_medium(), parse_sections(text), host="h")


def test_evaluate_not_mounted() -> None:
    with pytest.raises(MediaError, match=r"loop medium 'fx' on host h: nothing is mounted at "
                                         r"/var/tmp/dbm/media/fx$"):
        evaluate(loop_medium(), {"mount": "", "backing": ""}, host="h")


TMPFS_FACTS = """@@mount
{"filesystems": [{"target": "/w/media/t", "source": "dbmatrix-t", "fstype": "tmpfs",
  "options": "rw,relatime,size=65536k", "size": 67108864}]}
"""


def test_evaluate_tmpfs() -> None:
    m = parse_medium({"kind": "tmpfs", "size": "64M", "emulates": "pmem-fsdax"}, host="h", name="t", workdir=WD)
    st = evaluate(m, parse_sections(TMPFS_FACTS))
    assert (st.fstype, st.device, st.disk, st.size_bytes, st.dax, st.emulates) == (
        "tmpfs", None, None, 2**26, None, "pmem-fsdax")
    bigger = parse_medium({"kind": "tmpfs", "size": "128M"}, host="h", name="t", workdir=WD)
    with pytest.raises(MediaError, match="size is 67108864 bytes, the recipe says 134217728"):
        evaluate(bigger, parse_sections(TMPFS_FACTS))


# Captured from a throttled ram-block (ext4, 64M) with read_iops=300 and write_bps=10M, cgroup v1.
THROTTLED_FACTS = """@@mount
{"filesystems": [{"target": "/var/tmp/dbm/media/fy", "source": "/dev/loop0", "fstype": "ext4",
  "options": "rw,noatime", "size": 58675200}]}
@@block
device=loop0
sectors=131072
disk=loop0
disk_sectors=131072
devnum=7:0
dax=0
loop_backing=/var/tmp/dbm/media-backing/fy/fy.img
loop_dio=0
@@expected
target=loop0
@@tune2fs
tune2fs 1.47.0 (5-Feb-2023)
Filesystem volume name:   <none>
Block count:              16384
Block size:               4096
Fragment size:            4096
@@backing
real=/var/tmp/dbm/media-backing/fy/fy.img
bytes=67108864
@@backing_mount
{"filesystems": [{"target": "/var/tmp/dbm/media-backing/fy", "source": "dbmatrix-fy-backing",
  "fstype": "tmpfs", "options": "rw,relatime,size=66560k,mode=700", "size": 68157440}]}
@@cgroup
exists
@@limit:read_iops
7:0 300
@@limit:write_iops
@@limit:read_bps
@@limit:write_bps
7:0 10485760
"""


def throttled_medium(**extra: Any) -> Medium:
    raw = {"kind": "throttled", "base": {"kind": "ram-block", "size": "64M", "fstype": "ext4"},
           "read_iops": 300, "write_bps": "10M", **extra}
    return parse_medium(raw, host="h", name="fy", workdir="/var/tmp/dbm")


def test_evaluate_throttled_v1() -> None:
    st = evaluate(throttled_medium(), parse_sections(THROTTLED_FACTS), V1_DEFAULT)
    assert st.kind == "throttled" and st.base_kind == "ram-block" and st.disk == "loop0"
    assert st.throttle == {"cgroup": "/sys/fs/cgroup/blkio/dbmatrix/fy", "version": 1, "device": "7:0",
                           "read_iops": 300, "write_iops": None, "read_bps": None, "write_bps": 10485760}
    assert "read_iops=300 on 7:0" in st.checks
    with pytest.raises(MediaError, match="read_iops on 7:0 is 300, the recipe says 200"):
        evaluate(throttled_medium(read_iops=200), parse_sections(THROTTLED_FACTS), V1_DEFAULT)
    with pytest.raises(MediaError, match="cgroup /sys/fs/cgroup/blkio/dbmatrix/fy does not exist"):
        evaluate(throttled_medium(), parse_sections(THROTTLED_FACTS.replace("exists", "")), V1_DEFAULT)


def test_evaluate_throttled_v2() -> None:
    text = THROTTLED_FACTS.split("@@cgroup")[0] + (
        "@@cgroup\nexists\n@@io.max\n7:0 rbps=max wbps=10485760 riops=300 wiops=max\n")
    st = evaluate(throttled_medium(), parse_sections(text), V2_DEFAULT)
    assert st.throttle is not None and st.throttle["cgroup"] == "/sys/fs/cgroup/dbmatrix/fy"
    assert st.throttle["version"] == 2
    with pytest.raises(MediaError, match="io.max riops on 7:0 is None"):
        evaluate(throttled_medium(), parse_sections(text.replace("riops=300", "riops=max")), V2_DEFAULT)


def test_limit_file_parsers() -> None:
    assert parse_v1_limits("7:0 300\n259:1 42\n") == {"7:0": 300, "259:1": 42}
    assert parse_v1_limits("") == {}
    assert parse_io_max("7:0 rbps=max wbps=10485760 riops=300 wiops=max\n") == {
        "7:0": {"rbps": None, "wbps": 10485760, "riops": 300, "wiops": None}}
    assert parse_tune2fs("Block size:               4096\nRAID stride:              4\n"
                         "RAID stripe width:        8\n") == {"bsize": 4096, "stride": 4, "stripe_width": 8}


def test_evaluate_md_and_pmem_from_facts() -> None:
    md = parse_medium({"kind": "mdraid", "devices": ["/dev/nvme6n1", "/dev/nvme7n1"], "chunk": "256K"},
                      host="h", name="ndb", workdir=WD)
    facts = ('@@mount\n{"filesystems": [{"target": "/w/media/ndb", "source": "/dev/md127", "fstype": "xfs", '
             '"options": "rw,noatime,sunit=512,swidth=1024", "size": 1000}]}\n'
             "@@block\ndevice=md127\nsectors=100\ndisk=md127\ndisk_sectors=100\ndevnum=9:127\ndax=0\n"
             "md_level=raid0\nmd_chunk_size=262144\nmd_raid_disks=2\n@@expected\ntarget=md127\n"
             "@@xfs_info\ndata     =                       bsize=4096   blocks=1, imaxpct=25\n"
             "         =                       sunit=64     swidth=128 blks\n")
    assert "md raid0 chunk 262144 over 2 devices" in evaluate(md, parse_sections(facts)).checks
    with pytest.raises(MediaError, match=r"md array is level/chunk/devices \('raid0', '524288', '2'\)"):
        evaluate(md, parse_sections(facts.replace("262144", "524288")))
    pm = parse_medium({"kind": "pmem", "mode": "fsdax"}, host="h", name="pm", workdir=WD)
    pfacts = (facts.replace("/w/media/ndb", "/w/media/pm").replace("md127", "pmem0")
              .replace("rw,noatime,", "rw,noatime,dax=always,").replace("dax=0", "dax=1")
              + '@@ndctl\n[\n  {\n    "dev":"namespace0.0",\n    "mode":"fsdax",\n    "map":"mem",\n'
                '    "blockdev":"pmem0"\n  }\n]\n')
    st = evaluate(pm, parse_sections(pfacts))
    assert st.dax is True and st.device == "pmem0" and "DAX active (dax=always)" in st.checks
    with pytest.raises(MediaError, match="namespace namespace0.0 is in mode sector, the recipe says fsdax"):
        evaluate(pm, parse_sections(pfacts.replace('"mode":"fsdax"', '"mode":"sector"')))


# ---------------------------------------------------------------- cgroup layout

THIS_MACHINE_MOUNTS = """tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
PURE_V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


def test_choose_cgroup_layout() -> None:
    hybrid = {"/sys/fs/cgroup/unified": "hugetlb"}
    assert choose_cgroup_layout(THIS_MACHINE_MOUNTS, hybrid) == CgroupLayout(1, "/sys/fs/cgroup/blkio")
    assert choose_cgroup_layout(THIS_MACHINE_MOUNTS, hybrid, "v1") == V1_DEFAULT
    with pytest.raises(MediaError, match=r"no cgroup2 hierarchy with the io controller .*cgroup2 at "
                                         r"/sys/fs/cgroup/unified"):
        choose_cgroup_layout(THIS_MACHINE_MOUNTS, hybrid, "v2")
    v2 = {"/sys/fs/cgroup": "cpuset cpu io memory hugetlb pids rdma misc"}
    assert choose_cgroup_layout(PURE_V2, v2) == V2_DEFAULT
    with pytest.raises(MediaError, match="cgroup mounts: none"):
        choose_cgroup_layout("proc /proc proc rw 0 0\n", {})


# ---------------------------------------------------------------- prerequisites

def test_prerequisite_messages() -> None:
    pm = parse_medium({"kind": "pmem", "mode": "fsdax"}, host="h", name="pm", workdir=WD)
    assert prerequisite_problems(pm, "", "db1") == []
    msg = prerequisite_problems(pm, "no-pmem\n", "db1")
    assert msg[0].startswith("pmem: no PMEM namespace/region on host db1: `ndctl list -RN` shows none")
    assert "emulates: pmem-fsdax" in msg[0]
    assert prerequisite_problems(pm, "no-namespace namespace1.0 \n", "db1") == [
        "pmem: no namespace namespace0.0 on host db1; namespaces: namespace1.0"]
    md = parse_medium({"kind": "mdraid", "devices": ["/dev/nvme6n1", "/dev/nvme7n1"]}, host="h", name="r",
                      workdir=WD)
    msgs = prerequisite_problems(md, "tool mdadm\ndevice /dev/nvme6n1\nno-md\n", "db1")
    assert msgs[0].startswith("mdraid: no MD RAID on host db1: /proc/mdstat is missing")
    assert msgs[1] == "mdraid: missing tools on host db1: mdadm (package mdadm); install them (dbmatrix setup)"
    assert msgs[2] == "mdraid: block device(s) missing on host db1: /dev/nvme6n1"
    bd = parse_medium({"kind": "blockdev", "device": "/dev/vda"}, host="h", name="b", workdir=WD)
    assert prerequisite_problems(bd, "in-use /dev/vda /\n", "db1") == [
        "blockdev: refusing to partition/format devices in use on host db1: /dev/vda is mounted at /"]


def test_prerequisite_script_runs_in_a_posix_shell() -> None:
    """The generated script is valid sh (syntax check with -n; nothing executes)."""
    for raw in ({"kind": "pmem", "mode": "fsdax"}, {"kind": "mdraid", "devices": ["/dev/a", "/dev/b"]},
                THROTTLED, {"kind": "blockdev", "device": "/dev/sdz", "partition_pct": 50}):
        m = med(raw)
        for script in (media.prerequisite_script(m), media.facts_script(m),
                       *plan(m), *teardown_plan(m), *(s.done for s in media.apply_steps(m) if s.done)):
            r = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
            assert r.returncode == 0, (script, r.stderr)


def test_required_tools_per_kind() -> None:
    assert media.required_tools(med({"kind": "dir"})) == ["findmnt"]
    tools = media.required_tools(med(THROTTLED))
    assert {"losetup", "fallocate", "parted", "mkfs.xfs", "xfs_info", "blkid"} <= set(tools)
    assert "mkfs.ext4" in media.required_tools(med({"kind": "loop", "size": "64M", "fstype": "ext4"}))
    assert "ndctl" in media.required_tools(med({"kind": "pmem", "mode": "devdax"}))


# ---------------------------------------------------------------- NVMe over Fabrics (seed 001's remote NVMe)

NVMEOF_RAW = {"kind": "nvmeof", "transport": "tcp", "address": "192.0.2.10", "service_id": 4420,
              "nqn": "nqn.2019-08.org.example:pool1", "namespace": 1, "mount_options": ["noatime"]}


def test_nvmeof_plan_connects_then_formats_the_looked_up_namespace() -> None:
    m = med(NVMEOF_RAW)
    steps = plan(m)
    assert steps[0] == "modprobe nvme-tcp"
    assert steps[1] == ("nvme connect -t tcp -a 192.0.2.10 -s 4420 -n nqn.2019-08.org.example:pool1 "
                        "&& udevadm settle")
    assert steps[2].startswith("mkfs.xfs -q -b size=4096") and "/sys/class/nvme-subsystem/*" in steps[2]
    assert steps[3].startswith("mkdir -p /w/media/m && mount -t xfs -o noatime \"$(for s in")
    assert teardown_plan(m)[-1] == "nvme disconnect -n nqn.2019-08.org.example:pool1"
    host = med({**NVMEOF_RAW, "transport": "rdma", "host_nqn": "nqn.2014-08.org.nvmexpress:uuid:1234"})
    assert plan(host)[1].startswith("nvme connect -t rdma") and "--hostnqn nqn.2014-08.org.nvmexpress:uuid:1234" in \
        plan(host)[1]


def test_nvmeof_lookup_finds_the_namespace_of_the_subsystem(tmp_path: Path) -> None:
    """The lookup shell, run against a fake /sys tree: the connected subsystem's namespace device."""
    import subprocess

    from dbmatrix.hosts.media import nvmeof_lookup

    root = tmp_path / "sys" / "class" / "nvme-subsystem"
    for sub, nqn, dev in (("nvme-subsys0", "nqn.2019-08.org.example:other", "nvme0n1"),
                          ("nvme-subsys3", "nqn.2019-08.org.example:pool1", "nvme3n1")):
        (root / sub / dev).mkdir(parents=True)
        (root / sub / "subsysnqn").write_text(nqn + "\n")
    script = nvmeof_lookup("nqn.2019-08.org.example:pool1", 1).replace("/sys/class", str(tmp_path / "sys" / "class"))
    got = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    assert got == "/dev/nvme3n1"
    missing = nvmeof_lookup("nqn.2019-08.org.example:none", 1).replace("/sys/class", str(tmp_path / "sys" / "class"))
    assert subprocess.run(["sh", "-c", missing], capture_output=True, text=True).stdout == ""


def test_nvmeof_refusals_and_prerequisites() -> None:
    with pytest.raises(SpecError, match=r"\.transport: required for kind nvmeof"):
        med({"kind": "nvmeof", "address": "a", "nqn": "nqn.2019-08.org.example:p"})
    with pytest.raises(SpecError, match="is not an NVMe qualified name"):
        med({**NVMEOF_RAW, "nqn": "pool1"})
    with pytest.raises(SpecError, match="transport"):
        med({**NVMEOF_RAW, "transport": "fc"})
    problems = prerequisite_problems(med(NVMEOF_RAW), "tool nvme\nno-nvmeof-tcp\n", "h")
    assert any("cannot load nvme-tcp" in p and "NVMe over Fabrics" in p for p in problems)
    assert any("nvme (package nvme-cli)" in p for p in problems)


NVMEOF_FACTS = """@@mount 0
{
   "filesystems": [
      {"target": "/w/media/m", "source": "/dev/nvme3n1", "fstype": "xfs",
       "options": "rw,noatime,inode64,logbufs=8,logbsize=32k,noquota", "size": 1063256064}
   ]
}
@@block 0
device=nvme3n1
sectors=2097152
disk=nvme3n1
disk_sectors=2097152
devnum=259:3
dax=0
loop_backing=
loop_dio=
md_level=
md_chunk_size=
md_raid_disks=
@@expected 0
target=nvme3n1
@@xfs_info 0
data     =                       bsize=4096   blocks=262144, imaxpct=25
         =                       sunit=0      swidth=0 blks
@@nvmeof 0
found=yes
transport=tcp
state=live
address=traddr=192.0.2.10,trsvcid=4420,src_addr=192.0.2.1
"""


def test_evaluate_nvmeof_checks_the_fabric_connection() -> None:
    st = evaluate(med(NVMEOF_RAW), parse_sections(NVMEOF_FACTS), host="h")
    assert st.device == "nvme3n1" and st.fstype == "xfs"
    assert {"subsystem nqn.2019-08.org.example:pool1 connected", "over tcp", "controller live",
            "target 192.0.2.10"} <= set(st.checks)
    with pytest.raises(MediaError, match="controller state 'connecting' \\(want live\\)"):
        evaluate(med(NVMEOF_RAW), parse_sections(NVMEOF_FACTS.replace("state=live", "state=connecting")), host="h")
    with pytest.raises(MediaError, match="connected over rdma, the recipe says tcp"):
        evaluate(med(NVMEOF_RAW), parse_sections(NVMEOF_FACTS.replace("transport=tcp", "transport=rdma")), host="h")
