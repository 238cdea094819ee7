"""Followers limited in CPU (seed 002): the cpu_max calibration in a spec, and the cgroup commands that set,
read and join a follower's CPU limit (v2 cpu.max, v1 cpu.cfs_quota_us)."""

from __future__ import annotations

from typing import Any

import pytest

from dbmatrix.hosts import cpulimit
from dbmatrix.hosts.media.core import MediaError
from dbmatrix.run.calibration import calibration_cell
from dbmatrix.spec.experiment import SpecError, parse_experiment

V1_MOUNTS = """tmpfs /sys/fs/cgroup tmpfs rw 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
V2_MOUNTS = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n"


def galera(calibrate: dict[str, Any], **factors: Any) -> dict[str, Any]:
    return {"experiment": "g", "topology": {"kind": "galera", "nodes": 3, "calibrate": calibrate},
            "workload": {"name": "oltp_write_only", "tables": 2, "table_size": 100},
            "factors": {"slave_threads": [1, 16], **factors}, "repetitions": 1}


def test_layout_prefers_v2_with_cpu_else_the_v1_cpu_hierarchy() -> None:
    assert cpulimit.choose_cpu_layout(V1_MOUNTS, {"/sys/fs/cgroup/unified": ""}) == \
        cpulimit.CpuLayout(1, "/sys/fs/cgroup/cpu")
    assert cpulimit.choose_cpu_layout(V2_MOUNTS, {"/sys/fs/cgroup": "cpuset cpu io memory pids"}) == \
        cpulimit.CpuLayout(2, "/sys/fs/cgroup")
    with pytest.raises(MediaError, match="no cgroup cpu controller.*cgroup2 at /sys/fs/cgroup"):
        cpulimit.choose_cpu_layout(V2_MOUNTS, {"/sys/fs/cgroup": "memory pids"})


def test_commands_set_and_read_a_share_of_one_cpu() -> None:
    v2, v1 = cpulimit.CpuLayout(2, "/sys/fs/cgroup"), cpulimit.CpuLayout(1, "/sys/fs/cgroup/cpu")
    g2, g1 = v2.group(cpulimit.follower_group(2)), v1.group(cpulimit.follower_group(3))
    assert g2 == "/sys/fs/cgroup/dbmatrix/galera-node2-cpu" and g1 == "/sys/fs/cgroup/cpu/dbmatrix/galera-node3-cpu"
    assert cpulimit.limit_command(v2, g2, 25) == 'echo "25000 100000" > /sys/fs/cgroup/dbmatrix/galera-node2-cpu/cpu.max'
    assert cpulimit.limit_command(v2, g2, None).startswith('echo "max 100000"')
    assert cpulimit.limit_command(v1, g1, 150) == (f"echo 100000 > {g1}/cpu.cfs_period_us && "
                                                   f"echo 150000 > {g1}/cpu.cfs_quota_us")
    assert cpulimit.limit_command(v1, g1, None).endswith("echo -1 > " + g1 + "/cpu.cfs_quota_us")
    assert "+cpu" in cpulimit.ensure_command(v2, g2) and cpulimit.ensure_command(v1, g1) == f"mkdir -p {g1}"
    assert cpulimit.parse_limit(v2, "25000 100000\n") == 25 and cpulimit.parse_limit(v2, "max 100000") is None
    assert cpulimit.parse_limit(v1, "5000\n100000\n") == 5 and cpulimit.parse_limit(v1, "-1\n100000") is None
    assert cpulimit.quota_us(0 + 1) == 1000  # the kernel's 1 ms minimum
    with pytest.raises(MediaError, match="positive integer percentage"):
        cpulimit.quota_us(0)


def test_join_prefix_execs_the_server_inside_the_group() -> None:
    layout = cpulimit.CpuLayout(1, "/sys/fs/cgroup/cpu")
    argv = cpulimit.join_prefix(layout, "galera-node2-cpu")
    assert argv[:2] == ["sh", "-c"] and argv[3] == "dbmatrix-cpu"
    assert "echo $$ > /sys/fs/cgroup/cpu/dbmatrix/galera-node2-cpu/cgroup.procs" in argv[2]
    assert 'exec "$@"' in argv[2] and "exit 125" in argv[2]


def test_spec_cpu_max_calibration() -> None:
    exp = parse_experiment(galera({"limit": "cpu_max", "candidates": [50, 25, 10]}))
    cal = exp.topology.calibrate
    assert cal is not None and cal.cpu and cal.medium == "" and cal.candidates == (50, 25, 10)
    cell = calibration_cell(exp)
    assert (cell.slave_threads, cell.follower_medium) == (1, "same")  # a CPU limit needs no throttled medium
    assert exp.to_dict()["topology"]["calibrate"]["limit"] == "cpu_max"


@pytest.mark.parametrize(("calibrate", "message"), [
    ({"limit": "cpu_max", "medium": "slow", "candidates": [50]}, r"calibrate.medium: not used with limit cpu_max"),
    ({"limit": "cpu_max", "candidates": [10000]}, r"10000 is not a CPU limit; .* from 1 to 6400"),
    ({"limit": "cpu_max", "candidates": [10, 50]}, r"must be distinct and in decreasing order"),
    ({"limit": "cpu", "candidates": [10]}, r"limit: unknown 'cpu'; allowed: .*write_bps, cpu_max"),
    ({"limit": "write_iops", "candidates": [10]}, r"calibrate.medium: required"),
])
def test_spec_refuses_bad_cpu_calibrations(calibrate: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_experiment(galera(calibrate))


def test_cpu_stat_says_how_often_the_limit_held_a_follower_back() -> None:
    v1 = "nr_periods 498\nnr_throttled 245\nthrottled_time 12631871553\nnr_bursts 0\nburst_time 0\n"
    v2 = "usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 10\nnr_throttled 4\nthrottled_usec 2500\n"
    assert cpulimit.parse_stat(v1) == {"nr_periods": 498, "nr_throttled": 245, "throttled_usec": 12631871}
    assert cpulimit.parse_stat(v2) == {"nr_periods": 10, "nr_throttled": 4, "throttled_usec": 2500}
    d = cpulimit.stat_delta({"nr_periods": 100, "nr_throttled": 10, "throttled_usec": 1_000_000},
                            cpulimit.parse_stat(v1))
    assert d == {"nr_periods": 398, "nr_throttled": 235, "throttled_usec": 11631871, "throttled_pct": 59.05,
                 "throttled_s": 11.632}
    assert cpulimit.stat_delta({}, {})["throttled_pct"] is None


def test_the_paper_says_the_followers_were_limited_in_cpu() -> None:
    import pandas as pd

    from dbmatrix.publish.replication import _prose, calibration_macros

    cal = pd.DataFrame([{"campaign": 1, "medium": None, "limit_kind": "cpu_max", "limit": 25, "status": "ok",
                         "fc_paused_pct": 31.0, "tps": 400.0, "target_pct": 30.0, "window_s": 10, "chosen": True,
                         "reached": True}])
    m = calibration_macros(cal)
    assert m["replCalLimit"] == "CPU (\\% of one CPU)" and m["replCalChosen"] == "25"
    text = _prose(m)["replFollowersText"]
    assert "its own cgroup" in text and "blkio" not in text and "medium" not in text
    assert "through a CPU limit the seed did not have" in _prose(m)["replBottleneckText"]
