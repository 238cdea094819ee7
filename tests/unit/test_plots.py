"""Tests of dbmatrix.publish.figures: the style, stable bytes with provenance and Type 42 fonts, and every figure
function on small tidy tables (what it draws, and the clear error when its data is absent)."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from dbmatrix.publish import figures as plots
from dbmatrix.publish import figures_cache, figures_contrasts
from dbmatrix.publish.figures import FigureDataError
from dbmatrix.publish.paper import type3_fonts


def cells_threads() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, runs = [], []
    for cache, threads in itertools.product([25, 100], [1, 4, 16]):
        cid = f"innodb-c{cache}-t{threads}"
        mean = 300.0 * min(threads, 4) * (0.6 if cache == 25 else 1.0)
        rows.append({"cell_id": cid, "cache_pct": cache, "threads": threads, "engine": "innodb", "mean": mean,
                     "ci_lo": mean * 0.95, "ci_hi": mean * 1.05, "p95_ms": 2.0 * threads})
        runs += [{"cell_id": cid, "threads": threads, "p95_ms": 2.0 * threads * f, "tps": mean * f}
                 for f in (0.98, 1.0, 1.02)]
    return pd.DataFrame(rows), pd.DataFrame(runs)


def test_style_is_the_paper_style() -> None:
    plots.apply_style()
    assert plt.rcParams["pdf.fonttype"] == 42 and plt.rcParams["ps.fonttype"] == 42
    assert plt.rcParams["svg.hashsalt"] == "dbmatrix"
    assert pytest.approx(3.39) == plots.COLUMN_WIDTH_IN and plots.TEXT_WIDTH_IN > 2 * plots.COLUMN_WIDTH_IN


def test_save_figure_is_byte_stable_with_provenance_and_no_type3(tmp_path: Path) -> None:
    """The same data drawn twice gives the same bytes, with the data's digest and no commit (a commit stamp
    would change every tracked image at every commit: the build's commit is in its untracked sidecar)."""
    cells, runs = cells_threads()
    out = []
    for name in ("a", "b"):
        fig, _ = plots.throughput_vs_threads(cells, runs)
        out.append(plots.save_figure(fig, tmp_path / name, "fig", data_sha="d1", title="T"))
    for fa, fb in zip(*out):
        assert fa.read_bytes() == fb.read_bytes(), fa.name
    pdf = out[0][0].read_bytes()
    assert b"CreationDate" not in pdf and b"dbmatrix data sha256:d1" in pdf and b"git:" not in pdf
    assert type3_fonts(out[0][0]) == []
    fonts = subprocess.run(["pdffonts", str(out[0][0])], capture_output=True, text=True, check=True).stdout
    assert "CID TrueType" in fonts or "TrueType" in fonts  # Type 42: embedded TrueType
    png = out[0][1].read_bytes()
    assert png.startswith(b"\x89PNG") and b"data:d1" in png and b"git:" not in png


def test_throughput_vs_threads() -> None:
    cells, runs = cells_threads()
    fig, info = plots.throughput_vs_threads(cells, runs)
    assert info == {"series": ["cache_pct"], "threads": [1, 4, 16]}
    top, bottom = fig.axes
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["cache 25 %", "cache 100 %"]
    assert bottom.get_xlabel() == "Client threads" and top.get_xscale() == "log"
    plt.close(fig)
    with pytest.raises(FigureDataError, match="client-thread levels"):
        plots.throughput_vs_threads(cells[cells["threads"] == 4], runs)
    with pytest.raises(FigureDataError, match="no data"):
        plots.throughput_vs_threads(pd.DataFrame(), runs)


