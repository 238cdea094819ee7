"""Processed tables of the studies, loaded for figures and the paper, and the pure tables each figure draws."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.stats import (
    level_key,
    t_mean_ci,
    welch_log_ratio,
)
from dbmatrix.analyse.tables import (
    Analysis,
    baseline_levels,
    closed_loop,
    factor_columns,
    reference_levels,
)
from dbmatrix.spec.experiment import FACTORS, Experiment
from dbmatrix.store import ResultStore

# ------------------------------------------------------------------------------------ studies -> paper


class FigureDataError(ValueError):
    """The data a figure needs is not in this study (the message says what is missing)."""


def level_text(v: Any) -> str:
    """A level as printed: 25.0 (a number column with gaps) prints as 25."""
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def as_text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)


@dataclass
class StudyTables:
    """One study's processed tables, as figures, claims and the paper use them."""

    experiment: Experiment
    store: ResultStore
    kind: str = "storage"
    prefix: str = ""
    a: Analysis | None = None
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    spec_path: Path | None = None
    _intervals: pd.DataFrame | None = None
    _host_record: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.experiment.name

    @property
    def analysis(self) -> Analysis:
        if self.a is None:
            raise RuntimeError(f"{self.name}: no processed tables")
        return self.a

    @property
    def runs(self) -> pd.DataFrame:
        """Closed-loop runs (open-loop throughput is the harness's --rate, not a measurement)."""
        return closed_loop(self.analysis.runs)

    @property
    def cells(self) -> pd.DataFrame:
        return closed_loop(self.analysis.cells)

    def host_record(self) -> dict[str, Any]:
        """processed/host-facts.json (:mod:`dbmatrix.analyse.host_facts`)."""
        if self._host_record is None:
            from dbmatrix.analyse.host_facts import load_host_record

            self._host_record = load_host_record(self.store)
        return self._host_record

    def campaign_summaries(self) -> list[dict[str, Any]]:
        """processed/campaigns.json (:mod:`dbmatrix.analyse.campaign_records`): what each campaign shared."""
        from dbmatrix.analyse.campaign_records import load_campaign_summaries

        return load_campaign_summaries(self.store)

    def intervals(self) -> pd.DataFrame:
        if self._intervals is None:
            p = self.store.processed / "intervals.parquet"
            self._intervals = pd.read_parquet(p) if p.is_file() else pd.DataFrame()
        return self._intervals


def emulated_media(st: StudyTables) -> dict[str, str]:
    """The study's emulated media as the figures name them (medium -> the device it stands in for), from
    the runs' ``emulated`` column (set from the inventory's media: :mod:`dbmatrix.hosts.media`)."""
    runs = st.a.runs if st.a is not None else pd.DataFrame()
    if "emulated" not in runs or "medium" not in runs:
        return {}
    rows = runs.dropna(subset=["emulated"])
    return {str(m): as_text(e) for m, e in zip(rows["medium"], rows["emulated"]) if as_text(e)}


def _block_bytes(level: Any) -> float:
    text = str(level).lower()
    mult = {"k": 1024, "m": 1024 * 1024}.get(text[-1:], 1)
    try:
        return float(text.rstrip("km")) * mult
    except ValueError:
        return math.inf


def _levels_of(runs: pd.DataFrame, factor: str, exp: Experiment) -> list[Any]:
    from dbmatrix.analyse.contrasts import ordered_levels

    return ordered_levels(runs[factor], exp.factors.get(factor)) if factor in runs.columns else []


def _require_varied(runs: pd.DataFrame, factor: str, what: str) -> None:
    if factor not in runs.columns or runs[factor].map(level_key).nunique() < 2:
        raise FigureDataError(f"{what}: the study does not vary {factor}")


def _at(runs: pd.DataFrame, **levels: Any) -> dict[str, Any]:
    return {k: v for k, v in levels.items() if k in runs.columns}


def treatment_baseline(st: StudyTables, factor: str) -> tuple[Any, Any]:
    """A two-level comparison's direction as every ratio figure draws it: treatment / baseline, the
    baseline being the factor's reference level (the spec's baseline, else its first level:
    :func:`dbmatrix.analyse.tables.reference_levels`), the treatment the other extreme level."""
    runs, exp = st.runs, st.experiment
    levels = _levels_of(runs, factor, exp)
    base = reference_levels(exp, runs, [factor])[factor]
    others = [v for v in levels if level_key(v) != level_key(base)]
    if factor == "block_size":
        others = sorted(others, key=_block_bytes)
    treat = max(others, key=lambda v: abs(levels.index(v) - levels.index(base)))
    return treat, base


