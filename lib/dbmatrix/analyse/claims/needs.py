"""What a study's claims need from its design, before any data (pure; no servers, no files).

A study is meant to decide some claims of the registry (:func:`claims_for`: those whose ``sources`` name its
kind and whose levels its design has, or the spec's explicit ``claims:``). Each claim reads some of the
study's cells (:func:`claim_cells`) and needs its contrast identified by the design: the comparison at its
``at`` levels, at every level of its ``per`` factors, and the average over the other free factors
(:func:`identification`). Identification is decided by the analysis' own estimators run on the planned cells
with placeholder responses (:func:`planned_runs`): the check that makes a claim "not identified" after the
runs (:class:`dbmatrix.analyse.contrasts.NotIdentified`) refuses the design before them, one code path.
``dbmatrix plan`` and ``dbmatrix run`` refuse a study with a claim its design does not identify
(:func:`design_refusals`, called by :mod:`dbmatrix.claim_plan`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.claims.catalogue import CLAIMS
from dbmatrix.analyse.claims.estimators import estimate
from dbmatrix.analyse.claims.model import Claim, Evidence
from dbmatrix.analyse.contrasts import (
    METRIC_LABELS,
    NotIdentified,
    NotTestable,
    compared_text,
    level_product,
    ordered_levels,
    resolve_level,
)
from dbmatrix.analyse.kinds import kind_of
from dbmatrix.analyse.stats import level_key
from dbmatrix.spec.errors import SpecError
from dbmatrix.spec.experiment import Experiment
from dbmatrix.spec.factors import factor_word

# medium name -> the device it emulates (None: native), as an inventory's media declare it
Emulates = Mapping[str, str | None]
PLACEHOLDER_REPETITIONS = 2  # the design question, not the spec's replication: two runs per cell give residual df


def _default_emulates() -> dict[str, str | None]:
    """The media of this machine's default inventory (dbmatrix.hosts.inventory.localhost_inventory)."""
    from dbmatrix.hosts.inventory import localhost_inventory

    return {name: m.emulates for name, m in localhost_inventory().hosts[0].media.items()}


def planned_runs(exp: Experiment, metric: str = "tps", emulates: Emulates | None = None) -> pd.DataFrame:
    """The planned cells as the analysis sees runs, before any data: two runs per cell with every factor's
    level, ``emulated`` (what the cell's medium emulates), ``run_id``, ``cell_id`` and a placeholder
    positive `metric` (seeded lognormal noise: whether a contrast is identified depends on the cells only)."""
    emu = dict(emulates) if emulates is not None else _default_emulates()
    rows = [{**c.levels(), "cell_id": c.cell_id, "run_id": f"{c.cell_id}-r{rep}", "emulated": emu.get(c.medium)}
            for rep in range(1, PLACEHOLDER_REPETITIONS + 1) for c in exp.cells()]
    frame = pd.DataFrame(rows)
    frame[metric] = np.exp(np.random.default_rng(0).normal(0.0, 0.1, len(frame)))
    return frame


def _conditions(claim: Claim, frame: pd.DataFrame) -> dict[str, Any]:
    """The claim's ``at`` levels resolved in the frame (min/max/second-max, emulated:..., native), as the
    estimators resolve them (:func:`dbmatrix.analyse.contrasts.resolve_level`); NotTestable if one is not
    there."""
    return {f: resolve_level(frame, f, v) for f, v in claim.at.items()}


def _at(frame: pd.DataFrame, levels: Mapping[str, Any]) -> pd.DataFrame:
    for f, v in levels.items():
        frame = frame[frame[f].map(level_key) == level_key(v)]
    return frame


