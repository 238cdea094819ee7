"""The scale-out study: the instances topology's spec, planning and options (pure, and on a scripted host),
and its analysis on synthetic data of known answer (a saturation curve with a knee, one without)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse import scaleout as so
from dbmatrix.hosts.inventory import HostSpec, parse_medium
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.record import RunRecord
from dbmatrix.run.context import HostContext
from dbmatrix.run.datasets import DatasetInfo
from dbmatrix.run.instances import (
    Instances,
    cpu_sets,
    cpulist,
    deal,
    parse_proc_stat,
    placement_prefix,
    tcp_argv,
    window_figures,
)
from dbmatrix.run.session import RunSession
from dbmatrix.spec.experiment import SpecError, check_host_cpus, load_spec, parse_experiment
from dbmatrix.store import ResultStore

ROOT = Path(__file__).resolve().parents[2]


def spec(**extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"experiment": "so-unit", "topology": {"kind": "instances"},
                           "workload": {"tables": 1, "table_size": 1000},
                           "factors": {"instances": [1, 2], "threads": [1, 4]}, "repetitions": 2}
    raw.update(extra)
    return raw


# ------------------------------------------------------------------------------------ spec

def test_instances_topology_defaults_to_point_selects_and_tags_cells() -> None:
    exp = parse_experiment(spec())
    assert exp.factors["workload"] == ("oltp_point_select",)
    assert [c.cell_id for c in exp.cells()] == [
        "innodb-c100-b16k-none-disk-t1-ps", "innodb-c100-b16k-none-disk-t1-ps-i2",
        "innodb-c100-b16k-none-disk-t4-ps", "innodb-c100-b16k-none-disk-t4-ps-i2"]
    assert exp.to_dict()["topology"] == {"kind": "instances", "hosts": [], "client": ""}


def test_the_instances_factors_need_the_instances_topology() -> None:
    with pytest.raises(SpecError, match="factors.instances: only applies to several server instances"):
        parse_experiment({"experiment": "x", "factors": {"instances": [1, 2]}})
    with pytest.raises(SpecError, match="factors.pinning: unknown level 'socket'"):
        parse_experiment(spec(factors={"pinning": "socket"}))
    with pytest.raises(SpecError, match="factors.instances: 0 must be an integer from 1"):
        parse_experiment(spec(factors={"instances": 0}))
    with pytest.raises(SpecError, match="topology.client: 'h3' must be one of topology.hosts"):
        parse_experiment(spec(topology={"kind": "instances", "hosts": ["h1", "h2"], "client": "h3"}))
    with pytest.raises(SpecError, match="factors.instances: 40 instances on one host; allowed: up to 32"):
        parse_experiment(spec(factors={"instances": 40}))


def test_cpu_sets_per_instance_are_checked_against_the_host_cpus() -> None:
    exp = parse_experiment(spec(factors={"instances": [1, 2, 4], "pinning": "instance"}))
    check_host_cpus(exp, "localhost", 4)
    with pytest.raises(SpecError, match=r"factors.pinning: 'instance' gives each of the 4 instances on host "
                                        r"'localhost' \(factors.instances 4\) its own CPU set, but the host has 2"):
        check_host_cpus(exp, "localhost", 2)
    spread = parse_experiment(spec(topology={"kind": "instances", "hosts": ["h1", "h2"]},
                                   factors={"instances": [2, 4], "pinning": "instance"}))
    check_host_cpus(spread, "h1", 2)  # 2 of the 4 instances on each host


def test_existing_spec_digests_do_not_change() -> None:
    galera = load_spec(ROOT / "specs" / "quick-galera.yaml")
    assert "client" not in galera.to_dict()["topology"]
    assert "instances" not in load_spec(ROOT / "specs" / "quick.yaml").to_dict()["factors"]


def test_the_scaleout_specs_plan() -> None:
    quick = load_spec(ROOT / "specs" / "quick-scaleout.yaml")
    full = load_spec(ROOT / "specs" / "full-scaleout.yaml")
    assert len(quick.plan()) == 2 * 3 * quick.repetitions
    assert max(full.factors["instances"]) == 16 and max(full.factors["threads"]) == 1024
    assert full.factors["pinning"] == ("numa",) and full.cpu_placement.tool == "numactl"
    assert (full.warmup_s, full.measure_s) == (120, 300)


# ------------------------------------------------------------------------------------ pure planning

def test_cpu_lists_and_sets() -> None:
    assert cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu_sets("none", 2, [0, 1]) == [(None, None), (None, None)]
    assert cpu_sets("instance", 2, [0, 1, 2, 3]) == [("0-1", None), ("2-3", None)]
    assert cpu_sets("instance", 3, list(range(8))) == [("0-1", None), ("2-4", None), ("5-7", None)]
    with pytest.raises(SpecError, match="needs a CPU per instance"):
        cpu_sets("instance", 3, [0, 1])
    numa = [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert cpu_sets("numa", 3, list(range(8)), numa) == [("0-1,4-5", 0), ("2-3,6-7", 1), ("0-1,4-5", 0)]
    assert placement_prefix("taskset", "0-1", None) == ["taskset", "-c", "0-1"]
    assert placement_prefix("numactl", "0-1,4-5", 0) == ["numactl", "--cpunodebind=0", "--membind=0"]
    assert placement_prefix("numactl", "2", None) == ["numactl", "--physcpubind=2"]
    assert placement_prefix("taskset", None, None) == []
    assert deal(5, ["h1", "h2"]) == ["h1", "h2", "h1", "h2", "h1"]


def test_tcp_argv_replaces_the_socket_by_hosts_and_ports() -> None:
    argv = ["sysbench", "oltp_point_select", "--mysql-socket=/a.sock,/b.sock", "--mysql-user=root", "--threads=4",
            "run"]
    assert tcp_argv(argv, ["10.0.0.1", "10.0.0.2"], [23000], "bench", "pw") == [
        "sysbench", "oltp_point_select", "--mysql-host=10.0.0.1,10.0.0.2", "--mysql-port=23000",
        "--mysql-user=bench", "--mysql-password=pw", "--threads=4", "run"]


def test_proc_stat_and_window_figures() -> None:
    text = ("clk 100\nuptime 1234.5\n"
            "pid 42 42 (mariadbd) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 30 0 1 2 3\n"
            "pid 43 \n")
    parsed = parse_proc_stat(text)
    assert parsed == {"clk_tck": 100, "uptime_s": 1234.5, "ticks": {42: 300, 43: None}}
    before = {"i1": {"Questions": "100", "Com_select": "90"}, "i2": {"Questions": "100", "Com_select": "90"}}
    after = {"i1": {"Questions": "1100", "Com_select": "1090"}, "i2": {"Questions": "3100", "Com_select": "3090"}}
    f = window_figures(before, after, {"i1": 1.0, "i2": None}, {"i1": 3.0, "i2": 2.0}, 2.0)
    assert f["i1"] == {"questions": 1000, "com_select": 1000, "share": 0.25, "qps_status": 500.0, "cpu_s": 2.0,
                       "cpu_pct": 100.0}
    assert f["i2"]["share"] == 0.75 and f["i2"]["cpu_s"] is None


def _ctx(name: str, host: ScriptedHost, tmp: Path, address: str = "local", cpus: int = 2) -> HostContext:
    media = {"disk": parse_medium({"kind": "dir"}, host=name, name="disk", workdir=str(tmp / name))}
    spec_ = HostSpec(name, address=address, workdir=str(tmp / name), media=media)
    return HostContext(host, spec_, {"online_cpus": cpus}, "root", 23000, {"disk": object()})


def _dataset() -> DatasetInfo:
    return DatasetInfo("k", "h", "/snap", "innodb", "16k", "none", 1, 1000, 10 * 2**20, 10 * 2**20, 2**27, 2**27,
                       1.0, "now", logical_method="apparent size")


def _session(tmp: Path, exp: Any, run: Any) -> RunSession:
    return RunSession(ResultStore(tmp / "results"), exp, run, RunRecord(
        run_id=run.run_id, experiment=exp.name, cell_id=run.cell.cell_id, cell=run.cell.levels(),
        repetition=run.repetition, host="localhost"), "plan")


def test_prepare_gives_each_instance_its_own_paths_cpu_set_and_no_tcp_over_sockets(tmp_path: Path) -> None:
    exp = parse_experiment(spec(factors={"instances": 2, "threads": 4, "pinning": "instance"}))
    run = exp.plan()[0]
    host = ScriptedHost()
    topo = Instances({"localhost": _ctx("localhost", host, tmp_path)}, exp, run, _dataset())
    s = _session(tmp_path, exp, run)
    topo.prepare(s)
    i1, i2 = s.record.instances["i1"], s.record.instances["i2"]
    assert {i1["datadir"], i2["datadir"]} == {f"{tmp_path}/localhost/media/disk/instances/i1",
                                              f"{tmp_path}/localhost/media/disk/instances/i2"}
    assert len({i1["socket"], i2["socket"], i1["tmpdir"], i2["tmpdir"], i1["pid_file"], i2["pid_file"],
                i1["error_log"], i2["error_log"]}) == 8
    assert (i1["cpus"], i2["cpus"]) == ("0", "1")
    assert i1["command"].startswith("taskset -c 0 mariadbd ") and "--skip-networking" in i1["options"]
    assert f"--tmpdir={i1['tmpdir']}" in i1["options"]
    cmd = topo.bench_command(s, 5, True)
    assert f"--mysql-socket={i1['socket']},{i2['socket']}" in cmd and "--threads=4" in cmd
    assert s.record.client["transport"] == "socket"


def test_instances_over_two_hosts_listen_on_the_same_port_for_a_remote_client(tmp_path: Path) -> None:
    exp = parse_experiment(spec(topology={"kind": "instances", "hosts": ["h1", "h2"]},
                                factors={"instances": 2, "threads": 4}))
    run = exp.plan()[0]
    h1, h2 = ScriptedHost("h1"), ScriptedHost("h2")
    for h, listening in ((h1, "LISTEN 0 80 10.200.0.1:23000 0.0.0.0:*\n"), (h2, "")):
        h.on(r"^ss -Htln", stdout=listening)
    ctxs = {"h1": _ctx("h1", h1, tmp_path, "10.200.0.1"), "h2": _ctx("h2", h2, tmp_path, "10.200.0.2")}
    topo = Instances(ctxs, exp, run, _dataset())
    s = _session(tmp_path, exp, run)
    topo.prepare(s)
    i1, i2 = s.record.instances["i1"], s.record.instances["i2"]
    assert (i1["host"], i2["host"]) == ("h1", "h2") and i1["port"] == i2["port"] == 23001
    assert "--bind-address=10.200.0.1" in i1["options"] and "--bind-address=10.200.0.2" in i2["options"]
    cmd = topo.bench_command(s, 5, True)
    assert "--mysql-host=10.200.0.1,10.200.0.2 --mysql-port=23001 --mysql-user=bench" in cmd
    assert s.record.client == {"host": "h1", "transport": "tcp", "sockets": [],
                                    "addresses": ["10.200.0.1", "10.200.0.2"], "ports": [23001]}


# ------------------------------------------------------------------------------------ analysis

def synthetic_runs(curves: dict[int, dict[int, float]], p95: dict[int, dict[int, float]], reps: int = 3,
                   noise: float = 0.01) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs (qps) and one-bucket histograms (p95) per (instances, threads), with multiplicative noise."""
    rng = np.random.default_rng(1)
    runs, hist = [], []
    for inst, curve in curves.items():
        for t, q in curve.items():
            cid = f"t{t}-i{inst}"
            for r in range(1, reps + 1):
                rid = f"{cid}-r{r}"
                runs.append({"run_id": rid, "cell_id": cid, "instances": inst, "threads": t, "repetition": r,
                             "qps": q * (1 + noise * rng.standard_normal()), "lat_pct_ms": p95[inst][t],
                             "status": "ok"})
                hist.append({"run_id": rid, "cell_id": cid, "value_ms": p95[inst][t], "count": 100})
    return pd.DataFrame(runs), pd.DataFrame(hist)


