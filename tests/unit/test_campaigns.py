"""Campaigns as a level of replication: run ids, plan order per campaign, choosing auto/new/last/K,
legacy manifests as campaign 1, the campaign record and load_runs' campaign and boot_id columns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dbmatrix.record import RunRecord
from dbmatrix.run.campaigns import (
    CampaignState,
    campaign_states,
    choose,
    merge_record,
    parse_option,
    run_id,
    shared,
)
from dbmatrix.run.matrix import adaptive_runs, campaign_states_of, choose_campaign, study_status
from dbmatrix.spec.experiment import MAX_CAMPAIGNS, Experiment, PlannedRun, SpecError, load_spec
from dbmatrix.store import MANIFEST, ResultStore, write_json_atomic
from dbmatrix.study import Study, load_studies, load_study

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "specs" / "smoke.yaml"
RW = ROOT / "tests" / "fixtures" / "sysbench" / "run_oltp_read_write_innodb_t2_5s.stdout"
BOOT_A = "1a2b3c4d-0000-4000-8000-000000000001"
BOOT_B = "9f8e7d6c-0000-4000-8000-000000000002"


def smoke() -> Experiment:
    return load_spec(SMOKE)


def put(store: ResultStore, run: PlannedRun, status: str = "ok", *, campaign_key: bool = True,
        boot: str | None = BOOT_A) -> None:
    """A committed run as the runner writes it (campaign 1 without the key: a manifest from before)."""
    staging = store.begin_run(run.run_id)
    shutil.copyfile(RW, staging / "sysbench.out")
    m: dict[str, Any] = {
        "run_id": run.run_id, "experiment": "cache-sweep-smoke", "cell_id": run.cell.cell_id,
        "cell": run.cell.levels(), "repetition": run.repetition, "block": run.block, "order": run.order,
        "host": "localhost", "status": status, "started_utc": f"2026-01-0{run.campaign}T00:00:00+00:00"}
    if boot is not None:
        m["boot_id"] = boot
    if campaign_key:
        store.commit_run(staging, RunRecord.from_dict({**m, "campaign": run.campaign}))
    else:  # as written before campaigns, read through the record's migrations
        write_json_atomic(staging / MANIFEST, {"schema": 1, **m})
        staging.rename(store.raw / run.run_id)


def study_in(tmp_path: Path) -> Study:
    return load_study("smoke", spec=SMOKE, results_dir=tmp_path / "res")


# -- run ids and plans ---------------------------------------------------------------------------


def test_campaign_1_keeps_the_old_run_ids_and_order_later_campaigns_get_their_own() -> None:
    exp = smoke()
    one = exp.plan()
    assert exp.plan(campaign=1) == one
    assert [r.run_id for r in one] == [f"{r.cell.cell_id}-r{r.repetition}" for r in one]
    assert all(r.campaign == 1 for r in one)
    two = exp.plan(campaign=2)
    assert [r.run_id for r in two] == [f"{r.cell.cell_id}-r{r.repetition}-camp2" for r in two]
    assert {r.run_id for r in one}.isdisjoint(r.run_id for r in two)
    assert sorted(r.cell.cell_id for r in one) == sorted(r.cell.cell_id for r in two)  # same cells
    for r in [*one, *two]:
        assert run_id(r.cell.cell_id, r.repetition, r.campaign) == r.run_id
    with pytest.raises(ValueError, match="campaign must be >= 1"):
        exp.plan(campaign=0)


def test_each_campaign_shuffles_with_its_own_seed() -> None:
    import dataclasses

    exp = dataclasses.replace(smoke(), repetitions=3)
    orders = {k: [r.cell.cell_id for r in exp.plan(k)] for k in range(1, 7)}
    assert orders[1] == [r.cell.cell_id for r in exp.plan()]  # deterministic
    assert orders[2] == [r.cell.cell_id for r in exp.plan(2)]
    assert len({tuple(o) for o in orders.values()}) > 1  # 2 cells x 3 blocks: not all campaigns alike
    # blocks stay complete: every cell once per block, in every campaign
    for k in orders:
        runs = exp.plan(k)
        for b in range(1, 4):
            assert sorted(r.cell.cell_id for r in runs if r.block == b) == sorted(c.cell_id for c in exp.cells())


def test_sysbench_seeds_differ_between_campaigns() -> None:
    from dbmatrix.run.session import sysbench_seed

    exp = smoke()
    a, b = exp.plan(1)[0], next(r for r in exp.plan(2) if r.cell == exp.plan(1)[0].cell)
    assert sysbench_seed(exp.seed, a.run_id) != sysbench_seed(exp.seed, b.run_id)


# -- choosing ------------------------------------------------------------------------------------


def states(*spec: tuple[int, int, int]) -> list[CampaignState]:
    return [CampaignState(k, planned, ok, boot_ids=(BOOT_A,)) for k, planned, ok in spec]


def test_parse_option_names_the_allowed_values() -> None:
    assert parse_option("AUTO") == "auto" and parse_option("3") == 3 and parse_option(2) == 2
    for bad in ("0", "-1", "first", "", 0):
        with pytest.raises(ValueError, match="allowed: auto, new, last or a campaign number"):
            parse_option(bad)


def test_choose_without_campaigns_starts_campaign_1() -> None:
    for opt in ("auto", "new", "last", 1):
        c = choose(opt, [])
        assert (c.number, c.new) == (1, True)
    with pytest.raises(ValueError, match="2 does not exist"):
        choose(2, [])


def test_choose_auto_new_last_and_k() -> None:
    complete, incomplete = states((1, 4, 4)), states((1, 4, 4), (2, 4, 1))
    c = choose("auto", complete)
    assert (c.number, c.new) == (2, True)
    assert c.line() == "campaign 2 (new: auto: campaign 1 complete on boot 1a2b3c4d)"
    assert (choose("auto", incomplete).number, choose("auto", incomplete).new) == (2, False)
    assert "incomplete, 1/4 runs ok" in choose("auto", incomplete).reason
    assert (choose("last", complete).number, choose("last", complete).new) == (1, False)
    assert "nothing to run" in choose("last", complete).reason
    assert (choose("last", incomplete).number, choose("new", incomplete).number) == (2, 3)
    assert choose("new", incomplete).new
    assert (choose(1, incomplete).number, choose(1, incomplete).new) == (1, False)
    assert (choose(3, incomplete).number, choose(3, incomplete).new) == (3, True)  # the next number
    with pytest.raises(ValueError, match="existing: 1, 2; the next is 3"):
        choose(5, incomplete)
    # a campaign whose plan is empty is never complete; one with failed runs is not either
    assert not CampaignState(1, 0, 0).complete and not CampaignState(1, 2, 1, failed=1).complete


def test_auto_starts_no_campaign_beyond_the_registered_maximum() -> None:
    """A study judged by campaign looks (at most MAX_CAMPAIGNS): auto resumes an incomplete last campaign,
    starts none past the maximum; new or the next number still can, saying the rule's alpha does not cover it."""
    full = states(*[(k, 4, 4) for k in range(1, MAX_CAMPAIGNS + 1)])
    c = choose("auto", full, MAX_CAMPAIGNS)
    assert (c.number, c.new) == (MAX_CAMPAIGNS, False)
    assert f"the registered maximum of {MAX_CAMPAIGNS} campaigns is reached, nothing to run" in c.reason
    assert choose("auto", full).number == MAX_CAMPAIGNS + 1  # no maximum: a study without looks goes on
    short = states(*[(k, 4, 4) for k in range(1, MAX_CAMPAIGNS)])
    assert (choose("auto", short, MAX_CAMPAIGNS).number, choose("auto", short, MAX_CAMPAIGNS).new) == \
        (MAX_CAMPAIGNS, True)  # the last look is still to run
    last_open = states(*[(k, 4, 4 if k < MAX_CAMPAIGNS else 2) for k in range(1, MAX_CAMPAIGNS + 1)])
    assert "resuming" in choose("auto", last_open, MAX_CAMPAIGNS).reason
    for forced in (choose("new", full, MAX_CAMPAIGNS), choose(MAX_CAMPAIGNS + 1, full, MAX_CAMPAIGNS)):
        assert (forced.number, forced.new) == (MAX_CAMPAIGNS + 1, True)
        assert "beyond the registered maximum" in forced.reason and "outside the alpha" in forced.reason
    assert "beyond" not in choose("new", short, MAX_CAMPAIGNS).reason


