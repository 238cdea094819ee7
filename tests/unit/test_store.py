"""Tests of dbmatrix.store: atomic writes, run commit/retry semantics, and the tidy loaders."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.record import SCHEMA_VERSION, RunRecord
from dbmatrix.spec.experiment import FACTORS
from dbmatrix.store import MANIFEST, ResultStore, write_json_atomic, write_text_atomic


def rec(run_id: str, status: str = "ok", **extra: Any) -> RunRecord:
    """A minimal run record (identity only)."""
    return RunRecord(run_id=run_id, experiment="e", cell_id="c", cell={}, repetition=1, host="h", status=status,
                     **extra)


FIX = Path(__file__).resolve().parents[1] / "fixtures" / "sysbench"
RW = FIX / "run_oltp_read_write_innodb_t2_5s.stdout"


# -- atomic writes --------------------------------------------------------------------------------


def test_write_text_atomic_creates_parents_and_replaces(tmp_path: Path) -> None:
    p = tmp_path / "a" / "b" / "out.txt"
    write_text_atomic(p, "first\n")
    assert p.read_text() == "first\n"
    write_text_atomic(p, "second\n")
    assert p.read_text() == "second\n"
    assert sorted(x.name for x in p.parent.iterdir()) == ["out.txt"]  # no temporary left behind


def test_write_text_atomic_bytes(tmp_path: Path) -> None:
    p = tmp_path / "bin"
    write_text_atomic(p, b"\x00\xffdata")
    assert p.read_bytes() == b"\x00\xffdata"


def test_write_text_atomic_failure_keeps_old_content(tmp_path: Path) -> None:
    p = tmp_path / "keep.txt"
    write_text_atomic(p, "old")
    with pytest.raises(TypeError):
        write_text_atomic(p, 123)  # type: ignore[arg-type]
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["keep.txt"]


def test_write_json_atomic(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    write_json_atomic(p, {"b": 1, "a": [1, 2], "path": Path("/x")})
    text = p.read_text()
    assert json.loads(text) == {"a": [1, 2], "b": 1, "path": "/x"}
    assert text.index('"a"') < text.index('"b"')  # sorted keys: stable bytes
    assert text.endswith("\n")


# -- synthetic runs ------------------------------------------------------------------------------------


def manifest(run_id: str, *, cache_pct: int = 25, repetition: int = 1, status: str = "ok",
             order: int = 1, **extra: Any) -> dict[str, Any]:
    cell = {"engine": "innodb", "cache_pct": cache_pct, "block_size": "16k", "compression": "none",
            "medium": "ssd", "threads": 2}
    cell_id = f"innodb-c{cache_pct}-b16k-none-ssd-t2"
    return {
        "run_id": run_id, "experiment": "cache-sweep-test", "cell_id": cell_id, "cell": cell,
        "repetition": repetition, "block": repetition, "order": order, "host": "db1", "status": status,
        "dataset": {"data_physical_bytes": 200 * 2**20, "data_logical_bytes": 150 * 2**20},
        "cache_bytes": 50 * 2**20, "medium": {"name": "ssd", "emulates": "nvme"},
        "started_utc": "2026-01-01T00:00:00+00:00", "finished_utc": "2026-01-01T00:01:00+00:00",
        **extra,
    }


def add_run(store: ResultStore, m: dict[str, Any], with_output: bool = True) -> Path:
    staging = store.begin_run(m["run_id"])
    if with_output:
        shutil.copyfile(RW, staging / "sysbench.out")
        (staging / "sysbench.err").write_text("")
    (staging / "variables.tsv").write_text("innodb_page_size\t16384\n")
    return store.commit_run(staging, RunRecord.from_dict(m))


def test_begin_and_commit_run(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    staging = store.begin_run("r1")
    assert staging.parent == store.raw and staging.name.startswith(".tmp-r1-") and staging.is_dir()
    (staging / "sysbench.out").write_text("out")
    (staging / "a.txt").write_text("a")
    final = store.commit_run(staging, rec("r1"))
    assert final == store.raw / "r1"
    assert not staging.exists()
    m = json.loads((final / MANIFEST).read_text())
    assert m["schema"] == SCHEMA_VERSION
    assert m["files"] == ["a.txt", "sysbench.out"]  # sorted, manifest itself not listed
    assert (final / "sysbench.out").read_text() == "out"
    assert store.record("r1") == RunRecord.from_dict(m) and store.record("r1").to_dict() == m  # type: ignore[union-attr]
    assert store.status("r1") == "ok"
    assert store.status("r2") is None and store.record("r2") is None


def test_commit_over_failed_run_keeps_the_old_attempt(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    s1 = store.begin_run("r1")
    (s1 / "traceback.txt").write_text("boom")
    store.commit_run(s1, rec("r1", "failed", finished_utc="2026-01-02T03:04:05+00:00"))
    s2 = store.begin_run("r1")
    (s2 / "sysbench.out").write_text("ok now")
    store.commit_run(s2, rec("r1"))
    assert store.status("r1") == "ok"
    assert not (store.raw / "r1" / "traceback.txt").exists()
    kept = list(store.failed.iterdir())
    assert len(kept) == 1
    assert kept[0].name.startswith("r1@") and ":" not in kept[0].name
    assert kept[0].name == "r1@2026-01-02T030405+0000"
    assert (kept[0] / "traceback.txt").read_text() == "boom"
    assert json.loads((kept[0] / MANIFEST).read_text())["status"] == "failed"


def test_commit_over_ok_run_refuses(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.commit_run(store.begin_run("r1"), rec("r1", order=1))
    with pytest.raises(FileExistsError, match="r1"):
        store.commit_run(store.begin_run("r1"), rec("r1", order=2))
    assert store.record("r1").order == 1  # type: ignore[union-attr]
    assert not store.failed.exists()


def test_clean_staging(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    assert store.clean_staging() == 0  # no raw/ yet
    a = store.begin_run("r1")
    (a / "partial.out").write_text("x")
    store.begin_run("r2")
    store.commit_run(store.begin_run("r3"), rec("r3"))
    assert store.clean_staging() == 2
    assert sorted(p.name for p in store.raw.iterdir()) == ["r3"]


def test_discard(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    s = store.begin_run("r1")
    (s / "x").write_text("x")
    store.discard(s)
    assert not s.exists()


def test_records_skip_staging_and_incomplete(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    assert list(store.records()) == []
    store.commit_run(store.begin_run("b"), rec("b"))
    store.commit_run(store.begin_run("a"), rec("a"))
    staging = store.begin_run("c")
    write_json_atomic(staging / MANIFEST, {"run_id": "c", "status": "ok"})
    (store.raw / "d").mkdir()  # a directory without a manifest
    assert [m.run_id for m in store.records()] == ["a", "b"]


def test_a_legacy_manifest_is_read_migrated_and_rewritten_in_the_current_schema(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    legacy = {"schema": 1, "run_id": "r1", "experiment": "e", "cell_id": "c", "cell": {"engine": "innodb"},
              "repetition": 1, "host": "h", "status": "failed", "error": "x", "host_facts": {"boot_id": "b"}}
    write_json_atomic(store.raw / "r1" / MANIFEST, legacy)
    r = store.record("r1")
    assert r is not None and r.campaign == 1 and r.boot_id == "b" and r.cell["engine"] == "innodb"
    r.mark_host_lost("h")
    store.rewrite_record(r)
    assert json.loads((store.raw / "r1" / MANIFEST).read_text())["schema"] == SCHEMA_VERSION
    assert store.record("r1") == r


def test_store_paths(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    assert store.dataset_file("db1", "innodb-b16k") == tmp_path / "datasets" / "db1" / "innodb-b16k.json"
    assert (store.raw, store.failed, store.processed) == (tmp_path / "raw", tmp_path / "failed",
                                                          tmp_path / "processed")


# -- loaders --------------------------------------------------------------------------------------


@pytest.fixture
def filled(tmp_path: Path) -> ResultStore:
    store = ResultStore(tmp_path)
    add_run(store, manifest("innodb-c25-b16k-none-ssd-t2-r1", order=2))
    add_run(store, manifest("innodb-c100-b16k-none-ssd-t2-r1", cache_pct=100, order=1))
    add_run(store, manifest("innodb-c25-b16k-none-ssd-t2-r2", repetition=2, status="failed", order=3,
                            error="RunFailed: sysbench exited 1"), with_output=False)
    return store


def test_load_runs(filled: ResultStore) -> None:
    df = filled.load_runs()
    assert list(df["run_id"]) == ["innodb-c100-b16k-none-ssd-t2-r1", "innodb-c25-b16k-none-ssd-t2-r1"]
    for f in FACTORS:
        assert f in df.columns
    assert list(df["cache_pct"]) == [100, 25]
    row = df.iloc[1]
    assert row["cell_id"] == "innodb-c25-b16k-none-ssd-t2"
    assert row["experiment"] == "cache-sweep-test" and row["host"] == "db1"
    assert (row["repetition"], row["block"], row["order"]) == (1, 1, 2)
    assert row["status"] == "ok"
    assert row["emulated"] == "nvme"
    assert row["cache_bytes"] == 50 * 2**20
    assert row["data_physical_bytes"] == 200 * 2**20 and row["data_logical_bytes"] == 150 * 2**20
    # the sysbench summary of the fixture
    assert row["tps"] == pytest.approx(921.99)
    assert row["qps"] == pytest.approx(18439.72)
    assert row["transactions"] == 4616
    assert row["threads"] == 2
    assert row["lat_pct_ms"] == pytest.approx(2.91)
    assert row["lat_avg_ms"] == pytest.approx(2.17)
    assert row["lat_max_ms"] == pytest.approx(11.03)
    assert row["total_time_s"] == pytest.approx(5.0056)
    assert row["ignored_errors"] == 0 and row["reconnects"] == 0


def test_load_runs_include_failed(filled: ResultStore) -> None:
    df = filled.load_runs(include_failed=True)
    assert len(df) == 3
    failed = df[df["status"] == "failed"]
    assert list(failed["run_id"]) == ["innodb-c25-b16k-none-ssd-t2-r2"]
    assert math.isnan(failed["tps"].iloc[0])
    assert list(df["run_id"]) == sorted(df["run_id"])


def test_load_runs_empty(tmp_path: Path) -> None:
    assert ResultStore(tmp_path).load_runs().empty


def test_load_intervals(filled: ResultStore) -> None:
    df = filled.load_intervals()
    assert len(df) == 2 * 5  # two ok runs, five 1-second rows each; failed run excluded
    assert list(df.columns[:2]) == ["run_id", "cell_id"]
    assert set(df["run_id"]) == {"innodb-c25-b16k-none-ssd-t2-r1", "innodb-c100-b16k-none-ssd-t2-r1"}
    one = df[df["run_id"] == "innodb-c25-b16k-none-ssd-t2-r1"]
    assert list(one["t_s"]) == [1, 2, 3, 4, 5]
    assert one["tps"].iloc[0] == pytest.approx(924.57)
    assert (one["threads"] == 2).all()


def test_load_histograms(filled: ResultStore) -> None:
    df = filled.load_histograms()
    assert list(df.columns) == ["run_id", "cell_id", "value_ms", "count"]
    per_run = df.groupby("run_id")["count"].sum()
    assert dict(per_run) == {"innodb-c25-b16k-none-ssd-t2-r1": 4616, "innodb-c100-b16k-none-ssd-t2-r1": 4616}
    one = df[df["run_id"] == "innodb-c25-b16k-none-ssd-t2-r1"]
    assert one["value_ms"].iloc[0] == pytest.approx(0.768)
    assert one["value_ms"].is_monotonic_increasing


def test_loaders_on_empty_store(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    assert store.load_intervals().empty and store.load_histograms().empty


def test_load_host_series_places_each_runs_samples_in_its_window(tmp_path: Path) -> None:
    from tests.unit.test_window_halves import T0, VMSTAT

    store = ResultStore(tmp_path)
    staging = store.begin_run("a")
    (staging / "vmstat.txt").write_text(VMSTAT)
    store.commit_run(staging, RunRecord.from_dict(manifest("a", window={"start_epoch": T0 + 0.021})))
    staging = store.begin_run("b")  # no window start (a record from before it was kept): no rows
    (staging / "vmstat.txt").write_text(VMSTAT)
    store.commit_run(staging, RunRecord.from_dict(manifest("b")))
    add_run(store, manifest("c", window={"start_epoch": T0}))  # no vmstat.txt
    df = store.load_host_series()
    assert list(df["run_id"]) == ["a", "a"] and list(df["t_s"]) == [1, 2]  # 10:07:24 was the warm-up's
    assert list(df.columns[:3]) == ["run_id", "cell_id", "t_s"] and df["read_kib_s"].iloc[0] == 521949
    assert ResultStore(tmp_path / "empty").load_host_series().empty
