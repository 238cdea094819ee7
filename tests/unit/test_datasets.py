"""Tests of the pure parts of dbmatrix.run.datasets: size parsing and the restore command."""

from __future__ import annotations

import pytest

from dbmatrix.engines.myrocks import parse_logical
from dbmatrix.run.datasets import (
    INNODB_LOGICAL,
    ROCKSDB_LOGICAL,
    DatasetInfo,
    cache_sizing,
    data_files_glob,
    logical_sizes,
    parse_du,
    parse_du_total,
    restore_command,
    upgraded_marker,
)
from dbmatrix.spec.experiment import Cell, DatasetKey

MiB = 2**20


def info(engine: str) -> DatasetInfo:
    return DatasetInfo(key="k", host="h", snapshot="/w/snapshots/k", engine=engine, block_size="16k",
                       compression="none", tables=2, table_size=10, data_physical_bytes=1,
                       data_logical_bytes=1, datadir_physical_bytes=1, datadir_logical_bytes=1,
                       prepare_s=1.0, created_utc="2026-11-22T00:00:00+00:00")


def test_parse_du_and_total() -> None:
    assert parse_du("123456\t/x/sbtest\n") == 123456
    assert parse_du_total("100\t/a/1.sst\n250\t/a/2.sst\n350\ttotal\n") == 350
    assert parse_du_total("") == 0


def test_data_files_are_the_tables_not_logs() -> None:
    assert data_files_glob("/d/datadir", "innodb") == "/d/datadir/sbtest/*.ibd"
    assert data_files_glob("/d/datadir", "myrocks") == "'/d/datadir/#rocksdb'/*.sst"


def test_restore_command_copies_the_snapshot() -> None:
    assert restore_command(info("innodb"), "/m/disk/datadir") == (
        "rm -rf /m/disk/datadir && mkdir -p /m/disk && cp -a /w/snapshots/k /m/disk/datadir")


def test_restore_command_moves_redo_or_wal_to_the_log_medium() -> None:
    inno = restore_command(info("innodb"), "/m/disk/datadir", "/m/fast/logdir")
    assert inno.endswith("rm -rf /m/fast/logdir && mkdir -p /m/fast/logdir && "
                         "mv /m/disk/datadir/ib_logfile* /m/fast/logdir/")
    rocks = restore_command(info("myrocks"), "/m/disk/datadir", "/m/fast/logdir")
    assert "find '/m/disk/datadir/#rocksdb' -maxdepth 1 -name '*.log' -exec mv -t /m/fast/logdir {} +" in rocks


def sized(engine: str, compression: str, physical: int, logical: int | None,
          method: str | None = "m") -> DatasetInfo:
    return DatasetInfo(key="k", host="h", snapshot="/w/snapshots/k", engine=engine, block_size="16k",
                       compression=compression, tables=2, table_size=10, data_physical_bytes=physical,
                       data_logical_bytes=logical or physical, datadir_physical_bytes=1, datadir_logical_bytes=1,
                       prepare_s=1.0, created_utc="2026-11-22T00:00:00+00:00", logical_method=method)


def test_cache_is_pct_of_the_basis_size_rounded_to_mib_and_clamped() -> None:
    # InnoDB lz4 at 4 x 10k rows (measured): 9 601 024 bytes on disk, 41 943 040 uncompressed.
    ds = sized("innodb", "lz4", 9_601_024, 41_943_040)
    cell = Cell("innodb", 50, "16k", "lz4", "disk", 2)
    logical = cache_sizing(cell, ds, "logical")
    assert logical == {"cache_pct": 50, "cache_basis": "logical", "cache_basis_bytes": 41_943_040,
                       "cache_bytes": 20 * MiB, "cache_bytes_requested": 20_971_520,
                       "cache_clamped_to_minimum": False}
    physical = cache_sizing(cell, ds, "physical")
    # 50 % of 9.16 MiB is 4.58 MiB: below the 16k pages' 6 MiB minimum
    assert physical["cache_basis_bytes"] == 9_601_024 and physical["cache_bytes_requested"] == 4_800_512
    assert physical["cache_bytes"] == 6 * MiB and physical["cache_clamped_to_minimum"] is True
    rocks = cache_sizing(Cell("myrocks", 100, "16k", "lz4", "disk", 2), sized("myrocks", "lz4", 8 * MiB, 9 * MiB),
                         "logical")
    assert rocks["cache_bytes"] == 9 * MiB and rocks["cache_basis_bytes"] == 9 * MiB


