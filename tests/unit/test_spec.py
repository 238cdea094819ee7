"""Tests of dbmatrix.spec: validation messages, the full factorial, and the seeded replicate-block plan."""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.spec import (
    COMPRESSIONS,
    ENGINES,
    FACTORS,
    RAND_TYPES,
    TOP_LEVEL_KEYS,
    WORKLOADS,
    Cell,
    DatasetKey,
    Experiment,
    SpecError,
    Workload,
    check_media,
    load_spec,
    parse_experiment,
)

REPO = Path(__file__).resolve().parents[2]


def base_raw() -> dict[str, Any]:
    """A valid spec mapping in the format of specs/quick.yaml."""
    return {
        "experiment": "cache-sweep-test",
        "description": "unit-test spec",
        "workload": {"name": "oltp_read_write", "tables": 4, "table_size": 100000, "rand_type": "uniform"},
        "factors": {
            "engine": "innodb",
            "cache_pct": [25, 100],
            "block_size": "16k",
            "compression": "none",
            "medium": "disk",
            "threads": 4,
        },
        "repetitions": 3,
        "seed": 20261122,
        "warmup_s": 10,
        "measure_s": 30,
        "baseline": {"cache_pct": 100},
        "server_options": {
            "innodb_flush_log_at_trx_commit": 1,
            "innodb_doublewrite": True,
            "innodb-flush-method": "O_DIRECT",
        },
    }


def with_factors(**levels: Any) -> dict[str, Any]:
    raw = base_raw()
    raw["factors"] = {**raw["factors"], **levels}
    return raw


def spec_error(raw: Any) -> str:
    with pytest.raises(SpecError) as ei:
        parse_experiment(raw)
    return str(ei.value)


# -- parse_experiment on valid input ---------------------------------------------------------------


def test_parse_valid_mapping() -> None:
    exp = parse_experiment(base_raw())
    assert exp.name == "cache-sweep-test"
    assert exp.workload == Workload("oltp_read_write", 4, 100000, "uniform")
    assert exp.factors == {
        "engine": ("innodb",), "cache_pct": (25, 100), "block_size": ("16k",),
        "compression": ("none",), "medium": ("disk",), "threads": (4,),
    }
    assert exp.repetitions == 3 and exp.seed == 20261122
    assert (exp.warmup_s, exp.measure_s) == (10, 30)
    assert exp.baseline == {"cache_pct": 100}
    assert exp.run_timeout_s is None
    # option names normalised to underscores, values to MariaDB strings (booleans ON/OFF)
    assert exp.server_options == {
        "innodb_flush_log_at_trx_commit": "1",
        "innodb_doublewrite": "ON",
        "innodb_flush_method": "O_DIRECT",
    }
    assert exp.varied_factors() == ["cache_pct"]


def test_defaults_fill_missing_factors_and_workload() -> None:
    exp = parse_experiment({"experiment": "minimal"})
    assert exp.workload == Workload()
    assert exp.factors == {
        "engine": ("innodb",), "cache_pct": (100,), "block_size": ("16k",),
        "compression": ("none",), "medium": ("disk",), "threads": (4,),
    }
    assert exp.repetitions == 3
    assert len(exp.cells()) == 1


def test_levels_are_normalised() -> None:
    exp = parse_experiment(with_factors(block_size=["16K", "8k"], cache_pct=[25.0, 12.5, 100]))
    assert exp.factors["block_size"] == ("16k", "8k")
    assert exp.factors["cache_pct"] == (25, 12.5, 100)
    assert isinstance(exp.factors["cache_pct"][0], int)


def test_workload_as_a_name() -> None:
    raw = base_raw()
    raw["workload"] = "oltp_point_select"
    assert parse_experiment(raw).workload == Workload(name="oltp_point_select")


@pytest.mark.parametrize("path", sorted((REPO / "specs").glob("*.yaml")), ids=lambda p: p.name)
def test_repository_specs_are_valid(path: Path) -> None:
    exp = load_spec(path)
    assert exp.plan(), f"{path} plans no runs"
    assert exp.workload.rand_type == "uniform"  # methodology: cache sweeps need uniform access


# -- every error names the field and what is allowed -----------------------------------------------


def test_unknown_top_level_key() -> None:
    raw = base_raw()
    raw["repetition"] = 3
    msg = spec_error(raw)
    assert msg.startswith("spec:") and "repetition" in msg
    assert all(k in msg for k in TOP_LEVEL_KEYS)


def test_top_level_not_a_mapping() -> None:
    assert "mapping" in spec_error(["experiment", "x"])


