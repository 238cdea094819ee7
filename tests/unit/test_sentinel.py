"""Issue 39 item 1: one fixed A/A sentinel cell at the start and end of every campaign, kept out of the design,
read for drift within a campaign and for change points over the campaigns (with its power on known answers)."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from dbmatrix.analyse.sentinel import (
    change_point,
    drift_table,
    load_sentinel,
    pettitt,
    pettitt_statistic,
    pooled_drift,
    sentinel_lines,
    write_sentinel,
)
from dbmatrix.record import RunRecord
from dbmatrix.run.platform_probe import probe_record
from dbmatrix.run.sentinel_runs import END, START, sentinel_due, sentinel_run, sentinel_runs_left, sentinel_store
from dbmatrix.spec.experiment import Experiment, PlannedRun, SpecError, load_spec, parse_experiment
from dbmatrix.store import PROBE_FILE, ResultStore, write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "specs" / "smoke.yaml"
RW = ROOT / "tests" / "fixtures" / "sysbench" / "run_oltp_read_write_innodb_t2_5s.stdout"


def spec(sentinel: Any, **campaigns: Any) -> Experiment:
    raw = yaml.safe_load(SMOKE.read_text())
    raw["campaigns"] = {**campaigns, "sentinel": sentinel}
    return parse_experiment(raw)


# -- the spec ------------------------------------------------------------------------------------------

def test_the_sentinel_names_one_cell_of_the_design_and_stays_out_of_the_digest() -> None:
    e = spec({"cell": {"cache_pct": 25}, "from_campaign": 2}, repetitions=1)
    assert e.sentinel_cell(1) is None and e.sentinel_cell(2) is not None
    assert e.sentinel_cell(2).cell_id == next(c for c in e.cells() if c.cache_pct == 25).cell_id
    assert e.digest() == load_spec(SMOKE).digest()  # a reference goes on with its next campaign
    assert e.to_dict()["campaigns"] == {"repetitions": 1, "sentinel": {"cell": {"cache_pct": 25},
                                                                       "from_campaign": 2}}
    first = spec({"cell": "first"})
    assert first.sentinel_cell(1) == first.cells()[0] and first.campaign_repetitions is None


@pytest.mark.parametrize(("sentinel", "message"), [
    ({"cell": {"cache_pct": 50}}, "campaigns.sentinel.cell.cache_pct: 50 is not a level of the study; allowed: 25, 100"),
    ({"cell": {"cahce_pct": 25}}, "campaigns.sentinel.cell: unknown factor 'cahce_pct'; allowed: engine"),
    ({"cell": {"engine": "innodb"}}, "name a level of every varied factor; missing: cache_pct"),
    ({"cell": {"cache_pct": 25}, "from_campaign": 0}, "campaigns.sentinel.from_campaign: 0 must be an integer >= 1"),
    ({"cell": {"cache_pct": 25}, "when": 1}, "campaigns.sentinel: "),
    ("first", "campaigns.sentinel: 'first' must be a mapping with cell"),
])
def test_a_bad_sentinel_is_refused_naming_the_field(sentinel: Any, message: str) -> None:
    with pytest.raises(SpecError) as ei:
        spec(sentinel)
    assert message in str(ei.value)


# -- when the runner measures it ----------------------------------------------------------------------

def put(store: ResultStore, run: PlannedRun, status: str = "ok", started: str = "2026-01-01T00:00:00+00:00",
        tps_scale: float = 1.0) -> None:
    staging = store.begin_run(run.run_id)
    text = RW.read_text()
    if tps_scale != 1.0:  # the fixture's tps line, scaled (the A/A ratio a test wants)
        import re

        text = re.sub(r"(transactions:\s+\d+\s+\()([\d.]+)", lambda m: f"{m.group(1)}{float(m.group(2)) * tps_scale:.2f}",
                      text)
    (staging / "sysbench.out").write_text(text)
    store.commit_run(staging, RunRecord.from_dict({
        "run_id": run.run_id, "experiment": "cache-sweep-smoke", "cell_id": run.cell.cell_id,
        "cell": run.cell.levels(), "repetition": run.repetition, "block": run.block, "order": run.order,
        "host": "localhost", "status": status, "started_utc": started, "campaign": run.campaign}))


def test_the_opening_run_is_due_before_the_design_and_the_closing_one_after_it(tmp_path: Path) -> None:
    e = spec({"cell": {"cache_pct": 100}}, repetitions=1)
    store = ResultStore(tmp_path)
    plan = e.plan(2)
    assert sentinel_due(e, store, 2, START, plan) == sentinel_run(e, 2, START)
    assert sentinel_due(e, store, 2, END, plan) is None  # no opening run yet
    assert [r.repetition for r in sentinel_runs_left(e, store, 2)] == [1, 2]
    put(sentinel_store(store, 2), sentinel_run(e, 2, START))
    assert sentinel_due(e, store, 2, START, plan) is None
    put(store, plan[0])
    assert sentinel_due(e, store, 2, END, plan) is None  # the design is not complete
    for r in plan[1:]:
        put(store, r)
    closing = sentinel_due(e, store, 2, END, plan)
    assert closing is not None and closing.repetition == 2 and closing.cell.cache_pct == 100
    # the sentinel's runs never enter the study's records
    assert {m.run_id for m in store.records()} == {r.run_id for r in plan}
    assert (tmp_path / "sentinel" / "campaign-2" / "raw" / sentinel_run(e, 2, START).run_id).is_dir()


def test_an_opening_run_that_failed_before_the_design_started_is_due_again(tmp_path: Path) -> None:
    """A host not set up yet fails the opening run and every design run: the rerun opens the sitting again."""
    e = spec({"cell": {"cache_pct": 100}}, repetitions=1)
    store = ResultStore(tmp_path)
    plan = e.plan(4)
    put(sentinel_store(store, 4), sentinel_run(e, 4, START), status="failed")
    for r in plan:
        put(store, r, status="failed")
    assert sentinel_due(e, store, 4, START, plan) == sentinel_run(e, 4, START)
    assert [r.repetition for r in sentinel_runs_left(e, store, 4)] == [1, 2]
    put(sentinel_store(store, 4), sentinel_run(e, 4, START))
    assert sentinel_due(e, store, 4, START, plan) is None
    for r in plan:
        put(store, r)
    assert sentinel_due(e, store, 4, END, plan) == sentinel_run(e, 4, END)


def test_an_opening_run_that_failed_is_not_retried_once_the_design_started(tmp_path: Path) -> None:
    e = spec({"cell": {"cache_pct": 100}}, repetitions=1)
    store = ResultStore(tmp_path)
    plan = e.plan(4)
    put(sentinel_store(store, 4), sentinel_run(e, 4, START), status="failed")
    put(store, plan[0])
    assert sentinel_due(e, store, 4, START, plan) is None
    assert sentinel_runs_left(e, store, 4) == []
    for r in plan[1:]:
        put(store, r)
    assert sentinel_due(e, store, 4, END, plan) is None


def test_a_campaign_resumed_after_its_first_runs_gets_no_sentinel(tmp_path: Path) -> None:
    e = spec({"cell": "first"})
    store = ResultStore(tmp_path)
    plan = e.plan(3)
    put(store, plan[0])
    assert sentinel_due(e, store, 3, START, plan) is None
    assert sentinel_runs_left(e, store, 3) == []
    for r in plan[1:]:
        put(store, r)
    assert sentinel_due(e, store, 3, END, plan) is None  # an A/A pair split over sittings measures nothing


# -- the analysis ---------------------------------------------------------------------------------------

def frame(tps: list[tuple[int, str, float]]) -> pd.DataFrame:
    rows = [{"campaign": k, "position": p, "run_id": f"x-{k}-{p}", "cell_id": "x", "status": "ok", "tps": t,
             "started_utc": f"2026-01-{k:02d}T{'00' if p == 'start' else '12'}:00:00+00:00"} for k, p, t in tps]
    return pd.DataFrame(rows)


def test_drift_is_judged_against_the_run_sd() -> None:
    runs = frame([(1, "start", 100.0), (1, "end", 99.0), (2, "start", 100.0), (2, "end", 70.0)])
    d = drift_table(runs, 0.05)
    assert d["drift"].tolist() == ["no", "yes"]
    assert d.loc[1, "ratio"] == pytest.approx(0.7) and d.loc[1, "z"] == pytest.approx(math.log(0.7) / (0.05 * 2**0.5))
    assert drift_table(runs, None)["note"].tolist() == ["no run SD to judge the ratio against"] * 2
    half = frame([(1, "start", 100.0)])
    assert drift_table(half, 0.05)["note"].tolist() == ["no closing run"]


def test_a_small_drift_in_every_campaign_shows_over_the_campaigns() -> None:
    """The threads study's case: -11 % in each of two campaigns, run SD 3.96 %: neither flagged alone (p about
    0.03), together z = -3.0. Without drift the pooled z holds its level on synthetic campaigns."""
    runs = frame([(5, "start", 1256.26), (5, "end", 1113.34), (6, "start", 1289.58), (6, "end", 1145.75)])
    d = drift_table(runs, 0.0396)
    assert d["drift"].tolist() == ["no", "no"]
    pool = pooled_drift(d)
    assert pool is not None and pool.campaigns == 2 and pool.ratio == pytest.approx(0.887, abs=0.001)
    assert pool.z == pytest.approx(d["z"].sum() / math.sqrt(2)) and pool.p < 0.01
    assert pooled_drift(d.head(1)) is None
    rng = np.random.default_rng(11)
    rejected = []
    for _ in range(400):
        start = 100 * np.exp(rng.normal(0, 0.05, 3))
        end = 100 * np.exp(rng.normal(0, 0.05, 3))
        rows = [(k + 1, pos, float(v)) for k in range(3) for pos, v in (("start", start[k]), ("end", end[k]))]
        p = pooled_drift(drift_table(frame(rows), 0.05))
        assert p is not None
        rejected.append(p.p < 0.05)
    assert 0.02 < np.mean(rejected) < 0.09


def test_pettitt_finds_a_step_and_where_it_lies() -> None:
    x = np.array([0.0, 0.1, -0.1, 0.05, 1.0, 1.1, 0.9, 1.05])
    k, after = pettitt_statistic(x)
    assert after == 4 and k == 16  # every later value above every earlier one: 4 x 4
    k2, after2, p = pettitt(x, permutations=999)
    assert (k2, after2) == (k, after) and p < 0.05
    assert pettitt(x, permutations=999) == (k2, after2, p)  # seeded
    runs = frame([(1, "start", 100.0), (1, "end", 101.0), (2, "start", 99.0), (2, "end", 100.0),
                  (3, "start", 60.0), (3, "end", 61.0), (4, "start", 59.0), (4, "end", 60.0)])
    cp = change_point(runs, permutations=999)
    assert cp is not None and cp.significant and cp.where == "between campaigns 2 and 3"
    assert cp.ratio == pytest.approx(60 / 100, rel=0.02)
    assert change_point(runs.head(3)) is None


def test_pettitt_holds_its_level_and_has_power_on_synthetic_series() -> None:
    """Known answers: no shift -> rejections near alpha; a 4-SD step in the middle -> nearly always."""
    rng = np.random.default_rng(7)
    null = [pettitt(rng.normal(size=10), permutations=199, seed=i)[2] < 0.05 for i in range(150)]
    step = [pettitt(np.r_[rng.normal(size=5), rng.normal(size=5) + 4.0], permutations=199, seed=i)[2] < 0.05
            for i in range(60)]
    assert np.mean(null) < 0.12
    assert np.mean(step) > 0.9


def test_the_files_and_lines_of_a_results_directory(tmp_path: Path) -> None:
    e = spec({"cell": {"cache_pct": 100}})
    store = ResultStore(tmp_path)
    for k in (2, 3):
        sub = sentinel_store(store, k)
        put(sub, sentinel_run(e, k, START), started=f"2026-01-0{k}T00:00:00+00:00")
        put(sub, sentinel_run(e, k, END), started=f"2026-01-0{k}T12:00:00+00:00", tps_scale=0.5 if k == 3 else 1.0)
    for run, eps in ((sentinel_run(e, 3, START), 3300.0), (sentinel_run(e, 3, END), 2970.0)):  # campaign 3 probed
        write_json_atomic(sentinel_store(store, 3).raw / run.run_id / PROBE_FILE,
                          probe_record(f"dbmatrix-probe:cpu1\nevents per second: {eps}\n", directory="/d",
                                       medium="disk", cpus=2, when_utc="t"))
    runs = load_sentinel(tmp_path)
    assert runs["position"].tolist() == ["start", "end", "start", "end"]
    assert runs["probe_cpu_eps_1"].tolist()[2:] == [3300.0, 2970.0] and runs["probe_cpu_eps_1"][:2].isna().all()
    probed = drift_table(runs, 0.05)
    assert math.isnan(probed.loc[0, "probe_cpu_ratio"]) and probed.loc[1, "probe_cpu_ratio"] == pytest.approx(0.9)
    lines = write_sentinel(tmp_path, store.processed, 0.05)
    assert lines[0].startswith("sentinel A/A (") and "campaign 2: end/start 1.000" in lines[1]
    assert "campaign 3: end/start 0.500" in lines[2] and "drift at 0.01" in lines[2]
    assert lines[3].startswith("  over 2 campaigns (Stouffer, descriptive): end/start 0.707")
    assert "over 4 sentinel runs" in lines[4]
    assert (store.processed / "sentinel-drift.csv").is_file() and (store.processed / "sentinel.json").is_file()
    shutil.rmtree(tmp_path / "sentinel")
    assert write_sentinel(tmp_path, store.processed, 0.05) == []
    assert not (store.processed / "sentinel.csv").exists()
    assert sentinel_lines(load_sentinel(tmp_path), drift_table(load_sentinel(tmp_path), None), None) == []


def test_plan_runs_are_unchanged_by_a_sentinel() -> None:
    e = spec({"cell": "first"}, repetitions=1)
    plain = dataclasses.replace(e, campaign_sentinel=None)
    assert [r.run_id for r in e.plan(4)] == [r.run_id for r in plain.plan(4)]


def test_the_method_text_reads_the_counters_of_a_pooled_drift_only_where_it_shows(tmp_path: Path) -> None:
    """The paper's sentinel paragraph adds what the counters say for a study whose pooled drift has p < 0.05,
    and says when those campaigns ran without the platform probe; a study without such a drift gets none."""
    from dbmatrix.analyse.figure_data import StudyTables
    from dbmatrix.analyse.sentinel_mechanism import drift_ratios
    from dbmatrix.publish.method_text import sentinel_text

    def row(k: int, ratio: float, z: float, probe: tuple[float, float] | None = None) -> dict[str, Any]:
        a = {"tps": 1000.0, "window_s": 45.0, "host_cpu_busy_s": 85.0, "cache_lookups": 86.0 * 45000}
        b = {**a, "tps": 1000.0 * ratio, "cache_lookups": 86.0 * 45000 * ratio}
        if probe:
            a["probe_cpu_eps_1"], b["probe_cpu_eps_1"] = probe
        return {"campaign": k, "start_tps": 1000.0, "end_tps": 1000.0 * ratio, "ratio": ratio, "z": z,
                "p": 2 * (1 - 0.5 * (1 + math.erf(abs(z) / 2**0.5))), "drift": "no", "note": "",
                **drift_ratios(a, b), "reading": ""}

    def study(name: str, rows: list[dict[str, Any]]) -> StudyTables:
        e = dataclasses.replace(spec({"cell": {"cache_pct": 100}}), name=name)
        store = ResultStore(tmp_path / name)
        store.processed.mkdir(parents=True)
        pd.DataFrame(rows).to_csv(store.processed / "sentinel-drift.csv", index=False)
        return StudyTables(e, store)

    drifting = study("threads-x", [row(5, 0.886, -2.14), row(6, 0.888, -2.09)])
    steady = study("steady-x", [row(1, 1.01, 0.2), row(2, 0.99, -0.2)])
    text = sentinel_text([drifting, steady])["sentinelText"]
    assert "\\texttt{threads-x}: CPU use $+0.0$\\,\\%, host CPU per transaction $+12.7$\\,\\%" in text
    assert "the same work per transaction took more CPU time" in text and "no platform probe" not in text
    assert "The campaigns of \\texttt{threads-x} ran before the platform probe" in text
    assert "\\texttt{steady-x}:" not in text
    probed = study("probed-x", [row(1, 0.886, -2.14, (3300.0, 2950.0)), row(2, 0.888, -2.09, (3300.0, 2950.0))])
    text = sentinel_text([probed])["sentinelText"]
    assert "the fixed-work probe ran slower too ($-10.6$\\,\\% events/s): the platform" in text
    assert "ran before the platform probe" not in text
    assert "What the sentinel runs' own counters say" not in sentinel_text([steady])["sentinelText"]
