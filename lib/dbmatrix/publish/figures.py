"""Publication figures: one style, one function per figure, stable bytes.

Sizes come from the paper's column width; fonts are embedded as Type 42; the PDF carries the git
commit and a hash of the data it was drawn from, and no creation date, so the same data gives the
same bytes. Figures are drawn with matplotlib's object API (:func:`subplots` makes a
:class:`~matplotlib.figure.Figure` no backend manages): importing or drawing never switches the backend,
so a Jupyter kernel keeps its inline backend and the CLI needs no display. Every figure function takes
tidy DataFrames (built by :mod:`dbmatrix.analyse.tables`) and returns ``(figure, info)``; when the data a
figure needs is absent it raises :class:`FigureDataError`, and the figures step skips that figure (and the
paper leaves it out). ``apply_style``, ``save_figure`` and ``COLUMN_WIDTH_IN`` are used by other figure
modules (``figures_replication``): keep them stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dbmatrix.analyse.figure_data import FigureDataError
from dbmatrix.analyse.judgement import frames_digest
from dbmatrix.publish.figure_check import Finding, check_figure
from dbmatrix.spec.factors import factor_title, factor_unit

COLUMN_WIDTH_IN = 3.39  # \columnwidth of paper/main.tex (two-column article, 10pt)
TEXT_WIDTH_IN = 6.9  # \textwidth (letter paper, 0.8 in margins): figures spanning both columns
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
# Line styles a reader tells apart in a legend: the four named ones, then dash patterns (offset, on/off) unlike them
LINESTYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (6, 1.5)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)),
                              (0, (6, 1.5, 1, 1.5, 1, 1.5)))
# With fewer runs per plotted point than this, a Student-t interval has at most one degree of freedom: its
# half-width is 12.7 standard errors (t 0.975 on 1 df), wider than anything the two runs say. Such a figure
# draws the runs themselves instead, and its caption says so (:func:`dbmatrix.publish.captions.interval_text`).
MIN_RUNS_FOR_INTERVAL = 3


def shows_runs(n: Any) -> bool:
    """Whether a figure whose points rest on `n` runs each (a number or a column of them) draws the runs
    instead of t intervals: when any point has fewer than :data:`MIN_RUNS_FOR_INTERVAL`."""
    values = pd.to_numeric(pd.Series(np.atleast_1d(n)), errors="coerce").dropna()
    return bool(len(values)) and int(values.min()) < MIN_RUNS_FOR_INTERVAL


def apply_style() -> None:
    sns.set_theme(context="paper", style="ticks", palette="colorblind")
    matplotlib.rcParams.update({
        "pdf.fonttype": 42, "ps.fonttype": 42, "font.size": 8, "axes.labelsize": 8,
        "legend.fontsize": 7, "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.titlesize": 8,
        "figure.dpi": 150, "savefig.dpi": 300, "svg.hashsalt": "dbmatrix", "path.simplify": False,
    })


class NotebookFigure(Figure):
    """A figure that shows itself as a PNG where IPython displays it (the last expression of a notebook cell,
    ``display(fig)``), whatever the kernel's backend: a figure no backend manages gets no inline formatter
    until something imports the inline backend, and would print as ``<Figure size ...>``."""

    def _repr_png_(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi="figure")
        return buf.getvalue()


def subplots(*args: Any, figsize: tuple[float, float], layout: Literal["constrained", "tight"] | None = "constrained",
             **kwargs: Any) -> tuple[Figure, Any]:
    """``pyplot.subplots`` without pyplot: a figure that no backend manages, so drawing never switches the
    backend of a Jupyter kernel and works headless (``savefig`` picks the writer from the file type), and
    that displays inline in a notebook (:class:`NotebookFigure`)."""
    fig = NotebookFigure(figsize=figsize, layout=layout)
    return fig, fig.subplots(*args, **kwargs)


def data_hash(*frames: pd.DataFrame) -> str:
    """The tables' digest (:func:`dbmatrix.analyse.judgement.frames_digest`), stamped into a figure."""
    return frames_digest(*frames)