def baseline_of(st: StudyTables) -> dict[str, Any]:
    """The baseline level of every factor the study varies (:func:`treatment_baseline`'s denominator)."""
    runs = st.runs
    factors = [f for f in FACTORS if f in runs.columns and runs[f].map(level_key).nunique() > 1]
    return reference_levels(st.experiment, runs, factors)


def block_size_table(st: StudyTables) -> tuple[pd.DataFrame, str, str]:
    """Throughput ratio treatment/baseline block size (:func:`treatment_baseline`) per engine, compression
    and cache level (contrasts.ratio_estimate: matched cells, else the two-way model's contrast there), and
    per level of every other factor whose interaction with the block size is significant
    (:func:`dbmatrix.analyse.interactions.split_factors`: the medium, in the paper's TPC-C study).
    Compression interacts with the block size more than any other factor (the 4 KB + lz4 collapse), so the
    ratio is never averaged over it."""
    from dbmatrix.analyse.contrasts import NotTestable, ratio_estimate
    from dbmatrix.analyse.interactions import split_factors

    runs, exp = st.runs, st.experiment
    _require_varied(runs, "block_size", "block size figure")
    a, b = treatment_baseline(st, "block_size")
    base = ["engine", "compression", "cache_pct"]
    extras = split_factors(runs, factor_columns(runs), ["block_size"], base, ["tps"])
    rows = []
    comps = _levels_of(runs, "compression", exp) if runs["compression"].nunique() > 1 else [None]
    for extra in _product({f: _levels_of(runs, f, exp) for f in extras}):
        for eng in _levels_of(runs, "engine", exp):
            for comp in comps:
                for cache in _levels_of(runs, "cache_pct", exp):
                    at = _at(runs, engine=eng, cache_pct=cache, **extra,
                             **({"compression": comp} if comp is not None else {}))
                    try:
                        e = ratio_estimate(runs, "tps", "block_size", a, b, at, level_order=exp.factors)
                    except NotTestable:
                        continue
                    rows.append({"engine": eng, **({"compression": comp} if comp is not None else {}),
                                 **extra, "cache_pct": cache, "estimate": e.estimate, "ci_lo": e.ci_lo,
                                 "ci_hi": e.ci_hi, "basis": e.basis})
    if not rows:
        raise FigureDataError("block size figure: no estimable ratio")
    return _with_emulated(pd.DataFrame(rows), runs), str(a), str(b)


