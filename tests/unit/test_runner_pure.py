"""Tests of dbmatrix.run.matrix's pure parts: port parsing, seeds, plan summaries, plan binding."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.record import RunRecord
from dbmatrix.run.context import media_used
from dbmatrix.run.matrix import (
    DATASET_OVERHEAD_S,
    LOAD_ROWS_PER_S,
    format_duration,
    record_plan,
    summarize_plan,
    time_accounting,
)
from dbmatrix.run.ports import parse_listening_ports
from dbmatrix.run.session import RunFailed, open_loop_rate, sysbench_seed
from dbmatrix.run.standalone import Standalone
from dbmatrix.spec.experiment import Experiment, SpecError, parse_experiment
from dbmatrix.store import ResultStore

RUN_OVERHEAD_S = Standalone.overhead_s

# Real `ss -Htln` output (iproute2 6.1): IPv4, IPv6 with brackets, wildcard, scoped address.
SS = """\
LISTEN 0      128          0.0.0.0:2024       0.0.0.0:*
LISTEN 0      4096   127.0.0.53%lo:53         0.0.0.0:*
LISTEN 0      80         127.0.0.1:13306      0.0.0.0:*
LISTEN 0      128             [::]:22            [::]:*
LISTEN 0      511                *:80               *:*
LISTEN 0      4096           [::1]:631           [::]:*
"""


def test_parse_listening_ports() -> None:
    assert parse_listening_ports(SS) == {2024, 53, 13306, 22, 80, 631}


def test_parse_listening_ports_ignores_junk() -> None:
    assert parse_listening_ports("") == set()
    assert parse_listening_ports("State Recv-Q Send-Q Local Address:Port Peer Address:Port\n") == set()
    assert parse_listening_ports("LISTEN 0 128 [::]:*  [::]:*\nshort line\n") == set()


def test_sysbench_seed() -> None:
    seeds = {sysbench_seed(20261122, f"cell-{i}-r{r}") for i in range(200) for r in (1, 2, 3)}
    assert all(1 <= s <= 2**31 - 1 for s in seeds)
    assert len(seeds) == 600  # distinct per run
    assert sysbench_seed(1, "a-r1") == sysbench_seed(1, "a-r1")
    assert sysbench_seed(1, "a-r1") != sysbench_seed(2, "a-r1")
    # stable across processes and Python versions (crc32, not hash())
    assert sysbench_seed(7, "x") == zlib.crc32(b"7:x") % (2**31 - 1) + 1


def spec(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "experiment": "runner-test",
        "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 30000},
        "factors": {"cache_pct": [25, 100], "compression": ["none", "lz4"], "threads": [2, 4]},
        "repetitions": 2, "seed": 11, "warmup_s": 5, "measure_s": 20,
        "baseline": {"cache_pct": 100},
    }
    raw.update(over)
    return raw


def exp(**over: Any) -> Experiment:
    return parse_experiment(spec(**over))


def test_summarize_plan_counts_and_estimate() -> None:
    e = exp()
    s = summarize_plan(e)
    assert [r.run_id for r in s.runs] == [r.run_id for r in e.plan()]
    assert len(s.runs) == 8 * 2
    assert s.datasets == ["innodb-b16k-lz4-oltp-2x30000", "innodb-b16k-none-oltp-2x30000"]
    more = summarize_plan(exp(repetitions=3))
    # one more replicate block costs one more round of every cell, nothing else
    assert more.estimated_s - s.estimated_s == pytest.approx(8 * (5 + 20 + RUN_OVERHEAD_S))
    assert s.estimated_s > len(s.runs) * (5 + 20)  # at least the measured time
    table = s.table()
    assert table[0]["order"] == 1 and set(table[0]) >= {"order", "block", "run_id", "engine", "cache_pct"}


def test_summarize_plan_datasets_cost_and_prepared() -> None:
    e = exp()
    full = summarize_plan(e)
    one_prepared = summarize_plan(e, prepared={"innodb-b16k-none-oltp-2x30000"})
    assert one_prepared.datasets == ["innodb-b16k-lz4-oltp-2x30000"]
    assert full.estimated_s - one_prepared.estimated_s == pytest.approx(
        DATASET_OVERHEAD_S + 2 * 30000 / LOAD_ROWS_PER_S)
    pending = e.plan()[:3]
    partial = summarize_plan(e, pending=pending)
    assert partial.runs == pending
    assert partial.estimated_s < full.estimated_s
    assert summarize_plan(e, pending=[]).estimated_s == 0


def test_bigger_tables_take_longer_to_prepare() -> None:
    small = summarize_plan(exp())
    big = summarize_plan(exp(workload={"name": "oltp_read_write", "tables": 2, "table_size": 3_000_000}))
    assert big.estimated_s > small.estimated_s


@pytest.mark.parametrize("seconds,expected", [
    (0, "0m00s"), (59.4, "0m59s"), (59.6, "1m00s"), (61, "1m01s"), (3599.6, "1h00m00s"),
    (3661, "1h01m01s"), (36000, "10h00m00s"),
])
def test_format_duration(seconds: float, expected: str) -> None:
    assert format_duration(seconds) == expected


def test_record_plan_writes_plan_json(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "data")
    e = exp()
    record_plan(store, e)
    plan = json.loads((store.root / "plan.json").read_text())
    assert plan["experiment"] == "runner-test"
    assert plan["spec_digest"] == e.digest()
    assert plan["seed"] == 11
    assert plan["spec"]["factors"]["cache_pct"] == [25, 100]
    assert [o["run_id"] for o in plan["order"]] == [r.run_id for r in e.plan()]
    assert [o["order"] for o in plan["order"]] == list(range(1, 17))
    assert "created_utc" in plan


def test_record_plan_same_spec_is_a_no_op(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    record_plan(store, exp())
    before = (tmp_path / "plan.json").read_bytes()
    record_plan(store, exp())
    assert (tmp_path / "plan.json").read_bytes() == before


def test_record_plan_refuses_a_changed_spec(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    record_plan(store, exp())
    before = (tmp_path / "plan.json").read_bytes()
    changed = exp(measure_s=21)
    with pytest.raises(SpecError) as ei:
        record_plan(store, changed)
    msg = str(ei.value)
    assert msg.startswith("spec:") and "different spec" in msg
    assert changed.digest() in msg and exp().digest() in msg
    assert (tmp_path / "plan.json").read_bytes() == before


def _commit(store: ResultStore, run_id: str, cell_id: str, tps: float | None, status: str = "ok",
            steps: dict[str, float] | None = None) -> None:
    staging = store.begin_run(run_id)
    store.commit_run(staging, RunRecord(run_id=run_id, experiment="e", cell_id=cell_id, cell={}, repetition=1,
                                        host="localhost", status=status, summary={"tps": tps}, steps=steps or {}))


def test_open_loop_rate_is_the_fraction_of_the_twins_mean(tmp_path: Path) -> None:
    e = exp(factors={"rate_fraction": ["closed", 0.5]}, repetitions=2)
    open_cell = next(c for c in e.cells() if c.open_loop)
    twin = open_cell.closed_loop_twin().cell_id
    store = ResultStore(tmp_path)
    with pytest.raises(RunFailed, match=f"no completed closed-loop run of {twin}"):
        open_loop_rate(store, open_cell)
    _commit(store, f"{twin}-r1", twin, 1000.0)
    _commit(store, f"{twin}-r2", twin, 1200.0)
    _commit(store, f"{twin}-r3", twin, None, status="failed")
    assert open_loop_rate(store, open_cell) == (550, 1100.0)


def test_media_used_lists_data_and_log_media() -> None:
    assert media_used(exp(factors={"medium": ["b", "a"], "log_medium": ["same", "c"]})) == ["a", "b", "c"]
    assert media_used(exp()) == ["disk"]


def test_time_accounting_sums_steps_and_preparation(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    _commit(store, "x-r1", "x", 1.0, steps={"measure": 10.0, "warmup": 5.0, "stop": 2.0})
    _commit(store, "x-r2", "x", 1.0, steps={"measure": 10.0, "warmup": 5.0, "stop": 1.0})
    ds = tmp_path / "datasets" / "localhost"
    ds.mkdir(parents=True)
    (ds / "k.json").write_text(json.dumps({"prepare_s": 7.0}))
    t = time_accounting(store)
    assert t["measure_s"] == 20.0 and t["prepare_datasets_s"] == 7.0 and t["total_s"] == 40.0
    assert t["measure_fraction"] == 0.5


def test_adaptive_runs_add_a_repetition_until_the_target_or_the_cap(tmp_path: Path) -> None:
    from test_analysis import SPEC as ANALYSIS_SPEC
    from test_analysis import build_store

    from dbmatrix.run.matrix import adaptive_runs

    tight = parse_experiment({**ANALYSIS_SPEC, "noise": {"target_halfwidth_pct": 0.01, "max_repetitions": 4}})
    store, _ = build_store(tmp_path / "a", tight)
    extra = adaptive_runs(store, tight)
    assert sorted(r.run_id for r in extra) == sorted(f"{c.cell_id}-r4" for c in tight.cells())
    assert all(r.adaptive and r.repetition == 4 for r in extra)
    capped = parse_experiment({**ANALYSIS_SPEC, "noise": {"target_halfwidth_pct": 0.01, "max_repetitions": 3}})
    assert adaptive_runs(store, capped) == []  # the cap is reached
    loose = parse_experiment({**ANALYSIS_SPEC, "noise": {"target_halfwidth_pct": 90, "max_repetitions": 4}})
    assert adaptive_runs(store, loose) == []  # every cell meets the target
