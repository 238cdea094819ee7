"""The scale-out study (seed 000): several server instances per run (:mod:`dbmatrix.analyse.scaleout`'s
tables, ``processed/scaleout-*.csv``), its own estimators and figures (``publish.figures_scaleout``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

import pandas as pd

from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
from dbmatrix.analyse.contrasts import Estimate, NotTestable
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.kinds.base import StudyKind
from dbmatrix.analyse.scaleout import (
    doubling_estimate,
    peak_ratio_estimate,
    saturation_estimate,
    scaleout_tables,
    stability_estimate,
)
from dbmatrix.analyse.tables import Analysis, write_csv
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore

if TYPE_CHECKING:
    from dbmatrix.analyse.claims.model import Claim, Evidence

PREFIX = "scaleout-"


class ScaleoutKind(StudyKind):
    name: ClassVar[str] = "scaleout"
    prefix: ClassVar[str] = "scale"
    figures: ClassVar[tuple[str, ...]] = ("scaleout-qps", "scaleout-p95", "scaleout-time")
    extra_tables: ClassVar[tuple[str, ...]] = (f"{PREFIX}*.csv",)

    def recognises(self, exp: Experiment) -> bool:
        topology = getattr(exp, "topology", None)
        return topology is not None and getattr(topology, "kind", "standalone") == "instances"

    def after_analysis(self, store: ResultStore, exp: Experiment, a: Analysis) -> None:
        tables = scaleout_tables(store.load_runs(), store.load_histograms(), store.load_intervals(),
                                 store.records())
        for name, df in tables.items():
            write_csv(df, store.processed / f"{name}.csv")

    def evidence_tables(self, st: StudyTables) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
        return {k: v for k, v in st.extra.items() if k.startswith(PREFIX)}, None

    def campaign_tables(self, st: StudyTables) -> dict[int, dict[str, pd.DataFrame]]:
        if st.a is None or len(campaigns_of(st.runs)) <= 1:
            return {}
        hist_p = st.store.processed / "histograms.parquet"
        hist = pd.read_parquet(hist_p) if hist_p.is_file() else pd.DataFrame()
        iv = st.intervals()
        col = campaign_column(st.runs)
        out = {}
        for k in campaigns_of(st.runs):
            runs = st.runs[col == k]
            ids = set(runs["run_id"])
            out[k] = scaleout_tables(runs, hist[hist["run_id"].isin(ids)] if not hist.empty else hist,
                                     iv[iv["run_id"].isin(ids)] if not iv.empty else iv, [])
        return out

    def estimates(self, claim: Claim) -> bool:
        return claim.metric.startswith("scale_")

    def claim_estimate(self, claim: Claim, ev: Evidence) -> Estimate:
        return _scaleout_estimate(claim.metric, ev.extra)


def _scaleout_estimate(metric: str, tables: Mapping[str, pd.DataFrame]) -> Estimate:
    if metric == "scale_saturation":
        return saturation_estimate(tables, 1)
    if metric == "scale_p95_doubling":
        return doubling_estimate(tables)
    if metric == "scale_peak_16_8":
        return peak_ratio_estimate(tables, 16, 8)
    if metric == "scale_stability":
        return stability_estimate(tables)
    raise NotTestable(f"unknown scale-out metric {metric!r}")
