"""The TPC-C workload (sysbench-tpcc): the standard tables plus tpmC per cell (``processed/tpcc-cells.parquet``)."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.kinds.base import PaperSection, StudyKind
from dbmatrix.analyse.tables import Analysis, MiB, closed_loop, load_processed, write_parquet
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore

TPCC_COLUMNS = ["cell_id", "n", "tpmC", "ci_lo", "ci_hi", "tps", "hit_ratio", "data_hit_ratio", "data_mib"]
TPCC_TABLE = "tpcc-cells"


class TpccKind(StudyKind):
    name: ClassVar[str] = "tpcc"
    noun: ClassVar[str] = "TPC-C study"
    prefix: ClassVar[str] = "tpcc"
    extra_tables: ClassVar[tuple[str, ...]] = (f"{TPCC_TABLE}.parquet",)
    paper_hooks: ClassVar[tuple[str, ...]] = ("tpcc-table",)
    section: ClassVar[PaperSection | None] = PaperSection(
        "tpcc-section.tex", body="\\input{tpcc}",
        not_run="\\section{TPC-C}\nNot run in this build: the profile has no TPC-C study with completed runs; the "
                "storage-matrix claims of seed~003 (measured there with sysbench-TPCC) are set against the OLTP "
                "read-write matrix instead.")

    def recognises(self, exp: Experiment) -> bool:
        return "tpcc" in exp.factors.get("workload", ())

    def after_analysis(self, store: ResultStore, exp: Experiment, a: Analysis) -> None:
        # From the runs table as written (what figures and the paper read), so its numbers are the paper's.
        write_parquet(tpcc_table(store, closed_loop(load_processed(store).runs)),
                      store.processed / f"{TPCC_TABLE}.parquet")


def tpcc_table(store: ResultStore, runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell: tpmC (New-Order transactions per minute), geometric mean over repetitions with a 95 % CI
    (t on log tpmC, variance pooled over the cells: df = runs - cells), all
    transactions per second, the cache hit ratio over the window from the engine's counters (MyRocks:
    all blocks and data blocks; :mod:`dbmatrix.parse.cache_counters`) and the loaded tables' on-disk size."""
    rows = []
    for _, r in runs.iterrows():
        try:
            summary = store.parsed(r["run_id"]).summary
        except (OSError, ValueError):
            continue
        tpmc = summary.get("tpmC") or (summary.get("tpcc") or {}).get("tpmC")
        if tpmc is not None:
            rows.append({"cell_id": r["cell_id"], "tpmC": float(tpmc), "tps": float(r["tps"]),
                         **{k: float(pd.to_numeric(r.get(c), errors="coerce"))
                            for k, c in (("hit_ratio", "cache_hit_ratio"), ("data_hit_ratio", "cache_data_hit_ratio"),
                                         ("data_bytes", "data_physical_bytes"))}})
    if not rows:
        return pd.DataFrame(columns=TPCC_COLUMNS)
    df = pd.DataFrame(rows)
    df = df[df["tpmC"] > 0]
    df["log"] = np.log(df["tpmC"])
    # The spread of log tpmC pooled over the cells (the factorial model's assumption: one CV for all cells),
    # so that two repetitions per cell still give a usable interval (t with runs - cells df, not 1).
    groups = df.groupby("cell_id", sort=True)
    dof = len(df) - groups.ngroups
    s2 = float(((df["log"] - groups["log"].transform("mean")) ** 2).sum() / dof) if dof > 0 else math.nan
    t = float(sps.t.ppf(0.975, dof)) if dof > 0 else math.nan
    out = []
    for cid, g in groups:
        mean = float(g["log"].mean())
        half = t * math.sqrt(s2 / len(g)) if dof > 0 else math.nan
        out.append({"cell_id": cid, "n": len(g), "tpmC": math.exp(mean), "ci_lo": math.exp(mean - half),
                    "ci_hi": math.exp(mean + half), "tps": g["tps"].mean(), "hit_ratio": g["hit_ratio"].mean(),
                    "data_hit_ratio": g["data_hit_ratio"].mean(), "data_mib": g["data_bytes"].median() / MiB})
    return pd.DataFrame(out, columns=TPCC_COLUMNS)
