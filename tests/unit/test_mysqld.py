"""Tests of the pure parts of dbmatrix.run.mysqld: command lines, cache sizes, table engines."""

from __future__ import annotations

import shlex

import pytest

from dbmatrix.engines.innodb import MIN_BUFFER_POOL as INNODB_MIN_BUFFER_POOL
from dbmatrix.engines.myrocks import MIN_BLOCK_CACHE as ROCKSDB_MIN_BLOCK_CACHE
from dbmatrix.run.mysqld import (
    MariaDBServer,
    MiB,
    ServerPaths,
    cache_bytes,
    client_command,
    constants_for,
    engine_options,
    install_db_command,
    parse_tsv_pairs,
    render_options,
    table_engine,
)
from dbmatrix.spec.experiment import Cell, SpecError

PATHS = ServerPaths.under("/var/tmp/dbm/run", "/var/tmp/dbm/media/disk/datadir", "bench", 13306)


def cell(engine: str = "innodb", cache_pct: float = 50, block_size: str = "16k",
         compression: str = "none", medium: str = "disk", threads: int = 4) -> Cell:
    return Cell(engine, cache_pct, block_size, compression, medium, threads)


def opts(c: Cell, cache: int | None = 64 * MiB, constants: dict[str, str] | None = None) -> list[str]:
    return render_options(c, PATHS, user="mysql", cache=cache, constants=constants)


def test_server_paths_under() -> None:
    assert ServerPaths("/var/tmp/dbm/media/disk/datadir", "/var/tmp/dbm/run/bench.sock",
                                "/var/tmp/dbm/run/bench.pid", "/var/tmp/dbm/run/bench.err", 13306) == PATHS


def test_render_options_innodb_basics() -> None:
    o = opts(cell(block_size="8k"), cache=100 * MiB)
    assert o[0] == "--no-defaults"
    assert "--bind-address=127.0.0.1" in o
    assert "--user=mysql" in o
    assert f"--datadir={PATHS.datadir}" in o
    assert f"--socket={PATHS.socket}" in o
    assert "--port=13306" in o
    assert f"--pid-file={PATHS.pid_file}" in o
    assert f"--log-error={PATHS.error_log}" in o
    # its own tmpdir: a server's startup deletes every #sql* file in its tmpdir, so shared /tmp is unsafe
    assert PATHS.tmpdir == "/var/tmp/dbm/run/bench.tmp" and f"--tmpdir={PATHS.tmpdir}" in o
    assert "--innodb-buffer-pool-load-at-startup=OFF" in o
    assert "--innodb-buffer-pool-dump-at-shutdown=OFF" in o
    assert "--innodb-page-size=8k" in o
    assert f"--innodb-buffer-pool-size={100 * MiB}" in o
    assert not any("rocksdb" in x for x in o)
    assert not any(x.startswith("--plugin-load-add") for x in o)
    assert len(o) == len(set(o))


def test_render_options_without_cache() -> None:
    o = opts(cell(), cache=None)
    assert not any(x.startswith("--innodb-buffer-pool-size") for x in o)


def test_lz4_loads_the_provider() -> None:
    o = opts(cell(compression="lz4"))
    assert "--plugin-load-add=provider_lz4" in o
    assert "--innodb-compression-algorithm=lz4" in o


def test_zlib_and_row_compressed_need_no_plugin() -> None:
    z = opts(cell(compression="zlib"))
    assert "--innodb-compression-algorithm=zlib" in z
    assert not any(x.startswith("--plugin-load-add") for x in z)
    r = opts(cell(compression="row_compressed"))
    assert not any("compression-algorithm" in x or "plugin-load" in x for x in r)


@pytest.mark.parametrize("compression,cf", [
    ("none", "kNoCompression"), ("lz4", "kLZ4Compression"), ("zlib", "kZlibCompression"),
    ("zstd", "kZSTD"), ("snappy", "kSnappyCompression"),
])
def test_myrocks_options(compression: str, cf: str) -> None:
    o = opts(cell(engine="myrocks", block_size="32k", compression=compression), cache=7 * MiB)
    assert "--plugin-load-add=ha_rocksdb.so" in o
    assert f"--rocksdb-block-size={32 * 1024}" in o
    assert f"--rocksdb-default-cf-options=compression={cf}" in o
    assert "--rocksdb-use-direct-reads=ON" in o
    assert f"--rocksdb-block-cache-size={7 * MiB}" in o
    assert not any(x.startswith("--innodb-page-size") for x in o)
    assert not any(x.startswith("--innodb-buffer-pool-size") for x in o)


def test_engine_options_has_no_empty_entries() -> None:
    assert all(engine_options(cell(engine="myrocks"), None))
    assert engine_options(cell(), None) == ["--innodb-page-size=16k"]


