"""Where a sentinel's drift came from: the platform probe's command and parsing, and the reading of the
sentinel pair's counters (the exact factoring of throughput into CPU use and CPU per transaction)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dbmatrix.analyse.sentinel_mechanism import RATIOS, drift_ratios, drift_reading, pooled_ratios
from dbmatrix.run.platform_probe import parse_probe, probe_command, probe_line, probe_record

# what probe_command printed on this VM (sysbench 1.0.20, GNU dd), cut to the lines around the figures
SYSBENCH_CPU = """sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: {n}
Initializing random number generator from current time


Prime numbers limit: 10000

Initializing worker threads...

Threads started!

CPU speed:
    events per second:  {eps}

General statistics:
    total time:                          2.0002s
    total number of events:              6541
"""
DD = """2048+0 records in
2048+0 records out
8388608 bytes (8.4 MB, 8.0 MiB) copied, 0.265283 s, 31.6 MB/s
"""
OUTPUT = ("dbmatrix-probe:cpu1\n" + SYSBENCH_CPU.format(n=1, eps="3270.69")
          + "dbmatrix-probe:cpuall\n" + SYSBENCH_CPU.format(n=2, eps="6480.12")
          + "dbmatrix-probe:sync\n" + DD)


def test_the_probe_command_measures_fixed_work_and_overwrites_a_preallocated_file() -> None:
    cmd = probe_command("/mnt/my disk/", 2)
    assert "sysbench cpu --cpu-max-prime=10000 --time=2 --threads=1 run" in cmd
    assert "--threads=2 run" in cmd
    f = "'/mnt/my disk/.dbmatrix-probe'"
    assert f"of={f} bs=4096 count=2048 conv=fsync" in cmd  # preallocated and flushed first
    assert f"of={f} bs=4096 count=2048 conv=notrunc oflag=dsync" in cmd  # then overwritten, each write synced
    assert cmd.endswith(f"rm -f {f}")
    assert cmd.index("conv=fsync") < cmd.index("oflag=dsync")
    with pytest.raises(ValueError, match="cpus"):
        probe_command("/x", 0)


def test_the_probe_output_is_parsed_per_part() -> None:
    got = parse_probe(OUTPUT)
    assert got["cpu_eps_1"] == pytest.approx(3270.69) and got["cpu_eps_all"] == pytest.approx(6480.12)
    assert got["sync_write_ms"] == pytest.approx(0.265283 * 1000 / 2048)
    # a part that printed nothing (sysbench missing) is None, and the record says which
    partial = OUTPUT.replace("events per second:  6480.12", "")
    rec = probe_record(partial, directory="/d", medium="disk", cpus=2, when_utc="t")
    assert rec["cpu_eps_all"] is None and rec["cpu_eps_1"] == pytest.approx(3270.69)
    assert rec["error"] == "the probe printed no cpu_eps_all"
    assert "? on 2" in probe_line(rec) and "disk 0.130 ms" in probe_line(rec)
    failed = probe_record("", directory="/d", medium="disk", cpus=2, when_utc="t", error="CommandError: boom")
    assert probe_line(failed) == "platform probe failed: CommandError: boom"
    assert parse_probe("") == {"cpu_eps_1": None, "cpu_eps_all": None, "sync_write_ms": None}


def run(tps: float, busy_s: float, **kw: Any) -> dict[str, Any]:
    """A sentinel run of 45 s: `busy_s` host CPU seconds, counters per transaction as given (totals derived)."""
    txn = tps * 45.0
    row = {"tps": tps, "window_s": 45.0, "host_cpu_busy_s": busy_s, "cpu_user_s": 0.4 * busy_s,
           "cpu_sys_s": 0.3 * busy_s, "cache_lookups": kw.get("lookups", 86.0) * txn,
           "dev_read_bytes": kw.get("read_kb", 0.05) * 1024 * txn, "dev_write_bytes": kw.get("write_kb", 14.5) * 1024 * txn}
    row.update({f"probe_{k}": v for k, v in kw.items() if k in ("cpu_eps_1", "cpu_eps_all", "sync_write_ms")})
    return row


def test_throughput_factors_exactly_into_cpu_use_and_cpu_per_transaction() -> None:
    a, b = run(1256.0, 85.4), run(1113.0, 85.4 * 1.03)
    r = drift_ratios(a, b)
    assert math.log(1113.0 / 1256.0) == pytest.approx(math.log(r["util_ratio"]) - math.log(r["cpu_per_txn_ratio"]))
    assert r["util_ratio"] == pytest.approx(1.03) and r["lookups_per_txn_ratio"] == pytest.approx(1.0)
    assert math.isnan(r["read_kb_per_txn_ratio"])  # 0.05 KiB per transaction at both ends: below the floor
    assert math.isnan(r["probe_cpu_ratio"])  # no probe recorded
    assert set(r) == set(RATIOS)


def test_the_reading_names_what_carried_a_drift() -> None:
    """The threads study's case: -11 % at the same CPU use, the same work per transaction."""
    a, b = run(1256.0, 85.4), run(1113.0, 85.4)
    text = drift_reading(1113.0 / 1256.0, drift_ratios(a, b))
    assert text.startswith("CPU use +0.0 %, host CPU per transaction +12.8 %")
    assert "the same work per transaction took more CPU time, at the same CPU use" in text
    assert text.endswith("no platform probe was recorded to tell them apart")
    # with the probe: slower too -> the platform; unchanged -> the server
    slow = drift_reading(1113.0 / 1256.0, drift_ratios(run(1256.0, 85.4, cpu_eps_1=3300.0),
                                                      run(1113.0, 85.4, cpu_eps_1=2950.0)))
    assert slow.endswith("the fixed-work probe ran slower too (-10.6 % events/s): the platform")
    same = drift_reading(1113.0 / 1256.0, drift_ratios(run(1256.0, 85.4, cpu_eps_1=3300.0),
                                                      run(1113.0, 85.4, cpu_eps_1=3310.0)))
    assert same.endswith("did not change (+0.3 % events/s): the server, not the platform")
    # the diagnostic sitting's first campaign (2026-11-30): +9.1 %, the probe +8.5 % on one thread and +9.0 % on
    # both; their geometric mean, +8.8 %, clears the one-sided 5 % bar (1.645 x 4.5 %): the platform
    diag = drift_ratios(run(1180.2, 85.0, cpu_eps_1=3047.0, cpu_eps_all=6005.0),
                        run(1288.1, 85.0 * 0.99, cpu_eps_1=3307.0, cpu_eps_all=6548.0))
    assert drift_reading(1288.1 / 1180.2, diag).endswith("the fixed-work probe ran faster too (+8.8 % events/s): "
                                                         "the platform")
    # one noisy probe figure alone (+5 %) does not
    weak = drift_ratios(run(1180.2, 85.0, cpu_eps_1=3047.0), run(1288.1, 85.0, cpu_eps_1=3200.0))
    assert drift_reading(1288.1 / 1180.2, weak).endswith("moved +5.0 % events/s, which does not settle it")
    # less CPU use at the same CPU per transaction: the server waited
    waited = drift_ratios(run(400.0, 60.0, sync_write_ms=0.27), run(340.0, 51.0, sync_write_ms=0.35))
    assert drift_reading(0.85, waited).endswith(
        "the CPUs were less busy at the same CPU time per transaction: the server waited more (I/O or locks); "
        "the probe's synchronous write took +29.6 %")
    # more work per transaction is said, whatever carried the throughput
    more = drift_ratios(run(1256.0, 85.4), run(1113.0, 85.4, write_kb=16.0))
    assert "the work per transaction, which changed too (KiB written per transaction +10.3 %), took more" in \
        drift_reading(1113.0 / 1256.0, more)
    # both moved: no single source named
    both = drift_ratios(run(150.0, 40.0), run(154.0, 36.6))
    assert drift_reading(154.0 / 150.0, both).endswith("CPU use and CPU time per transaction both moved")


def test_a_small_change_gets_its_figures_only_and_missing_counters_no_reading() -> None:
    a, b = run(1000.0, 80.0), run(1010.0, 80.0)
    text = drift_reading(1.01, drift_ratios(a, b))
    assert text.startswith("CPU use +0.0 %") and ":" not in text.split(";")[-1]
    assert drift_reading(0.9, drift_ratios({"tps": 1.0}, {"tps": 0.9})) == ""


def test_pooled_ratios_need_every_campaign() -> None:
    rows = [{"ratio": 0.9, **drift_ratios(run(1000.0, 80.0), run(900.0, 80.0))},
            {"ratio": 0.8, **drift_ratios(run(1000.0, 80.0, read_kb=5.0), run(800.0, 80.0, read_kb=0.05))}]
    pooled = pooled_ratios(rows)
    assert pooled["ratio"] == pytest.approx(math.sqrt(0.72))
    assert pooled["util_ratio"] == pytest.approx(1.0)
    assert math.isnan(pooled["read_kb_per_txn_ratio"])  # only the second campaign reads above the floor
