"""Tests of the host's per-second samples (dbmatrix.parse.vmstat: vmstat -n -t -w -y 1 output, placed in the
run's window) and of what changed between the halves of a run's window (dbmatrix.analyse.window_halves)."""

from __future__ import annotations

import calendar
import math

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.window_halves import COLUMNS, window_halves
from dbmatrix.parse.vmstat import COLUMNS as COLUMNS_VMSTAT
from dbmatrix.parse.vmstat import parse_vmstat, window_seconds

# procps-ng 4.0.2 (Debian 12), as a run's vmstat.txt has it: the collector sets TZ=UTC
VMSTAT = """\
--procs-- -----------------------memory---------------------- ---swap-- -----io---- -system-- ----------cpu---------- -----timestamp-----
   r    b         swpd         free         buff        cache   si   so    bi    bo   in   cs  us  sy  id  wa  st  gu                 UTC
   4    0            0     22769988         5420      1572020    0    0 457500  1052 8112 18631  28  13  27  32   0   0 2026-11-27 10:07:24
   4    1            0     22769988         5420      1572020    0    0 521949  1144 8321 20261  32  12  13  42   0   0 2026-11-27 10:07:25
   5    0            0     22769988         5420      1572020    0    0 578915  1344 8564 21701  27  17  13  42   1   0 2026-11-27 10:07:26
   3    0            0     22769988         5420
"""
T0 = calendar.timegm((2026, 11, 27, 10, 7, 24, 0, 0, 0))


def test_samples_are_read_by_the_headers_names_in_utc() -> None:
    s = parse_vmstat(VMSTAT)
    assert list(s["epoch"]) == [T0, T0 + 1, T0 + 2]  # the cut-off last line is not a sample
    first = s.iloc[0]
    assert first["busy_pct"] == 100 - 27 - 32 and first["iowait_pct"] == 32 and first["runnable"] == 4
    assert first["read_kib_s"] == 457500 and first["write_kib_s"] == 1052
    assert s.iloc[1]["blocked"] == 1 and s.iloc[2]["busy_pct"] == 100 - 13 - 42  # steal counts as busy
    # an older procps without the guest column reads the same
    old = "\n".join(" ".join(line.split()[:17] + line.split()[18:]) for line in VMSTAT.splitlines()[1:5])
    assert parse_vmstat(old)[["epoch", "busy_pct", "read_kib_s"]].equals(s[["epoch", "busy_pct", "read_kib_s"]])


def test_a_header_in_another_zone_or_without_a_needed_column_gives_no_samples() -> None:
    assert parse_vmstat(VMSTAT.replace("   UTC", "  CET")).empty
    assert parse_vmstat(VMSTAT.replace("  wa  ", "  xx  ")).empty
    assert parse_vmstat("").empty and tuple(parse_vmstat("").columns) == COLUMNS_VMSTAT


def test_each_sample_is_placed_in_the_window_second_its_stamp_falls_in() -> None:
    s = parse_vmstat(VMSTAT)
    # the window opened 21 ms after 10:07:24: that sample is the warm-up's (0), the next ones seconds 1 and 2
    assert list(window_seconds(s, T0 + 0.021)) == [0, 1, 2]
    assert list(window_seconds(s, T0 - 1.5)) == [2, 3, 4]


def _intervals(run: str, tps: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"run_id": run, "cell_id": "c", "t_s": np.arange(1, len(tps) + 1), "tps": tps})


def _host(run: str, seconds: range, read: float | list[float], busy: float = 50.0) -> pd.DataFrame:
    n = len(seconds)
    reads = read if isinstance(read, list) else [read] * n
    return pd.DataFrame({"run_id": run, "cell_id": "c", "t_s": list(seconds), "epoch": 0, "busy_pct": busy,
                         "iowait_pct": 5.0, "runnable": 2.0, "blocked": 0.0, "read_kib_s": reads,
                         "write_kib_s": 10.0})


def test_the_halves_of_the_kept_window_with_the_hosts_figures_per_transaction() -> None:
    # 3 s of warm-up trimmed, then 21 s: 10 at 100 tps, the middle second in neither half, 10 at 80 tps;
    # the devices read 1,000 KiB/s in the first half and 1,600 in the second
    tps = [10.0, 20.0, 30.0] + [100.0] * 10 + [90.0] + [80.0] * 10
    reads = [0.0] * 3 + [1000.0] * 10 + [5000.0] + [1600.0] * 10
    h = window_halves(_intervals("r", tps), _host("r", range(1, 25), reads),
                      pd.DataFrame({"run_id": ["r"], "trim_s": [3]})).set_index("run_id")
    assert list(h.columns) == list(COLUMNS)
    r = h.loc["r"]
    assert r["first_half_tps"] == 100 and r["second_half_tps"] == 80
    assert r["first_half_read_kb_per_txn"] == pytest.approx(10.0)
    assert r["second_half_read_kb_per_txn"] == pytest.approx(20.0)
    assert r["first_half_write_kb_per_txn"] == pytest.approx(0.1)
    assert r["first_half_busy_pct"] == 50 and r["second_half_iowait_pct"] == 5


def test_a_half_without_enough_samples_has_throughput_only() -> None:
    tps = [100.0] * 10 + [80.0] * 10
    steady = pd.DataFrame({"run_id": ["r", "bare"], "trim_s": [0, 0]})
    host = _host("r", range(1, 15), 1000.0)  # seconds 11-14 only in the second half: 4 of 10
    iv = pd.concat([_intervals("r", tps), _intervals("bare", tps)], ignore_index=True)
    h = window_halves(iv, host, steady).set_index("run_id")
    assert h.loc["r", "first_half_read_kb_per_txn"] == pytest.approx(10.0)
    assert math.isnan(h.loc["r", "second_half_read_kb_per_txn"]) and h.loc["r", "second_half_tps"] == 80
    assert h.loc["bare", "first_half_tps"] == 100 and math.isnan(h.loc["bare", "first_half_busy_pct"])
    # too short a kept window: no row; nothing to split: an empty table with the columns
    short = window_halves(_intervals("s", [1.0, 2.0, 3.0]), host, pd.DataFrame({"run_id": ["s"], "trim_s": [0]}))
    assert short.empty and list(short.columns) == ["run_id", *COLUMNS]


def test_a_reporter_the_host_delayed_labels_two_lines_with_one_second_and_every_line_counts() -> None:
    # scalegrid campaign 5 (boot 776df624): sysbench printed "[ 50s ]" twice and no 49 or 51 after a stall
    tps = [100.0] * 10 + [80.0] * 10
    iv = _intervals("r", tps)
    iv.loc[iv["t_s"] == 17, "t_s"] = 16  # the second half's lines labelled ..., 16, 16, 18, ...
    h = window_halves(iv, _host("r", range(1, 21), 1000.0),
                      pd.DataFrame({"run_id": ["r"], "trim_s": [0]})).set_index("run_id")
    assert h.loc["r", "first_half_tps"] == 100 and h.loc["r", "second_half_tps"] == 80
    # second 16 carries both lines' transactions (160), second 17 has a sample and no line: left out
    assert h.loc["r", "second_half_read_kb_per_txn"] == pytest.approx(9 * 1000.0 / (10 * 80.0))
