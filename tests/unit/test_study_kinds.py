"""The study-kind registry (dbmatrix.analyse.kinds): the built-in kinds recognise the committed specs, and a
toy kind registered here, in the tests only, runs through analysis, the claims and publishing.

What a new study kind touches (the toy kind shows each, all in this one file):

1. ``lib/dbmatrix/analyse/kinds/<kind>.py``: a :class:`StudyKind` subclass (how its study is recognised,
   its macro prefix, what analysis writes for it besides the standard tables, how its tables load, its
   tables per campaign, its own claim estimators, the figure stems it may draw, its paper hooks and
   section), and one line in ``analyse/kinds/__init__.py`` (``_register_builtin``) to register it;
2. its claims: entries in ``analyse/claims/catalogue.py`` naming the kind in ``sources``;
3. only if it has figures, macros, tables or a section of its own: the drawing functions and their
   ``FigureDef`` in ``publish/registry.py`` (or a ``publish/figures_<kind>.py`` beside it), the hooks in
   ``publish/hooks.py``, and the LaTeX fragments ``paper/fig-<stem>.tex`` / ``paper/<section>.tex``.

Nothing else: steps, study, the CLI, the claims table and the build dispatch through the registry.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from dbmatrix import paths, steps
from dbmatrix.analyse import kinds
from dbmatrix.analyse.claims import Claim, Evidence, claims_evidence, evaluate
from dbmatrix.analyse.contrasts import Estimate
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.kinds import PaperSection, StudyKind
from dbmatrix.analyse.tables import Analysis, write_csv
from dbmatrix.hosts.inventory import load_inventory
from dbmatrix.publish import hooks
from dbmatrix.spec.experiment import Experiment, load_spec, parse_experiment
from dbmatrix.store import ResultStore
from dbmatrix.study import Study, study_kind

sys.path.insert(0, str(Path(__file__).parent))
from test_analysis import SPEC, build_store


class ToyKind(StudyKind):
    """A study whose experiment name starts with ``toy-``: the standard tables plus processed/toy-cells.csv,
    one claim metric of its own, one standard figure, a macro hook and a paper section."""

    name: ClassVar[str] = "toy"
    prefix: ClassVar[str] = "toy"
    figures: ClassVar[tuple[str, ...]] = ("throughput-vs-cache",)
    extra_tables: ClassVar[tuple[str, ...]] = ("toy-*.csv",)
    paper_hooks: ClassVar[tuple[str, ...]] = ("toy-macros",)
    section: ClassVar[PaperSection | None] = PaperSection("toy-section.tex", body="\\input{toy}",
                                                          not_run="\\section{Toy}\nNot run.")

    def recognises(self, exp: Experiment) -> bool:
        return exp.name.startswith("toy-")

    def after_analysis(self, store: ResultStore, exp: Experiment, a: Analysis) -> None:
        write_csv(a.cells[["cell_id", "mean"]], store.processed / "toy-cells.csv")

    def evidence_tables(self, st: StudyTables) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
        return {"toy-cells": st.extra["toy-cells"]}, None

    def estimates(self, claim: Claim) -> bool:
        return claim.metric == "toy_spread"

    def claim_estimate(self, claim: Claim, ev: Evidence) -> Estimate:
        cells = ev.extra["toy-cells"]
        r = float(cells["mean"].max() / cells["mean"].min())
        return Estimate(r, r * 0.99, r * 1.01, "toy: fastest / slowest cell", len(cells), compared="cells")


TOY_CLAIM = Claim("toySpread", "999", "toy", "the fastest cell is faster than the slowest", "toy_spread",
                  (1.0, 100.0), sources=("toy",))


def toy_macros(st: StudyTables, ctx: hooks.HookContext) -> hooks.HookOutput:
    return hooks.HookOutput(macros={"toyCells": str(len(st.extra["toy-cells"]))})


@pytest.fixture
def toy() -> Iterator[ToyKind]:
    kind = kinds.register(ToyKind())
    hooks.HOOKS["toy-macros"] = toy_macros
    yield kind
    kinds.unregister("toy")
    del hooks.HOOKS["toy-macros"]


def test_the_builtin_kinds_recognise_the_committed_specs() -> None:
    got = {p.stem: study_kind(load_spec(p)).name for p in sorted((paths.repo_root() / "specs").glob("*quick*.yaml"))}
    assert {"storage", "threads", "tpcc", "galera", "scaleout", "media", "builds"} <= set(got.values()), got
    assert [k.name for k in kinds.kinds()] == ["soak", "galera", "scaleout", "tpcc", "threads", "media", "builds",
                                                 "storage"]
    assert study_kind(load_spec(paths.repo_root() / "specs/paper-soak.yaml")).name == "soak"
    assert kinds.get_kind("threads").prefix == "thr" and kinds.get_kind("storage").prefix == ""
    with pytest.raises(Exception, match="study kind: 'nope'; allowed: soak, galera, scaleout, tpcc, threads, media, builds, storage"):
        kinds.get_kind("nope")
    with pytest.raises(ValueError, match="registered already"):
        kinds.register(kinds.get_kind("tpcc"))


def test_a_toy_kind_runs_through_analysis_claims_and_publishing(toy: ToyKind, tmp_path: Path) -> None:
    exp = parse_experiment({**SPEC, "experiment": "toy-study"})
    assert study_kind(exp) is toy
    assert [k.name for k in kinds.kinds()][-2:] == ["toy", "storage"], "recognised before the fallback"
    store, _ = build_store(tmp_path / "toy", exp)
    study = Study("unit", tmp_path / "toy.yaml", exp, load_inventory(None), store)
    assert study.kind == "toy"

    steps.analyse_study(study)  # analysis dispatches through the kind
    stamp: dict[str, Any] = json.loads((store.processed / "analysis.json").read_text())
    assert stamp["kind"] == "toy" and "toy-cells.csv" in stamp["tables"]

    tables = steps.study_tables([study])  # loading: its prefix and its own tables
    assert tables[0].prefix == "toy" and list(tables[0].extra) == ["toy-cells"]

    row = evaluate(claims_evidence(tables), [TOY_CLAIM]).claims.iloc[0]  # its claim, by its own estimator
    assert (row["study"], row["verdict"], row["basis"]) == ("toy-study", "agree",
                                                            "toy: fastest / slowest cell; within one campaign")

    out = steps.publish_tables(tables, "unit", tmp_path / "fig", tmp_path / "gen")  # figures, hooks, section
    assert out.figures == {"throughput-vs-cache": "toy-study"}
    macros = (tmp_path / "gen" / "macros.tex").read_text()
    assert "\\newcommand{\\toyToyCells}{4}" in macros and "\\newcommand{\\toyNRuns}{12}" in macros
    assert (tmp_path / "gen" / "toy-section.tex").read_text().endswith("\\input{toy}\n")
    assert "not run in this build" in (tmp_path / "gen" / "tpcc-section.tex").read_text().lower()