def test_block_size_ratios_shade_the_claim_only_where_its_condition_holds() -> None:
    t = pd.DataFrame({"engine": ["innodb", "innodb", "myrocks", "myrocks"], "cache_pct": [25, 100, 25, 100],
                      "estimate": [1.5, 1.3, 1.02, 0.9], "ci_lo": [1.4, 1.2, 0.95, 0.8], "ci_hi": [1.6, 1.4, 1.1, 1.0]})
    fig, info = figures_contrasts.block_size_ratios(t, a="16k", b="4k", claimed=(1 / 1.1, 1.0), claimed_at=25,
                                        claimed_label="seed 003: MyRocks, no block cache")
    ax = fig.axes[0]
    assert info["engines"] == ["innodb", "myrocks"] and ax.get_ylabel() == "Throughput ratio 16k / 4k"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["25 %", "100 %"]
    bands = [c for c in ax.collections if str(c.get_label()).startswith("seed 003")]
    assert len(bands) == 1
    x = bands[0].get_paths()[0].vertices[:, 0]
    assert x.min() >= -0.5 and x.max() <= 0.5  # over the 25 % column only, not the 100 % one
    plt.close(fig)
    fig, _ = figures_contrasts.block_size_ratios(t, claimed=(1 / 1.1, 1.0), claimed_at=None)  # no condition: every level
    assert len([c for c in fig.axes[0].collections if str(c.get_label()).startswith("seed")]) == 1
    assert sum(1 for c in fig.axes[0].collections if c.get_paths() and c.get_facecolor().size
               and c.get_paths()[0].vertices[:, 0].max() > 0.5) >= 1
    with pytest.raises(FigureDataError):
        figures_contrasts.block_size_ratios(t.iloc[0:0])
    # issue 41: one series per compression, never a ratio averaged over it
    comp = pd.concat([t.assign(compression="none"), t.assign(compression="lz4", estimate=t["estimate"] * 4)])
    fig, info = figures_contrasts.block_size_ratios(comp[comp["engine"] == "myrocks"])
    assert info["series"] == [("none",), ("lz4",)]
    assert [x.get_text() for x in fig.axes[0].get_legend().get_texts()] == ["no compression", "lz4"]
    plt.close(fig)


def test_block_size_ratios_tell_engines_apart_on_one_medium() -> None:
    """Where the medium interacts with the block size, one series per engine x medium: the medium keeps its
    colour, the engine takes the marker, and the figure check finds no two legend entries alike (a fresh
    quick campaign's block-size figure failed it: both engines on one medium drew the medium's own style)."""
    from dbmatrix.publish.figure_check import check_figure

    rows = [{"engine": e, "medium": m, "cache_pct": c, "estimate": 1.0 + 0.1 * i, "ci_lo": 0.9, "ci_hi": 1.3}
            for i, (e, m, c) in enumerate(itertools.product(("innodb", "myrocks"), ("disk", "tmpfs"), (25, 100)))]
    t = pd.DataFrame(rows).assign(emulated=lambda d: d["medium"].map({"disk": None, "tmpfs": "pmem-fsdax"}))
    fig, info = figures_contrasts.block_size_ratios(t, claimed=(1 / 1.1, 1.0), claimed_at=25,
                                                    claimed_label="seed 003: MyRocks, no block cache")
    handles, labels = fig.axes[0].get_legend_handles_labels()
    styles = {lab: (h[0].get_color(), h[0].get_marker()) for h, lab in zip(handles, labels)
              if not lab.startswith("seed")}
    assert len(info["series"]) == 4 and len(set(styles.values())) == len(styles) == 4, styles
    assert styles["innodb, disk"][0] == styles["myrocks, disk"][0]  # the medium's colour
    assert styles["innodb, disk"][1] == styles["innodb, tmpfs (emulated pmem-fsdax)"][1]  # the engine's marker
    assert not [f for f in check_figure(fig, "block-size", emulated=("tmpfs",)) if f.kind == "ambiguous-legend"]
    plt.close(fig)


