"""Result sets named on the command line (``dbmatrix compare``, ``dbmatrix report``) and their processed
tables: the file-reading side of :mod:`dbmatrix.analyse.compare`.

A result set is a study's results directory (it has ``processed/runs.csv``), a data root holding one such
directory per experiment (``data/reference``, ``data/runs``, ``--data DIR``; the words ``reference`` and
``runs`` name the repository's two), or one campaign of a study. Only processed outputs are read
(``processed/runs.csv``, the claims evaluated from the processed tables), never the raw run records:
``dbmatrix analyse`` makes them.

**Like for like** (:func:`like_for_like`): a comparison sets the same studies of one profile against each
other. A data root's studies of other profiles are left out (``data/reference`` holds the quick and the
paper profile's); then both sides must hold the same studies, else the comparison is refused, naming them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pandas as pd

from dbmatrix import paths
from dbmatrix.analyse.campaign_model import campaigns_of
from dbmatrix.analyse.tables import read_csv
from dbmatrix.spec.experiment import SpecError, load_spec
from dbmatrix.study import PROFILES, Study, load_study, profile_specs

RUNS_TABLE = Path("processed") / "runs.csv"
CLAIM_COLUMNS = ["id", "claim", "study", "estimate", "ci_lo", "ci_hi", "confidence", "verdict", "kind"]
DEFAULT_PROFILE = "quick"


@dataclass
class ResultSet:
    """What one side of a comparison holds: per experiment its processed runs (of the selected campaign),
    all its campaigns' runs, its directory and spec digest; the studies (for claims)."""

    label: str
    runs: dict[str, pd.DataFrame] = field(default_factory=dict)
    full: dict[str, pd.DataFrame] = field(default_factory=dict)
    dirs: dict[str, Path] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    studies: list[Study] = field(default_factory=list)
    campaign: int | None = None
    single: bool = False  # named one study (its directory, or --study): never narrowed to a profile

    def keep(self, experiments: set[str]) -> None:
        """Only these experiments."""
        for d in (self.runs, self.full, self.dirs, self.digests):
            for e in [e for e in d if e not in experiments]:
                del d[e]
        self.studies = [s for s in self.studies if s.experiment.name in experiments]


def resolve_root(arg: str) -> Path:
    """``reference`` and ``runs`` name the repository's data roots; anything else is a path."""
    if arg == "reference":
        return paths.reference_root()
    if arg == "runs":
        return paths.runs_root()
    return Path(arg).expanduser().resolve()


def _stamp(study_dir: Path) -> dict[str, object]:
    stamp = study_dir / "processed" / "analysis.json"
    return json.loads(stamp.read_text()) if stamp.is_file() else {}


def experiment_of(study_dir: Path) -> str:
    """The experiment a study directory holds (its analysis stamp, else the directory's name)."""
    return str(_stamp(study_dir).get("experiment") or study_dir.name)


def study_dirs(root: Path) -> dict[str, Path]:
    """Experiment -> study directory with processed tables: `root` itself, or its subdirectories."""
    if (root / RUNS_TABLE).is_file():
        return {experiment_of(root): root}
    if not root.is_dir():
        raise SpecError(f"compare: {root} is not a directory")
    found = {experiment_of(d): d for d in sorted(root.iterdir()) if (d / RUNS_TABLE).is_file()}
    if not found:
        raw = root / "raw" if (root / "raw").is_dir() else None
        hint = (f"; it has raw runs: make the tables with `dbmatrix analyse --spec SPEC --results {root}`" if raw
                else "; give a study's results directory (with processed/runs.csv) or a root holding them")
        raise SpecError(f"compare: no processed tables in {root}{hint}")
    return found


@cache
def profile_experiments() -> dict[str, tuple[str, Path]]:
    """Experiment name -> (the profile listing its spec, the spec file), over every profile."""
    found: dict[str, tuple[str, Path]] = {}
    for prof in PROFILES:
        try:
            specs = profile_specs(prof)
        except SpecError:
            continue
        for s in specs:
            try:
                if s.is_file():
                    found.setdefault(load_spec(s).name, (prof, s))
            except SpecError:
                continue
    return found


