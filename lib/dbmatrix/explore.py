"""What the exploration notebook (40) calls: results directories, runs tables, filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.analyse.tables import factor_columns
from dbmatrix.spec.experiment import FACTORS

__all__ = ["available_results", "factor_columns", "filter_runs", "load_runs_table"]


DEFAULT_EXPLORE = "storage-matrix-quick"  # the committed reference the exploration notebook opens


def available_results() -> list[Path]:
    """Results directories under data/runs and data/reference that have processed tables."""
    from dbmatrix.paths import reference_root, runs_root

    out: list[Path] = []
    for root in (runs_root(), reference_root()):
        if root.is_dir():
            out += sorted(d for d in root.iterdir() if (d / "processed" / "runs.csv").is_file())
    return out


def load_runs_table(run_dir: str | Path | None = None) -> pd.DataFrame:
    """The processed runs table of a results directory (default: the committed reference of the storage
    matrix): one row per run with its factor levels, throughput, latency and efficiency metrics."""
    from dbmatrix.paths import reference_dir

    d = Path(run_dir) if run_dir else reference_dir(DEFAULT_EXPLORE)
    f = d / "processed" / "runs.csv"
    if not f.is_file():
        have = ", ".join(str(p) for p in available_results()) or "none"
        raise FileNotFoundError(f"run_dir: {d} has no processed/runs.csv (run notebook 20 or `dbmatrix analyse "
                                f"--results {d}` first); directories with processed tables: {have}")
    return pd.read_csv(f)


def filter_runs(runs: pd.DataFrame, filters: dict[str, Any] | None) -> pd.DataFrame:
    """Runs whose factor levels match `filters` ({factor: level or [levels]}); unknown factors or levels
    are errors that name the allowed values."""
    out = runs
    for f, want in (filters or {}).items():
        if f not in runs.columns:
            raise ValueError(f"filters: {f!r} is not a column of the runs; factors: "
                             f"{', '.join(c for c in FACTORS if c in runs.columns)}")
        levels = want if isinstance(want, (list, tuple, set)) else [want]
        present = {str(v): v for v in runs[f].dropna().unique()}
        missing = [v for v in levels if str(v) not in present]
        if missing:
            raise ValueError(f"filters.{f}: {', '.join(map(str, missing))} not among the levels "
                             f"{', '.join(sorted(present))}")
        out = out[out[f].astype(str).isin({str(v) for v in levels})]
    return out
