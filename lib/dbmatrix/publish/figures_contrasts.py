"""The block-size and compression figures (seed 003's slides 13-14), drawn along the factors that interact
with their contrast.

Their tables (:func:`dbmatrix.analyse.figure_data.block_size_table`, ``compression_tables``) hold a column
for every factor whose interaction with the contrast is significant
(:func:`dbmatrix.analyse.interactions.split_factors`); these figures draw each such column, never a mean over
it: the block-size ratio gets one panel per compression and one series per medium, the compression panels
one point per medium x compression. A medium keeps its colour and marker of every other figure
(:func:`dbmatrix.publish.figures_cache.medium_styles`); compression reads as the marker's fill (filled: no
compression, hollow: compressed) wherever medium takes the colour.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from dbmatrix.analyse.figure_data import FigureDataError
from dbmatrix.analyse.stats import level_key
from dbmatrix.publish.figures import (
    COLUMN_WIDTH_IN,
    MARKERS,
    TEXT_WIDTH_IN,
    apply_style,
    ci_yerr,
    medium_label,
    require_columns,
    subplots,
    tick_text,
    zero_based,
)
from dbmatrix.publish.figures_cache import medium_styles

#: columns of a figure table that are not a factor's
_VALUES = {"estimate", "mean", "ci_lo", "ci_hi", "basis", "emulated", "_x"}


def _compression_word(v: Any) -> str:
    return "no compression" if str(v) == "none" else str(v)


def _styles(table: pd.DataFrame, keys: list[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Colour, marker, fill and legend label per series key (a tuple of `keys`' levels): a medium's own
    colour and marker when the medium is among the keys, compression as the fill, else the palette. When
    another factor varies beside the medium (the engine, where the medium interacts with the block size), the
    medium keeps its colour and that factor's level takes the marker: two engines on one medium never look
    alike."""
    series = list(dict.fromkeys(table[keys].itertuples(index=False, name=None))) if keys else [()]
    first = {k: list(dict.fromkeys(table[k])) for k in keys}

    def order(key: tuple[Any, ...]) -> tuple[Any, ...]:  # media by name, "none" before a compression
        return tuple((0, str(v)) if k == "medium" else (int(str(v) != "none"), "") if k == "compression"
                     else (first[k].index(v), "") for k, v in zip(keys, key))

    series = sorted(series, key=order)
    palette = sns.color_palette("colorblind")
    media = medium_styles(table["medium"]) if "medium" in keys else {}
    emu = (table.groupby("medium", sort=False)["emulated"].first().to_dict()
           if "medium" in keys and "emulated" in table else {})
    others = [k for k in keys if k not in ("medium", "compression") and len(first[k]) > 1]
    combos = list(dict.fromkeys(tuple(dict(zip(keys, key))[k] for k in others) for key in series))
    out = {}
    for i, key in enumerate(series):
        lv = dict(zip(keys, key))
        if "medium" in lv:
            color, marker = media[lv["medium"]]
            if others:
                marker = MARKERS[combos.index(tuple(lv[k] for k in others)) % len(MARKERS)]
        else:
            color, marker = palette[i % len(palette)], MARKERS[i % len(MARKERS)]
        hollow = "medium" in lv and "compression" in lv and str(lv["compression"]) != "none"
        words = [medium_label(lv[k], emu.get(lv[k])) if k == "medium" else
                 _compression_word(lv[k]) if k == "compression" else str(lv[k]) for k in keys]
        out[key] = {"color": color, "marker": marker, "mfc": "white" if hollow else color,
                    "label": ", ".join(words) or "all"}
    return out


