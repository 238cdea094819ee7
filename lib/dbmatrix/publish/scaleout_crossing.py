"""Seed 000's doubling in the paper: the figure of the p95 crossings (``scaleout-crossing``) and
``generated/scaleout-crossing.tex`` (the figure and its paragraph's numbers) for the study the claims table
judged scaleDoubling on; for any other scale-out study, a sentence naming where it is judged. The estimate
and verdict are the claims table's (:mod:`dbmatrix.analyse.scaleout_crossing`)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.scaleout import P95_THRESHOLD_MS
from dbmatrix.analyse.scaleout_crossing import WINDOW
from dbmatrix.publish import paper
from dbmatrix.publish.hooks import HookContext, HookOutput, hook
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import write_text_atomic

STEM = "scaleout-crossing"
FILE = "scaleout-crossing.tex"
CLAIM = "scaleDoubling"


def draw_crossings(runs: pd.DataFrame, crossings: pd.DataFrame, figures_dir: Path,
                   check: list | None = None) -> list[Path]:
    """Each run's p95 against client threads (log-log), a colour per instance count and a marker per
    campaign; each campaign's fit over the levels near the threshold and its crossing (open circle)."""
    from dbmatrix.publish import figures as plots

    plots.apply_style()
    fig, ax = plots.subplots(figsize=(plots.COLUMN_WIDTH_IN, 3.0))
    r = runs.assign(p95=pd.to_numeric(runs["lat_pct_ms"], errors="coerce"),
                    campaign=pd.to_numeric(runs.get("campaign", 1), errors="coerce").fillna(1).astype(int))
    r = r[r["p95"] > 0]
    counts = sorted({int(x) for x in r["instances"]})
    for i, n in enumerate(counts):
        colour = f"C{i}"
        for j, (k, g) in enumerate(r[r["instances"] == n].groupby("campaign", sort=True)):
            ax.scatter(g["threads"], g["p95"], color=colour, marker=plots.MARKERS[j % len(plots.MARKERS)], s=8,
                       alpha=0.7, linewidths=0, label=f"{n} instance{'s' if n > 1 else ''}" if j == 0 else None)
            c = crossings[(crossings["campaign"] == k) & (crossings["instances"] == n)]
            if c.empty or not np.isfinite(c["crossing_threads"].iloc[0]):
                continue
            row = c.iloc[0]
            levels = [float(t) for t in str(row["levels"]).split()]
            xs = np.geomspace(min(levels), max(levels), 20)
            ax.plot(xs, P95_THRESHOLD_MS * (xs / row["crossing_threads"]) ** row["slope"], color=colour, lw=0.8)
            ax.plot([row["crossing_threads"]], [P95_THRESHOLD_MS], ls="none", color=colour, marker="o", mfc="white",
                    mec=colour, ms=4)
    ax.axhline(P95_THRESHOLD_MS, color="0.3", lw=0.7, ls="--", label=f"{P95_THRESHOLD_MS:g} ms (seed 000)")
    camps = sorted(set(r["campaign"]))
    for j, k in enumerate(camps if len(camps) > 1 else []):  # the markers' key (grey: every instance count)
        ax.plot([], [], ls="none", color="0.45", marker=plots.MARKERS[j % len(plots.MARKERS)], ms=3,
                label=f"campaign {k}")
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    grid = sorted({int(x) for x in r["threads"]})
    ticks = [n for n in grid if bin(n).count("1") == 1 or n == grid[-1]]  # powers of 2 and the largest
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    lo, hi = float(r["p95"].min()), float(r["p95"].max())
    ax.yaxis.set_major_locator(FixedLocator(plots.log_steps(lo, hi, 1.2)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("client threads")
    ax.set_ylabel("run p95 latency (ms)")
    # below the axes: up to 6 campaigns' markers would run into the 0.5 ms line inside them
    fig.legend(loc="outside lower center", ncol=3, fontsize=6, frameon=False)
    sha = plots.data_hash(r[["run_id", "campaign", "instances", "threads", "p95"]], crossings)
    return plots.save_figure(fig, figures_dir, STEM, data_sha=sha,
                             title="Scale-out: where p95 reaches 0.5 ms, per campaign", check=check)


def crossing_macros(crossings: pd.DataFrame) -> dict[str, str]:
    """The paragraph's numbers: campaigns with both crossings, the crossings' range per instance count, the
    fit window and the per-campaign ratios."""
    both = crossings.dropna(subset=["crossing_threads"]).pivot_table(index="campaign", columns="instances",
                                                                      values="crossing_threads")
    both = both.dropna()
    if both.empty or both.shape[1] < 2:
        return {}
    lo, hi = both.columns[0], both.columns[-1]
    ratio = both[hi] / both[lo]
    rng = lambda s: f"{s.min():.1f}" if len(s) == 1 else f"{s.min():.1f}--{s.max():.1f}"  # noqa: E731
    words = {1: "one campaign", 2: "two campaigns", 3: "three campaigns"}
    return {"crossCampaigns": str(len(both)), "crossCampaignsText": words.get(len(both), f"{len(both)} campaigns"),
            "crossLowRange": rng(both[lo]), "crossHighRange": rng(both[hi]),
            "crossLowInstances": str(int(lo)), "crossHighInstances": str(int(hi)),
            "crossRatios": ", ".join(f"{v:.2f}" for v in ratio), "crossWindow": f"{WINDOW:g}",
            "crossSlopes": f"{crossings['slope'].min():.2f}--{crossings['slope'].max():.2f}"}


def grid_macros(exp: Experiment) -> dict[str, str]:
    """The grid study's design in the paragraph: its thread range, largest step and runs per cell per campaign."""
    threads = sorted(int(t) for t in exp.factors["threads"])
    step = max((b / a for a, b in itertools.pairwise(threads)), default=1.0)
    runs = {1: "one run", 2: "two runs", 3: "three runs"}.get(exp.repetitions_in(2), f"{exp.repetitions_in(2)} runs")
    return {"crossThreadsLow": str(threads[0]), "crossThreadsHigh": str(threads[-1]), "crossMaxStep": f"{step:.3g}",
            "crossRunsText": runs}


@hook("scaleout-crossing")
def scaleout_crossing(st: StudyTables, ctx: HookContext) -> HookOutput:
    """For the study that judged scaleDoubling: the figure and ``generated/scaleout-crossing.tex``; for
    another scale-out study, the sentence, unless a study of this build wrote the file already."""
    path = ctx.generated_dir / FILE
    row = ctx.claims[ctx.claims["id"] == CLAIM] if "id" in ctx.claims.columns else pd.DataFrame()
    judged_here = not row.empty and str(row["study"].iloc[0]) == st.name
    crossings = st.extra.get("scaleout-crossing", pd.DataFrame())
    macros = crossing_macros(crossings) if crossings is not None and not crossings.empty else {}
    if judged_here and macros and st.a is not None:
        files = draw_crossings(st.runs, crossings, ctx.figures_dir, check=ctx.findings)
        paper.write_macros({**macros, **grid_macros(st.experiment)}, ctx.generated_dir / "scaleout-crossing-macros.tex")
        text = ("\\input{generated/scaleout-crossing-macros.tex}\n\\input{scaleout-crossing}\n")
        write_text_atomic(path, text)
        ctx.written.add(FILE)
        return HookOutput(written=[*files, path, ctx.generated_dir / "scaleout-crossing-macros.tex"],
                          figures={STEM: st.name})
    if FILE in ctx.written:
        return HookOutput()
    where = (f"on \\texttt{{{paper.latex_escape(str(row['study'].iloc[0]))}}}"
             if not row.empty and str(row["study"].iloc[0]) not in ("", "nan") else "on no study of this build")
    write_text_atomic(path, f"Seed~000's doubling (scaleDoubling) is judged {where}: see the claims table.\n")
    ctx.written.add(FILE)
    return HookOutput(written=[path])

