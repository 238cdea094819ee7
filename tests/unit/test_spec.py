"""Tests of dbmatrix.spec.experiment: validation messages, the full factorial, and the seeded replicate-block plan."""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.spec.experiment import (
    COMPRESSIONS,
    ENGINES,
    FACTORS,
    FRACTION_GENERATORS,
    RAND_TYPES,
    TOP_LEVEL_KEYS,
    WORKLOADS,
    Cell,
    Comparison,
    CpuPlacement,
    DatasetKey,
    Experiment,
    Noise,
    SpecError,
    Workload,
    check_media,
    fractional_runs,
    load_spec,
    parse_experiment,
    resolution,
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
        "workload": ("oltp_read_write",), "log_medium": ("same",), "rate_fraction": (0,),
        "slave_threads": (1,), "write_to": ("node1",), "follower_medium": ("same",), "instances": (1,),
        "pinning": ("none",), "group_commit": (0,), "index_cache": ("cache",), "server_build": ("system",),
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
        "workload": ("oltp_read_write",), "log_medium": ("same",), "rate_fraction": (0,),
        "slave_threads": (1,), "write_to": ("node1",), "follower_medium": ("same",), "instances": (1,),
        "pinning": ("none",), "group_commit": (0,), "index_cache": ("cache",), "server_build": ("system",),
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
    # methodology: cache sweeps need uniform access; seed 003's TPC-C chose warehouses with pareto
    assert exp.workload.rand_type == "uniform" or exp.workload.name == "tpcc"


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
    raw["workload"] = {"name": "tpc-h"}
    msg = spec_error(raw)
    assert msg.startswith("workload.name:") and "'tpc-h'" in msg
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
                             "compression": "lz4", "medium": "disk", "threads": 8,
                             "workload": "oltp_read_write", "log_medium": "same", "rate_fraction": 0,
                             "slave_threads": 1, "write_to": "node1", "follower_medium": "same", "instances": 1,
                             "pinning": "none", "group_commit": 0, "index_cache": "cache", "server_build": "system"}
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


# -- the matrix of issue 3: workloads, log media, open loop, fractional designs ------------------


FIVE_TWO_LEVEL = {"engine": ["innodb", "myrocks"], "cache_pct": [25, 100], "block_size": ["4k", "16k"],
                  "compression": ["none", "lz4"], "medium": ["disk", "tmpfs"]}


def test_workload_levels_from_factors_or_workload_name() -> None:
    exp = parse_experiment(with_factors(workload=["oltp_read_only", "oltp_point_select"]))
    assert exp.factors["workload"] == ("oltp_read_only", "oltp_point_select")
    raw = base_raw()
    raw["workload"] = {**raw["workload"], "name": ["oltp_write_only", "oltp_read_write"]}
    exp = parse_experiment(raw)
    assert exp.factors["workload"] == ("oltp_write_only", "oltp_read_write")
    assert exp.workload.name == "oltp_write_only"
    raw["factors"]["workload"] = ["oltp_read_only"]
    assert "listed both here and in workload.name" in spec_error(raw)
    assert spec_error(with_factors(workload="tpc-h")).startswith("factors.workload: unknown workload 'tpc-h'")


def test_workloads_share_one_dataset_and_tag_cell_ids() -> None:
    exp = parse_experiment(with_factors(workload=["oltp_read_write", "oltp_read_only", "oltp_write_only"]))
    cells = exp.cells()
    assert {exp.dataset_key(c) for c in cells} == {exp.dataset_key(cells[0])}
    ids = {c.cell_id for c in cells}
    assert "innodb-c25-b16k-none-disk-t4" in ids and "innodb-c25-b16k-none-disk-t4-ro" in ids
    assert "innodb-c25-b16k-none-disk-t4-wo" in ids


