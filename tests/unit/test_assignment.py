"""Hosts as blocks of the design: whole replicate blocks per host, seeded; whole unstarted blocks move
off a lost host; the plan's estimate divides the work over the hosts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from dbmatrix.run.matrix import format_duration, summarize_plan
from dbmatrix.spec.assignment import (
    assign_blocks,
    assign_runs,
    assignment_notes,
    per_host_counts,
    reassign_blocks,
)
from dbmatrix.spec.experiment import load_spec, parse_experiment

ROOT = Path(__file__).resolve().parents[2]
EXP = parse_experiment({"experiment": "assign", "factors": {"cache_pct": [25, 50, 100], "threads": [1, 4]},
                        "repetitions": 6, "seed": 11, "warmup_s": 1, "measure_s": 10})


@pytest.mark.parametrize("hosts", [["a", "b"], ["a", "b", "c"], ["a", "b", "c", "d"]])
def test_every_host_measures_whole_blocks_and_every_cell_equally_often(hosts: list[str]) -> None:
    blocks = assign_blocks(range(1, EXP.repetitions + 1), hosts, EXP.seed)
    counts = per_host_counts(blocks, hosts)
    assert sum(counts.values()) == 6 and max(counts.values()) - min(counts.values()) <= 1
    runs = EXP.plan()
    where = assign_runs(runs, blocks, hosts)
    for b in range(1, 7):  # a block is never split
        assert len({where[r.run_id] for r in runs if r.block == b}) == 1
    for h in hosts:  # each host: every cell the same number of times (host orthogonal to the factors)
        per_cell = Counter(r.cell.cell_id for r in runs if where[r.run_id] == h)
        assert len(per_cell) == len(EXP.cells()) and len(set(per_cell.values())) == 1


def test_assignment_is_seeded_and_deterministic() -> None:
    a = assign_blocks(range(1, 7), ["a", "b"], 11)
    assert a == assign_blocks(range(1, 7), ["a", "b"], 11)
    others = {tuple(sorted(assign_blocks(range(1, 7), ["a", "b"], s).items())) for s in range(20)}
    assert len(others) > 1  # the seed decides which blocks go where
    assert assign_blocks(range(1, 4), ["solo"], 11) == {1: "solo", 2: "solo", 3: "solo"}


def test_fewer_blocks_than_hosts_is_said() -> None:
    blocks = assign_blocks([1], ["a", "b"], 3)
    notes = assignment_notes(blocks, ["a", "b"])
    assert len(notes) == 1 and "take(s) no run" in notes[0]


def test_reassignment_moves_whole_unstarted_blocks_and_keeps_started_ones() -> None:
    blocks = {1: "a", 2: "b", 3: "a", 4: "b", 5: "a", 6: "b"}
    new, moves, stuck = reassign_blocks(blocks, lost={"a"}, started={1}, live=["b"])
    assert moves == {3: "b", 5: "b"} and stuck == [1] and new[1] == "a"
    # over several live hosts: to the least loaded, in order
    blocks = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c", 7: "a"}
    _, moves, stuck = reassign_blocks(blocks, lost={"a"}, started=set(), live=["b", "c"])
    assert moves == {1: "b", 4: "c", 7: "b"} and stuck == []
    # nobody left: nothing moves, everything is stuck
    _, moves, stuck = reassign_blocks({1: "a"}, lost={"a"}, started=set(), live=[])
    assert moves == {} and stuck == [1]


def test_plan_estimate_divides_the_work_over_the_hosts() -> None:
    exp = load_spec(ROOT / "specs" / "full.yaml")
    one = summarize_plan(exp, hosts=["h1"])
    four = summarize_plan(exp, hosts=["h1", "h2", "h3", "h4"])
    assert one.estimated_wall_s == one.estimated_s == summarize_plan(exp).estimated_s
    assert sum(four.runs_per_host.values()) == len(one.runs)
    # each host prepares its own datasets: machine time grows a little, wall time drops to about a quarter
    assert four.estimated_s >= one.estimated_s
    assert four.estimated_wall_s == max(four.estimated_s_per_host.values())
    assert four.estimated_wall_s < 0.5 * one.estimated_wall_s
    d = four.as_dict()
    assert set(d) >= {"estimated_wall_s", "estimated_s_per_host", "runs_per_host", "estimated_machine_s"}
    print(f"full spec: 1 host {format_duration(one.estimated_wall_s)}; 4 hosts wall "
          f"{format_duration(four.estimated_wall_s)}, per host "
          + ", ".join(f"{h} {format_duration(v)}" for h, v in four.estimated_s_per_host.items()))
    assert [r["host"] for r in four.table()][:1] and "host" not in one.table()[0]


def test_lost_hosts_are_read_back_from_the_fleet_events_and_said(tmp_path: Path) -> None:
    import json

    from dbmatrix.run.matrix import lost_hosts, lost_hosts_message
    from dbmatrix.run.reports import RunReport
    from dbmatrix.store import ResultStore

    store = ResultStore(tmp_path)
    events = [{"host": "h1", "event": "host_ready"}, {"host": "h2", "event": "host_lost", "reason": "setup failed"},
              {"host": None, "event": "line_stopped"}]
    (tmp_path / "fleet-events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert lost_hosts(store) == {"h2": "setup failed"}
    msg = lost_hosts_message(RunReport(1, "", 8, 0, lost_hosts={"h2": "setup failed"}, not_attempted=7))
    assert msg is not None and "h2 (setup failed)" in msg and "--allow-lost-hosts" in msg and "7 run(s)" in msg
    assert lost_hosts_message(RunReport(1, "", 3, 0, ok=3)) is None
    # back in the next run command: no longer lost
    with open(tmp_path / "fleet-events.jsonl", "a") as f:
        f.write(json.dumps({"host": "h2", "event": "host_ready"}) + "\n")
    assert lost_hosts(store) == {}
