"""The scale-out study (seed 000): several server instances per run (:mod:`dbmatrix.analyse.scaleout`'s
tables, ``processed/scaleout-*.csv``), its own estimators and figures (``publish.figures_scaleout``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pandas as pd

from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
from dbmatrix.analyse.contrasts import Estimate, NotTestable, ratio_estimate
from dbmatrix.analyse.effects import sum_contrast
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.kinds.base import PaperSection, StudyKind
from dbmatrix.analyse.scaleout import (
    P95_THRESHOLD_MS,
    peak_ratio_estimate,
    saturation_estimate,
    saturation_point,
    scaleout_tables,
    stability_estimate,
)
from dbmatrix.analyse.scaleout_crossing import crossing_ratio_estimate
from dbmatrix.analyse.tables import Analysis, write_csv
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore

if TYPE_CHECKING:
    from dbmatrix.analyse.claims.model import Claim, Evidence

PREFIX = "scaleout-"


class ScaleoutKind(StudyKind):
    name: ClassVar[str] = "scaleout"
    noun: ClassVar[str] = "scale-out study"
    prefix: ClassVar[str] = "scale"
    figures: ClassVar[tuple[str, ...]] = ("scaleout-qps", "scaleout-p95", "scaleout-time")
    section: ClassVar[PaperSection | None] = PaperSection(
        "scaleout-section.tex", body="\\input{scaleout}",
        not_run="\\section{Scale-out: seed~000}\nNot run in this build: the profile has no scale-out study with "
                "completed runs; seed~000's claims are not tested.")
    extra_tables: ClassVar[tuple[str, ...]] = (f"{PREFIX}*.csv",)
    paper_hooks: ClassVar[tuple[str, ...]] = ("scaleout-crossing",)  # dbmatrix.publish.scaleout_crossing

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

    def claim_estimate(self, claim: Claim, ev: Evidence, confidence: float = 0.95) -> Estimate:
        """In the campaign-level model with every campaign of `ev` (one estimator family): saturation as a
        ratio of the runs' QPS between two thread levels, stability as the runs' half ratio with a campaign
        block, the doubling as the campaigns' paired crossing ratio (:mod:`dbmatrix.analyse.scaleout_crossing`),
        the peak ratio from the tables."""
        if claim.metric == "scale_saturation":
            return _saturation(ev, confidence=confidence)
        if claim.metric == "scale_stability":
            return _stability(ev, confidence)
        if claim.metric == "scale_p95_doubling":
            return crossing_ratio_estimate(ev.runs, confidence, P95_THRESHOLD_MS)
        est = _scaleout_estimate(claim.metric, ev.extra)  # what the design lacks is said first
        if confidence == 0.95:
            return est
        raise NotTestable(f"the peak ratio's interval is built from the two peaks' 95 % intervals, so it cannot "
                          f"be given at the {100 * confidence:.4g} % level a look asks for")


def _saturation(ev: Evidence, instances: int = 1, confidence: float = 0.95) -> Estimate:
    """QPS at the largest thread count over QPS at the saturation point (read from the tables of all
    campaigns), as a ratio of the runs' geometric means in the campaign-level model."""
    sat, _ = saturation_point(ev.extra.get("scaleout-cells"), instances)
    runs = ev.runs[pd.to_numeric(ev.runs["instances"], errors="coerce") == instances]
    knee = int(sat["saturation_threads"])
    est = ratio_estimate(runs, "qps", "threads", "max", knee, factors=["threads"], confidence=confidence)
    return replace(est, basis=f"QPS at the largest thread count / at the saturation point {knee} (interval "
                   f"{sat['saturation_lo']}-{sat['saturation_hi']}; peak at {sat['peak_threads']}): {est.basis}")


def _stability(ev: Evidence, confidence: float = 0.95) -> Estimate:
    """Second-half over first-half per-second QPS of the best cell's runs: the geometric mean with a campaign
    block (sum-coded: the average over campaigns), t on the runs' residual df."""
    import statsmodels.api as sm

    st = ev.extra.get("scaleout-stability", pd.DataFrame())
    if st is None or st.empty or st["half_ratio"].notna().sum() < 2:
        raise NotTestable("needs two or more runs with per-second rows at the best setting")
    st = st.dropna(subset=["half_ratio"])
    st = st[st["half_ratio"] > 0]
    camp = campaign_column(ev.runs.set_index("run_id")).reindex(st["run_id"]).fillna(1).astype(int).to_numpy()
    ks = sorted(set(camp))
    y = np.log(st["half_ratio"].to_numpy(dtype=float))
    X = np.column_stack([np.ones(len(y)), sum_contrast(len(ks))[[ks.index(c) for c in camp]]])
    if len(y) - X.shape[1] < 1:
        raise NotTestable("too few runs for an interval beside the campaign block")
    fit = sm.OLS(y, X).fit()
    lo, hi = fit.conf_int(alpha=1 - confidence)[0]
    return Estimate(float(np.exp(fit.params[0])), float(np.exp(lo)), float(np.exp(hi)),
                    f"per-second QPS, second half of the window / first half, {len(y)} runs"
                    + (f" in {len(ks)} campaigns (campaign block)" if len(ks) > 1 else "")
                    + f"; log scale, t on {int(fit.df_resid)} df", len(y), f"cell {st['cell_id'].iloc[0]}",
                    len(ks), run_ids=frozenset(str(r) for r in st["run_id"]))


def _scaleout_estimate(metric: str, tables: Mapping[str, pd.DataFrame]) -> Estimate:
    if metric == "scale_saturation":
        return saturation_estimate(tables, 1)
    if metric == "scale_peak_16_8":
        return peak_ratio_estimate(tables, 16, 8)
    if metric == "scale_stability":
        return stability_estimate(tables)
    raise NotTestable(f"unknown scale-out metric {metric!r}")
