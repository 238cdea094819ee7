"""The figure registry: every figure of the paper and how it is drawn; which study kind may draw it is
the kind's (:attr:`dbmatrix.analyse.kinds.StudyKind.figures`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.analyse.claims.catalogue import CLAIMS
from dbmatrix.analyse.figure_data import (
    StudyTables,
    baseline_of,
    efficiency_figure_table,
    emulated_media,
    timeline_cells,
)
from dbmatrix.analyse.interactions import averaged_in_table
from dbmatrix.analyse.judgement import ClaimVerdicts, Judgement
from dbmatrix.analyse.kinds import get_kind
from dbmatrix.analyse.stats import level_key
from dbmatrix.publish import figures as plots
from dbmatrix.publish import figures_cache, figures_contrasts
from dbmatrix.publish import figures_scaleout as scaleout_plots
from dbmatrix.publish.figure_check import Finding
from dbmatrix.spec.experiment import FACTORS


@dataclass(frozen=True)
class FigureDef:
    """A figure of the paper: its stem under figures/, PDF title, and how to draw it from a study (the
    draw function returns the figure and the tables it was drawn from, whose hash goes in the PDF). A
    `model` figure draws the tables the judge step fitted (:data:`dbmatrix.analyse.judge.FIGURE_MODELS`):
    its draw function takes those tables and their labels instead of the study."""

    stem: str
    title: str
    draw: Any  # Callable[[StudyTables, dict], tuple[plt.Figure, list[pd.DataFrame]]]
    model: bool = False
    # the factors whose effect the figure shows and the metrics it draws: the figure check fails it when it
    # averages over a factor that interacts with one of them (:func:`design_findings`); () checks nothing
    contrast: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ("tps",)


def model_tables(j: Judgement, stem: str, st: StudyTables) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """The judgement's fitted tables of figure `stem` when `st` is the study they were fitted on, else the
    FigureDataError the judge step met on it."""
    ft = j.figures.get(stem)
    if ft is None or ft.study != st.name:
        raise plots.FigureDataError(j.figure_error(stem, st.name) or f"no fitted tables of {st.name} in the judgement")
    return ft.tables, ft.labels


def _draw_effects(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    fig, _ = plots.factor_effects(st.analysis.effects, baseline_of(st), emulated_media(st))
    return fig, [st.analysis.effects]


def _draw_cache(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    fig, _ = figures_cache.throughput_vs_cache(st.cells, st.runs)
    return fig, [st.runs, st.cells]


def _draw_threads(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    fig, _ = plots.throughput_vs_threads(st.cells, st.runs)
    return fig, [st.runs, st.cells]


def _draw_block(fitted: dict[str, pd.DataFrame], labels: dict[str, str],
                opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    table, a, b = fitted["ratios"], labels["a"], labels["b"]
    band = seed_band(BLOCK_CLAIM, a, b)
    claimed, at = band if band else (None, None)
    levels = sorted(table["cache_pct"].unique())
    at = {"min": levels[0], "max": levels[-1]}.get(at, at) if isinstance(at, str) else at
    if at is not None and not isinstance(at, str) and all(float(at) < float(v) for v in levels):
        at = levels[0]  # the seed's no-cache level (0) below this study's levels: its lowest stands in
    fig, _ = figures_contrasts.block_size_ratios(table, a=a, b=b, claimed=claimed, claimed_at=at,
                                     claimed_label="seed 003: MyRocks, no block cache")
    return fig, [table]


BLOCK_CLAIM = "blockSmallCache"  # the seed's block-size band the figure shades where its condition holds


def seed_band(claim_id: str, a: Any, b: Any) -> tuple[tuple[float, float], Any] | None:
    """A ratio claim's band in the direction a/b (inverted when the claim states b/a) and the cache level
    where the seed's condition holds (its ``at`` cache_pct: "min", "max", a level or None)."""
    c = next((c for c in CLAIMS if c.id == claim_id), None)
    if c is None:
        return None
    lo, hi = c.band
    if level_key(c.a) == level_key(b) and level_key(c.b) == level_key(a):
        lo, hi = 1.0 / hi, 1.0 / lo
    elif not (level_key(c.a) == level_key(a) and level_key(c.b) == level_key(b)):
        return None
    return (lo, hi), c.at.get("cache_pct")


