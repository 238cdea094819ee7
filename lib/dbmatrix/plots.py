"""Publication figures: one style, one function per figure, stable bytes.

Sizes come from the paper's column width; fonts are embedded as Type 42; the PDF carries the git
commit and a hash of the data it was drawn from, and no creation date, so the same data gives the
same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

COLUMN_WIDTH_IN = 3.39  # \columnwidth of paper/main.tex (two-column article, 10pt)
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def apply_style() -> None:
    sns.set_theme(context="paper", style="ticks", palette="colorblind")
    plt.rcParams.update({
        "pdf.fonttype": 42, "ps.fonttype": 42, "font.size": 8, "axes.labelsize": 8,
        "legend.fontsize": 7, "xtick.labelsize": 7, "ytick.labelsize": 7, "axes.titlesize": 8,
        "figure.dpi": 150, "savefig.dpi": 300, "svg.hashsalt": "dbmatrix", "path.simplify": False,
    })


def data_hash(*frames: pd.DataFrame) -> str:
    h = hashlib.sha256()
    for f in frames:
        h.update(f.to_csv(index=False).encode())
    return h.hexdigest()[:16]


def save_figure(fig: plt.Figure, out_dir: Path, stem: str, *, commit: str | None, data_sha: str,
                title: str) -> list[Path]:
    """Write `stem`.pdf and `stem`.png with provenance and no timestamps."""
    out_dir.mkdir(parents=True, exist_ok=True)
    pdf, png = out_dir / f"{stem}.pdf", out_dir / f"{stem}.png"
    fig.savefig(pdf, metadata={
        "CreationDate": None, "ModDate": None, "Title": title,
        "Subject": f"dbmatrix data sha256:{data_sha}", "Keywords": f"git:{commit or 'unknown'}",
        "Creator": "dbmatrix",
    })
    fig.savefig(png, metadata={"Software": "dbmatrix", "Description": f"git:{commit or 'unknown'} "
                                                                       f"data:{data_sha}"})
    plt.close(fig)
    return [pdf, png]


def _series_label(row: pd.Series, keys: list[str]) -> str:
    parts = []
    for k in keys:
        v = row[k]
        parts.append({"engine": str(v), "block_size": f"{v} pages", "compression": f"{v}",
                      "medium": str(v), "threads": f"{v} thr"}.get(k, str(v)))
    return ", ".join(parts) if parts else "all"


def throughput_vs_cache(cells: pd.DataFrame, runs: pd.DataFrame) -> tuple[plt.Figure, dict[str, Any]]:
    """Throughput per cache level: each cell's mean with its 95 % CI bar (cells of a series side by side),
    each repetition as a faint dot, and a line through the series' mean of cell means per level.

    A series is a combination of engine and medium (the seeds' lines); other varied factors (block size,
    compression, ...) are cells within a series, so in a fractional design the line is the marginal
    mean over them. Emulated media are labelled as such.
    """
    apply_style()
    series = [k for k in ("engine", "medium", "threads") if k in cells and cells[k].nunique() > 1]
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * 0.75), layout="constrained")
    groups = list(cells.groupby(series, sort=True)) if series else [((), cells)]
    palette = sns.color_palette("colorblind")
    levels = sorted(cells["cache_pct"].unique())
    span = (max(levels) - min(levels)) or 1.0
    width = 0.05 * span
    for i, (_, g) in enumerate(groups):
        label = _series_label(g.iloc[0], series)
        if "medium" in series and isinstance(g.iloc[0].get("emulated"), str) and g.iloc[0]["emulated"]:
            label += f" (emulated {g.iloc[0]['emulated']})"
        color, marker = palette[i % len(palette)], MARKERS[i % len(MARKERS)]
        offset = (i - (len(groups) - 1) / 2) * width
        g = g.sort_values(["cache_pct", "cell_id"])
        for lvl, gl in g.groupby("cache_pct", sort=True):
            xs = lvl + offset + np.linspace(-0.3, 0.3, len(gl)) * width if len(gl) > 1 else \
                np.array([lvl + offset])
            yerr = np.vstack([gl["mean"] - gl["ci_lo"], gl["ci_hi"] - gl["mean"]])
            ax.errorbar(xs, gl["mean"], yerr=np.nan_to_num(yerr), color=color, marker=marker, markersize=3.5,
                        capsize=2, linewidth=0, elinewidth=0.9)
            for x, cid in zip(xs, gl["cell_id"]):
                sel = runs.loc[runs["cell_id"] == cid, "tps"]
                ax.scatter(np.full(len(sel), x), sel, color=color, marker=marker, s=7, alpha=0.3,
                           linewidths=0, zorder=1)
        line = g.groupby("cache_pct", sort=True)["mean"].mean()
        ax.plot(line.index + offset, line.to_numpy(), color=color, linewidth=1.1, label=label)
    ax.set_xlabel("Cache size (% of measured data size)")
    ax.set_ylabel("Throughput (transactions/s)")
    ax.set_ylim(bottom=0)
    ax.set_xticks(levels)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    if series:
        ax.legend(frameon=False, fontsize=6)
    sns.despine(fig)
    return fig, {"series": series}


def _effect_rows(effects: pd.DataFrame) -> pd.DataFrame:
    """Between-level ratios for two-level terms from sum-to-zero level effects: a main effect's
    level2/level1 ratio is exp(2 b), an interaction's ratio of ratios exp(4 g), CIs scaled alike."""
    rows = []
    for term, t in effects.groupby("term", sort=False):
        if t["kind"].iloc[0] == "main":
            if len(t) != 2:
                continue
            lo_lvl, hi = t.iloc[0], t.iloc[1]
            k = 2.0
            label = f"{hi['factor_1']}: {hi['level_1']} / {lo_lvl['level_1']}"
        else:
            if len(t) != 4:
                continue
            hi = t.iloc[3]
            k = 4.0
            label = f"{hi['factor_1']} x {hi['factor_2']} (ratio of ratios)"
        half = np.log(hi["ci_hi"]) - hi["log_effect"]
        rows.append({"label": label, "kind": hi["kind"], "ratio": float(np.exp(k * hi["log_effect"])),
                     "ci_lo": float(np.exp(k * (hi["log_effect"] - half))),
                     "ci_hi": float(np.exp(k * (hi["log_effect"] + half)))})
    return pd.DataFrame(rows, columns=["label", "kind", "ratio", "ci_lo", "ci_hi"])


