"""The Galera replication study (seed 002): replication tables (:mod:`dbmatrix.analyse.replication`), its
own estimators of the applier claims, its paper section (figures and macros: ``publish.replication``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

import pandas as pd

from dbmatrix.analyse import replication as repl
from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
from dbmatrix.analyse.contrasts import Estimate, NotTestable, ratio_estimate
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.kinds.base import PaperSection, StudyKind
from dbmatrix.analyse.shares import share_difference
from dbmatrix.analyse.tables import Analysis, load_processed
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore

if TYPE_CHECKING:
    from dbmatrix.analyse.claims.model import Claim, Evidence

METRICS = ("fc_paused_pct_points", "tps_ratio", "lat_avg_ratio", "lat_p95_ratio")


class GaleraKind(StudyKind):
    name: ClassVar[str] = "galera"
    noun: ClassVar[str] = "Galera study"
    prefix: ClassVar[str] = "repl"
    standard_tables: ClassVar[bool] = False
    figures: ClassVar[tuple[str, ...]] = ()  # its own figures: the section's publisher draws them
    extra_tables: ClassVar[tuple[str, ...]] = ("replication-*.csv",)
    runs_table: ClassVar[str | None] = "replication-runs"
    section: ClassVar[PaperSection | None] = PaperSection(
        "replication-section.tex", publisher="replication",
        not_run="\\section{Replication: Galera applier threads}\nNot run in this build: the profile has no Galera "
                "study with completed runs (or the replication analysis is not installed), so the seed~002 claims "
                "stay untested.")

    def recognises(self, exp: Experiment) -> bool:
        topology = getattr(exp, "topology", None)
        return topology is not None and getattr(topology, "kind", "standalone") == self.name

    def before_analysis(self, store: ResultStore, exp: Experiment) -> None:
        repl.analyse_replication(store, exp)

    def _load_standard(self, store: ResultStore) -> Analysis | None:
        return load_processed(store) if (store.processed / "cells.csv").is_file() else None

    def publishable(self, st: StudyTables) -> bool:
        return True

    def evidence_tables(self, st: StudyTables) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
        extra = {"replication-runs": st.extra["replication-runs"]} if "replication-runs" in st.extra else {}
        return extra, st.extra.get("replication-effects")

    def campaign_tables(self, st: StudyTables) -> dict[int, dict[str, pd.DataFrame]]:
        runs = st.extra.get("replication-runs", pd.DataFrame())
        if runs is None or runs.empty or len(campaigns_of(runs)) < 2:
            return {}
        col = campaign_column(runs)
        return {k: {"replication-runs": runs[col == k],
                    "replication-effects": repl.effects(runs[col == k].reset_index(drop=True))}
                for k in campaigns_of(runs)}

    def estimates(self, claim: Claim) -> bool:
        return claim.metric in METRICS

    def claim_estimate(self, claim: Claim, ev: Evidence, confidence: float = 0.95) -> Estimate:
        """The applier claims in the campaign-level model of every other claim (one estimator family):
        the replication runs at the pressured setting, slave_threads compared (a ratio of geometric means
        for throughput and latency, a MOVER difference of logit shares for the paused time)."""
        from dbmatrix.analyse.claims.premises import pressured

        runs = ev.extra.get("replication-runs")
        if runs is None or runs.empty:
            raise NotTestable("the replication study's runs table is missing")
        setting = pressured(ev)
        runs = repl.setting_runs(runs, setting)
        factor = claim.factor or repl.LEVEL
        if claim.metric == "fc_paused_pct_points":
            est = share_difference(runs, "fc_paused_pct", factor, claim.a, claim.b, confidence)
        elif claim.metric in RATIO_COLUMNS:
            est = ratio_estimate(runs, RATIO_COLUMNS[claim.metric], factor, claim.a, claim.b, factors=[factor],
                                 confidence=confidence)
        else:
            raise NotTestable(f"unknown replication metric {claim.metric!r}")
        where = "" if setting == "all" else f" at {setting.replace('_', ' ')}"
        return replace(est, basis=f"replication runs{where}: {est.basis}", compared=est.compared + where)


# the replication runs' column behind each ratio metric of the claims
RATIO_COLUMNS = {"tps_ratio": "tps", "lat_avg_ratio": "lat_avg_ms", "lat_p95_ratio": "lat_p95_ms"}
