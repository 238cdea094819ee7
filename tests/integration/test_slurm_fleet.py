"""A smoke matrix through a real Slurm cluster (tests/conftest_slurm.py: munged, slurmctld and one slurmd per
network-namespace test host): every replicate block is one exclusive allocation of its node, the runs
carry the lease in their manifests, the plan and the blocks each host measured are the static inventory's
(both give the host check); a node drained mid-matrix and a
job cancelled from outside are lost hosts (the line stops, or with --allow-lost-hosts the other host
goes on), no allocation outlives the command, and a rerun completes.

The log (``-s``) prints what the closing note of the Slurm work shows: allocations requested, nodes per
block, sacct lines, squeue during a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from tests.integration.factory import study_from

from dbmatrix import paths
from dbmatrix.analyse.hosts import host_check, host_check_line
from dbmatrix.run.matrix import run_study, study_assignment, summarize_study

pytestmark = pytest.mark.integration

SPEC = {
    "experiment": "it-slurm",
    "workload": {"name": "oltp_read_write", "tables": 1, "table_size": 500},
    "factors": {"engine": "innodb", "cache_pct": [50, 100], "threads": 1},
    "repetitions": 2,
    "seed": 5,
    "warmup_s": 0,
    "measure_s": 1,
}
SQUEUE = ["squeue", "--noheader", "--states=all", "--format=%i %j %T %N %P %a %l %M"]


def _inventory(netns_hosts, cluster, path: Path, scheduler: bool = True) -> str:
    inv = netns_hosts.inventory_dict()
    if scheduler:
        inv = {"scheduler": "slurm",
               "slurm": {"partition": cluster.partition, "account": "dblab", "conf": cluster.conf,
                         "features": {"disk": "disk"}, "min_time_limit": 120, "grant_timeout_s": 60},
               **inv}
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return str(path)


def _study(tmp: Path, netns_hosts, cluster, name: str, scheduler: bool = True):
    inv = Path(_inventory(netns_hosts, cluster, tmp / f"{name}-inventory.yaml", scheduler))
    return study_from(tmp, {**SPEC, "experiment": name}, inventory=inv, results=name, name=name)


def _events(study) -> list[dict]:
    path = study.store.root / "fleet-events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def _log(title: str, lines) -> None:
    print(f"\n--- {title}")
    for line in lines:
        print(f"    {line}")


def _our_jobs(cluster, name: str) -> list[str]:
    out = cluster.run(*SQUEUE, check=False).stdout.splitlines()
    return [line for line in out if f"dbmatrix-{name}-" in line]


class WhenMeasuring(threading.Thread):
    """Once host `host` runs sysbench, do `action` (once); meanwhile collect squeue snapshots."""

    def __init__(self, cluster, host=None, action=None):
        super().__init__(daemon=True)
        self.cluster, self.host, self.action = cluster, host, action
        self.done = threading.Event()
        self.stop_flag = threading.Event()
        self.squeue: list[str] = []
        self._last: list[str] = []

    def run(self) -> None:
        while not self.stop_flag.is_set():
            out = self.cluster.run(*SQUEUE, "--states=running", check=False).stdout.strip()
            shape = [line.rsplit(" ", 1)[0] for line in out.splitlines()]  # without the elapsed time
            if out and shape != self._last:
                self.squeue.append(out)
                self._last = shape
            if self.host is not None and not self.done.is_set() and self.host.processes("sysbench"):
                self.action()
                self.done.set()
            time.sleep(0.4)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_flag.set()
        self.join(10)


def _manifests(study) -> list[dict]:
    """The study's run records as their JSON (what a reader of the manifests sees)."""
    return [json.loads(r.to_json()) for r in study.store.records()]


def _print_leases(study) -> None:
    rows = []
    for m in sorted(_manifests(study), key=lambda m: m["order"]):
        lease = m.get("lease") or {}
        sacct = lease.get("sacct") or {}
        rows.append(f"order {m['order']} block {m['block']} {m['run_id']} on {m['host']}: {m['status']}"
                    f"{' (' + str(m.get('failed_step')) + ')' if m['status'] != 'ok' else ''} job {lease.get('job_id')} "
                    f"nodes {lease.get('nodes')}")
        if sacct:
            rows.append("  sacct: " + "|".join(f"{k}={sacct.get(k)}" for k in
                                               ("JobID", "JobName", "Partition", "Account", "NodeList", "State",
                                                "Start", "End", "Elapsed", "Timelimit", "source")))
    _log(f"{study.experiment.name}: runs and their leases", rows)
    _log("allocations requested", [e["request"] for e in _events(study) if e["event"] == "lease_requested"])


