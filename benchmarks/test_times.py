"""Where `make test`'s time goes: per-file worker-seconds from a JUnit report, and the wall time the two
pytest-xdist workers take on them (the files in the order conftest.py gives, scheduled as `--dist loadfile`
schedules them: a worker is given the next whole file when two or fewer of its tests are left).

    PYTEST_ADDOPTS="--junitxml=/tmp/make-test.xml" make test
    .venv/bin/python benchmarks/test_times.py /tmp/make-test.xml            # the top files, and the schedule
    .venv/bin/python benchmarks/test_times.py /tmp/make-test.xml --workers 3 --top 40

A test's time in the report is its setup, call and teardown (pytest's junit_duration_report "total")."""

from __future__ import annotations

import argparse
import heapq
import xml.etree.ElementTree as ET
from collections import OrderedDict
from collections.abc import Sequence


def read_report(path: str) -> OrderedDict[str, list[float]]:
    """File -> its tests' seconds, the files in collection order as conftest.py sorts it (every file but the
    unit tests first, tests/ before notebooks/, each part alphabetical)."""
    files: dict[str, list[float]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        files.setdefault(case.get("classname", ""), []).append(float(case.get("time", "0")))

    def order(name: str) -> tuple[bool, bool, str]:
        return name.startswith("tests.unit."), not name.startswith("tests."), name
    return OrderedDict((f, files[f]) for f in sorted(files, key=order))


def loadfile_makespan(units: Sequence[Sequence[float]], workers: int) -> tuple[float, list[float]]:
    """Wall seconds of xdist's loadscope scheduling: each worker starts with one unit, then takes the next
    queued unit whenever its pending tests drop to two or fewer (xdist 3.x ``_reschedule``)."""
    queue = [list(u) for u in units if u]
    pending: list[list[float]] = [[] for _ in range(workers)]
    clock = [0.0] * workers
    for w in range(workers):
        if queue:
            pending[w].extend(queue.pop(0))
    for w in range(workers):  # "at least two work units if possible"
        if queue and len(pending[w]) <= 2:
            pending[w].extend(queue.pop(0))
    events = [(0.0, w) for w in range(workers) if pending[w]]
    heapq.heapify(events)
    while events:
        _, w = heapq.heappop(events)
        if not pending[w]:
            continue
        clock[w] += pending[w].pop(0)
        if queue and len(pending[w]) <= 2:
            pending[w].extend(queue.pop(0))
        heapq.heappush(events, (clock[w], w))
    return max(clock), clock


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="pytest --junitxml output")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    files = read_report(args.report)
    total = sum(sum(t) for t in files.values())
    parts: dict[str, float] = {}
    for name, times in files.items():
        part = name.split(".")[1] if name.startswith("tests.") else name.split(".")[0]
        parts[part] = parts.get(part, 0.0) + sum(times)
    print(f"{sum(len(t) for t in files.values())} tests in {len(files)} files: {total:.0f} worker-s")
    for part, s in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<12} {s:7.0f} s  {100 * s / total:5.1f} %")
    print(f"\nthe {args.top} files that take longest (s, tests, longest test s):")
    for name, times in sorted(files.items(), key=lambda kv: -sum(kv[1]))[:args.top]:
        print(f"  {sum(times):7.1f}  {len(times):4d}  {max(times):6.1f}  {name}")
    span, clocks = loadfile_makespan(list(files.values()), args.workers)
    print(f"\n{args.workers} workers, --dist loadfile in conftest.py's order: {span:.0f} s wall "
          f"(workers end at {', '.join(f'{c:.0f}' for c in clocks)}; a perfect split: {total / args.workers:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