def test_factor_effects_read_treatment_over_baseline_with_readable_names() -> None:
    eff = pd.DataFrame([
        {"term": "cache_pct", "kind": "main", "factor_1": "cache_pct", "level_1": "25", "factor_2": None,
         "level_2": None, "log_effect": -0.3, "ci_lo": np.exp(-0.35), "ci_hi": np.exp(-0.25)},
        {"term": "cache_pct", "kind": "main", "factor_1": "cache_pct", "level_1": "100", "factor_2": None,
         "level_2": None, "log_effect": 0.3, "ci_lo": np.exp(0.25), "ci_hi": np.exp(0.35)},
        {"term": "medium", "kind": "main", "factor_1": "medium", "level_1": "disk", "factor_2": None,
         "level_2": None, "log_effect": -0.2, "ci_lo": np.exp(-0.25), "ci_hi": np.exp(-0.15)},
        {"term": "medium", "kind": "main", "factor_1": "medium", "level_1": "tmpfs", "factor_2": None,
         "level_2": None, "log_effect": 0.2, "ci_lo": np.exp(0.15), "ci_hi": np.exp(0.25)}])
    fig, info = plots.factor_effects(eff, {"cache_pct": 100, "medium": "disk"}, {"tmpfs": "pmem-fsdax"})
    rows = info["rows"].set_index("label")
    assert rows.loc["Cache: 25 % / 100 %", "ratio"] == pytest.approx(np.exp(-0.6))  # baseline 100 below
    assert rows.loc["Medium: tmpfs (emulated) / disk", "ratio"] == pytest.approx(np.exp(0.4))
    lo, hi = rows.loc["Cache: 25 % / 100 %", ["ci_lo", "ci_hi"]]
    assert lo < np.exp(-0.6) < hi
    assert "treatment/baseline" in fig.axes[0].get_xlabel()
    plt.close(fig)


def test_fewer_than_three_runs_show_the_runs_not_a_t_interval() -> None:
    from matplotlib.container import ErrorbarContainer

    from dbmatrix.publish.captions import interval_text

    cells = pd.DataFrame({"cell_id": ["a", "b"], "cache_pct": [25, 100], "mean": [100.0, 200.0],
                          "ci_lo": [-500.0, -300.0], "ci_hi": [700.0, 700.0], "n": [2, 2]})
    runs = pd.DataFrame({"cell_id": ["a", "a", "b", "b"], "tps": [90.0, 110.0, 190.0, 210.0]})
    fig, info = figures_cache.throughput_vs_cache(cells, runs)
    assert info["runs_only"] and not any(isinstance(c, ErrorbarContainer) for c in fig.axes[0].containers)
    assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == 4  # every run drawn
    plt.close(fig)
    fig, info = figures_cache.throughput_vs_cache(cells.assign(n=4), runs)
    assert not info["runs_only"] and any(isinstance(c, ErrorbarContainer) for c in fig.axes[0].containers)
    plt.close(fig)
    assert interval_text([2, 2]).startswith("points are the individual runs, $n = 2$ per cell")
    assert interval_text([3, 4]).startswith("error bars: Student-$t$") and "$n = 3$--$4$" in interval_text([3, 4])
    assert plots.MIN_RUNS_FOR_INTERVAL == 3 and plots.shows_runs(2) and not plots.shows_runs([3, 5])


def test_compression_panels_side_by_side() -> None:
    means = pd.DataFrame({"engine": ["innodb", "innodb", "myrocks", "myrocks"],
                          "compression": ["none", "lz4", "none", "lz4"], "mean": [1000.0, 600, 990, 960],
                          "ci_lo": [950.0, 570, 940, 900], "ci_hi": [1050.0, 650, 1040, 1020]})
    sizes = pd.DataFrame({"engine": ["innodb"] * 2 + ["myrocks"] * 2, "block_size": ["16k"] * 4,
                          "compression": ["none", "lz4"] * 2, "data_physical_bytes": [80e6, 47e6, 42e6, 40e6]})
    fig, _ = figures_contrasts.compression_panels(means, sizes, means.assign(mean=[40.0, 120, 8, 8]))
    assert len(fig.axes) == 3 and fig.get_size_inches()[0] == pytest.approx(plots.TEXT_WIDTH_IN)
    assert [a.get_title(loc="left") for a in fig.axes] == ["a) throughput", "b) on-disk size",
                                                          "c) writes per transaction"]
    plt.close(fig)
    fig, _ = figures_contrasts.compression_panels(means, sizes, pd.DataFrame())
    assert "not measured" in fig.axes[2].texts[0].get_text()
    plt.close(fig)