def test_smoke_matrix_on_two_slurm_nodes_same_plan_as_static(tmp_path: Path, netns_hosts, slurm_cluster) -> None:
    slurm_cluster.reset()
    study = _study(tmp_path, netns_hosts, slurm_cluster, "it-slurm-smoke")
    static = _study(tmp_path, netns_hosts, slurm_cluster, "it-slurm-static", scheduler=False)
    # the same plan through the static inventory and through Slurm: the same blocks on the same hosts
    a, b = summarize_study(study), summarize_study(static)
    assert a.run_hosts == b.run_hosts and a.runs_per_host == b.runs_per_host == {"h1": 2, "h2": 2}
    assert study_assignment(study) == study_assignment(static)
    _log("plan: block -> host (static | slurm)", [f"{study_assignment(static)} | {study_assignment(study)}"])
    with WhenMeasuring(slurm_cluster) as watch:
        counts = run_study(study, progress=False).as_dict()
    _log("squeue while the matrix ran", watch.squeue)
    _print_leases(study)
    assert counts["ok"] == 4 and counts["failed"] == 0 and counts["not_attempted"] == 0, counts
    manifests = list(_manifests(study))
    plan = json.loads((study.store.root / "plan.json").read_text())
    jobs: dict[int, set[str]] = {}
    for m in manifests:
        lease = m["lease"]
        assert m["host"] == plan["block_hosts"][str(m["block"])]  # the planned host: same plan as static
        assert lease["scheduler"] == "slurm" and lease["nodes"] == [m["host"]]
        assert lease["partition"] == "bench" and lease["account"] == "dblab"
        assert lease["sacct"]["JobName"] == f"dbmatrix-it-slurm-smoke-b{m['block']}"
        assert lease["sacct"]["State"] == "CANCELLED" and lease["sacct"]["Account"] == "dblab"  # released
        jobs.setdefault(m["block"], set()).add(lease["job_id"])
    assert all(len(v) == 1 for v in jobs.values()) and len(set().union(*jobs.values())) == 2  # one job a block
    # both blocks' allocations were running at once, each on its own node, and none is left
    assert any(s.count("RUNNING") == 2 for s in watch.squeue), watch.squeue
    assert not [j for j in _our_jobs(slurm_cluster, "it-slurm-smoke") if "RUNNING" in j or "PENDING" in j]
    rec = study.store.campaign_record(1)
    assert sorted(x["job_id"] for x in rec["leases"]) == sorted(set().union(*jobs.values()))
    requests = [e["request"] for e in _events(study) if e["event"] == "lease_requested"]
    assert len(requests) == 2 and all("--exclusive" in r and "--constraint=disk" in r and "--account=dblab" in r
                                      for r in requests)
    # the blocks were measured where the static plan puts them (the static fleet over these two hosts is
    # measured by test_fleet_matrix.py), and the host check (analyse.hosts) computes on the Slurm runs
    blocks = {m["block"]: m["host"] for m in _manifests(study)}
    _log("blocks per host as measured (slurm) | the static plan",
         [f"{blocks} | {study_assignment(static)}"])
    assert blocks == study_assignment(static)
    check = host_check(study.store.load_runs(), ["cache_pct"])
    pooled = check[check["scope"] == "pooled"]
    assert list(pooled["host"]) == ["h2"] and list(pooled["reference"]) == ["h1"], check
    assert pooled["verdict"].iloc[0] in ("interchangeable", "inconclusive", "not interchangeable")
    _log("host check", [f"{study.experiment.name}: {host_check_line(check)}"])


def test_a_drained_node_stops_the_line_and_a_rerun_completes(tmp_path: Path, netns_hosts, slurm_cluster) -> None:
    slurm_cluster.reset()
    study = _study(tmp_path, netns_hosts, slurm_cluster, "it-slurm-drain")
    drain = lambda: slurm_cluster.run("scontrol", "update", "nodename=h2", "state=drain", "reason=test")  # noqa: E731
    try:
        with WhenMeasuring(slurm_cluster, netns_hosts["h2"], drain) as watch:
            counts = run_study(study, progress=False).as_dict()
        assert watch.done.is_set()
        _log("drained h2 mid-matrix: counts", [json.dumps({k: counts.get(k) for k in
                                                            ("ok", "failed", "not_attempted", "lost_hosts")})])
        _log("sinfo after the drain", [slurm_cluster.run("sinfo", "-N", "-o", "%N %T %E", check=False).stdout])
        _print_leases(study)
        assert set(counts["lost_hosts"]) == {"h2"} and "drain" in counts["lost_hosts"]["h2"], counts
        assert counts["hosts"]["h1"]["lost"] is None and not counts["lost_hosts_allowed"]
        assert counts["failed"] == 0 and counts["ok"] + counts["not_attempted"] == 4  # the run under way counts
        assert any(e["event"] == "line_stopped" for e in _events(study))
        # the drained node's job was given back: nothing of ours holds a node
        assert not [j for j in _our_jobs(slurm_cluster, "it-slurm-drain") if "RUNNING" in j]
    finally:
        slurm_cluster.reset()  # the node comes back
    again = run_study(study, progress=False).as_dict()
    _log("rerun after resuming h2", [json.dumps({k: again.get(k) for k in ("already_done", "ok", "failed")})])
    _print_leases(study)
    assert again["already_done"] == counts["ok"] and again["ok"] == 4 - counts["ok"] and again["failed"] == 0
    assert all(m["status"] == "ok" and m["lease"]["job_id"] for m in _manifests(study))


