"""dbmatrix.hosts.collect on this machine: real sysstat/procps collectors around a real disk and CPU load."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbmatrix.hosts import collect as c
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.parse.system_counters import counter_deltas

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(any(shutil.which(t) is None for t in c.COLLECTORS), reason="sysstat/procps not installed"),
]

WRITE_MIB = 128


# Data lines of each collector's raw output (kept with a run, not parsed by the package): mpstat's "all"
# rows, iostat's device rows, vmstat's timestamped rows, pidstat's process rows.
_SAMPLE = {
    "mpstat": re.compile(r"^\d\d:\d\d:\d\d\s+all\s"),
    "iostat": re.compile(r"^(?!Device\b|Linux\b)[A-Za-z][\w.:+-]*\s+\d"),
    "vmstat": re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s*$"),
    "pidstat": re.compile(r"^\d\d:\d\d:\d\d\s+\d+\s+\d+\s"),
}


def samples(name: str, text: str) -> list[str]:
    return [line for line in text.splitlines() if _SAMPLE[name].search(line)]


def _gone(pid: int, name: str) -> bool:
    """Not our collector any more: no such process, a zombie, or the pid now belongs to another program."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return comm != name or state in ("Z", "X")


@pytest.fixture
def workdir() -> Iterator[Path]:
    base = Path(os.environ.get("DBMATRIX_WORKDIR", tempfile.gettempdir()))
    base.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="collect-", dir=base))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def burner() -> Iterator[subprocess.Popen]:
    """A CPU-bound process of our own, the pid pidstat and the process counters watch."""
    proc = subprocess.Popen(["sha256sum", "/dev/zero"], stdout=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_collectors_around_direct_writes_and_cpu_load(workdir: Path, burner: subprocess.Popen):
    host = LocalHost()
    dev = c.block_device_for(host, str(workdir))
    if dev is None:
        pytest.skip(f"{workdir} has no block device behind it (tmpfs?)")
    before = c.snapshot_counters(host, burner.pid, [dev])
    t0 = time.monotonic()
    with c.CollectorSet(host, str(workdir / "raw"), interval_s=1, devices=[dev], pid=burner.pid) as cs:
        assert set(cs.pids) == set(c.COLLECTORS)
        time.sleep(0.3)
        subprocess.run(["dd", "if=/dev/zero", f"of={workdir / 'ddfile'}", "bs=1M", f"count={WRITE_MIB}",
                        "oflag=direct", "status=none"], check=True, timeout=120)
        time.sleep(max(0.0, 3.3 - (time.monotonic() - t0)))
    after = c.snapshot_counters(host, burner.pid, [dev])

    assert cs.errors == {}
    assert set(cs.texts) == set(c.COLLECTORS)
    for name, pid in cs.pids.items():
        assert _gone(pid, name), f"{name} (pid {pid}) still running after stop()"
        assert (workdir / "raw" / f"{name}.txt").read_text() == cs.texts[name]
    for name, text in cs.texts.items():
        assert len(samples(name, text)) >= 2, f"{name} printed too few samples:\n{text}"
    assert all(line.split()[0] == dev for line in samples("iostat", cs.texts["iostat"]))
    assert all(line.split()[2] == str(burner.pid) for line in samples("pidstat", cs.texts["pidstat"]))

    deltas = counter_deltas(before, after)
    written = WRITE_MIB * 1024 * 1024
    # diskstats is exact: at least the direct writes (plus metadata and anyone else's IO).
    assert deltas["dev_write_bytes"] >= written
    assert deltas["dev_write_ios"] >= written / (1024 * 1024)
    # The burner ran throughout: CPU time well above zero, none of it IO.
    assert deltas["window_s"] >= 3.0
    assert deltas["cpu_user_s"] + deltas["cpu_sys_s"] > 0.3
    assert deltas["proc_write_bytes"] == 0
    assert deltas["host_cpu_busy_s"] >= deltas["cpu_user_s"] + deltas["cpu_sys_s"] - 0.05


def test_stop_after_a_collector_died_does_not_raise(workdir: Path):
    host = LocalHost()
    cs = c.CollectorSet(host, str(workdir / "raw"), interval_s=1)
    try:
        cs.start()
        assert set(cs.pids) == {"mpstat", "vmstat"} and cs.errors == {}
        os.kill(cs.pids["vmstat"], signal.SIGKILL)
        time.sleep(1.3)
    finally:
        cs.stop()
    assert "exited before stop" in cs.errors["vmstat"]
    assert "mpstat" not in cs.errors
    assert len(samples("mpstat", cs.texts["mpstat"])) >= 1
    texts = dict(cs.texts)
    cs.stop()  # idempotent
    assert cs.texts == texts
    assert all(_gone(pid, name) for name, pid in cs.pids.items())


def _free_pid() -> int:
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    return pid


def test_collectors_that_cannot_start_are_reported(workdir: Path):
    host = LocalHost()
    with c.CollectorSet(host, "/proc/no/such/dir", interval_s=1) as cs:
        pass
    assert set(cs.errors) == {"mpstat", "vmstat"} and cs.pids == {}
    assert cs.texts == {"mpstat": "", "vmstat": ""}

    with c.CollectorSet(host, str(workdir / "raw"), interval_s=1, devices=["vda"], pid=_free_pid()) as cs:
        time.sleep(1.5)
    assert "pidstat" in cs.errors  # pidstat exits after one interval when the pid does not exist
    assert "mpstat" not in cs.errors
    stop_again = cs.stop()
    assert stop_again is None


def test_block_device_for_root_tmpfs_and_missing(workdir: Path):
    host = LocalHost()
    root_src = subprocess.run(["findmnt", "-no", "SOURCE", "-T", str(workdir)], capture_output=True, text=True,
                              check=True).stdout.strip()
    dev = c.block_device_for(host, str(workdir))
    if root_src.startswith("/dev/"):
        assert dev == os.path.basename(os.path.realpath(root_src.split("[")[0]))
        assert Path(f"/sys/class/block/{dev}").exists()
    if Path("/dev/shm").is_dir():
        assert c.block_device_for(host, "/dev/shm") is None
    assert c.block_device_for(host, "/proc/self") is None
    with pytest.raises(ValueError, match="does not exist"):
        c.block_device_for(host, str(workdir / "no" / "such"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for losetup/mount")
def test_block_device_for_a_partition(workdir: Path):
    host = LocalHost()
    img, mnt = workdir / "disk.img", workdir / "mnt"
    mnt.mkdir()
    loop = None
    mounted = False
    try:
        host.run(f"truncate -s 64M {img}")
        loop = host.run(f"losetup --find --show -P {img}").stdout.strip()
        host.run(f"parted -s {loop} mklabel gpt mkpart primary 1MiB 60%; udevadm settle 2>/dev/null; "
                 f"for i in 1 2 3 4 5 6 7 8 9 10; do [ -b {loop}p1 ] && break; sleep 0.1; done; "
                 f"mkfs.ext4 -q {loop}p1", timeout=60)
        host.run(f"mount {loop}p1 {shlex.quote(str(mnt))}")
        mounted = True
        assert c.block_device_for(host, str(mnt)) == f"{os.path.basename(loop)}p1"
    finally:
        if mounted:
            host.run(f"umount {shlex.quote(str(mnt))}", check=False)
        if loop:
            host.run(f"losetup -d {loop}", check=False)
