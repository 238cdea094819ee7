"""The sysbench command lines of a cell's workload: the bundled oltp_* scripts, or our TPC-C script.

One place decides how a workload is prepared and run, so datasets, the standalone runner and the
Galera runner build the same commands. Pure, except :func:`install_scripts` (copies our Lua to a host)
and :func:`check_consistency` (runs the TPC-C check on a host).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dbmatrix.hosts.remote import Host
from dbmatrix.parse import tpcc as tpcc_output
from dbmatrix.spec.experiment import Cell, Experiment
from dbmatrix.workload import sysbench, tpcc

MAX_PREPARE_THREADS = 8


def install_scripts(host: Host, workdir: str, exp: Experiment) -> str | None:
    """Put the TPC-C Lua script on the host when the plan uses it; returns its path there (or None)."""
    if "tpcc" not in exp.factors["workload"]:
        return None
    return tpcc.install_script(host, f"{workdir}/lua")


def prepare_threads(exp: Experiment, cell: Cell) -> int:
    """Loader threads: one per table (oltp); for TPC-C, whose loader splits every warehouse into units
    (districts, quarters of ITEM and STOCK), four per warehouse."""
    w = exp.workload
    units = 4 * w.tables * w.warehouses if cell.workload == "tpcc" else w.tables
    return max(1, min(units, MAX_PREPARE_THREADS))


def command(exp: Experiment, cell: Cell, phase: str, *, socket: str, threads: int,
            script: str | None = None, time_s: int | None = None, seed: int | None = None,
            histogram: bool = False, rate: int | None = None, storage_engine: str | None = None,
            checkpoint_s: int | None = None) -> list[str]:
    """sysbench argv for `phase` (prepare, run, cleanup, or check for TPC-C) of the cell's workload;
    `checkpoint_s` (run only) ends the warm-up of a one-process run with a checkpoint report."""
    w = exp.workload
    common: dict[str, Any] = dict(target=sysbench.Target(socket), tables=w.tables, threads=threads, seed=seed,
                                  storage_engine=storage_engine)
    if phase == "run":
        common["run"] = sysbench.RunOptions(time_s=time_s, rand_type=w.rand_type, histogram=histogram, rate=rate,
                                            checkpoint_s=checkpoint_s)
    if cell.workload == "tpcc":
        if not script:
            raise ValueError("the tpcc workload needs the path of its Lua script on the host (install_scripts)")
        extra = {"strings": w.strings} if w.strings != "random" and phase in ("prepare", "run") else None
        return sysbench.SysbenchCommand("tpcc", phase, scale=w.warehouses, isolation=w.isolation,
                                        script=script, extra=extra, **common).argv()
    return sysbench.SysbenchCommand(cell.workload, phase, table_size=w.table_size, **common).argv()


def check_consistency(
    host: Host,
    *,
    socket: str,
    script: str,
    tables: int,
    scale: int,
    conditions: Iterable[int] | str = tpcc.DEFAULT_CONDITIONS,
    user: str = "root",
    db: str = "sbtest",
    timeout_s: float = 3600.0,
    prefix: list[str] | None = None,
) -> tpcc.ConsistencyResult:
    """Run ``sysbench tpcc.lua ... check`` on ``host`` and return the parsed result.

    A failing condition is a result (``passed=False``), not an exception; tpcc.TpccError is raised when
    the check could not run at all (server down, tables missing, wrong scale), with sysbench's message.
    ``prefix`` wraps the command (e.g. ``taskset``).
    """
    argv = sysbench.SysbenchCommand(
        "tpcc", "check", sysbench.Target(socket, user, db), tables=tables, scale=scale, script=script,
        threads=1, extra={"conditions": tpcc.conditions_option(conditions)},
    ).argv()
    command = sysbench.command_string([*(prefix or []), *argv])
    r = host.run(command, check=False, timeout=timeout_s)
    conds = tpcc_output.parse_check(r.stdout)
    overall = tpcc_output.overall_result(r.stdout)
    if not conds or overall is None:
        tail = "\n".join((r.stderr + "\n" + r.stdout).strip().splitlines()[-5:])
        raise tpcc.TpccError(f"[{host.name}] TPC-C check did not run (exit {r.exit_code}): {command}\n{tail}")
    passed = overall and r.exit_code == 0 and all(c["passed"] for c in conds)
    return tpcc.ConsistencyResult(passed=passed, conditions=conds, exit_code=r.exit_code, command=command,
                             duration_s=round(r.duration_s, 3))