def save_figure(fig: Figure, out_dir: Path, stem: str, *, data_sha: str,
                title: str, check: list[Finding] | None = None, emulated: Iterable[str] = ()) -> list[Path]:
    """Write `stem`.pdf and `stem`.png with the data's digest and no timestamp or commit, so the same data
    drawn by the same code gives the same bytes (the commit of a build is in its untracked sidecar,
    ``paper/generated/build.json``: a commit stamp would change every tracked image at every commit). With a
    `check` list, the figure check's findings on the drawn figure
    (:func:`dbmatrix.publish.figure_check.check_figure`; `emulated`: the emulated media it may name) are
    appended to it first."""
    if check is not None:
        check += check_figure(fig, stem, emulated=emulated)
    out_dir.mkdir(parents=True, exist_ok=True)
    pdf, png = out_dir / f"{stem}.pdf", out_dir / f"{stem}.png"
    fig.savefig(pdf, metadata={
        "CreationDate": None, "ModDate": None, "Title": title,
        "Subject": f"dbmatrix data sha256:{data_sha}", "Creator": "dbmatrix",
    })
    fig.savefig(png, metadata={"Software": "dbmatrix", "Description": f"data:{data_sha}"})
    if fig.canvas.manager is not None:  # drawn through pyplot by a caller: let pyplot forget it
        import matplotlib.pyplot as plt

        plt.close(fig)
    return [pdf, png]


def _series_label(row: pd.Series, keys: list[str]) -> str:
    parts = []
    for k in keys:
        v = row[k]
        parts.append({"engine": str(v), "block_size": f"{v} pages", "compression": f"{v}",
                      "medium": str(v), "threads": f"{v} thr"}.get(k, str(v)))
    return ", ".join(parts) if parts else "all"


def _factor_name(factor: str) -> str:
    """A factor as a reader names it: its registry title without the unit ("Cache", "Block size")."""
    return factor_title(factor).split(" (")[0]


def _level_word(factor: str, level: Any, emulated: Mapping[str, str]) -> str:
    text = f"{tick_text(level)}{factor_unit(factor)}"
    return f"{text} (emulated)" if factor == "medium" and str(level) in emulated else text