def profile_of(experiment: str) -> str | None:
    """The profile whose specs make `experiment` (None: no profile's)."""
    hit = profile_experiments().get(experiment)
    return hit[0] if hit else None


def spec_for(experiment: str) -> Path | None:
    """The spec file of `experiment` (whichever profile lists it)."""
    hit = profile_experiments().get(experiment)
    return hit[1] if hit else None


def read_runs(study_dir: Path, campaign: int | None = None) -> pd.DataFrame:
    runs = read_csv(study_dir / RUNS_TABLE)
    if campaign is not None:
        if "campaign" not in runs.columns or campaign not in set(runs["campaign"].astype(int)):
            have = sorted(set(runs["campaign"].astype(int))) if "campaign" in runs.columns else [1]
            raise SpecError(f"--campaigns: {study_dir} has no campaign {campaign}; it has {have}")
        runs = runs[runs["campaign"].astype(int) == campaign]
    return runs


def load_set(arg: str, only: str | None = None, campaign: int | None = None, label: str | None = None) -> ResultSet:
    """A result set from a command-line word or path (`only`: that experiment alone; `campaign`: its runs).
    The studies (for claims) are loaded by :func:`load_studies` once the profile is known."""
    root = resolve_root(arg)
    dirs = study_dirs(root)
    if only is not None:
        if only not in dirs:
            raise SpecError(f"--study: {only!r} not in {root}; it has {', '.join(sorted(dirs))}")
        dirs = {only: dirs[only]}
    shown = paths.display_path(dirs[only] if only is not None else root)
    rs = ResultSet(label or (shown + (f" campaign {campaign}" if campaign else "")), campaign=campaign,
                   single=only is not None or (root / RUNS_TABLE).is_file())
    for exp, d in dirs.items():
        rs.full[exp] = read_runs(d)
        rs.runs[exp] = read_runs(d, campaign) if campaign is not None else rs.full[exp]
        rs.dirs[exp] = d
        rs.digests[exp] = str(_stamp(d).get("spec_digest") or "")
    return rs


def load_studies(rs: ResultSet, profile: str) -> None:
    """The side's studies of the experiments with a spec (what its claims are judged on)."""
    for exp, d in rs.dirs.items():
        spec = spec_for(exp)
        if spec is not None:
            rs.studies.append(load_study(profile_of(exp) or profile, spec, results_dir=d, for_run=False))


def choose_profile(a: ResultSet, b: ResultSet, profile: str | None, study: str | None) -> str:
    """The profile compared: the one given, else --study's, else the one all of B's (then A's) studies
    belong to, else :data:`DEFAULT_PROFILE`. A --study of another profile than the one given is refused."""
    if study is not None and (own := profile_of(study)) is not None:
        if profile is not None and profile != own:
            raise SpecError(f"compare: {study} is a study of the {own} profile, not of {profile}: "
                            f"give --profile {own} or leave --profile out")
        return own
    if profile is not None:
        return profile
    for side in (b, a):
        owners = {profile_of(e) for e in side.runs} - {None}
        if len(owners) == 1:
            return str(owners.pop())
    return DEFAULT_PROFILE


def _named(experiments: set[str]) -> str:
    return ", ".join(f"{e} ({p} profile)" if (p := profile_of(e)) else e for e in sorted(experiments))


