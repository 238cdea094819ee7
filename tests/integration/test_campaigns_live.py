"""Campaigns through the command line: the smoke spec run twice with `--campaign auto` into one results
directory gives two complete campaigns (the second's run ids end in -camp2), each with its record on this
boot, the second restoring the snapshots the first prepared (the default ``dataset_load: reuse``; campaigns
that load afresh are tests/integration/test_fresh_datasets_live.py); `--campaign last` afterwards runs
nothing. The spec's A/A sentinel (from campaign 2 on) runs at the start and end of campaign 2, through the
study's run path, and never enters its records; the platform probe runs after each of its runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbmatrix import paths
from dbmatrix.analyse.campaign_records import WITHIN_SESSION, independence, summaries
from dbmatrix.analyse.sentinel import load_sentinel
from dbmatrix.store import PROBE_FILE, ResultStore

pytestmark = pytest.mark.integration


def dbmatrix_run(workdir: Path, results: Path, campaign: str) -> tuple[str, dict[str, Any]]:
    """`dbmatrix run` of the smoke spec cut to one cell of 1 s (what is tested is the campaign logic)."""
    spec = workdir.parent / "one-cell.yaml"
    if not spec.is_file():
        raw = yaml.safe_load((paths.repo_root() / "specs" / "smoke.yaml").read_text())
        raw["factors"]["cache_pct"] = 100
        raw["campaigns"] = {"sentinel": {"cell": "first", "from_campaign": 2}}
        spec.write_text(yaml.safe_dump({**raw, "measure_s": 1}))
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib"), "DBMATRIX_WORKDIR": str(workdir)}
    r = subprocess.run([sys.executable, "-m", "dbmatrix", "run", "--profile", "smoke", "--spec",
                        str(spec), "--results", str(results),
                        "--no-progress", "--campaign", campaign],
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    return r.stdout, json.loads(r.stdout.strip().splitlines()[-1])


def test_two_auto_invocations_make_two_campaigns_on_one_boot(tmp_path: Path) -> None:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    work, results = tmp_path / "w", tmp_path / "results"
    out1, c1 = dbmatrix_run(work, results, "auto")
    assert "campaign 1 (new: no campaign yet)" in out1
    assert (c1["campaign"], c1["failed"], c1["campaign_complete"]) == (1, 0, True) and c1["ok"] == c1["planned"] > 0
    out2, c2 = dbmatrix_run(work, results, "auto")
    assert f"campaign 2 (new: auto: campaign 1 complete on boot {boot[:8]})" in out2, out2
    assert (c2["campaign"], c2["already_done"], c2["failed"], c2["campaign_complete"]) == (2, 0, 0, True)
    assert c2["ok"] == c1["ok"]
    assert "sentinel start (" in out2 and "sentinel end (" in out2 and "sentinel" not in out1
    assert out2.index("sentinel start") < out2.index("sentinel end")

    store = ResultStore(results)
    runs = store.load_runs()
    assert sorted(runs["campaign"].unique().tolist()) == [1, 2]
    two = runs[runs["campaign"] == 2]
    assert len(two) == c2["ok"] and two["run_id"].str.endswith("-camp2").all()
    sentinel = ResultStore(results / "sentinel" / "campaign-2").load_runs()
    assert sentinel["repetition"].tolist() == [1, 2] and (sentinel["status"] == "ok").all()
    # (second resolution: a 1 s run and the next can start in the same second)
    assert sentinel["started_utc"].iloc[0] <= two["started_utc"].min() <= two["started_utc"].max() \
        <= sentinel["started_utc"].iloc[1]
    assert sentinel["started_utc"].iloc[0] < sentinel["started_utc"].iloc[1]
    assert not (results / "sentinel" / "campaign-1").exists()
    # after each sentinel run, the platform probe (server stopped): real sysbench and dd figures beside it
    assert out2.count("platform probe: CPU ") == 2, out2
    for run_id in sentinel["run_id"]:
        probe = json.loads((results / "sentinel" / "campaign-2" / "raw" / run_id / PROBE_FILE).read_text())
        assert probe["error"] is None and probe["cpu_eps_1"] > 0 and probe["cpu_eps_all"] > 0, probe
        assert 0 < probe["sync_write_ms"] < 1000 and probe["medium"] == "disk", probe
    assert load_sentinel(results)["probe_cpu_eps_1"].gt(0).all()
    assert not runs[runs["campaign"] == 1]["run_id"].str.contains("-camp").any()
    assert set(runs["boot_id"]) == {boot}
    seeds = {m.run_id: m.sysbench_seed for m in store.records()}
    assert len(set(seeds.values())) == len(seeds)  # every run, in either campaign, its own sysbench seed

    recs = store.campaigns()
    assert [r["campaign"] for r in recs] == [1, 2]
    assert (results / "campaigns" / "1.json").is_file() and (results / "campaigns" / "2.json").is_file()
    for r in recs:
        assert r["complete"] and r["finished_utc"] and r["boot_ids"] == [boot], r
        assert r["hosts"] == {"localhost": [boot]} and r["git"]["commit"] and r["spec_digest"]
        assert r["datasets"] and len(r["sessions"]) == 1
    assert recs[0]["finished_utc"] <= recs[1]["started_utc"]
    # the second campaign restored the snapshots the first one prepared (same workdir): a reader sees it
    assert all(d["reused"] for d in recs[1]["datasets"]) and not any(d["reused"] for d in recs[0]["datasets"])
    assert {(d["key"], d["created_utc"]) for d in recs[0]["datasets"]} == \
        {(d["key"], d["created_utc"]) for d in recs[1]["datasets"]}
    assert recs[1]["dataset_load"] == "reuse" and all(d["prepared_for"] is None for d in recs[1]["datasets"])
    assert independence(summaries(recs)).label == WITHIN_SESSION  # what reusing one boot's snapshots is worth

    out3, c3 = dbmatrix_run(work, results, "last")
    assert "campaign 2 (continued: last: campaign 2 complete" in out3 and "nothing to run" in out3
    assert (c3["campaign"], c3["ok"], c3["failed"], c3["already_done"]) == (2, 0, 0, c2["ok"])
    assert len(store.load_runs()) == len(runs)