def _multilevel_rows(t: pd.DataFrame, baseline: Mapping[str, Any],
                     emulated: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each level of a main effect with k > 2 levels against the baseline level: exp(b_l - b_base). With
    sum-to-zero effects of a balanced design every level's estimate has one SE and the difference of two
    has SE * sqrt(2k / (k - 1)) (for k = 2 that is the 2 SE of the two-level rule); the interval keeps the
    effect's own t quantile."""
    f = str(t["factor_1"].iloc[0])
    k = len(t)
    same = lambda x, y: tick_text(x) == tick_text(y)  # noqa: E731
    base = next((r for _, r in t.iterrows() if f in baseline and same(r["level_1"], baseline[f])), t.iloc[0])
    out = []
    for _, r in t.iterrows():
        if same(r["level_1"], base["level_1"]):
            continue
        d = float(r["log_effect"] - base["log_effect"])
        se = float(np.sqrt((r["se"] ** 2 + base["se"] ** 2) / 2) * np.sqrt(2 * k / (k - 1)))
        q = float((np.log(r["ci_hi"]) - r["log_effect"]) / r["se"]) if r["se"] > 0 else float("nan")
        out.append({"label": f"{_factor_name(f)}: {_level_word(f, r['level_1'], emulated)} / "
                             f"{_level_word(f, base['level_1'], emulated)}",
                    "kind": "main", "ratio": float(np.exp(d)), "ci_lo": float(np.exp(d - q * se)),
                    "ci_hi": float(np.exp(d + q * se))})
    return out


def _effect_rows(effects: pd.DataFrame, baseline: Mapping[str, Any] | None = None,
                 emulated: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Between-level ratios for two-level terms from sum-to-zero level effects, each as treatment/baseline
    (the baseline level of a factor: `baseline`'s, else its first level). A main effect's ratio is
    exp(±2 b), an interaction's ratio of ratios exp(±4 g) (how much the first factor's treatment/baseline
    ratio changes from the second factor's baseline to its treatment), CIs scaled alike."""
    baseline, emulated = baseline or {}, emulated or {}
    rows = []

    def sign(t: pd.DataFrame, factor: str, col: str) -> tuple[float, Any, Any]:
        """+1 when the term's second level is the treatment; the treatment and baseline levels."""
        levels = list(dict.fromkeys(t[col]))
        same = lambda x, y: tick_text(x) == tick_text(y)  # noqa: E731  (effects hold levels as text)
        base = next((lv for lv in levels if factor in baseline and same(lv, baseline[factor])), levels[0])
        treat = next(lv for lv in levels if lv is not base)
        return (1.0 if same(treat, levels[-1]) else -1.0), treat, base

    for _term, t in effects.groupby("term", sort=False):
        if t["kind"].iloc[0] == "main" and len(t) > 2:
            rows += _multilevel_rows(t, baseline, emulated)
            continue
        if t["kind"].iloc[0] == "main":
            hi = t.iloc[1]
            f1 = str(hi["factor_1"])
            s1, treat, base = sign(t, f1, "level_1")
            k = 2.0 * s1
            label = f"{_factor_name(f1)}: {_level_word(f1, treat, emulated)} / {_level_word(f1, base, emulated)}"
        else:
            if len(t) != 4:
                continue
            hi = t.iloc[3]
            f1, f2 = str(hi["factor_1"]), str(hi["factor_2"])
            s1, _, _ = sign(t, f1, "level_1")
            s2, _, _ = sign(t, f2, "level_2")
            k = 4.0 * s1 * s2
            label = f"{_factor_name(f1)} × {_factor_name(f2).lower()}"
        half = np.log(hi["ci_hi"]) - hi["log_effect"]
        ends = np.exp(k * (hi["log_effect"] - half)), np.exp(k * (hi["log_effect"] + half))
        rows.append({"label": label, "kind": hi["kind"], "ratio": float(np.exp(k * hi["log_effect"])),
                     "ci_lo": float(min(ends)), "ci_hi": float(max(ends))})
    return pd.DataFrame(rows, columns=["label", "kind", "ratio", "ci_lo", "ci_hi"])


def factor_effects(effects: pd.DataFrame, baseline: Mapping[str, Any] | None = None,
                   emulated: Mapping[str, str] | None = None) -> tuple[Figure, dict[str, Any]]:
    """Forest plot of the factorial model: every main effect and two-way interaction of two-level factors
    as a throughput ratio treatment/baseline with its 95 % CI (log axis), main effects first, each group by
    size (`baseline`: the baseline level per factor; `emulated`: emulated media, labelled so)."""
    rows = _effect_rows(effects, baseline, emulated) if not effects.empty else pd.DataFrame(
        columns=["label", "kind", "ratio", "ci_lo", "ci_hi"])
    if rows.empty:
        raise FigureDataError("factor effects need a factorial model with a two-level factor")
    apply_style()
    rows["order"] = rows["kind"].map({"main": 0}).fillna(1)
    rows["size"] = np.abs(np.log(rows["ratio"]))
    rows = rows.sort_values(["order", "size"], ascending=[True, False], kind="stable").reset_index(drop=True)
    height = max(1.6, 0.17 * len(rows) + 0.6)
    fig, ax = subplots(figsize=(COLUMN_WIDTH_IN, height), layout="constrained")
    palette = sns.color_palette("colorblind")
    y = np.arange(len(rows))[::-1]
    for kind, color, marker in (("main", palette[0], "o"), ("interaction", palette[1], "s")):
        sel = rows["kind"] == kind
        if sel.any():
            r = rows[sel]
            ax.errorbar(r["ratio"], y[sel.to_numpy()], xerr=np.vstack([r["ratio"] - r["ci_lo"],
                                                                     r["ci_hi"] - r["ratio"]]),
                        fmt=marker, color=color, markersize=3.5, capsize=2, elinewidth=0.9,
                        label="main effect" if kind == "main" else "two-way interaction")
    ax.axvline(1.0, color="0.4", linewidth=0.7, linestyle="--")
    ax.set_xscale("log")
    if len(rows):
        lo, hi = float(rows["ci_lo"].min()), float(rows["ci_hi"].max())
        nice = [t for t in (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0) if lo / 1.1 <= t <= hi * 1.1]
        ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(nice or [1.0]))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks(y, rows["label"])
    ax.set_xlabel("Throughput ratio treatment/baseline (log axis)", loc="right")
    ax.grid(axis="x", linewidth=0.4, alpha=0.5, which="major")
    if len(rows):
        fig.legend(frameon=False, fontsize=6, loc="outside upper center", ncols=2)
    else:
        ax.text(0.5, 0.5, "no two-level factor varies in the completed runs", transform=ax.transAxes,
                ha="center", va="center", fontsize=7)
    sns.despine(fig)
    return fig, {"rows": rows}


# ------------------------------------------------------------------------------------ helpers


def medium_label(medium: Any, emulated: Any) -> str:
    emu = "" if emulated is None or (isinstance(emulated, float) and np.isnan(emulated)) else str(emulated)
    return f"{medium} (emulated {emu})" if emu else str(medium)


def tick_text(v: Any) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def ci_yerr(df: pd.DataFrame, mid: str = "mean") -> np.ndarray:
    return np.nan_to_num(np.vstack([df[mid] - df["ci_lo"], df["ci_hi"] - df[mid]]).clip(min=0))


def require_columns(df: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if df.empty or missing:
        raise FigureDataError(f"{what}: no data" + (f" (missing columns {', '.join(missing)})" if missing else ""))


def _varies(df: pd.DataFrame, col: str) -> bool:
    return col in df.columns and df[col].nunique(dropna=False) > 1


def _short(v: float) -> str:
    """A number in a few significant digits, without exponents for the sizes figures show."""
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def log_steps(lo: float, hi: float, slack: float) -> list[float]:
    """The 1-2-5 values (0.1, 0.2, 0.5, 1, 2, ...) from lo / slack to hi * slack: plain labels of a log axis."""
    return [t for e in range(-4, 6) for m in (1, 2, 5) if lo / slack <= (t := m * 10.0**e) <= hi * slack]


def _log_ratio_axis(ax: Axes, values: np.ndarray) -> None:
    """A log x axis with a few plain tick labels (1-2-5 steps) spanning `values`."""
    ax.set_xscale("log")
    v = values[np.isfinite(values) & (values > 0)]
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.5, 2.0)
    nice = log_steps(lo, hi, 1.05)
    if len(nice) > 4:
        nice = [t for t in nice if f"{t:g}".lstrip("0.").startswith("1")] or nice
    most = 4 if hi / lo < 1e3 else 3  # powers of ten are wider labels: fewer fit a panel
    while len(nice) > most:  # thin, keeping 1
        keep = nice[::2] if 1.0 in nice[::2] else nice[1::2]
        nice = keep if len(keep) < len(nice) else nice[:most]
    if len(nice) < 2 and v.size and hi > lo * 1.01:  # a narrow span (0.85-1.02): one 1-2-5 tick at most
        fine = matplotlib.ticker.MaxNLocator(nbins=3, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        plain = sorted({float(f"{t:.6g}") for t in fine if lo / 1.05 <= t <= hi * 1.05 and t > 0})
        nice = plain if len(plain) >= 2 else nice
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(nice or [1.0]))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: _ratio_tick(x)))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _ratio_tick(x: float) -> str:
    """A ratio tick: plain between 0.05 and 50, else a power of ten (10^4), so wide axes stay short."""
    if 0.05 <= x <= 50 or x <= 0:
        return f"{x:g}"
    e = np.log10(x)
    return f"$10^{{{round(e)}}}$" if abs(e - round(e)) < 1e-9 else f"{x:.0e}"