def test_constants_rendered_with_dashes_after_the_harness_options() -> None:
    o = opts(cell(), constants={"innodb_flush_log_at_trx_commit": "1", "max-connections": "1000",
                                "innodb_doublewrite": "ON"})
    assert "--innodb-flush-log-at-trx-commit=1" in o
    assert "--max-connections=1000" in o
    assert "--innodb-doublewrite=ON" in o
    consts = o[-3:]
    assert consts == sorted(consts)  # sorted, so command lines are stable


@pytest.mark.parametrize("name", ["innodb_buffer_pool_size", "innodb-buffer-pool-size", "innodb_page_size",
                                  "rocksdb_block_cache_size", "datadir", "port", "bind-address", "socket"])
def test_constant_controlled_by_a_factor_or_harness_is_rejected(name: str) -> None:
    with pytest.raises(SpecError) as ei:
        opts(cell(), constants={name: "1G"})
    assert f"server_options.{name}" in str(ei.value)


@pytest.mark.parametrize("name", ["pid_file", "log_error", "tmpdir", "innodb_buffer_pool_load_at_startup"])
def test_constant_overriding_a_harness_option_is_rejected(name: str) -> None:
    with pytest.raises(SpecError):
        opts(cell(), constants={name: "ON"})


@pytest.mark.parametrize("block", sorted(INNODB_MIN_BUFFER_POOL))
def test_cache_bytes_innodb_minimum_per_page_size(block: str) -> None:
    minimum = INNODB_MIN_BUFFER_POOL[block]
    assert cache_bytes(cell(cache_pct=0, block_size=block), 10_000 * MiB) == minimum
    assert cache_bytes(cell(cache_pct=1, block_size=block), 1 * MiB) == minimum  # below: clamped
    assert cache_bytes(cell(cache_pct=100, block_size=block), 1000 * MiB) == 1000 * MiB


def test_innodb_minimum_grows_with_page_size() -> None:
    sizes = ["4k", "8k", "16k", "32k", "64k"]
    mins = [INNODB_MIN_BUFFER_POOL[s] for s in sizes]
    assert mins == sorted(mins) and len(set(mins)) == len(mins)


def test_cache_bytes_rounds_down_to_mib() -> None:
    data = 1000 * MiB + 12345
    got = cache_bytes(cell(cache_pct=25), data)
    assert got == 250 * MiB  # 25 % of 1000.01 MiB = 250.003 MiB -> 250 MiB
    got = cache_bytes(cell(cache_pct=50), 101 * MiB)
    assert got == 50 * MiB  # 50.5 MiB rounds down
    assert got % MiB == 0


def test_cache_bytes_myrocks() -> None:
    assert cache_bytes(cell(engine="myrocks", cache_pct=0), 1000 * MiB) == ROCKSDB_MIN_BLOCK_CACHE
    assert cache_bytes(cell(engine="myrocks", cache_pct=10), 1000 * MiB) == 100 * MiB
    assert cache_bytes(cell(engine="myrocks", cache_pct=10), 5 * MiB) == ROCKSDB_MIN_BLOCK_CACHE


@pytest.mark.parametrize("engine,compression,expected", [
    ("innodb", "none", "InnoDB"),
    ("innodb", "lz4", "InnoDB PAGE_COMPRESSED=1"),
    ("innodb", "zlib", "InnoDB PAGE_COMPRESSED=1"),
    ("innodb", "row_compressed", "InnoDB ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"),
    ("myrocks", "none", "rocksdb"),
    ("myrocks", "zstd", "rocksdb"),
])
def test_table_engine(engine: str, compression: str, expected: str) -> None:
    assert table_engine(cell(engine=engine, compression=compression)) == expected


def test_install_db_command() -> None:
    cmd = shlex.split(install_db_command(cell(block_size="4k"), "/data/dir with space", "mysql"))
    assert cmd[0] == "mariadb-install-db"
    assert cmd[1] == "--no-defaults"
    assert "--datadir=/data/dir with space" in cmd
    assert "--user=mysql" in cmd
    assert "--innodb-page-size=4k" in cmd
    assert "--tmpdir=/data/dir with space" in cmd  # the bootstrap's temporary tables stay in its datadir
    rocks = shlex.split(install_db_command(cell(engine="myrocks", block_size="4k"), "/d", "mysql"))
    assert not any(a.startswith("--innodb-page-size") for a in rocks)


def test_client_command_quotes_sql() -> None:
    argv = shlex.split(client_command("/run/x.sock", "SHOW GLOBAL VARIABLES LIKE 'innodb%'"))
    assert argv[:2] == ["mariadb", "--no-defaults"]
    assert "--socket=/run/x.sock" in argv
    assert argv[-2:] == ["-e", "SHOW GLOBAL VARIABLES LIKE 'innodb%'"]


