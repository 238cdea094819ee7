"""The seeds' conditions, pure parts: the crossed half-fraction design (seed 003 in miniature), the model that
keeps what it can estimate, engine cache counters, compressible TPC-C strings, the Galera follower medium
and its calibration."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.campaign_model import alias_note
from dbmatrix.analyse.comparisons import model_pairwise_comparisons
from dbmatrix.analyse.contrasts import fit_log_model, ratio_estimate, replication_estimate
from dbmatrix.analyse.effects import factorial_model
from dbmatrix.analyse.replication import effects, pressured_setting, setting_runs
from dbmatrix.engines import engine
from dbmatrix.hosts import media
from dbmatrix.parse import cache_counters
from dbmatrix.run.calibration import calibration_cell, calibration_runs, choose
from dbmatrix.spec.experiment import (
    Calibration,
    SpecError,
    crossed_design_info,
    design_text,
    half_fraction_runs,
    load_spec,
    parse_experiment,
)
from dbmatrix.workload import commands

ROOT = Path(__file__).resolve().parents[2]


def _tpcc_raw(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "experiment": "t", "design": "crossed",
        "workload": {"name": "tpcc", "tables": 1, "warehouses": 1, "strings": "compressible"},
        "factors": {"engine": "myrocks", "cache_pct": [0, 100], "block_size": ["4k", "16k"],
                    "compression": ["none", "lz4"], "medium": ["disk", "tmpfs", "ramblock"], "threads": 4},
        "repetitions": 2,
    }
    raw.update(over)
    return raw


# ------------------------------------------------------------------------------------------ the design

def test_half_fraction_is_the_defining_relation() -> None:
    runs = half_fraction_runs({"a": (0, 1), "b": ("x", "y"), "c": ("p", "q")})
    assert len(runs) == 4
    code = {0: -1, 1: 1, "x": -1, "y": 1, "p": -1, "q": 1}
    assert all(code[r["a"]] * code[r["b"]] * code[r["c"]] == 1 for r in runs)  # I = ABC


def test_crossed_design_cells_every_medium_with_the_same_half() -> None:
    exp = parse_experiment(_tpcc_raw())
    cells = exp.cells()
    assert len(cells) == 12
    by_medium: dict[str, set[tuple[Any, ...]]] = {}
    for c in cells:
        by_medium.setdefault(c.medium, set()).add((c.cache_pct, c.block_size, c.compression))
    assert set(by_medium) == {"disk", "tmpfs", "ramblock"}
    halves = list(by_medium.values())
    assert all(h == halves[0] and len(h) == 4 for h in halves)
    # every two-level factor balanced within each medium: main effects and medium x factor estimable
    for f in (0, 1, 2):
        assert len({t[f] for t in halves[0]}) == 2


def test_crossed_design_names_its_aliases() -> None:
    info = parse_experiment(_tpcc_raw()).design_info()
    assert info["design"] == "crossed" and info["resolution"] == 3 and info["crossed_with"] == ["medium"]
    assert "A=BC" in info["aliases"] and "medium x A = medium x BC" in info["aliases"]
    assert info["generators"] == ["C=AB"]
    text = design_text(info)
    assert "crossed with every level of medium" in text and "A=BC" in text
    assert "medium x C = medium x AB" in alias_note(info)


def test_crossed_design_refusals_name_the_field() -> None:
    with pytest.raises(SpecError, match="needs at least one varied factor with three or more levels"):
        parse_experiment(_tpcc_raw(factors={"engine": "myrocks", "cache_pct": [0, 100], "block_size": ["4k", "16k"],
                                            "compression": ["none", "lz4"], "medium": "disk"}))
    with pytest.raises(SpecError, match="needs 3 to 6 of them"):
        parse_experiment(_tpcc_raw(factors={"engine": "myrocks", "cache_pct": [0, 100],
                                            "medium": ["disk", "tmpfs", "ramblock"]}))
    with pytest.raises(SpecError, match="design: unknown design 'halves'; allowed: full, fractional, crossed"):
        parse_experiment(_tpcc_raw(design="halves"))
    assert crossed_design_info(["a", "b", "c", "m"], ["a", "b", "c"], 12)["fraction"] == "2^(3-1)"


def test_the_shipped_tpcc_spec_is_seed_003_in_miniature() -> None:
    exp = load_spec(ROOT / "specs" / "quick-tpcc.yaml")
    # a full design (the half fraction it was recorded in aliases the lz4 claims' contrasts), one block size
    assert exp.design == "full" and len(exp.cells()) == 12 and exp.factors["engine"] == ("myrocks",)
    assert exp.factors["block_size"] == ("16k",)
    assert exp.factors["cache_pct"] == (0, 100) and exp.workload.strings == "compressible"
    assert set(exp.factors["medium"]) == {"disk", "tmpfs", "ramblock"}


# ------------------------------------------------------------------------------------------ the model

def _crossed_runs(effect_sector_nocache: float, seed: int = 7, reps: int = 2, noise: float = 0.05) -> pd.DataFrame:
    """Synthetic runs of the 12-cell crossed design with known log effects (cache x medium interacts)."""
    exp = parse_experiment(_tpcc_raw(repetitions=reps))
    rng = np.random.default_rng(seed)
    rows = []
    for c in exp.cells():
        log = math.log(400)
        log += 0.0 if c.cache_pct == 100 else math.log(0.4)
        log += {"disk": 0.0, "tmpfs": math.log(1.2), "ramblock": math.log(1.1)}[c.medium]
        if c.cache_pct == 0 and c.medium == "ramblock":
            log += math.log(effect_sector_nocache)
        log += 0.05 if c.block_size == "4k" else 0.0
        for r in range(reps):
            rows.append({"engine": c.engine, "cache_pct": c.cache_pct, "block_size": c.block_size,
                         "compression": c.compression, "medium": c.medium, "repetition": r + 1,
                         "emulated": {"disk": None, "tmpfs": "pmem-fsdax", "ramblock": "pmem-sector"}[c.medium],
                         "tps": math.exp(log + rng.normal(0, noise))})
    return pd.DataFrame(rows)


FACTORS = ["cache_pct", "block_size", "compression", "medium"]


def test_the_model_keeps_the_medium_interactions_and_drops_the_aliased_ones() -> None:
    model = fit_log_model(_crossed_runs(2.0), FACTORS)
    assert model is not None and model.name == "main+2way"
    assert model.has_term(("cache_pct", "medium")) and model.has_term(("compression", "medium"))
    assert not model.has_term(("cache_pct", "block_size"))  # aliased with compression
    assert model.df_resid == 24 - 12
    fit = factorial_model(_crossed_runs(2.0), FACTORS)
    assert fit.model == "main+2way" and "cache_pct x block_size" in fit.note


def test_known_interaction_is_recovered_per_cache_level() -> None:
    """Power and size on synthetic data with a known answer: sector mode x2 only without a cache."""
    runs = _crossed_runs(2.0)
    at_min = ratio_estimate(runs, "tps", "medium", "emulated:pmem-sector", "native", {"cache_pct": "min"},
                            design=parse_experiment(_tpcc_raw()).design_info())
    at_max = ratio_estimate(runs, "tps", "medium", "emulated:pmem-sector", "native", {"cache_pct": "max"})
    assert at_min.ci_lo <= 2.2 <= at_min.ci_hi and at_min.ci_lo > 1.1  # the true 2.2, not the cached 1.1
    assert at_max.ci_lo <= 1.1 <= at_max.ci_hi and at_max.ci_hi < 2.2
    # medium is crossed with the half fraction: at cache 0 both media have the same block x compression cells,
    # so the contrast is their cell means (no model, no alias)
    assert at_min.basis.startswith("cell means of 4 cells, averaged over block, compression")
    none = ratio_estimate(_crossed_runs(1.0), "tps", "medium", "emulated:pmem-sector", "native",
                          {"cache_pct": "min"})
    assert none.ci_lo <= 1.1 <= none.ci_hi  # no interaction: the same 1.1 at both cache levels


def test_a_condition_on_an_aliased_interaction_is_not_identified() -> None:
    """block x cache is compression's column in the half fraction: 'block size at the minimum cache' would be
    the same number as at 100 %, so the study cannot answer it (a claim then goes to the next study); nor
    can it average block size over cache (the average would carry the compression effect), and the
    verdict names the alias."""
    from dbmatrix.analyse.contrasts import NotIdentified

    with pytest.raises(NotIdentified, match=r"block x cache is aliased with the compression main effect"):
        ratio_estimate(_crossed_runs(2.0), "tps", "block_size", "4k", "16k", {"cache_pct": "min"})
    with pytest.raises(NotIdentified, match=r"block x cache is aliased with the compression main effect"):
        ratio_estimate(_crossed_runs(2.0), "tps", "block_size", "4k", "16k", {"medium": "tmpfs"})
    # medium x cache, x block and x compression are all estimable: the medium contrast at cache 0 % is
    ramblock = ratio_estimate(_crossed_runs(2.0), "tps", "medium", "ramblock", "disk", {"cache_pct": "min"})
    assert ramblock.ci_lo <= 1.1 * 2.0 <= ramblock.ci_hi


def test_model_contrasts_serve_the_declared_comparisons_of_a_crossed_design() -> None:
    exp = parse_experiment(_tpcc_raw(comparisons=[{"factor": "medium", "levels": ["ramblock", "disk"],
                                                   "within": ["cache_pct"]}]))
    table = model_pairwise_comparisons(_crossed_runs(2.0), exp.comparisons, FACTORS, level_order=exp.factors)
    by = {int(r["cache_pct"]): r["ratio"] for _, r in table.iterrows()}
    assert by[0] == pytest.approx(2.2, rel=0.15) and by[100] == pytest.approx(1.1, rel=0.15)


# ------------------------------------------------------------------------------------------ cache counters

def test_cache_counters_from_status_deltas() -> None:
    before = {"Rocksdb_block_cache_hit": "100", "Rocksdb_block_cache_miss": "900",
              "Rocksdb_block_cache_data_hit": "10", "Rocksdb_block_cache_data_miss": "90"}
    after = {"Rocksdb_block_cache_hit": "1100", "Rocksdb_block_cache_miss": "1900",
             "Rocksdb_block_cache_data_hit": "110", "Rocksdb_block_cache_data_miss": "390"}
    rocks, inno_counters = engine("myrocks").status_counters, engine("innodb").status_counters
    got = cache_counters.cache_counters(rocks, before, after)
    assert got["cache_hit_ratio"] == pytest.approx(0.5) and got["cache_data_hit_ratio"] == pytest.approx(0.25)
    assert got["cache_lookups"] == 2000 and got["cache_misses"] == 1000
    inno = cache_counters.cache_counters(inno_counters, {"Innodb_buffer_pool_read_requests": "0",
                                                         "Innodb_buffer_pool_reads": "0"},
                                         {"Innodb_buffer_pool_read_requests": "1000",
                                          "Innodb_buffer_pool_reads": "50"})
    assert inno["cache_hit_ratio"] == pytest.approx(0.95)
    assert math.isnan(cache_counters.cache_counters(rocks, {}, after)["cache_hit_ratio"])
    reset = cache_counters.cache_counters(rocks, after, before)  # counters went down: unknown, not negative
    assert math.isnan(reset["cache_hit_ratio"])
    assert cache_counters.parse_status("Rocksdb_block_cache_hit\t5\nnoise\n") == {"rocksdb_block_cache_hit": "5"}
    assert all(math.isnan(v) for v in cache_counters.cache_counters(None, before, after).values())  # no engine


# ------------------------------------------------------------------------------------------ TPC-C strings

def test_compressible_strings_reach_the_dataset_key_and_sysbench() -> None:
    exp = parse_experiment(_tpcc_raw())
    cell = exp.cells()[0]
    key = exp.dataset_key(cell)
    assert key.name.endswith("-tpcc-compressible-1x1w")
    argv = commands.command(exp, cell, "prepare", socket="/s", threads=4, script="/x/tpcc.lua")
    assert "--strings=compressible" in argv
    argv = commands.command(exp, cell, "check", socket="/s", threads=1, script="/x/tpcc.lua")
    assert not any(a.startswith("--strings") for a in argv)
    plain = parse_experiment(_tpcc_raw(workload={"name": "tpcc", "tables": 1, "warehouses": 1}))
    assert plain.dataset_key(plain.cells()[0]).name.endswith("-tpcc-1x1w")
    assert "strings" not in plain.to_dict()["workload"]  # digests of specs without the key stay the same


def test_strings_refusals() -> None:
    with pytest.raises(SpecError, match="workload.strings: unknown 'zeros'; allowed: random, compressible"):
        parse_experiment(_tpcc_raw(workload={"name": "tpcc", "strings": "zeros"}))
    with pytest.raises(SpecError, match="is a TPC-C option"):
        parse_experiment({"experiment": "o", "workload": {"name": "oltp_read_write", "strings": "compressible"}})


# ------------------------------------------------------------------------------------------ Galera followers

def _galera_raw(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "experiment": "g", "topology": {"kind": "galera", "nodes": 3, "calibrate": {
            "medium": "slow", "limit": "write_iops", "candidates": [2000, 1000, 500], "target_fc_paused_pct": 30}},
        "workload": {"name": "oltp_write_only", "tables": 2, "table_size": 1000},
        "factors": {"engine": "innodb", "slave_threads": [1, 4, 16], "follower_medium": ["same", "slow"]},
    }
    raw.update(over)
    return raw


def test_follower_medium_and_calibration_parse() -> None:
    exp = parse_experiment(_galera_raw())
    assert len(exp.cells()) == 6
    assert {c.cell_id for c in exp.cells() if c.follower_medium == "slow"} == {
        "innodb-c100-b16k-none-disk-t4-wo-fslow", "innodb-c100-b16k-none-disk-t4-wo-st4-fslow",
        "innodb-c100-b16k-none-disk-t4-wo-st16-fslow"}
    cal = exp.topology.calibrate
    assert cal == Calibration("slow", "write_iops", (2000, 1000, 500), 30.0, 3, 8)
    assert exp.to_dict()["topology"]["calibrate"]["candidates"] == [2000, 1000, 500]
    cell = calibration_cell(exp)
    assert cell.slave_threads == 1 and cell.follower_medium == "slow"
    runs = calibration_runs(exp, 2)
    assert [lim for lim, _ in runs] == [2000, 1000, 500]
    assert runs[0][1].run_id.endswith("-fslow-r1-camp2")


def test_follower_medium_and_calibration_refusals() -> None:
    with pytest.raises(SpecError, match="factors.follower_medium: only applies to a Galera cluster"):
        parse_experiment({"experiment": "s", "factors": {"follower_medium": ["same", "slow"]}})
    bad = _galera_raw()
    bad["topology"]["calibrate"]["candidates"] = [500, 1000]
    with pytest.raises(SpecError, match="decreasing order"):
        parse_experiment(bad)
    bad = _galera_raw()
    bad["topology"]["calibrate"]["limit"] = "latency"
    with pytest.raises(SpecError, match="allowed: read_iops, write_iops, read_bps, write_bps"):
        parse_experiment(bad)
    with pytest.raises(SpecError, match="is not a level of factors.follower_medium"):
        parse_experiment(_galera_raw(factors={"engine": "innodb", "slave_threads": [1, 16]}))


def test_calibration_chooses_the_mildest_limit_that_reaches_the_target() -> None:
    cal = Calibration("slow", "write_iops", (4000, 2000, 1000, 500), 30.0)
    assert choose([(4000, 2.0), (2000, 12.0), (1000, 41.0)], cal) == {"chosen": 1000, "reached": True,
                                                                        "paused_pct": 41.0}
    missed = choose([(4000, 1.0), (2000, None), (1000, 9.0), (500, 18.0)], cal)
    assert missed == {"chosen": 500, "reached": False, "paused_pct": 18.0}
    assert choose([(4000, None)], cal)["chosen"] is None


def test_limit_commands_for_both_cgroup_versions() -> None:
    v1 = {"cgroup": "/sys/fs/cgroup/blkio/dbmatrix/slow", "version": 1, "device": "7:3"}
    assert media.limit_command(v1, "write_iops", 500) == \
        'echo "7:3 500" > /sys/fs/cgroup/blkio/dbmatrix/slow/blkio.throttle.write_iops_device'
    v2 = {"cgroup": "/sys/fs/cgroup/dbmatrix/slow", "version": 2, "device": "7:3"}
    assert media.limit_command(v2, "write_iops", 500) == 'echo "7:3 wiops=500" > /sys/fs/cgroup/dbmatrix/slow/io.max'
    assert media.read_limit(v1, "write_iops", "7:3 500\n8:0 9\n") == 500
    assert media.read_limit(v2, "write_iops", "7:3 rbps=max wbps=max riops=max wiops=250\n") == 250
    with pytest.raises(media.MediaError, match="allowed: read_iops, write_iops, read_bps, write_bps"):
        media.limit_command(v1, "latency", 5)
    with pytest.raises(media.MediaError, match="positive integer"):
        media.limit_command(v1, "write_iops", 0)


def _repl_runs() -> pd.DataFrame:
    rows = []
    for fm, paused1, paused16, tps1, tps16 in (("same", 0.4, 0.0, 1500, 1300), ("slow", 80.0, 20.0, 100, 300)):
        for st, paused, tps in ((1, paused1, tps1), (16, paused16, tps16)):
            for r in range(3):
                rows.append({"run_id": f"{fm}{st}{r}", "slave_threads": st, "follower_medium": fm,
                             "write_to": "node1", "threads": 4, "workload": "oltp_write_only",
                             "fc_paused_pct": paused + r, "tps": tps + 5 * r, "lat_p95_ms": 10.0 + r,
                             "lat_avg_ms": 4.0 + r, "recv_queue_avg": 1.0})
    return pd.DataFrame(rows)


def test_claims_are_judged_at_the_pressured_setting() -> None:
    runs = _repl_runs()
    assert pressured_setting(runs) == "follower_medium=slow"
    assert set(setting_runs(runs, "follower_medium=slow")["follower_medium"]) == {"slow"}
    table = effects(runs)
    assert set(table["within"]) == {"follower_medium=same", "follower_medium=slow"}
    est = replication_estimate(table, "tps_ratio", "follower_medium=slow")
    assert est.estimate == pytest.approx(305 / 105, rel=0.01) and "follower medium=slow" in est.compared
    calm = replication_estimate(table, "fc_paused_pct_points", "follower_medium=same")
    assert calm.estimate == pytest.approx(-0.4)
    assert pressured_setting(runs[runs["follower_medium"] == "same"]) == "all"
