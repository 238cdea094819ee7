"""benchmarks/test_times.py: a JUnit report read into files in conftest.py's order, and xdist's loadfile
schedule simulated on cases whose wall time is known by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests import benchmark_scripts

BENCH = benchmark_scripts.load("test_times")

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.unit.test_a" name="t1" time="1.5"/>
<testcase classname="notebooks.10-run.ipynb" name="Cell 0" time="4"/>
<testcase classname="tests.integration.test_z" name="t1" time="30"/>
<testcase classname="tests.unit.test_a" name="t2" time="0.5"/>
<testcase classname="tests.browser.test_lab" name="t1" time="20"/>
<testcase classname="tests.integration.test_b" name="t1" time="10"/>
</testsuite></testsuites>"""


def test_the_report_is_read_in_the_order_conftest_gives(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    path.write_text(REPORT)
    files = BENCH.read_report(str(path))
    assert list(files) == ["tests.browser.test_lab", "tests.integration.test_b", "tests.integration.test_z",
                           "notebooks.10-run.ipynb", "tests.unit.test_a"]
    assert files["tests.unit.test_a"] == [1.5, 0.5]


def test_the_schedule_of_whole_files() -> None:
    span = BENCH.loadfile_makespan
    assert span([[5.0], [3.0]], 2) == (5.0, [5.0, 3.0])
    # one worker: the sum, whatever the order
    assert span([[5.0, 1.0], [3.0], [2.0]], 1)[0] == pytest.approx(11.0)
    # a file is never split: one long file bounds the wall time from below
    assert span([[100.0], [1.0] * 10], 2)[0] == pytest.approx(100.0)
    # the prefetch: a worker holding two or fewer tests is given the next file at once, so the second long file
    # queues behind the first on worker 0 while worker 1 runs the short ones (xdist's "two or fewer pending")
    wall, clocks = span([[50.0], [1.0], [50.0], [1.0]], 2)
    assert clocks == pytest.approx([100.0, 2.0]) and wall == pytest.approx(100.0)
    # short files queued last even it out: worker 1 takes them while worker 0 runs its long files
    assert span([[50.0], [1.0], [50.0], *([[1.0]] * 200)], 2)[0] == pytest.approx(151.0, abs=1.0)


def test_it_prints_the_parts_the_files_and_the_schedule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.xml"
    path.write_text(REPORT)
    assert BENCH.main([str(path), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "6 tests in 5 files: 66 worker-s" in out
    assert "integration" in out and "tests.integration.test_z" in out and "test_a" not in out.split("the 2 files")[1]
    assert "2 workers, --dist loadfile" in out