def applicable(claim: Claim, exp: Experiment, emulates: Emulates | None = None) -> str | None:
    """None when the study's kind is one of the claim's sources and its design has the claim's levels (the
    compared factor varies between two distinct levels a and b, every ``at`` level is planned); else why not."""
    kind = kind_of(exp).name
    if kind not in claim.sources:
        return f"judged on {' or '.join(claim.sources)} studies; {exp.name} is a {kind} study"
    if claim.not_tested:
        return f"never tested here: {claim.not_tested}"
    frame = planned_runs(exp, emulates=emulates)
    try:
        held = _conditions(claim, frame)
        if claim.factor is not None:
            a, b = resolve_level(frame, claim.factor, claim.a), resolve_level(frame, claim.factor, claim.b)
            if level_key(a) == level_key(b):
                return f"{factor_word(claim.factor)} has one level ({a}) to compare"
            sides = _at(frame, held)[claim.factor].map(level_key)
            missing = [str(v) for v in (a, b) if level_key(v) not in set(sides)]
            if missing:
                return f"no planned cell has {factor_word(claim.factor)} {', '.join(missing)} at its conditions"
    except NotTestable as exc:
        return str(exc)
    return None


def claims_for(exp: Experiment, emulates: Emulates | None = None, registry: Sequence[Claim] = CLAIMS
               ) -> list[Claim]:
    """The claims the study is meant to decide: the spec's ``claims:`` in its order (each checked: a claim of
    the registry, judged on the study's kind, with its levels in the design; else a SpecError naming the
    allowed ids), or by default every registry claim whose ``sources`` name the study's kind, that is not
    "never tested here", and whose levels the design has (:func:`applicable`). `registry`: the claims to
    choose from (default: the catalogue's)."""
    kind = kind_of(exp).name
    allowed = [c for c in registry if applicable(c, exp, emulates) is None]
    if not exp.claims:
        return allowed
    by_id = {c.id: c for c in registry}
    out = []
    for cid in exp.claims:
        if cid not in by_id:
            raise SpecError(f"claims: {cid!r} is not a claim of the registry; allowed for {exp.name} (a {kind} "
                            f"study): {', '.join(c.id for c in allowed) or 'none'}")
        why = applicable(by_id[cid], exp, emulates)
        if why is not None:
            raise SpecError(f"claims: {cid} cannot be decided by {exp.name}: {why}; allowed: "
                            f"{', '.join(c.id for c in allowed) or 'none'}")
        out.append(by_id[cid])
    return out


def claim_cells(claim: Claim, exp: Experiment, emulates: Emulates | None = None) -> frozenset[str]:
    """The cell ids of `exp` a claim's estimate reads: the cells at its ``at`` levels with the compared
    factor at level a or b, every level of the other factors (those in ``per`` and those averaged over);
    levels written min/max/second-max/native/emulated:... resolved as the estimators resolve them. A claim
    without a compared factor (a share, a study kind's own estimator) reads every cell at its conditions.
    Empty when the study cannot test it (:func:`applicable`). `emulates`: medium -> what it emulates
    (default: this machine's inventory)."""
    if applicable(claim, exp, emulates) is not None:
        return frozenset()
    frame = planned_runs(exp, emulates=emulates)
    sub = _at(frame, _conditions(claim, frame))
    if claim.factor is not None:
        keys = {level_key(resolve_level(frame, claim.factor, v)) for v in (claim.a, claim.b)}
        sub = sub[sub[claim.factor].map(level_key).isin(keys)]
    return frozenset(sub["cell_id"])


def _model_contrast(claim: Claim, exp: Experiment) -> bool:
    """Whether the claim's estimate is a contrast of the study's factorial model (or of dataset pairs): not
    a share, and not one of the study kind's own estimators (Galera's replication tables, scale-out's)."""
    return claim.factor is not None and claim.kind not in ("share", "difference") and not kind_of(exp).estimates(claim)


