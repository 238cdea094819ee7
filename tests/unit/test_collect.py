"""dbmatrix.hosts.collect (collector and counter commands, block device of a path) and dbmatrix.parse.system_counters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbmatrix.hosts import collect as c
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.parse import system_counters as sc

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "collect"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


# --------------------------------------------------------------------------- commands

def test_collector_commands_exact():
    env = "env LC_ALL=C S_TIME_FORMAT=ISO TZ=UTC"
    assert c.collector_commands(1, ["vda"], 123) == {
        "mpstat": f"{env} mpstat -P ALL 1",
        "iostat": f"{env} iostat -d -x -y -t -k vda 1",
        "vmstat": f"{env} vmstat -n -t -w -y 1",
        "pidstat": f"{env} pidstat -h -u -d -r -p 123 1",
    }


def test_collector_commands_skip_iostat_without_device_and_pidstat_without_pid():
    cmds = c.collector_commands(5, [], None)
    assert list(cmds) == ["mpstat", "vmstat"]
    assert cmds["mpstat"].endswith("mpstat -P ALL 5")


def test_collector_commands_several_devices_in_order_without_duplicates():
    cmds = c.collector_commands(2, ("vda", "loop3p1", "dm-0", "vda"), 7)
    assert list(cmds) == list(c.COLLECTORS)
    assert cmds["iostat"].endswith("iostat -d -x -y -t -k vda loop3p1 dm-0 2")


@pytest.mark.parametrize("interval", [0, -1, 1.5, True, "1", None])
def test_collector_commands_reject_interval(interval):
    with pytest.raises(ValueError, match="interval_s"):
        c.collector_commands(interval, ["vda"], None)


@pytest.mark.parametrize("devices", ["vda", ["/dev/vda"], ["a b"], ["vda;rm"], [1], None])
def test_collector_commands_reject_devices(devices):
    with pytest.raises(ValueError, match="devices"):
        c.collector_commands(1, devices, None)


@pytest.mark.parametrize("pid", [0, -5, True, "12", 1.0])
def test_collector_commands_reject_pid(pid):
    with pytest.raises(ValueError, match="pid"):
        c.collector_commands(1, [], pid)


def test_collector_set_validates_arguments_early():
    from dbmatrix.hosts.remote import LocalHost

    with pytest.raises(ValueError, match="remote_dir"):
        c.CollectorSet(LocalHost(), "relative/dir")
    with pytest.raises(ValueError, match="devices"):
        c.CollectorSet(LocalHost(), "/tmp/x", devices="vda")


# --------------------------------------------------------------------------- counters

def counters(name: str, pid: int | None = 15347, devices=("vda",)) -> dict:
    return sc.parse_counters(fixture(f"counters_{name}.txt"), pid, list(devices))


def test_counters_command_shape():
    cmd = c.counters_command(42, ["vda", "loop3"])
    for part in ("/proc/uptime", "getconf CLK_TCK", "'^cpu ' /proc/stat", "/proc/42/stat", "/proc/42/io",
                 "/proc/diskstats", "vda loop3"):
        assert part in cmd
    assert "/proc/None" not in c.counters_command(None, [])
    with pytest.raises(ValueError, match="devices"):
        c.counters_command(1, ["../x"])
    with pytest.raises(ValueError, match="pid"):
        c.counters_command(0, [])


def test_parse_counters_fixture():
    snap = counters("before")
    assert snap["uptime_s"] == pytest.approx(3169.185)
    assert snap["clk_tck"] == 100
    assert snap["cpu_ticks"]["user"] == 116105 and snap["cpu_ticks"]["iowait"] == 29061
    assert snap["proc"] == {"utime": 0, "stime": 0, "starttime": 316866, "rchar": 6976, "wchar": 0,
                            "syscr": 10, "syscw": 0, "read_bytes": 0, "write_bytes": 0}
    assert snap["disks"]["vda"]["write_sectors"] == 324629600
    assert json.loads(json.dumps(snap)) == snap


def test_counter_deltas_of_a_64_mib_direct_write():
    d = sc.counter_deltas(counters("before"), counters("after"))
    assert tuple(d) == sc.DELTA_KEYS
    assert d["proc_write_bytes"] == 64 * 1024 * 1024
    assert d["proc_read_bytes"] == 0
    assert d["dev_write_bytes"] == (324760680 - 324629600) * 512  # 64 MiB + 4 KiB of ext4 journal
    assert d["dev_write_ios"] == 65 and d["dev_read_ios"] == 1 and d["dev_io_ms"] == 40
    assert d["window_s"] == 1.22
    assert d["cpu_user_s"] == 0.0 and d["cpu_sys_s"] == 0.01
    assert d["host_cpu_busy_s"] == pytest.approx((76 + 9 + 1) / 100)
    assert d["host_cpu_iowait_s"] == pytest.approx(0.04)


def test_counter_deltas_process_vanished():
    d = sc.counter_deltas(counters("before"), counters("vanished"))
    assert counters("vanished")["proc"] is None
    assert d["cpu_user_s"] is d["cpu_sys_s"] is d["proc_read_bytes"] is d["proc_write_bytes"] is None
    assert d["dev_write_bytes"] is not None and d["window_s"] is not None


def test_counter_deltas_pid_reused_is_not_a_delta():
    before, after = counters("before"), counters("after")
    after["proc"]["starttime"] += 1
    assert sc.counter_deltas(before, after)["cpu_user_s"] is None


def test_counter_deltas_without_pid_or_devices():
    d = sc.counter_deltas(counters("before", None, ()), counters("after", None, ()))
    assert all(d[k] is None for k in ("cpu_user_s", "cpu_sys_s", "proc_read_bytes", "proc_write_bytes",
                                      "dev_read_ios", "dev_write_ios", "dev_read_bytes", "dev_write_bytes",
                                      "dev_io_ms"))
    assert d["host_cpu_busy_s"] is not None


def test_counter_deltas_missing_device_or_reset_counter():
    before, after = counters("before"), counters("after")
    gone = dict(after, disks={})
    assert sc.counter_deltas(before, gone)["dev_write_bytes"] is None
    assert counters("before", devices=("vda", "nvme9n1"))["disks"].keys() == {"vda"}
    assert sc.counter_deltas(counters("before", devices=("vda", "nvme9n1")),
                            counters("after", devices=("vda", "nvme9n1")))["dev_write_bytes"] is None
    reset = json.loads(json.dumps(after))
    reset["disks"]["vda"]["writes"] = 0
    assert sc.counter_deltas(before, reset)["dev_write_ios"] is None


def test_garbage_counters_give_none():
    snap = sc.parse_counters("not the expected output\n", 1, ["vda"])
    assert snap["uptime_s"] is None and snap["cpu_ticks"] is None and snap["proc"] is None
    assert all(v is None for v in sc.counter_deltas(snap, snap).values())


# --------------------------------------------------------------------------- findmnt

# `findmnt -J -o SOURCE,FSTYPE,TARGET -T /dev/shm` on this machine (util-linux 2.38.1): two stacked mounts.
SHM_JSON = """{
   "filesystems": [
      {
         "source": "tmpfs",
         "fstype": "tmpfs",
         "target": "/dev/shm"
      },{
         "source": "tmpfs",
         "fstype": "tmpfs",
         "target": "/dev/shm"
      }
   ]
}
"""


def findmnt_json(*mounts: tuple[str, str]) -> str:
    return json.dumps({"filesystems": [{"source": s, "fstype": f, "target": "/x"} for s, f in mounts]})


@pytest.mark.parametrize(("text", "source"), [
    (findmnt_json(("/dev/vda", "ext4")), "/dev/vda"),  # this machine's root
    (findmnt_json(("/dev/loop0p1", "ext4")), "/dev/loop0p1"),  # a partition of a loop device
    (findmnt_json(("/dev/vda2[/@home]", "btrfs")), "/dev/vda2"),
    (findmnt_json(("/dev/mapper/vg-data", "xfs")), "/dev/mapper/vg-data"),
    (SHM_JSON, None),  # /dev/shm here
    (findmnt_json(("overlay", "overlay")), None),
    (findmnt_json(("proc", "proc")), None),
    (findmnt_json(("server:/export", "nfs4")), None),
    (findmnt_json(("/dev/fuse", "fuse.sshfs")), None),
    (findmnt_json(("/dev/vdb", "ext4"), ("/dev/vdc", "xfs")), "/dev/vdb"),  # the first listed, as before
    ("", None),
])
def test_block_source_of(text, source):
    assert c.block_source_of(text) == source


def test_block_device_for_asks_findmnt_json_then_resolves_the_kernel_name():
    host = ScriptedHost("h", is_local=False)
    host.on(r"^findmnt -J -o SOURCE,FSTYPE,TARGET -T /data$", stdout=findmnt_json(("/dev/mapper/vg-data", "xfs")))
    host.on(r"readlink -f /dev/mapper/vg-data", stdout="dm-0\n")
    assert c.block_device_for(host, "/data") == "dm-0"
    host.on(r"^findmnt -J", stdout=SHM_JSON)
    assert c.block_device_for(host, "/dev/shm") is None
    host.on(r"^findmnt -J", exit_code=1)
    with pytest.raises(ValueError, match="does not exist on h"):
        c.block_device_for(host, "/no/such")
