"""A fresh dataset load per campaign, for real: a one-cell smoke spec with ``dataset_load: per_campaign`` run
as two campaigns into one results directory (one work directory, so the first campaign's snapshot is still
on the host): the second campaign loads its dataset again (a new snapshot, created after the campaign
started, marked for campaign 2) and its record says so; resuming it (``--campaign last``) loads nothing. (The
default, ``dataset_load: reuse``, in which campaign 2 restores campaign 1's snapshot, is checked by
tests/integration/test_campaigns_live.py, whose two campaigns run that way.)"""

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
from dbmatrix.analyse.campaign_records import INDEPENDENT, independence, summaries
from dbmatrix.store import ResultStore

pytestmark = pytest.mark.integration


def dbmatrix_run(workdir: Path, results: Path, campaign: str, load: str) -> dict[str, Any]:
    spec = workdir.parent / f"one-cell-{load}.yaml"
    raw = yaml.safe_load((paths.repo_root() / "specs" / "smoke.yaml").read_text())
    raw["factors"]["cache_pct"] = 100
    spec.write_text(yaml.safe_dump({**raw, "measure_s": 1, "dataset_load": load}))
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib"), "DBMATRIX_WORKDIR": str(workdir)}
    r = subprocess.run([sys.executable, "-m", "dbmatrix", "run", "--profile", "smoke", "--spec", str(spec),
                        "--results", str(results), "--no-progress", "--campaign", campaign],
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_second_campaign_loads_its_dataset_afresh(tmp_path: Path) -> None:
    load = "per_campaign"
    work, results = tmp_path / "w", tmp_path / "results"
    c1 = dbmatrix_run(work, results, "auto", load)
    c2 = dbmatrix_run(work, results, "auto", load)
    assert (c1["campaign"], c1["ok"], c2["campaign"], c2["ok"]) == (1, 1, 2, 1)
    recs = {r["campaign"]: r for r in ResultStore(results).campaigns()}
    (d1,), (d2,) = recs[1]["datasets"], recs[2]["datasets"]
    assert recs[2]["dataset_load"] == load and d1["key"] == d2["key"]
    assert d2["created_utc"] > d1["created_utc"] and d2["created_utc"] >= recs[2]["started_utc"]
    assert d2["reused"] is False and d2["prepared_for"].endswith("#campaign-2")
    assert d1["prepared_for"].endswith("#campaign-1")
    marker = json.loads(next((work / "snapshots").glob("*.json")).read_text())
    assert marker["prepared_for"] == d2["prepared_for"]
    label = independence(summaries(list(recs.values()))).label
    assert label in (INDEPENDENT, "same boot, fresh datasets"), label
    c3 = dbmatrix_run(work, results, "last", load)  # resuming campaign 2: nothing to run, nothing loaded
    assert c3["campaign"] == 2 and c3.get("ok", 0) == 0