THREADS = (1, 2, 4, 8, 16, 32)


def test_saturation_finds_the_knee_of_a_curve_that_flattens_and_declines() -> None:
    curve = {1: 1000.0, 2: 2000.0, 4: 4000.0, 8: 8000.0, 16: 8050.0, 32: 7000.0}
    runs, hist = synthetic_runs({1: curve}, {1: dict.fromkeys(THREADS, 0.1)})
    sat = so.saturation(so.cell_table(runs, hist)).iloc[0]
    assert sat["peak_threads"] in (8, 16)
    assert sat["saturation_threads"] == 8 and sat["saturation_hi"] == 16 and bool(sat["reached"])
    est = so.saturation_estimate(so.scaleout_tables(runs, hist, pd.DataFrame(), []))
    assert 0.8 < est.estimate < 0.92 and est.ci_hi < 1.0


def test_saturation_is_not_reached_on_a_curve_that_keeps_rising() -> None:
    runs, hist = synthetic_runs({1: {t: 1000.0 * t for t in THREADS}}, {1: dict.fromkeys(THREADS, 0.1)})
    sat = so.saturation(so.cell_table(runs, hist)).iloc[0]
    assert sat["saturation_threads"] == 32 and not bool(sat["reached"])
    with pytest.raises(so.NotTestable, match="still rises at the largest thread count"):
        so.saturation_estimate(so.scaleout_tables(runs, hist, pd.DataFrame(), []))


