"""The scale-out study on real servers: two mariadbd instances on this machine driven by `run_study` (one
sysbench over both sockets), and instances spread over the two network-namespace test hosts with the client
on h1 reaching both over TCP. Each instance answers queries in the window (per-instance Questions deltas),
the aggregate QPS is positive, the analysis gives its tables, and no instance is left running."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from dbmatrix.analyse.scaleout import scaleout_tables
from dbmatrix.run.matrix import run_study
from dbmatrix.study import load_study

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("mariadbd") is None or shutil.which("sysbench") is None,
                                 reason="needs mariadbd and sysbench")]

SPEC = {
    "experiment": "it-scaleout",
    "topology": {"kind": "instances"},
    "workload": {"tables": 2, "table_size": 2000},
    "factors": {"instances": [1, 2], "threads": 2},
    "repetitions": 1, "seed": 5, "warmup_s": 1, "measure_s": 3,
    "server_options": {"innodb_log_file_size": "16M"},
}


def _write(tmp_path: Path, spec: dict, inventory: dict) -> tuple[Path, Path]:
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    return tmp_path / "spec.yaml", tmp_path / "inventory.yaml"


def _pids_on(datadir_root: str) -> list[str]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "mariadbd" in cmd and datadir_root in cmd:
                out.append(p.name)
    return out


def test_two_instances_on_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBMATRIX_BASE_PORT", "23100")
    work = tmp_path / "work"
    cpus = sorted(os.sched_getaffinity(0))[:2]
    pinned = {**SPEC, "factors": {**SPEC["factors"], "pinning": ["none", "instance"]}} if len(cpus) == 2 else SPEC
    spec, inv = _write(tmp_path, pinned, {"hosts": [{"name": "localhost", "address": "local", "workdir": str(work),
                                                    "media": {"disk": {"kind": "dir"}}}]})
    study = load_study("smoke", spec=spec, inventory=inv, results_dir=tmp_path / "results")
    counts = run_study(study, progress=False)
    ms = {(m.cell["instances"], m.cell.get("pinning", "none")): m for m in study.store.records()}
    assert counts.ok == len(ms) == (4 if pinned is not SPEC else 2), \
        [(m.failed_step, m.error) for m in ms.values()]
    two = ms[(2, "none")]
    assert two.client["transport"] == "socket" and len(two.client["sockets"]) == 2
    assert "--mysql-socket=" + ",".join(two.client["sockets"]) in two.sysbench["command"]
    per = two.instances_window["per_instance"]
    assert set(per) == {"i1", "i2"} and all(f["com_select"] > 0 and f["cpu_s"] is not None for f in per.values())
    assert sum(f["share"] for f in per.values()) == pytest.approx(1.0, abs=1e-5)
    assert len({i["datadir"] for i in two.instances.values()}) == 2
    assert all("--skip-networking" in i["options"] for i in two.instances.values())
    assert all(i["stop_mode"] == "kill" for i in two.instances.values())  # the default stop_mode
    assert _pids_on(str(work)) == []
    if pinned is not SPEC:  # one CPU each, applied by taskset to the running server
        p = ms[(2, "instance")].instances
        assert [p[k]["command"].split()[:3] for k in ("i1", "i2")] == [["taskset", "-c", str(c)] for c in cpus]
        assert [p[k]["affinity"].rsplit(":", 1)[1].strip() for k in ("i1", "i2")] == [str(c) for c in cpus]
    tables = scaleout_tables(study.store.load_runs(), study.store.load_histograms(), study.store.load_intervals(),
                             study.store.records())
    cells = tables["scaleout-cells"]
    assert sorted(set(cells["instances"])) == [1, 2] and (cells["qps"] > 0).all() and cells["p95_ms"].notna().all()
    assert len(tables["scaleout-instance-runs"]) == 3 * len(ms) // 2


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
def test_instances_across_the_two_namespace_hosts(tmp_path: Path, netns_hosts) -> None:
    client = "h2"  # placed on the host that is not the run's worker (h1): the spec, not the worker, decides
    base = tempfile.mkdtemp(prefix="dbmatrix-scaleout-", dir="/var/tmp")
    try:
        inventory = netns_hosts.inventory_dict()
        for entry in inventory["hosts"]:
            entry["workdir"] = f"{base}/{entry['name']}-work"
            entry["media"] = {"disk": {"kind": "dir", "path": f"{base}/{entry['name']}-disk"}}
        # a 5 s window: the status snapshots of the remote instance go over SSH from a helper thread, and on a
        # loaded machine a 3 s window can close before the snapshot of its start is taken (i2: no SELECT)
        spec = {**SPEC, "experiment": "it-scaleout-spread", "factors": {"instances": 2, "threads": 4}, "measure_s": 5,
                "topology": {"kind": "instances", "hosts": ["h1", "h2"], "client": client}}
        spec_path, inv = _write(tmp_path, spec, inventory)
        study = load_study("smoke", spec=spec_path, inventory=inv, results_dir=tmp_path / "results")
        counts = run_study(study, progress=False)
        (m,) = list(study.store.records())
        assert counts.ok == 1 and m.status == "ok", (m.failed_step, m.error)
        h1, h2 = netns_hosts["h1"].address, netns_hosts["h2"].address
        assert m.client["transport"] == "tcp" and m.client["addresses"] == [h1, h2]
        assert m.client["host"] == client and m.host == "h1"  # the worker is the first host
        assert {k: (i["host"], i["address"]) for k, i in m.instances.items()} == {"i1": ("h1", h1),
                                                                                     "i2": ("h2", h2)}
        per = m.instances_window["per_instance"]
        assert all(f["com_select"] > 0 for f in per.values()), per
        assert m.summary["qps"] > 0
        print(f"client on {client}: aggregate QPS {m.summary['qps']:.0f}; per instance "
              + ", ".join(f"{k} ({m.instances[k]['host']}): share {f['share']:.3f}, {f['qps_status']:.0f} q/s, "
                          f"CPU {f['cpu_pct']} %" for k, f in per.items()))
        for h in netns_hosts:
            assert h.processes("mariadbd") == [], f"an instance left running on {h.name}"
    finally:
        shutil.rmtree(base, ignore_errors=True)
