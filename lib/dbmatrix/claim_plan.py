"""The claims in a study's plan (above analysis and the study, beside the command line: run/ does not import
the analysis): `dbmatrix plan` and `dbmatrix run` (and the notebooks' run step) refuse a study
whose design does not identify a contrast one of its claims needs, before anything runs; a plan that passes
says which claims each study decides and the cells each reads (:mod:`dbmatrix.analyse.claims.needs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dbmatrix.analyse.claims.needs import Emulates, decided_lines, design_refusals
from dbmatrix.spec.experiment import SpecError
from dbmatrix.study import Study


def study_emulates(study: Study) -> Emulates:
    """Medium name -> what it emulates, from the study's inventory (every host declares the spec's media
    alike: checked when the study loads)."""
    return {name: m.emulates for name, m in study.inventory.hosts[0].media.items()}


def refuse_unidentified(studies: Sequence[Study]) -> None:
    """A SpecError naming every claim whose contrast its study's design does not identify (and the alias),
    with the spec file and "nothing was run"; nothing when every study's design identifies its claims."""
    problems = []
    for st in studies:
        try:
            lines = design_refusals(st.experiment, study_emulates(st))
        except SpecError as exc:  # the spec's claims: names a claim it cannot decide
            raise SpecError(f"{exc}\n(spec {st.spec_path}; nothing was run)") from None
        if lines:
            problems.append("\n".join(lines) + f"\n(spec {st.spec_path}; nothing was run)")
    if problems:
        raise SpecError("\n".join(problems))


def claim_plan_lines(study: Study) -> list[str]:
    """The plan's lines on the claims the study decides and the cells each reads, then our own findings it
    decides (the further findings, judged by the same rule)."""
    from dbmatrix.analyse.claims.catalogue import FURTHER

    exp, emulates = study.experiment, study_emulates(study)
    ours = decided_lines(replace(exp, claims=()), emulates, FURTHER)
    return [*decided_lines(exp, emulates),
            *([line.replace("claims decided here", "our further findings decided here", 1) for line in ours]
              if len(ours) > 1 else [])]
