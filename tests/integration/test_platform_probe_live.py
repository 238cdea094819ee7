"""The platform probe on this machine: real sysbench cpu and dd with O_DSYNC, before and after a long run (the
soak's hour; what is tested is the bracket, so the run between is a record committed as the runner does), and a
probe that cannot write says why without stopping anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbmatrix.hosts.inventory import HostSpec
from dbmatrix.hosts.remote import LocalHost
from dbmatrix.record import RunRecord
from dbmatrix.run.context import HostContext
from dbmatrix.run.probes import brackets, measure_bracketed, run_probe
from dbmatrix.spec.experiment import load_spec
from dbmatrix.store import PROBE_AFTER_FILE, PROBE_BEFORE_FILE, ResultStore

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_a_long_run_is_measured_between_two_real_probes(tmp_path: Path) -> None:
    soak, smoke = load_spec(ROOT / "specs/paper-soak.yaml"), load_spec(ROOT / "specs/smoke.yaml")
    assert brackets(soak) and not brackets(smoke)  # an hour is bracketed, seconds are not
    run = soak.plan(1)[0]
    work = tmp_path / "w"
    work.mkdir()
    ctx = HostContext(LocalHost(), HostSpec("localhost", workdir=str(work)), {"online_cpus": os.cpu_count()},
                      "root", None, {})
    store = ResultStore(tmp_path / "results")
    order: list[str] = []

    def measure() -> RunRecord:
        order.append("run")
        staging = store.begin_run(run.run_id)
        (staging / "sysbench.out").write_text("")
        rec = RunRecord.from_dict({
            "run_id": run.run_id, "experiment": soak.name, "cell_id": run.cell.cell_id, "cell": run.cell.levels(),
            "repetition": run.repetition, "block": run.block, "order": run.order, "host": "localhost",
            "status": "ok", "started_utc": "2026-11-30T00:00:00+00:00", "campaign": 1})
        store.commit_run(staging, rec)
        return rec

    m = measure_bracketed(ctx, run, store, measure)
    assert m.ok and order == ["run"]
    before, after = store.probe(run.run_id, PROBE_BEFORE_FILE), store.probe(run.run_id, PROBE_AFTER_FILE)
    for p in (before, after):
        assert p["error"] is None and p["cpu_eps_1"] > 0 and p["cpu_eps_all"] >= p["cpu_eps_1"] * 0.5, p
        assert 0 < p["sync_write_ms"] < 1000 and p["directory"] == str(work) and p["medium"] == "disk", p
    assert before["utc"] < after["utc"]  # about 5 s each
    assert not list(work.iterdir())  # the probe's file is removed


def test_a_probe_that_cannot_write_records_why() -> None:
    rec = run_probe(LocalHost(), "/nonexistent/dbmatrix-probe-dir", "disk", 1)
    assert rec["cpu_eps_1"] > 0 and rec["sync_write_ms"] is None
    assert rec["error"] == "the probe printed no sync_write_ms"