def test_parse_tsv_pairs() -> None:
    text = ("innodb_buffer_pool_size\t134217728\n"
            "version\t10.11.19-MariaDB-0+deb12u1\n"
            "init_connect\t\n"
            "odd\tvalue\twith tab\n"
            "\n"
            "lonely_name\n")
    assert parse_tsv_pairs(text) == {
        "innodb_buffer_pool_size": "134217728",
        "version": "10.11.19-MariaDB-0+deb12u1",
        "init_connect": "",
        "odd": "value\twith tab",
        "lonely_name": "",
    }
    assert parse_tsv_pairs("") == {}


# -- every engine x factor level renders, redo/WAL on another medium, engine-specific constants -----


ENGINE_LEVELS = [
    (e, c, b, pct)
    for e, comps in (("innodb", ("none", "lz4", "zlib", "row_compressed")),
                     ("myrocks", ("none", "lz4", "zlib", "zstd", "snappy")))
    for c in comps for b in ("4k", "8k", "16k", "32k", "64k") for pct in (0, 25, 100)
    if not (c == "row_compressed" and b in ("32k", "64k"))  # rejected at plan time (test_spec)
]


@pytest.mark.parametrize(("engine", "compression", "block_size", "cache_pct"), ENGINE_LEVELS)
def test_every_engine_and_level_renders(engine: str, compression: str, block_size: str, cache_pct: float) -> None:
    c = cell(engine, cache_pct, block_size, compression)
    o = opts(c, cache=cache_bytes(c, 100 * MiB))
    assert o[0] == "--no-defaults" and len(o) == len(set(o))
    size = int(block_size[:-1]) * 1024
    if engine == "innodb":
        assert f"--innodb-page-size={block_size}" in o
        assert not any(x.startswith("--rocksdb") for x in o)
        assert ("--plugin-load-add=provider_lz4" in o) == (compression == "lz4")
        if compression in ("lz4", "zlib"):
            assert f"--innodb-compression-algorithm={compression}" in o
        pool = next(x for x in o if x.startswith("--innodb-buffer-pool-size="))
        assert int(pool.split("=")[1]) >= INNODB_MIN_BUFFER_POOL[block_size]
    else:
        assert "--plugin-load-add=ha_rocksdb.so" in o and f"--rocksdb-block-size={size}" in o
        cf = next(x for x in o if x.startswith("--rocksdb-default-cf-options="))
        assert cf.endswith({"none": "kNoCompression", "lz4": "kLZ4Compression", "zlib": "kZlibCompression",
                            "zstd": "kZSTD", "snappy": "kSnappyCompression"}[compression])
        cache = next(x for x in o if x.startswith("--rocksdb-block-cache-size="))
        assert int(cache.split("=")[1]) >= ROCKSDB_MIN_BLOCK_CACHE
        assert "--rocksdb-use-direct-reads=ON" in o


def test_log_dir_moves_redo_or_wal() -> None:
    inno = render_options(cell(), PATHS, user="root", cache=None, log_dir="/mnt/log/logdir")
    assert "--innodb-log-group-home-dir=/mnt/log/logdir" in inno
    rocks = render_options(cell("myrocks"), PATHS, user="root", cache=None, log_dir="/mnt/log/logdir")
    assert "--rocksdb-wal-dir=/mnt/log/logdir" in rocks
    assert not any("log-group-home" in x for x in rocks)
    assert not any("wal-dir" in x or "log-group-home" in x for x in opts(cell()))


def test_rocksdb_constants_apply_to_myrocks_cells_only() -> None:
    constants = {"rocksdb_flush_log_at_trx_commit": "1", "innodb_flush_log_at_trx_commit": "1"}
    assert constants_for(cell(), constants) == {"innodb_flush_log_at_trx_commit": "1"}
    assert constants_for(cell("myrocks"), constants) == constants
    assert "--rocksdb-flush-log-at-trx-commit=1" in opts(cell("myrocks"), constants=constants)
    assert "--rocksdb-flush-log-at-trx-commit=1" not in opts(cell(), constants=constants)
    with pytest.raises(SpecError, match="server_options.rocksdb_wal_dir"):
        opts(cell(), constants={"rocksdb_wal_dir": "/x"})


def test_server_command_prefix_keeps_mariadbd_the_exec_target() -> None:
    server = MariaDBServer(None, PATHS, ["--no-defaults"], prefix=["taskset", "-c", "0"])  # type: ignore[arg-type]
    assert server.command == "taskset -c 0 mariadbd --no-defaults"