def test_p95_capacity_and_doubling_with_their_intervals() -> None:
    p95 = {1: {1: 0.1, 2: 0.2, 4: 0.4, 8: 0.9, 16: 2.0, 32: 4.0},
           2: {1: 0.1, 2: 0.1, 4: 0.2, 8: 0.45, 16: 0.8, 32: 2.0},
           4: {1: 0.1, 2: 0.1, 4: 0.1, 8: 0.2, 16: 0.3, 32: 0.4}}
    curves = {n: {t: 1000.0 * min(t, 8 * n) for t in THREADS} for n in (1, 2, 4)}
    runs, hist = synthetic_runs(curves, p95)
    tables = so.scaleout_tables(runs, hist, pd.DataFrame(), [])
    cap = tables["scaleout-capacity"].set_index("instances")
    assert cap.loc[1, "max_threads_under"] == 4 and cap.loc[1, "next_threads"] == 8
    assert cap.loc[2, "max_threads_under"] == 8 and math.isinf(cap.loc[4, "next_threads"])
    d = tables["scaleout-doubling"].set_index("instances_b")
    assert d.loc[1, "ratio"] == 2 and (d.loc[1, "ratio_lo"], d.loc[1, "ratio_hi"]) == (1.0, 4.0)
    assert bool(d.loc[2, "censored"])