def test_log_medium_levels_and_media_check() -> None:
    exp = parse_experiment(with_factors(log_medium=["same", "fast"]))
    assert {c.cell_id for c in exp.cells()} >= {"innodb-c25-b16k-none-disk-t4-logfast"}
    check_media(exp, ["disk", "fast"], "h1")
    with pytest.raises(SpecError, match=r"factors.log_medium: 'fast' is not defined on host 'h1'"):
        check_media(exp, ["disk"], "h1")
    assert spec_error(with_factors(log_medium=[""])).startswith("factors.log_medium:")


def test_rate_fraction_open_loop_needs_closed_twin_and_runs_after_it() -> None:
    exp = parse_experiment(with_factors(rate_fraction=["closed", 0.5, 0.8]))
    assert exp.factors["rate_fraction"] == (0, 0.5, 0.8)
    plan = exp.plan()
    kinds = [r.cell.open_loop for r in plan]
    assert kinds == sorted(kinds)  # every closed-loop run comes first
    cell = next(r.cell for r in plan if r.cell.rate_fraction == 0.5)
    assert cell.cell_id.endswith("-o50") and cell.closed_loop_twin().rate_fraction == 0
    assert "need the closed-loop level" in spec_error(with_factors(rate_fraction=[0.5]))
    msg = spec_error(with_factors(rate_fraction=[0, 3]))
    assert msg.startswith("factors.rate_fraction: 3 is not allowed") and "'closed'" in msg


def test_fractional_design_is_resolution_v_half_of_five_factors() -> None:
    raw = with_factors(**FIVE_TWO_LEVEL)
    full = parse_experiment(raw)
    raw["design"] = "fractional"
    frac = parse_experiment(raw)
    cells = frac.cells()
    assert len(full.cells()) == 32 and len(cells) == 16
    info = frac.design_info()
    assert info["resolution"] == 5 and info["fraction"] == "2^(5-1)" and info["generators"] == ["E=ABCD"]
    # Balanced: every level of every factor, and every pair of levels of every two factors, equally often.
    for f, g in itertools.combinations(FIVE_TWO_LEVEL, 2):
        pairs = Counter((getattr(c, f), getattr(c, g)) for c in cells)
        assert len(pairs) == 4 and set(pairs.values()) == {4}
    # The cells are a subset of the full design, and the plan repeats each once per block.
    assert {c.cell_id for c in cells} <= {c.cell_id for c in full.cells()}
    assert Counter(r.cell.cell_id for r in frac.plan()) == {c.cell_id: 3 for c in cells}


@pytest.mark.parametrize("k", sorted(FRACTION_GENERATORS))
def test_fraction_generators_reach_resolution_v(k: int) -> None:
    gens = FRACTION_GENERATORS[k]
    assert resolution(k, gens) >= 5
    runs = fractional_runs({f"f{i}": ("lo", "hi") for i in range(k)})
    assert len(runs) == 2 ** (k - len(gens)) and len({tuple(r.values()) for r in runs}) == len(runs)


def test_fractional_design_errors_name_the_field() -> None:
    raw = with_factors(**FIVE_TWO_LEVEL)
    raw["design"] = "fractional"
    raw["factors"]["threads"] = [1, 2, 4]
    assert "a fractional design needs exactly two levels" in spec_error(raw)
    raw = with_factors(cache_pct=[25, 100])
    raw["design"] = "fractional"
    assert spec_error(raw).startswith("design: fractional needs 5 to 9 varied two-level factors")
    raw["design"] = "half"
    assert spec_error(raw) == "design: unknown design 'half'; allowed: full, fractional, crossed"


def test_comparisons_noise_and_cpu_placement() -> None:
    raw = with_factors(block_size=["4k", "16k"])
    raw["comparisons"] = [{"factor": "block_size", "levels": ["4K", "16k"], "within": ["cache_pct"]}]
    raw["noise"] = {"max_cv_pct": 8, "target_halfwidth_pct": 5, "max_repetitions": 6}
    raw["cpu_placement"] = {"server": "0", "client": "1"}
    exp = parse_experiment(raw)
    assert exp.comparisons == (Comparison("block_size", "4k", "16k", ("cache_pct",)),)
    assert exp.noise == Noise(8.0, 5.0, 6) and exp.noise.adaptive
    assert exp.cpu_placement == CpuPlacement("0", "1", "taskset")
    assert exp.cpu_placement.prefix("server") == ["taskset", "-c", "0"]
    assert CpuPlacement("0-1", None, "numactl").prefix("server") == ["numactl", "--physcpubind=0-1"]
    assert CpuPlacement().prefix("client") == []


