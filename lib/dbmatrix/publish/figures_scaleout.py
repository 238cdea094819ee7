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
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter, ScalarFormatter

from dbmatrix.publish.figures import (
    COLUMN_WIDTH_IN,
    LINESTYLES,
    MARKERS,
    FigureDataError,
    apply_style,
    log_steps,
    shows_runs,
    subplots,
)


def _need(df: pd.DataFrame | None, what: str) -> pd.DataFrame:
    if df is None or df.empty:
        raise FigureDataError(f"{what}: no scale-out tables (processed/scaleout-*.csv)")
    return df


def qps_vs_threads(cells: pd.DataFrame, saturation: pd.DataFrame,
                   runs: pd.DataFrame | None = None) -> tuple[Figure, dict[str, Any]]:
    """Mean QPS (95 % CI) vs client threads (log2 axis), one line per instance count; the saturation
    point of each instance count is marked with an open circle. With fewer than
    :data:`~dbmatrix.publish.figures.MIN_RUNS_FOR_INTERVAL` runs per cell, the runs (from `runs`: instances,
    threads, qps) instead of intervals."""
    cells = _need(cells, "QPS vs threads")
    apply_style()
    fig, ax = subplots(figsize=(COLUMN_WIDTH_IN, 2.3))
    palette = sns.color_palette("colorblind")
    runs_only = shows_runs(cells["n"]) if "n" in cells else False
    for i, (n, g) in enumerate(cells.groupby("instances", sort=True)):
        g = g.sort_values("threads")
        kw = {"color": palette[i % len(palette)], "marker": MARKERS[i % len(MARKERS)], "markersize": 3.5,
              "linewidth": 0.9, "label": f"{n} instance{'s' if n > 1 else ''}"}
        if runs_only:
            ax.plot(g["threads"], g["qps"] / 1000, **kw)
            if runs is not None and {"instances", "threads", "qps"} <= set(runs.columns):
                r = runs[runs["instances"] == n]
                ax.scatter(r["threads"], pd.to_numeric(r["qps"], errors="coerce") / 1000, color=kw["color"],
                           marker=kw["marker"], s=9, alpha=0.8, linewidths=0, zorder=1)
        else:
            yerr = np.nan_to_num(np.vstack([g["qps"] - g["ci_lo"], g["ci_hi"] - g["qps"]]))
            ax.errorbar(g["threads"], g["qps"] / 1000, yerr=yerr / 1000, capsize=2, **kw)
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
    # 1-2-5 labels over the data and the threshold: a span inside one decade would otherwise get one label
    v = np.append(cells["p95_ms"].to_numpy(dtype=float), threshold_ms)
    v = v[np.isfinite(v) & (v > 0)]
    labels = log_steps(float(v.min()), float(v.max()), 1.3)
    if len(labels) >= 2:
        ax.yaxis.set_major_locator(FixedLocator(labels))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    else:
        ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ticks = sorted(cells["threads"].unique())
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("Client threads (sysbench)")
    ax.set_ylabel("p95 latency (ms, log axis)")
    ax.grid(linewidth=0.4, alpha=0.5, which="both")
    ax.legend(frameon=False, fontsize=6)
    return fig, {"ax": ax}


def over_time(timeline: pd.DataFrame, label: str) -> tuple[Figure, dict[str, Any]]:
    """Per-second QPS (top) and sysbench's per-second p95 (bottom) of every run of the best setting: one
    line per run (``run_id``), a colour per campaign and a line style per repetition, each in the legend
    (two campaigns' repetition 1 are two runs, never one line)."""
    tl = _need(timeline, "QPS over time")
    apply_style()
    keys = [k for k in ("campaign", "repetition") if k in tl.columns]
    order = tl[["run_id", *keys]].drop_duplicates("run_id").sort_values([*keys, "run_id"], kind="stable")
    legend_rows = -(-len(order) // 2)  # the legend above takes height from the panels: the figure grows with it
    fig, (ax, ax2) = subplots(2, 1, sharex=True, figsize=(COLUMN_WIDTH_IN, 2.5 + 0.2 * legend_rows))
    palette = sns.color_palette("colorblind")
    camps = sorted(order["campaign"].dropna().unique()) if "campaign" in order else []
    reps = sorted(order["repetition"].dropna().unique()) if "repetition" in order else []
    for _, r in order.iterrows():
        g = tl[tl["run_id"] == r["run_id"]].sort_values("t_s")
        ci = camps.index(r["campaign"]) if camps and pd.notna(r.get("campaign")) else 0
        rj = reps.index(r["repetition"]) if reps and pd.notna(r.get("repetition")) else 0
        name = ", ".join(p for p in (f"campaign {int(r['campaign'])}" if camps else "",
                                     f"rep. {int(r['repetition'])}" if reps else "") if p) or str(r["run_id"])
        kw = {"color": palette[ci % len(palette)], "linestyle": LINESTYLES[rj % len(LINESTYLES)], "linewidth": 0.9,
              "marker": MARKERS[ci % len(MARKERS)], "markersize": 2}
        ax.plot(g["t_s"], g["qps"] / 1000, label=name, **kw)
        ax2.plot(g["t_s"], pd.to_numeric(g["lat_ms"], errors="coerce"), **kw)
    ax.set_title(label, loc="left", fontsize=7)
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("QPS (thousands)")
    ax2.set_ylabel("p95 latency (ms)")
    ax2.set_xlabel("Second of the measured window")
    for a in (ax, ax2):
        a.set_ylim(bottom=0)
        a.grid(linewidth=0.4, alpha=0.5)
    fig.legend(*ax.get_legend_handles_labels(), frameon=False, fontsize=5.5, ncols=2, loc="outside upper center")
    return fig, {"ax": ax, "ax2": ax2, "runs": list(order["run_id"])}