def test_medium_cache_labels_emulated_media() -> None:
    rows = [{"engine": e, "medium": m, "cache_pct": c, "mean": 1000.0, "ci_lo": 900.0, "ci_hi": 1100.0,
             "emulated": "pmem-fsdax" if m == "tmpfs" else None}
            for e, m, c in itertools.product(["innodb", "myrocks"], ["disk", "tmpfs"], [25, 100])]
    t = pd.DataFrame(rows)
    fig, _info = figures_cache.medium_cache(t, t.assign(mean=5.0, ci_lo=4.0, ci_hi=6.0))
    labels = [x.get_text() for x in fig.legends[0].get_texts()]
    assert "tmpfs (emulated pmem-fsdax), myrocks" in labels and "disk, innodb" in labels
    plt.close(fig)
    with pytest.raises(FigureDataError, match="two or more media"):
        figures_cache.medium_cache(t[t["medium"] == "disk"], t)


def test_figures_draw_the_factors_that_interact_with_their_contrast() -> None:
    """Issue 41: a table that holds a further factor (split by the interaction rule) gets its own panels or
    points in each figure: medium x cache one column per block size x compression; the block-size ratio
    one panel per compression and a series per medium (its colour of every figure); compression one point
    per medium x compression."""
    rows = [{"engine": "myrocks", "block_size": b, "compression": c, "medium": m, "cache_pct": k,
             "mean": 100.0, "ci_lo": 90.0, "ci_hi": 110.0, "emulated": "pmem-fsdax" if m == "tmpfs" else None}
            for b, c, m, k in itertools.product(["4k", "16k"], ["none", "lz4"], ["disk", "tmpfs"], [0.0, 8.5])]
    t = pd.DataFrame(rows)
    fig, info = figures_cache.medium_cache(t, t.assign(mean=5.0, ci_lo=4.0, ci_hi=6.0))
    assert info["panels"] == [("4k", "none"), ("4k", "lz4"), ("16k", "none"), ("16k", "lz4")]
    assert len(fig.axes) == 8 and fig.get_size_inches()[0] == pytest.approx(plots.TEXT_WIDTH_IN)
    assert [a.get_title(loc="left") for a in fig.axes[:4]] == ["4k blocks, no compression", "4k blocks, lz4",
                                                              "16k blocks, no compression", "16k blocks, lz4"]
    plt.close(fig)
    ratios = t.drop(columns=["block_size", "mean", "ci_lo", "ci_hi"]).assign(estimate=1.5, ci_lo=1.4, ci_hi=1.6)
    fig, info = figures_contrasts.block_size_ratios(ratios)
    assert info["panels"] == ["none", "lz4"] and info["series"] == [("disk",), ("tmpfs",)]
    assert [a.get_title(loc="left") for a in fig.axes] == ["no compression", "lz4"]
    assert [x.get_text() for x in fig.legends[0].get_texts()] == ["disk", "tmpfs (emulated pmem-fsdax)"]
    colours = figures_cache.medium_styles(["disk", "tmpfs"])
    drawn = [c.lines[0].get_color() for c in fig.axes[0].containers]
    assert [matplotlib.colors.to_hex(c) for c in drawn] == [matplotlib.colors.to_hex(colours[m][0])
                                                           for m in ("disk", "tmpfs")]
    plt.close(fig)
    sizes = pd.DataFrame({"engine": ["myrocks"] * 2, "block_size": ["16k"] * 2, "compression": ["none", "lz4"],
                          "data_physical_bytes": [300e6, 90e6]})
    means = t[t["cache_pct"] == 8.5]
    fig, info = figures_contrasts.compression_panels(means, sizes, means)
    assert info["series"] == [("disk", "none"), ("disk", "lz4"), ("tmpfs", "none"), ("tmpfs", "lz4")]
    assert "tmpfs (emulated pmem-fsdax), lz4" in [x.get_text() for x in fig.legends[0].get_texts()]
    plt.close(fig)


