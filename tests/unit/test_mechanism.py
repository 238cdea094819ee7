"""Tests of dbmatrix.analyse.mechanism: the counters of the cells a claim compares, per condition, and the
words of those that moved most (noise below a floor left out)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.mechanism import condition_rows, mechanism_frame, mechanism_rows, moved


def _runs() -> pd.DataFrame:
    rows = []
    for block in ("4k", "16k"):
        for comp in ("none", "lz4"):
            for rep in range(2):
                collapse = block == "4k" and comp == "lz4"
                rows.append({"run_id": f"{block}-{comp}-{rep}", "engine": "myrocks", "block_size": block,
                             "compression": comp, "cache_pct": 8.5, "medium": "disk", "emulated": None,
                             "tps": 50.0 if collapse else 250.0, "window_s": 45.0,
                             "cache_index_misses": 75_000.0 if collapse else 0.0,
                             "cache_index_insert_bytes": 1.15e11 if collapse else 0.0,
                             "read_kb_per_txn": 13_000.0 if collapse else 2_000.0 + rep,
                             "host_iowait_pct": 0.01 * (rep + 1), "cache_hit_ratio": 0.5 if collapse else 0.9})
    return pd.DataFrame(rows)


CLAIM = Claim("lzAt4k", "003", "test", "lz4 costs nothing at 4k", "tps", (0.95, 1.05), test="within",
              factor="compression", a="lz4", b="none", at={"engine": "myrocks", "block_size": "4k"},
              sources=("tpcc",))


def test_the_counters_of_the_compared_cells_and_their_ratio() -> None:
    runs = mechanism_frame(_runs())
    assert runs.loc[runs["run_id"] == "4k-lz4-0", "index_misses_per_txn"].iloc[0] == pytest.approx(75_000 / 2250)
    rows = pd.DataFrame(condition_rows(CLAIM, "s", runs)).set_index("counter")
    assert rows.loc["read_kb_per_txn", "value_a"] == 13_000 and rows.loc["read_kb_per_txn", "value_b"] == 2_000.5
    assert rows.loc["index_misses_per_txn", "ratio"] == math.inf  # none: no index misses at all
    assert set(rows["runs_a"]) == {2} and set(rows["runs_b"]) == {2}
    words = moved(rows.reset_index().assign(id="lzAt4k"), "lzAt4k")
    assert words == ["index-block cache misses per transaction 33.3 vs 0; index KiB the block cache took in per "
                     "transaction 49,913 vs 0; KiB read from the device per transaction 13,000 vs 2,000 (x6.5)"]
    assert "iowait" not in words[0]  # 0.01-0.02 % on both sides: under the floor


def test_every_judged_claim_gets_its_rows_and_the_untested_none() -> None:
    ev = Evidence("tpcc-x", "tpcc", _runs())
    per = Claim("lzPerBlock", "003", "test", "lz4 per block", "tps", (0.95, 1.05), test="within",
                factor="compression", a="lz4", b="none", at={"engine": "myrocks"}, per=("block_size",),
                sources=("tpcc",))
    judged = pd.DataFrame([{"id": "lzAt4k", "study": "tpcc-x", "verdict": "disagree"},
                           {"id": "lzPerBlock", "study": "tpcc-x", "verdict": "depends on block size"},
                           {"id": "never", "study": "", "verdict": "not tested"}])
    never = Claim("never", "003", "test", "never", "tps", (1.0, 2.0), factor="compression", a="lz4", b="none")
    rows = mechanism_rows([CLAIM, per, never], judged, [ev])
    assert set(rows["id"]) == {"lzAt4k", "lzPerBlock"}
    assert set(rows[rows["id"] == "lzPerBlock"]["condition"]) == {"block 4k", "block 16k"}
    r16 = rows[(rows["id"] == "lzPerBlock") & (rows["condition"] == "block 16k") & (rows["counter"] == "tps")]
    assert r16.empty  # throughput is the claim's own metric, not a counter
    assert moved(rows, "lzPerBlock")[0].startswith("block 4k: ")


# ------------------------------------------------------------------ the claims without a compared factor

def test_host_cpu_use_comes_from_busy_time_over_the_window_and_the_hosts_cpus() -> None:
    runs = pd.DataFrame([{"run_id": "a", "host": "h1", "tps": 10.0, "window_s": 40.0, "host_cpu_busy_s": 60.0},
                         {"run_id": "b", "host": "h2", "tps": 10.0, "window_s": 40.0, "host_cpu_busy_s": 60.0}])
    f = mechanism_frame(runs, {"h1": 2, "h2": 4}).set_index("run_id")
    assert f.loc["a", "host_cpu_busy_pct"] == pytest.approx(75.0) and f.loc["b", "host_cpu_busy_pct"] == 37.5
    assert mechanism_frame(runs)["host_cpu_busy_pct"].isna().all()  # no CPU count: unknown, never 0


def _scaleout() -> Evidence:
    """One instance at 1, 2, 4 and 8 threads: QPS saturates at 2 (the others overlap the peak), the CPUs are
    full from 2 on and each transaction costs more CPU past it."""
    qps = {1: 500.0, 2: 1000.0, 4: 1010.0, 8: 990.0}
    cells = pd.DataFrame([{"instances": 1, "threads": t, "qps": q, "ci_lo": q - 30, "ci_hi": q + 30}
                          for t, q in qps.items()])
    runs = pd.DataFrame([{"run_id": f"t{t}-r{r}", "host": "h", "instances": 1, "threads": t, "tps": q / 20,
                          "qps": q, "window_s": 40.0, "host_cpu_busy_s": 80.0 * min(t, 2) / 2 - r,
                          "mysqld_cpu_us_per_txn": 100.0 * t ** 0.5}
                         for t, q in qps.items() for r in range(2)])
    return Evidence("scale-x", "scaleout", runs, extra={"scaleout-cells": cells}, host_cpus={"h": 2})


SATURATION = Claim("scaleSaturation", "000", "test", "saturates", "scale_saturation", (0.0, 1.05), test="within",
                   sources=("scaleout",))


def test_the_saturation_claim_compares_the_largest_thread_count_with_its_saturation_point() -> None:
    from dbmatrix.analyse.mechanism import saturation_sides

    sides = saturation_sides(SATURATION, _scaleout())
    assert sides is not None and (sides.factor, sides.a, sides.b, sides.at) == ("threads", 8, 2, {"instances": 1})
    judged = pd.DataFrame([{"id": "scaleSaturation", "study": "scale-x", "verdict": "agree"}])
    rows = mechanism_rows([SATURATION], judged, [_scaleout()]).set_index("counter")
    assert set(rows["a"]) == {"8"} and set(rows["b"]) == {"2"}
    assert rows.loc["host_cpu_busy_pct", "value_a"] == rows.loc["host_cpu_busy_pct", "value_b"]  # full at both
    # a side named by a spec is shown by the level its runs have
    top = Claim("latencyTop", "000", "test", "p95 grows", "p95_ms", (1.0, math.inf), factor="threads", a="max",
                b="second-max", at={"instances": 1}, sources=("scaleout",))
    assert {(r["a"], r["b"]) for r in condition_rows(top, "s", mechanism_frame(_scaleout().runs))} == {("8", "4")}
    assert rows.loc["mysqld_cpu_us_per_txn", "ratio"] == pytest.approx(2.0)  # sqrt(8 / 2)
    # throughput still rising at the largest count: no saturation point, nothing to compare
    still = _scaleout()
    still.extra["scaleout-cells"].loc[3, ["qps", "ci_lo", "ci_hi"]] = [3000.0, 2970.0, 3030.0]
    assert saturation_sides(SATURATION, still) is None


STEADY = Claim("steadyRuns", "000", "test", "runs are stable", "steady", (0.9, 1.0), test="within", kind="share",
               sources=("storage", "tpcc"))


def _drifting(study: str, slow: float, fast: float) -> Evidence:
    """Runs of one study: two slowed (their second halves read more per transaction), one sped up, one
    stable and one drifting but saturated (its host CPUs at 95 %: the share leaves it out)."""
    rows = []
    for name, reason, drift, busy_s, read in (("slow1", "drift", -12.0, 40.0, slow), ("slow2", "drift", -8.0, 40.0, slow),
                                              ("fast", "drift", 9.0, 40.0, fast), ("flat", "", 0.1, 40.0, 1.0),
                                              ("hot", "drift", -20.0, 76.0, 9.0)):
        rows.append({"run_id": f"{study}-{name}", "host": "h", "window_s": 40.0, "host_cpu_busy_s": busy_s,
                     "steady": reason != "drift", "steady_reason": reason, "drift_pct": drift,
                     "first_half_tps": 100.0, "second_half_tps": 100.0 + drift,
                     "first_half_read_kb_per_txn": 10.0, "second_half_read_kb_per_txn": 10.0 * read,
                     "first_half_busy_pct": 50.0, "second_half_busy_pct": 50.0})
    return Evidence(study, "tpcc", pd.DataFrame(rows), host_cpus={"h": 2})


def test_the_share_of_stable_runs_shows_what_changed_inside_the_drifting_runs_it_counted() -> None:
    evidence = [_drifting("s1", 1.5, 0.8), _drifting("s2", 1.3, 0.9)]
    judged = pd.DataFrame([{"id": "steadyRuns", "study": "s1+s2", "verdict": "disagree"}])
    rows = mechanism_rows([STEADY], judged, evidence)
    assert set(rows["condition"]) == {"4 of 6 drifting runs slowed", "2 of 6 drifting runs sped up"}  # "hot" left out
    assert set(rows["a"]) == {"second half"} and set(rows["b"]) == {"first half"}
    slowed = rows[rows["condition"].str.endswith("slowed")].set_index("counter")
    assert slowed.loc["half_read_kb_per_txn", "ratio"] == pytest.approx(1.4)
    assert slowed.loc["half_tps", "value_a"] == pytest.approx(90.0) and slowed.loc["half_tps", "runs_a"] == 4
    sped = rows[rows["condition"].str.endswith("sped up")].set_index("counter")
    assert sped.loc["half_read_kb_per_txn", "ratio"] == pytest.approx(0.85)
    words = moved(rows, "steadyRuns")
    assert words[0].startswith("4 of 6 drifting runs slowed: KiB read per transaction, all devices 14 vs 10 (x1.4)")
    assert "busy" not in " ".join(words)  # did not move
    # a study that is not the claim's adds nothing; a claim not tested gets no rows
    assert len(mechanism_rows([STEADY], judged, [*evidence, _drifting("s3", 3.0, 0.1)])) == len(rows)
    assert mechanism_rows([STEADY], judged.assign(verdict="not tested"), evidence).empty


def test_the_papers_sentence_for_a_decided_verdict() -> None:
    from dbmatrix.publish.claims_tex import mechanism_sentence

    rows = mechanism_rows([STEADY], pd.DataFrame([{"id": "steadyRuns", "study": "s1", "verdict": "disagree"}]),
                          [_drifting("s1", 1.5, 0.8)])
    text = mechanism_sentence(rows, "steadyRuns")
    assert text.startswith("\\emph{what moved} (second half vs first half; the counters' means over runs): "
                           "\\textit{2 of 3 drifting runs slowed}: KiB read per transaction, all devices 15 vs 10 ($\\times$1.5)")
    assert "; \\textit{1 of 3 drifting runs sped up}: " in text
    assert mechanism_sentence(rows, "another") == ""
    sat = mechanism_rows([SATURATION], pd.DataFrame([{"id": "scaleSaturation", "study": "scale-x", "verdict": "agree"}]),
                         [_scaleout()])
    assert mechanism_sentence(sat, "scaleSaturation", "threads 8 / 2").startswith(
        "\\emph{what moved} (threads 8 vs 2; the counters' means over runs): mysqld CPU µs per transaction")


def test_a_dataset_size_claim_shows_the_sizes_per_pair_it_was_judged_on() -> None:
    """lz4's saving judged per block size (the pairs of datasets that differ only in compression): the
    mechanism table gives the sizes per pair, not the runs' counters pooled over the pairs, so a verdict that
    depends on the block size shows where."""
    runs = _runs()
    size = {("4k", "none"): 300, ("4k", "lz4"): 200, ("16k", "none"): 320, ("16k", "lz4"): 80}
    runs["data_physical_bytes"] = [size[(b, c)] * 2**20 for b, c in zip(runs["block_size"], runs["compression"])]
    claim = Claim("lzSize", "003", "test", "lz4 4x smaller", "data_physical_bytes", (3.0, 5.0), test="within",
                  factor="compression", a="none", b="lz4", at={"engine": "myrocks"}, sources=("tpcc",))
    judged = pd.DataFrame([{"id": "lzSize", "study": "t", "verdict": "depends on block size"}])
    rows = mechanism_rows([claim], judged, [Evidence("t", "tpcc", runs, {"block_size": ["4k", "16k"]})])
    assert set(rows["counter"]) == {"data_physical_mib"}
    on_disk = rows[rows["counter"] == "data_physical_mib"].set_index("condition")
    assert on_disk.loc["block 4k", "ratio"] == pytest.approx(1.5) and on_disk.loc["block 16k", "ratio"] == 4.0
    assert moved(rows, "lzSize") == ["block 4k: on-disk size (du), MiB 300 vs 200 (x1.5)",  # the spec's order
                                     "block 16k: on-disk size (du), MiB 320 vs 80 (x4)"]


def test_the_steady_state_paragraphs_sentence_on_the_drifting_runs() -> None:
    from dbmatrix.publish.claims_tex import drift_text

    rows = mechanism_rows([STEADY], pd.DataFrame([{"id": "steadyRuns", "study": "s1", "verdict": "disagree"}]),
                          [_drifting("s1", 1.5, 0.8)])
    text = drift_text(rows)
    assert "2 of 3 drifting runs slowed (throughput $\\times$0.90): per transaction they read $\\times$1.50 as " \
           "much, the host's CPUs were busy $\\times$1.00 as much; 1 of 3 drifting runs sped up " \
           "(throughput $\\times$1.09)" in text  # no write figures in these runs: not said
    none = drift_text(pd.DataFrame())
    assert none.startswith("In this build no drifting run has the halves") and "$" not in none
    assert drift_text(rows[~rows["counter"].str.startswith("half_")]) == none