def factor_effects(effects: pd.DataFrame) -> tuple[plt.Figure, dict[str, Any]]:
    """Forest plot of the factorial model: every main effect and two-way interaction of two-level factors
    as a throughput ratio with its 95 % CI (log axis), main effects first, each group by size."""
    apply_style()
    rows = _effect_rows(effects) if not effects.empty else pd.DataFrame(
        columns=["label", "kind", "ratio", "ci_lo", "ci_hi"])
    rows["order"] = rows["kind"].map({"main": 0}).fillna(1)
    rows["size"] = np.abs(np.log(rows["ratio"]))
    rows = rows.sort_values(["order", "size"], ascending=[True, False], kind="stable").reset_index(drop=True)
    height = max(1.6, 0.17 * len(rows) + 0.6)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, height), layout="constrained")
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
    ax.set_yticks(y, rows["label"].str.replace(" (ratio of ratios)", "", regex=False))
    ax.set_xlabel("Throughput ratio (log axis)")
    ax.grid(axis="x", linewidth=0.4, alpha=0.5, which="major")
    if len(rows):
        fig.legend(frameon=False, fontsize=6, loc="outside upper center", ncols=2)
    else:
        ax.text(0.5, 0.5, "no two-level factor varies in the completed runs", transform=ax.transAxes,
                ha="center", va="center", fontsize=7)
    sns.despine(fig)
    return fig, {"rows": rows}
