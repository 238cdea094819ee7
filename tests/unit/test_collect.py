"""dbmatrix.hosts.collect, pure parts: commands, parsers on real captured outputs, counters and deltas."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from dbmatrix.hosts import collect as c
from dbmatrix.hosts.scripted import ScriptedHost

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


@pytest.mark.parametrize(("raw", "tool", "name"), [
    ("%usr", "mpstat", "usr"), ("CPU", "mpstat", "cpu"), ("rkB/s", "iostat", "rkB_s"),
    ("rareq-sz", "iostat", "rareq_sz"), ("%util", "iostat", "util"), ("aqu-sz", "iostat", "aqu_sz"),
    ("%CPU", "pidstat", "cpu"), ("CPU", "pidstat", "cpu_num"), ("kB_ccwr/s", "pidstat", "kB_ccwr_s"),
    ("VSZ", "pidstat", "vsz"), ("minflt/s", "pidstat", "minflt_s"), ("Device", "iostat", "device"),
])
def test_column_name(raw, tool, name):
    assert c.column_name(raw, tool) == name


# --------------------------------------------------------------------------- mpstat

MPSTAT_COLUMNS = ["time", "t_s", "cpu", "usr", "nice", "sys", "iowait", "irq", "soft", "steal", "guest",
                  "gnice", "idle"]


def test_parse_mpstat_fixture():
    df = c.parse_mpstat(fixture("mpstat.txt"))
    assert list(df.columns) == MPSTAT_COLUMNS
    assert len(df) == 12  # 4 intervals x (all, 0, 1); the Average block is not a sample
    assert df["cpu"].tolist()[:3] == ["all", "0", "1"]
    assert df["t_s"].unique().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert df["time"].iloc[0] == pd.Timestamp("2026-11-22 03:08:25")
    first = df.iloc[0]
    assert (first["usr"], first["sys"], first["iowait"], first["soft"]) == (78.82, 14.29, 4.43, 2.46)
    shares = df[MPSTAT_COLUMNS[3:]].sum(axis=1)
    assert ((shares - 100).abs() < 0.1).all()


def test_parse_mpstat_intervals_agree_with_sysstat_average():
    df = c.parse_mpstat(fixture("mpstat.txt"))
    avg_line = next(ln for ln in fixture("mpstat.txt").splitlines() if ln.startswith("Average:") and " all " in ln)
    avg_usr = float(avg_line.split()[2])
    assert df[df["cpu"] == "all"]["usr"].mean() == pytest.approx(avg_usr, abs=0.01)


def test_parse_mpstat_c_locale_dates():
    df = c.parse_mpstat(fixture("mpstat_c_locale.txt"))
    assert len(df) == 6
    assert df["time"].iloc[-1] == pd.Timestamp("2026-11-22 03:08:26")


def test_parse_mpstat_truncated_last_line_is_dropped():
    lines = fixture("mpstat.txt").splitlines(keepends=True)
    upto = lines.index(next(ln for ln in lines if ln.startswith("03:08:26       1")))
    text = "".join(lines[:upto + 1]) + "\n03:08:26     CPU    %usr\n03:08:27     all   80.5"
    df = c.parse_mpstat(text)
    assert len(df) == 6
    assert df["t_s"].max() == 1.0


def test_parse_mpstat_skips_rows_with_missing_fields():
    lines = [ln.rsplit(None, 2)[0] if ln.startswith("03:08:27       0") else ln
             for ln in fixture("mpstat.txt").splitlines()]
    df = c.parse_mpstat("\n".join(lines) + "\n")
    assert len(df) == 11


def test_parse_mpstat_wraps_past_midnight():
    text = fixture("mpstat_c_locale.txt").replace("03:08:24", "23:59:58").replace("03:08:25", "23:59:59")
    text = text.replace("03:08:26", "00:00:00")
    df = c.parse_mpstat(text)
    assert df["time"].iloc[0] == pd.Timestamp("2026-11-22 23:59:59")
    assert df["time"].iloc[-1] == pd.Timestamp("2026-11-23 00:00:00")
    assert df["t_s"].unique().tolist() == [0.0, 1.0]


def test_parse_mpstat_first_sample_after_midnight_is_on_the_next_day():
    text = fixture("mpstat_c_locale.txt").replace("03:08:24", "23:59:59").replace("03:08:25", "00:00:00")
    df = c.parse_mpstat(text.replace("03:08:26", "00:00:01"))
    assert df["time"].iloc[0] == pd.Timestamp("2026-11-23 00:00:00")


def test_parse_mpstat_12_hour_clock():
    text = fixture("mpstat_c_locale.txt").replace("03:08:24 ", "12:08:24 PM ")
    text = text.replace("03:08:25 ", "12:08:25 PM ").replace("03:08:26 ", "12:08:26 PM ")
    df = c.parse_mpstat(text)
    assert len(df) == 6
    assert df["time"].iloc[0] == pd.Timestamp("2026-11-22 12:08:25")
    midnight = c.parse_mpstat(text.replace(" PM ", " AM "))
    assert midnight["time"].iloc[0] == pd.Timestamp("2026-11-22 00:08:25")


# --------------------------------------------------------------------------- iostat

IOSTAT_COLUMNS = ["time", "t_s", "device", "r_s", "rkB_s", "rrqm_s", "rrqm", "r_await", "rareq_sz", "w_s",
                  "wkB_s", "wrqm_s", "wrqm", "w_await", "wareq_sz", "d_s", "dkB_s", "drqm_s", "drqm",
                  "d_await", "dareq_sz", "f_s", "f_await", "aqu_sz", "util"]


def test_parse_iostat_fixture():
    df = c.parse_iostat(fixture("iostat.txt"))
    assert list(df.columns) == IOSTAT_COLUMNS
    assert df["device"].tolist() == ["vda"] * 4
    assert df["t_s"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert df["time"].iloc[0] == pd.Timestamp("2026-11-22 03:08:25")
    assert df["wkB_s"].iloc[0] == 1187840.0 and df["w_s"].iloc[0] == 2320.0
    assert df["util"].tolist() == [62.0, 69.2, 68.4, 71.2]
    # The writer used 1 MiB direct writes: ~512 KiB per request after the block layer split them.
    assert (df["wareq_sz"] > 400).all()


def test_parse_iostat_two_devices():
    df = c.parse_iostat(fixture("iostat_two_devices.txt"))
    assert df["device"].tolist() == ["vda", "zram0", "vda", "zram0"]
    assert df["t_s"].tolist() == [0.0, 0.0, 1.0, 1.0]


def test_parse_iostat_c_locale_timestamps():
    df = c.parse_iostat(fixture("iostat_c_locale.txt"))
    assert len(df) == 2
    assert df["time"].tolist() == [pd.Timestamp("2026-11-22 03:08:25"), pd.Timestamp("2026-11-22 03:08:26")]


def test_parse_iostat_truncated_last_line_is_dropped():
    text = fixture("iostat.txt").rstrip("\n")
    df = c.parse_iostat(text[:-20])
    assert len(df) == 3


def test_parse_iostat_without_timestamps_has_no_rows():
    text = "\n".join(ln for ln in fixture("iostat.txt").splitlines() if not ln.startswith("2026-")) + "\n"
    assert c.parse_iostat(text).empty


# --------------------------------------------------------------------------- vmstat

VMSTAT_COLUMNS = ["time", "t_s", "r", "b", "swpd", "free", "buff", "cache", "si", "so", "bi", "bo", "in", "cs",
                  "us", "sy", "id", "wa", "st", "gu"]


def test_parse_vmstat_fixture():
    df = c.parse_vmstat(fixture("vmstat.txt"))
    assert list(df.columns) == VMSTAT_COLUMNS
    assert df["t_s"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert df["cs"].tolist() == [5549.0, 6127.0, 6431.0, 5341.0]
    assert df["bo"].iloc[0] == 1188864.0 and df["free"].iloc[0] == 24204840.0
    assert df["time"].iloc[-1] == pd.Timestamp("2026-11-22 03:08:28")


def test_parse_vmstat_repeated_headers_and_blank_lines():
    lines = fixture("vmstat.txt").splitlines()
    text = "\n".join(lines[:3] + ["", *lines[:2]] + lines[3:] + [""])
    assert len(c.parse_vmstat(text)) == 4


def test_parse_vmstat_truncated_last_line_is_dropped():
    assert len(c.parse_vmstat(fixture("vmstat.txt").rstrip("\n")[:-3])) == 3


# --------------------------------------------------------------------------- pidstat

PIDSTAT_COLUMNS = ["time", "t_s", "uid", "pid", "usr", "system", "guest", "wait", "cpu", "cpu_num", "minflt_s",
                   "majflt_s", "vsz", "rss", "mem", "kB_rd_s", "kB_wr_s", "kB_ccwr_s", "iodelay", "command"]


def test_parse_pidstat_fixture():
    df = c.parse_pidstat(fixture("pidstat.txt"))
    assert list(df.columns) == PIDSTAT_COLUMNS
    assert df["pid"].tolist() == [15306] * 4 and df["pid"].dtype == "int64"
    assert df["command"].tolist() == ["sha256sum"] * 4
    assert df["cpu"].tolist() == [93.0, 97.0, 97.0, 98.0]
    assert df["t_s"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_parse_pidstat_process_exited():
    df = c.parse_pidstat(fixture("pidstat_exited.txt"))
    assert len(df) == 1 and df["command"].iloc[0] == "sleep"


def test_parse_pidstat_command_with_spaces():
    df = c.parse_pidstat(fixture("pidstat.txt").replace("sha256sum", "tmux: server"))
    assert df["command"].tolist() == ["tmux: server"] * 4


def test_parse_pidstat_truncated_last_line_is_dropped():
    assert len(c.parse_pidstat(fixture("pidstat.txt").rstrip("\n")[:-25])) == 3


# --------------------------------------------------------------------------- all parsers

@pytest.mark.parametrize("tool", c.COLLECTORS)
@pytest.mark.parametrize("text", ["", "\n\n", "Linux 6.18.44-fc-v669 (vm) \t2026-11-22 \t_x86_64_\t(2 CPU)\n"])
def test_empty_input_gives_empty_frame_with_columns(tool, text):
    df = c.parse_collector(tool, text)
    assert df.empty
    assert list(df.columns) == list(c.empty_frame(tool).columns)
    assert df["time"].dtype == "datetime64[ns]" and df["t_s"].dtype == "float64"


def test_empty_frame_columns():
    assert list(c.empty_frame("mpstat").columns) == MPSTAT_COLUMNS
    assert list(c.empty_frame("iostat").columns) == IOSTAT_COLUMNS
    assert list(c.empty_frame("vmstat").columns) == VMSTAT_COLUMNS
    assert list(c.empty_frame("pidstat").columns) == PIDSTAT_COLUMNS


def test_parse_collector_dispatch_and_unknown_name():
    assert len(c.parse_collector("vmstat", fixture("vmstat.txt"))) == 4
    with pytest.raises(ValueError, match="mpstat, iostat, vmstat, pidstat"):
        c.parse_collector("sar", "")


def test_parsers_are_deterministic():
    a = c.parse_mpstat(fixture("mpstat.txt"))
    b = c.parse_mpstat(fixture("mpstat.txt"))
    pd.testing.assert_frame_equal(a, b)


# --------------------------------------------------------------------------- counters

def counters(name: str, pid: int | None = 15347, devices=("vda",)) -> dict:
    return c.parse_counters(fixture(f"counters_{name}.txt"), pid, list(devices))


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
    d = c.counter_deltas(counters("before"), counters("after"))
    assert tuple(d) == c.DELTA_KEYS
    assert d["proc_write_bytes"] == 64 * 1024 * 1024
    assert d["proc_read_bytes"] == 0
    assert d["dev_write_bytes"] == (324760680 - 324629600) * 512  # 64 MiB + 4 KiB of ext4 journal
    assert d["dev_write_ios"] == 65 and d["dev_read_ios"] == 1 and d["dev_io_ms"] == 40
    assert d["window_s"] == 1.22
    assert d["cpu_user_s"] == 0.0 and d["cpu_sys_s"] == 0.01
    assert d["host_cpu_busy_s"] == pytest.approx((76 + 9 + 1) / 100)
    assert d["host_cpu_iowait_s"] == pytest.approx(0.04)


def test_counter_deltas_process_vanished():
    d = c.counter_deltas(counters("before"), counters("vanished"))
    assert counters("vanished")["proc"] is None
    assert d["cpu_user_s"] is d["cpu_sys_s"] is d["proc_read_bytes"] is d["proc_write_bytes"] is None
    assert d["dev_write_bytes"] is not None and d["window_s"] is not None


def test_counter_deltas_pid_reused_is_not_a_delta():
    before, after = counters("before"), counters("after")
    after["proc"]["starttime"] += 1
    assert c.counter_deltas(before, after)["cpu_user_s"] is None


def test_counter_deltas_without_pid_or_devices():
    d = c.counter_deltas(counters("before", None, ()), counters("after", None, ()))
    assert all(d[k] is None for k in ("cpu_user_s", "cpu_sys_s", "proc_read_bytes", "proc_write_bytes",
                                      "dev_read_ios", "dev_write_ios", "dev_read_bytes", "dev_write_bytes",
                                      "dev_io_ms"))
    assert d["host_cpu_busy_s"] is not None


def test_counter_deltas_missing_device_or_reset_counter():
    before, after = counters("before"), counters("after")
    gone = dict(after, disks={})
    assert c.counter_deltas(before, gone)["dev_write_bytes"] is None
    assert counters("before", devices=("vda", "nvme9n1"))["disks"].keys() == {"vda"}
    assert c.counter_deltas(counters("before", devices=("vda", "nvme9n1")),
                            counters("after", devices=("vda", "nvme9n1")))["dev_write_bytes"] is None
    reset = json.loads(json.dumps(after))
    reset["disks"]["vda"]["writes"] = 0
    assert c.counter_deltas(before, reset)["dev_write_ios"] is None


def test_garbage_counters_give_none():
    snap = c.parse_counters("not the expected output\n", 1, ["vda"])
    assert snap["uptime_s"] is None and snap["cpu_ticks"] is None and snap["proc"] is None
    assert all(v is None for v in c.counter_deltas(snap, snap).values())


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


# --------------------------------------------------------------------------- summaries

def parsed_fixtures(**names: str) -> dict[str, pd.DataFrame]:
    return {tool: c.parse_collector(tool, fixture(f)) for tool, f in names.items()}


def test_summarize_collectors_fixture():
    s = c.summarize_collectors(parsed_fixtures(mpstat="mpstat.txt", iostat="iostat.txt", vmstat="vmstat.txt",
                                               pidstat="pidstat.txt"))
    iowait = (4.43 + 0.50 + 3.50 + 9.14) / 4
    assert s["host_iowait_pct"] == pytest.approx(iowait)
    assert s["host_cpu_busy_pct"] == pytest.approx(100 - iowait)  # idle and steal were 0
    assert s["dev_util_pct"] == pytest.approx((62.0 + 69.2 + 68.4 + 71.2) / 4)
    assert s["dev_w_s"] == pytest.approx((2320 + 2566 + 2797 + 2542) / 4)
    assert s["cs_s"] == pytest.approx((5549 + 6127 + 6431 + 5341) / 4)
    assert s["proc_cpu_pct"] == pytest.approx((93 + 97 + 97 + 98) / 4)
    assert all(isinstance(v, float) for v in s.values())


def test_summarize_collectors_sums_devices_and_takes_busiest_util():
    s = c.summarize_collectors(parsed_fixtures(iostat="iostat_two_devices.txt"))
    assert s["dev_w_s"] == pytest.approx((2320 + 2562) / 2)
    assert s["dev_util_pct"] == pytest.approx((62.0 + 69.2) / 2)
    assert "host_cpu_busy_pct" not in s


def test_summarize_collectors_missing_or_empty():
    assert c.summarize_collectors({}) == {}
    assert c.summarize_collectors({t: c.empty_frame(t) for t in c.COLLECTORS}) == {}


def test_time_column_is_wall_clock():
    df = c.parse_vmstat(fixture("vmstat.txt"))
    assert df["time"].iloc[0].to_pydatetime() == datetime(2026, 11, 22, 3, 8, 25)
