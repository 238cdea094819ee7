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