def test_the_runner_and_the_rule_read_one_maximum() -> None:
    from dbmatrix.analyse.claims.verdicts import RULE

    assert RULE["looks"]["max_campaigns"] == MAX_CAMPAIGNS
    paper = {s.experiment.name: s.experiment.campaign_maximum for s in load_studies("paper", for_run=False)}
    assert paper and set(paper.values()) == {MAX_CAMPAIGNS}  # every paper study runs campaigns as looks
    assert {s.experiment.campaign_maximum for s in load_studies("quick", for_run=False)} == {None}


def test_states_from_manifests_legacy_manifests_are_campaign_1() -> None:
    planned = {1: ["a-r1", "b-r1"], 2: ["a-r1-camp2", "b-r1-camp2"]}
    ident = {"experiment": "e", "cell_id": "c", "cell": {}, "repetition": 1, "host": "h"}
    ms = [RunRecord.from_dict({**ident, **m}) for m in (
        {"run_id": "a-r1", "status": "ok", "host_facts": {"boot_id": BOOT_A}},  # legacy: no key
        {"run_id": "b-r1", "status": "ok"},
        {"run_id": "a-r1-camp2", "status": "failed", "campaign": 2, "boot_id": BOOT_B})]
    assert [m.campaign for m in ms] == [1, 1, 2]
    s1, s2 = campaign_states(planned, ms)
    assert (s1.number, s1.complete, s1.boot_ids) == (1, True, (BOOT_A,))
    assert (s2.number, s2.complete, s2.ok, s2.failed, s2.boot_ids) == (2, False, 0, 1, (BOOT_B,))