@pytest.mark.parametrize(("key", "value", "message"), [
    ("comparisons", [{"factor": "colour", "levels": [1, 2]}], "comparisons[0].factor: 'colour' is not a factor"),
    ("comparisons", [{"factor": "cache_pct", "levels": [25]}], "comparisons[0].levels: must be two levels"),
    ("comparisons", [{"factor": "cache_pct", "levels": [25, 50]}], "comparisons[0].levels: 50 is not one of"),
    ("comparisons", [{"factor": "cache_pct", "levels": [25, 100], "within": ["cache_pct"]}],
     "comparisons[0].within: 'cache_pct' is not allowed"),
    ("noise", {"max_cv_pct": 0}, "noise.max_cv_pct: 0 must be a percentage"),
    ("noise", {"target_halfwidth_pct": 5}, "noise.max_repetitions: the adaptive mode"),
    ("noise", {"target_halfwidth_pct": 5, "max_repetitions": 2}, "noise.max_repetitions: 2 must be an integer >= repetitions (3)"),
    ("noise", {"max_repetitions": 5}, "noise.max_repetitions: only meaningful"),
    ("cpu_placement", {"server": "zero"}, "cpu_placement.server: 'zero' is not a CPU list"),
    ("cpu_placement", {"tool": "hwloc"}, "cpu_placement.tool: unknown 'hwloc'; allowed: taskset, numactl"),
])
def test_invalid_matrix_options(key: str, value: Any, message: str) -> None:
    raw = base_raw()
    raw[key] = value
    assert message in spec_error(raw)


# -- topology (Galera) and the TPC-C workload ------------------------------------------------------


def galera_raw(**factors: Any) -> dict[str, Any]:
    raw = base_raw()
    raw["topology"] = {"kind": "galera", "nodes": 3}
    raw["workload"] = {"name": "oltp_write_only", "tables": 4, "table_size": 10000}
    raw["factors"] = {**raw["factors"], "cache_pct": 100, "slave_threads": [1, 16], **factors}
    return raw


def test_galera_topology_and_factors() -> None:
    exp = parse_experiment(galera_raw(write_to=["node1", "all"]))
    assert exp.topology.galera and exp.topology.nodes == 3 and exp.topology.sst_method == "rsync"
    ids = {c.cell_id for c in exp.cells()}
    assert ids == {"innodb-c100-b16k-none-disk-t4-wo", "innodb-c100-b16k-none-disk-t4-wo-st16",
                   "innodb-c100-b16k-none-disk-t4-wo-wall", "innodb-c100-b16k-none-disk-t4-wo-st16-wall"}
    assert exp.to_dict()["topology"] == {"kind": "galera", "nodes": 3, "hosts": [], "sst_method": "rsync"}
    assert exp.to_dict()["factors"]["slave_threads"] == [1, 16]


def test_galera_write_to_accepts_node_numbers() -> None:
    exp = parse_experiment(galera_raw(write_to=[2]))
    assert exp.factors["write_to"] == ("node2",)