def block_size_ratios(table: pd.DataFrame, *, a: str = "16k", b: str = "4k",
                      claimed: tuple[float, float] | None = None,
                      claimed_at: Any = None, claimed_label: str = "seed 003 claim") -> tuple[Figure, dict[str, Any]]:
    """Seed 003 slide 13: throughput ratio of block sizes a/b (treatment/baseline) per cache level with its
    95 % CI (``table``: engine, cache_pct, estimate, ci_lo, ci_hi; compression and any factor that interacts
    with the block size as further columns). One series per engine x compression; with a further factor
    (the medium), one panel per compression and one series per level of it. The shaded band is the seed's
    claim in the a/b direction, drawn only over the cache level `claimed_at` where the seed's condition
    holds (all levels when None)."""
    require_columns(table, ("engine", "cache_pct", "estimate", "ci_lo", "ci_hi"), "block size ratios")
    apply_style()
    extras = [c for c in table.columns if c not in _VALUES and c not in ("engine", "compression", "cache_pct")]
    engines = list(dict.fromkeys(table["engine"]))
    facet = "compression" if extras and "compression" in table else None
    panels = list(dict.fromkeys(table[facet])) if facet else [None]
    keys = [k for k in ("engine", *(["compression"] if "compression" in table and not facet else []), *extras)
            if k != "engine" or len(engines) > 1 or (not extras and "compression" not in table)]
    styles = _styles(table, keys)
    fig, axes = subplots(1, len(panels), figsize=(COLUMN_WIDTH_IN, COLUMN_WIDTH_IN * (0.7 if facet is None
                                                                                        else 0.8)),
                         layout="constrained", sharey=True, squeeze=False)
    levels = sorted(table["cache_pct"].unique())
    for ax, panel in zip(axes[0], panels):
        t = table if facet is None else table[table[facet] == panel]
        if claimed:
            at = [levels.index(v) for v in levels if claimed_at is None or level_key(v) == level_key(claimed_at)]
            for k, col in enumerate(at):
                ax.fill_between([col - 0.45, col + 0.45], *claimed, color="0.88", linewidth=0, zorder=0,
                                label=claimed_label if k == 0 and ax is axes[0][0] else None)
        for i, key in enumerate(styles):
            g = t[(t[keys].apply(tuple, axis=1) == key).to_numpy()] if keys else t
            g = g.sort_values("cache_pct", kind="stable")
            if g.empty:
                continue
            s = styles[key]
            x = np.array([levels.index(v) for v in g["cache_pct"]]) + (i - (len(styles) - 1) / 2) * 0.12
            ax.errorbar(x, g["estimate"], yerr=ci_yerr(g, "estimate"), fmt=s["marker"], color=s["color"],
                        markerfacecolor=s["mfc"], markersize=4, capsize=2, elinewidth=0.9,
                        label=s["label"] if ax is axes[0][0] else None)
        ax.axhline(1.0, color="0.4", linewidth=0.7, linestyle="--")
        ax.set_xticks(range(len(levels)), [f"{tick_text(v)} %" for v in levels])
        ax.set_xlim(-0.5, len(levels) - 0.5)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
        if facet:
            ax.set_title(_compression_word(panel), loc="left", fontsize=7)
    if facet:
        fig.supxlabel("Cache size (% of measured data size)", fontsize=8)
        axes[0][0].set_ylabel(f"Throughput ratio {a} / {b}")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, frameon=False, fontsize=5.5, loc="outside upper center", ncols=1)
    else:
        axes[0][0].set_xlabel("Cache size (% of measured data size)")
        axes[0][0].set_ylabel(f"Throughput ratio {a} / {b}")
        axes[0][0].legend(frameon=False, fontsize=6)
    sns.despine(fig)
    return fig, {"engines": engines, "levels": levels, "series": list(styles), "panels": panels}


def _dodged(ax: Axes, table: pd.DataFrame, x_levels: list[Any], keys: list[str],
            styles: dict[tuple[Any, ...], dict[str, Any]], *, with_ci: bool = True) -> None:
    """One point (with its CI) per series key at each x group ``_x``, side by side."""
    width = 0.6 / max(1, len(styles))
    for j, key in enumerate(styles):
        g = table[(table[keys].apply(tuple, axis=1) == key).to_numpy()] if keys else table
        if g.empty:
            continue
        s = styles[key]
        xs = np.array([x_levels.index(v) for v in g["_x"]], dtype=float) + (j - (len(styles) - 1) / 2) * width
        kw = {"color": s["color"], "marker": s["marker"], "markerfacecolor": s["mfc"], "markersize": 4,
              "linewidth": 0, "label": s["label"]}
        if with_ci:
            ax.errorbar(xs, g["mean"], yerr=ci_yerr(g, "mean"), capsize=2, elinewidth=0.9, **kw)
        else:
            ax.plot(xs, g["mean"], **kw)
    ax.set_xticks(range(len(x_levels)), [str(v) for v in x_levels])
    ax.set_xlim(-0.5, len(x_levels) - 0.5)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)


def _groups(table: pd.DataFrame, engines: list[Any]) -> pd.DataFrame:
    """`table` with ``_x``, the label of its engine x block size x cache level (those it has and varies)."""
    if table.empty:
        return table.assign(_x=pd.Series(dtype=object))
    parts = []
    for _, r in table.iterrows():
        words = [str(r["engine"])] if len(engines) > 1 else []
        if "block_size" in table:
            words.append(str(r["block_size"]))
        if "cache_pct" in table:
            words.append(f"{tick_text(r['cache_pct'])} %")
        parts.append("\n".join(words) or str(r["engine"]))
    return table.assign(_x=parts)