def like_for_like(a: ResultSet, b: ResultSet, profile: str) -> list[str]:
    """Narrow the sides to the same studies and check that they are: a data root keeps the studies of
    `profile` (and studies of no profile), or the one study the other side names; then both sides must hold
    the same studies, else a :class:`SpecError` naming what differs. Returns notes (what was left out,
    spec digests that differ)."""
    notes, left = [], []
    for side, other, name in ((a, b, "A"), (b, a, "B")):
        if side.single:
            continue
        drop = ({e for e in side.runs if e not in other.runs} if other.single
                else {e for e in side.runs if (p := profile_of(e)) is not None and p != profile})
        if drop:
            side.keep(set(side.runs) - drop)
            to = (f"the study the other side names, {_named(set(other.runs))}" if other.single
                  else f"the {profile} profile's studies")
            left.append(f"{name} is narrowed to {to}; left out: {', '.join(sorted(drop))}.")
    ea, eb = set(a.runs), set(b.runs)
    if ea != eb or not ea:
        parts = []
        if ea - eb:
            parts.append(f"only A ({a.label}) holds {_named(ea - eb)}")
        if eb - ea:
            parts.append(f"only B ({b.label}) holds {_named(eb - ea)}")
        if not ea | eb:
            parts.append(f"neither side holds a study of the {profile} profile")
        both = sorted(ea & eb)
        hint = (f"compare one study with --study NAME (both hold {', '.join(both)})" if both
                else "give two result sets of the same studies (--profile, --study NAME)")
        raise SpecError(f"compare: not like for like ({profile} profile): {'; '.join(parts)}; {hint}"
                        + (f" [{' '.join(left)}]" if left else ""))
    notes += left
    for e in sorted(ea):
        da, db = a.digests.get(e, ""), b.digests.get(e, "")
        if da and db and da != db:
            notes.append(f"{e}: the two sides were analysed under different spec digests (A {da}, B {db}): the "
                         "designs may differ; cells on one side only are listed as such.")
    return notes


def reference_runs(experiment: str, a: ResultSet, b: ResultSet) -> tuple[pd.DataFrame | None, str]:
    """The runs whose campaigns give a one-campaign side its campaign level, and their label: the study A
    (then B) selected a campaign of, A's (then B's) own runs, else the committed reference of the
    experiment; the first with two campaigns or more. (None, "") when there is none."""
    candidates = [(s.full.get(experiment), s.dirs.get(experiment)) for s in (a, b)]
    ref_dir = paths.reference_dir(experiment)
    if (ref_dir / RUNS_TABLE).is_file():
        candidates.append((None, ref_dir))
    for runs, d in candidates:
        if runs is None and d is not None and (d / RUNS_TABLE).is_file():
            runs = read_runs(d)
        if runs is not None and len(campaigns_of(runs)) >= 2:
            return runs, (f"{paths.display_path(d)}, {len(campaigns_of(runs))} campaigns" if d is not None else "")
    return None, ""


def claims_table(studies: list[Study], campaign: int | None = None) -> pd.DataFrame | None:
    """The claims of the studies' judgement (:func:`dbmatrix.steps.verdicts`: the build's when it was made from
    these data, else judged now by the same step): pooled, or one campaign's estimates and verdicts. None
    without a study with data."""
    from dbmatrix import steps

    have = [s for s in studies if s.has_data()]
    if not have:
        return None
    result, _ = steps.verdicts(have)
    table = result.claims.reindex(columns=CLAIM_COLUMNS)
    if campaign is None:
        return table
    per = result.campaigns[result.campaigns["campaign"] == campaign][["id", "estimate", "ci_lo", "ci_hi", "verdict"]]
    return table[["id", "claim", "study", "confidence", "kind"]].merge(per, on="id", how="left").reindex(
        columns=CLAIM_COLUMNS)


def side_claims(a: ResultSet, b: ResultSet) -> tuple[pd.DataFrame | None, pd.DataFrame | None, str]:
    """Both sides' claims judged on the same studies, or (None, None, why not)."""
    tb = claims_table(b.studies, b.campaign)
    ta = claims_table(a.studies, a.campaign) if tb is not None else None
    if ta is not None and tb is not None:
        return ta, tb, ""
    missing = [n for n, t in (("A", ta), ("B", tb)) if t is None and (n == "B" or tb is not None)]
    return None, None, (f"claims not compared: {' and '.join(missing)} cannot judge them (no study with a spec "
                        "and completed run records); the cells above are compared")