def _with_emulated(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """`table` with the device each emulated medium of its ``medium`` column stands in for (empty: real)."""
    if "medium" not in table or "emulated" not in runs or table.empty:
        return table
    emu = runs.groupby("medium", sort=False)["emulated"].first()
    return table.assign(emulated=table["medium"].map(lambda m: as_text(emu.get(m)) or None))


def _gm_ci(values: np.ndarray) -> tuple[float, float, float]:
    logs = np.log(values)
    lo, hi = t_mean_ci(logs) if logs.size > 1 else (math.nan, math.nan)
    return math.exp(logs.mean()), math.exp(lo), math.exp(hi)


def adjusted_means(runs: pd.DataFrame, metric: str, by: Sequence[str],
                   level_order: Mapping[str, Sequence[Any]] | None = None) -> pd.DataFrame:
    """Geometric means of `metric` at every combination of the `by` levels, averaged over the other
    factors by the two-way factorial model (:func:`dbmatrix.analyse.contrasts.fit_log_model`), with 95 % CIs;
    when `by` holds every factor the runs vary, each cell's own geometric mean and t interval over its runs
    (a full factorial gets its cell means, whatever its higher interactions). When
    the two-way model is not estimable on the runs that measured the metric, one main-effects model per
    combination of ``by[:-1]``; with a single cell, the plain geometric mean and its t interval."""
    from dbmatrix.analyse.contrasts import fit_log_model, ordered_levels, positive_values, varied

    data = positive_values(runs, metric)
    by = [f for f in by if f in data.columns]
    cols = [*by, "mean", "ci_lo", "ci_hi", "basis"]
    if data.empty or not by:
        return pd.DataFrame(columns=cols)
    order = level_order or {}
    factors = factor_columns(data)
    levels = {f: ordered_levels(data[f], order.get(f)) for f in by}
    rows = []
    if set(varied(data, factors)) <= set(by):  # a full factorial's cells: their own means
        for combo in _product(levels):
            sub = data
            for f, v in combo.items():
                sub = sub[sub[f].map(level_key) == level_key(v)]
            if sub.empty:
                continue
            m, lo, hi = _gm_ci(sub[metric].astype(float).to_numpy())
            rows.append({**combo, "mean": m, "ci_lo": lo, "ci_hi": hi, "basis": "the cell's runs"})
        return pd.DataFrame(rows, columns=cols)
    model = fit_log_model(data, factors, metric, level_order=order)
    if model is not None and (model.name == "main+2way" or len([f for f in by if f in model.factors]) <= 1):
        for combo in _product(levels):
            m, lo, hi = model.mean({f: v for f, v in combo.items() if f in model.factors})
            rows.append({**combo, "mean": m, "ci_lo": lo, "ci_hi": hi, "basis": f"{model.name} model"})
        return pd.DataFrame(rows, columns=cols)
    outer, last = by[:-1], by[-1]
    for combo in _product({f: levels[f] for f in outer}):
        sub = data
        for f, v in combo.items():
            sub = sub[sub[f].map(level_key) == level_key(v)]
        m1 = fit_log_model(sub, factors, metric, interactions=False, level_order=order)
        for v in levels[last]:
            if m1 is not None and last in m1.factors:
                m, lo, hi = m1.mean({last: v})
                basis = "main-effects model within " + ", ".join(f"{k}={x}" for k, x in combo.items())
            else:
                vals = sub.loc[sub[last].map(level_key) == level_key(v), metric].astype(float).to_numpy()
                if vals.size == 0:
                    continue
                m, lo, hi = _gm_ci(vals)
                basis = "geometric mean of the runs"
            rows.append({**combo, last: v, "mean": m, "ci_lo": lo, "ci_hi": hi, "basis": basis})
    return pd.DataFrame(rows, columns=cols)


def _product(levels: dict[str, list[Any]]) -> list[dict[str, Any]]:
    from dbmatrix.analyse.contrasts import level_product

    return level_product(levels) if levels else [{}]


def dataset_sizes(runs: pd.DataFrame) -> pd.DataFrame:
    """On-disk size of each dataset (engine x block size x compression), measured once after loading."""
    keys = [f for f in ("engine", "block_size", "compression") if f in runs.columns]
    if "data_physical_bytes" not in runs.columns or not keys:
        return pd.DataFrame(columns=[*keys, "data_physical_bytes"])
    return runs.dropna(subset=["data_physical_bytes"]).groupby(keys, sort=True)[
        "data_physical_bytes"].median().reset_index()


def compression_tables(st: StudyTables) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Throughput and KiB written per transaction per engine x block size x compression at each cache level
    (block size and cache only where the study varies them; model-adjusted over the other factors, within
    one cache level at a time, so that a two-way model's mean at block size x compression is that cell
    family's own), and the dataset sizes. Block size and cache interact with compression (the 4 KB + lz4
    collapse), so no mean is taken over them; nor over any other factor whose interaction with compression
    is significant (:func:`dbmatrix.analyse.interactions.split_factors`: the medium, in the paper's TPC-C
    study), which the tables then hold as a column (each cell its own mean once every factor is held)."""
    from dbmatrix.analyse.contrasts import ordered_levels
    from dbmatrix.analyse.interactions import split_factors

    runs, exp = st.runs, st.experiment
    _require_varied(runs, "compression", "compression figure")
    by = ["engine", *(["block_size"] if runs["block_size"].nunique() > 1 else [])]
    by += [*split_factors(runs, factor_columns(runs), ["compression"], [*by, "cache_pct"],
                          ["tps", "write_kb_per_txn"]), "compression"]
    split = "cache_pct" in runs and runs["cache_pct"].nunique() > 1

    def means(metric: str) -> pd.DataFrame:
        if not split:
            return adjusted_means(runs, metric, by, exp.factors)
        parts = []
        for lvl in ordered_levels(runs["cache_pct"], exp.factors.get("cache_pct")):
            t = adjusted_means(runs[runs["cache_pct"] == lvl], metric, by, exp.factors)
            t.insert(len(by) - 1, "cache_pct", lvl)
            parts.append(t)
        return pd.concat(parts, ignore_index=True)

    return _with_emulated(means("tps"), runs), dataset_sizes(runs), _with_emulated(means("write_kb_per_txn"), runs)


def medium_cache_tables(st: StudyTables) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Throughput and p95 latency per engine x medium x cache level (model-adjusted), with the label of
    the device an emulated medium stands in for; per level of every other factor whose interaction with
    the medium or the cache is significant (:func:`dbmatrix.analyse.interactions.split_factors`: block size
    and compression in the paper's TPC-C study, where each point is then a cell's own mean)."""
    from dbmatrix.analyse.interactions import split_factors

    runs, exp = st.runs, st.experiment
    _require_varied(runs, "medium", "medium x cache figure")
    _require_varied(runs, "cache_pct", "medium x cache figure")
    extras = split_factors(runs, factor_columns(runs), ["medium", "cache_pct"], ["engine"], ["tps", "p95_ms"])
    by = ["engine", *extras, "medium", "cache_pct"]
    return (_with_emulated(adjusted_means(runs, "tps", by, exp.factors), runs),
            _with_emulated(adjusted_means(runs, "p95_ms", by, exp.factors), runs))


def cell_label(row: pd.Series, varied: Sequence[str]) -> str:
    """A short cell label from its varied factors: innodb c25 16k lz4 tmpfs."""
    parts = []
    for f in varied:
        v = row[f]
        parts.append(f"c{level_text(v)}" if f == "cache_pct" else f"{level_text(v)} thr" if f == "threads"
                     else level_text(v))
    return " ".join(parts) or str(row["cell_id"])


def timeline_cells(st: StudyTables, chosen: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The cells whose per-second series figure 5 shows: `chosen`, else the slowest and the fastest."""
    cells = st.cells.sort_values(["mean", "cell_id"], kind="stable")
    if cells.empty:
        raise FigureDataError("throughput over time: no cells")
    if chosen:
        unknown = sorted(set(chosen) - set(cells["cell_id"]))
        if unknown:
            raise FigureDataError(f"throughput over time: no cells {', '.join(unknown)}; cells: "
                                        f"{', '.join(cells['cell_id'])}")
        ids = list(chosen)
    else:
        ids = list(dict.fromkeys([cells["cell_id"].iloc[0], cells["cell_id"].iloc[-1]]))
    varied = [f for f in FACTORS if f in cells.columns and cells[f].map(level_key).nunique() > 1]
    rows = cells.set_index("cell_id", drop=False)
    return ids, {c: cell_label(rows.loc[c], varied) for c in ids}


EFFICIENCY_FIGURE_METRICS = ("mysqld_cpu_us_per_txn", "host_cpu_us_per_txn", "read_kb_per_txn",
                             "write_kb_per_txn")


def baseline_cell(st: StudyTables) -> str:
    """The baseline configuration: the spec's baseline levels, the other factors at their reference
    levels (:func:`reference_levels`); the existing cell matching most of them."""
    cells, exp = st.cells, st.experiment
    factors = [f for f in FACTORS if f in cells.columns and cells[f].map(level_key).nunique() > 1]
    want = {**reference_levels(exp, cells, factors), **{k: v for k, v in baseline_levels(exp).items()
                                                         if k in factors}}
    score = sum((cells[f].map(level_key) == level_key(v)).astype(int) * (2 if f in exp.baseline else 1)
                for f, v in want.items()) if want else pd.Series(0, index=cells.index)
    best = cells.assign(_s=score).sort_values(["_s", "cell_id"], ascending=[False, True], kind="stable")
    return str(best["cell_id"].iloc[0])


def efficiency_figure_table(st: StudyTables) -> tuple[pd.DataFrame, str]:
    """Every cell's hardware cost per transaction relative to the baseline cell: ratio of geometric means
    with a Welch 95 % CI (ratio of means without an interval where a run measured zero)."""
    runs, cells = st.runs, st.cells
    base = baseline_cell(st)
    varied = [f for f in FACTORS if f in cells.columns and cells[f].map(level_key).nunique() > 1]
    by_id = cells.set_index("cell_id", drop=False)
    rows = []
    base_runs = runs[runs["cell_id"] == base]
    for m in EFFICIENCY_FIGURE_METRICS:
        if m not in runs.columns:
            continue
        b = pd.to_numeric(base_runs[m], errors="coerce").dropna().to_numpy(dtype=float)
        if b.size == 0 or b.mean() <= 0:
            continue
        for cid in cells["cell_id"]:
            v = pd.to_numeric(runs.loc[runs["cell_id"] == cid, m], errors="coerce").dropna().to_numpy(dtype=float)
            if v.size == 0:
                continue
            if (v > 0).all() and (b > 0).all():
                w = welch_log_ratio(v, b)
                ratio, lo, hi = w["ratio"], w["ci_lo"], w["ci_hi"]
            else:
                ratio, lo, hi = v.mean() / b.mean(), math.nan, math.nan
            label = cell_label(by_id.loc[cid], varied) + (" (baseline)" if cid == base else "")
            base_gm = math.exp(np.log(b).mean()) if (b > 0).all() else float(b.mean())
            rows.append({"cell_id": cid, "label": label,
                         "metric": m, "ratio": ratio, "ci_lo": lo, "ci_hi": hi, "baseline_mean": float(b.mean()),
                         "n": int(v.size), "run_ratios": tuple(float(x) for x in v / base_gm)})
    if not rows:
        raise FigureDataError("efficiency: no per-transaction metric measured in the baseline cell")
    return pd.DataFrame(rows), cell_label(by_id.loc[base], varied)