# ------------------------------------------------------------------------------------ figure 1


def zero_based(ax: Axes, headroom: float = 0.08) -> None:
    """A y axis from 0 with room above the highest mark: pinning the bottom at 0 keeps the margin matplotlib
    computed from the data's *range*, so values close together (8.4 and 8.7) would sit on the top edge."""
    top = float(ax.dataLim.y1)
    ax.set_ylim(bottom=0)
    if np.isfinite(top) and top > 0:
        ax.set_ylim(0, max(ax.get_ylim()[1], top * (1 + headroom)))


def _finish_tps_p95(fig: Figure, ax: Axes, ax2: Axes, xlabel: str, legend_size: float) -> None:
    """Labels, zero-based y axes, grid, legend and spines of a throughput-over-p95 pair of panels."""
    ax.set_ylabel("Throughput (transactions/s)")
    ax.set_ylim(bottom=0)
    ax2.set_ylabel("p95 latency (ms)")
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel(xlabel)
    for a in (ax, ax2):
        a.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.legend(frameon=False, fontsize=legend_size)
    sns.despine(fig)


def throughput_vs_threads(cells: pd.DataFrame, runs: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Seed 001's chart: throughput (cell mean with its 95 % CI) and p95 latency (histograms merged
    across repetitions; faint dots: each repetition's p95) against client threads, one line per cache
    level (and per other varied storage factor)."""
    require_columns(cells, ("threads", "mean", "ci_lo", "ci_hi"), "throughput vs threads")
    if cells["threads"].nunique() < 2:
        raise FigureDataError("throughput vs threads needs two or more client-thread levels")
    apply_style()
    series = [k for k in ("cache_pct", "engine", "medium", "block_size", "compression") if _varies(cells, k)]
    fig, (ax, ax2) = subplots(2, 1, sharex=True, figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * 1.1),
                                  layout="constrained")
    palette = sns.color_palette("colorblind")
    groups = list(cells.groupby(series, sort=True)) if series else [((), cells)]
    runs_only = shows_runs(cells["n"]) if "n" in cells else False
    for i, (_, g) in enumerate(groups):
        g = g.sort_values("threads", kind="stable")
        first = g.iloc[0]
        parts = [f"cache {tick_text(first['cache_pct'])} %" if k == "cache_pct" else
                 medium_label(first[k], first.get("emulated")) if k == "medium" else str(first[k])
                 for k in series]
        color, marker = palette[i % len(palette)], MARKERS[i % len(MARKERS)]
        if runs_only:  # fewer than MIN_RUNS_FOR_INTERVAL runs per cell: the runs, not a t interval
            ax.plot(g["threads"], g["mean"], color=color, marker=marker, markersize=3.5, linewidth=1.1,
                    markerfacecolor="none", label=", ".join(parts) or "all")
            sel = runs[runs["cell_id"].isin(set(g["cell_id"]))] if "tps" in runs else runs.iloc[0:0]
            ax.scatter(sel["threads"], sel["tps"], color=color, marker=marker, s=9, alpha=0.8, linewidths=0)
        else:
            ax.errorbar(g["threads"], g["mean"], yerr=ci_yerr(g), color=color, marker=marker, markersize=3.5,
                        capsize=2, linewidth=1.1, elinewidth=0.9, label=", ".join(parts) or "all")
        if "p95_ms" in g and g["p95_ms"].notna().any():
            ax2.plot(g["threads"], g["p95_ms"], color=color, marker=marker, markersize=3.5, linewidth=1.1)
        if "p95_ms" in runs.columns:
            sel = runs[runs["cell_id"].isin(set(g["cell_id"]))]
            ax2.scatter(sel["threads"], sel["p95_ms"], color=color, marker=marker, s=7, alpha=0.3, linewidths=0)
    levels = sorted(cells["threads"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    _finish_tps_p95(fig, ax, ax2, "Client threads", legend_size=6)
    return fig, {"series": series, "threads": [int(t) for t in levels]}


# ------------------------------------------------------------------------------------ figure 5


def throughput_over_time(intervals: pd.DataFrame, steady: pd.DataFrame, cells: list[str],
                         labels: dict[str, str] | None = None,
                         runs: pd.DataFrame | None = None) -> tuple[Figure, dict[str, Any]]:
    """Seed 000's per-second chart: throughput and p95 latency (sysbench's per-second 95th percentile)
    of every run of the chosen cells over the measured window: one colour per cell, one line style per run
    (campaign and repetition from `runs` when given), both in the legend; a cross marks where the
    steady-state test starts a run's steady window when it trimmed any (in the legend when drawn)."""
    require_columns(intervals, ("run_id", "cell_id", "t_s", "tps"), "throughput over time")
    sel = intervals[intervals["cell_id"].isin(cells)]
    if sel.empty:
        raise FigureDataError(f"throughput over time: no per-second rows for {', '.join(cells)}")
    apply_style()
    shown = [c for c in cells if c in set(sel["cell_id"])]
    n_runs = sel[sel["cell_id"].isin(shown)].groupby("cell_id")["run_id"].nunique().max()
    cols = 2 if n_runs <= 8 else 3  # the runs' legend below the panels: its rows take the panels' height
    rows = -(-(int(n_runs) + 1) // cols) + len(shown)  # style entries (and the cross) and the cells' legend
    fig, (ax, ax2) = subplots(2, 1, sharex=True, layout="constrained",
                              figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * 0.95 + 0.11 * rows))
    palette = sns.color_palette("colorblind")
    trim = dict(zip(steady["run_id"], steady["trim_s"])) if "trim_s" in steady else {}
    cell_handles: list[Line2D] = []
    run_styles: dict[str, Any] = {}
    crosses = 0
    for i, cid in enumerate(shown):
        color = palette[i % len(palette)]
        cell_handles.append(Line2D([], [], color=color, linewidth=1.1, label=(labels or {}).get(cid, cid)))
        for j, (rid, g) in enumerate(sel[sel["cell_id"] == cid].groupby("run_id", sort=True)):
            g = g.sort_values("t_s", kind="stable")
            name = _run_name(rid, j, runs)  # the same campaign and repetition: the same style in every cell
            ls = run_styles.setdefault(name, run_style(len(run_styles)))
            ax.plot(g["t_s"], g["tps"], color=color, linewidth=0.9, **ls)
            if "lat_ms" in g:
                ax2.plot(g["t_s"], g["lat_ms"], color=color, linewidth=0.9, **ls)
            t0 = trim.get(rid)
            if t0 is not None and np.isfinite(t0) and t0 > 0:
                at = g.loc[(g["t_s"] - t0).abs().idxmin()]
                ax.plot([at["t_s"]], [at["tps"]], marker="x", color=color, markersize=4, linewidth=0)
                crosses += 1
    style_handles = [Line2D([], [], color="0.3", linewidth=0.9, label=name, **{**ls, "markevery": None})
                     for name, ls in run_styles.items()]
    if crosses:
        style_handles.append(Line2D([], [], color="0.3", marker="x", markersize=4, linewidth=0,
                                    label="steady window starts"))
    ax.set_ylabel("Throughput (transactions/s)")
    ax.set_ylim(bottom=0)
    ax2.set_ylabel("p95 latency (ms)")
    ax2.set_ylim(bottom=0)
    ax2.set_xlabel("Time into the measured window (s)")
    for a in (ax, ax2):
        a.grid(axis="y", linewidth=0.4, alpha=0.5)
    fig.legend(handles=cell_handles, frameon=False, fontsize=5.5, loc="outside upper center", ncols=1)
    fig.legend(handles=style_handles, frameon=False, fontsize=5.5, loc="outside lower center", ncols=cols)
    sns.despine(fig)
    return fig, {"cells": shown, "crosses": crosses}


