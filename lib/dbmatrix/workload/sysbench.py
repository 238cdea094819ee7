"""sysbench 1.0.20 (Debian) command lines, as pure functions.

Nothing here runs a process or touches files: a :class:`SysbenchCommand` (target, workload, run options)
returns its argv list. The output of a ``sysbench ... run`` is parsed by :mod:`dbmatrix.parse.sysbench`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from dbmatrix.workload import tpcc

__all__ = [
    "PHASES",
    "RAND_TYPES",
    "RUN_ONLY_OPTIONS",
    "TPCC",
    "WORKLOADS",
    "RunOptions",
    "SysbenchCommand",
    "Target",
    "build_command",
    "command_string",
]

TPCC = "tpcc"  # our own TPC-C script (dbmatrix.workload.tpcc); the others ship with sysbench
WORKLOADS: tuple[str, ...] = (
    "oltp_read_write",
    "oltp_read_only",
    "oltp_point_select",
    "oltp_write_only",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_insert",
    "oltp_delete",
    TPCC,
)
PHASES: tuple[str, ...] = ("prepare", "run", "cleanup", "check")  # check: TPC-C only
RAND_TYPES: tuple[str, ...] = ("uniform", "gaussian", "special", "pareto")

#: Options only meaningful for ``run``; never emitted for ``prepare``/``cleanup``.
RUN_ONLY_OPTIONS: tuple[str, ...] = (
    "--time",
    "--report-interval",
    "--histogram",
    "--percentile",
    "--rand-type",
    "--rate",
    "--report-checkpoints",
)



# --------------------------------------------------------------------------- command line


def _choice(field_name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{field_name}={value!r} is not one of: {', '.join(allowed)}")


def _int_at_least(field_name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field_name} must be an integer >= {minimum}, got {value!r}")


def _opt_key(name: str) -> str:
    """Canonical option name: sysbench treats ``-`` and ``_`` alike in option names."""
    return name.lstrip("-").replace("_", "-").lower()


@dataclass(frozen=True)
class Target:
    """Where sysbench connects: a MariaDB socket (a comma-separated list spreads the threads over the
    servers), a user and a database."""

    socket: str
    user: str = "root"
    db: str = "sbtest"


@dataclass(frozen=True)
class RunOptions:
    """Timing, load and reporting of a ``run`` (:data:`RUN_ONLY_OPTIONS`; never emitted for other phases).

    ``checkpoint_s`` adds ``--report-checkpoints``: a full report at that second, after which sysbench
    resets its counters and histogram (one process warms up, then measures; see
    :func:`dbmatrix.parse.sysbench.parse_output`)."""

    time_s: int | None = None
    rand_type: str = "uniform"
    rate: int | None = None
    report_interval: int = 1
    histogram: bool = True
    percentile: int = 95
    checkpoint_s: int | None = None


@dataclass(frozen=True)
class SysbenchCommand:
    """One sysbench invocation: ``workload`` and ``phase`` against ``target``; :meth:`argv` is its argv.

    ``storage_engine`` is pasted verbatim into CREATE TABLE by sysbench, so table options can ride along
    (``"InnoDB PAGE_COMPRESSED=1"``). ``extra`` adds ``--key=value`` options (script options such as
    ``point_selects``); a key that duplicates a generated option is an error.

    ``workload="tpcc"`` runs our TPC-C script: ``script`` is the path of ``tpcc.lua`` on the host (see
    :func:`dbmatrix.workload.tpcc.install_script`), ``tables`` the number of table sets, ``scale`` the
    warehouses per set, ``isolation`` RC/RR/RU/SER (the script's default is RC); ``table_size`` is
    ignored; the phase ``check`` verifies the consistency conditions. The other workloads need
    ``table_size`` and refuse ``script``/``scale``/``isolation``.
    Invalid values raise ``ValueError`` on construction, naming the offending field and, for choices,
    the allowed values.
    """

    workload: str
    phase: str
    target: Target
    tables: int
    threads: int
    table_size: int | None = None
    seed: int | None = None
    storage_engine: str | None = None
    script: str | None = None
    scale: int | None = None
    isolation: str | None = None
    extra: dict[str, str] | None = None
    run: RunOptions = field(default_factory=RunOptions)

    def __post_init__(self) -> None:
        _validate(self)
        self.argv()  # an extra option that duplicates a generated one fails here, not at use

    def argv(self) -> list[str]:
        """The sysbench argv (for ``prepare``, ``cleanup`` and ``check`` without the run-only options)."""
        return _argv(self)


def build_command(cmd: SysbenchCommand) -> list[str]:
    """Return the sysbench argv of ``cmd`` (:meth:`SysbenchCommand.argv`)."""
    return cmd.argv()


def _validate(c: SysbenchCommand) -> None:
    workload, phase, r, t = c.workload, c.phase, c.run, c.target
    _choice("workload", workload, WORKLOADS)
    _choice("phase", phase, PHASES)
    _choice("rand_type", r.rand_type, RAND_TYPES)
    is_tpcc = workload == TPCC
    if is_tpcc:
        if not c.script:
            raise ValueError("script: the path of tpcc.lua on the host is required for workload 'tpcc' "
                             "(dbmatrix.workload.tpcc.install_script returns it)")
        if c.scale is None:
            raise ValueError("scale (warehouses per table set) is required for workload 'tpcc'")
        tpcc.validate_options(scale=c.scale, tables=c.tables, isolation=c.isolation,
                              storage_engine=c.storage_engine)
    else:
        if phase == "check":
            raise ValueError(f"phase='check' is only for workload 'tpcc', not {workload!r}")
        for name, value in (("script", c.script), ("scale", c.scale), ("isolation", c.isolation)):
            if value is not None:
                raise ValueError(f"{name} is only for workload 'tpcc', not {workload!r}")
        if c.table_size is None:
            raise ValueError(f"table_size is required for workload {workload!r}")
    if not t.socket:
        raise ValueError("socket must be a non-empty path")
    if not t.user:
        raise ValueError("user must be non-empty")
    if not t.db:
        raise ValueError("db must be non-empty")
    _int_at_least("tables", c.tables, 1)
    if not is_tpcc:
        _int_at_least("table_size", c.table_size, 1)
    _int_at_least("threads", c.threads, 1)
    if r.time_s is not None:
        _int_at_least("time_s", r.time_s, 1)
    if c.seed is not None:
        _int_at_least("seed", c.seed, 0)
    _int_at_least("report_interval", r.report_interval, 0)
    _int_at_least("percentile", r.percentile, 0)
    if r.percentile > 100:
        raise ValueError(f"percentile must be an integer in 0..100, got {r.percentile!r}")
    if r.histogram and r.percentile == 0:
        raise ValueError("histogram=True requires percentile > 0 (sysbench refuses --percentile=0 with --histogram)")
    if r.rate is not None:
        _int_at_least("rate", r.rate, 0)
    if r.checkpoint_s is not None:
        _int_at_least("checkpoint_s", r.checkpoint_s, 1)
        if r.time_s is not None and r.checkpoint_s >= r.time_s:
            raise ValueError(f"checkpoint_s must be below time_s ({r.time_s}), got {r.checkpoint_s!r}")
    if c.storage_engine is not None and not c.storage_engine.strip():
        raise ValueError("storage_engine must be non-empty when given")


def _argv(c: SysbenchCommand) -> list[str]:
    is_tpcc = c.workload == TPCC
    r = c.run
    argv = [
        "sysbench",
        c.script if is_tpcc and c.script else c.workload,
        "--db-driver=mysql",
        f"--mysql-socket={c.target.socket}",
        f"--mysql-user={c.target.user}",
        f"--mysql-db={c.target.db}",
        f"--tables={c.tables}",
        f"--scale={c.scale}" if is_tpcc else f"--table-size={c.table_size}",
        f"--threads={c.threads}",
    ]
    if is_tpcc and c.isolation is not None:
        argv.append(f"--trx_level={tpcc.validate_isolation(c.isolation, c.storage_engine)}")
    if c.storage_engine is not None:
        argv.append(f"--mysql-storage-engine={c.storage_engine}")
    if c.seed is not None:
        argv.append(f"--rand-seed={c.seed}")
    if c.phase == "run":
        if r.time_s is not None:
            argv.append(f"--time={r.time_s}")
        argv.append(f"--rand-type={r.rand_type}")
        argv.append(f"--report-interval={r.report_interval}")
        argv.append(f"--percentile={r.percentile}")
        argv.append(f"--histogram={'on' if r.histogram else 'off'}")
        if r.rate is not None:
            argv.append(f"--rate={r.rate}")
        if r.checkpoint_s is not None:
            argv.append(f"--report-checkpoints={r.checkpoint_s}")

    if c.extra:
        taken = {_opt_key(a.split("=", 1)[0]) for a in argv[2:]}
        for key, value in c.extra.items():
            k = _opt_key(key)
            if not k or "=" in k:
                raise ValueError(f"extra option name {key!r} is invalid")
            if k in taken:
                raise ValueError(f"extra option {key!r} duplicates an option set by build_command")
            taken.add(k)
            argv.append(f"--{key.lstrip('-')}={value}")

    argv.append(c.phase)
    return argv


def command_string(argv: list[str]) -> str:
    """Shell-quoted form of an argv list (for logs and ``sh -c``)."""
    return shlex.join(argv)
