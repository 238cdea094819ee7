"""The pure parts of the plan-time refusals: the host's option list parsed from a captured
``mariadbd --verbose --help`` (tests/fixtures/mariadbd/, MariaDB 10.11.19 with and without the RocksDB
plugin), mariadbd's messages, dataset size bounds against media, control characters in specs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dbmatrix.hosts import server_options as so
from dbmatrix.hosts.capacity import parse_df, recipe_capacity
from dbmatrix.hosts.inventory import localhost_inventory, parse_medium
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.run import preflight
from dbmatrix.spec.experiment import SpecError, parse_experiment
from dbmatrix.spec.sizing import Capacity, check_capacity, datadir_lower_bound, parse_server_size

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "mariadbd"
HELP = (FIX / "help-10.11.19.txt").read_text()
HELP_ROCKSDB = (FIX / "help-10.11.19-rocksdb.txt").read_text()
GiB = 2**30


def spec(**over: object) -> dict:
    base = {"experiment": "t", "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 10_000},
            "factors": {"engine": "innodb", "cache_pct": 100, "block_size": "16k", "compression": "none",
                        "medium": "disk", "threads": 2},
            "repetitions": 1, "warmup_s": 1, "measure_s": 3}
    base.update(over)
    return base


# ---------------------------------------------------------------- the help output

def test_help_lists_options_with_kinds_defaults_and_choices() -> None:
    opts = so.parse_help(HELP)
    assert opts.version == "10.11.19-MariaDB-0+deb12u1"
    assert len(opts.options) > 700
    assert opts.options["max_connections"] == so.OptionInfo("number", "151")
    assert opts.options["innodb_doublewrite"].kind == "bool"
    flush = opts.options["innodb_flush_method"]
    assert flush.kind == "enum" and flush.choices == ("fsync", "O_DSYNC", "littlesync", "nosync", "O_DIRECT",
                                                      "O_DIRECT_NO_FSYNC")
    assert opts.options["transaction_isolation"].choices[-1] == "SERIALIZABLE"
    assert opts.options["sql_mode"].kind == "set" and "STRICT_TRANS_TABLES" in opts.options["sql_mode"].choices
    assert "plugin_load_add" in opts.options  # listed as an option, not in the variables table
    assert "datadir" in opts.options  # in the variables table only


def test_rocksdb_options_appear_only_with_the_plugin() -> None:
    plain, rocks = so.parse_help(HELP), so.parse_help(HELP_ROCKSDB, ["ha_rocksdb.so"])
    assert not plain.known("rocksdb_block_size")
    assert rocks.known("rocksdb_block_size") and rocks.plugins == ("ha_rocksdb.so",)
    assert rocks.options["rocksdb_use_direct_reads"].kind == "bool"
    assert len(rocks.options) - len(plain.options) > 150


def test_names_resolve_with_mariadbd_prefixes_and_suggest_close_matches() -> None:
    opts = so.parse_help(HELP)
    assert opts.resolve("innodb-flush-method") == "innodb_flush_method"
    assert opts.resolve("skip_innodb_doublewrite") == "innodb_doublewrite"  # boolean: skip_ = OFF
    assert opts.resolve("skip_max_connections") is None  # not a boolean
    assert opts.resolve("loose_max_connections") == "max_connections"
    assert opts.resolve("innodb_bufer_pool_instancez") is None
    assert opts.suggest("max_conections")[0] == "max_connections"
    assert opts.suggest("innodb_flush_methd")[0] == "innodb_flush_method"
    assert opts.suggest("zzzz") == []


def test_option_list_is_cached_per_host_version_and_plugins(tmp_path: Path) -> None:
    host = ScriptedHost("h", strict=True)
    host.on("mariadbd --no-defaults --verbose --help", stdout="@@help 0\n" + HELP)
    first = so.option_list(host, "h@local:22", "10.11.19", (), root=tmp_path)
    again = so.option_list(host, "h@local:22", "10.11.19", (), root=tmp_path)
    assert host.count("--verbose --help") == 1  # the second came from the cache
    assert again == first and again.options["max_connections"].default == "151"
    so.option_list(host, "h@local:22", "10.11.20", (), root=tmp_path)  # an upgrade: a new list
    assert host.count("--verbose --help") == 2
    assert so.cache_path("h", "v", ()) != so.cache_path("h", "v", ("ha_rocksdb.so",))


def test_messages_drop_timestamps_noise_and_the_machines_limits() -> None:
    err = ("2026-11-23 13:33:04 0 [Warning] Could not increase number of max_open_files to more than 20000 "
           "(request: 34033)\n"
           "2026-11-23 13:33:04 0 [ERROR] Buffered error: Unknown suffix 'l' used for variable "
           "'max_connections' (value 'lots'). Legal suffix characters are: K, M, G, T, P, E\n")
    assert so.option_messages(err) == ["[ERROR] Unknown suffix 'l' used for variable 'max_connections' "
                                       "(value 'lots'). Legal suffix characters are: K, M, G, T, P, E"]
    charset = ("mariadbd: Character set 'nope' is not a compiled character set and is not specified in the "
               "'/usr/share/mysql/charsets/Index.xml' file\n")
    assert so.option_messages("\a" + charset + "\a" + charset) == [charset.strip()]  # untagged, printed twice: once
    base = ["[Warning] something the server always says"]
    assert so.new_messages("2026-01-01 00:00:00 0 [Warning] something the server always says\n", base) == []


def test_help_command_quotes_values_and_keeps_only_stderr() -> None:
    cmd = so.help_command(("ha_rocksdb.so",), [so.render("sql-mode", "A B")], stderr_only=True)
    assert cmd == ("mariadbd --no-defaults --plugin-load-add=ha_rocksdb.so '--sql-mode=A B' --verbose --help "
                   "2>&1 >/dev/null")


def test_option_error_names_the_field_and_the_allowed_values() -> None:
    opts = so.parse_help(HELP)
    unknown = preflight.option_error("max_conections", "10", ["[ERROR] mariadbd: unknown variable 'max-conections=10'"],
                                     opts, "db1", "10.11.19", "innodb")
    assert unknown.startswith("server_options.max_conections: not an option of mariadbd 10.11.19 on host db1")
    assert "did you mean max_connections" in unknown
    bad = preflight.option_error("innodb_flush_method", "bogus", ["[ERROR] Error while setting value"], opts, "db1",
                                 "10.11.19", "innodb")
    assert bad.startswith("server_options.innodb_flush_method: 'bogus' is refused by mariadbd 10.11.19")
    assert "allowed: one of fsync, O_DSYNC, littlesync, nosync, O_DIRECT, O_DIRECT_NO_FSYNC (default O_DIRECT)" in bad


# ---------------------------------------------------------------- control characters (pure, in the spec)

@pytest.mark.parametrize("value, words", [("O_DIRECT\nfsync", "newline (U+000A)"), ("a\tb", "tab (U+0009)"),
                                          ("x\x00", "(U+0000)"), ("x\u2028y", "(U+2028)")])
def test_control_characters_in_option_values_are_refused(value: str, words: str) -> None:
    with pytest.raises(SpecError, match=r"server_options\.innodb_flush_method: .* contains a control character, "
                       r".*" + re.escape(words)):
        parse_experiment(spec(server_options={"innodb_flush_method": value}))


@pytest.mark.parametrize("name", ["max connections", "--max_connections", "x;rm", "1abc"])
def test_option_names_must_be_names(name: str) -> None:
    with pytest.raises(SpecError, match="is not an option name; allowed: letters, digits"):
        parse_experiment(spec(server_options={name: 1}))


def test_ordinary_option_values_pass_the_pure_check() -> None:
    exp = parse_experiment(spec(server_options={"innodb_log_file_size": "96M", "innodb_doublewrite": True,
                                                "sql_mode": "STRICT_TRANS_TABLES,NO_ZERO_DATE"}))
    assert exp.server_options["innodb_doublewrite"] == "ON"


def test_an_empty_option_value_is_refused() -> None:
    with pytest.raises(SpecError, match=r"server_options\.max_connections: None must be one value"):
        parse_experiment(spec(server_options={"max_connections": None}))


# ---------------------------------------------------------------- sizes

def test_size_bound_uses_the_smallest_measured_bytes_per_row() -> None:
    b = datadir_lower_bound("innodb", "none", "oltp", 64, 10**9, 96 * 2**20)
    assert b.data_bytes == 64 * 10**9 * 300
    assert b.datadir_bytes == b.data_bytes + 96 * 2**20 + 16 * 2**20
    # the quick dataset measured 79.7 MB of tables and 265 MB of datadir: the bound is below both
    q = datadir_lower_bound("innodb", "none", "oltp", 4, 50_000, 96 * 2**20)
    assert q.data_bytes < 79_708_160 and q.datadir_bytes < 265_338_880
    for engine, comp, measured in (("innodb", "lz4", 47_284_224), ("myrocks", "none", 42_516_480),
                                   ("myrocks", "lz4", 40_853_504)):
        assert datadir_lower_bound(engine, comp, "oltp", 4, 50_000, 0).data_bytes < measured
    assert datadir_lower_bound("innodb", "none", "tpcc", 1, 1, 0).data_bytes < 149_553_152
    assert datadir_lower_bound("myrocks", "zstd", "oltp", 1, 1000, 0).data_bytes < \
        datadir_lower_bound("myrocks", "none", "oltp", 1, 1000, 0).data_bytes


def test_server_sizes_parse_like_mariadbd() -> None:
    assert parse_server_size("96M") == 96 * 2**20
    assert parse_server_size("6G") == 6 * GiB
    assert parse_server_size("100663296") == 100663296
    assert parse_server_size("1.5G") is None


def test_check_capacity_says_the_numbers() -> None:
    need = {"ds": datadir_lower_bound("innodb", "none", "oltp", 64, 10**9, 96 * 2**20)}
    with pytest.raises(SpecError) as e:
        check_capacity(need, Capacity(4 * GiB, "tmpfs size=4G"), where="workload.table_size",
                       what="medium 'tmpfs'")
    msg = str(e.value)
    assert msg.startswith("workload.table_size: dataset ds needs at least 17.5 TiB on medium 'tmpfs'")
    assert "64 tables x 1000000000 rows x >= 300 bytes per row" in msg and "holds 4.0 GiB (tmpfs size=4G)" in msg
    check_capacity({"ds": datadir_lower_bound("innodb", "none", "oltp", 4, 50_000, 0)}, Capacity(4 * GiB, "x"),
                   where="w", what="m")  # fits: no error


def test_recipe_capacity_of_media_kinds() -> None:
    def m(raw: dict) -> object:
        return parse_medium(raw, host="h", name="m", workdir="/w")

    assert recipe_capacity(m({"kind": "tmpfs", "size": "4G"})).bytes == 4 * GiB  # type: ignore[union-attr]
    assert recipe_capacity(m({"kind": "loop", "size": "10G", "partition_pct": 60})).bytes == 6 * GiB  # type: ignore[union-attr]
    assert recipe_capacity(m({"kind": "throttled", "read_iops": 100,  # type: ignore[union-attr]
                              "base": {"kind": "loop", "size": "2G"}})).bytes == 2 * GiB
    assert recipe_capacity(m({"kind": "dir"})) is None  # only the host knows


def test_parse_df() -> None:
    cap = parse_df("   1B-blocks Mounted on\n270553174016 /\n", "/var/tmp/x")
    assert cap == Capacity(270553174016, "size of the file system at / holding /var/tmp/x (df)", "/")
    assert parse_df("", "/x") is None


def test_a_dataset_too_large_for_tmpfs_is_refused_before_connecting() -> None:
    exp = parse_experiment(spec(workload={"name": "oltp_read_write", "tables": 64, "table_size": 10**9},
                                factors={"engine": "innodb", "cache_pct": 100, "block_size": "16k",
                                         "compression": "none", "medium": "tmpfs", "threads": 2}))
    hs = localhost_inventory("/w").hosts[0]
    with pytest.raises(SpecError, match=r"workload.table_size: .* on medium 'tmpfs' of host 'localhost'"):
        preflight.check_sizes(exp, hs, {})


def test_a_dir_medium_on_the_workdirs_file_system_holds_two_copies() -> None:
    exp = parse_experiment(spec(workload={"name": "oltp_read_write", "tables": 4, "table_size": 100_000_000}))
    hs = localhost_inventory("/w").hosts[0]
    root = Capacity(200 * GiB, "df /", "/")
    preflight.check_sizes(exp, hs, {"medium:disk": Capacity(500 * GiB, "df /data", "/data"), "workdir": root})
    with pytest.raises(SpecError, match=r"needs at least .* \(2 x .*: the snapshot and a run's copy share"):
        preflight.check_sizes(exp, hs, {"medium:disk": root, "workdir": root})


def test_engine_plugins_and_constants_follow_the_rendered_command_line() -> None:
    exp = parse_experiment(spec(factors={"engine": ["innodb", "myrocks"], "cache_pct": 100, "block_size": "16k",
                                         "compression": ["none", "lz4"], "medium": "disk", "threads": 2},
                                server_options={"rocksdb_max_open_files": 100, "max_connections": 50}))
    assert preflight.engine_plugins(exp) == {"innodb": ("provider_lz4",), "myrocks": ("ha_rocksdb.so",)}
    consts = preflight.engine_constants(exp)
    assert consts["innodb"] == {"max_connections": "50"}
    assert consts["myrocks"] == {"max_connections": "50", "rocksdb_max_open_files": "100"}


# ---------------------------------------------------------------- a host not set up

def test_the_tools_a_run_calls_follow_its_media_and_topology() -> None:
    hs = localhost_inventory("/w").hosts[0]
    plain = preflight.run_tools(parse_experiment(spec()), hs)
    assert plain == {"findmnt": "util-linux", "iostat": "sysstat", "mpstat": "sysstat", "pidstat": "sysstat",
                     "sysbench": "sysbench", "vmstat": "procps"}
    remote = preflight.run_tools(parse_experiment(spec(factors={
        "engine": "innodb", "cache_pct": 100, "block_size": "16k", "compression": "none", "medium": "remote",
        "threads": 2})), hs)
    assert {"nbdkit": "nbdkit", "nbdfuse": "libnbd-bin", "fusermount3": "fuse3", "mkfs.xfs": "xfsprogs",
            "tc": "iproute2"}.items() <= remote.items()
    galera = preflight.run_tools(parse_experiment(spec(topology={"kind": "galera", "nodes": 3})), hs)
    assert galera["/usr/lib/galera/libgalera_smm.so"] == "galera-4" and galera["rsync"] == "rsync"


def test_the_tools_command_names_what_the_shell_cannot_find(tmp_path: Path) -> None:
    import subprocess

    there = tmp_path / "provider.so"
    there.write_text("")
    cmd = preflight.tools_command(["sh", "no-such-tool-xyz", str(there), str(tmp_path / "gone.so")])
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["no-such-tool-xyz", str(tmp_path / "gone.so")]


def test_a_host_without_mariadbd_or_sysbench_is_not_set_up_and_run_refuses(tmp_path: Path) -> None:
    """The host's one round trip, as a fresh Debian machine answers it: no mariadbd (exit 127), no sysbench."""
    from dbmatrix.hosts.remote import HostError

    exp = parse_experiment(spec())
    hs = localhost_inventory(str(tmp_path)).hosts[0]
    host = ScriptedHost("localhost")
    host.on(r"printf .@@%s", stdout=("@@workdir 0\n270553174016 /\n@@medium:disk 0\n270553174016 /\n@@tools 0\nsysbench\nmpstat\n"
                                "@@system.version 127\nsh: 1: mariadbd: not found\n"))
    checked = preflight.check_host(host, hs, exp)
    assert checked.missing == {"mariadbd": "mariadb-server", "sysbench": "sysbench", "mpstat": "sysstat"}
    assert checked.version is None
    with pytest.raises(HostError) as ei:
        preflight.refuse_unready([checked], "t")
    assert ei.value.host == "localhost"
    assert ei.value.message == ("not set up for study t: missing mariadbd (package mariadb-server), sysbench "
                                "(package sysbench), mpstat (package sysstat)")
    assert "dbmatrix setup --roles server" in ei.value.hint and "nothing was run" in ei.value.hint
    preflight.refuse_unready([preflight.HostCheck("localhost", "10.11.19")], "t")  # set up: no refusal