def test_bad_experiment_name() -> None:
    raw = base_raw()
    raw["experiment"] = "has space"
    msg = spec_error(raw)
    assert msg.startswith("experiment:") and "letters, digits" in msg


def test_unknown_factor() -> None:
    msg = spec_error(with_factors(buffer=[1, 2]))
    assert msg.startswith("factors:") and "buffer" in msg
    assert all(f in msg for f in FACTORS)


def test_bad_engine() -> None:
    msg = spec_error(with_factors(engine="postgres"))
    assert msg.startswith("factors.engine:") and "'postgres'" in msg
    assert all(e in msg for e in ENGINES)


@pytest.mark.parametrize("bad", [150, -1, "x", True, 100.5])
def test_bad_cache_pct(bad: Any) -> None:
    msg = spec_error(with_factors(cache_pct=[25, bad]))
    assert msg.startswith("factors.cache_pct:")
    assert repr(bad) in msg
    assert "0" in msg and "100" in msg  # the allowed range


@pytest.mark.parametrize("ok", [0, 99.5, 0.5])
def test_cache_pct_bounds_accepted(ok: float) -> None:
    assert parse_experiment(with_factors(cache_pct=[ok, 100])).factors["cache_pct"] == (ok, 100)


@pytest.mark.parametrize("bad", ["3k", "128k", 16, "16kb"])
def test_bad_block_size(bad: Any) -> None:
    msg = spec_error(with_factors(block_size=bad))
    assert msg.startswith("factors.block_size:")
    assert "4k, 8k, 16k, 32k, 64k" in msg


def test_unknown_compression() -> None:
    msg = spec_error(with_factors(compression="brotli"))
    assert msg.startswith("factors.compression:") and "'brotli'" in msg
    for c in set().union(*COMPRESSIONS.values()):
        assert c in msg


def test_innodb_zstd_is_impossible_and_says_why() -> None:
    msg = spec_error(with_factors(compression="zstd"))
    assert msg.startswith("factors.compression:")
    assert "'zstd'" in msg and "'innodb'" in msg
    assert "no zstd provider" in msg  # the reason
    assert "none, lz4, zlib, row_compressed" in msg  # what innodb allows


def test_myrocks_row_compressed_is_impossible() -> None:
    msg = spec_error(with_factors(engine=["innodb", "myrocks"], compression="row_compressed"))
    assert "'myrocks'" in msg and "InnoDB table format" in msg


def test_row_compressed_with_32k_pages() -> None:
    msg = spec_error(with_factors(compression="row_compressed", block_size=["16k", "32k"]))
    assert "row_compressed" in msg and "'32k'" in msg
    assert "16k or less" in msg


def test_row_compressed_with_small_pages_is_fine() -> None:
    exp = parse_experiment(with_factors(compression="row_compressed", block_size=["4k", "8k", "16k"]))
    assert len(exp.cells()) == 2 * 3


@pytest.mark.parametrize("factor,levels", [
    ("cache_pct", [25, 25]),
    ("cache_pct", [25, 25.0]),
    ("block_size", ["16k", "16K"]),
    ("engine", ["innodb", "innodb"]),
    ("threads", [4, 8, 4]),
])
def test_duplicate_level(factor: str, levels: list[Any]) -> None:
    msg = spec_error(with_factors(**{factor: levels}))
    assert msg.startswith(f"factors.{factor}:") and "twice" in msg


def test_empty_level_list() -> None:
    assert spec_error(with_factors(threads=[])).startswith("factors.threads:")


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4"])
def test_bad_threads(bad: Any) -> None:
    msg = spec_error(with_factors(threads=bad))
    assert msg.startswith("factors.threads:") and "positive integer" in msg


def test_bad_medium() -> None:
    assert spec_error(with_factors(medium="")).startswith("factors.medium:")


def test_baseline_not_a_factor() -> None:
    raw = base_raw()
    raw["baseline"] = {"buffer_pool": 100}
    msg = spec_error(raw)
    assert msg.startswith("baseline.buffer_pool:") and "not a factor" in msg
    assert all(f in msg for f in FACTORS)


def test_baseline_level_not_in_spec() -> None:
    raw = base_raw()
    raw["baseline"] = {"cache_pct": 50}
    msg = spec_error(raw)
    assert msg.startswith("baseline.cache_pct:") and "50" in msg
    assert "[25, 100]" in msg  # the levels that are allowed


def test_bad_workload_name() -> None:
    raw = base_raw()
    raw["workload"] = {"name": "tpcc"}
    msg = spec_error(raw)
    assert msg.startswith("workload.name:") and "'tpcc'" in msg
    assert all(w in msg for w in WORKLOADS)