def _draw_compression(fitted: dict[str, pd.DataFrame], labels: dict[str, str],
                      opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    tps, sizes, writes = fitted["tps"], fitted["sizes"], fitted["writes"]
    fig, _ = figures_contrasts.compression_panels(tps, sizes, writes)
    return fig, [tps, sizes, writes]


def _draw_medium(fitted: dict[str, pd.DataFrame], labels: dict[str, str],
                 opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    tps, p95 = fitted["tps"], fitted["p95"]
    fig, _ = figures_cache.medium_cache(tps, p95)
    return fig, [tps, p95]


def _draw_timeline(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    ids, labels = timeline_cells(st, opts.get("timeline_cells"))
    emulated = emulated_media(st)
    labels = {c: " ".join(f"{w} (emulated {emulated[w]})" if w in emulated else w for w in lab.split(" "))
              for c, lab in labels.items()}
    iv = st.intervals()
    if iv.empty:
        raise plots.FigureDataError("throughput over time: no per-second rows (processed/intervals.parquet)")
    iv = iv[iv["cell_id"].isin(ids)]
    steady = st.analysis.steady
    fig, _ = plots.throughput_over_time(iv, steady, ids, labels, st.analysis.runs)
    return fig, [iv, steady[steady["run_id"].isin(set(iv["run_id"]))] if "run_id" in steady else steady]


def _draw_efficiency(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    table, base = efficiency_figure_table(st)
    fig, _ = plots.efficiency_vs_baseline(table, base, emulated_media(st))
    return fig, [table]


def _scaleout(st: StudyTables, name: str) -> pd.DataFrame:
    df = st.extra.get(f"scaleout-{name}")
    if df is None or df.empty:
        raise plots.FigureDataError(f"no processed/scaleout-{name}.csv")
    return df


def _draw_scaleout_qps(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    cells, sat = _scaleout(st, "cells"), _scaleout(st, "saturation")
    fig, _ = scaleout_plots.qps_vs_threads(cells, sat, st.a.runs if st.a is not None else None)
    return fig, [cells, sat]


def _draw_scaleout_p95(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    cells, cap = _scaleout(st, "cells"), _scaleout(st, "capacity")
    fig, _ = scaleout_plots.p95_vs_threads(cells, float(cap["threshold_ms"].iloc[0]))
    return fig, [cells, cap]


def _draw_scaleout_time(st: StudyTables, opts: dict[str, Any]) -> tuple[Any, list[pd.DataFrame]]:
    cells, tl = _scaleout(st, "cells"), _scaleout(st, "timeline")
    runs = st.a.runs if st.a is not None else pd.DataFrame()
    if "campaign" in runs and "campaign" not in tl:  # one line per run: campaigns share repetition numbers
        tl = tl.merge(runs[["run_id", "campaign"]].drop_duplicates("run_id"), on="run_id", how="left")
    best = cells.loc[cells["qps"].idxmax()]
    n, t = int(best["instances"]), int(best["threads"])
    fig, _ = scaleout_plots.over_time(tl, f"best setting: {n} instance{'s' if n > 1 else ''}, {t} client threads")
    return fig, [tl]


# The paper's order. Each figure is drawn from the first study (in the profile's order) that has its data.
FIGURES: tuple[FigureDef, ...] = (
    FigureDef("factor-effects", "Factor effects on throughput", _draw_effects),
    FigureDef("throughput-vs-cache", "Throughput vs cache size", _draw_cache, contrast=("cache_pct",)),
    FigureDef("block-size", "Block size 4k vs 16k per engine and cache level", _draw_block, model=True,
              contrast=("block_size",)),
    FigureDef("compression", "Compression: throughput, on-disk size and writes per transaction",
              _draw_compression, model=True, contrast=("compression",), metrics=("tps", "write_kb_per_txn")),
    FigureDef("medium-cache", "Medium x cache: throughput and p95 latency", _draw_medium, model=True,
              contrast=("medium", "cache_pct"), metrics=("tps", "p95_ms")),
    FigureDef("efficiency", "Hardware cost per transaction relative to the baseline", _draw_efficiency),
    FigureDef("throughput-over-time", "Per-second throughput and p95 latency", _draw_timeline),
    FigureDef("throughput-vs-threads", "Throughput and p95 latency vs client threads", _draw_threads,
              contrast=("threads",), metrics=("tps", "p95_ms")),
    FigureDef("scaleout-qps", "Scale-out: queries per second vs client threads per instance count",
              _draw_scaleout_qps),
    FigureDef("scaleout-p95", "Scale-out: p95 latency vs client threads per instance count", _draw_scaleout_p95),
    FigureDef("scaleout-time", "Scale-out: per-second QPS and p95 at the best setting", _draw_scaleout_time),
)


@dataclass
class Published:
    """What the figures step wrote: files, the figures drawn (stem -> experiment), and the notes of those
    skipped for want of data."""

    written: list[Path] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    claims: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per claim (verdicts.claims)
    verdicts: ClaimVerdicts | None = None
    findings: list[Finding] = field(default_factory=list)  # the figure check's, of every figure drawn


def draw_figures(studies: Sequence[StudyTables], figures_dir: Path, judgement: Judgement, *,
                 opts: dict[str, Any] | None = None) -> Published:
    """Every figure of :data:`FIGURES` from the first study that has its data (a model figure from the
    judgement's fitted tables); stale figure files (of figures this data no longer gives) are removed so that
    figures/ holds exactly what the paper shows."""
    out = Published()
    opts = opts or {}
    for fd in FIGURES:
        for st in studies:
            if fd.stem not in get_kind(st.kind).figures or st.a is None:
                continue
            try:
                fig, frames = fd.draw(*model_tables(judgement, fd.stem, st), opts) if fd.model else fd.draw(st, opts)
            except plots.FigureDataError as exc:
                out.skipped.append(f"{fd.stem} from {st.name}: {exc}")
                continue
            out.findings.extend(design_findings(fd, st.name, frames, judgement.interactions))
            out.written += plots.save_figure(fig, figures_dir, fd.stem,
                                             data_sha=plots.data_hash(*frames), title=fd.title,
                                             check=out.findings, emulated=emulated_media(st))
            out.figures[fd.stem] = st.name
            break
        else:
            if not any(n.startswith(f"{fd.stem} from ") for n in out.skipped):
                out.skipped.append(f"{fd.stem}: no study with data")
    return out


def shown_factors(frame: pd.DataFrame) -> list[str]:
    """The factors a figure's table draws: every factor when it has a row per cell (``cell_id``), else the
    factor columns that vary in it."""
    if "cell_id" in frame.columns:
        return list(FACTORS)
    return [f for f in FACTORS if f in frame.columns and frame[f].map(level_key).nunique() > 1]


def design_findings(fd: FigureDef, study: str, frames: Sequence[pd.DataFrame],
                    interactions: pd.DataFrame) -> list[Finding]:
    """The figure check's design rule (issue 41): a figure that averages over a factor whose interaction with
    the contrast it shows is significant on a metric it draws is a finding, "averages-interaction". Read from
    the judgement's `interactions` (:func:`dbmatrix.analyse.interactions.interaction_table`, fitted once by the
    judge step); `frames`: the tables the figure was drawn from, the first the one it plots."""
    if not fd.contrast or not frames:
        return []
    return [Finding(fd.stem, "averages-interaction", (f"averaged over {i.factor}",),
                    f"{i}: draw {i.factor} as panels or series")
            for i in averaged_in_table(interactions, study, fd.contrast, shown_factors(frames[0]), fd.metrics)]


def remove_stale_figures(figures_dir: Path, keep: set[str]) -> list[Path]:
    removed = []
    for f in sorted(figures_dir.glob("*")):
        if f.suffix in (".pdf", ".png") and f.stem not in keep:
            f.unlink()
            removed.append(f)
    return removed


