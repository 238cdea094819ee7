"""The judge step: every claim (pooled, per campaign, per condition), our further findings, what deciding them
cost and the model-fitted tables the figures draw, judged once per build from the studies' processed tables
(the costs also from the until-decided logs and the run records they count). Its result, a
:class:`~dbmatrix.analyse.judgement.Judgement`, is written into the build and read by every view
(:mod:`dbmatrix.analyse.judgement`); publishing only formats it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from dbmatrix.analyse.claims import claims_evidence, evaluate
from dbmatrix.analyse.claims.boot_check import boot_check
from dbmatrix.analyse.claims.campaign_costs import campaign_decisions
from dbmatrix.analyse.claims.catalogue import CLAIMS, FURTHER
from dbmatrix.analyse.claims.costs import study_costs
from dbmatrix.analyse.figure_data import (
    FigureDataError,
    StudyTables,
    block_size_table,
    compression_tables,
    medium_cache_tables,
)
from dbmatrix.analyse.interactions import interaction_table
from dbmatrix.analyse.judgement import (
    COST_COLUMNS,
    INTERACTION_COLUMNS,
    SUMMARY_COLUMNS,
    FigureTables,
    Judgement,
    combined,
    frames_digest,
    inputs_digest,
    normalise,
)
from dbmatrix.analyse.kinds import get_kind
from dbmatrix.analyse.mechanism import mechanism_rows
from dbmatrix.analyse.tables import factor_columns

FigureModel = Callable[[StudyTables], tuple[dict[str, pd.DataFrame], dict[str, str]]]


def _block_size(st: StudyTables) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    table, a, b = block_size_table(st)
    return {"ratios": table}, {"a": a, "b": b}


def _compression(st: StudyTables) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    tps, sizes, writes = compression_tables(st)
    return {"tps": tps, "sizes": sizes, "writes": writes}, {}


def _medium_cache(st: StudyTables) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    tps, p95 = medium_cache_tables(st)
    return {"tps": tps, "p95": p95}, {}


# The figures whose tables come from a model fit (contrasts.ratio_estimate, the factorial model's adjusted
# means): fitted here, once; the figure registry (dbmatrix.publish.registry) draws them from the judgement.
FIGURE_MODELS: dict[str, FigureModel] = {"block-size": _block_size, "compression": _compression,
                                         "medium-cache": _medium_cache}


def publishable(studies: Sequence[StudyTables]) -> list[StudyTables]:
    """The studies a build judges and publishes (their kind says whether they have what it needs)."""
    return [s for s in studies if get_kind(s.kind).publishable(s)]


def study_digest(st: StudyTables) -> str:
    """A study's data digest (its processed runs and cells; "none" without tables): the paper's provenance."""
    return frames_digest(st.analysis.runs, st.analysis.cells) if st.a is not None else "none"


def figure_tables(studies: Sequence[StudyTables]) -> tuple[dict[str, FigureTables], tuple[tuple[str, str, str], ...]]:
    """Per model-fitted figure (:data:`FIGURE_MODELS`), its tables from the first study (in the given order)
    whose kind draws it and that can give them; and why each study before it could not."""
    out: dict[str, FigureTables] = {}
    notes: list[tuple[str, str, str]] = []
    for stem, fit in FIGURE_MODELS.items():
        for st in studies:
            if stem not in get_kind(st.kind).figures or st.a is None:
                continue
            try:
                tables, labels = fit(st)
            except FigureDataError as exc:
                notes.append((stem, st.name, str(exc)))
                continue
            out[stem] = FigureTables(st.name, tables, labels)
            break
    return out, tuple(notes)


def decision_tables(studies: Sequence[StudyTables]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per claim and per study campaign, what running until decided cost (:mod:`dbmatrix.analyse.claims.costs`;
    two empty tables when no study of the build ran until decided)."""
    parts = [study_costs(st.name, st.store) for st in studies]
    costs = [c for c, _ in parts if not c.empty]
    sums = [s for _, s in parts if not s.empty]
    return (pd.concat(costs, ignore_index=True) if costs else pd.DataFrame(columns=list(COST_COLUMNS)),
            pd.concat(sums, ignore_index=True) if sums else pd.DataFrame(columns=list(SUMMARY_COLUMNS)))


def judge(studies: Sequence[StudyTables], code: str = "") -> Judgement:
    """The judgement of the publishable studies (see the module doc), as its files hold it
    (:func:`~dbmatrix.analyse.judgement.normalise`); `code`: the verdict code's digest, recorded with the
    inputs so that a build judged by other code is not taken for this one's."""
    studies = publishable(studies)
    evidence = claims_evidence(studies)
    costs, summary = decision_tables(studies)
    figures, notes = figure_tables(studies)
    inputs = inputs_digest({st.name: study_digest(st) for st in studies}, code)
    seeds, further = evaluate(evidence), evaluate(evidence, FURTHER)
    judged = pd.concat([seeds.claims, further.claims], ignore_index=True)
    mechanism = mechanism_rows((*CLAIMS, *FURTHER), judged, evidence)
    looks = campaign_decisions((*CLAIMS, *FURTHER), evidence, judged)
    parts = [interaction_table(st.name, st.runs, factor_columns(st.runs)) for st in studies if st.a is not None]
    interactions = (pd.concat([t for t in parts if not t.empty], ignore_index=True)
                    if any(not t.empty for t in parts) else pd.DataFrame(columns=list(INTERACTION_COLUMNS)))
    both = combined(seeds, further)
    boots = boot_check((*CLAIMS, *FURTHER), both.claims, both.campaigns, both.levels, evidence)
    return normalise(Judgement(seeds, further, costs, summary, figures, notes, inputs, mechanism, looks,
                               interactions, boots))
