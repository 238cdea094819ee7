"""Repetitions until decided for real (dbmatrix.decide through run_study's next_round, as
``dbmatrix run --until-decided --budget`` wires it): a 2x2 InnoDB study (buffer pool 25/100 % x 1/2 threads,
2 planned blocks, a budget of 75 s) with three test-only claims on disjoint cells, picked by what they compare:
one decided once its interval is finite (a band no interval can miss; sources name both kinds a cache x
threads study may be), one that stays open (a band of +-0.01 %), one the spec cannot
test (a MyRocks claim). Only the open claim's cells get blocks; the loop stops at decision, the budget or its
looks; the log and the campaign record say what happened; the claims table then judges at the final look."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml
from tests.integration.factory import study_from

from dbmatrix import paths
from dbmatrix.analyse.claims import Claim, claims_evidence, evaluate
from dbmatrix.analyse.claims.looks import claim_cells
from dbmatrix.decide import UntilDecided, parse_duration
from dbmatrix.run.matrix import run_study
from dbmatrix.steps import analyse_study, study_tables

pytestmark = pytest.mark.integration

DECIDED = Claim("testWideAtOne", "999", "test", "any buffer pool effect at 1 thread", "tps", (1e-9, 1e9),
                test="within", factor="cache_pct", a="max", b="min", at={"threads": 1}, sources=("storage", "threads"))
OPEN = Claim("testNarrowAtTwo", "999", "test", "a buffer pool effect of exactly 0 at 2 threads", "tps",
             (0.9999, 1.0001), test="within", factor="cache_pct", a="max", b="min", at={"threads": 2},
             sources=("storage", "threads"))
UNTESTABLE = Claim("testMyrocks", "999", "test", "a MyRocks claim", "tps", (1.0, 2.0), factor="cache_pct",
                   a="max", b="min", at={"engine": "myrocks"}, sources=("storage", "threads"))


def test_blocks_go_only_to_the_open_claims_cells_and_the_log_says_so(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    raw = yaml.safe_load((paths.repo_root() / "specs" / "smoke.yaml").read_text())
    raw["factors"].update(cache_pct=[25, 100], threads=[1, 2])
    raw.update(experiment="until-decided-it", repetitions=2, warmup_s=1, measure_s=2)
    raw["workload"]["table_size"] = 5000
    study = study_from(tmp_path, raw)
    exp = study.experiment
    loop = UntilDecided(study, parse_duration("75s"), claims=[DECIDED, OPEN, UNTESTABLE])
    with caplog.at_level(logging.INFO, logger="dbmatrix"):
        counts = run_study(study, progress=False, campaign="auto", next_round=loop.next_round)
    lines = [r.getMessage() for r in caplog.records if r.name == "dbmatrix.decide"]
    print("\n".join(lines))
    assert counts.failed == 0

    log = [json.loads(x) for x in loop.log_path(1).read_text().splitlines()]
    print("\n".join(json.dumps(e)[:400] for e in log))
    assert log[0]["event"] == "schedule" and log[-1]["event"] == "end"
    looks = [e for e in log if e["event"] == "look"]
    assert len(lines) == len(looks) + 1 and looks
    end = log[-1]
    assert end["reason"].startswith(("no claim open (", "budget", "the schedule's"))

    cells = {c.id: claim_cells(c, exp) for c in (DECIDED, OPEN, UNTESTABLE)}
    assert cells["testWideAtOne"] and cells["testNarrowAtTwo"] and not cells["testWideAtOne"] & cells["testNarrowAtTwo"]
    assert not cells["testMyrocks"]
    decided_look = None
    for e in looks:
        states = {c["id"]: c["state"] for c in e["claims"]}
        assert states["testMyrocks"] == "not decided by runs"
        want = set().union(*(cells[i] for i, st in states.items() if st == "open"))
        assert set(e["cells_added"]) == (want if e["runs_added"] else set())  # only the open claims' cells
        if states["testWideAtOne"] == "decided" and decided_look is None:
            decided_look = e["look"]
    assert "testMyrocks" in end["not_decided_by_runs"]
    if decided_look is not None:  # decided: its cells got no block from then on
        assert end["decided_at"]["testWideAtOne"] == looks[decided_look - 1]["blocks"]
        assert not any(set(e["cells_added"]) & cells["testWideAtOne"] for e in looks[decided_look - 1:])
    if not end["reason"].startswith("no claim open"):
        assert set(end["projected_blocks"]) == {i for i, st in ((c["id"], c["state"]) for c in looks[-1]["claims"])
                                                if st == "open"}

    runs = study.store.load_runs()
    reps = runs.groupby("cell_id")["repetition"].count().to_dict()
    assert reps == {c.cell_id: 2 + sum(c.cell_id in e["cells_added"] for e in looks) for c in exp.cells()}
    rec = study.store.campaign_record(1)
    assert rec is not None and rec["until_decided"]["last_look"] == len(looks)
    assert rec["complete"]

    analyse_study(study)  # as `dbmatrix analyse` would: the campaign record's final look reaches the table
    table = evaluate(claims_evidence(study_tables([study])), [DECIDED, OPEN, UNTESTABLE]).claims
    basis = table.set_index("id")["basis"]
    assert f"alpha spending over {log[0]['schedule']['looks']} looks" in basis["testWideAtOne"]
    assert f"(look {len(looks)}:" in basis["testWideAtOne"]

    # what deciding cost, from this real log and the run records (analyse.claims.costs)
    from dbmatrix.analyse.claims.costs import study_costs

    costs, summary = study_costs(exp.name, study.store)
    by_id = costs.set_index("claim")
    for cid in ("testWideAtOne", "testNarrowAtTwo"):
        through = end["decided_at"].get(cid, looks[-1]["blocks"])
        assert by_id.loc[cid, "runs"] == int(runs[runs["cell_id"].isin(cells[cid]) & (runs["block"] <= through)]
                                             .shape[0])
        assert by_id.loc[cid, "run_s"] > 0
    assert summary.iloc[0]["runs"] == len(runs) and summary.iloc[0]["looks"] == len(looks)
    assert summary.iloc[0]["stopped"] == end["reason"]
