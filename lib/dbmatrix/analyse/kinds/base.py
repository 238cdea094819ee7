"""What a study kind supplies to analysis and publishing (:class:`StudyKind`); the kinds are registered in
:mod:`dbmatrix.analyse.kinds`.

A kind says how its study is recognised from an Experiment, its macro prefix, how its processed tables load,
what :func:`dbmatrix.steps.analyse_study` writes for it besides the standard tables, its tables per
campaign, its own claim estimators, the figures it may draw and the paper hooks publishing calls for it.
Publishing (:mod:`dbmatrix.publish`) draws and typesets what a kind names; it never asks which kind a
study is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pandas as pd

from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.tables import Analysis, load_processed, read_csv
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import ResultStore

if TYPE_CHECKING:
    from dbmatrix.analyse.claims.model import Claim, Evidence
    from dbmatrix.analyse.contrasts import Estimate

# The figures of the standalone studies (stems of dbmatrix.publish.registry.FIGURES), in the paper's order.
STANDARD_FIGURES = ("factor-effects", "throughput-vs-cache", "block-size", "compression", "medium-cache",
                    "efficiency", "throughput-over-time", "throughput-vs-threads")


@dataclass(frozen=True)
class PaperSection:
    """A section of the paper a kind owns: the generated file that inputs it, the body when a study of the
    kind has data (or the publish hook that writes the section's inputs and returns the body), and the
    text printed instead when none has."""

    file: str  # under paper/generated/
    not_run: str
    body: str | None = None
    publisher: str | None = None  # a hook of dbmatrix.publish.hooks, called with the kind's first study


class StudyKind:
    """The storage matrix's behaviour; other kinds override what differs (see the modules beside)."""

    name: ClassVar[str] = ""
    noun: ClassVar[str] = "storage matrix"  # what the paper calls a study of the kind ("the storage matrix")
    prefix: ClassVar[str] = ""  # macro prefix of its paper numbers ("" : unprefixed)
    fallback: ClassVar[bool] = False  # recognises every study the other kinds do not
    primary: ClassVar[bool] = False  # its study gives the paper's unprefixed macros and main tables
    standard_tables: ClassVar[bool] = True  # the standard tables (cells, effects, ...) are the paper's
    figures: ClassVar[tuple[str, ...]] = STANDARD_FIGURES  # figure stems it may draw
    extra_tables: ClassVar[tuple[str, ...]] = ()  # glob patterns under processed/ loaded into StudyTables.extra
    runs_table: ClassVar[str | None] = None  # the extra table listing its runs (else the standard runs table)
    paper_hooks: ClassVar[tuple[str, ...]] = ()  # dbmatrix.publish.hooks names: its macros and tables
    section: ClassVar[PaperSection | None] = None
    # runs only when named (``dbmatrix run --spec``, ``make soak``), never with its profile's other studies: a
    # study too long for a campaign of about an hour (a soak), run in a sitting of its own
    own_sitting: ClassVar[bool] = False

    def recognises(self, exp: Experiment) -> bool:
        return self.fallback

    # ---------------------------------------------------------------- analysis

    def before_analysis(self, store: ResultStore, exp: Experiment) -> None:
        """Processed tables written before the standard ones."""

    def after_analysis(self, store: ResultStore, exp: Experiment, a: Analysis) -> None:
        """Processed tables written after the standard ones (they may read those back)."""

    def load_tables(self, store: ResultStore, exp: Experiment, prefix: str = "",
                    spec_path: Path | None = None) -> StudyTables:
        """The study's processed tables: the standard ones, and its own (:attr:`extra_tables`)."""
        extra: dict[str, pd.DataFrame] = {}
        for f in sorted(p for pattern in self.extra_tables for p in store.processed.glob(pattern)):
            if f.suffix == ".parquet":
                extra[f.stem] = pd.read_parquet(f)
            else:
                extra[f.stem] = read_csv(f) if f.stat().st_size > 1 else pd.DataFrame()
        return StudyTables(exp, store, self.name, prefix, self._load_standard(store), extra, spec_path)

    def _load_standard(self, store: ResultStore) -> Analysis | None:
        return load_processed(store)

    def publishable(self, st: StudyTables) -> bool:
        """Whether figures, claims and the paper use the study."""
        return st.a is not None

    # ---------------------------------------------------------------- claims

    def evidence_tables(self, st: StudyTables) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
        """The tables its claim estimators read (Evidence.extra) and, for Galera, the effect table."""
        return {}, None

    def campaign_tables(self, st: StudyTables) -> dict[int, dict[str, pd.DataFrame]]:
        """Per campaign (two or more only), the tables of :meth:`evidence_tables` recomputed from that
        campaign's runs alone (the claims need each campaign's own estimate)."""
        return {}

    def estimates(self, claim: Claim) -> bool:
        """Whether the kind estimates this claim itself (pooled over campaigns in two stages)."""
        return False

    def claim_estimate(self, claim: Claim, ev: Evidence, confidence: float = 0.95) -> Estimate:
        raise NotImplementedError(f"study kind {self.name!r} has no estimator of {claim.metric!r}")

    def __repr__(self) -> str:
        return f"<study kind {self.name}>"