def test_choose_campaign_from_a_results_directory(tmp_path: Path) -> None:
    study = study_in(tmp_path)
    exp, store = study.experiment, study.store
    assert choose_campaign(study, "auto").number == 1
    first, second = exp.plan(1)
    put(store, first, campaign_key=False, boot=None)  # written before campaigns existed
    assert [(s.number, s.ok, s.planned) for s in campaign_states_of(store, exp)] == [(1, 1, 2)]
    assert (choose_campaign(study, "auto").number, choose_campaign(study, "auto").new) == (1, False)
    put(store, second, campaign_key=False, boot=None)
    assert choose_campaign(study, "last").number == 1
    c = choose_campaign(study, "auto")
    assert (c.number, c.new) == (2, True)
    put(store, exp.plan(2)[0], boot=BOOT_B)
    assert (choose_campaign(study, "auto").number, choose_campaign(study, "new").number) == (2, 3)
    with pytest.raises(SpecError, match="campaign: 7 does not exist"):
        choose_campaign(study, 7)
    st = study_status(study)
    assert (st.campaign, st.planned, st.ok, st.pending) == (2, 2, 1, 1)
    assert [(r["campaign"], r["complete"], r["boot_ids"]) for r in st.campaigns] == \
        [(1, True, []), (2, False, [BOOT_B])]
    assert st.next_auto.startswith("campaign 2 (continued")


def test_load_runs_has_campaign_and_boot_id(tmp_path: Path) -> None:
    study = study_in(tmp_path)
    exp, store = study.experiment, study.store
    put(store, exp.plan(1)[0], campaign_key=False, boot=None)
    put(store, exp.plan(1)[1], boot=BOOT_A)
    put(store, exp.plan(2)[0], boot=BOOT_B)
    runs = store.load_runs().set_index("run_id")
    assert runs["campaign"].dtype.kind == "i"
    assert runs["campaign"].to_dict() == {exp.plan(1)[0].run_id: 1, exp.plan(1)[1].run_id: 1,
                                          exp.plan(2)[0].run_id: 2}
    assert runs.loc[exp.plan(2)[0].run_id, "boot_id"] == BOOT_B
    assert pd.isna(runs.loc[exp.plan(1)[0].run_id, "boot_id"])


