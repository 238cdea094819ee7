"""A soak study (seed 000's hour-long run): one cell measured for an hour or more, run in a sitting of its own;
its table ``processed/soak-runs.csv`` (:mod:`dbmatrix.analyse.soak`) and its own estimators of the seed's
run-length claims."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import pandas as pd

from dbmatrix.analyse.contrasts import Estimate, NotTestable
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.kinds.base import PaperSection, StudyKind
from dbmatrix.analyse.soak import (
    RATIOS,
    SOAK_MIN_S,
    pooled_ratio,
    probe_text,
    series_table,
    soak_table,
    warmup_end,
    with_probes,
)
from dbmatrix.analyse.tables import Analysis, write_csv
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import PROBE_AFTER_FILE, PROBE_BEFORE_FILE, ResultStore

if TYPE_CHECKING:
    from dbmatrix.analyse.claims.model import Claim, Evidence

TABLE = "soak-runs"
SERIES = "soak-series"  # 30-s batch means from the run's start: the figure's data
METRIC_PREFIX = "soak_"


class SoakKind(StudyKind):
    name: ClassVar[str] = "soak"
    noun: ClassVar[str] = "soak study"
    prefix: ClassVar[str] = "soak"
    figures: ClassVar[tuple[str, ...]] = ()  # its own figure: the section's publisher draws it
    extra_tables: ClassVar[tuple[str, ...]] = (f"{TABLE}.csv", f"{SERIES}.csv")
    own_sitting: ClassVar[bool] = True
    section: ClassVar[PaperSection | None] = PaperSection(
        "soak-section.tex", publisher="soak-section",
        not_run="\\section{Run length: seed~000's hour}\nNot run in this build: the profile has no soak study "
                "with completed runs; seed~000's run-length claims are not tested.")

    def recognises(self, exp: Experiment) -> bool:
        return exp.measure_s >= SOAK_MIN_S and len(exp.cells()) == 1

    def after_analysis(self, store: ResultStore, exp: Experiment, a: Analysis) -> None:
        items = []
        for m in store.records():  # a record's campaign: 1 for manifests older than campaigns
            if not m.ok:
                continue
            p = store.parsed(m.run_id)
            items.append((m.run_id, m.cell_id, m.campaign,
                          [float(r["tps"]) for r in p.warmup_intervals], [float(r["tps"]) for r in p.intervals]))
        probes = {m.run_id: (store.probe(m.run_id, PROBE_BEFORE_FILE), store.probe(m.run_id, PROBE_AFTER_FILE))
                  for m in store.records() if m.ok}
        write_csv(with_probes(soak_table(items), probes), store.processed / f"{TABLE}.csv")
        write_csv(series_table(items), store.processed / f"{SERIES}.csv")

    def evidence_tables(self, st: StudyTables) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
        return {k: v for k, v in st.extra.items() if k == TABLE}, None

    def campaign_tables(self, st: StudyTables) -> dict[int, dict[str, pd.DataFrame]]:
        t = st.extra.get(TABLE, pd.DataFrame())
        if t is None or t.empty or t["campaign"].nunique() <= 1:
            return {}
        return {int(k): {TABLE: g.reset_index(drop=True)} for k, g in t.groupby("campaign", sort=True)}

    def estimates(self, claim: Claim) -> bool:
        return claim.metric.startswith(METRIC_PREFIX)

    def claim_estimate(self, claim: Claim, ev: Evidence, confidence: float = 0.95) -> Estimate:
        """A ratio of window means within each long run, pooled over the runs (one per campaign)."""
        metric = claim.metric.removeprefix(METRIC_PREFIX)
        if metric not in RATIOS:
            raise NotTestable(f"unknown soak metric {claim.metric!r}; known: "
                              f"{', '.join(METRIC_PREFIX + m for m in RATIOS)}")
        table = ev.extra.get(TABLE, pd.DataFrame())
        if table is None or table.empty:
            raise NotTestable(f"no run measured at least {2 * 300} s: a soak needs an hour (spec measure_s)")
        r = pooled_ratio(table, metric, confidence)
        basis = r.basis
        if metric == "minute_over_hour" and "2min_over_hour" in table.columns:
            two = pooled_ratio(table, "2min_over_hour", confidence)
            basis += (f"; the first 2 minutes over the hour: {two.estimate:.3g} [{two.ci_lo:.3g}, {two.ci_hi:.3g}]; "
                      + warmup_end(table))
        basis += "; " + probe_text(table)
        return Estimate(r.estimate, r.ci_lo, r.ci_hi, basis, r.runs, f"cell {table['cell_id'].iloc[0]}",
                        int(table["campaign"].nunique()), run_ids=frozenset(str(x) for x in table["run_id"]),
                        confidence=confidence, df=r.df)