def test_a_job_cancelled_from_outside_is_a_lost_host(tmp_path: Path, netns_hosts, slurm_cluster) -> None:
    slurm_cluster.reset()
    study = _study(tmp_path, netns_hosts, slurm_cluster, "it-slurm-cancel")

    def cancel() -> None:
        out = slurm_cluster.run("squeue", "--noheader", "--nodelist=h2", "--format=%i", check=False).stdout
        slurm_cluster.run("scancel", *out.split())

    with WhenMeasuring(slurm_cluster, netns_hosts["h2"], cancel) as watch:
        counts = run_study(study, progress=False, allow_lost_hosts=True).as_dict()
    assert watch.done.is_set()
    _log("job of h2 cancelled from outside: counts", [json.dumps({k: counts.get(k) for k in
                                                                  ("ok", "failed", "not_attempted", "lost_hosts",
                                                                   "not_run")})])
    _print_leases(study)
    assert set(counts["lost_hosts"]) == {"h2"} and "CANCELLED" in counts["lost_hosts"]["h2"], counts
    lost = [m for m in _manifests(study) if m.get("host_lost")]
    assert len(lost) == 1 and lost[0]["host"] == "h2" and lost[0]["failed_step"] == "lease"
    assert lost[0]["lease"]["sacct"]["State"] == "CANCELLED"
    assert counts["ok"] == 2 and counts["failed"] == 1 and counts["not_attempted"] == 1  # h1's block is whole
    assert not [j for j in _our_jobs(slurm_cluster, "it-slurm-cancel") if "RUNNING" in j]
    # the failed run and the one not run stay pending: a rerun resumes them (shown after the drain above)
    assert sum(study.store.status(r.run_id) != "ok" for r in study.experiment.plan()) == 2


def test_ctrl_c_cancels_the_granted_and_the_waiting_allocations(tmp_path: Path, netns_hosts, slurm_cluster) -> None:
    """h2 is taken by someone else's job: our block for h2 waits in the queue (PENDING) while h1 works;
    Ctrl-C (SIGINT to `dbmatrix run`) cancels both our allocations and leaves the other job alone."""
    slurm_cluster.reset()
    name = "it-slurm-ctrlc"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "experiment": name}))
    inv = _inventory(netns_hosts, slurm_cluster, tmp_path / f"{name}-inventory.yaml")
    other = slurm_cluster.run("salloc", "--nodes=1", "--exclusive", "--no-shell", "--nodelist=h2",
                              "--job-name=someone-else", "--time=5")
    other_id = other.stderr.split()[-1]
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib")}
    proc = subprocess.Popen([sys.executable, "-m", "dbmatrix", "run", "--profile", "smoke", "--spec", str(spec),
                             "--inventory", inv, "--results", str(tmp_path / name), "--no-progress"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        seen = ""
        while time.monotonic() < deadline and proc.poll() is None:
            queue = "\n".join(_our_jobs(slurm_cluster, name))
            if "PENDING" in queue and "RUNNING" in queue:  # h1 is being set up under its allocation
                seen = slurm_cluster.run(*SQUEUE, check=False).stdout
                break
            time.sleep(0.2)
        if not seen:
            proc.kill()
            pytest.fail(f"no allocation waited while another ran: {_our_jobs(slurm_cluster, name)}\n"
                        f"{''.join(proc.communicate(timeout=30))[-3000:]}")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    after = slurm_cluster.run(*SQUEUE, check=False).stdout
    _log("squeue before Ctrl-C (block 1 waits behind someone else's job on h2)", [seen])
    _log("squeue after Ctrl-C", [after])
    try:
        assert not [j for j in _our_jobs(slurm_cluster, name) if "RUNNING" in j or "PENDING" in j], (after, err[-2000:])
        assert f"{other_id} someone-else RUNNING h2" in after  # not ours: left alone
        assert proc.returncode != 0
    finally:
        slurm_cluster.run("scancel", other_id, check=False)
