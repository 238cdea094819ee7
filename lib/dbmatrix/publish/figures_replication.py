"""Figures of the Galera replication study: one function per figure, the style and stable bytes of
:mod:`dbmatrix.publish.figures` (column width, Type 42 fonts, no timestamps, provenance in the metadata).

Inputs are the tables of :func:`dbmatrix.analyse.replication.analyse_replication` (``runs``, ``settings``,
``samples``). Error bars are Student-t 95 % CIs over repetitions; dots are the repetitions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dbmatrix.publish.figure_check import Finding
from dbmatrix.publish.figures import COLUMN_WIDTH_IN, MARKERS, apply_style, save_figure, shows_runs, subplots

LEVEL = "slave_threads"
STEMS = {"paused": "replication-paused", "throughput": "replication-throughput-latency",
         "queue": "replication-recv-queue"}


def _series(settings: pd.DataFrame) -> list[str]:
    return [k for k in ("follower_medium", "write_to", "threads", "workload")
            if k in settings and settings[k].nunique() > 1]


def _series_label(key: str, value: object) -> str:
    if key == "follower_medium":
        return "followers on the writer's medium" if value == "same" else f"followers on {value}"
    return f"{key}={value}"


def _empty(ax: Axes, text: str = "no completed galera runs") -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=7)
    ax.set_xticks([])
    ax.set_yticks([])


def _per_setting(ax: Axes, settings: pd.DataFrame, runs: pd.DataFrame, metric: str, ylabel: str, *,
                 legend: bool = True) -> None:
    """Means with CI bars per applier level (categorical x), one series per other varied level,
    repetitions as faint dots; with fewer than :data:`~dbmatrix.publish.figures.MIN_RUNS_FOR_INTERVAL` runs
    at a setting, the runs alone (and the mean as an open marker), no interval."""
    s = settings[settings["metric"] == metric] if not settings.empty else settings
    if s.empty:
        _empty(ax)
        return
    levels = sorted(s[LEVEL].unique())
    x_of = {lv: i for i, lv in enumerate(levels)}
    series = _series(s)
    groups = list(s.groupby(series, sort=True)) if series else [((), s)]
    palette = sns.color_palette("colorblind")
    width = 0.12
    runs_only = shows_runs(s["n"]) if "n" in s else False
    for i, (key, g) in enumerate(groups):
        key = key if isinstance(key, tuple) else (key,)
        g = g.sort_values(LEVEL)
        color, marker = palette[i % len(palette)], MARKERS[i % len(MARKERS)]
        off = (i - (len(groups) - 1) / 2) * width
        xs = np.array([x_of[v] for v in g[LEVEL]]) + off
        yerr = np.vstack([g["mean"] - g["ci_lo"], g["ci_hi"] - g["mean"]])
        label = ", ".join(_series_label(k, v) for k, v in zip(series, key)) or None
        if runs_only:
            ax.plot(xs, g["mean"], color=color, marker=marker, markersize=3.5, linewidth=0.9,
                    markerfacecolor="none", label=label)
        else:
            ax.errorbar(xs, g["mean"], yerr=np.nan_to_num(yerr), color=color, marker=marker, markersize=3.5,
                        capsize=2, linewidth=0.9, elinewidth=0.9, label=label)
        if not runs.empty and metric in runs:
            r = runs
            for k, v in zip(series, key):
                r = r[r[k] == v]
            for lv in levels:
                vals = pd.to_numeric(r.loc[r[LEVEL] == lv, metric], errors="coerce").dropna().sort_values()
                ax.scatter(np.full(len(vals), x_of[lv] + off + width / 3), vals, color=color, marker=marker,
                           s=9 if runs_only else 7, alpha=0.8 if runs_only else 0.35, linewidths=0, zorder=1)
    ax.set_xticks(range(len(levels)), [str(v) for v in levels])
    ax.set_xlim(-0.5, len(levels) - 0.5)
    ax.set_xlabel("wsrep_slave_threads (appliers per node)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    if series and legend:
        ax.legend(frameon=False, fontsize=6)


def paused_per_setting(settings: pd.DataFrame, runs: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Share of the measured window the nodes spent paused by flow control (mean over nodes of the
    ``wsrep_flow_control_paused_ns`` delta), per applier setting, with its 95 % CI."""
    apply_style()
    fig, ax = subplots(figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * 0.62), layout="constrained")
    _per_setting(ax, settings, runs, "fc_paused_pct", "FC paused (% of window)")
    sns.despine(fig)
    return fig, {}