def compression_panels(tps: pd.DataFrame, sizes: pd.DataFrame,
                       writes: pd.DataFrame) -> tuple[Figure, dict[str, Any]]:
    """Seed 003 slide 14, compression side by side per engine x block size x cache level (those the tables
    hold; block size and cache interact with compression, so none is averaged over), and per level of any
    further factor the tables hold (the medium: its colour and marker, compression the fill): throughput
    and KiB written per transaction (geometric means with 95 % CIs), and the on-disk size of each dataset
    (marker: block size, fill: compression; measured once, no interval)."""
    require_columns(tps, ("engine", "compression", "mean", "ci_lo", "ci_hi"), "compression throughput")
    apply_style()
    engines = list(dict.fromkeys(tps["engine"]))
    comps = list(dict.fromkeys(tps["compression"]))
    extras = [c for c in tps.columns if c not in _VALUES and c not in ("engine", "compression", "block_size",
                                                                       "cache_pct")]
    keys = [*extras, "compression"]
    wide = "block_size" in tps or "cache_pct" in tps
    tps, writes = _groups(tps, engines), _groups(writes, engines)
    styles = _styles(tps, keys)
    groups = list(dict.fromkeys(tps["_x"]))
    many = len(groups) > 4  # more groups than fit side by side: one-line labels, turned
    fig, axes = subplots(1, 3, figsize=(TEXT_WIDTH_IN, 3.0 if many else 2.5 if extras else 2.3),
                         layout="constrained",
                         gridspec_kw={"width_ratios": [2.2, 1, 2.2] if wide else [1, 1, 1]})
    _dodged(axes[0], tps, groups, keys, styles)
    xlabel = " / ".join(w for c, w in (("engine", "engine"), ("block_size", "block size"),
                                       ("cache_pct", "cache (% of data)"))
                        if c in tps and (c != "engine" or len(engines) > 1))
    axes[0].set_ylabel("Throughput\n(transactions/s)")
    zero_based(axes[0])
    size_handles = _sizes_panel(axes[1], sizes, engines, comps, fill=bool(extras))
    if writes.empty:
        axes[2].text(0.5, 0.5, "not measured\n(no block device)", transform=axes[2].transAxes, ha="center",
                     va="center", fontsize=7)
        axes[2].set_xticks([])
    else:
        _dodged(axes[2], writes, [g for g in groups if g in set(writes["_x"])], keys,
                {k: v for k, v in styles.items() if k in set(writes[keys].itertuples(index=False, name=None))})
    axes[2].set_ylabel("KiB written\nper transaction")
    if xlabel and groups != engines:
        for a in (axes[0], axes[2]):
            a.set_xlabel(xlabel, fontsize=7)
    if many:
        for a in (axes[0], axes[2]):
            a.set_xticks(a.get_xticks(), [t.get_text().replace("\n", " ") for t in a.get_xticklabels()],
                         rotation=90, fontsize=6)
    zero_based(axes[2])
    if extras:  # medium x compression: one legend for (a) and (c) above the figure, (b)'s markers below it
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, frameon=False, fontsize=5.5, loc="outside upper center",
                   ncols=3 if len(labels) % 3 == 0 else 2)
    else:
        axes[0].legend(frameon=False, fontsize=6, title="compression", title_fontsize=6)
    if size_handles:
        fig.legend(handles=size_handles, frameon=False, fontsize=6, loc="outside lower center",
                   ncols=len(size_handles), title="b) on-disk size: marker block size"
                   + (", hollow compressed" if extras else ""), title_fontsize=6)
    for a, t in zip(axes, ("a) throughput", "b) on-disk size", "c) writes per transaction")):
        a.set_title(t, loc="left")
    sns.despine(fig)
    return fig, {"engines": engines, "compressions": comps, "groups": groups, "series": list(styles)}


def _sizes_panel(ax: Axes, sizes: pd.DataFrame, engines: list[Any], comps: list[Any], *,
                 fill: bool) -> list[Line2D]:
    """Panel (b): MiB per dataset, one marker per block size; compression as colour, or (`fill`: the
    other panels give colour to the medium) as the fill, in grey."""
    handles: list[Line2D] = []
    if not sizes.empty:
        s = sizes.copy()
        s["mib"] = s["data_physical_bytes"] / 2**20
        palette = sns.color_palette("colorblind")
        for k, (blk, g) in enumerate(s.groupby("block_size", sort=True)):
            marker = MARKERS[(k + 2) % len(MARKERS)]
            for j, c in enumerate(comps):
                gc = g[g["compression"] == c]
                xs = np.array([engines.index(e) for e in gc["engine"] if e in engines], dtype=float)
                xs = xs + (j - (len(comps) - 1) / 2) * 0.25 + (k - 0.5) * 0.06
                color = "0.3" if fill else palette[j % len(palette)]
                face = ("white" if str(c) != "none" else color) if fill else "none"
                ax.plot(xs, gc["mib"].to_numpy()[:len(xs)], linestyle="none", color=color, marker=marker,
                        markersize=4, markerfacecolor=face)
            handles.append(Line2D([], [], linestyle="none", color="0.35", marker=marker, markersize=4,
                                  markerfacecolor="none", label=str(blk)))
        ax.set_xticks(range(len(engines)), engines)
        ax.set_xlim(-0.5, len(engines) - 0.5)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.set_ylabel("On-disk size (MiB)")
    zero_based(ax)
    return handles


__all__ = ["FigureDataError", "block_size_ratios", "compression_panels"]