def identification(claim: Claim, exp: Experiment, emulates: Emulates | None = None) -> str | None:
    """None when the planned design identifies the claim's contrast (at its ``at`` levels, per level of its
    ``per`` factors, and averaged over the other free factors), else the reason, naming the alias: the
    analysis' estimator (:func:`dbmatrix.analyse.claims.estimators.estimate`, per level as the claims table
    judges a ``per`` claim) on the planned cells with placeholder responses. A claim the study cannot test
    at all gives why (:func:`applicable`); one estimated by the study kind's own tables gives None."""
    why = applicable(claim, exp, emulates)
    if why is not None:
        return why
    if not _model_contrast(claim, exp):
        return None
    frame = planned_runs(exp, claim.metric, emulates)
    ev = Evidence(exp.name, kind_of(exp).name, frame, dict(exp.factors), design=exp.design_info())
    held = _conditions(claim, frame)
    data = _at(frame, held)
    per = {f: ordered_levels(data[f], exp.factors.get(f)) for f in claim.per
           if f in frame.columns and frame[f].map(level_key).nunique() > 1}
    for combo in level_product(per) if per else [{}]:
        where = ", ".join(f"{factor_word(f)} {v}" for f, v in combo.items())
        try:
            estimate(replace(claim, at={**claim.at, **combo}, per=()), ev)
        except NotIdentified as exc:
            return f"at {where}: {exc}" if where else str(exc)
        except NotTestable as exc:
            return f"not estimable from the planned cells{' at ' + where if where else ''}: {exc}"
    return None


def needs_text(claim: Claim, exp: Experiment, emulates: Emulates | None = None) -> str:
    """What the claim compares, in words: 'compression none / lz4 at engine myrocks, cache 0 % per medium';
    '(own estimator)' when the study kind estimates it from its own tables (its levels are checked on the
    data, after the runs)."""
    own = "" if _model_contrast(claim, exp) else " (own estimator)"
    if claim.kind == "share":
        return f"share of {METRIC_LABELS.get(claim.metric, claim.metric)}"
    if claim.factor is None:
        return claim.metric.replace("_", " ") + own
    frame = planned_runs(exp, emulates=emulates)
    try:
        a, b = (resolve_level(frame, claim.factor, v) for v in (claim.a, claim.b))
        at = _conditions(claim, frame)
    except NotTestable:
        a, b, at = claim.a, claim.b, dict(claim.at)
    per = [factor_word(f) for f in claim.per if exp.factors.get(f, ()) and len(exp.factors[f]) > 1]
    return compared_text(claim.factor, a, b, at) + (f" per {', '.join(per)}" if per else "") + own


def design_refusals(exp: Experiment, emulates: Emulates | None = None, registry: Sequence[Claim] = CLAIMS
                    ) -> list[str]:
    """One line per claim the study is meant to decide (:func:`claims_for`) whose contrast its design does not
    identify, naming the claim, what it needs and the alias; empty when the design identifies them all."""
    out = []
    for c in claims_for(exp, emulates, registry):
        why = identification(c, exp, emulates)
        if why is not None:
            out.append(f"{exp.name}: claim {c.id} needs {needs_text(c, exp, emulates)}, which the {exp.design} design "
                       f"does not identify: {why}; use design: full, or leave the claim out with `claims:`")
    return out


def decided_lines(exp: Experiment, emulates: Emulates | None = None, registry: Sequence[Claim] = CLAIMS
                  ) -> list[str]:
    """What the plan prints per study: the claims it decides and the cells each reads (a count)."""
    claims = claims_for(exp, emulates, registry)
    n = len(exp.cells())
    source = "the spec's claims:" if exp.claims else "every claim its kind and levels can test"
    lines = [f"claims decided here ({len(claims)}, {source}):" if claims else
             "claims decided here: none (no claim of the registry is judged on this study's kind and levels)"]
    for c in claims:
        k = len(claim_cells(c, exp, emulates))
        cells = f"all {n} cells" if k == n else f"{k} of {n} cells"
        lines.append(f"  {c.id}: {needs_text(c, exp, emulates)} ({cells})")
    return lines
