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
    """Mean throughput per cache level with 95 % bootstrap CI bars, and each repetition as a dot.

    One line per combination of the other varied factors (engine, block size, ...).
    """
    apply_style()
    other = [k for k in ("engine", "block_size", "compression", "medium", "threads")
             if k in cells and cells[k].nunique() > 1]
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * 0.72), layout="constrained")
    groups = cells.groupby(other, sort=True) if other else [((), cells)]
    palette = sns.color_palette("colorblind")
    for i, (_, g) in enumerate(groups):
        g = g.sort_values("cache_pct")
        label = _series_label(g.iloc[0], other)
        color, marker = palette[i % len(palette)], MARKERS[i % len(MARKERS)]
        yerr = np.vstack([g["mean"] - g["ci_lo"], g["ci_hi"] - g["mean"]])
        ax.errorbar(g["cache_pct"], g["mean"], yerr=np.nan_to_num(yerr), color=color, marker=marker,
                    markersize=4, capsize=2.5, linewidth=1.2, label=label)
        sel = runs.merge(g[["cell_id"]], on="cell_id")
        ax.scatter(sel["cache_pct"], sel["tps"], color=color, marker=marker, s=9, alpha=0.35,
                   linewidths=0, zorder=1)
    ax.set_xlabel("Cache size (% of measured data size)")
    ax.set_ylabel("Throughput (transactions/s)")
    ax.set_ylim(bottom=0)
    levels = sorted(cells["cache_pct"].unique())
    ax.set_xticks(levels)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    if other:
        ax.legend(frameon=False)
    sns.despine(fig)
    return fig, {"series": other}
