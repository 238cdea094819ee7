"""What publishing does for a study kind beyond the standard figures, macros and tables: hooks named by the
kinds (:attr:`dbmatrix.analyse.kinds.StudyKind.paper_hooks` and ``section.publisher``).

A hook takes the study's processed tables and the build's context and returns macros (prefixed with the
study's), files written, figures drawn and, for a section publisher, the body of the section's include."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dbmatrix.analyse.figure_data import StudyTables, cell_label, level_text
from dbmatrix.publish.figure_check import Finding
from dbmatrix.publish.paper_inputs import CELL_CI, fmt_num, render_table
from dbmatrix.publish.replication import publish_replication
from dbmatrix.store import write_text_atomic


@dataclass(frozen=True)
class HookContext:
    figures_dir: Path
    generated_dir: Path
    paper_src: Path
    claims: pd.DataFrame
    findings: list[Finding] = field(default_factory=list)  # the figure check's, of the figures hooks draw
    written: set[str] = field(default_factory=set)  # files a hook wrote in this build (a kind's second study
    # must not overwrite its first's table)


@dataclass
class HookOutput:
    macros: dict[str, str] = field(default_factory=dict)  # the study's numbers (prefixed like its others)
    written: list[Path] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)  # stem -> experiment
    body: str | None = None  # a section publisher's include body (None: the section's not-run text)


Hook = Callable[[StudyTables, HookContext], HookOutput]
HOOKS: dict[str, Hook] = {}


def hook(name: str) -> Callable[[Hook], Hook]:
    def add(fn: Hook) -> Hook:
        HOOKS[name] = fn
        return fn
    return add


def run_hook(name: str, st: StudyTables, ctx: HookContext) -> HookOutput:
    try:
        fn = HOOKS[name]
    except KeyError:
        raise ValueError(f"study kind {st.kind!r}: paper hook {name!r}; allowed: {', '.join(HOOKS)}") from None
    return fn(st, ctx)


@hook("threads-macros")
def threads_macros(st: StudyTables, ctx: HookContext | None = None) -> HookOutput:
    """The thread sweep in numbers: levels, the peak's threads and throughput."""
    cells = st.cells
    if "threads" not in cells or cells["threads"].nunique() < 2:
        return HookOutput()
    by = cells.groupby("threads", sort=True)["mean"].max()
    peak = by.idxmax()
    return HookOutput(macros={"minThreads": level_text(by.index.min()), "maxThreads": level_text(by.index.max()),
                              "peakThreads": level_text(peak), "peakTps": fmt_num(by.max()),
                              "threadLevels": ", ".join(level_text(t) for t in by.index)})


@hook("tpcc-table")
def tpcc_table_tex(st: StudyTables, ctx: HookContext) -> HookOutput:
    """``table-tpcc.tex`` from ``processed/tpcc-cells.parquet`` (:mod:`dbmatrix.analyse.kinds.tpcc`): the
    build's first TPC-C study's (the section's), spanning both columns, cells named by their varied levels."""
    if "table-tpcc.tex" in ctx.written:
        return HookOutput()
    ctx.written.add("table-tpcc.tex")
    t = st.extra.get("tpcc-cells", pd.DataFrame())
    pct = lambda x: "--" if pd.isna(x) else f"{100 * x:.1f}"  # noqa: E731
    cells = st.cells.drop_duplicates("cell_id").set_index("cell_id") if "cell_id" in st.cells else pd.DataFrame()
    varied = [f for f in st.experiment.varied_factors() if f in cells.columns]
    names = [cell_label(cells.loc[c], varied) if varied and c in cells.index else str(c)  # render_table escapes
             for c in t.get("cell_id", pd.Series(dtype=object))]
    show = pd.DataFrame({"Cell": names, "n": t["n"], "tpmC": t["tpmC"].round(0),
                         CELL_CI: [("--" if pd.isna(lo) else f"{lo:.0f}--{hi:.0f}")
                                     for lo, hi in zip(t["ci_lo"], t["ci_hi"])],
                         "TPS": t["tps"].round(0), "hit %": t["hit_ratio"].map(pct),
                         "data hit %": t["data_hit_ratio"].map(pct),
                         "MiB": t["data_mib"].round(1)}) if not t.empty else t
    path = ctx.generated_dir / "table-tpcc.tex"
    write_text_atomic(path, render_table(
        show, caption="TPC-C: New-Order transactions per minute (tpmC) per cell, geometric mean over "
                      "repetitions with its \\ciPct\\,\\% CI (Student-t on log tpmC with the variance pooled over the "
                      "cells, as the factorial model has it); all transactions per second; the cache hit "
                      "ratio over the window from the engine's status counters (all blocks, and data blocks "
                      "alone); the loaded tables' on-disk size.",
        label="tab:tpcc", empty="no tpmC in the runs", precision=0, column_format="lrrcrrrr", wide=True))
    return HookOutput(written=[path])


@hook("replication")
def replication_outputs(st: StudyTables, ctx: HookContext) -> HookOutput:
    """A Galera study's figures, ``replication-macros.tex`` and ``table-replication.tex`` (its verdicts
    are the claims table's: one rule for the whole paper), and the body of its section's include."""
    files = [Path(p) for p in publish_replication(st, ctx.figures_dir, ctx.generated_dir, ctx.claims,
                                                          check=ctx.findings)]
    figures = {f.stem: st.name for f in files if f.suffix == ".pdf" and f.parent == ctx.figures_dir}
    return HookOutput(written=files, figures=figures, body=replication_section(ctx.paper_src, bool(files)))


def replication_section(paper_src: Path, published: bool) -> str | None:
    """The body of generated/replication-section.tex: the macros of the replication study (unless its
    section inputs them itself) and paper/replication.tex; None when there is nothing to include."""
    src = paper_src / "replication.tex"
    if not published or not src.is_file():
        return None
    own = "replication-macros" in src.read_text()
    return ("" if own else "\\input{generated/replication-macros.tex}\n") + "\\input{replication}"
