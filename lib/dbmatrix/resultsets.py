"""Result sets named on the command line (``dbmatrix compare``, ``dbmatrix report``) and their processed
tables: the file-reading side of :mod:`dbmatrix.analyse.compare`.

A result set is a study's results directory (it has ``processed/runs.csv``), a data root holding one such
directory per experiment (``data/reference``, ``data/runs``, ``--data DIR``; the words ``reference`` and
``runs`` name the repository's two), or one campaign of a study. Only processed outputs are read
(``processed/runs.csv``, the claims evaluated from the processed tables), never the raw run records:
``dbmatrix analyse`` makes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dbmatrix import paths
from dbmatrix.spec.experiment import SpecError, load_spec
from dbmatrix.study import PROFILES, Study, load_study, profile_specs

RUNS_TABLE = Path("processed") / "runs.csv"
CLAIM_COLUMNS = ["id", "claim", "study", "estimate", "ci_lo", "ci_hi", "confidence", "verdict"]


@dataclass
class ResultSet:
    """What one side of a comparison holds: per experiment its processed runs, the studies (for claims)."""

    label: str
    runs: dict[str, pd.DataFrame] = field(default_factory=dict)
    studies: list[Study] = field(default_factory=list)
    campaign: int | None = None


def resolve_root(arg: str) -> Path:
    """``reference`` and ``runs`` name the repository's data roots; anything else is a path."""
    if arg == "reference":
        return paths.reference_root()
    if arg == "runs":
        return paths.runs_root()
    return Path(arg).expanduser().resolve()


def experiment_of(study_dir: Path) -> str:
    """The experiment a study directory holds (its analysis stamp, else the directory's name)."""
    stamp = study_dir / "processed" / "analysis.json"
    if stamp.is_file():
        return str(json.loads(stamp.read_text()).get("experiment") or study_dir.name)
    return study_dir.name


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


def spec_for(experiment: str, profile: str) -> Path | None:
    """The spec file of `experiment`: among `profile`'s specs first, then the other profiles'."""
    for prof in [profile, *(p for p in PROFILES if p != profile)]:
        try:
            specs = profile_specs(prof)
        except SpecError:
            continue
        for s in specs:
            try:
                if s.is_file() and load_spec(s).name == experiment:
                    return s
            except SpecError:
                continue
    return None


def read_runs(study_dir: Path, campaign: int | None = None) -> pd.DataFrame:
    runs = pd.read_csv(study_dir / RUNS_TABLE)
    if campaign is not None:
        if "campaign" not in runs.columns or campaign not in set(runs["campaign"].astype(int)):
            have = sorted(set(runs["campaign"].astype(int))) if "campaign" in runs.columns else [1]
            raise SpecError(f"--campaigns: {study_dir} has no campaign {campaign}; it has {have}")
        runs = runs[runs["campaign"].astype(int) == campaign]
    return runs


def load_set(arg: str, profile: str, only: str | None = None, campaign: int | None = None,
             label: str | None = None) -> ResultSet:
    """A result set from a command-line word or path (`only`: that experiment alone; `campaign`: its runs)."""
    root = resolve_root(arg)
    dirs = study_dirs(root)
    if only is not None:
        if only not in dirs:
            raise SpecError(f"--study: {only!r} not in {root}; it has {', '.join(sorted(dirs))}")
        dirs = {only: dirs[only]}
    shown = paths.display_path(dirs[only] if only is not None else root)
    rs = ResultSet(label or (shown + (f" campaign {campaign}" if campaign else "")), campaign=campaign)
    for exp, d in dirs.items():
        rs.runs[exp] = read_runs(d, campaign)
        spec = spec_for(exp, profile)
        if spec is not None:
            rs.studies.append(load_study(profile, spec, results_dir=d, for_run=False))
    return rs


def claims_table(studies: list[Study], campaign: int | None = None) -> pd.DataFrame | None:
    """The claims judged on the studies' processed tables (:func:`dbmatrix.steps.verdicts`): pooled, or
    one campaign's estimates and verdicts. None without a study with data."""
    from dbmatrix import steps

    have = [s for s in studies if s.has_data()]
    if not have:
        return None
    result, _ = steps.verdicts(have)
    table = result.claims.reindex(columns=CLAIM_COLUMNS)
    if campaign is None:
        return table
    per = result.campaigns[result.campaigns["campaign"] == campaign][["id", "estimate", "ci_lo", "ci_hi", "verdict"]]
    return table[["id", "claim", "study", "confidence"]].merge(per, on="id", how="left").reindex(columns=CLAIM_COLUMNS)