@pytest.mark.parametrize("change, start", [
    ({"factors": {"slave_threads": [1, 4]}}, "factors.slave_threads: only applies to a Galera cluster"),
    ({"topology": {"kind": "ndb"}}, "topology.kind: unknown 'ndb'; allowed: standalone, galera"),
    ({"topology": {"kind": "galera", "nodes": 1}}, "topology.nodes: 1 must be an integer from 2 to"),
    ({"topology": {"kind": "galera", "hosts": ["a", "b"]}}, "topology.hosts: 2 host(s) listed for 3 nodes"),
    ({"topology": {"kind": "galera", "sst_method": "skip"}}, "topology.sst_method: unknown 'skip'"),
    ({"topology": {"kind": "standalone", "nodes": 3}}, "topology: nodes only apply to kind: galera"),
    ({"topology": {"kind": "galera"}, "factors": {"engine": ["innodb", "myrocks"]}},
     "factors.engine: a Galera cluster replicates InnoDB only"),
    ({"topology": {"kind": "galera"}, "factors": {"write_to": ["node4"]}},
     "factors.write_to: 'node4' is not a node of this 3-node cluster"),
    ({"topology": {"kind": "galera"}, "factors": {"write_to": ["leader"]}}, "factors.write_to: 'leader' is not"),
])
def test_bad_topology(change: dict[str, Any], start: str) -> None:
    raw = base_raw()
    raw["factors"] = {**raw["factors"], **change.pop("factors", {})}
    raw.update(change)
    assert spec_error(raw).startswith(start)


def test_standalone_digest_ignores_the_galera_and_tpcc_additions() -> None:
    """Specs that use none of the newer keys keep their digest (results already bound to them resume)."""
    d = parse_experiment(base_raw()).to_dict()
    assert "topology" not in d and "slave_threads" not in d["factors"] and "write_to" not in d["factors"]
    assert "warehouses" not in d["workload"] and "isolation" not in d["workload"]


def test_tpcc_workload_and_dataset_key() -> None:
    raw = base_raw()
    raw["workload"] = {"name": "tpcc", "warehouses": 2, "isolation": "rc"}
    exp = parse_experiment(raw)
    assert exp.workload.tables == 1 and exp.workload.warehouses == 2 and exp.workload.isolation == "RC"
    cell = exp.cells()[0]
    assert cell.cell_id.endswith("-tpcc")
    assert exp.dataset_key(cell).name == "innodb-b16k-none-tpcc-1x2w"
    assert exp.to_dict()["workload"]["warehouses"] == 2


def test_tpcc_bad_isolation() -> None:
    raw = base_raw()
    raw["workload"] = {"name": "tpcc", "isolation": "snapshot"}
    assert spec_error(raw).startswith("workload.isolation: unknown 'snapshot'; allowed: RC, RR, SER, RU")


def test_tpcc_isolation_myrocks_allows_rc_and_rr_only() -> None:
    raw = base_raw()
    raw["workload"] = {"name": "tpcc", "isolation": "SER"}
    raw["factors"] = {**raw["factors"], "engine": ["innodb", "myrocks"]}
    assert spec_error(raw).startswith("workload.isolation: SER is not supported by MyRocks; allowed with "
                                      "engine myrocks: RC, RR")


def test_cache_basis_defaults_to_logical_and_refuses_other_values() -> None:
    assert parse_experiment(base_raw()).cache_basis == "logical"
    raw = base_raw()
    raw["cache_basis"] = "physical"
    assert parse_experiment(raw).cache_basis == "physical"
    for bad in ("du", "Logical", 1, None):
        raw["cache_basis"] = bad
        assert spec_error(raw).startswith(f"cache_basis: {bad!r} is not a cache basis; allowed: logical, physical")


def test_cache_basis_digest_keeps_physical_specs_and_moves_logical_ones() -> None:
    """Results recorded before the key were physical-basis: a physical spec keeps that digest, the logical
    default (a different meaning of cache_pct) gets its own, so it never resumes physical-basis results."""
    logical = parse_experiment(base_raw())
    raw = base_raw()
    raw["cache_basis"] = "physical"
    physical = parse_experiment(raw)
    assert "cache_basis" not in physical.to_dict() and logical.to_dict()["cache_basis"] == "logical"
    assert logical.digest() != physical.digest()
    before = {k: v for k, v in logical.to_dict().items() if k != "cache_basis"}  # the dict before the key
    assert physical.to_dict() == before
