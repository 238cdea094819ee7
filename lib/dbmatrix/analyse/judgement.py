"""The judgement of a build, as files: what the judge step (:mod:`dbmatrix.analyse.judge`) decided once and
every view (the paper, the README, the HTML report, ``dbmatrix verdicts``, ``dbmatrix compare``) only formats.

A :class:`Judgement` holds the claims' verdicts (:class:`ClaimVerdicts`: per claim, per claim and campaign,
per condition), our further findings' verdicts, what deciding them cost (:mod:`dbmatrix.analyse.claims.costs`)
and the model-fitted tables the figures draw (:class:`FigureTables`). :func:`write_judgement` writes it into a
build's ``paper/generated/`` and :func:`load_judgement` reads it back; :func:`normalise` gives the judgement as
its files hold it (numbers to the 6 significant digits of the claims tables), so a judgement computed now and
one read from a build print the same. Pure pandas and file I/O: no estimator, no raw run record.

Files (in the build's ``paper/generated/``): ``claims.csv``, ``claims-campaigns.csv``, ``claims-levels.csv``,
``further.csv``, ``further-campaigns.csv``, ``further-levels.csv``, ``decisions.csv``,
``decisions-summary.csv``, ``claims-boots.csv``, one ``figure-<stem>-<table>.csv`` per model-fitted figure
table (full precision, so a figure drawn from it is the one drawn from the fit) and ``judgement.json`` (what
was judged: the inputs' digest, the figure tables' studies, labels and column types, the notes of figures no
study could give).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.store import write_text_atomic

VERDICT_COLUMNS = ("id", "seed", "where", "claim", "metric", "kind", "test", "band_lo", "band_hi", "study",
                   "compared", "basis", "n", "estimate", "ci_lo", "ci_hi", "verdict", "reason", "stand_in",
                   "premise", "premise_value", "premise_met", "campaigns", "campaign_level", "registration",
                   "heterogeneity", "confidence", "combine")
CAMPAIGN_COLUMNS = ("id", "campaign", "estimate", "ci_lo", "ci_hi", "verdict")
LEVEL_COLUMNS = ("id", "level", "campaign", "estimate", "ci_lo", "ci_hi", "verdict")
COST_COLUMNS = ("study", "campaign", "claim", "verdict", "state", "decided_at", "blocks", "looks", "confidence",
                "runs", "run_s", "projected_blocks")
SUMMARY_COLUMNS = ("study", "campaign", "claims", "decided", "open", "not_by_runs", "blocks", "looks", "confidence",
                   "runs", "run_s", "elapsed_s", "elapsed_s_per_decided", "stopped")
# The numeric columns of the tables above (every other column is text, "" where empty).
NUMERIC = frozenset({"band_lo", "band_hi", "n", "estimate", "ci_lo", "ci_hi", "campaigns", "confidence", "campaign",
                     "decided_at", "blocks", "looks", "runs", "run_s", "projected_blocks", "claims", "decided",
                     "open", "not_by_runs", "elapsed_s", "elapsed_s_per_decided", "value_a", "value_b", "ratio",
                     "runs_a", "runs_b", "machine_s", "half_width", "needed_half_width",
                     "study_machine_s", "f", "p", "boots"})
# claims-mechanism.csv: the counters of the cells each claim compares (dbmatrix.analyse.mechanism)
MECHANISM_COLUMNS = ("id", "study", "condition", "counter", "label", "a", "b", "value_a", "value_b", "ratio",
                     "runs_a", "runs_b")
MECHANISM_FILE = "claims-mechanism.csv"
# decisions-campaigns.csv: per claim of a study whose campaigns are its looks, the look it was decided at and
# what it cost, or the campaigns an open one would need (dbmatrix.analyse.claims.campaign_costs)
LOOK_COLUMNS = ("id", "study", "campaigns", "verdict", "decided_at", "machine_s", "half_width", "needed_half_width",
                "projected_campaigns", "note", "study_machine_s")
LOOK_FILE = "decisions-campaigns.csv"
# claims-boots.csv: each claim judged on campaigns re-judged with the boot as the unit, a sensitivity check
# (dbmatrix.analyse.claims.boot_check)
BOOT_COLUMNS = ("id", "study", "level", "boots", "campaigns", "estimate", "ci_lo", "ci_hi", "verdict", "pooled",
                "note")
BOOT_FILE = "claims-boots.csv"
# interactions.csv: every two-way term of each study's model per figure metric, F and p
# (dbmatrix.analyse.interactions.interaction_table): what the figure check reads
INTERACTION_COLUMNS = ("study", "metric", "factor_a", "factor_b", "f", "p")
INTERACTION_FILE = "interactions.csv"
MANIFEST = "judgement.json"
FLOAT_FORMAT = "%.6g"  # the claims tables' numbers (as claims.csv has always held them)


@dataclass(frozen=True)
class ClaimVerdicts:
    """The claims' verdicts: ``claims``, one row per claim (:data:`VERDICT_COLUMNS`, and ``hosts`` when a
    study has several), ``campaigns``, one row per claim and campaign of the build (:data:`CAMPAIGN_COLUMNS`:
    that campaign's own estimate and verdict; NaN and "" where it has none), and ``levels``, for a claim
    judged per level of a factor it depends on, one row per level and campaign (:data:`LEVEL_COLUMNS`;
    campaign 0: pooled). Written as ``claims.csv``, ``claims-campaigns.csv`` and ``claims-levels.csv``."""

    claims: pd.DataFrame
    campaigns: pd.DataFrame
    levels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LEVEL_COLUMNS))

    def levels_of(self, claim_id: str) -> pd.DataFrame:
        """The per-level rows of one claim (empty unless it was judged per level)."""
        lv = self.levels
        return lv[lv["id"] == claim_id] if not lv.empty else lv

    def campaign_numbers(self) -> list[int]:
        """The campaigns of the build, in order (1 .. the most any study has)."""
        return sorted({int(k) for k in self.campaigns["campaign"]}) if not self.campaigns.empty else []

    def of(self, claim_id: str) -> pd.DataFrame:
        """The per-campaign rows of one claim, in campaign order."""
        c = self.campaigns
        return c[c["id"] == claim_id].sort_values("campaign", kind="stable")

    def campaign_verdict(self, claim_id: str, k: int) -> str:
        rows = self.campaigns[(self.campaigns["id"] == claim_id) & (self.campaigns["campaign"] == k)]
        v = rows["verdict"].iloc[0] if not rows.empty else ""
        return v if isinstance(v, str) else ""


def combined(seeds: ClaimVerdicts, further: ClaimVerdicts) -> ClaimVerdicts:
    """The seeds' claims and our further findings in one :class:`ClaimVerdicts`."""
    def cat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
        return a if b.empty else b if a.empty else pd.concat([a, b], ignore_index=True)

    return ClaimVerdicts(cat(seeds.claims, further.claims), cat(seeds.campaigns, further.campaigns),
                         cat(seeds.levels, further.levels))


def flips(verdicts: ClaimVerdicts) -> pd.DataFrame:
    """Per claim: each campaign's verdict (a column C<k> per campaign, for display), the pooled one,
    whether the campaigns' verdicts differ (a flip) and whether a campaign says the opposite of a pooled
    agree/disagree (under the three-way rule only a campaign interval disjoint from the pooled one can: the
    campaigns are consistency checks, the pooled interval decides)."""
    ks = verdicts.campaign_numbers()
    rows = []
    for _, r in verdicts.claims.iterrows():
        own = {f"C{k}": verdicts.campaign_verdict(r["id"], k) for k in ks}
        per = [str(v) for v in own.values() if isinstance(v, str) and v]
        rows.append({"id": r["id"], "seed": r["seed"], **own, "pooled": r["verdict"],
                     "flip": len(per) > 1 and len(set(per)) > 1,
                     "contradicted": r["verdict"] in ("agree", "disagree") and any(
                         v in ("agree", "disagree") and v != r["verdict"] for v in per)})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class FigureTables:
    """The model-fitted tables one figure draws, from the study that draws it (``labels``: e.g. the block
    sizes compared, ``{"a": "4k", "b": "16k"}``)."""

    study: str
    tables: dict[str, pd.DataFrame]
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """Everything the judge step decides for a build (see the module doc)."""

    verdicts: ClaimVerdicts
    further: ClaimVerdicts
    costs: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COST_COLUMNS))
    cost_summary: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SUMMARY_COLUMNS))
    figures: dict[str, FigureTables] = field(default_factory=dict)
    figure_notes: tuple[tuple[str, str, str], ...] = ()  # (stem, study, why that study cannot give it)
    inputs: str = ""  # :func:`inputs_digest` of the studies judged
    mechanism: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=MECHANISM_COLUMNS))
    looks: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LOOK_COLUMNS))
    interactions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=INTERACTION_COLUMNS))
    boots: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=BOOT_COLUMNS))

    @property
    def claims(self) -> pd.DataFrame:
        return self.verdicts.claims

    def both(self) -> ClaimVerdicts:
        """The seeds' claims and our further findings together."""
        return combined(self.verdicts, self.further)

    def figure_error(self, stem: str, study: str) -> str | None:
        """Why `study` cannot give the figure `stem`'s model tables (None: it can, or nothing was tried)."""
        return next((why for s, st, why in self.figure_notes if s == stem and st == study), None)


