"""sysbench 1.0.20 (Debian) ``run`` output, parsed (pure): per-second lines, the latency histogram,
the summary, FATAL lines and the ``--report-checkpoints`` split.

Output facts this parser relies on (checked against sysbench 1.0.20 sources and real captures):

* per-interval lines: ``[ 1s ] thds: 2 tps: 71.96 qps: 1444.21 (r/w/o: 1011.95/288.84/143.42)
  lat (ms,95%): 36.89 err/s: 0.00 reconn/s: 0.00``; the percentile in the header is ``--percentile``.
  An interval in which no event completed prints ``lat (ms,95%): 0.00`` (empty histogram
  snapshot), which is parsed as ``lat_ms = None``.
* with ``--histogram=on`` the block ``Latency histogram (values are in milliseconds)`` (value
  printed ``%12.3f``, count) precedes ``SQL statistics:``.  Its buckets are sysbench's 1024
  log-spaced slots between 0.001 ms and 100 s; it counts every event, so its total equals
  ``transactions`` (= ``total number of events``).
* the summary's ``95th percentile`` is computed from that same histogram (see
  :func:`histogram_percentile`), printed ``%.2f``.
* ``FATAL:`` lines go to stdout (sysbench's logger) or stderr (some Lua/driver errors).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.parse import tpcc

__all__ = [
    "HIST_SIZE",
    "CheckpointSplit",
    "SysbenchOutput",
    "bucket_index",
    "bucket_value",
    "histogram_percentile",
    "merge_histograms",
    "parse_fatal",
    "parse_histogram",
    "parse_intervals",
    "parse_output",
    "parse_summary",
    "split_checkpoint",
]

# sysbench's latency histogram (sb_logger.c: OPER_LOG_GRANULARITY/MIN_VALUE/MAX_VALUE).
HIST_SIZE = 1024
HIST_MIN_MS = 1e-3
HIST_MAX_MS = 1e5
_RANGE_DEDUCT = math.log(HIST_MIN_MS)
_RANGE_MULT = (HIST_SIZE - 1) / (math.log(HIST_MAX_MS) - _RANGE_DEDUCT)


_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)"

_INTERVAL_RE = re.compile(
    r"^\[\s*(?P<t>\d+(?:\.\d+)?)s\s*\]\s+thds:\s*(?P<thds>\d+)"
    rf"\s+tps:\s*(?P<tps>{_NUM})"
    rf"\s+qps:\s*(?P<qps>{_NUM})"
    rf"\s+\(r/w/o:\s*(?P<r>{_NUM})/(?P<w>{_NUM})/(?P<o>{_NUM})\)"
    rf"\s+lat\s+\(ms,\s*(?P<pct>{_NUM})%\):\s*(?P<lat>{_NUM})"
    rf"\s+err/s:?\s*(?P<err>{_NUM})"
    rf"\s+reconn/s:?\s*(?P<reconn>{_NUM})",
    re.IGNORECASE,
)
_QUEUE_RE = re.compile(
    r"^\[\s*(?P<t>\d+(?:\.\d+)?)s\s*\]\s+queue length:\s*(?P<q>\d+),?\s+concurrency:\s*(?P<c>\d+)"
)
_HIST_HEADER = "Latency histogram (values are in milliseconds)"
_HIST_ROW_RE = re.compile(rf"^\s*(?P<v>{_NUM})\s*\|\**\s+(?P<n>\d+)\s*$")


def _num(s: str) -> float:
    return float(s)


def _t(s: str) -> int | float:
    return int(s) if s.isdigit() else float(s)


def parse_intervals(text: str) -> list[dict[str, Any]]:
    """One dict per ``[ Ns ] thds: ...`` line, in order.

    Keys: t_s, threads, tps, qps, reads_ps, writes_ps, other_ps, lat_ms, lat_pct, err_ps,
    reconn_ps; with ``--rate`` also queue_length and concurrency (from the companion line).
    ``lat_ms`` is None where sysbench printed ``0.00`` (no event completed in the interval).
    """
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        m = _INTERVAL_RE.match(line)
        if m:
            lat = _num(m["lat"])
            out.append(
                {
                    "t_s": _t(m["t"]),
                    "threads": int(m["thds"]),
                    "tps": _num(m["tps"]),
                    "qps": _num(m["qps"]),
                    "reads_ps": _num(m["r"]),
                    "writes_ps": _num(m["w"]),
                    "other_ps": _num(m["o"]),
                    "lat_ms": None if lat == 0.0 else lat,
                    "lat_pct": _num(m["pct"]),
                    "err_ps": _num(m["err"]),
                    "reconn_ps": _num(m["reconn"]),
                }
            )
            continue
        q = _QUEUE_RE.match(line)
        if q and out and out[-1]["t_s"] == _t(q["t"]):
            out[-1]["queue_length"] = int(q["q"])
            out[-1]["concurrency"] = int(q["c"])
    return out


def parse_histogram(text: str) -> list[tuple[float, int]]:
    """(bucket value in ms, count) rows of the ``--histogram=on`` block, in printed order."""
    rows: list[tuple[float, int]] = []
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == _HIST_HEADER)
    except StopIteration:
        return rows
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        m = _HIST_ROW_RE.match(line)
        if m:
            rows.append((float(m["v"]), int(m["n"])))
        elif "distribution" in line and "value" in line:
            continue  # column header
        else:
            break
    return rows


# (regex, {group: (key, converter)}) for the summary lines.
_SUMMARY_PATTERNS: list[tuple[re.Pattern[str], dict[str, tuple[str, Any]]]] = [
    (re.compile(r"^sysbench\s+(?P<v>\S+)"), {"v": ("sysbench_version", str)}),
    (re.compile(r"^Number of threads:\s*(?P<v>\d+)"), {"v": ("threads", int)}),
    (
        re.compile(r"^Initializing random number generator from seed \((?P<v>-?\d+)\)"),
        {"v": ("seed", int)},
    ),
    (re.compile(r"^read:\s*(?P<v>\d+)$"), {"v": ("queries_read", int)}),
    (re.compile(r"^write:\s*(?P<v>\d+)$"), {"v": ("queries_write", int)}),
    (re.compile(r"^other:\s*(?P<v>\d+)$"), {"v": ("queries_other", int)}),
    (re.compile(r"^total:\s*(?P<v>\d+)$"), {"v": ("queries_total", int)}),
    (
        re.compile(rf"^transactions:\s*(?P<n>\d+)\s*\((?P<r>{_NUM}) per sec\.\)"),
        {"n": ("transactions", int), "r": ("tps", float)},
    ),
    (
        re.compile(rf"^queries:\s*(?P<n>\d+)\s*\((?P<r>{_NUM}) per sec\.\)"),
        {"n": ("queries", int), "r": ("qps", float)},
    ),
    (
        re.compile(rf"^ignored errors:\s*(?P<n>\d+)\s*\((?P<r>{_NUM}) per sec\.\)"),
        {"n": ("ignored_errors", int), "r": ("ignored_errors_ps", float)},
    ),
    (
        re.compile(rf"^reconnects:\s*(?P<n>\d+)\s*\((?P<r>{_NUM}) per sec\.\)"),
        {"n": ("reconnects", int), "r": ("reconnects_ps", float)},
    ),
    (re.compile(rf"^total time:\s*(?P<v>{_NUM})s$"), {"v": ("total_time_s", float)}),
    (re.compile(r"^total number of events:\s*(?P<v>\d+)$"), {"v": ("events", int)}),
    (re.compile(rf"^min:\s*(?P<v>{_NUM})$"), {"v": ("lat_min_ms", float)}),
    (re.compile(rf"^avg:\s*(?P<v>{_NUM})$"), {"v": ("lat_avg_ms", float)}),
    (re.compile(rf"^max:\s*(?P<v>{_NUM})$"), {"v": ("lat_max_ms", float)}),
    (
        re.compile(rf"^(?P<p>\d+)th percentile:\s*(?P<v>{_NUM})$"),
        {"p": ("lat_pct", float), "v": ("lat_pct_ms", float)},
    ),
    (re.compile(rf"^sum:\s*(?P<v>{_NUM})$"), {"v": ("lat_sum_ms", float)}),
    (
        re.compile(rf"^events \(avg/stddev\):\s*(?P<a>{_NUM})/(?P<s>{_NUM})$"),
        {"a": ("fairness_events_avg", float), "s": ("fairness_events_stddev", float)},
    ),
    (
        re.compile(rf"^execution time \(avg/stddev\):\s*(?P<a>{_NUM})/(?P<s>{_NUM})$"),
        {"a": ("fairness_time_avg", float), "s": ("fairness_time_stddev", float)},
    ),
]

_SUMMARY_KEYS: tuple[str, ...] = tuple(
    key for _, groups in _SUMMARY_PATTERNS for key, _conv in groups.values()
)


def parse_summary(text: str) -> dict[str, Any]:
    """Header and end-of-run statistics of a ``run`` as a flat dict.

    Every key listed in the module docs is present; values not found in ``text`` are None
    (``seed`` is None when sysbench seeded from the clock; ``lat_pct``/``lat_pct_ms`` are None
    with ``--percentile=0``). Latencies are in ms, rates per second.
    """
    summary: dict[str, Any] = dict.fromkeys(_SUMMARY_KEYS)
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.endswith(":") and not raw.startswith(" "):
            section = line  # "SQL statistics:", "General statistics:", "Latency (ms):", ...
        if _INTERVAL_RE.match(line):
            continue
        for pattern, groups in _SUMMARY_PATTERNS:
            m = pattern.match(line)
            if not m:
                continue
            keys = [k for k, _ in groups.values()]
            # min/avg/max/sum belong to "Latency (ms):" only; read/write/... to "SQL statistics:".
            if keys[0].startswith("lat_") and section != "Latency (ms):":
                continue
            if keys[0].startswith("queries_") and section != "SQL statistics:":
                continue
            if keys[0] == "sysbench_version" and summary["sysbench_version"] is not None:
                continue
            for group, (key, conv) in groups.items():
                summary[key] = conv(m[group])
            break
    return summary


def parse_fatal(text: str) -> list[str]:
    """All lines starting with ``FATAL:`` (sysbench errors), stripped of trailing whitespace."""
    return [line.rstrip() for line in text.splitlines() if line.lstrip().startswith("FATAL:")]


@dataclass(frozen=True)
class SysbenchOutput:
    """Everything parsed from one sysbench ``run``.

    For a run with ``--report-checkpoints=N`` (warm-up and measurement in one process) ``intervals``,
    ``histogram`` and ``summary`` cover the measured window only: intervals after second N, re-based so
    the window's first second is ``t_s`` 1; ``summary["total_time_s"]`` is the window's length (the
    final report's total time less the checkpoint's). ``warmup_intervals`` and ``warmup_summary`` are
    the first N seconds (the checkpoint report), ``checkpoint_s`` is N. Without a checkpoint they are
    empty and None, and the rest is parsed as before.
    """

    intervals: list[dict[str, Any]] = field(default_factory=list)
    histogram: list[tuple[float, int]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    fatal: list[str] = field(default_factory=list)
    warmup_intervals: list[dict[str, Any]] = field(default_factory=list)
    warmup_summary: dict[str, Any] = field(default_factory=dict)
    checkpoint_s: int | float | None = None

    @property
    def complete(self) -> bool:
        """True when the end-of-run summary (transactions and total time) was printed."""
        return (
            self.summary.get("transactions") is not None
            and self.summary.get("total_time_s") is not None
        )


_CHECKPOINT_RE = re.compile(r"^\[\s*(?P<t>\d+(?:\.\d+)?)s\s*\]\s+Checkpoint report:\s*$")
_REPORT_END_RE = re.compile(r"^\s*execution time \(avg/stddev\):")


@dataclass(frozen=True)
class CheckpointSplit:
    """A ``--report-checkpoints`` output cut in three: what precedes the checkpoint report (header and
    warm-up seconds), the report itself (per-second lines printed inside it moved out) and the rest
    (window seconds and the final report)."""

    checkpoint_s: int | float
    before: str
    report: str
    after: str


def split_checkpoint(text: str) -> CheckpointSplit | None:
    """Cut a run's stdout at its first checkpoint report; None when it has none (a two-process run).

    sysbench prints the report from its checkpoint thread while the interval thread keeps printing, so
    the ``[ Ns ]`` line of the checkpoint second may come before, inside or after the report; interval
    lines inside it are kept in ``after`` (the caller tells warm-up from window rows by their ``t_s``)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _CHECKPOINT_RE.match(line.strip())), None)
    if start is None:
        return None
    m = _CHECKPOINT_RE.match(lines[start].strip())
    assert m is not None
    end = next((j + 1 for j in range(start + 1, len(lines)) if _REPORT_END_RE.match(lines[j])), len(lines))
    inside = lines[start + 1:end]
    stray = [line for line in inside if _INTERVAL_RE.match(line.strip()) or _QUEUE_RE.match(line.strip())]
    report = [line for line in inside if line not in stray]
    return CheckpointSplit(_t(m["t"]), "".join(lines[:start]), "".join(report), "".join(stray + lines[end:]))


