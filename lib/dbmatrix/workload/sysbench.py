"""sysbench 1.0.20 (Debian) command lines, as pure functions.

Nothing here runs a process or touches files: :func:`build_command` returns an argv list. The output of
a ``sysbench ... run`` is parsed by :mod:`dbmatrix.parse.sysbench`.
"""

from __future__ import annotations

import shlex
from typing import Any

from dbmatrix.workload import tpcc

__all__ = [
    "PHASES",
    "RAND_TYPES",
    "RUN_ONLY_OPTIONS",
    "TPCC",
    "WORKLOADS",
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


def build_command(
    workload: str,
    phase: str,
    *,
    socket: str,
    user: str = "root",
    db: str = "sbtest",
    tables: int,
    table_size: int | None = None,
    threads: int,
    time_s: int | None = None,
    rand_type: str = "uniform",
    seed: int | None = None,
    report_interval: int = 1,
    histogram: bool = True,
    percentile: int = 95,
    storage_engine: str | None = None,
    rate: int | None = None,
    extra: dict[str, str] | None = None,
    script: str | None = None,
    scale: int | None = None,
    isolation: str | None = None,
    checkpoint_s: int | None = None,
) -> list[str]:
    """Return the sysbench argv for ``workload`` and ``phase`` against a MariaDB socket.

    ``socket`` may be a comma-separated list (sysbench spreads threads over the servers).
    For ``prepare``, ``cleanup`` and ``check`` the run-only options (:data:`RUN_ONLY_OPTIONS`) are
    left out. ``storage_engine`` is pasted verbatim into CREATE TABLE by sysbench, so table options
    can ride along (``"InnoDB PAGE_COMPRESSED=1"``). ``extra`` adds ``--key=value`` options (script
    options such as ``point_selects``); a key that duplicates a generated option is an error.

    ``workload="tpcc"`` runs our TPC-C script: ``script`` is the path of ``tpcc.lua`` on the host
    (see :func:`dbmatrix.workload.tpcc.install_script`), ``tables`` the number of table sets, ``scale`` the
    warehouses per set, ``isolation`` RC/RR/RU/SER (the script's default is RC); ``table_size`` is
    ignored; the phase ``check`` verifies the consistency conditions. The other workloads need
    ``table_size`` and refuse ``script``/``scale``/``isolation``.
    ``checkpoint_s`` adds ``--report-checkpoints``: a full report at that second, after which sysbench
    resets its counters and histogram (one process warms up, then measures; see
    :func:`dbmatrix.parse.sysbench.parse_output`).
    Raises ``ValueError`` naming the offending field and, for choices, the allowed values.
    """
    _choice("workload", workload, WORKLOADS)
    _choice("phase", phase, PHASES)
    _choice("rand_type", rand_type, RAND_TYPES)
    is_tpcc = workload == TPCC
    if is_tpcc:
        if not script:
            raise ValueError("script: the path of tpcc.lua on the host is required for workload 'tpcc' "
                             "(dbmatrix.workload.tpcc.install_script returns it)")
        if scale is None:
            raise ValueError("scale (warehouses per table set) is required for workload 'tpcc'")
        tpcc.validate_options(scale=scale, tables=tables, isolation=isolation,
                                  storage_engine=storage_engine)
    else:
        if phase == "check":
            raise ValueError(f"phase='check' is only for workload 'tpcc', not {workload!r}")
        for name, value in (("script", script), ("scale", scale), ("isolation", isolation)):
            if value is not None:
                raise ValueError(f"{name} is only for workload 'tpcc', not {workload!r}")
        if table_size is None:
            raise ValueError(f"table_size is required for workload {workload!r}")
    if not socket:
        raise ValueError("socket must be a non-empty path")
    if not user:
        raise ValueError("user must be non-empty")
    if not db:
        raise ValueError("db must be non-empty")
    _int_at_least("tables", tables, 1)
    if not is_tpcc:
        _int_at_least("table_size", table_size, 1)
    _int_at_least("threads", threads, 1)
    if time_s is not None:
        _int_at_least("time_s", time_s, 1)
    if seed is not None:
        _int_at_least("seed", seed, 0)
    _int_at_least("report_interval", report_interval, 0)
    _int_at_least("percentile", percentile, 0)
    if percentile > 100:
        raise ValueError(f"percentile must be an integer in 0..100, got {percentile!r}")
    if histogram and percentile == 0:
        raise ValueError("histogram=True requires percentile > 0 (sysbench refuses --percentile=0 with --histogram)")
    if rate is not None:
        _int_at_least("rate", rate, 0)
    if checkpoint_s is not None:
        _int_at_least("checkpoint_s", checkpoint_s, 1)
        if time_s is not None and checkpoint_s >= time_s:
            raise ValueError(f"checkpoint_s must be below time_s ({time_s}), got {checkpoint_s!r}")
    if storage_engine is not None and not storage_engine.strip():
        raise ValueError("storage_engine must be non-empty when given")

    argv = [
        "sysbench",
        script if is_tpcc and script else workload,
        "--db-driver=mysql",
        f"--mysql-socket={socket}",
        f"--mysql-user={user}",
        f"--mysql-db={db}",
        f"--tables={tables}",
        f"--scale={scale}" if is_tpcc else f"--table-size={table_size}",
        f"--threads={threads}",
    ]
    if is_tpcc and isolation is not None:
        argv.append(f"--trx_level={tpcc.validate_isolation(isolation, storage_engine)}")
    if storage_engine is not None:
        argv.append(f"--mysql-storage-engine={storage_engine}")
    if seed is not None:
        argv.append(f"--rand-seed={seed}")
    if phase == "run":
        if time_s is not None:
            argv.append(f"--time={time_s}")
        argv.append(f"--rand-type={rand_type}")
        argv.append(f"--report-interval={report_interval}")
        argv.append(f"--percentile={percentile}")
        argv.append(f"--histogram={'on' if histogram else 'off'}")
        if rate is not None:
            argv.append(f"--rate={rate}")
        if checkpoint_s is not None:
            argv.append(f"--report-checkpoints={checkpoint_s}")

    if extra:
        taken = {_opt_key(a.split("=", 1)[0]) for a in argv[2:]}
        for key, value in extra.items():
            k = _opt_key(key)
            if not k or "=" in k:
                raise ValueError(f"extra option name {key!r} is invalid")
            if k in taken:
                raise ValueError(f"extra option {key!r} duplicates an option set by build_command")
            taken.add(k)
            argv.append(f"--{key.lstrip('-')}={value}")

    argv.append(phase)
    return argv


def command_string(argv: list[str]) -> str:
    """Shell-quoted form of an argv list (for logs and ``sh -c``)."""
    return shlex.join(argv)