def test_bad_rand_type() -> None:
    raw = base_raw()
    raw["workload"] = {**raw["workload"], "rand_type": "zipf"}
    msg = spec_error(raw)
    assert msg.startswith("workload.rand_type:") and "'zipf'" in msg
    assert all(r in msg for r in RAND_TYPES)


def test_unknown_workload_key() -> None:
    raw = base_raw()
    raw["workload"] = {**raw["workload"], "rows": 10}
    msg = spec_error(raw)
    assert msg.startswith("workload:") and "rows" in msg
    assert "name, tables, table_size, rand_type" in msg


def test_workload_bad_type() -> None:
    raw = base_raw()
    raw["workload"] = 42
    assert spec_error(raw).startswith("workload:")


def test_bad_workload_tables_names_the_field_path() -> None:
    raw = base_raw()
    raw["workload"] = {**raw["workload"], "tables": 0}
    assert spec_error(raw).startswith("workload.tables:")


def test_bad_workload_tables_is_rejected() -> None:
    raw = base_raw()
    raw["workload"] = {**raw["workload"], "table_size": -5}
    msg = spec_error(raw)
    assert "table_size" in msg and ">= 1" in msg


@pytest.mark.parametrize("bad", ["abc", 1.5, True, None])
def test_non_integer_seed(bad: Any) -> None:
    raw = base_raw()
    raw["seed"] = bad
    msg = spec_error(raw)
    assert msg.startswith("seed:") and "integer" in msg


@pytest.mark.parametrize("key,bad", [
    ("repetitions", 0), ("repetitions", -1), ("repetitions", 2.0), ("repetitions", True),
    ("measure_s", 0), ("warmup_s", -1), ("run_timeout_s", 0),
])
def test_bad_counts(key: str, bad: Any) -> None:
    raw = base_raw()
    raw[key] = bad
    msg = spec_error(raw)
    assert msg.startswith(f"{key}:") and "integer >=" in msg


def test_warmup_zero_is_allowed() -> None:
    raw = base_raw()
    raw["warmup_s"] = 0
    assert parse_experiment(raw).warmup_s == 0


def test_server_options_must_be_a_mapping() -> None:
    raw = base_raw()
    raw["server_options"] = ["innodb_doublewrite=ON"]
    assert spec_error(raw).startswith("server_options:")


# -- cells, dataset keys, plan ----------------------------------------------------------------------


def big_experiment(seed: int = 7, repetitions: int = 3) -> Experiment:
    raw = with_factors(cache_pct=[0, 10, 25, 50, 100], block_size=["8k", "16k"],
                       compression=["none", "lz4"], threads=[1, 4])
    raw["seed"] = seed
    raw["repetitions"] = repetitions
    return parse_experiment(raw)


def test_cells_are_the_full_factorial_in_order() -> None:
    exp = big_experiment()
    cells = exp.cells()
    expected = [Cell(*combo) for combo in itertools.product(*(exp.factors[f] for f in FACTORS))]
    assert cells == expected
    assert len(cells) == 5 * 2 * 2 * 2
    # the last factor (threads) varies fastest, the first varied one (cache_pct) slowest
    assert [c.threads for c in cells[:4]] == [1, 4, 1, 4]
    assert [c.compression for c in cells[:4]] == ["none", "none", "lz4", "lz4"]
    assert len({c.cell_id for c in cells}) == len(cells)


def test_cell_id_and_levels() -> None:
    cell = Cell("innodb", 12.5, "16k", "lz4", "disk", 8)
    assert cell.cell_id == "innodb-c12p5-b16k-lz4-disk-t8"
    assert cell.levels() == {"engine": "innodb", "cache_pct": 12.5, "block_size": "16k",
                             "compression": "lz4", "medium": "disk", "threads": 8}
    assert set(cell.levels()) == set(FACTORS)


def test_plan_blocks_contain_every_cell_once() -> None:
    exp = big_experiment()
    cells = exp.cells()
    runs = exp.plan()
    assert len(runs) == len(cells) * exp.repetitions
    for block in range(1, exp.repetitions + 1):
        in_block = [r for r in runs if r.block == block]
        assert Counter(r.cell for r in in_block) == Counter(cells)
    # blocks are contiguous and in order
    assert [r.block for r in runs] == sorted(r.block for r in runs)
    assert [r.order for r in runs] == list(range(1, len(runs) + 1))
    assert all(r.repetition == r.block for r in runs)
    ids = [r.run_id for r in runs]
    assert len(set(ids)) == len(ids)
    assert runs[0].run_id == f"{runs[0].cell.cell_id}-r1"


