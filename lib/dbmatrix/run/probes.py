"""Running the platform probe (:mod:`dbmatrix.run.platform_probe`) on a host, and where its results are kept.

Two places take it, both with the server stopped:

- after each A/A sentinel run (``raw/<run>/platform-probe.json`` in the sentinel's results): the platform at
  both ends of a sitting, beside the sentinel pair it explains (:mod:`dbmatrix.analyse.sentinel_mechanism`);
- before and after every run measured for at least :data:`~dbmatrix.spec.experiment.LONG_RUN_S` (a soak's hour:
  ``platform-probe-before.json`` and ``platform-probe-after.json`` beside its manifest). Within one long run
  nothing is randomised: a platform that slows during the hour lowers the hour's average against its first
  minutes by as much, and only a measurement outside the server tells it from the server's own drift. Ten
  seconds against an hour.

A probe that fails is recorded with its error and never stops a run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dbmatrix.record import RunRecord
from dbmatrix.run.platform_probe import probe_command, probe_record
from dbmatrix.spec.experiment import LONG_RUN_S, Experiment, PlannedRun
from dbmatrix.store import PROBE_AFTER_FILE, PROBE_BEFORE_FILE, PROBE_FILE, ResultStore, utc_now, write_json_atomic

if TYPE_CHECKING:
    from dbmatrix.hosts.remote import Host
    from dbmatrix.run.context import HostContext

PROBE_TIMEOUT_S = 120


def run_probe(host: Host, directory: str, medium: str, cpus: int) -> dict[str, Any]:
    """The probe on `host`, its synchronous writes in `directory` (on `medium`): its record, with the error
    when it failed (never raised)."""
    when = utc_now()
    try:
        out = host.run(probe_command(directory, cpus), timeout=PROBE_TIMEOUT_S).stdout
        return probe_record(out, directory=directory, medium=medium, cpus=cpus, when_utc=when)
    except Exception as exc:  # noqa: BLE001 - a probe is a check beside the runs, never their end
        return probe_record("", directory=directory, medium=medium, cpus=cpus, when_utc=when,
                            error=f"{type(exc).__name__}: {exc}"[:500])


def probe_target(ctx: HostContext, run: PlannedRun) -> tuple[str, str, int]:
    """Where the probe of `run` writes (its data medium's path, else the host's workdir), that medium's name,
    and the host's online CPUs."""
    medium = run.cell.medium
    state = ctx.media.get(medium)
    directory = str(getattr(state, "path", "") or ctx.spec.workdir)
    return directory, medium, int(ctx.facts.get("online_cpus") or ctx.facts.get("logical_cpus") or 1)


def probe_after_sentinel(ctx: HostContext, run: PlannedRun, store: ResultStore) -> dict[str, Any]:
    """The probe after a sentinel `run`, kept beside its manifest in `store` (the sentinel's own)."""
    rec = run_probe(ctx.host, *probe_target(ctx, run))
    write_json_atomic(store.raw / run.run_id / PROBE_FILE, rec)
    return rec


def brackets(exp: Experiment) -> bool:
    """Whether the study's runs are long enough to be probed before and after."""
    return exp.measure_s >= LONG_RUN_S


def measure_bracketed(ctx: HostContext, run: PlannedRun, store: ResultStore,
                      measure: Callable[[], RunRecord]) -> RunRecord:
    """`measure()` between two probes; kept beside the run's manifest when it was measured (a failed run is
    not analysed, its probes would explain nothing)."""
    target = probe_target(ctx, run)
    before = run_probe(ctx.host, *target)
    m = measure()
    after = run_probe(ctx.host, *target)
    if m.ok and (store.raw / run.run_id).is_dir():
        write_json_atomic(store.raw / run.run_id / PROBE_BEFORE_FILE, before)
        write_json_atomic(store.raw / run.run_id / PROBE_AFTER_FILE, after)
    return m


__all__ = ["PROBE_TIMEOUT_S", "brackets", "measure_bracketed", "probe_after_sentinel", "probe_target",
           "run_probe"]
