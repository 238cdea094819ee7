"""The cache figures: throughput against the cache share (seed 003's slides 13-15), drawn along the factors
that interact with the cache, and throughput and p95 per medium across cache levels.

Block size and compression interact with the cache level in the TPC-C study more than any other pair (4 KB
pages with lz4 collapse at every cache level; page x compression F = 175), so a line through the mean of
cells of several block sizes or compressions passes through no data: the throughput figure draws one panel
per block size x compression instead, with the same y axis, and each line joins one series' cell means. A
medium keeps one colour and marker in every figure (:func:`medium_styles`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dbmatrix.analyse.figure_data import FigureDataError
from dbmatrix.publish.figures import (
    COLUMN_WIDTH_IN,
    LINESTYLES,
    MARKERS,
    TEXT_WIDTH_IN,
    apply_style,
    ci_yerr,
    medium_label,
    require_columns,
    shows_runs,
    subplots,
    tick_text,
)

#: factors that get a panel each in the throughput figure (when the study varies them), in this order
FACETS = ("block_size", "compression")


def medium_styles(media: Iterable[Any]) -> dict[Any, tuple[Any, str]]:
    """One (colour, marker) per medium, by the media's sorted names: the same medium looks the same in every
    figure of a build, whatever order a table lists it in."""
    palette = sns.color_palette("colorblind")
    names = sorted({str(m) for m in media})
    return {m: (palette[names.index(str(m)) % len(palette)], MARKERS[names.index(str(m)) % len(MARKERS)])
            for m in media}


def _ordered(values: Iterable[Any], factor: str) -> list[Any]:
    """Levels in a reader's order: block sizes by size, compression "none" first, else as they come."""
    levels = list(dict.fromkeys(values))
    if factor == "block_size":
        return sorted(levels, key=lambda v: (int(m.group()) if (m := re.match(r"\d+", str(v))) else 0, str(v)))
    if factor == "compression":
        return sorted(levels, key=lambda v: (str(v) != "none",))
    return levels


def _panel_title(levels: dict[str, Any]) -> str:
    def word(k: str, v: Any) -> str:
        if k == "block_size":
            return f"{v} blocks"
        return "no compression" if k == "compression" and v == "none" else str(v)

    return ", ".join(word(k, v) for k, v in levels.items())