def _window_intervals(rows: list[dict[str, Any]], checkpoint_s: int | float
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(warm-up rows, window rows re-based to start at 1 s) of one process's per-second rows."""
    warm = [r for r in rows if r["t_s"] <= checkpoint_s]
    window = [{**r, "t_s": _t(str(round(r["t_s"] - checkpoint_s, 6)))} for r in rows if r["t_s"] > checkpoint_s]
    warm.sort(key=lambda r: r["t_s"])  # the checkpoint second's line may come after the report
    return warm, window


def parse_output(stdout: str, stderr: str = "") -> SysbenchOutput:
    """Parse a run's stdout (intervals, histogram, summary) and FATAL lines of stdout+stderr.

    A TPC-C run (:mod:`dbmatrix.parse.tpcc`) also gets ``summary["tpcc"]`` (its per-type report) and
    ``summary["tpmC"]``; other workloads' summaries have neither key. A run with a checkpoint report
    (``--report-checkpoints``) is split into warm-up and window (see :class:`SysbenchOutput`).
    """
    fatal = parse_fatal(stdout) + parse_fatal(stderr)
    split = split_checkpoint(stdout)
    if split is None:
        summary = parse_summary(stdout)
        _add_tpcc(summary, stdout)
        return SysbenchOutput(intervals=parse_intervals(stdout), histogram=parse_histogram(stdout),
                              summary=summary, fatal=fatal)
    c = split.checkpoint_s
    warm_summary = parse_summary(split.before + split.report)
    summary = parse_summary(split.before + split.after)
    total, at_checkpoint = summary["total_time_s"], warm_summary["total_time_s"]
    if total is not None and at_checkpoint is not None:
        summary["total_time_s"] = round(total - at_checkpoint, 4)
    _add_tpcc(summary, split.after)
    warm, window = _window_intervals(parse_intervals(stdout), c)
    return SysbenchOutput(intervals=window, histogram=parse_histogram(split.after), summary=summary,
                          fatal=fatal, warmup_intervals=warm, warmup_summary=warm_summary, checkpoint_s=c)


def _add_tpcc(summary: dict[str, Any], text: str) -> None:
    report = tpcc.parse_tpcc_report(text)
    if report:
        summary["tpcc"] = report
        summary["tpmC"] = report["tpmC"]


# --------------------------------------------------------------------------- histograms


def bucket_index(value_ms: float) -> int:
    """Index (0..1023) of sysbench's histogram slot whose printed value is ``value_ms``."""
    if value_ms <= 0:
        return 0
    i = math.floor((math.log(value_ms) - _RANGE_DEDUCT) * _RANGE_MULT + 0.5)
    return min(max(i, 0), HIST_SIZE - 1)


def bucket_value(index: int) -> float:
    """Exact (unrounded) value in ms of sysbench's histogram slot ``index``."""
    return math.exp(index / _RANGE_MULT + _RANGE_DEDUCT)


def histogram_percentile(hist: list[tuple[float, int]], q: float) -> float:
    """The ``q``-th percentile the way sysbench 1.0.20 computes it from its histogram.

    sb_histogram.c: ``nmax = floor(nevents * q / 100 + 0.5)``; walk buckets in increasing
    value and return the first bucket value whose cumulative count reaches ``nmax``.
    Returns the bucket value as given in ``hist`` (``%.3f``-rounded if parsed from output),
    so it matches sysbench's ``%.2f`` summary to within rounding. An empty histogram gives
    0.0 (sysbench would report its minimum slot, 0.001 ms, printed as 0.00).
    """
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q!r}")
    buckets = sorted((v, n) for v, n in hist if n > 0)
    total = sum(n for _, n in buckets)
    if total == 0:
        return 0.0
    nmax = math.floor(total * q / 100 + 0.5)
    cum = 0
    for value, count in buckets:
        cum += count
        if cum >= nmax:
            return value
    return buckets[-1][0]  # unreachable: nmax <= total


def merge_histograms(*hists: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """Sum counts per bucket value over several histograms; sorted by value, zero counts dropped."""
    acc: dict[float, int] = {}
    for hist in hists:
        for value, count in hist:
            acc[value] = acc.get(value, 0) + int(count)
    return [(v, n) for v, n in sorted(acc.items()) if n != 0]
