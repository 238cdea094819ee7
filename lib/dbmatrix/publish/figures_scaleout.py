"""Figures of the scale-out study (seed 000): QPS and p95 vs client threads per instance count, and QPS
and p95 over time at the best setting. The style and stable bytes of :mod:`dbmatrix.publish.figures`.

Inputs are the tables of :func:`dbmatrix.analyse.scaleout.scaleout_tables`. Error bars are Student-t 95 %
CIs over repetitions; p95 comes from histograms merged over repetitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from dbmatrix.publish.figures import COLUMN_WIDTH_IN, MARKERS, FigureDataError, apply_style, subplots


def _need(df: pd.DataFrame | None, what: str) -> pd.DataFrame:
    if df is None or df.empty:
        raise FigureDataError(f"{what}: no scale-out tables (processed/scaleout-*.csv)")
    return df


def qps_vs_threads(cells: pd.DataFrame, saturation: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Mean QPS (95 % CI) vs client threads (log2 axis), one line per instance count; the saturation
    point of each instance count is marked with an open circle."""
    cells = _need(cells, "QPS vs threads")
    apply_style()
    fig, ax = subplots(figsize=(COLUMN_WIDTH_IN, 2.3))
    palette = sns.color_palette("colorblind")
    for i, (n, g) in enumerate(cells.groupby("instances", sort=True)):
        g = g.sort_values("threads")
        yerr = np.nan_to_num(np.vstack([g["qps"] - g["ci_lo"], g["ci_hi"] - g["qps"]]))
        ax.errorbar(g["threads"], g["qps"] / 1000, yerr=yerr / 1000, color=palette[i % len(palette)],
                    marker=MARKERS[i % len(MARKERS)], markersize=3.5, capsize=2, linewidth=0.9,
                    label=f"{n} instance{'s' if n > 1 else ''}")
        s = saturation[saturation["instances"] == n] if not saturation.empty else saturation
        if not s.empty and bool(s["reached"].iloc[0]):
            t = int(s["saturation_threads"].iloc[0])
            q = float(g.loc[g["threads"] == t, "qps"].iloc[0])
            ax.plot([t], [q / 1000], marker="o", markersize=8, markerfacecolor="none",
                    color=palette[i % len(palette)], linewidth=0)
    ax.set_xscale("log", base=2)
    ticks = sorted(cells["threads"].unique())
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("Client threads (sysbench)")
    ax.set_ylabel("Queries per second (thousands)")
    ax.set_ylim(bottom=0)
    ax.grid(linewidth=0.4, alpha=0.5)
    ax.legend(frameon=False, fontsize=6)
    return fig, {"ax": ax}


def p95_vs_threads(cells: pd.DataFrame, threshold_ms: float) -> tuple[Figure, dict[str, Any]]:
    """Merged p95 latency vs client threads per instance count, with the threshold as a dashed line."""
    cells = _need(cells, "p95 vs threads")
    apply_style()
    fig, ax = subplots(figsize=(COLUMN_WIDTH_IN, 2.3))
    palette = sns.color_palette("colorblind")
    for i, (n, g) in enumerate(cells.groupby("instances", sort=True)):
        g = g.sort_values("threads")
        ax.plot(g["threads"], g["p95_ms"], color=palette[i % len(palette)], marker=MARKERS[i % len(MARKERS)],
                markersize=3.5, linewidth=0.9, label=f"{n} instance{'s' if n > 1 else ''}")
    ax.axhline(threshold_ms, color="0.3", linestyle="--", linewidth=0.8, label=f"{threshold_ms:g} ms")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ticks = sorted(cells["threads"].unique())
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("Client threads (sysbench)")
    ax.set_ylabel("p95 latency (ms)")
    ax.grid(linewidth=0.4, alpha=0.5, which="both")
    ax.legend(frameon=False, fontsize=6)
    return fig, {"ax": ax}


def over_time(timeline: pd.DataFrame, label: str) -> tuple[Figure, dict[str, Any]]:
    """Per-second QPS (left) and sysbench's per-second p95 (right axis) of every repetition of the best
    setting; repetitions share a colour per metric and differ by line style."""
    tl = _need(timeline, "QPS over time")
    apply_style()
    fig, ax = subplots(figsize=(COLUMN_WIDTH_IN, 2.6))
    ax2 = ax.twinx()
    palette = sns.color_palette("colorblind")
    styles = ("-", "--", ":", "-.")
    for j, (rep, g) in enumerate(tl.groupby("repetition", sort=True)):
        g = g.sort_values("t_s")
        ax.plot(g["t_s"], g["qps"] / 1000, color=palette[0], linestyle=styles[j % len(styles)], linewidth=0.9,
                marker="o", markersize=2, label=f"QPS, rep. {rep}")
        ax2.plot(g["t_s"], pd.to_numeric(g["lat_ms"], errors="coerce"), color=palette[3],
                 linestyle=styles[j % len(styles)], linewidth=0.9, marker="s", markersize=2,
                 label=f"p95, rep. {rep}")
    ax.set_xlabel(f"Second of the measured window ({label})")
    ax.set_ylabel("Queries per second (thousands)", color=palette[0])
    ax2.set_ylabel("p95 latency per second (ms)", color=palette[3])
    ax.set_ylim(bottom=0)
    ax2.set_ylim(bottom=0)
    ax.grid(linewidth=0.4, alpha=0.5)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    fig.legend(h1 + h2, l1 + l2, frameon=False, fontsize=5, ncol=3, loc="outside upper center")
    return fig, {"ax": ax, "ax2": ax2}
