"""A tiny matrix split across two real SSH hosts (network namespaces with their own sshd, from
tests/conftest_netns.py): both hosts measure at once, each prepares its own dataset, every result lands
in the controller's one store; then a host that drops out mid-run (its sshd killed) is retired, its run
is marked, the other host finishes the matrix, and a rerun resumes what is left."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from tests.integration.factory import WhenMeasuring, study_from

from dbmatrix.run.matrix import run_study, study_status

pytestmark = pytest.mark.integration

SPEC = {
    "experiment": "it-fleet",
    "workload": {"name": "oltp_read_write", "tables": 1, "table_size": 2000},
    "factors": {"engine": "innodb", "cache_pct": [50, 100], "threads": [1, 2]},
    "repetitions": 1,
    "seed": 5,
    "warmup_s": 0,
    "measure_s": 2,
    "server_options": {"innodb_flush_log_at_trx_commit": 1},
}


def _study(tmp: Path, netns_hosts, name: str, reps: int = 1, **factors):
    inv = netns_hosts.inventory_yaml(tmp / f"{name}-inventory.yaml")
    return study_from(tmp, {**SPEC, "experiment": name, "repetitions": reps,
                            "factors": {**SPEC["factors"], **factors}}, inventory=Path(inv), results=name, name=name)


def test_matrix_split_across_two_ssh_hosts(tmp_path: Path, netns_hosts) -> None:
    # two cells x two replicate blocks: one whole block a host, and the two hosts measure at once
    study = _study(tmp_path, netns_hosts, "it-fleet-split", reps=2, cache_pct=100)
    counts = run_study(study, progress=False)
    failed = {m.run_id: (m.host, m.failed_step, m.error)
              for m in study.store.records() if m.status != "ok"}
    events = (study.store.root / "fleet-events.jsonl").read_text()
    assert counts.ok == 4 and counts.failed == 0 and counts.not_attempted == 0, (counts, failed, events)
    hosts = counts.hosts
    assert set(hosts) == {"h1", "h2"} and all(h["lost"] is None for h in hosts.values())
    assert all(h["runs"] == 2 for h in hosts.values()), hosts  # one whole replicate block each
    manifests = list(study.store.records())
    assert {m.host for m in manifests} == {"h1", "h2"}
    plan = json.loads((study.store.root / "plan.json").read_text())
    assert plan["hosts"] == ["h1", "h2"] and sorted(plan["block_hosts"].values()) == ["h1", "h2"]
    for m in manifests:  # each block on its assigned host
        assert m.host == plan["block_hosts"][str(m.block)]
    for m in manifests:
        assert m.status == "ok" and m.summary["tps"] > 0
        assert m.host_facts["host"] == m.host
    # each host prepared its own dataset, and recorded its facts, in the controller's store
    assert {p.parent.name for p in (study.store.root / "datasets").glob("*/*.json")} == {"h1", "h2"}
    assert {p.stem for p in study.store.hosts.glob("*.json")} == {"h1", "h2"}
    # the runs of both hosts overlapped in time: the fleet measured in parallel
    spans = {m.host: [] for m in manifests}
    for m in manifests:
        spans[m.host].append((m.started_utc, m.finished_utc))
    (a0, a1), (b0, b1) = ((min(s for s, _ in v), max(e for _, e in v)) for v in spans.values())
    assert a0 < b1 and b0 < a1
    assert study_status(study).pending == 0


def _measuring(pid: int) -> bool:
    """A sysbench that measures (its command line says ``run``), not one that loads the dataset (``prepare``):
    a host lost while loading loses no run, so the test would see no lost run."""
    try:
        return "run" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:  # gone meanwhile
        return False


def host_dropper(host) -> WhenMeasuring:  # a conftest_netns.NetnsHost
    """Kills every sshd of `host` (listener and sessions) half a second after it starts measuring: the
    host drops out."""

    def drop() -> None:
        for p in host.processes("sshd"):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass

    return WhenMeasuring(ready=lambda: any(_measuring(p) for p in host.processes("sysbench")), act=drop, delay=0.5)


def test_a_host_that_drops_out_stops_the_line_and_a_rerun_resumes(tmp_path: Path, netns_hosts) -> None:
    # as above: two cells x two replicate blocks, one block a host
    study = _study(tmp_path, netns_hosts, "it-fleet-drop", reps=2, cache_pct=100)
    h2 = netns_hosts["h2"]
    try:
        with host_dropper(h2) as dropper:
            counts = run_study(study, progress=False)
    finally:
        # what h2 left running (mariadbd, sysbench) belongs to this test: stop it by PID
        for p in h2.processes("mariadbd", "sysbench"):
            os.kill(p, signal.SIGKILL)
        if dropper.done.is_set():
            h2.start_sshd_again()  # h2 comes back: for the rerun below and the session's other tests
    assert dropper.done.is_set()
    assert counts.hosts["h2"]["lost"] and counts.hosts["h1"]["lost"] is None
    assert set(counts.lost_hosts) == {"h2"} and not counts.lost_hosts_allowed
    manifests = {m.run_id: m for m in study.store.records()}
    lost = [m for m in manifests.values() if m.host_lost]
    assert len(lost) == 1 and lost[0].host == "h2" and lost[0].status == "failed"
    # the line stopped: h1 finished what it was measuring and started nothing more
    assert counts.failed == 1 and counts.ok + counts.failed + counts.not_attempted == 4
    # h2's other run, and h1's second (h1 was busy with its first when h2 dropped, and stopped after it)
    assert counts.not_attempted >= 2 and set(counts.not_run) == {
        r for r in (x.run_id for x in study.experiment.plan()) if r not in manifests}
    events = (study.store.root / "fleet-events.jsonl").read_text()
    assert '"event": "host_lost"' in events and '"host": "h2"' in events and "line_stopped" in events
    assert study_status(study).lost_hosts.keys() == {"h2"}
    # the rerun resumes with both hosts (h2 is back): what was not measured is measured now
    again = run_study(study, progress=False)
    assert again.already_done == counts.ok and again.ok == 4 - counts.ok and again.failed == 0
    assert all(h["lost"] is None for h in again.hosts.values()), again.hosts
    assert study_status(study).pending == 0 and not study_status(study).failed