def test_plan_is_deterministic_for_a_seed() -> None:
    a = [r.run_id for r in big_experiment(seed=7).plan()]
    b = [r.run_id for r in big_experiment(seed=7).plan()]
    assert a == b


def test_plan_order_depends_on_seed_and_is_shuffled() -> None:
    exp7, exp8 = big_experiment(seed=7), big_experiment(seed=8)
    a = [r.run_id for r in exp7.plan()]
    b = [r.run_id for r in exp8.plan()]
    assert a != b
    assert sorted(a) == sorted(b)
    cells = exp7.cells()
    first_block = [r.cell for r in exp7.plan() if r.block == 1]
    second_block = [r.cell for r in exp7.plan() if r.block == 2]
    assert first_block != cells  # randomised, not in factorial order (40 cells: chance 1/40!)
    assert first_block != second_block  # each block is its own shuffle


def test_dataset_key_groups_cells() -> None:
    exp = big_experiment()
    keys = {exp.dataset_key(c) for c in exp.cells()}
    assert len(keys) == 2 * 2  # block_size x compression; cache_pct and threads share snapshots
    key = exp.dataset_key(Cell("innodb", 25, "8k", "lz4", "disk", 4))
    assert key == exp.dataset_key(Cell("innodb", 100, "8k", "lz4", "disk", 1))
    assert key != exp.dataset_key(Cell("innodb", 25, "16k", "lz4", "disk", 4))
    assert key == DatasetKey("innodb", "8k", "lz4", 4, 100000)
    assert key.name == "innodb-b8k-lz4-oltp-4x100000"


def test_baseline_cell() -> None:
    exp = big_experiment()
    cell = Cell("innodb", 25, "8k", "lz4", "disk", 4)
    assert exp.baseline_cell(cell) == Cell("innodb", 100, "8k", "lz4", "disk", 4)


def test_digest_changes_with_the_spec() -> None:
    d0 = parse_experiment(base_raw()).digest()
    assert d0 == parse_experiment(copy.deepcopy(base_raw())).digest()
    changes = []
    for mutate in (
        lambda r: r.__setitem__("seed", 1),
        lambda r: r.__setitem__("measure_s", 31),
        lambda r: r["factors"].__setitem__("cache_pct", [25, 50, 100]),
        lambda r: r["workload"].__setitem__("table_size", 1000),
        lambda r: r["server_options"].__setitem__("max_connections", 10),
    ):
        raw = base_raw()
        mutate(raw)
        changes.append(parse_experiment(raw).digest())
    assert d0 not in changes
    assert len(set(changes)) == len(changes)


def test_check_media_names_host_and_media() -> None:
    exp = parse_experiment(with_factors(medium=["disk", "nvme"]))
    check_media(exp, ["nvme", "disk", "ram"], "db1")  # all present: no error
    with pytest.raises(SpecError) as ei:
        check_media(exp, ["ram", "disk"], "db1")
    msg = str(ei.value)
    assert msg.startswith("factors.medium:") and "'nvme'" in msg
    assert "'db1'" in msg and "disk, ram" in msg
    with pytest.raises(SpecError, match=r"\(none\)"):
        check_media(exp, [], "db2")


# -- load_spec ----------------------------------------------------------------------------------------


def test_load_spec_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as ei:
        load_spec(missing)
    assert str(missing) in str(ei.value) and "does not exist" in str(ei.value)


def test_load_spec_invalid_yaml(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("experiment: x\nfactors: {engine: [innodb\n")
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    assert "not valid YAML" in str(ei.value) and str(p) in str(ei.value)


def test_load_spec_roundtrip(tmp_path: Path) -> None:
    import yaml

    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(base_raw()))
    assert load_spec(p) == parse_experiment(base_raw())


def test_load_spec_empty_file_names_the_field(tmp_path: Path) -> None:
    p = tmp_path / "empty.yaml"
    p.write_text("")
    with pytest.raises(SpecError, match="^experiment:"):
        load_spec(p)


@pytest.mark.parametrize("option", ["innodb_buffer_pool_size", "innodb-buffer-pool-load-at-startup", "pid_file"])
def test_harness_options_are_rejected_at_plan_time(option: str) -> None:
    raw = base_raw()
    raw["server_options"] = {option: "1"}
    with pytest.raises(SpecError, match=rf"server_options\.{option}: set by a factor or by the harness"):
        parse_experiment(raw)


def test_baseline_levels_are_normalised_like_factor_levels() -> None:
    raw = base_raw()
    raw["factors"] = {**raw.get("factors", {}), "block_size": ["8k", "16K"]}
    raw["baseline"] = {"block_size": "16K"}
    assert parse_experiment(raw).baseline == {"block_size": "16k"}
