"""A tiny storage matrix for real: InnoDB and MyRocks, a compressed level, the datadir on disk and on
tmpfs, the redo log/WAL on another medium, an open-loop cell; system collectors in every run; a server
killed mid-run is recorded as failed with its logs, and the rerun resumes only that run."""

from __future__ import annotations

import json
import os
import re

import pytest
from tests.integration.factory import WhenMeasuring, kill_by_pid_file, study_from, sysbench_lines

from dbmatrix.hosts import media
from dbmatrix.run.datasets import ROCKSDB_LOGICAL
from dbmatrix.run.matrix import run_study, study_status
from dbmatrix.store import ResultStore

pytestmark = pytest.mark.integration

SPEC = {
    "experiment": "it-matrix",
    "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 5000},
    "factors": {"engine": ["innodb", "myrocks"], "compression": ["none", "lz4"], "cache_pct": 50,
                "threads": 2},
    "repetitions": 1,
    "seed": 11,
    "warmup_s": 1,
    "measure_s": 3,
    "server_options": {"innodb_flush_log_at_trx_commit": 1, "rocksdb_flush_log_at_trx_commit": 1},
}


def killer(workdir: str) -> WhenMeasuring:
    """Kills the benchmark's mariadbd (SIGKILL, by the PID in its pid file) one second into the first
    measured window of this session's workdir (the sysbench with --histogram=on, which warms up first
    in a one-process run): a server crash in the middle of a run."""
    pid_file = f"{workdir}/run/bench.pid"

    def ours() -> list[str]:
        return [line for line in sysbench_lines() if f"{workdir}/run/bench.sock" in line]

    return WhenMeasuring(
        ready=lambda: any("--histogram=on" in line for line in ours()) and os.path.isfile(pid_file),
        act=lambda: kill_by_pid_file(pid_file),
        delay=lambda: 1.0 + (SPEC["warmup_s"] if any("--report-checkpoints=" in line for line in ours()) else 0))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return study_from(tmp_path_factory.mktemp("matrix"), SPEC)


@pytest.fixture(scope="module")
def first_pass(study):
    with killer(os.environ["DBMATRIX_WORKDIR"]) as kill:
        counts = run_study(study, progress=False)
    return counts, kill.result


def test_killed_server_is_recorded_and_the_matrix_goes_on(study, first_pass):
    counts, killed = first_pass
    assert killed is not None
    assert counts.planned == 4 and counts.ok == 3 and counts.failed == 1
    store: ResultStore = study.store
    failed = [m for m in store.records() if m.status == "failed"]
    assert len(failed) == 1
    m = failed[0]
    assert m.failed_step == "measure" and m.server["pid"] == killed
    files = set(m.files)
    assert {"sysbench.out", "mariadbd.err", "traceback.txt", "variables.tsv"} <= files
    assert "sysbench" in m.error


def test_myrocks_and_compression_ran_with_their_options(study, first_pass):
    store: ResultStore = study.store
    ok = [m for m in store.records() if m.status == "ok"]
    engines = {m.cell["engine"] for m in ok}
    assert engines == {"innodb", "myrocks"}
    for m in ok:
        variables = dict(line.split("\t", 1) for line in
                         (store.raw / m.run_id / "variables.tsv").read_text().splitlines() if "\t" in line)
        if m.cell["engine"] == "myrocks":
            cf = variables["rocksdb_default_cf_options"]
            assert ("kLZ4Compression" in cf) == (m.cell["compression"] == "lz4")
            assert variables["rocksdb_block_cache_size"] == str(m.cache_bytes)
            assert variables["rocksdb_flush_log_at_trx_commit"] == "1"
            # MyRocks size is its SST files after flush + compaction.
            assert m.dataset["data_physical_bytes"] > 0
            assert m.dataset["logical_method"] == ROCKSDB_LOGICAL
        else:
            assert variables["innodb_buffer_pool_size"] == str(m.cache_bytes)
            assert "rocksdb_flush_log_at_trx_commit" not in m.server_constants
        assert m.summary["tps"] > 0