def test_peak_ratio_names_the_missing_instance_counts() -> None:
    runs, hist = synthetic_runs({1: {1: 1.0, 2: 2.0}, 2: {1: 1.0, 2: 2.0}}, {1: {1: .1, 2: .1}, 2: {1: .1, 2: .1}})
    with pytest.raises(so.NotTestable, match="needs 8 and 16 instances; measured: 1, 2"):
        so.peak_ratio_estimate(so.scaleout_tables(runs, hist, pd.DataFrame(), []), 16, 8)


def test_per_instance_qps_and_stability_at_the_best_setting() -> None:
    runs, hist = synthetic_runs({2: {1: 1000.0, 2: 2000.0}}, {2: {1: 0.1, 2: 0.1}}, reps=2)
    manifests = [RunRecord.from_dict({"status": "ok", "run_id": r.run_id, "cell_id": r.cell_id, "experiment": "e",
                  "cell": {}, "repetition": 1, "host": "h",
                  "instances": {"i1": {"host": "h"}, "i2": {"host": "h"}},
                  "instances_window": {"elapsed_s": 5.0, "per_instance": {
                      "i1": {"questions": 750, "share": 0.75, "cpu_pct": 80.0},
                      "i2": {"questions": 250, "share": 0.25, "cpu_pct": 30.0}}}}) for r in runs.itertuples()]
    iv = pd.DataFrame([{"run_id": r.run_id, "cell_id": r.cell_id, "t_s": t, "qps": r.qps * (0.9 if t <= 2 else 1.0),
                        "lat_ms": 0.2} for r in runs.itertuples() for t in range(1, 5)])
    tables = so.scaleout_tables(runs, hist, iv, manifests)
    pi = tables["scaleout-instances"]
    row = pi[(pi["threads"] == 2) & (pi["instance"] == "i1")].iloc[0]
    assert row["qps"] == pytest.approx(0.75 * runs[runs["threads"] == 2]["qps"].mean())
    assert row["cpu_pct"] == 80.0
    st = tables["scaleout-stability"]
    assert set(st["cell_id"]) == {"t2-i2"} and st["half_ratio"].round(6).tolist() == [round(1 / 0.9, 6)] * 2
    assert len(tables["scaleout-timeline"]) == 8


def test_idle_instances_are_blamed_on_a_late_window_snapshot_when_it_came_late() -> None:
    # boot 776df624, scalegrid campaign 5: a saturated host starved the status client for 45 s (mpstat and
    # vmstat lost their samples too); both instances showed no SELECT and the client was blamed
    from dbmatrix.run.instances import idle_instances_reason

    late = idle_instances_reason(["i1", "i2"], 45.062, 45)
    assert "came 45.1 s after the window opened" in late and "starved the status client" in late
    assert "spread its threads" not in late
    for on_time in (0.2, None):
        assert idle_instances_reason(["i2"], on_time, 45) == (
            "instance(s) i2 answered no SELECT in the window: the client did not spread its threads over every instance")