def test_throughput_over_time() -> None:
    iv = pd.DataFrame([{"run_id": f"{c}-r{r}", "cell_id": c, "t_s": t, "tps": 100.0 + t, "lat_ms": 5.0}
                       for c in ("slow", "fast") for r in (1, 2) for t in range(1, 11)])
    steady = pd.DataFrame({"run_id": ["slow-r1", "fast-r2"], "trim_s": [2.0, 0.0]})
    runs = pd.DataFrame({"run_id": [f"{c}-r{r}" for c in ("slow", "fast") for r in (1, 2)],
                         "repetition": [1, 2, 1, 2], "campaign": [1, 1, 2, 2]})
    fig, info = plots.throughput_over_time(iv, steady, ["slow", "fast"], {"slow": "the slow one"}, runs)
    assert info["cells"] == ["slow", "fast"] and info["crosses"] == 1
    cells, styles = ([t.get_text() for t in leg.get_texts()] for leg in fig.legends)
    assert cells == ["the slow one", "fast"]
    assert styles == ["campaign 1, rep. 1", "campaign 1, rep. 2", "campaign 2, rep. 1", "campaign 2, rep. 2",
                      "steady window starts"]  # a line style per campaign and repetition, and the cross
    assert len(fig.axes[1].lines) == 4  # a p95 line per run
    plt.close(fig)
    with pytest.raises(FigureDataError, match="no per-second rows"):
        plots.throughput_over_time(iv, steady, ["other"])


def _styles(handles: list[Any]) -> set[str]:
    return {str(h.get_linestyle()) + str(getattr(h, "_dash_pattern", "")) + str(h.get_marker()) for h in handles}


def test_throughput_over_time_gives_every_run_its_own_style() -> None:
    """Two pilot campaigns of three repetitions and four of one (the paper reference's fast cell, 10 runs)
    and more: no two runs share a style, the line styles first, then each again with a marker."""
    for n_campaigns in (2, 6, 20):
        reps = {k: (1, 2, 3) if k <= 2 else (1,) for k in range(1, n_campaigns + 1)}
        ids = [f"c{k}-r{r}" for k, rs in reps.items() for r in rs]
        iv = pd.DataFrame([{"run_id": rid, "cell_id": "fast", "t_s": t, "tps": 100.0 + t, "lat_ms": 5.0}
                           for rid in ids for t in range(1, 6)])
        runs = pd.DataFrame({"run_id": ids, "repetition": [r for rs in reps.values() for r in rs],
                             "campaign": [k for k, rs in reps.items() for _ in rs]})
        fig, _ = plots.throughput_over_time(iv, pd.DataFrame({"run_id": [], "trim_s": []}), ["fast"], None, runs)
        handles = fig.legends[1].legend_handles
        assert len(handles) == len(ids) and len(_styles(handles)) == len(ids), n_campaigns
        drawn = fig.axes[0].lines
        assert len(_styles(drawn)) == len(ids)  # the lines as drawn, not only their legend
        assert sum(h.get_marker() not in (None, "None", "") for h in handles) == max(0, len(ids) - 8)
        plt.close(fig)
    # the check can fail: the line styles alone repeat from the ninth run on
    assert len({str(plots.LINESTYLES[k % len(plots.LINESTYLES)]) for k in range(10)}) < 10


def test_efficiency_vs_baseline() -> None:
    t = pd.DataFrame({"label": ["a (baseline)", "b", "a (baseline)", "b"],
                      "metric": ["mysqld_cpu_us_per_txn"] * 2 + ["write_kb_per_txn"] * 2,
                      "ratio": [1.0, 2.0, 1.0, 0.5], "ci_lo": [0.9, 1.8, 0.9, np.nan],
                      "ci_hi": [1.1, 2.2, 1.1, np.nan], "baseline_mean": [900.0, 900.0, 5.0, 5.0]})
    fig, info = plots.efficiency_vs_baseline(t, "a")
    assert info["metrics"] == ["mysqld_cpu_us_per_txn", "write_kb_per_txn"] and len(fig.axes) == 2
    assert fig.axes[0].get_title().endswith("baseline 900")
    plt.close(fig)
    with pytest.raises(FigureDataError):
        plots.efficiency_vs_baseline(t.assign(metric="tps"), "a")