def throughput_latency_per_setting(settings: pd.DataFrame, runs: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Throughput and p95 latency per applier setting (two panels), means with 95 % CIs."""
    apply_style()
    fig, (a1, a2) = subplots(1, 2, figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * 0.75), layout="constrained")
    _per_setting(a1, settings, runs, "tps", "Throughput (transactions/s)", legend=False)
    _per_setting(a2, settings, runs, "lat_p95_ms", "p95 latency (ms)", legend=False)
    for ax in (a1, a2):
        ax.set_xlabel("Appliers per node")
    handles, labels = a1.get_legend_handles_labels()
    if handles:  # one legend for both panels, above them: inside a panel it would cover the other's labels
        fig.legend(handles, labels, frameon=False, fontsize=6, ncols=1, loc="outside upper center")
    sns.despine(fig)
    return fig, {}


def example_runs(samples: pd.DataFrame) -> pd.DataFrame:
    """The series drawn: per applier setting (and write target) the run with the lowest repetition."""
    if samples.empty:
        return samples
    keys = _sample_keys(samples)
    firsts = (samples[["run_id", *keys, "repetition"]].drop_duplicates()
              .sort_values([*keys, "repetition", "run_id"], kind="stable")
              .groupby(keys, sort=True).head(1))
    return samples[samples["run_id"].isin(firsts["run_id"])]


def _sample_keys(samples: pd.DataFrame) -> list[str]:
    """A setting of the receive-queue panels: the applier level, the write target and (when it varies) the
    followers' medium."""
    keys = [LEVEL, "write_to"]
    if "follower_medium" in samples and samples["follower_medium"].nunique() > 1:
        keys.append("follower_medium")
    return keys


def recv_queue_series(samples: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Receive queue of every node, second by second, for one run of each applier setting (one panel
    per setting, shared axes)."""
    apply_style()
    s = example_runs(samples)
    cols = _sample_keys(s) if not s.empty else [LEVEL, "write_to"]
    keys = sorted(s[cols].drop_duplicates().itertuples(index=False, name=None)) if not s.empty else []
    n = max(1, len(keys))
    ncols = 2 if n > 3 else 1  # stacked in one column, six panels would each get a tenth of the height
    nrows = -(-n // ncols)
    fig, grid = subplots(nrows, ncols, figsize=(COLUMN_WIDTH_IN, 0.45 + 1.0 * nrows), sharex=True, sharey=True,
                         layout="constrained", squeeze=False)
    axes = grid.reshape(-1, 1)
    for extra in axes[n:, 0]:
        extra.set_visible(False)
    if not keys:
        _empty(axes[0][0])
        return fig, {"runs": []}
    nodes = sorted(s["node"].unique())
    palette = sns.color_palette("colorblind")
    runs = []
    for ax, key in zip(axes[:, 0], keys):
        level, target = key[0], key[1]
        g = s
        for c, v in zip(cols, key):
            g = g[g[c] == v]
        runs.append(str(g["run_id"].iloc[0]))
        for i, node in enumerate(nodes):
            gn = g[g["node"] == node].sort_values("t_s")
            ax.plot(gn["t_s"], gn["recv_queue"], color=palette[i % len(palette)], linewidth=0.9,
                    marker=MARKERS[i % len(MARKERS)], markersize=2, label=node)
        title = f"{level} applier{'s' if level != 1 else ''}"
        if s["write_to"].nunique() > 1:
            title += f", writes to {target}"
        if len(key) > 2:
            title += ", " + ("followers on the same medium" if key[2] == "same" else f"followers on {key[2]}") \
                if ncols == 1 else ", " + ("same medium" if key[2] == "same" else f"{key[2]} followers")
        ax.set_title(title, loc="left", fontsize=7 if ncols == 1 else 5.5)
        if ax in grid[:, 0]:
            ax.set_ylabel("Recv. queue")
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    axes[0][0].set_ylim(bottom=0)  # once, after every panel is drawn: the shared top covers all of them
    for ax in grid[-1]:
        ax.set_xlabel("Time in window (s)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, frameon=False, fontsize=6, ncols=len(nodes), loc="outside upper center")
    sns.despine(fig)
    return fig, {"runs": runs}


def draw_all(tables: dict[str, pd.DataFrame], out_dir: Path, *, data_sha: str,
             check: list[Finding] | None = None) -> list[Path]:
    """Every replication figure as PDF and PNG under `out_dir` (the figure check's findings appended to
    `check` when given)."""
    settings, runs, samples = (tables.get(k, pd.DataFrame()) for k in ("settings", "runs", "samples"))
    written = []
    fig, _ = paused_per_setting(settings, runs)
    written += save_figure(fig, out_dir, STEMS["paused"], data_sha=data_sha, check=check,
                           title="Galera: flow-control paused share per applier setting")
    fig, _ = throughput_latency_per_setting(settings, runs)
    written += save_figure(fig, out_dir, STEMS["throughput"], data_sha=data_sha, check=check,
                           title="Galera: throughput and p95 latency per applier setting")
    fig, _ = recv_queue_series(samples)
    written += save_figure(fig, out_dir, STEMS["queue"], data_sha=data_sha, check=check,
                           title="Galera: receive queue per node over the measured window")
    return written
