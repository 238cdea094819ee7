"""Real media on this machine (root): tmpfs, loop XFS with stripe geometry and a 60 % partition,
ram-block and a throttled medium whose IOPS cap is measured with fio; the DAX check against a real
``mount -o dax`` that the kernel turns into ``dax=never``; PMEM and MD fail early with clear messages.

Every medium is torn down by the fixture, and whatever a failing test leaves behind (mounts, loop
devices, cgroups) is removed by a last-resort sweep of the test's own workdir and medium names.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.hosts import media
from dbmatrix.hosts.inventory import Medium, parse_medium
from dbmatrix.hosts.media import MediaError, ensure, launch_prefix, plan, teardown, verify
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.hosts.scripted import ScriptedHost

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="building media needs root (mount, losetup, cgroups)"),
]

IOPS_CAP = 300


@pytest.fixture
def host() -> ScriptedHost:
    """This machine, remembering every command run on it (to show what ensure did not run)."""
    return ScriptedHost("localhost", passthrough=LocalHost())


def _mounts_under(prefix: str) -> list[str]:
    with open("/proc/self/mounts") as f:
        targets = [line.split()[1] for line in f]
    return sorted((t for t in targets if t == prefix or t.startswith(prefix + "/")), reverse=True)


def _sweep(host: LocalHost, workdir: str, names: list[str]) -> None:
    """Remove whatever the media of a failed test may have left: mounts, loops, cgroups."""
    for t in _mounts_under(workdir):
        host.run(f"umount -l {shlex.quote(t)}", check=False)
    for line in host.run("losetup -nO NAME,BACK-FILE", check=False).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith(workdir + "/"):
            host.run(f"losetup -d {parts[0]}", check=False)
    for n in names:
        for root in ("/sys/fs/cgroup/blkio", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            host.run(f"rmdir {root}/dbmatrix/{n} 2>/dev/null", check=False)


@pytest.fixture
def build(host: ScriptedHost) -> Iterator[Callable[[str, dict[str, Any]], Medium]]:
    """Make media under a fresh workdir with unique names; tear them all down afterwards."""
    workdir = str(Path(os.environ["DBMATRIX_WORKDIR"]) / f"media-{uuid.uuid4().hex[:8]}")
    made: list[Medium] = []

    def make(prefix: str, raw: dict[str, Any]) -> Medium:
        m = parse_medium(raw, host="localhost", name=f"{prefix}-{uuid.uuid4().hex[:6]}", workdir=workdir)
        made.append(m)
        return m

    try:
        yield make
    finally:
        errors = []
        for m in reversed(made):
            try:
                teardown(host, m)
            except Exception as exc:
                errors.append(exc)
        _sweep(host, workdir, [m.name for m in made])
        leftover = _mounts_under(workdir)
        if not leftover:
            host.run(f"rm -rf {shlex.quote(workdir)}", check=False)
        assert not errors, errors
        assert not leftover, leftover


def _findmnt(path: str) -> dict[str, Any] | None:
    r = LocalHost().run(f"findmnt -J -b -o SOURCE,FSTYPE,OPTIONS,SIZE --mountpoint {shlex.quote(path)}",
                        check=False)
    return json.loads(r.stdout)["filesystems"][0] if r.ok else None


def test_dir_is_created_once(host: ScriptedHost, build) -> None:
    m = build("dir", {"kind": "dir"})
    st = ensure(host, m)
    assert os.path.isdir(m.path) and st.commands == (f"mkdir -p {m.path}",)
    assert st.fstype and st.size_bytes
    assert ensure(host, m).commands == ()
    teardown(host, m)
    assert os.path.isdir(m.path)  # a directory medium is never deleted


def test_tmpfs_apply_verify_idempotent_teardown(host: ScriptedHost, build) -> None:
    m = build("tmpfs", {"kind": "tmpfs", "size": "64M", "emulates": "pmem-fsdax"})
    st = ensure(host, m)
    assert st.commands == tuple(plan(m))
    assert (st.fstype, st.size_bytes, st.device, st.dax, st.emulates) == ("tmpfs", 64 * 2**20, None, None,
                                                                          "pmem-fsdax")
    fm = _findmnt(m.path)
    assert fm and fm["fstype"] == "tmpfs" and fm["size"] == 64 * 2**20
    host.commands.clear()
    again = ensure(host, m)
    assert again.commands == ()
    assert not any("mount -t" in c or "mkfs" in c for c in host.commands), host.commands
    assert verify(host, m).to_dict() == {**st.to_dict(), "commands": []}
    teardown(host, m)
    assert _findmnt(m.path) is None and not os.path.exists(m.path)
    teardown(host, m)  # already torn down: fine
    with pytest.raises(MediaError, match="nothing is mounted at"):
        verify(host, m)


def test_loop_xfs_with_stripe_geometry_and_60_percent_partition(host: ScriptedHost, build) -> None:
    m = build("loop", {"kind": "loop", "size": "1G", "partition_pct": 60, "sunit": 512, "swidth": 1024,
                       "mount_options": ["noatime", "nodiratime"]})
    st = ensure(host, m)
    assert st.fstype == "xfs" and st.disk and st.disk.startswith("loop")
    assert st.device == f"{st.disk}p1"
    # independent checks of what the kernel and xfs_info say
    sizes = host.run(f"lsblk -bdno SIZE /dev/{st.disk} /dev/{st.device}").stdout.split()
    disk_b, part_b = int(sizes[0]), int(sizes[1])
    assert disk_b == 2**30
    assert 0.59 <= part_b / disk_b <= 0.60, part_b / disk_b
    info = host.run(f"xfs_info {shlex.quote(m.path)}").stdout
    assert re.search(r"^data\s+=\s+bsize=4096", info, re.M)
    assert re.search(r"^\s+=\s+sunit=64\s+swidth=128 blks", info, re.M), info  # 256K/512K in 4K blocks
    opts = (_findmnt(m.path) or {})["options"].split(",")
    assert "noatime" in opts and "nodiratime" in opts
    assert host.run(f"cat /sys/block/{st.disk}/loop/dio").stdout.strip() == "1"
    backing = Path(m.options["backing_file"])
    assert backing.stat().st_size == 2**30
    # a half-built medium (unmounted) is finished with only the missing step
    host.run(f"umount {shlex.quote(m.path)}")
    resumed = ensure(host, m)
    assert len(resumed.commands) == 1 and " mount -t xfs " in resumed.commands[0]
    teardown(host, m)
    assert not backing.exists() and _findmnt(m.path) is None
    assert f"{backing}" not in host.run("losetup -nO BACK-FILE").stdout


def test_ram_block_is_ram_behind_a_loop_device(host: ScriptedHost, build) -> None:
    m = build("ramblk", {"kind": "ram-block", "size": "640M", "emulates": "pmem-sector"})
    st = ensure(host, m)
    bdir = m.options["backing_dir"]
    assert st.fstype == "xfs" and st.disk and st.disk.startswith("loop") and st.emulates == "pmem-sector"
    bm = _findmnt(bdir)
    assert bm and bm["fstype"] == "tmpfs"
    back = host.run(f"cat /sys/block/{st.disk}/loop/backing_file").stdout.strip()
    assert back == f"{bdir}/{m.name}.img"
    used0 = int(host.run(f"df -B1 --output=used {bdir} | tail -n 1").stdout)
    host.run(f"dd if=/dev/zero of={m.path}/f bs=1M count=16 oflag=direct status=none")
    used1 = int(host.run(f"df -B1 --output=used {bdir} | tail -n 1").stdout)
    assert used1 - used0 >= 12 * 2**20  # the data landed in RAM (the backing tmpfs)
    assert ensure(host, m).commands == ()
    teardown(host, m)
    assert _findmnt(bdir) is None and _findmnt(m.path) is None and not os.path.exists(bdir)


def _fio_iops(host: LocalHost, prefix: list[str], file: str, seconds: int) -> float:
    cmd = shlex.join([*prefix, "fio", "--name=cap", f"--filename={file}", "--size=32M", "--rw=randread",
                      "--bs=4k", "--direct=1", "--ioengine=libaio", "--iodepth=16", "--time_based",
                      f"--runtime={seconds}", "--output-format=json"])
    out = host.run(cmd, timeout=120).stdout
    return float(json.loads(out[out.index("{"):])["jobs"][0]["read"]["iops"])


def test_throttled_iops_cap_holds(host: ScriptedHost, build) -> None:
    m = build("thr", {"kind": "throttled", "read_iops": IOPS_CAP, "emulates": "cloud-block",
                      "base": {"kind": "ram-block", "size": "128M", "fstype": "ext4"}})
    st = ensure(host, m)
    assert st.throttle is not None and st.throttle["read_iops"] == IOPS_CAP
    cg = st.throttle["cgroup"]
    assert host.run(f"cat /sys/class/block/{st.disk}/dev").stdout.strip() == st.throttle["device"]
    file = f"{m.path}/fio.dat"
    free = _fio_iops(host, [], file, 1)  # also lays the file out
    capped = _fio_iops(host, launch_prefix(m, st), file, 2)
    print(f"\nfio 4k randread QD16 direct: unthrottled {free:.0f} IOPS, capped at {IOPS_CAP}: {capped:.0f} IOPS")
    assert abs(capped - IOPS_CAP) <= 0.25 * IOPS_CAP, capped
    assert free > 5 * IOPS_CAP, free
    # the reads were accounted to the medium's cgroup on its loop device
    serviced = host.run(f"cat {cg}/blkio.throttle.io_serviced" if st.throttle["version"] == 1
                        else f"cat {cg}/io.stat").stdout
    assert st.throttle["device"] in serviced
    # the prefix built from the recipe alone finds the same cgroup
    assert abs(_fio_iops(host, launch_prefix(m), file, 1) - IOPS_CAP) <= 0.25 * IOPS_CAP
    assert ensure(host, m).commands == ()
    teardown(host, m)
    assert not os.path.exists(cg) and _findmnt(m.path) is None


def test_dax_check_catches_a_silent_dax_never(host: ScriptedHost, build) -> None:
    m = build("dax", {"kind": "loop", "size": "1G", "mount_options": ["noatime", "dax"]})
    with pytest.raises(MediaError) as ei:
        ensure(host, m)
    assert "kernel mounted dax=never" in str(ei.value)
    fm = _findmnt(m.path)  # mount -o dax succeeded, so the exit code alone would have passed it
    assert fm and "dax=never" in fm["options"].split(",")


def test_pmem_fails_early_without_pmem(host: ScriptedHost, build) -> None:
    if host.run("ndctl list -RN", check=False).stdout.strip():
        pytest.skip("this host has PMEM regions")
    for raw in ({"kind": "pmem", "mode": "fsdax"}, {"kind": "pmem", "mode": "sector"},
                {"kind": "throttled", "read_iops": 100, "base": {"kind": "pmem", "mode": "fsdax"}}):
        m = build("pmem", raw)
        with pytest.raises(MediaError, match=r"^pmem: no PMEM namespace/region on host localhost: "):
            ensure(host, m)
        assert not os.path.exists(m.path)  # failed before doing anything
    assert not any("create-namespace" in c for c in host.commands)


def test_mdraid_fails_early_without_md(host: ScriptedHost, build) -> None:
    if os.path.exists("/proc/mdstat"):
        pytest.skip("this kernel has MD RAID")
    m = build("md", {"kind": "mdraid", "devices": ["/dev/nvme6n1", "/dev/nvme7n1"], "chunk": "256K"})
    with pytest.raises(MediaError, match=r"^mdraid: no MD RAID on host localhost: /proc/mdstat is missing"):
        ensure(host, m)
    assert not any("mdadm --create" in c for c in host.commands)
    assert not os.path.exists(media.md_device(m))