def test_logical_basis_needs_a_measured_logical_size() -> None:
    old = sized("myrocks", "lz4", 8 * MiB, 8 * MiB, method=None)
    assert old.basis_bytes("physical") == 8 * MiB
    with pytest.raises(ValueError, match="no measured logical size"):
        old.basis_bytes("logical")
    with pytest.raises(ValueError, match="allowed: logical, physical"):
        old.basis_bytes("du")


def test_logical_sizes_per_engine() -> None:
    inno = DatasetKey("innodb", "16k", "lz4", 4, 10_000)
    assert logical_sizes(inno, 41_943_040, None) == {"data_logical_bytes": 41_943_040,
                                                     "logical_method": INNODB_LOGICAL}
    row = DatasetKey("innodb", "16k", "row_compressed", 4, 10_000)
    assert logical_sizes(row, 10 * MiB, None)["data_logical_bytes"] == 20 * MiB  # 8k pages hold 16k ones
    rocks = DatasetKey("myrocks", "16k", "lz4", 4, 10_000)
    assert logical_sizes(rocks, 8_158_141, 8_817_926) == {"data_logical_bytes": 8_817_926,
                                                          "logical_method": ROCKSDB_LOGICAL}
    with pytest.raises(ValueError, match="SST properties"):
        logical_sizes(rocks, 8_158_141, None)


def test_parse_rocksdb_logical() -> None:
    assert parse_logical("4\t8817926\n") == 8_817_926
    for bad in ("0\t0\n", "", "ERROR"):
        with pytest.raises(ValueError, match="ROCKSDB_SST_PROPS"):
            parse_logical(bad)


def test_old_markers_gain_the_logical_size() -> None:
    """A marker from before logical_method: its data_logical_bytes was the apparent size."""
    old = {**sized("myrocks", "lz4", 8_163_328, 8_158_141).to_dict(), "logical_method": None}
    del old["data_apparent_bytes"]
    new = upgraded_marker(old, DatasetKey("myrocks", "16k", "lz4", 2, 10), 8_817_926)
    assert new["data_apparent_bytes"] == 8_158_141 and new["data_logical_bytes"] == 8_817_926
    assert new["logical_method"] == ROCKSDB_LOGICAL and new["data_physical_bytes"] == 8_163_328
    assert DatasetInfo(**new).basis_bytes("logical") == 8_817_926
    inno = {**sized("innodb", "lz4", 9_601_024, 41_943_040).to_dict(), "logical_method": None}
    new = upgraded_marker(inno, DatasetKey("innodb", "16k", "lz4", 2, 10), None)
    assert new["data_logical_bytes"] == new["data_apparent_bytes"] == 41_943_040


def test_old_marker_json_loads() -> None:
    """A marker written before logical_method and data_apparent_bytes still reads (they default to None)."""
    d = sized("innodb", "none", 1, 1).to_dict()
    del d["logical_method"], d["data_apparent_bytes"]
    assert DatasetInfo(**d).logical_method is None


def test_the_page_cache_is_dropped_unless_the_policy_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from dbmatrix.hosts.scripted import ScriptedHost
    from dbmatrix.run.datasets import OS_CACHE_ENV, drop_os_caches, os_cache_policy
    from dbmatrix.spec.errors import SpecError

    monkeypatch.delenv(OS_CACHE_ENV, raising=False)
    assert os_cache_policy() == "drop"
    host = ScriptedHost()
    assert drop_os_caches(host) is True and host.commands[-1] == "sync && echo 3 > /proc/sys/vm/drop_caches"
    user = ScriptedHost(root=False)  # not root: nothing to drop with
    assert drop_os_caches(user) is False and not any("drop_caches" in c for c in user.commands)
    monkeypatch.setenv(OS_CACHE_ENV, "keep")
    kept = ScriptedHost(strict=True)  # no command at all
    assert drop_os_caches(kept) is False and kept.commands == []
    monkeypatch.setenv(OS_CACHE_ENV, "dropped")
    with pytest.raises(SpecError, match=r"\$DBMATRIX_OS_CACHE='dropped'; allowed: drop, keep"):
        drop_os_caches(ScriptedHost())
