"""Two dbmatrix runs at once on one machine (the smoke spec twice through the command line, each with its
own workdir and results directory) both finish with no failed run: standalone servers listen on no TCP
port, so they cannot race for one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dbmatrix import paths

pytestmark = pytest.mark.integration


def dbmatrix_run(workdir: Path, results: Path, spec: str = "specs/smoke.yaml") -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(paths.repo_root() / "lib"), "DBMATRIX_WORKDIR": str(workdir)}
    return subprocess.Popen([sys.executable, "-m", "dbmatrix", "run", "--profile", "smoke", "--spec",
                             str(paths.repo_root() / spec), "--results", str(results), "--no-progress"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_runs_at_once_both_finish_with_no_failed_run(tmp_path) -> None:
    procs = [dbmatrix_run(tmp_path / f"w{i}", tmp_path / f"results{i}") for i in (1, 2)]
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, (out, err[-3000:])
        counts = json.loads(out.strip().splitlines()[-1])
        assert counts["failed"] == 0 and counts["ok"] == counts["planned"] > 0, counts
    for i in (1, 2):
        manifests = [json.loads(m.read_text()) for m in (tmp_path / f"results{i}").rglob("manifest.json")]
        assert manifests and all(m["status"] == "ok" for m in manifests)
        assert all("--skip-networking" in m["server"]["options"] for m in manifests)
