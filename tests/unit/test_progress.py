"""Progress lines of a matrix run (dbmatrix.run.progress) and the CLI's logging of them."""

from __future__ import annotations

import io
import json
import logging

import pytest

from dbmatrix import cli
from dbmatrix.commands import notebooks
from dbmatrix.record import RunRecord
from dbmatrix.run.progress import (
    JsonLines,
    RunOutcome,
    RunProgress,
    eta_s,
    event_line,
    format_duration,
    outcome_of,
    run_event,
)


def test_eta_is_the_mean_time_per_run_this_session_times_the_runs_left() -> None:
    assert eta_s(300.0, 3, 7) == pytest.approx(700.0)
    assert eta_s(0.0, 0, 5, planned_s_per_run=20.0) == 100.0  # before the first run: the plan's estimate
    assert eta_s(0.0, 0, 5) is None
    assert eta_s(123.0, 4, 0) == 0.0


def test_an_ok_line_says_place_run_tps_elapsed_and_eta() -> None:
    e = run_event("storage", 12, 64, RunOutcome("innodb-c25-t4-r2", "innodb-c25-t4", "ok", 812.34), 250.0, 1050.0)
    assert event_line(e) == "storage [12/64] innodb-c25-t4-r2  ok 812.3 tps  elapsed 4m10s  ETA 17m30s"


def test_a_failed_line_names_the_step_and_error_cut_to_one_line() -> None:
    err = "RuntimeError: mariadbd did not start\n" + "x" * 400
    e = run_event("st", 3, 8, RunOutcome("c-r1", "c", "failed", None, "h2", "start_server", err), 65.0, None, hosts=2)
    line = event_line(e)
    assert line.startswith("st [3/8] c-r1 on h2  FAILED at start_server: RuntimeError: mariadbd did not start x")
    assert line.endswith("…  elapsed 1m05s  ETA ?") and "\n" not in line and len(line) < 260
    assert e["error"] == err  # the event keeps it whole


def test_resumed_runs_count_as_done_and_do_not_shorten_the_eta() -> None:
    t = [1000.0]
    logger = logging.getLogger("test.progress.resume")
    p = RunProgress("st", planned=10, already_done=6, to_run=4, campaign=2, estimate_s=80.0, clock=lambda: t[0],
                    logger=logger)
    start = p.start()
    assert event_line(start) == "st: campaign 2: 10 runs planned, 6 done already, 4 to run on 1 host(s), estimated 1m20s"
    t[0] += 30.0
    e = p.run_done(RunOutcome("a-r1", "a", "ok", 500.0))
    assert (e["i"], e["n"], e["eta_s"]) == (7, 10, 90.0)  # 30 s per run of this session, 3 left
    t[0] += 50.0
    e = p.run_done(RunOutcome("b-r1", "b", "failed", error="boom", failed_step="measure"))
    assert (e["i"], e["eta_s"]) == (8, 80.0)
    end = p.finish(not_run=2)
    assert event_line(end) == "st: campaign 2: 1 ok, 1 failed, 2 not run in 1m20s; 7/10 runs done"


def test_adaptive_rounds_extend_the_total() -> None:
    p = RunProgress("st", planned=2, already_done=0, to_run=2, clock=lambda: 0.0, logger=logging.getLogger("t.a"))
    p.run_done(RunOutcome("a-r1", "a", "ok", 1.0))
    p.add_runs(3)
    assert p.run_done(RunOutcome("a-r2", "a", "ok", 1.0))["n"] == 5


def test_nothing_to_run_says_so() -> None:
    p = RunProgress("st", planned=4, already_done=4, to_run=0, campaign=1, clock=lambda: 0.0,
                    logger=logging.getLogger("t.n"))
    assert event_line(p.start()) == "st: campaign 1: all 4 runs done already; nothing to run"


def test_outcome_of_a_run_record() -> None:
    base = {"experiment": "e", "cell_id": "c", "cell": {}, "host": "h"}
    o = outcome_of(RunRecord.from_dict({**base, "run_id": "c-r1", "repetition": 1, "status": "ok",
                                        "summary": {"tps": 12.5}}))
    assert o == RunOutcome("c-r1", "c", "ok", 12.5, "h", None, None)
    f = outcome_of(RunRecord.from_dict({**base, "run_id": "c-r2", "repetition": 2, "status": "failed",
                                        "failed_step": "medium", "error": "E"}))
    assert (f.tps, f.failed_step, f.error) == (None, "medium", "E")


def test_format_duration() -> None:
    assert (format_duration(65), format_duration(3723)) == ("1m05s", "1h02m03s")


@pytest.mark.parametrize("mode", ["text", "json", "quiet"])
def test_the_cli_logs_progress_as_text_json_or_not_at_all(mode: str) -> None:
    buf = io.StringIO()
    cli.configure_logging(mode, buf)
    try:
        p = RunProgress("st", planned=2, already_done=0, to_run=2, campaign=1, clock=lambda: 0.0)
        p.start()
        p.run_done(RunOutcome("a-r1", "a", "ok", 100.0))
        logging.getLogger("dbmatrix.anything").warning("a warning")
    finally:
        cli.configure_logging("text")
    lines = buf.getvalue().splitlines()
    if mode == "quiet":
        assert lines == [lines[-1]] and lines[0].endswith("a warning")
    elif mode == "text":
        assert len(lines) == 3 and lines[1].endswith("st [1/2] a-r1  ok 100.0 tps  elapsed 0m00s  ETA 0m00s")
    else:
        events = [json.loads(x) for x in lines]
        assert [e["event"] for e in events] == ["study_start", "run", "log"]
        assert events[1]["tps"] == 100.0 and events[1]["i"] == 1 and "utc" in events[1]
        assert events[2]["level"] == "warning" and events[2]["message"] == "a warning"


def test_json_lines_formats_a_plain_record() -> None:
    rec = logging.LogRecord("dbmatrix.x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
    assert json.loads(JsonLines().format(rec))["message"] == "hello you"


def test_run_and_notebooks_take_quiet_and_json() -> None:
    p = cli.build_parser()
    assert cli.log_mode(p.parse_args(["run", "--json"])) == "json"
    assert cli.log_mode(p.parse_args(["run", "--no-progress"])) == "quiet"
    assert cli.log_mode(p.parse_args(["notebooks", "--quiet"])) == "quiet"
    assert cli.log_mode(p.parse_args(["notebooks"])) == "text"
    with pytest.raises(SystemExit):
        p.parse_args(["run", "--json", "--quiet"])
    assert "configure_logging('json')" in notebooks.kernel_logging_arguments("json")[0]
