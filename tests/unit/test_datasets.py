"""Tests of the pure parts of dbmatrix.run.datasets: size parsing and the restore command."""

from __future__ import annotations

from dbmatrix.run.datasets import DatasetInfo, data_files_glob, parse_du, parse_du_total, restore_command


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
