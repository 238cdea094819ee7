"""The spine end to end with real mariadbd and sysbench: plan -> runs (one cell failing) -> resume ->
Ctrl-C without orphans -> analysis -> figure and macros (byte-identical twice). The paper from a smoke study
alone builds in test_walkthrough.py (`dbmatrix paper` after `dbmatrix figures`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from tests.integration.factory import alive, study_from

from dbmatrix import steps
from dbmatrix.analyse import tables as analysis
from dbmatrix.run.matrix import run_study, study_status
from dbmatrix.store import ResultStore

pytestmark = pytest.mark.integration

SPEC = {
    "experiment": "it-pipeline",
    "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 5000},
    "factors": {"cache_pct": [25, 100], "threads": [2, 12]},
    "repetitions": 2,
    "seed": 7,
    "warmup_s": 1,
    "measure_s": 2,
    "baseline": {"cache_pct": 100},
    # 12 client threads cannot connect with max_connections=8: that cell fails for real.
    "server_options": {"max_connections": 8, "innodb_flush_log_at_trx_commit": 1},
}


def _mariadbd_pids() -> set[int]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
    wd = os.environ["DBMATRIX_WORKDIR"]
    return {int(line.split()[0]) for line in out.splitlines() if "mariadbd" in line and wd in line}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return study_from(tmp_path_factory.mktemp("pipeline"), SPEC)


@pytest.fixture(scope="module")
def ran(study):
    with pytest.MonkeyPatch.context() as mp:  # the suite keeps the page cache (conftest.py): these runs drop it
        mp.setenv("DBMATRIX_OS_CACHE", "drop")
        return run_study(study, progress=False)


def test_runs_complete_and_the_failing_cell_is_recorded(study, ran):
    counts = {k: getattr(ran, k) for k in ("planned", "already_done", "ok", "failed", "adaptive", "not_attempted")}
    assert counts == {"planned": 8, "already_done": 0, "ok": 4, "failed": 4, "adaptive": 0, "not_attempted": 0}
    assert ran.campaign == 1 and ran.campaign_complete is False  # the failing cell leaves it incomplete
    store: ResultStore = study.store
    manifests = {m.run_id: m for m in store.records()}
    assert len(manifests) == 8
    for run_id, m in manifests.items():
        if m.cell["threads"] == 12:
            assert m.status == "failed" and m.failed_step == "warmup"
            out = "warmup.out" if m.window_mode == "two_process" else "sysbench.out"  # one process: both
            assert "Too many connections" in (store.raw / run_id / out).read_text()
            assert (store.raw / run_id / "mariadbd.err").is_file()
        else:
            assert m.status == "ok", m.error
            for f in ("sysbench.out", "variables.tsv", "status-before.tsv", "status-after.tsv", "mariadbd.err"):
                assert f in m.files
            assert m.versions["mariadb"].startswith("10.") and m.versions["sysbench"] == "1.0.20"
            assert m.host_facts["online_cpus"] >= 1
            assert m.spec["name"] == "it-pipeline" and "commit" in m.git
            assert m.server["stop_mode"] == "kill" and m.server["clean_shutdown"] is False
            assert m.server["stop_s"] < 1 and m.os_cache_dropped is (os.geteuid() == 0)
            assert "--rand-type=uniform" in m.sysbench["command"]
            assert m.cache_bytes_effective == m.cache_bytes
            ds = m.dataset
            assert 0 < ds["data_physical_bytes"] <= ds["datadir_physical_bytes"]
    assert not _mariadbd_pids(), "no server may outlive the matrix"


def test_cache_follows_the_measured_size(study, ran):
    runs = study.store.load_runs()
    assert (runs["cache_basis"] == "logical").all()  # the default: the tables' uncompressed size
    for _, r in runs.iterrows():
        want = int(r["cache_pct"] / 100 * r["data_logical_bytes"]) // 2**20 * 2**20
        assert r["cache_bytes"] == max(want, 6 * 2**20)
    assert runs["tps"].gt(0).all() and runs["transactions"].gt(0).all()


def test_rerun_resumes_and_keeps_failed_attempts(study, ran, capsys):
    before = {m.run_id: m.started_utc for m in study.store.records() if m.status == "ok"}
    again = run_study(study, progress=False)  # with the suite's DBMATRIX_OS_CACHE=keep, said and recorded
    assert "the page cache is kept between runs ($DBMATRIX_OS_CACHE=keep" in capsys.readouterr().out
    assert again.already_done == 4 and again.ok == 0 and again.failed == 4
    assert [m.os_cache_dropped for m in study.store.records() if m.status == "failed"] == [False] * 4
    after = {m.run_id: m.started_utc for m in study.store.records() if m.status == "ok"}
    assert after == before, "completed runs are never redone"
    assert len(list(study.store.failed.iterdir())) == 4, "earlier failed attempts are kept"
    st = study_status(study)
    assert st.ok == 4 and len(st.failed) == 4 and st.pending == 0


def test_analysis_figure_and_macros_are_deterministic(study, ran, tmp_path):
    outs = []
    for name in ("a", "b"):
        a = analysis.analyse(study.store, study.experiment)
        root = tmp_path / name
        written = steps.publish(study.store, study.experiment, "smoke", root / "figures", root / "paper" / "generated")
        outs.append((root, written, sorted((study.store.processed).iterdir())))
    assert len(a.cells) == 2 and (a.cells["n"] == 2).all()
    assert a.cells["ci_lo"].le(a.cells["mean"]).all() and a.cells["ci_hi"].ge(a.cells["mean"]).all()
    assert set(a.failed["run_id"]) and len(a.failed) == 4
    (ra, wa, _), (_rb, wb, _) = outs
    for fa, fb in zip(wa, wb):
        assert fa.read_bytes() == fb.read_bytes(), f"{fa.name} differs between two builds from the same data"
    macros = (ra / "paper" / "generated" / "macros.tex").read_text()
    assert "\\newcommand{\\cacheRatio}" in macros and "\\newcommand{\\nRuns}{4}" in macros
    pdf = (ra / "figures" / "throughput-vs-cache.pdf").read_bytes()
    assert b"CreationDate" not in pdf and b"data sha256:" in pdf
    assert b"/FontType 3" not in pdf and b"/Subtype /Type3" not in pdf


def test_ctrl_c_leaves_no_orphan_and_the_rerun_completes(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "experiment": "it-interrupt", "factors": {"cache_pct": 100},
                                    "repetitions": 1, "warmup_s": 0, "measure_s": 6,
                                    "server_options": {}}))
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "dbmatrix", "run", "--profile", "smoke", "--spec", str(spec),
           "--results", str(results), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    pids: set[int] = set()
    while time.monotonic() < deadline and not pids and proc.poll() is None:
        time.sleep(0.5)
        out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=False).stdout
        pids = {int(l.split()[0]) for l in out.splitlines() if "sysbench" in l and "--time=6" in l}
    if not pids:
        proc.kill()
        pytest.fail(f"the measured sysbench never started: {proc.communicate()[0]}")
    servers = _mariadbd_pids()
    assert servers
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "resume" in out
    assert not any(alive(p) for p in servers), "mariadbd survived Ctrl-C"
    assert not list((results / "raw").glob("*/manifest.json")), "an interrupted run must not look finished"
    # The rerun completes the interrupted run (shortened via a second results dir is not allowed:
    # the spec digest binds the directory), so run it again for real.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = json.loads(next((results / "raw").glob("*/manifest.json")).read_text())
    assert m["status"] == "ok" and not list((results / "raw").glob(".tmp-*"))
