"""Which factors a figure may average over (pure): none whose two-way interaction with the contrast it draws
is significant (issue 41: "figures drawn along the interactions").

A figure shows a contrast (block size, compression, medium x cache...) and some factors as panels, series or
axes; the study's other varied factors are averaged over. Averaging over a factor F is honest only when the
contrast does not depend on F: the test is the partial F test of the contrast x F term in the two-way
factorial model of log(metric) on the study's runs, with the campaign as an additive block
(:func:`dbmatrix.analyse.contrasts.fit_log_model`), at :data:`~dbmatrix.analyse.contrasts.INTERACTION_ALPHA`,
the level at which the claims never average over an interaction either.

:func:`split_factors` tells a figure's table which factors to draw as panels or series; the figure check
(:func:`averaged_interactions`, via :mod:`dbmatrix.publish.registry`) fails a figure that still averages over
one. Both read the same tests, so a table that splits by what it is told passes the check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from dbmatrix.analyse.contrasts import INTERACTION_ALPHA, fit_log_model, varied

BLOCK = "campaign"  # an additive block: campaigns shift every cell together, they do not interact
# the metrics the figures draw whose interactions the judge step tests once per study (interaction_table)
FIGURE_METRICS = ("tps", "p95_ms", "write_kb_per_txn", "qps")
COLUMNS = ("study", "metric", "factor_a", "factor_b", "f", "p")


@dataclass(frozen=True)
class Interaction:
    """A two-way interaction of the contrast factor `contrast` with `factor` on `metric`: F and p."""

    factor: str
    contrast: str
    metric: str
    f: float
    p: float

    def __str__(self) -> str:
        return (f"{self.factor} x {self.contrast} on {self.metric}: F = {self.f:.3g}, p = {self.p:.2g} "
                f"(< {INTERACTION_ALPHA:g})")


def interaction_tests(runs: pd.DataFrame, design: Sequence[str], metric: str,
                      pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[float, float]]:
    """(F, p) of each (contrast, factor) pair's two-way term in the model of log(`metric`) over the
    `design` factors the runs vary (campaign as a block); pairs the model cannot test (a factor not varied,
    an aliased term, no residual df) are left out."""
    model = fit_log_model(runs, list(design), metric, interactions=True, block=BLOCK)
    out: dict[tuple[str, str], tuple[float, float]] = {}
    if model is None:
        return out
    for c, f in pairs:
        if c == f or not model.has_term((c, f)):
            continue
        fv, p = model.term_test((c, f))
        if math.isfinite(p):
            out[(c, f)] = (fv, p)
    return out


def averaged_interactions(runs: pd.DataFrame, design: Sequence[str], contrast: Sequence[str],
                          shown: Sequence[str], metrics: Sequence[str],
                          alpha: float = INTERACTION_ALPHA) -> list[Interaction]:
    """The significant interactions of a `contrast` factor with a factor the figure averages over (a factor
    of the `design` the runs vary that is neither in `contrast` nor `shown`), per metric, in design order."""
    return averaged_in_table(interaction_table("", runs, design, metrics), "", contrast, shown, metrics, alpha)


def interaction_table(study: str, runs: pd.DataFrame, design: Sequence[str],
                      metrics: Sequence[str] = FIGURE_METRICS) -> pd.DataFrame:
    """Every estimable two-way term of the study's model per metric it measured: F and p (the judge step
    writes it; the figure check reads it, :func:`averaged_in_table`)."""
    design = varied(runs, design)
    pairs = [(a, b) for i, a in enumerate(design) for b in design[i + 1:]]
    rows = []
    for m in metrics:
        if m not in runs.columns or not pairs:
            continue
        for (a, b), (fv, p) in interaction_tests(runs, design, m, pairs).items():
            rows.append({"study": study, "metric": m, "factor_a": a, "factor_b": b, "f": fv, "p": p})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def averaged_in_table(table: pd.DataFrame, study: str, contrast: Sequence[str], shown: Sequence[str],
                      metrics: Sequence[str], alpha: float = INTERACTION_ALPHA) -> list[Interaction]:
    """:func:`averaged_interactions` read from a study's :func:`interaction_table` (no model fitted): the
    factors of its terms are the ones the study varies."""
    t = table[(table["study"] == study) & table["metric"].isin(list(metrics))] if len(table) else table
    if t.empty:
        return []
    factors = list(dict.fromkeys([*t["factor_a"], *t["factor_b"]]))
    averaged = [f for f in factors if f not in contrast and f not in shown]
    out = []
    for m in metrics:
        for f in averaged:
            for c in contrast:
                hit = t[(t["metric"] == m) & (((t["factor_a"] == c) & (t["factor_b"] == f))
                                              | ((t["factor_a"] == f) & (t["factor_b"] == c)))]
                if len(hit) and float(hit["p"].iloc[0]) < alpha:
                    out.append(Interaction(f, c, m, float(hit["f"].iloc[0]), float(hit["p"].iloc[0])))
    return out


def split_factors(runs: pd.DataFrame, design: Sequence[str], contrast: Sequence[str], shown: Sequence[str],
                  metrics: Sequence[str], alpha: float = INTERACTION_ALPHA) -> list[str]:
    """The factors a figure showing `contrast` (and `shown`) must draw as panels or series rather than
    average over: those of :func:`averaged_interactions`, in design order."""
    found = {i.factor for i in averaged_interactions(runs, design, contrast, shown, metrics, alpha)}
    return [f for f in design if f in found]


__all__ = ["BLOCK", "COLUMNS", "FIGURE_METRICS", "Interaction", "averaged_in_table", "averaged_interactions",
           "interaction_table", "interaction_tests", "split_factors"]