# ------------------------------------------------------------------------------------------ digests

def frames_digest(*frames: pd.DataFrame) -> str:
    """A short digest of tables' contents (their CSV text): a study's data digest in the paper's provenance."""
    h = hashlib.sha256()
    for f in frames:
        h.update(f.to_csv(index=False).encode())
    return h.hexdigest()[:16]


def inputs_digest(studies: Mapping[str, str], code: str = "") -> str:
    """What a judgement was judged from: each study (name -> its data digest) and the verdict code's digest."""
    text = json.dumps({"studies": dict(sorted(studies.items())), "code": code}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------ text tables

def table_text(df: pd.DataFrame) -> str:
    """A claims-side table as its file holds it (numbers to 6 significant digits, one line per row)."""
    return df.to_csv(index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def read_table(source: str | Path | io.StringIO, columns: Sequence[str] = ()) -> pd.DataFrame:
    """A claims-side table from its CSV: text columns as text ("" where empty), :data:`NUMERIC` ones as
    numbers (NaN where empty); `columns` when the file is absent or empty."""
    if isinstance(source, Path) and (not source.is_file() or source.stat().st_size <= 1):
        return pd.DataFrame(columns=list(columns))
    try:
        df = pd.read_csv(source, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:  # a table without columns
        return pd.DataFrame(columns=list(columns))
    for c in df.columns:
        if c in NUMERIC:
            df[c] = pd.to_numeric(df[c].replace("", None), errors="coerce")
            if df[c].notna().all() and len(df) and (df[c] % 1 == 0).all() and c in _INTEGER:
                df[c] = df[c].astype("int64")
    return df


_INTEGER = frozenset({"n", "campaigns", "campaign", "blocks", "looks", "runs", "claims", "decided", "open",
                      "not_by_runs", "runs_a", "runs_b", "boots"})


def _round_trip(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    return read_table(io.StringIO(table_text(df)), columns) if len(df.columns) else pd.DataFrame(columns=columns)


def normalise_verdicts(v: ClaimVerdicts) -> ClaimVerdicts:
    """Claims' verdicts as their files hold them (:func:`normalise`)."""
    return ClaimVerdicts(_round_trip(v.claims, VERDICT_COLUMNS), _round_trip(v.campaigns, CAMPAIGN_COLUMNS),
                         _round_trip(v.levels, LEVEL_COLUMNS))


def normalise(j: Judgement) -> Judgement:
    """The judgement as its files hold it: the claims and cost tables through their CSV text (what
    :func:`load_judgement` gives back), the figure tables as they are (written at full precision)."""
    return Judgement(normalise_verdicts(j.verdicts), normalise_verdicts(j.further),
                     _round_trip(j.costs, COST_COLUMNS), _round_trip(j.cost_summary, SUMMARY_COLUMNS),
                     dict(j.figures), tuple(j.figure_notes), j.inputs, _round_trip(j.mechanism, MECHANISM_COLUMNS),
                     _round_trip(j.looks, LOOK_COLUMNS), _round_trip(j.interactions, INTERACTION_COLUMNS),
                     _round_trip(j.boots, BOOT_COLUMNS))


# ------------------------------------------------------------------------------------------ files

CLAIM_FILES = {"claims": ("claims.csv", "claims-campaigns.csv", "claims-levels.csv"),
               "further": ("further.csv", "further-campaigns.csv", "further-levels.csv")}
COST_FILES = ("decisions.csv", "decisions-summary.csv")


def _write(path: Path, text: str) -> Path:
    write_text_atomic(path, text)
    return path


def figure_file(stem: str, name: str) -> str:
    return f"figure-{stem}-{name}.csv"


def write_judgement(j: Judgement, folder: Path) -> list[Path]:
    """Every file of the judgement into `folder` (a build's ``paper/generated/``); the files written."""
    out = []
    for key, v in (("claims", j.verdicts), ("further", j.further)):
        for name, df in zip(CLAIM_FILES[key], (v.claims, v.campaigns, v.levels)):
            out.append(_write(folder / name, table_text(df)))
    for name, df in zip(COST_FILES, (j.costs, j.cost_summary)):
        out.append(_write(folder / name, table_text(df)))
    out.append(_write(folder / MECHANISM_FILE, table_text(j.mechanism.reindex(columns=list(MECHANISM_COLUMNS)))))
    out.append(_write(folder / LOOK_FILE, table_text(j.looks.reindex(columns=list(LOOK_COLUMNS)))))
    out.append(_write(folder / INTERACTION_FILE,
                      table_text(j.interactions.reindex(columns=list(INTERACTION_COLUMNS)))))
    out.append(_write(folder / BOOT_FILE, table_text(j.boots.reindex(columns=list(BOOT_COLUMNS)))))
    figures: dict[str, Any] = {}
    for stem, ft in sorted(j.figures.items()):
        tables = {}
        for name, df in ft.tables.items():
            out.append(_write(folder / figure_file(stem, name), df.to_csv(index=False, lineterminator="\n")))
            tables[name] = [[str(c), str(t)] for c, t in df.dtypes.items()]  # in order: a list
        figures[stem] = {"study": ft.study, "labels": dict(ft.labels), "tables": tables}
    for old in sorted(folder.glob("figure-*.csv")):  # a figure this build no longer fits
        if old not in out:
            old.unlink()
    manifest = {"inputs": j.inputs, "figures": figures,
                "figure_notes": [list(n) for n in j.figure_notes], "files": sorted(p.name for p in out)}
    out.append(_write(folder / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n"))
    return out


def _read_figure(path: Path, columns: Sequence[Sequence[str]]) -> pd.DataFrame:
    """A figure table as it was written: its columns in order, each of its recorded type, numbers exact."""
    df = pd.read_csv(path, float_precision="round_trip") if path.stat().st_size > 1 else pd.DataFrame()
    for c, t in columns:
        if c in df.columns and str(df[c].dtype) != t:
            df[c] = df[c].astype(t)
    return df.reindex(columns=[c for c, _ in columns])


def read_verdicts(folder: Path, key: str = "claims") -> ClaimVerdicts:
    """The claims' verdicts a build wrote (``claims.csv`` and beside it; `key` "further": our findings')."""
    return ClaimVerdicts(*(read_table(folder / name, cols) for name, cols in
                           zip(CLAIM_FILES[key], (VERDICT_COLUMNS, CAMPAIGN_COLUMNS, LEVEL_COLUMNS))))


def load_judgement(folder: Path) -> Judgement:
    """The judgement a build wrote into `folder` (FileNotFoundError when it has none: build it first)."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        raise FileNotFoundError(f"{manifest} does not exist: no judgement in {folder}; run `dbmatrix figures` "
                                "(or make figures) first")
    meta = json.loads(manifest.read_text())
    v = {key: read_verdicts(folder, key) for key in CLAIM_FILES}
    costs = read_table(folder / COST_FILES[0], COST_COLUMNS)
    summary = read_table(folder / COST_FILES[1], SUMMARY_COLUMNS)
    figures = {stem: FigureTables(str(f["study"]), {name: _read_figure(folder / figure_file(stem, name), cols)
                                                    for name, cols in f["tables"].items()},
                                  {str(k): str(x) for k, x in f.get("labels", {}).items()})
               for stem, f in meta.get("figures", {}).items()}
    notes = tuple((str(a), str(b), str(c)) for a, b, c in meta.get("figure_notes", []))
    mechanism = read_table(folder / MECHANISM_FILE, MECHANISM_COLUMNS)
    looks = read_table(folder / LOOK_FILE, LOOK_COLUMNS)
    interactions = read_table(folder / INTERACTION_FILE, INTERACTION_COLUMNS)
    boots = read_table(folder / BOOT_FILE, BOOT_COLUMNS)
    return Judgement(v["claims"], v["further"], costs, summary, figures, notes, str(meta.get("inputs", "")),
                     mechanism, looks, interactions, boots)


def judgement_inputs(folder: Path) -> str | None:
    """The inputs' digest of the judgement in `folder` (None: it has none)."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text()).get("inputs") or "") or None