def throughput_vs_cache(cells: pd.DataFrame, runs: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Throughput per cache level, one panel per block size x compression the study varies (shared y axis):
    each cell's mean with its interval (:func:`~dbmatrix.publish.figures.shows_runs`: the runs alone when
    too few for one), every run as a faint dot, and a line per series (engine, medium, threads) through its
    cell means. Cells of a series that still share a panel and a level (a factor neither faceted nor a
    series) stand side by side and the line takes their mean. Emulated media are labelled as such."""
    if "cache_pct" not in cells or cells["cache_pct"].nunique() < 2:
        raise FigureDataError("throughput vs cache needs two or more cache levels")
    apply_style()
    series = [k for k in ("engine", "medium", "threads") if k in cells and cells[k].nunique() > 1]
    facets = [k for k in FACETS if k in cells and cells[k].nunique() > 1]
    combos = [()] if not facets else \
        [tuple(c) for c in pd.MultiIndex.from_product([_ordered(cells[f], f) for f in facets])]
    combos = [c for c in combos if not facets or
              (cells[facets].apply(tuple, axis=1) == c).any()]  # a fraction lacks some
    ncols = min(2, len(combos))
    nrows = math.ceil(len(combos) / ncols)
    height = COLUMN_WIDTH_IN * 0.75 if len(combos) == 1 else 0.5 + 1.45 * nrows
    fig, axes = subplots(nrows, ncols, figsize=(COLUMN_WIDTH_IN, height), layout="constrained", sharey=True,
                         sharex=True, squeeze=False)
    levels = sorted(cells["cache_pct"].unique())
    span = (max(levels) - min(levels)) or 1.0
    runs_only = shows_runs(cells["n"]) if "n" in cells else False
    keys = [tuple(r) for r in cells[series].itertuples(index=False)] if series else [()] * len(cells)
    order = sorted(set(keys), key=lambda t: tuple(str(x) for x in t))
    medium_at = series.index("medium") if "medium" in series else None
    styles = medium_styles(cells["medium"]) if medium_at is not None else {}
    palette = sns.color_palette("colorblind")
    handles: dict[str, Line2D] = {}
    width = 0.05 * span
    for p, combo in enumerate(combos):
        ax = axes[p // ncols][p % ncols]
        sel = (cells[facets].apply(tuple, axis=1) == combo) if facets else pd.Series(True, index=cells.index)
        panel = cells[sel.to_numpy()]
        for i, key in enumerate(order):
            g = panel[[k == key for k in (tuple(r) for r in panel[series].itertuples(index=False))]] \
                if series else panel
            if g.empty:
                continue
            if medium_at is not None:
                color, marker = styles[key[medium_at]]
                others = [j for j in range(len(series)) if j != medium_at]
                ls: Any = LINESTYLES[order.index(key) % len(LINESTYLES)] if others else "-"
            else:
                color, marker, ls = palette[i % len(palette)], MARKERS[i % len(MARKERS)], "-"
            label = ", ".join(str(v) for v in key) if series else "all"
            if medium_at is not None and isinstance(g.iloc[0].get("emulated"), str) and g.iloc[0]["emulated"]:
                label = label.replace(str(key[medium_at]), medium_label(key[medium_at], g.iloc[0]["emulated"]), 1)
            handles.setdefault(label, Line2D([], [], color=color, marker=marker, markersize=3.5, linewidth=1.1,
                                             linestyle=ls, label=label))
            offset = (i - (len(order) - 1) / 2) * width
            g = g.sort_values(["cache_pct", "cell_id"])
            for lvl, gl in g.groupby("cache_pct", sort=True):
                xs = lvl + offset + np.linspace(-0.3, 0.3, len(gl)) * width * (len(gl) > 1)
                if runs_only:
                    ax.plot(xs, gl["mean"], color=color, marker=marker, markersize=3.5, linewidth=0,
                            markerfacecolor="none")
                else:
                    ax.errorbar(xs, gl["mean"], yerr=ci_yerr(gl), color=color, marker=marker, markersize=3.5,
                                capsize=2, linewidth=0, elinewidth=0.9)
                for x, cid in zip(xs, gl["cell_id"]):
                    r = runs.loc[runs["cell_id"] == cid, "tps"]
                    ax.scatter(np.full(len(r), x), r, color=color, marker=marker, s=9 if runs_only else 7,
                               alpha=0.8 if runs_only else 0.3, linewidths=0, zorder=1)
            line = g.groupby("cache_pct", sort=True)["mean"].mean()
            ax.plot(line.index + offset, line.to_numpy(), color=color, linewidth=1.1, linestyle=ls)
        if facets:
            ax.set_title(_panel_title(dict(zip(facets, combo))), loc="left", fontsize=7)
        ax.set_xticks(levels, [f"{tick_text(float(v))}" for v in levels])
        ax.set_xlim(min(levels) - 0.2 * span, max(levels) + 0.2 * span)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    for k in range(len(combos), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    axes[0][0].set_ylim(bottom=0)
    fig.supxlabel("Cache size (% of measured data size)", fontsize=8)
    fig.supylabel("Throughput (transactions/s)", fontsize=8)
    if series:
        fig.legend(handles=list(handles.values()), frameon=False, fontsize=6, loc="outside upper center",
                   ncols=1)
    sns.despine(fig)
    return fig, {"series": series, "facets": facets, "panels": len(combos), "runs_only": runs_only}


def medium_cache(tps: pd.DataFrame, p95: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Seed 003 slide 15: throughput and p95 latency per medium across cache levels (geometric means with
    95 % CIs), one colour per medium (:func:`medium_styles`; emulated media say so), one line style per
    engine (and a hollow marker for every other engine, which a point without a line still shows); one
    column of panels per level combination of any further factor the tables hold (those that
    interact with the medium or the cache: block size x compression in the TPC-C study), never a mean over
    it."""
    require_columns(tps, ("medium", "cache_pct", "mean", "ci_lo", "ci_hi"), "medium x cache")
    if tps["medium"].nunique() < 2 or tps["cache_pct"].nunique() < 2:
        raise FigureDataError("medium x cache needs two or more media and cache levels")
    apply_style()
    facets = [c for c in tps.columns if c not in ("engine", "medium", "cache_pct", "mean", "ci_lo", "ci_hi",
                                                  "basis", "emulated")]
    combos = [()] if not facets else \
        [tuple(c) for c in pd.MultiIndex.from_product([_ordered(tps[f], f) for f in facets])
         if (tps[facets].apply(tuple, axis=1) == tuple(c)).any()]
    wide = len(combos) > 1  # a column per combination, throughput above p95; else the two side by side
    fig, grid = subplots(2 if wide else 1, len(combos) if wide else 2, sharex=True, sharey="row" if wide else False,
                         squeeze=False, figsize=(TEXT_WIDTH_IN, 3.6 if wide else 2.2), layout="constrained")
    axes = grid if wide else [[grid[0][0]], [grid[0][1]]]
    levels = sorted(tps["cache_pct"].unique())
    media = sorted(dict.fromkeys(tps["medium"]), key=str)
    styles = medium_styles(media)
    engines = list(dict.fromkeys(tps["engine"])) if "engine" in tps else [None]
    for col, combo in enumerate(combos):
        for row, (table, ylabel) in enumerate(((tps, "Throughput (transactions/s)"), (p95, "p95 latency (ms)"))):
            ax = axes[row][col]
            if table.empty:
                continue
            if facets:
                table = table[(table[facets].apply(tuple, axis=1) == combo).to_numpy()]
            for i, med in enumerate(media):
                for k, eng in enumerate(engines):
                    g = table[(table["medium"] == med) & ((table["engine"] == eng) if eng is not None else True)]
                    g = g.sort_values("cache_pct", kind="stable")
                    if g.empty:
                        continue
                    x = np.array([levels.index(v) for v in g["cache_pct"]]) + (i * len(engines) + k - 1.5) * 0.04
                    label = medium_label(med, g["emulated"].iloc[0] if "emulated" in g else None)
                    ax.errorbar(x, g["mean"], yerr=ci_yerr(g), color=styles[med][0],
                                linestyle=LINESTYLES[k % len(LINESTYLES)], marker=styles[med][1],
                                markerfacecolor="white" if k % 2 else styles[med][0],  # an engine alone
                                markersize=3.5, capsize=2, linewidth=1.1, elinewidth=0.9,  # in a panel
                                label=(f"{label}, {eng}" if eng is not None and len(engines) > 1 else label)
                                if col == 0 else None)
            if col == 0:
                ax.set_ylabel(ylabel, fontsize=7)
            ax.grid(axis="y", linewidth=0.4, alpha=0.5)
            if row == 0 and facets:
                ax.set_title(_panel_title(dict(zip(facets, combo))), loc="left", fontsize=7)
        for row in range(2):
            axes[row][col].set_xticks(range(len(levels)), [f"{tick_text(v)} %" for v in levels])
            axes[row][col].set_xlim(-0.5, len(levels) - 0.5)
    for row in range(2):  # after every panel is drawn: set_ylim stops autoscaling the row it shares
        for ax in axes[row]:
            ax.set_ylim(bottom=0)
    fig.supxlabel("Cache size (% of measured data size)", fontsize=8)
    # one engine: named in the legend's title, not in every entry; one row across the figure's width
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, frameon=False, fontsize=5.5, loc="outside upper center", ncols=len(labels),
               title=f"engine {engines[0]}" if len(engines) == 1 and engines[0] is not None else None,
               title_fontsize=5.5)
    sns.despine(fig)
    return fig, {"media": media, "engines": engines, "panels": combos}


__all__ = ["FACETS", "medium_cache", "medium_styles", "throughput_vs_cache"]