def test_metric_by_factor_summarises_the_selection() -> None:
    runs = pd.DataFrame({"cache_pct": [25, 25, 100, 100, 25, 100], "engine": ["a", "a", "a", "a", "b", "b"],
                         "tps": [1.0, 3.0, 10.0, 12.0, 5.0, 7.0]})
    fig, info = plots.metric_by_factor(runs, "cache_pct", "tps", hue="engine")
    s = info["summary"].set_index(["engine", "cache_pct"])
    assert s.loc[("a", 25), "mean"] == 2.0 and s.loc[("a", 100), "n"] == 2
    assert np.isnan(s.loc[("b", 25), "ci_lo"])  # one run: no interval
    plt.close(fig)
    with pytest.raises(FigureDataError, match="'nope' is not a column"):
        plots.metric_by_factor(runs, "nope")


def test_factor_effects_needs_a_model() -> None:
    with pytest.raises(FigureDataError, match="factorial model"):
        plots.factor_effects(pd.DataFrame())


def test_drawing_keeps_the_backend_a_jupyter_kernel_chose() -> None:
    """Issue 15: importing the library used to call matplotlib.use("Agg"), which replaced the inline backend
    of every kernel (figures printed as `<Figure size ...>`). Import and draw under the backend ipykernel
    sets; the backend must stay, and the figure must be one no backend manages (no pyplot window)."""
    import os
    import sys

    code = ("import matplotlib; before = matplotlib.get_backend()\n"
            "import pandas as pd\n"
            "from dbmatrix.publish import figures as plots\n"
            "fig, _ = plots.metric_by_factor(pd.DataFrame({'x': [1, 1, 2], 'tps': [1.0, 2.0, 3.0]}), 'x')\n"
            "import matplotlib.pyplot as plt\n"
            "print(before, matplotlib.get_backend(), fig.canvas.manager is None, plt.get_fignums())\n")
    env = {**os.environ, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    inline = "module://matplotlib_inline.backend_inline"
    assert out.stdout.split() == [inline, inline, "True", "[]"], out.stdout + out.stderr


def test_a_figure_displays_itself_as_png_in_a_notebook() -> None:
    """Without pyplot no inline formatter may be registered yet: the figure brings its own PNG repr."""
    fig, _ = plots.metric_by_factor(pd.DataFrame({"x": [1, 1, 2], "tps": [1.0, 2.0, 3.0]}), "x")
    png = fig._repr_png_()
    assert png.startswith(b"\x89PNG")
    width = int.from_bytes(png[16:20], "big")
    assert width == round(plots.COLUMN_WIDTH_IN * fig.dpi)  # at the figure's dpi, not savefig's 300


def test_throughput_vs_cache_draws_a_panel_per_block_size_and_compression() -> None:
    """Issue 41: a line through the mean of cells of several block sizes passes through no data; each panel
    holds one block size x compression, and each line joins one medium's cell means."""
    rows = [{"cell_id": f"{b}-{c}-{m}-{k}", "block_size": b, "compression": c, "medium": m, "cache_pct": k,
             "mean": (40.0 if (b, c) == ("4k", "lz4") else 400.0) * (2 if k else 1) * (1.5 if m == "tmpfs" else 1),
             "ci_lo": 1.0, "ci_hi": 2000.0, "n": 4, "emulated": "pmem-fsdax" if m == "tmpfs" else None}
            for b, c, m, k in itertools.product(["16k", "4k"], ["none", "lz4"], ["tmpfs", "disk"], [0, 8.5])]
    cells = pd.DataFrame(rows)
    runs = pd.DataFrame({"cell_id": cells["cell_id"], "tps": cells["mean"]})
    fig, info = figures_cache.throughput_vs_cache(cells, runs)
    assert info["facets"] == ["block_size", "compression"] and info["panels"] == 4
    titles = [a.get_title(loc="left") for a in fig.axes if a.get_visible()]
    assert titles == ["4k blocks, no compression", "4k blocks, lz4", "16k blocks, no compression",
                      "16k blocks, lz4"]
    lz4 = fig.axes[1]
    lines = [ln for ln in lz4.get_lines() if len(ln.get_xdata()) == 2]
    assert sorted(round(float(v)) for ln in lines for v in ln.get_ydata()) == [40, 60, 80, 120]  # the cells
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["disk", "tmpfs (emulated pmem-fsdax)"]
    plt.close(fig)


def test_a_medium_has_one_colour_in_every_cache_figure() -> None:
    a = figures_cache.medium_styles(["tmpfs", "disk", "ramblock"])
    b = figures_cache.medium_styles(["ramblock", "tmpfs", "disk"])
    assert a == b and len({c for c, _ in a.values()}) == 3


def test_compression_is_drawn_and_said_per_block_size_and_cache_level() -> None:
    """Issue 41: lz4 / none is 0.2 at 4 KB with a cache and 1.0 at 16 KB; a mean over them says neither."""
    from dbmatrix.publish.build import _compression_ratios

    rows = [{"engine": "myrocks", "block_size": b, "cache_pct": k, "compression": c,
             "mean": 100.0 * (0.2 if (b, k, c) == ("4k", 8.5, "lz4") else 1.0), "ci_lo": 90.0, "ci_hi": 110.0}
            for k in (0.0, 8.5) for b in ("4k", "16k") for c in ("none", "lz4")]
    tps = pd.DataFrame(rows)
    sizes = pd.DataFrame({"engine": ["myrocks"] * 2, "block_size": ["16k"] * 2, "compression": ["none", "lz4"],
                          "data_physical_bytes": [300e6, 90e6]})
    fig, info = figures_contrasts.compression_panels(tps, sizes, tps.assign(mean=8.0))
    assert info["groups"] == ["4k\n0 %", "16k\n0 %", "4k\n8.5 %", "16k\n8.5 %"]
    assert fig.axes[0].get_xlabel() == "block size / cache (% of data)"
    plt.close(fig)
    said = _compression_ratios(tps)
    assert [w for w, _ in said] == ["4k blocks and cache 0\\,\\%", "16k blocks and cache 0\\,\\%",
                                    "4k blocks and cache 8.5\\,\\%", "16k blocks and cache 8.5\\,\\%"]
    assert [r for _, r in said] == ["1.00", "1.00", "0.20", "1.00"]
    assert _compression_ratios(tps[tps["cache_pct"] == 0].drop(columns=["cache_pct", "block_size"])
                               .head(2)) == [("", "1.00")]
    # split by medium (it interacts with compression): the range over the media, never their mean
    by_medium = pd.concat([tps.assign(medium="disk"),
                           tps.assign(medium="tmpfs", mean=tps["mean"] * tps["compression"].map({"none": 1.0,
                                                                                                 "lz4": 1.5}))])
    assert [r for _, r in _compression_ratios(by_medium)] == ["1.00--1.50", "1.00--1.50", "0.20--0.30",
                                                              "1.00--1.50"]


def test_a_three_level_main_effect_gets_a_row_per_level_against_its_baseline() -> None:
    """The medium (three levels) was left out of the forest plot; each level against the baseline, with the
    difference's SE of a balanced sum-to-zero design (for two levels the same as the two-level rule)."""
    se, q = 0.05, 2.0
    b = {"disk": -0.6, "tmpfs": 0.6, "ramblock": 0.0}
    eff = pd.DataFrame([{"term": "medium", "kind": "main", "factor_1": "medium", "level_1": lv, "factor_2": None,
                         "level_2": None, "log_effect": v, "se": se, "ci_lo": np.exp(v - q * se),
                         "ci_hi": np.exp(v + q * se)} for lv, v in b.items()])
    rows = plots._effect_rows(eff, {"medium": "disk"}, {"tmpfs": "pmem-fsdax"}).set_index("label")
    r = rows.loc["Medium: tmpfs (emulated) / disk"]
    assert r["ratio"] == pytest.approx(np.exp(1.2))
    assert np.log(r["ci_hi"] / r["ratio"]) == pytest.approx(q * se * np.sqrt(3))
    assert "Medium: ramblock / disk" in rows.index and len(rows) == 2