def run_style(k: int) -> dict[str, Any]:
    """The k-th run's line: the line styles first, then each of them again with a sparse marker, so that
    no two runs in a legend look alike however many campaigns there are (up to 64 runs)."""
    style: dict[str, Any] = {"linestyle": LINESTYLES[k % len(LINESTYLES)]}
    if k >= len(LINESTYLES):
        style |= {"marker": MARKERS[(k // len(LINESTYLES) - 1) % len(MARKERS)], "markersize": 2.5,
                  "markevery": 6, "markerfacecolor": "none"}
    return style


def _run_name(run_id: str, j: int, runs: pd.DataFrame | None) -> str:
    """A run as the legend names it: its campaign and repetition when the runs table has them."""
    if runs is not None and {"run_id", "repetition"} <= set(runs.columns):
        r = runs[runs["run_id"] == run_id]
        if not r.empty:
            rep = int(r["repetition"].iloc[0])
            camp = r["campaign"].iloc[0] if "campaign" in r else None
            return f"campaign {int(camp)}, rep. {rep}" if camp is not None and pd.notna(camp) else f"rep. {rep}"
    return f"run {j + 1}"


# ------------------------------------------------------------------------------------ figure 6


EFFICIENCY_LABELS = {"mysqld_cpu_us_per_txn": "mysqld CPU (µs/txn)", "host_cpu_us_per_txn": "host CPU (µs/txn)",
                     "read_kb_per_txn": "KiB read/txn", "write_kb_per_txn": "KiB written/txn",
                     "read_ios_per_txn": "reads/txn", "write_ios_per_txn": "writes/txn"}


def efficiency_vs_baseline(table: pd.DataFrame, baseline: str,
                           emulated: Mapping[str, str] | None = None) -> tuple[Figure, dict[str, Any]]:
    """Hardware cost per transaction of every cell relative to the baseline cell: one panel per metric,
    ratio with its 95 % CI on a log axis (``table``: label, metric, ratio, ci_lo, ci_hi, baseline_mean, and
    ``n``/``run_ratios`` for the runs drawn instead of intervals when a cell has fewer than
    :data:`MIN_RUNS_FOR_INTERVAL`). The baseline is the reference, drawn at 1 without an interval; a cell a
    panel has no value for says "not measured" (tmpfs has no block device to count KiB on); emulated media
    are named so under the panels."""
    require_columns(table, ("label", "metric", "ratio", "ci_lo", "ci_hi", "baseline_mean"), "efficiency")
    metrics = [m for m in EFFICIENCY_LABELS if m in set(table["metric"])]
    if not metrics:
        raise FigureDataError("efficiency: none of the per-transaction metrics was measured")
    apply_style()
    labels = list(dict.fromkeys(table["label"]))
    runs_only = shows_runs(table["n"]) if "n" in table else False
    height = max(1.8, 0.15 * len(labels) + 1.0)
    fig, axes = subplots(1, len(metrics), sharey=True, figsize=(TEXT_WIDTH_IN, height), layout="constrained",
                             squeeze=False)
    palette = sns.color_palette("colorblind")
    y = {lab: len(labels) - 1 - i for i, lab in enumerate(labels)}
    is_base = table["label"].str.endswith("(baseline)")
    for k, (ax, m) in enumerate(zip(axes[0], metrics)):
        color = palette[k % len(palette)]
        g = table[(table["metric"] == m) & table["ratio"].gt(0) & ~is_base]
        ys = g["label"].map(y).to_numpy()
        lo = np.where(g["ci_lo"] > 0, g["ci_lo"], g["ratio"])
        if runs_only and "run_ratios" in g:
            for yy, rr in zip(ys, g["run_ratios"]):
                rr = np.asarray(rr, dtype=float)
                ax.plot(rr[rr > 0], np.full(int((rr > 0).sum()), yy), "o", color=color, markersize=2.5, alpha=0.8)
            ax.plot(g["ratio"], ys, "|", color=color, markersize=6)
        else:
            err = np.nan_to_num(np.vstack([g["ratio"] - lo, g["ci_hi"] - g["ratio"]]).clip(min=0))
            ax.errorbar(g["ratio"], ys, xerr=err, fmt="o", color=color, markersize=3, capsize=1.5, elinewidth=0.8)
        ax.plot([1.0], [y[labels[[lab.endswith("(baseline)") for lab in labels].index(True)]]]
                if is_base.any() else [], "o", color=color, markersize=3)
        ax.axvline(1.0, color="0.4", linewidth=0.7, linestyle="--")
        drawn = set(g["label"]) | set(table.loc[is_base, "label"])
        for lab in labels:
            if lab not in drawn:
                ax.text(0.5, y[lab], "not measured", transform=ax.get_yaxis_transform(), ha="center",
                        va="center", fontsize=5, color="0.45", style="italic",
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5})
        ax.margins(x=0.1)  # of the log span (twice matplotlib's): no marker on the spine, ticks as spaced
        _log_ratio_axis(ax, np.concatenate([lo, g["ci_hi"].fillna(g["ratio"]).to_numpy(), [1.0]]))
        base = float(table.loc[table["metric"] == m, "baseline_mean"].iloc[0])
        ax.set_title(f"{EFFICIENCY_LABELS[m]}\nbaseline {_short(base)}", fontsize=7)
        ax.grid(axis="x", linewidth=0.4, alpha=0.5, which="major")
    axes[0][0].set_yticks(list(y.values()), list(y.keys()))
    axes[0][0].set_ylim(-0.6, len(labels) - 0.4)  # half a row's room at each end, however few the rows
    note = "; ".join(f"{med} is emulated ({dev})" for med, dev in sorted((emulated or {}).items())
                     if any(med in lab.split() for lab in labels))
    fig.supxlabel(f"Ratio to the baseline cell ({baseline}), log axis" + (f"; {note}" if note else ""),
                  fontsize=7)
    if runs_only:  # what the two marks are: no interval with fewer than MIN_RUNS_FOR_INTERVAL runs
        fig.legend(handles=[Line2D([], [], color="0.3", marker="o", markersize=2.5, linewidth=0, label="a run"),
                            Line2D([], [], color="0.3", marker="|", markersize=6, linewidth=0,
                                   label="ratio of geometric means")],
                   frameon=False, fontsize=6, ncols=2, loc="outside upper center")
    sns.despine(fig)
    return fig, {"metrics": metrics, "cells": labels, "runs_only": runs_only}


# ------------------------------------------------------------------------------------ exploration


def metric_by_factor(runs: pd.DataFrame, x: str, metric: str = "tps", hue: str | None = None,
                     ax: Axes | None = None) -> tuple[Figure, dict[str, Any]]:
    """Any metric of the runs table against any factor: mean per level with its Student-t 95 % CI, one
    series per `hue` level, every run as a faint dot (the exploration notebook's plot)."""
    from dbmatrix.analyse.stats import t_mean_ci

    for col in (x, metric, *([hue] if hue else [])):
        if col not in runs.columns:
            raise FigureDataError(f"{col!r} is not a column of the runs; columns: {', '.join(runs.columns)}")
    data = runs.assign(_y=pd.to_numeric(runs[metric], errors="coerce")).dropna(subset=["_y"])
    if data.empty:
        raise FigureDataError(f"{metric}: no values in the selected runs")
    apply_style()
    if ax is None:
        fig, ax = subplots(figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * 0.75), layout="constrained")
    else:
        root = ax.get_figure(root=True)
        if root is None:
            raise ValueError("metric_by_factor: the axes belong to no figure")
        fig = root
    levels = sorted(data[x].dropna().unique().tolist(), key=lambda v: (isinstance(v, str), v))
    hues = sorted(data[hue].dropna().unique().tolist(), key=str) if hue else [None]
    palette = sns.color_palette("colorblind")
    width = 0.4 / max(1, len(hues))
    rows = []
    for j, h in enumerate(hues):
        g = data if h is None else data[data[hue] == h]
        pts = []
        for i, lv in enumerate(levels):
            v = g.loc[g[x] == lv, "_y"].to_numpy(dtype=float)
            if v.size == 0:
                continue
            lo, hi = t_mean_ci(v) if v.size > 1 else (np.nan, np.nan)
            xi = i + (j - (len(hues) - 1) / 2) * width
            pts.append((xi, v.mean(), lo, hi))
            ax.scatter(np.full(v.size, xi), v, color=palette[j % len(palette)], s=7, alpha=0.3, linewidths=0)
            rows.append({x: lv, **({hue: h} if hue else {}), "n": v.size, "mean": v.mean(), "ci_lo": lo, "ci_hi": hi})
        if pts:
            p = pd.DataFrame(pts, columns=["x", "mean", "ci_lo", "ci_hi"])
            ax.errorbar(p["x"], p["mean"], yerr=ci_yerr(p), color=palette[j % len(palette)],
                        marker=MARKERS[j % len(MARKERS)], markersize=3.5, capsize=2, linewidth=1.0,
                        label=None if h is None else f"{hue}={h}")
    ax.set_xticks(range(len(levels)), [tick_text(v) for v in levels])
    ax.set_xlabel(x)
    ax.set_ylabel(metric)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    if hue:
        ax.legend(frameon=False, fontsize=6)
    sns.despine(fig)
    return fig, {"summary": pd.DataFrame(rows)}