def test_cache_is_a_share_of_the_uncompressed_size(study, first_pass):
    """cache_basis logical (the default): lz4 tables are larger uncompressed than on disk (InnoDB: the
    holes page compression punches; MyRocks: the SST properties' key and value bytes), and the cache is
    cache_pct of that size, whatever the engine's share of it on disk."""
    ok = [m for m in study.store.records() if m.status == "ok"]
    seen = set()
    for m in ok:
        ds, cell = m.dataset, m.cell
        assert m.cache_basis == "logical" and m.cache_basis_bytes == ds["data_logical_bytes"]
        assert m.cache_bytes_requested == int(cell["cache_pct"] / 100 * ds["data_logical_bytes"])
        minimum = 6 * 2**20 if cell["engine"] == "innodb" else 1024
        assert m.cache_bytes == max(minimum, m.cache_bytes_requested // 2**20 * 2**20)
    assert study.store.load_runs()["cache_basis"].eq("logical").all()
    # every dataset is recorded, also the killed run's
    for p in (study.store.root / "datasets").glob("*/*.json"):
        ds = json.loads(p.read_text())
        if ds["compression"] == "lz4":
            assert ds["data_logical_bytes"] > ds["data_physical_bytes"], ds
            seen.add(ds["engine"])
    assert seen == {"innodb", "myrocks"}


def test_collectors_ran_during_every_measured_run(study, first_pass):
    store: ResultStore = study.store
    for m in store.records():
        if m.status != "ok":
            continue
        d = store.raw / m.run_id
        for name in ("mpstat", "vmstat", "pidstat"):
            rows = re.findall(r"^\d\d:\d\d:\d\d\s+(?:all|\d+\s+\d+)\s|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s*$",
                              (d / f"{name}.txt").read_text(), re.M)  # mpstat "all", pidstat, vmstat rows
            assert len(rows) >= 2, (m.run_id, name)
        sysm = m.system
        assert sysm["window_s"] >= 2 and sysm["cpu_user_s"] + sysm["cpu_sys_s"] > 0
        assert sysm["host_cpu_busy_s"] > 0


def test_rerun_resumes_only_the_failed_run(study, first_pass):
    store: ResultStore = study.store
    before = {m.run_id: m.finished_utc for m in store.records() if m.status == "ok"}
    again = run_study(study, progress=False)
    assert again.already_done == 3 and again.ok == 1 and again.failed == 0
    after = {m.run_id: m.finished_utc for m in store.records()}
    assert all(after[k] == v for k, v in before.items())  # completed runs untouched
    assert len(list((store.root / "failed").iterdir())) == 1  # the failed attempt is kept
    assert study_status(study).pending == 0


LOG_SPEC = {
    "experiment": "it-media",
    "workload": {"name": ["oltp_read_write", "oltp_point_select"], "tables": 2, "table_size": 5000},
    "factors": {"engine": ["innodb", "myrocks"], "medium": "tmpfs", "log_medium": "disk",
                "rate_fraction": ["closed", 0.5], "cache_pct": 100, "threads": 2},
    "repetitions": 1,
    "seed": 12,
    "warmup_s": 1,
    "measure_s": 2,
    "cpu_placement": {"server": "0", "client": "1"},
}


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")
def test_tmpfs_data_with_log_on_disk_and_open_loop(tmp_path):
    study = study_from(tmp_path, LOG_SPEC)
    hostspec = study.inventory.hosts[0]
    try:
        counts = run_study(study, progress=False)
    finally:
        with hostspec.connect() as host:
            media.teardown(host, hostspec.media["tmpfs"])
    assert counts.failed == 0 and counts.ok == 8
    runs = study.store.load_runs()
    assert set(runs["workload"]) == {"oltp_read_write", "oltp_point_select"}
    for m in study.store.records():
        assert m.media_state["tmpfs"]["fstype"] == "tmpfs"
        assert m.log_dir.endswith("/logdir")
        opts = m.server["options"]
        if m.cell["engine"] == "innodb":
            assert f"--innodb-log-group-home-dir={m.log_dir}" in opts
        else:
            assert f"--rocksdb-wal-dir={m.log_dir}" in opts
        assert m.cpu_placement["server_affinity"].endswith("list: 0")
        assert m.sysbench["command"].startswith("taskset -c 1 sysbench ")
        if m.cell["rate_fraction"]:
            assert m.rate_tps == max(1, round(0.5 * m.closed_loop_peak_tps))
            assert f"--rate={m.rate_tps}" in m.sysbench["command"]
            # Open loop: the measured throughput follows the rate, not the peak.
            assert m.summary["tps"] < 0.8 * m.closed_loop_peak_tps
