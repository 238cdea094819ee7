"""The Galera replication study (seed 002): replication tables (:mod:`dbmatrix.analyse.replication`), its
own estimators of the applier claims, its paper section (figures and macros: ``publish.replication``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

import pandas as pd

from dbmatrix.analyse import replication as repl
from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
from dbmatrix.analyse.contrasts import Estimate, NotTestable, replication_estimate
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.kinds.base import PaperSection, StudyKind
from dbmatrix.analyse.tables import Analysis, load_processed
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore

if TYPE_CHECKING:
    from dbmatrix.analyse.claims.model import Claim, Evidence

METRICS = ("fc_paused_pct_points", "tps_ratio", "lat_avg_ratio", "lat_p95_ratio")


class GaleraKind(StudyKind):
    name: ClassVar[str] = "galera"
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

    def claim_estimate(self, claim: Claim, ev: Evidence) -> Estimate:
        from dbmatrix.analyse.claims.premises import pressured

        if ev.replication is None or ev.replication.empty:
            raise NotTestable("the replication study's effect table is missing")
        est = replication_estimate(ev.replication, claim.metric, pressured(ev))
        return _orient(claim, est) if claim.a == "min" else est


def _orient(claim: Claim, est: Estimate) -> Estimate:
    """The replication table compares the highest level with the lowest; a claim stated the other way
    round gets the reciprocal (ratios) or the negation (differences)."""
    if claim.kind == "difference":
        return replace(est, estimate=-est.estimate, ci_lo=-est.ci_hi, ci_hi=-est.ci_lo,
                       compared=_swap(est.compared))
    inv = [1 / x if x else math.inf for x in (est.estimate, est.ci_hi, est.ci_lo)]
    return replace(est, estimate=inv[0], ci_lo=inv[1], ci_hi=inv[2], compared=_swap(est.compared))


def _swap(compared: str) -> str:
    head, _, levels = compared.rpartition(" ")
    a, _, b = levels.partition("/")
    return f"{head} {b}/{a}".strip() if b else compared
