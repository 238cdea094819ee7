"""Tests of dbmatrix.spec.factors: each factor's validation (good and bad levels, the field named), defaults,
labels and wording, cell-id tags, and that the registry is the only source of the factor lists."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbmatrix.analyse import contrasts, tables
from dbmatrix.spec import experiment
from dbmatrix.spec.experiment import (
    Cell,
    SpecError,
    _levels,
    load_spec,
    parse_experiment,
)
from dbmatrix.spec.factors import (
    BY_NAME,
    DATASET_FACTORS,
    FACTOR_DEFAULTS,
    FACTORS,
    GALERA_FACTORS,
    MODEL_FACTORS,
    REGISTRY,
    Factor,
    cell_id,
    factor,
    factor_label,
    factor_unit,
    factor_word,
)
from dbmatrix.study import recorded_design

REPO = Path(__file__).resolve().parents[2]

# -- the registry is the only source -------------------------------------------------------------------


def test_factor_lists_derive_from_the_registry_in_order() -> None:
    assert FACTORS == ("engine", "cache_pct", "block_size", "compression", "medium", "threads", "workload",
                       "log_medium", "rate_fraction", "slave_threads", "write_to", "follower_medium", "instances",
                       "pinning", "group_commit", "index_cache", "server_build")
    assert tuple(f.name for f in REGISTRY) == FACTORS
    assert list(FACTOR_DEFAULTS) == list(FACTORS)
    assert dict(FACTOR_DEFAULTS) == {f.name: f.default for f in REGISTRY}
    assert GALERA_FACTORS == ("slave_threads", "write_to", "follower_medium")
    assert DATASET_FACTORS == ("engine", "block_size", "compression", "workload", "server_build")
    assert tuple(f for f in FACTORS if f != "rate_fraction") == MODEL_FACTORS
    assert list(BY_NAME) == list(FACTORS) and all(BY_NAME[f.name] is f for f in REGISTRY)
    assert all(isinstance(f, Factor) for f in REGISTRY)


def test_experiment_reexports_the_registry_names() -> None:
    from dbmatrix.spec import errors, factors
    for name in ("FACTORS", "FACTOR_DEFAULTS", "GALERA_FACTORS", "ENGINES", "BLOCK_SIZES", "COMPRESSIONS",
                 "WORKLOADS", "WORKLOAD_TAGS", "MAX_RATE_FRACTION", "block_size_bytes"):
        assert getattr(experiment, name) is getattr(factors, name), name
    assert experiment.SpecError is errors.SpecError is factors.SpecError


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        FACTOR_DEFAULTS["threads"] = 8  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        REGISTRY[0].default = "myrocks"  # type: ignore[misc]


def test_cell_fields_match_the_registry() -> None:
    fields = dataclasses.fields(Cell)
    assert tuple(f.name for f in fields) == FACTORS
    for f in fields:
        if f.default is not dataclasses.MISSING:
            assert f.default == FACTOR_DEFAULTS[f.name], f.name


def test_old_scattered_dicts_are_gone() -> None:
    assert not hasattr(tables, "FACTOR_LABELS")
    assert not hasattr(tables, "baseline_factor")
    assert not hasattr(contrasts, "FACTOR_WORDS")


def test_unknown_factor_names_the_allowed_ones() -> None:
    with pytest.raises(SpecError, match=r"^factors: unknown factor 'colour'; allowed: engine, cache_pct, "):
        factor("colour")
    assert factor("threads") is BY_NAME["threads"]


# -- defaults -----------------------------------------------------------------------------------------


def test_defaults() -> None:
    assert dict(FACTOR_DEFAULTS) == {
        "engine": "innodb", "cache_pct": 100, "block_size": "16k", "compression": "none", "medium": "disk",
        "threads": 4, "workload": "oltp_read_write", "log_medium": "same", "rate_fraction": 0,
        "slave_threads": 1, "write_to": "node1", "follower_medium": "same", "instances": 1, "pinning": "none",
        "group_commit": 0, "index_cache": "cache", "server_build": "system"}


@pytest.mark.parametrize("name", FACTORS)
def test_default_is_a_valid_canonical_level(name: str) -> None:
    f = factor(name)
    assert f.check(f.default) == f.default
    assert _levels(name, f.default) == (f.default,)


def test_a_spec_without_factors_gets_every_default() -> None:
    exp = parse_experiment({"experiment": "defaults"})
    assert exp.factors == {f: (FACTOR_DEFAULTS[f],) for f in FACTORS}
    assert exp.cells() == [Cell(**FACTOR_DEFAULTS)]


# -- validation of one level --------------------------------------------------------------------------

GOOD: list[tuple[str, Any, Any]] = [
    ("engine", "innodb", "innodb"), ("engine", "myrocks", "myrocks"),
    ("cache_pct", 0, 0), ("cache_pct", 100, 100), ("cache_pct", 25.0, 25), ("cache_pct", 12.5, 12.5),
    ("block_size", "4k", "4k"), ("block_size", "16K", "16k"), ("block_size", "64k", "64k"),
    ("compression", "none", "none"), ("compression", "lz4", "lz4"), ("compression", "zstd", "zstd"),
    ("compression", "row_compressed", "row_compressed"), ("compression", "snappy", "snappy"),
    ("medium", "disk", "disk"), ("medium", "emulated:pmem", "emulated:pmem"),
    ("threads", 1, 1), ("threads", 64, 64),
    ("workload", "oltp_read_only", "oltp_read_only"), ("workload", "tpcc", "tpcc"),
    ("log_medium", "same", "same"), ("log_medium", "tmpfs", "tmpfs"),
    ("rate_fraction", "closed", 0), ("rate_fraction", None, 0), ("rate_fraction", 0.0, 0),
    ("rate_fraction", 0.5, 0.5), ("rate_fraction", 2, 2), ("rate_fraction", 1.0, 1),
    ("slave_threads", 1, 1), ("slave_threads", 512, 512),
    ("write_to", "node1", "node1"), ("write_to", 3, "node3"), ("write_to", "node12", "node12"),
    ("write_to", "all", "all"), ("follower_medium", "same", "same"), ("follower_medium", "slow", "slow"),
    ("instances", 1, 1), ("instances", 16, 16), ("pinning", "none", "none"), ("pinning", None, "none"),
    ("pinning", "instance", "instance"), ("pinning", "numa", "numa"),
    ("group_commit", 0, 0), ("group_commit", "off", 0), ("group_commit", 1000, 1000),
    ("group_commit", 1_000_000, 1_000_000), ("index_cache", "cache", "cache"), ("index_cache", "table", "table"),
    ("server_build", "system", "system"), ("server_build", "mariadb10_11_18", "mariadb10_11_18"),
]


@pytest.mark.parametrize(("name", "raw", "expected"), GOOD)
def test_good_levels_are_normalised(name: str, raw: Any, expected: Any) -> None:
    got = factor(name).check(raw)
    assert got == expected and type(got) is type(expected)


def test_every_factor_has_good_and_bad_cases() -> None:
    assert {n for n, _, _ in GOOD} == set(FACTORS)
    assert {n for n, _, _ in BAD} == set(FACTORS)


RATE_ALLOWED = ("allowed: 'closed' (or 0) for closed-loop runs, or a fraction in (0, 2] of the cell's measured "
                "closed-loop throughput for open-loop (--rate) runs")
WRITE_ALLOWED = ("allowed: 'node1', 'node2', ... (the client writes to that node) or 'all' (client threads "
                 "spread over every node)")
CACHE_ALLOWED = "allowed: numbers from 0 (the smallest cache the engine allows) to 100"
# (factor, bad level, the whole message: unchanged from before the registry)
BAD: list[tuple[str, Any, str]] = [
    ("engine", "postgres", "factors.engine: unknown level 'postgres'; allowed: innodb, myrocks"),
    ("engine", None, "factors.engine: unknown level None; allowed: innodb, myrocks"),
    ("cache_pct", -1, f"factors.cache_pct: -1 is not a percentage; {CACHE_ALLOWED}"),
    ("cache_pct", 101, f"factors.cache_pct: 101 is not a percentage; {CACHE_ALLOWED}"),
    ("cache_pct", "50", f"factors.cache_pct: '50' is not a percentage; {CACHE_ALLOWED}"),
    ("cache_pct", True, f"factors.cache_pct: True is not a percentage; {CACHE_ALLOWED}"),
    ("block_size", "2k", "factors.block_size: unknown level '2k'; allowed: 4k, 8k, 16k, 32k, 64k"),
    ("block_size", "128K", "factors.block_size: unknown level '128k'; allowed: 4k, 8k, 16k, 32k, 64k"),
    ("block_size", 16, "factors.block_size: unknown level '16'; allowed: 4k, 8k, 16k, 32k, 64k"),
    ("compression", "brotli",
     "factors.compression: unknown level 'brotli'; allowed: lz4, none, row_compressed, snappy, zlib, zstd"),
    ("compression", "ZSTD",
     "factors.compression: unknown level 'ZSTD'; allowed: lz4, none, row_compressed, snappy, zlib, zstd"),
    ("medium", "", "factors.medium: '' must be the name of a medium in the inventory"),
    ("medium", 3, "factors.medium: 3 must be the name of a medium in the inventory"),
    ("threads", 0, "factors.threads: 0 must be a positive integer"),
    ("threads", 2.5, "factors.threads: 2.5 must be a positive integer"),
    ("threads", True, "factors.threads: True must be a positive integer"),
    ("threads", "4", "factors.threads: '4' must be a positive integer"),
    ("workload", "tpc-h", ("factors.workload: unknown workload 'tpc-h'; allowed: oltp_read_write, "
                           "oltp_read_only, oltp_point_select, oltp_write_only, tpcc")),
    ("log_medium", "", ("factors.log_medium: '' must be 'same' (redo log/WAL with the data) or the name of a "
                        "medium in the inventory")),
    ("log_medium", 0, ("factors.log_medium: 0 must be 'same' (redo log/WAL with the data) or the name of a "
                       "medium in the inventory")),
    ("follower_medium", "", ("factors.follower_medium: '' must be 'same' (every Galera node on the cell's medium) "
                             "or the name of a medium in the inventory for nodes 2..N")),
    ("rate_fraction", 3, f"factors.rate_fraction: 3 is not allowed; {RATE_ALLOWED}"),
    ("rate_fraction", -0.5, f"factors.rate_fraction: -0.5 is not allowed; {RATE_ALLOWED}"),
    ("rate_fraction", "open", f"factors.rate_fraction: 'open' is not allowed; {RATE_ALLOWED}"),
    ("rate_fraction", True, f"factors.rate_fraction: True is not allowed; {RATE_ALLOWED}"),
    ("slave_threads", 0, ("factors.slave_threads: 0 must be an integer from 1 to 512 (wsrep_slave_threads of "
                          "every Galera node)")),
    ("slave_threads", 513, ("factors.slave_threads: 513 must be an integer from 1 to 512 (wsrep_slave_threads "
                            "of every Galera node)")),
    ("slave_threads", 2.0, ("factors.slave_threads: 2.0 must be an integer from 1 to 512 (wsrep_slave_threads "
                            "of every Galera node)")),
    ("write_to", "leader", f"factors.write_to: 'leader' is not allowed; {WRITE_ALLOWED}"),
    ("write_to", 0, f"factors.write_to: 'node0' is not allowed; {WRITE_ALLOWED}"),
    ("write_to", "node", f"factors.write_to: 'node' is not allowed; {WRITE_ALLOWED}"),
    ("write_to", True, f"factors.write_to: True is not allowed; {WRITE_ALLOWED}"),
    ("instances", 0, ("factors.instances: 0 must be an integer from 1 to 64 (server instances of the run, dealt "
                      "over topology.hosts)")),
    ("instances", "2", ("factors.instances: '2' must be an integer from 1 to 64 (server instances of the run, "
                        "dealt over topology.hosts)")),
    ("pinning", "socket", ("factors.pinning: unknown level 'socket'; allowed: none (no CPU sets), instance (one "
                           "CPU set per instance on its host), numa (instances grouped per NUMA node)")),
    *(("group_commit", raw, f"factors.group_commit: {raw!r} is not allowed; allowed: 0 or 'off' (MariaDB's "
        "default: binlog_commit_wait_count 0, commits group only when they queue behind a sync) or the microseconds, "
        "1 to 1000000, the group's leader waits for the cell's client threads to join it (binlog_commit_wait_usec; "
        "needs server_options.log_bin)") for raw in ("on", -5, 2_000_000, True)),
    ("index_cache", "pinned", ("factors.index_cache: unknown level 'pinned'; allowed: cache (MyRocks' default: "
                               "index and filter blocks compete with data blocks in the block cache) or table "
                               "(index and filter blocks held by the table readers, outside the block cache: "
                               "rocksdb_cache_index_and_filter_blocks OFF); MyRocks only")),
    *(("server_build", raw, f"factors.server_build: {raw!r} must be 'system' (the host's installed server) or the "
       "name of a build in the host's inventory (lower-case letters, digits, '_')") for raw in ("10.11", 3, "A")),
]


@pytest.mark.parametrize(("name", "raw", "message"), BAD)
def test_bad_levels_name_the_field_and_what_is_allowed(name: str, raw: Any, message: str) -> None:
    with pytest.raises(SpecError) as ei:
        factor(name).check(raw)
    assert str(ei.value) == message
    assert message.startswith(f"factors.{name}: ")


@pytest.mark.parametrize(("name", "raw", "message"), BAD)
def test_bad_levels_fail_a_spec_with_the_same_message(name: str, raw: Any, message: str) -> None:
    raw_spec: dict[str, Any] = {"experiment": "x", "factors": {name: [raw]}}
    if factor(name).galera_only:
        raw_spec["topology"] = {"kind": "galera"}
    with pytest.raises(SpecError) as ei:
        parse_experiment(raw_spec)
    assert str(ei.value) == message


@pytest.mark.parametrize("name", FACTORS)
def test_levels_need_one_and_no_duplicates(name: str) -> None:
    default = FACTOR_DEFAULTS[name]
    with pytest.raises(SpecError, match=rf"^factors\.{name}: needs at least one level$"):
        _levels(name, [])
    with pytest.raises(SpecError, match=rf"^factors\.{name}: level .* is listed twice$"):
        _levels(name, [default, default])


def test_duplicates_are_found_after_normalising() -> None:
    with pytest.raises(SpecError, match=r"factors.block_size: level '16k' is listed twice"):
        _levels("block_size", ["16k", "16K"])
    with pytest.raises(SpecError, match=r"factors.rate_fraction: level 0 is listed twice"):
        _levels("rate_fraction", ["closed", 0])
    with pytest.raises(SpecError, match=r"factors.write_to: level 'node2' is listed twice"):
        _levels("write_to", [2, "node2"])


def test_engine_dependent_levels_are_checked_per_cell_not_per_factor() -> None:
    # zstd is a compression of some engine, so the factor accepts it; InnoDB cells reject it.
    assert factor("compression").check("zstd") == "zstd"
    with pytest.raises(SpecError, match=r"^factors.compression: 'zstd' is not possible with engine 'innodb'"):
        parse_experiment({"experiment": "x", "factors": {"compression": "zstd"}})


def test_galera_only_factors_need_a_galera_topology() -> None:
    for name in GALERA_FACTORS:
        other = {"slave_threads": 4, "write_to": "all", "follower_medium": "slow"}[name]
        with pytest.raises(SpecError, match=rf"^factors\.{name}: only applies to a Galera cluster"):
            parse_experiment({"experiment": "x", "factors": {name: [FACTOR_DEFAULTS[name], other]}})
        exp = parse_experiment({"experiment": "x", "topology": {"kind": "galera"},
                                "factors": {name: [FACTOR_DEFAULTS[name], other]}})
        assert exp.factors[name] == (FACTOR_DEFAULTS[name], other)


# -- labels, wording -----------------------------------------------------------------------------------


def test_table_labels() -> None:
    assert {f: factor_label(f) for f in FACTORS} == {
        "engine": "Engine", "cache_pct": "Cache %", "block_size": "Page", "compression": "Compr.",
        "medium": "Medium", "threads": "Thr.", "workload": "Workload", "log_medium": "Log medium",
        "rate_fraction": "Rate", "slave_threads": "slave_threads", "write_to": "write_to",
        "follower_medium": "Followers", "instances": "Inst.", "pinning": "Pinning", "group_commit": "Group commit",
        "index_cache": "Index blocks", "server_build": "Build"}
    assert factor_label("residual") == "residual"  # not a factor: as it is


def test_claim_wording() -> None:
    assert {f: factor_word(f) for f in FACTORS} == {
        "engine": "engine", "cache_pct": "cache", "block_size": "block", "compression": "compression",
        "medium": "medium", "threads": "threads", "workload": "workload", "log_medium": "log_medium",
        "rate_fraction": "rate_fraction", "slave_threads": "appliers", "write_to": "write_to",
        "follower_medium": "followers' medium", "instances": "instances", "pinning": "pinning",
        "group_commit": "group-commit wait", "index_cache": "index blocks in", "server_build": "server build"}
    assert {f: factor_unit(f) for f in FACTORS if factor_unit(f)} == {"cache_pct": " %", "group_commit": " µs"}
    assert factor_word("tps") == "tps" and factor_unit("tps") == ""


def test_wording_reaches_the_claims_text() -> None:
    assert contrasts._compared("cache_pct", 25, 100, {"engine": "myrocks", "block_size": "4k"}) == \
        "cache 25 % / 100 % at engine myrocks, block 4k"
    assert contrasts._compared("slave_threads", 16, 1, {}) == "appliers 16 / 1"


def test_labels_reach_the_paper_tables() -> None:
    from dbmatrix.publish import paper_inputs
    assert paper_inputs._term_label("cache_pct x block_size") == "Cache % x Page"
    assert paper_inputs._term_label("residual") == "residual"


# -- cell ids -----------------------------------------------------------------------------------------


def _old_cell_id(c: Cell) -> str:
    """Cell.cell_id as it was written before the registry (the ids of stored results must not change)."""
    tags = {"oltp_read_write": "", "oltp_read_only": "ro", "oltp_point_select": "ps", "oltp_write_only": "wo",
            "tpcc": "tpcc"}
    pct = f"{c.cache_pct:g}".replace(".", "p")
    cid = f"{c.engine}-c{pct}-b{c.block_size}-{c.compression}-{c.medium}-t{c.threads}"
    if tags.get(c.workload, c.workload):
        cid += f"-{tags.get(c.workload, c.workload)}"
    if c.log_medium != "same":
        cid += f"-log{c.log_medium}"
    if c.rate_fraction:
        cid += f"-o{c.rate_fraction * 100:g}".replace(".", "p")
    if c.slave_threads != 1:
        cid += f"-st{c.slave_threads}"
    if c.write_to != "node1":
        cid += f"-w{c.write_to.removeprefix('node')}"
    return cid


@pytest.mark.parametrize("levels", [
    {},
    {"cache_pct": 12.5, "threads": 8, "compression": "lz4"},
    {"engine": "myrocks", "block_size": "4k", "compression": "zstd", "medium": "emulated:pmem"},
    {"workload": "oltp_point_select", "log_medium": "tmpfs", "rate_fraction": 0.75},
    {"workload": "tpcc", "rate_fraction": 1.5, "cache_pct": 0},
    {"workload": "oltp_write_only", "slave_threads": 16, "write_to": "all"},
    {"slave_threads": 4, "write_to": "node3", "threads": 32},
])
def test_cell_id_is_unchanged(levels: dict[str, Any]) -> None:
    cell = Cell(**{**FACTOR_DEFAULTS, **levels})
    assert cell.cell_id == _old_cell_id(cell) == cell_id(cell.levels())


def test_cell_id_tags() -> None:
    assert Cell(**FACTOR_DEFAULTS).cell_id == "innodb-c100-b16k-none-disk-t4"
    assert Cell("myrocks", 12.5, "8k", "zstd", "tmpfs", 16, "oltp_read_only", "nvme", 0.5, 8, "all").cell_id \
        == "myrocks-c12p5-b8k-zstd-tmpfs-t16-ro-lognvme-o50-st8-wall"
    # factors added after the first studies leave no tag at their default
    for name in ("workload", "log_medium", "rate_fraction", "slave_threads", "write_to", "follower_medium"):
        assert factor(name).tag(FACTOR_DEFAULTS[name]) is None, name


def test_reference_data_cell_ids_and_digests_are_reproduced() -> None:
    """The committed reference runs: every manifest's cell id from its levels, and each quick spec's digest
    and run ids as planned then."""
    manifests = sorted((REPO / "data" / "reference").glob("*/raw/*/manifest.json"))
    assert manifests
    for p in manifests:
        m = json.loads(p.read_text())
        assert Cell(**{**FACTOR_DEFAULTS, **m["cell"]}).cell_id == m["cell_id"], p
    profile = {REPO / p for p in yaml.safe_load((REPO / "notebooks" / "params" / "quick.yaml").read_text())["specs"]}
    for spec in sorted((REPO / "specs").glob("quick*.yaml")):
        exp = load_spec(spec)
        if spec not in profile and not (REPO / "data" / "reference" / exp.name).is_dir():
            continue  # a quick spec outside the profile (e.g. quick-scaleout) may have no reference data
        plan = json.loads((REPO / "data" / "reference" / exp.name / "plan.json").read_text())
        read = recorded_design(exp, REPO / "data" / "reference" / exp.name)
        if read is not exp:  # the spec's design changed after its reference (quick-tpcc): read as recorded
            assert [r.run_id for r in read.plan()] == [o["run_id"] for o in plan["order"]], spec
            continue
        # Reference data recorded before cache_basis is physical-basis (its spec has no key); the spec,
        # read at that basis, must give the recorded digest, and its manifests must say that basis.
        basis = plan["spec"].get("cache_basis", experiment.LEGACY_CACHE_BASIS)
        assert dataclasses.replace(exp, cache_basis=basis).digest() == plan["spec_digest"], spec
        for p in (REPO / "data" / "reference" / exp.name / "raw").glob("*/manifest.json"):
            assert json.loads(p.read_text()).get("cache_basis", experiment.LEGACY_CACHE_BASIS) == basis, p
        assert [r.run_id for r in exp.plan()] == [o["run_id"] for o in plan["order"]], spec


def test_digest_leaves_out_late_factors_at_their_default() -> None:
    omitted = {f.name for f in REGISTRY if f.digest_omits_default}
    assert omitted == {*GALERA_FACTORS, "instances", "pinning", "group_commit", "index_cache",
                       "server_build"}
    d = parse_experiment({"experiment": "x"}).to_dict()
    assert set(d["factors"]) == set(FACTORS) - omitted
    g = parse_experiment({"experiment": "x", "topology": {"kind": "galera"}, "factors": {"slave_threads": [1, 4]}})
    assert g.to_dict()["factors"]["slave_threads"] == [1, 4] and "write_to" not in g.to_dict()["factors"]


# -- group commit: options and the binary log ---------------------------------------------------------


def test_group_commit_renders_the_wait_and_needs_the_binary_log() -> None:
    from dbmatrix.run.mysqld import group_commit_options

    spec = {"experiment": "gc", "factors": {"threads": [2, 8], "group_commit": [0, 1000]},
            "server_options": {"log_bin": "binlog", "sync_binlog": 1}}
    exp = parse_experiment(spec)
    opts = {c.cell_id: group_commit_options(c) for c in exp.cells()}
    assert opts == {"innodb-c100-b16k-none-disk-t2": [], "innodb-c100-b16k-none-disk-t8": [],
                    "innodb-c100-b16k-none-disk-t2-gc1000": ["--binlog-commit-wait-count=2",
                                                             "--binlog-commit-wait-usec=1000"],
                    "innodb-c100-b16k-none-disk-t8-gc1000": ["--binlog-commit-wait-count=8",
                                                             "--binlog-commit-wait-usec=1000"]}
    with pytest.raises(SpecError, match=r"^factors.group_commit: a wait above 0 groups binary-log commits, but the "
                                        r"binary log is off; set server_options.log_bin"):
        parse_experiment({**spec, "server_options": {"sync_binlog": 1}})
    with pytest.raises(SpecError, match=r"^server_options.binlog_commit_wait_usec: set by a factor"):
        parse_experiment({**spec, "server_options": {"log_bin": "binlog", "binlog_commit_wait_usec": 10}})
    assert parse_experiment({**spec, "factors": {"threads": [2, 8]}}).digest() == parse_experiment(
        {**spec, "factors": {"threads": [2, 8], "group_commit": 0}}).digest()


def test_later_campaigns_run_the_allocation_and_the_digest_ignores_it() -> None:
    base = {"experiment": "x", "factors": {"threads": [2, 8]}, "repetitions": 3}
    exp = parse_experiment({**base, "campaigns": {"repetitions": 1}})
    assert exp.digest() == parse_experiment(base).digest()
    assert [exp.repetitions_in(k) for k in (1, 2, 5)] == [3, 1, 1]
    assert len(exp.plan(1)) == 6 and len(exp.plan(2)) == 2
    assert {r.block for r in exp.plan(3)} == {1}
    assert parse_experiment(base).repetitions_in(4) == 3
    with pytest.raises(SpecError, match=r"^campaigns.repetitions: 0 must be an integer >= 1"):
        parse_experiment({**base, "campaigns": {"repetitions": 0}})
    with pytest.raises(SpecError, match=r"^campaigns: .* must be a mapping with the keys repetitions .* and/or sentinel"):
        parse_experiment({**base, "campaigns": 1})


def test_index_cache_is_a_myrocks_setting_rendered_as_its_option() -> None:
    from dbmatrix.run.mysqld import ServerPaths, render_options

    exp = parse_experiment({"experiment": "ix", "factors": {"engine": "myrocks", "index_cache": ["cache", "table"]}})
    paths = ServerPaths.under("/r", "/d", "s")
    opts = {c.cell_id: render_options(c, paths, user="mysql", cache=1 << 20) for c in exp.cells()}
    flag = "--rocksdb-cache-index-and-filter-blocks=OFF"
    assert flag in opts["myrocks-c100-b16k-none-disk-t4-ixtable"]
    assert flag not in opts["myrocks-c100-b16k-none-disk-t4"]
    with pytest.raises(SpecError, match=r"^factors.index_cache: 'table' is a MyRocks setting; engine 'innodb'"):
        parse_experiment({"experiment": "ix", "factors": {"index_cache": ["cache", "table"]}})
    with pytest.raises(SpecError, match=r"^server_options.rocksdb_cache_index_and_filter_blocks: set by a factor"):
        parse_experiment({"experiment": "ix", "factors": {"engine": "myrocks"},
                          "server_options": {"rocksdb_cache_index_and_filter_blocks": "OFF"}})