def test_adaptive_repetitions_stay_within_their_campaign(tmp_path: Path) -> None:
    import dataclasses

    from dbmatrix.spec.experiment import Noise

    study = study_in(tmp_path)
    exp = dataclasses.replace(study.experiment, noise=Noise(max_cv_pct=10.0, target_halfwidth_pct=0.001,
                                                          max_repetitions=3))
    store = study.store
    one = exp.plan(1)[0]
    put(store, one)  # campaign 1: two identical repetitions of one cell, so its CI is already narrow
    put(store, dataclasses.replace(one, repetition=2, block=2))
    for r in exp.plan(2):  # campaign 2: one repetition of each cell, so each needs a second
        put(store, r, boot=BOOT_B)
    extra = adaptive_runs(store, exp, 2)
    assert sorted(r.run_id for r in extra) == sorted(f"{c.cell_id}-r2-camp2" for c in exp.cells())
    assert all(r.campaign == 2 and r.adaptive for r in extra)
    assert adaptive_runs(store, exp, 1) == []  # campaign 1's cell is done; campaign 2's runs do not count


# -- the record ----------------------------------------------------------------------------------


def record(old: dict[str, Any] | None, *, session: str, now: str, boot: str, datasets: list[dict[str, Any]],
           state: CampaignState, k: int = 1) -> dict[str, Any]:
    return merge_record(old, campaign=k, experiment="e", campaign_started_utc=session,
                        session_started_utc=session, now_utc=now, hosts={"localhost": boot}, datasets=datasets,
                        git={"commit": "abc", "dirty": False}, spec_digest="d1", state=state)


def test_record_says_boots_datasets_reuse_and_finish() -> None:
    ds_old = {"key": "k1", "host": "localhost", "snapshot": "/w/snapshots/k1", "created_utc": "2026-01-01T09:00:00+00:00"}
    ds_new = {"key": "k2", "host": "localhost", "snapshot": "/w/snapshots/k2", "created_utc": "2026-01-01T10:00:05+00:00"}
    r1 = record(None, session="2026-01-01T10:00:00+00:00", now="2026-01-01T10:05:00+00:00", boot=BOOT_A,
                datasets=[ds_new, ds_old], state=CampaignState(1, 4, 2))
    assert r1["started_utc"] == "2026-01-01T10:00:00+00:00" and r1["finished_utc"] is None
    assert not r1["complete"] and r1["boot_ids"] == [BOOT_A] and r1["hosts"] == {"localhost": [BOOT_A]}
    assert [(d["key"], d["reused"]) for d in r1["datasets"]] == [("k1", True), ("k2", False)]
    r2 = record(r1, session="2026-01-02T08:00:00+00:00", now="2026-01-02T08:03:00+00:00", boot=BOOT_B,
                datasets=[ds_new], state=CampaignState(1, 4, 4))
    assert r2["started_utc"] == r1["started_utc"] and r2["finished_utc"] == "2026-01-02T08:03:00+00:00"
    assert r2["complete"] and r2["hosts"] == {"localhost": [BOOT_A, BOOT_B]}  # spans a reboot
    assert len(r2["sessions"]) == 2 and r2["sessions"][1]["datasets"][0]["reused"] is True
    assert [d["reused"] for d in r2["datasets"]] == [True, False]  # the first use decides
    other = record(None, session="2026-01-03T08:00:00+00:00", now="2026-01-03T08:09:00+00:00", boot=BOOT_B,
                   datasets=[ds_new], state=CampaignState(2, 4, 4), k=2)
    assert shared(r2, other) == {"boot_ids": [BOOT_B],
                                 "datasets": ["localhost:k2@2026-01-01T10:00:05+00:00"]}
    json.dumps(r2)  # plain data


def test_store_lists_campaign_records(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    assert store.campaigns() == []
    for k in (2, 1, 10):
        store.write_campaign_record({"campaign": k})
    assert [r["campaign"] for r in store.campaigns()] == [1, 2, 10]
    assert store.campaign_record(2) == {"campaign": 2} and store.campaign_record(3) is None
