"""Tests of dbmatrix.workload.sysbench and dbmatrix.parse.sysbench against real sysbench 1.0.20 outputs (tests/fixtures/sysbench)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from dbmatrix.parse.sysbench import (
    SysbenchOutput,
    bucket_index,
    bucket_value,
    histogram_percentile,
    merge_histograms,
    parse_fatal,
    parse_histogram,
    parse_intervals,
    parse_output,
    parse_summary,
    split_checkpoint,
)
from dbmatrix.workload.sysbench import (
    RAND_TYPES,
    RUN_ONLY_OPTIONS,
    WORKLOADS,
    RunOptions,
    SysbenchCommand,
    Target,
    build_command,
    command_string,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sysbench"
SOCK = "/tmp/sbfix/s.sock"


TARGET_FIELDS = {"socket", "user", "db"}
RUN_FIELDS = {"time_s", "rand_type", "rate", "report_interval", "histogram", "percentile", "checkpoint_s"}


def build(workload: str, phase: str, **flat) -> list[str]:
    """build_command of a SysbenchCommand given flat keywords (target and run options picked out)."""
    target = Target(**{k: flat.pop(k) for k in TARGET_FIELDS & set(flat)})
    run = RunOptions(**{k: flat.pop(k) for k in RUN_FIELDS & set(flat)})
    return build_command(SysbenchCommand(workload, phase, target, run=run, **flat))

RW = "run_oltp_read_write_innodb_t2_5s.stdout"
P99 = "run_oltp_point_select_p99.stdout"
STALL = "run_oltp_point_select_rate200_stall.stdout"
P0 = "run_oltp_read_only_percentile0.stdout"
HIST_RUNS = [RW, P99, STALL]


def text(name: str) -> str:
    return (FIX / name).read_text()


def out(name: str) -> SysbenchOutput:
    stderr = FIX / name.replace(".stdout", ".stderr")
    return parse_output(text(name), stderr.read_text() if stderr.exists() else "")


def test_fixtures_are_small():
    files = list(FIX.iterdir())
    assert len(files) >= 8
    assert all(f.stat().st_size < 100_000 for f in files)


# ----------------------------------------------------------------------------- intervals


@pytest.mark.parametrize("name", [RW, P99, STALL])
def test_one_interval_per_second_of_run(name):
    ivs = parse_intervals(text(name))
    assert len(ivs) == 5  # --time=5 --report-interval=1
    assert [iv["t_s"] for iv in ivs] == [1, 2, 3, 4, 5]
    assert all(isinstance(iv["t_s"], int) for iv in ivs)


def test_first_interval_values_read_write():
    first = parse_intervals(text(RW))[0]
    # [ 1s ] thds: 2 tps: 924.57 qps: 18510.37 (r/w/o: 12957.96/3702.27/1850.14)
    #        lat (ms,95%): 3.02 err/s: 0.00 reconn/s: 0.00
    assert first == {
        "t_s": 1,
        "threads": 2,
        "tps": 924.57,
        "qps": 18510.37,
        "reads_ps": 12957.96,
        "writes_ps": 3702.27,
        "other_ps": 1850.14,
        "lat_ms": 3.02,
        "lat_pct": 95.0,
        "err_ps": 0.0,
        "reconn_ps": 0.0,
    }


def test_intervals_with_percentile_99():
    ivs = parse_intervals(text(P99))
    assert {iv["lat_pct"] for iv in ivs} == {99.0}
    assert ivs[0]["lat_ms"] == 0.15
    assert ivs[0]["tps"] == ivs[0]["qps"] == ivs[0]["reads_ps"] == 47676.59
    assert ivs[0]["writes_ps"] == ivs[0]["other_ps"] == 0.0


def test_interval_without_events_prints_zero_latency_parsed_as_none():
    ivs = parse_intervals(text(STALL))
    stalled = ivs[2]
    assert stalled["t_s"] == 3 and stalled["tps"] == 0.0
    assert stalled["lat_ms"] is None  # sysbench printed "lat (ms,95%): 0.00"
    assert stalled["lat_pct"] == 95.0
    assert ivs[3]["lat_ms"] == 2082.91  # the queued requests drain after UNLOCK TABLES


def test_rate_mode_queue_lines_attach_to_their_interval():
    ivs = parse_intervals(text(STALL))
    assert [iv["queue_length"] for iv in ivs] == [0, 157, 367, 0, 0]
    assert [iv["concurrency"] for iv in ivs] == [0, 2, 2, 0, 0]
    assert "queue_length" not in parse_intervals(text(RW))[0]


def test_percentile_zero_intervals():
    ivs = parse_intervals(text(P0))
    assert len(ivs) == 2
    assert all(iv["lat_pct"] == 0.0 and iv["lat_ms"] is None for iv in ivs)


def test_interval_line_variants():
    line = "[ 12s ] thds: 16 tps: 1.5 qps: 30 (r/w/o: 21/6/3) lat (ms,99%): 123.45 err/s 0.50 reconn/s: 0.00"
    (iv,) = parse_intervals("noise\n" + line + "\n")
    assert iv["t_s"] == 12 and iv["threads"] == 16 and iv["lat_ms"] == 123.45
    assert iv["lat_pct"] == 99.0 and iv["err_ps"] == 0.5
    assert parse_intervals("") == []


# ----------------------------------------------------------------------------- histogram


def test_histogram_rows_read_write():
    hist = parse_histogram(text(RW))
    assert len(hist) == 120
    assert hist[0] == (0.768, 2)
    assert hist[-1] == (11.041, 2)
    assert [v for v, _ in hist] == sorted(v for v, _ in hist)


@pytest.mark.parametrize("name", HIST_RUNS)
def test_histogram_counts_sum_to_transactions_and_events(name):
    o = out(name)
    total = sum(n for _, n in o.histogram)
    # The histogram counts every event; for the oltp scripts an event is a transaction.
    assert total == o.summary["transactions"] == o.summary["events"]


@pytest.mark.parametrize("name", HIST_RUNS)
def test_histogram_percentile_reproduces_summary(name):
    o = out(name)
    q = o.summary["lat_pct"]
    p = histogram_percentile(o.histogram, q)
    # Printed bucket value (%.3f) vs summary (%.2f) of the same slot: equal within rounding ...
    assert abs(p - o.summary["lat_pct_ms"]) <= 0.0051
    # ... and exactly equal once the printed value is snapped back to sysbench's slot value.
    assert f"{bucket_value(bucket_index(p)):.2f}" == f"{o.summary['lat_pct_ms']:.2f}"


def test_histogram_percentile_values():
    assert histogram_percentile(parse_histogram(text(RW)), 95) == 2.913  # summary: 2.91
    assert histogram_percentile(parse_histogram(text(P99)), 99) == 0.093  # summary: 0.09
    assert histogram_percentile(parse_histogram(text(STALL)), 95) == 1938.162  # summary: 1938.16


def test_histogram_extremes_bracket_summary_min_max():
    o = out(RW)
    width = 1.0185  # adjacent slots differ by a factor exp(ln(1e8)/1023)
    assert o.summary["lat_min_ms"] / width <= o.histogram[0][0] <= o.summary["lat_min_ms"] * width + 0.005
    assert o.summary["lat_max_ms"] / width <= o.histogram[-1][0] <= o.summary["lat_max_ms"] * width + 0.005


def test_small_latencies_print_several_slots_with_one_value():
    hist = parse_histogram(text(P99))
    values = [v for v, _ in hist]
    assert len(values) == 255 > len(set(values))  # e.g. four slots print as 0.012
    merged = merge_histograms(hist)
    assert len(merged) == len(set(values))
    assert sum(n for _, n in merged) == sum(n for _, n in hist)
    for q in (50, 90, 95, 99, 99.9, 100):
        assert histogram_percentile(merged, q) == histogram_percentile(hist, q)


def test_no_histogram_block():
    assert parse_histogram(text(P0)) == []
    assert parse_histogram(text(RW).split("Latency histogram")[0]) == []


def test_histogram_percentile_rule():
    hist = [(1.0, 10), (2.0, 80), (3.0, 9), (4.0, 1)]
    # nmax = floor(100*q/100 + 0.5); first slot whose cumulative count reaches nmax
    assert histogram_percentile(hist, 10) == 1.0
    assert histogram_percentile(hist, 10.6) == 2.0  # nmax = 11
    assert histogram_percentile(hist, 90) == 2.0
    assert histogram_percentile(hist, 99) == 3.0
    assert histogram_percentile(hist, 100) == 4.0
    assert histogram_percentile(list(reversed(hist)), 99) == 3.0  # order-independent
    assert histogram_percentile([], 95) == 0.0
    with pytest.raises(ValueError, match="q"):
        histogram_percentile(hist, 101)


def test_merge_histograms_is_exact():
    a = parse_histogram(text(RW))
    b = parse_histogram(text(STALL))
    m = merge_histograms(a, b)
    assert sum(n for _, n in m) == sum(n for _, n in a) + sum(n for _, n in b)
    assert [v for v, _ in m] == sorted({v for v, _ in a} | {v for v, _ in b})
    expected: dict[float, int] = {}
    for v, n in a + b:  # a value may repeat within one histogram (slots < ~0.1 ms)
        expected[v] = expected.get(v, 0) + n
    assert m == sorted(expected.items())
    assert merge_histograms(b, a) == m
    assert merge_histograms(a, a) == [(v, 2 * n) for v, n in a]  # a has no repeated values
    assert merge_histograms() == []
    assert merge_histograms([(2.0, 1)], [(1.0, 3)], [(2.0, 4)]) == [(1.0, 3), (2.0, 5)]


# ----------------------------------------------------------------------------- summary


def test_summary_read_write():
    s = parse_summary(text(RW))
    assert s == {
        "sysbench_version": "1.0.20",
        "threads": 2,
        "seed": 7,
        "queries_read": 64624,
        "queries_write": 18464,
        "queries_other": 9232,
        "queries_total": 92320,
        "transactions": 4616,
        "tps": 921.99,
        "queries": 92320,
        "qps": 18439.72,
        "ignored_errors": 0,
        "ignored_errors_ps": 0.0,
        "reconnects": 0,
        "reconnects_ps": 0.0,
        "total_time_s": 5.0056,
        "events": 4616,
        "lat_min_ms": 0.76,
        "lat_avg_ms": 2.17,
        "lat_max_ms": 11.03,
        "lat_pct": 95.0,
        "lat_pct_ms": 2.91,
        "lat_sum_ms": 9997.68,
        "fairness_events_avg": 2308.0,
        "fairness_events_stddev": 23.0,
        "fairness_time_avg": 4.9988,
        "fairness_time_stddev": 0.0,
    }


def test_summary_percentile_99_and_wide_counts():
    s = parse_summary(text(P99))
    assert s["lat_pct"] == 99.0 and s["lat_pct_ms"] == 0.09
    assert s["transactions"] == 555316 and s["tps"] == 110963.68  # no padding after 6 digits
    assert s["queries_total"] == s["queries_read"] == 555316


def test_summary_percentile_disabled_and_no_seed():
    s = parse_summary(text(P0))
    assert s["lat_pct"] is None and s["lat_pct_ms"] is None
    assert s["seed"] is None
    assert s["transactions"] == 1096 and s["lat_sum_ms"] == 2002.03
    assert out(P0).complete


@pytest.mark.parametrize(
    "name", ["fail_no_tables.stdout", "fail_wrong_socket.stdout", "fail_invalid_option.stdout",
             "prepare_oltp_read_write.stdout"]
)
def test_incomplete_outputs_do_not_crash(name):
    o = out(name)
    assert not o.complete
    assert o.intervals == [] and o.histogram == []
    assert o.summary["transactions"] is None and o.summary["total_time_s"] is None
    assert o.summary["sysbench_version"] == "1.0.20"


def test_truncated_run_is_incomplete():
    cut = text(RW).split("SQL statistics:")[0]
    o = parse_output(cut)
    assert len(o.intervals) == 5 and len(o.histogram) == 120
    assert not o.complete
    assert parse_summary("") == dict.fromkeys(parse_summary(text(RW)))


# ----------------------------------------------------------------------------- FATAL


def test_parse_fatal_no_tables():
    fatal = parse_fatal(text("fail_no_tables.stdout"))
    assert fatal[1] == "FATAL: MySQL error: 1146 \"Table 'emptydb.sbtest1' doesn't exist\""
    assert fatal[-1] == "FATAL: Thread initialization failed!"
    assert len(fatal) == 6  # the "(last message repeated 1 times)" line is not a FATAL line
    assert parse_fatal(text("fail_no_tables.stderr")) == []


def test_parse_fatal_wrong_socket_via_parse_output():
    o = out("fail_wrong_socket.stdout")
    assert len(o.fatal) == 7
    assert any("error 2002" in line for line in o.fatal)
    o2 = parse_output("", text("fail_wrong_socket.stdout"))  # FATAL lines on stderr are kept too
    assert o2.fatal == o.fatal


def test_invalid_option_goes_to_stderr_without_fatal():
    o = out("fail_invalid_option.stdout")
    assert o.fatal == []
    assert "invalid option: --no-such-opt=1" in text("fail_invalid_option.stderr")


def test_successful_runs_have_no_fatal():
    for name in HIST_RUNS + [P0]:
        assert out(name).fatal == []
        assert out(name).complete


# ----------------------------------------------------------------------------- commands


def kw(**over):
    base = dict(socket=SOCK, tables=2, table_size=10000, threads=2)
    base.update(over)
    return base


def test_run_command_is_the_one_that_produced_the_fixture():
    argv = build("oltp_read_write", "run", **kw(time_s=5, seed=7))
    assert command_string(argv) == (
        "sysbench oltp_read_write --db-driver=mysql --mysql-socket=/tmp/sbfix/s.sock "
        "--mysql-user=root --mysql-db=sbtest --tables=2 --table-size=10000 --threads=2 "
        "--rand-seed=7 --time=5 --rand-type=uniform --report-interval=1 --percentile=95 "
        "--histogram=on run"
    )
    assert argv[0] == "sysbench" and argv[1] == "oltp_read_write" and argv[-1] == "run"


def test_sysbench_command_is_a_frozen_value_with_grouped_options():
    cmd = SysbenchCommand("oltp_read_write", "run", Target(SOCK), tables=2, table_size=10000, threads=2, seed=7,
                          run=RunOptions(time_s=5))
    assert build_command(cmd) == cmd.argv() == build("oltp_read_write", "run", **kw(time_s=5, seed=7))
    assert cmd == SysbenchCommand("oltp_read_write", "run", Target(SOCK, "root", "sbtest"), tables=2,
                                  table_size=10000, threads=2, seed=7, run=RunOptions(time_s=5))
    with pytest.raises(AttributeError):
        cmd.threads = 4  # type: ignore[misc]
    prepare = SysbenchCommand("oltp_read_write", "prepare", Target(SOCK), tables=2, table_size=10000, threads=2)
    assert prepare.run == RunOptions() and "--histogram=on" not in prepare.argv()


def test_prepare_has_no_run_only_options():
    for phase in ("prepare", "cleanup"):
        argv = build(
            "oltp_read_write", phase, **kw(time_s=5, seed=7, rate=100, rand_type="pareto", percentile=99)
        )
        assert argv[-1] == phase
        assert not [a for a in argv if a.split("=", 1)[0] in RUN_ONLY_OPTIONS]
        assert "--rand-seed=7" in argv and "--tables=2" in argv and "--table-size=10000" in argv
    assert build("oltp_read_write", "prepare", **kw(seed=7)) == [
        "sysbench", "oltp_read_write", "--db-driver=mysql", "--mysql-socket=/tmp/sbfix/s.sock",
        "--mysql-user=root", "--mysql-db=sbtest", "--tables=2", "--table-size=10000",
        "--threads=2", "--rand-seed=7", "prepare",
    ]


def test_optional_options():
    argv = build("oltp_point_select", "run", **kw(rate=200, percentile=99, histogram=False))
    assert "--rate=200" in argv and "--percentile=99" in argv and "--histogram=off" in argv
    assert not any(a.startswith(("--time", "--rand-seed", "--mysql-storage-engine")) for a in argv)
    argv = build(
        "oltp_insert", "prepare", **kw(storage_engine="InnoDB PAGE_COMPRESSED=1", extra={"auto_inc": "off"})
    )
    assert "--mysql-storage-engine=InnoDB PAGE_COMPRESSED=1" in argv
    assert "--auto_inc=off" in argv
    s = command_string(argv)
    assert "'--mysql-storage-engine=InnoDB PAGE_COMPRESSED=1'" in s
    assert shlex.split(s) == argv


@pytest.mark.parametrize(
    "args, field, allowed",
    [
        (("oltp_tpcc", "run"), "workload", WORKLOADS),
        (("oltp_read_write", "warmup"), "phase", ("prepare", "run", "cleanup")),
    ],
)
def test_choice_errors_name_field_and_allowed_values(args, field, allowed):
    with pytest.raises(ValueError) as e:
        build(*args, **kw())
    msg = str(e.value)
    assert field in msg and args[0 if field == "workload" else 1] in msg
    assert all(a in msg for a in allowed)


def test_rand_type_error_names_field_and_allowed_values():
    with pytest.raises(ValueError) as e:
        build("oltp_read_write", "run", **kw(rand_type="zipf"))
    msg = str(e.value)
    assert "rand_type" in msg and "zipf" in msg
    assert all(r in msg for r in RAND_TYPES)


@pytest.mark.parametrize(
    "over, field",
    [
        (dict(threads=0), "threads"),
        (dict(tables=0), "tables"),
        (dict(table_size=-1), "table_size"),
        (dict(time_s=0), "time_s"),
        (dict(percentile=101), "percentile"),
        (dict(percentile=0), "histogram"),
        (dict(rate=-5), "rate"),
        (dict(seed=-1), "seed"),
        (dict(socket=""), "socket"),
        (dict(extra={"threads": "4"}), "threads"),
        (dict(extra={"--report_interval": "5"}), "report_interval"),
    ],
)
def test_invalid_values(over, field):
    with pytest.raises(ValueError, match=field):
        build("oltp_read_write", "run", **kw(**over))


def test_percentile_zero_without_histogram_is_valid():
    argv = build("oltp_read_only", "run", **kw(percentile=0, histogram=False, time_s=2, threads=1))
    assert "--percentile=0" in argv and "--histogram=off" in argv


# ----------------------------------------------------------------------------- one process: warm-up + window
# sysbench ... --time=5 --report-checkpoints=2 (see tests/fixtures/sysbench/README.md): a full report at 2 s,
# then counters and histogram reset; the final report covers the last 3 s only, but says "total time: 5 s".

CKPT = "run_oltp_read_write_checkpoint2_5s.stdout"
CKPT_RATE = "run_oltp_point_select_rate200_checkpoint2_4s.stdout"


def test_checkpoint_command():
    argv = build("oltp_read_write", "run", **kw(time_s=5, seed=7, checkpoint_s=2))
    assert argv[-2:] == ["--report-checkpoints=2", "run"]
    assert "--report-checkpoints=2" not in build("oltp_read_write", "prepare", **kw(checkpoint_s=2))
    for bad in (0, 5, 6):
        with pytest.raises(ValueError, match="checkpoint_s"):
            build("oltp_read_write", "run", **kw(time_s=5, checkpoint_s=bad))


def test_outputs_without_checkpoint_parse_as_before():
    for name in (RW, P99, STALL, P0):
        o = out(name)
        assert split_checkpoint(text(name)) is None
        assert o.checkpoint_s is None and o.warmup_intervals == [] and o.warmup_summary == {}
        assert o.intervals == parse_intervals(text(name))


def test_checkpoint_splits_warm_up_from_the_window():
    o = out(CKPT)
    assert o.checkpoint_s == 2 and o.complete
    # The [ 2s ] line was printed inside the checkpoint report; it is the warm-up's second 2.
    assert [r["t_s"] for r in o.warmup_intervals] == [1, 2]
    assert [r["t_s"] for r in o.intervals] == [1, 2, 3]  # the window's first second is t=1
    assert [r["tps"] for r in o.intervals] == [634.88, 790.12, 825.73]
    assert o.warmup_summary["transactions"] == 1482 and o.warmup_summary["total_time_s"] == 2.0001
    s = o.summary
    assert s["transactions"] == 2253 == sum(n for _, n in o.histogram)  # histogram: the window only
    assert s["total_time_s"] == pytest.approx(5.0035 - 2.0001)  # the window, not the whole run
    # sysbench's own per-second rate divides by the time since the checkpoint, not the total time.
    assert s["tps"] == 750.24 == pytest.approx(s["transactions"] / s["total_time_s"], rel=1e-3)
    assert s["lat_pct_ms"] == 3.75 and s["threads"] == 2 and s["seed"] == 7
    assert histogram_percentile(o.histogram, 95) == pytest.approx(s["lat_pct_ms"], abs=0.006)
    # Every transaction is in exactly one of the two reports.
    per_second = sum(r["tps"] for r in o.warmup_intervals + o.intervals)
    assert per_second == pytest.approx(o.warmup_summary["transactions"] + s["transactions"], rel=0.01)


def test_checkpoint_open_loop_keeps_queue_lines_with_their_second():
    o = out(CKPT_RATE)
    assert [r["t_s"] for r in o.warmup_intervals] == [1, 2] and [r["t_s"] for r in o.intervals] == [1, 2]
    assert all("queue_length" in r for r in o.warmup_intervals + o.intervals)
    assert o.summary["transactions"] == 435 == sum(n for _, n in o.histogram)


def test_checkpoint_report_line_alone_and_truncated_outputs():
    assert split_checkpoint("[ 5s ] Checkpoint report:\n") is not None
    assert split_checkpoint("[ 5s ] thds: 2 tps: 1.00 qps: 1.00 (r/w/o: 1.00/0.00/0.00) lat (ms,95%): 1.00 "
                            "err/s: 0.00 reconn/s: 0.00\n") is None
    cut = text(CKPT).split("[ 4s ]")[0]  # died in the window
    o = parse_output(cut)
    assert o.checkpoint_s == 2 and not o.complete and [r["t_s"] for r in o.intervals] == [1]
    cut = text(CKPT).split("SQL statistics:")[0]  # died at the checkpoint
    assert not parse_output(cut).complete
