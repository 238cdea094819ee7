"""What the exploration notebook (40) and the live view of notebook 10 call.

- Results directories, runs tables and filters (:func:`available_results`, :func:`load_runs_table`,
  :func:`filter_runs`).
- :class:`Explorer`: ipywidgets to pick the results directory (and the campaign, where the runs table has a
  ``campaign`` column), the levels of every varied factor, x, metric and hue; the plot (the paper's plotting
  function :func:`dbmatrix.publish.figures.metric_by_factor`) and a formatted table (mean with its 95 % CI,
  "553 (524–583)", units in the header) update on every change. The widget model works without a browser,
  so the unit tests drive it by setting values.
- :class:`LiveThroughput`: a small live chart of sysbench's per-second lines while runs measure; its
  :meth:`~LiveThroughput.on_interval` is the ``on_interval`` callback of ``steps.run_all``.
"""

from __future__ import annotations

import base64
import html
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.analyse.tables import factor_columns, read_csv
from dbmatrix.spec.experiment import FACTOR_DEFAULTS, FACTORS
from dbmatrix.spec.factors import factor_title

__all__ = ["Explorer", "LiveThroughput", "available_results", "factor_columns", "filter_runs",
           "format_estimate", "format_number", "live_throughput", "load_runs_table", "metric_label",
           "metric_options", "metric_unit", "summary_table"]


DEFAULT_EXPLORE = "storage-matrix-quick"  # the committed reference the exploration notebook opens


def available_results() -> list[Path]:
    """Results directories under data/runs and data/reference that have processed tables."""
    from dbmatrix.paths import reference_root, runs_root

    out: list[Path] = []
    for root in (runs_root(), reference_root()):
        if root.is_dir():
            out += sorted(d for d in root.iterdir() if (d / "processed" / "runs.csv").is_file())
    return out


def load_runs_table(run_dir: str | Path | None = None) -> pd.DataFrame:
    """The processed runs table of a results directory (default: the committed reference of the storage
    matrix): one row per run with its factor levels, throughput, latency and efficiency metrics."""
    d = _results_path(run_dir)
    f = d / "processed" / "runs.csv"
    if not f.is_file():
        have = ", ".join(str(p) for p in available_results()) or "none"
        raise FileNotFoundError(f"run_dir: {d} has no processed/runs.csv (run notebook 20 or `dbmatrix analyse "
                                f"--results {d}` first); directories with processed tables: {have}")
    return read_csv(f)


def _results_path(run_dir: str | Path | None) -> Path:
    from dbmatrix.paths import reference_dir

    return Path(run_dir) if run_dir else reference_dir(DEFAULT_EXPLORE)


def filter_runs(runs: pd.DataFrame, filters: dict[str, Any] | None) -> pd.DataFrame:
    """Runs whose factor levels match `filters` ({factor: level or [levels]}); unknown factors or levels
    are errors that name the allowed values."""
    out = runs
    for f, want in (filters or {}).items():
        if f not in runs.columns:
            raise ValueError(f"filters: {f!r} is not a column of the runs; factors: "
                             f"{', '.join(c for c in FACTORS if c in runs.columns)}")
        levels = want if isinstance(want, (list, tuple, set)) else [want]
        present = {str(v): v for v in runs[f].dropna().unique()}
        missing = [v for v in levels if str(v) not in present]
        if missing:
            raise ValueError(f"filters.{f}: {', '.join(map(str, missing))} not among the levels "
                             f"{', '.join(sorted(present))}")
        out = out[out[f].astype(str).isin({str(v) for v in levels})]
    return out


# ------------------------------------------------------------------------------------ labels and units

# Metrics a person looks at first, in this order: (label, unit). Others follow by name, units by suffix.
METRICS: dict[str, tuple[str, str]] = {
    "tps": ("Throughput", "txn/s"),
    "qps": ("Queries", "queries/s"),
    "tps_steady": ("Steady-state throughput", "txn/s"),
    "p50_ms": ("p50 latency", "ms"),
    "p95_ms": ("p95 latency", "ms"),
    "p99_ms": ("p99 latency", "ms"),
    "lat_avg_ms": ("Mean latency", "ms"),
    "sec_tps_cv": ("Per-second throughput CV", ""),
    "sec_tps_p1": ("Per-second throughput, 1st percentile", "txn/s"),
    "stall_s": ("Stalled seconds", "s"),
    "mysqld_cpu_us_per_txn": ("mysqld CPU", "µs/txn"),
    "host_cpu_us_per_txn": ("Host CPU", "µs/txn"),
    "read_kb_per_txn": ("Device reads", "KiB/txn"),
    "write_kb_per_txn": ("Device writes", "KiB/txn"),
    "read_ios_per_txn": ("Read requests", "I/Os/txn"),
    "write_ios_per_txn": ("Write requests", "I/Os/txn"),
    "read_mb_s": ("Device read rate", "MB/s"),
    "write_mb_s": ("Device write rate", "MB/s"),
    "dev_util_pct": ("Device busy", "%"),
    "host_iowait_cpus": ("I/O wait", "CPUs"),
    "space_amp": ("Space amplification", "×"),
    "write_amp": ("Write amplification", "×"),
    "data_physical_bytes": ("On-disk size of the tables", "bytes"),
}
_SUFFIX_UNITS = (("_us_per_txn", "µs/txn"), ("_kb_per_txn", "KiB/txn"), ("_ios_per_txn", "I/Os/txn"),
                 ("_mb_s", "MB/s"), ("_ms", "ms"), ("_pct", "%"), ("_bytes", "bytes"), ("_ps", "/s"),
                 ("_s", "s"), ("_amp", "×"))
# Columns of the runs table that are not factors but can split the runs like one.
COLUMN_TITLES = {"campaign": "Campaign", "host": "Host", "host_class": "Host class"}
# Factors named as "same in every run" even at their default; the others (open loop, log medium, Galera)
# only when a study sets them.
ALWAYS_SHOWN = ("engine", "cache_pct", "block_size", "compression", "medium", "threads", "workload")
# Numeric columns that describe how a run was scheduled, not what it measured.
BOOKKEEPING = frozenset({"repetition", "block", "order", "adaptive", "cache_clamped_to_minimum"})


def metric_unit(metric: str) -> str:
    if metric in METRICS:
        return METRICS[metric][1]
    if metric.startswith(("tps", "sec_tps")):
        return "txn/s"
    return next((u for suffix, u in _SUFFIX_UNITS if metric.endswith(suffix)), "")


def metric_label(metric: str, *, unit: bool = True) -> str:
    """``Throughput (txn/s)``; a column without a known label keeps its name."""
    name = METRICS.get(metric, (metric, ""))[0]
    u = metric_unit(metric)
    return f"{name} ({u})" if unit and u else name


def factor_label(factor: str) -> str:
    """A factor's long name from the factor registry (or a splitting column's, e.g. the host)."""
    return COLUMN_TITLES.get(factor) or factor_title(factor)


def split_columns(runs: pd.DataFrame) -> list[str]:
    """The factors of the runs table, and the host (and its class) when the runs come from several hosts:
    what the explorer filters and plots by."""
    extra = [c for c in ("host", "host_class") if c in runs.columns and runs[c].nunique(dropna=True) > 1]
    return [*factor_columns(runs), *extra]


def metric_options(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, column) of every numeric measured column: the known metrics first, then the rest by name."""
    skip = set(factor_columns(runs)) | BOOKKEEPING | {"campaign"}
    numeric = [c for c in runs.columns if c not in skip and runs[c].dtype.kind in "fiu" and runs[c].notna().any()]
    known = [m for m in METRICS if m in numeric]
    rest = sorted(c for c in numeric if c not in METRICS)
    return [(f"{metric_label(c)} · {c}" if c in METRICS else metric_label(c), c) for c in known + rest]


# ------------------------------------------------------------------------------------ formatting


def _decimals(ref: float) -> int:
    a = abs(ref)
    if not math.isfinite(a) or a == 0 or a >= 100:
        return 0
    if a >= 10:
        return 1
    if a >= 1:
        return 2
    return min(6, 2 - math.floor(math.log10(a)))  # three significant digits below 1


def format_number(v: Any, ref: float | None = None) -> str:
    """A number for a person: precision from the size of `ref` (default `v`), thousands separated."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return "–"
    return f"{f:,.{_decimals(f if ref is None else ref)}f}"


def format_estimate(mean: float, lo: float, hi: float) -> str:
    """``553 (524–583)``: the estimate with its interval, all at the estimate's precision; one run has no
    interval (``553 (one run)``)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{format_number(mean)} (one run)"
    return f"{format_number(mean)} ({format_number(lo, mean)}–{format_number(hi, mean)})"


def _level(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def summary_table(summary: pd.DataFrame, x: str, metric: str, hue: str | None = None) -> pd.DataFrame:
    """The plot's summary (``metric_by_factor``'s: level, n, mean, ci_lo, ci_hi) as a table a person reads:
    levels as text, the runs, and "mean (95 % CI)" in one column whose header carries the unit."""
    head = f"{metric_label(metric)}, mean (95 % CI)"
    cols = [factor_label(x)] + ([factor_label(hue)] if hue else []) + ["runs", head]
    if summary.empty:
        return pd.DataFrame(columns=cols)
    s = summary.sort_values([x] + ([hue] if hue else []), kind="stable",
                            key=lambda c: c.map(lambda v: (isinstance(v, str), v)))
    out = pd.DataFrame({factor_label(x): s[x].map(_level)})
    if hue:
        out[factor_label(hue)] = s[hue].map(_level)
    out["runs"] = s["n"].astype(int)
    out[head] = [format_estimate(m, lo, hi) for m, lo, hi in zip(s["mean"], s["ci_lo"], s["ci_hi"])]
    return out.reset_index(drop=True)


def table_html(table: pd.DataFrame) -> str:
    """The formatted table as HTML (no index, numbers right-aligned), for JupyterLab's output area."""
    return (table.style.hide(axis="index")
            .set_properties(subset=[c for c in table.columns if c == "runs" or "mean" in c],
                            **{"text-align": "right", "font-variant-numeric": "tabular-nums"})
            .to_html())


def _display_data(data: dict[str, Any], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"output_type": "display_data", "data": data, "metadata": metadata or {}}


# ------------------------------------------------------------------------------------ the explorer


def _results_label(path: Path) -> str:
    from dbmatrix.paths import is_reference

    return f"{path.name} · {'committed reference' if is_reference(path) else 'runs'}"


class LevelFilter:
    """One factor's levels as toggle buttons (pressed: included)."""

    def __init__(self, factor: str, levels: Sequence[Any], selected: Sequence[Any] | None = None) -> None:
        import ipywidgets as w

        self.factor = factor
        self.levels = list(levels)
        want = {str(v) for v in (self.levels if selected is None else selected)}
        self.buttons = [w.ToggleButton(value=str(v) in want, description=_level(v), tooltip=f"{factor} = {v}",
                                       layout=w.Layout(width="auto", min_width="4.5em"))
                        for v in self.levels]
        self.widget = w.HBox([w.Label(factor_label(factor), layout=w.Layout(width="11em")), *self.buttons],
                             layout=w.Layout(align_items="center"))
        self._callbacks: list[Any] = []
        self._setting = False
        for b in self.buttons:
            b.button_style = "info" if b.value else ""
            b.observe(self._style, names="value")
            b.observe(self._changed, names="value")

    @property
    def value(self) -> tuple[Any, ...]:
        return tuple(v for v, b in zip(self.levels, self.buttons) if b.value)

    @value.setter
    def value(self, levels: Sequence[Any]) -> None:
        """Press exactly `levels`; observers hear one change, not one per button."""
        want, before = {str(v) for v in levels}, self.value
        self._setting = True
        try:
            for v, b in zip(self.levels, self.buttons):
                b.value = str(v) in want
        finally:
            self._setting = False
        if self.value != before:
            self._changed({"name": "value", "old": before, "new": self.value, "owner": self})

    def observe(self, callback: Any) -> None:
        self._callbacks.append(callback)

    @staticmethod
    def _style(change: dict[str, Any]) -> None:
        change["owner"].button_style = "info" if change["new"] else ""  # pressed: coloured

    def _changed(self, change: dict[str, Any]) -> None:
        if not self._setting:
            for cb in self._callbacks:
                cb(change)


class Explorer:
    """Widgets to explore a runs table; display it in a notebook (``explorer`` as a cell's last line).

    Attributes after each render: ``selected`` (the runs shown), ``summary`` (level, n, mean, CI),
    ``table`` (formatted), ``png`` (the figure), ``renders`` (how many times it drew).
    """

    FIGSIZE = (4.8, 2.8)  # inches at DPI: a plot that fits beside Lab's file browser
    DPI = 150

    def __init__(self, run_dir: str | Path | None = None, *, filters: dict[str, Any] | None = None,
                 x: str | None = "cache_pct", metric: str = "tps", hue: str | None = None,
                 results: Sequence[str | Path] | None = None) -> None:
        import ipywidgets as w

        start = _results_path(run_dir).resolve()
        paths = [Path(p).resolve() for p in (available_results() if results is None else results)]
        if start not in paths:
            paths.insert(0, start)
        self.renders = 0
        self.error: str | None = None
        self.png: bytes | None = None
        self.summary = pd.DataFrame()
        self.table = pd.DataFrame()
        self._hold = False
        self.filters: dict[str, LevelFilter] = {}

        label = {"description_width": "initial"}
        self.results_w = w.Dropdown(options=[(_results_label(p), str(p)) for p in paths], value=str(start),
                                    description="Results", style=label, layout=w.Layout(width="34em"))
        self.campaign_w = w.Dropdown(description="Campaign", style=label,
                                     layout=w.Layout(width="22em", display="none", margin="0 0 0 1em"))
        self.x_w = w.Dropdown(description="x axis", style=label, layout=w.Layout(width="16em"))
        self.metric_w = w.Dropdown(description="Metric", style=label, layout=w.Layout(width="30em", margin="0 1em"))
        self.hue_w = w.Dropdown(description="Colour by", style=label, layout=w.Layout(width="16em"))
        self.filter_box = w.VBox(layout=w.Layout(margin="4px 0 4px 0"))
        self.constants = w.HTML()
        self.status = w.HTML()
        self.figure_out = w.Output(layout=w.Layout(margin="0 16px 0 0"))
        self.table_out = w.Output()
        self.ui = w.VBox([
            w.HBox([self.results_w, self.campaign_w], layout=w.Layout(flex_flow="row wrap")),
            w.HTML("<b>Filter</b> (pressed levels are shown)"), self.filter_box, self.constants,
            w.HBox([self.x_w, self.metric_w, self.hue_w], layout=w.Layout(flex_flow="row wrap")),
            self.status,
            w.HBox([self.figure_out, self.table_out], layout=w.Layout(flex_flow="row wrap",
                                                                      align_items="flex-start")),
        ])
        self._load(start, filters=filters, x=x, metric=metric, hue=hue)
        self.results_w.observe(self._on_results, names="value")
        for wd in (self.campaign_w, self.x_w, self.metric_w, self.hue_w):
            wd.observe(self._on_change, names="value")

    # ---- state

    def _load(self, path: Path, *, filters: dict[str, Any] | None = None, x: str | None = None,
              metric: str | None = None, hue: str | None = None) -> None:
        """Read a results directory and rebuild the controls for its runs (keeping choices that still
        apply), then draw once."""
        import ipywidgets as w

        runs = load_runs_table(path)
        if filters:
            filter_runs(runs, filters)  # unknown factors or levels: an error that names the allowed ones
        self.runs = runs
        factors = split_columns(runs)
        varied = [f for f in factors if runs[f].nunique(dropna=True) > 1]
        self.varied = varied
        self._hold = True
        try:
            if "campaign" in runs.columns:
                camps = sorted(runs["campaign"].dropna().astype(str).unique())
                self.campaign_w.options = [("all campaigns", "")] + [(c, c) for c in camps]
                self.campaign_w.value = ""
                self.campaign_w.layout.display = None
            else:
                self.campaign_w.options = [("all campaigns", "")]
                self.campaign_w.layout.display = "none"
            self.filters = {}
            for f in varied:
                levels = sorted(runs[f].dropna().unique().tolist(), key=lambda v: (isinstance(v, str), v))
                want = (filters or {}).get(f)
                sel = None if want is None else (want if isinstance(want, (list, tuple, set)) else [want])
                lf = LevelFilter(f, levels, None if sel is None else list(sel))
                lf.observe(self._on_change)
                self.filters[f] = lf
            self.filter_box.children = [lf.widget for lf in self.filters.values()] or [
                w.HTML("<i>no factor varies in these runs</i>")]
            const = [f"{factor_label(f)} {html.escape(_level(runs[f].dropna().iloc[0]))}"
                     for f in factors if f not in varied and runs[f].notna().any()
                     and (f in ALWAYS_SHOWN or str(runs[f].dropna().iloc[0]) != str(FACTOR_DEFAULTS[f]))]
            self.constants.value = (f"<span style='color:var(--jp-ui-font-color2)'>Same in every run: "
                                    f"{', '.join(const)}</span>") if const else ""
            axes = varied or factors
            self.x_w.options = [(factor_label(f), f) for f in axes]
            self.x_w.value = x if x in axes else (self.x_w.value if self.x_w.value in axes else axes[0])
            opts = metric_options(runs)
            self.metric_w.options = opts
            names = [c for _, c in opts]
            self.metric_w.value = metric if metric in names else (
                self.metric_w.value if self.metric_w.value in names else names[0])
            self.hue_w.options = [("nothing", "")] + [(factor_label(f), f) for f in varied]
            self.hue_w.value = hue if hue in varied else ""
        finally:
            self._hold = False
        self.render()

    @property
    def path(self) -> Path:
        return Path(self.results_w.value)

    @property
    def selection(self) -> dict[str, tuple[Any, ...]]:
        """The levels pressed per varied factor."""
        return {f: lf.value for f, lf in self.filters.items()}

    @property
    def selected(self) -> pd.DataFrame:
        """The runs the plot shows: the campaign chosen, then the levels pressed."""
        runs = self.runs
        if self.campaign_w.value and "campaign" in runs.columns:
            runs = runs[runs["campaign"].astype(str) == self.campaign_w.value]
        for f, levels in self.selection.items():
            runs = runs[runs[f].astype(str).isin({str(v) for v in levels})]
        return runs

    # ---- events

    def _on_results(self, change: dict[str, Any]) -> None:
        self._load(Path(change["new"]), x=self.x_w.value, metric=self.metric_w.value, hue=self.hue_w.value)

    def _on_change(self, change: dict[str, Any]) -> None:
        if not self._hold:
            self.render()

    # ---- drawing

    def figure(self) -> tuple[Any, pd.DataFrame]:
        """The plot of the selected runs and its summary (raises FigureDataError when there is nothing)."""
        from dbmatrix.publish import figures as plots

        x, metric = self.x_w.value, self.metric_w.value
        hue = self.hue_w.value if self.hue_w.value and self.hue_w.value != x else None
        plots.apply_style()
        fig = plots.NotebookFigure(figsize=self.FIGSIZE, dpi=self.DPI, layout="constrained")
        ax = fig.subplots()
        _, info = plots.metric_by_factor(self.selected, x=x, metric=metric, hue=hue, ax=ax)
        ax.set_xlabel(factor_label(x))
        ax.set_ylabel(metric_label(metric))
        ax.set_ylim(bottom=0)
        if hue and ax.get_legend():
            handles, labels = ax.get_legend_handles_labels()
            ax.legend(handles, [lab.split("=", 1)[-1] for lab in labels], frameon=False, fontsize=6,
                      title=factor_label(hue), title_fontsize=6)
        return fig, info["summary"]

    def render(self) -> None:
        from dbmatrix.analyse.figure_data import FigureDataError

        sel = self.selected
        x, metric = self.x_w.value, self.metric_w.value
        hue = self.hue_w.value if self.hue_w.value and self.hue_w.value != x else None
        n_all = len(self.runs)
        try:
            fig, summary = self.figure()
        except FigureDataError as exc:
            self.error, self.png, self.summary = str(exc), None, pd.DataFrame()
            self.table = summary_table(self.summary, x, metric, hue)
            why = "no runs match the filter" if sel.empty else html.escape(str(exc))
            self.figure_out.outputs = (_display_data({"text/plain": why, "text/html": f"<p><i>{why}</i></p>"}),)
            self.table_out.outputs = ()
        else:
            self.error = None
            self.png = fig._repr_png_()
            self.summary = summary
            self.table = summary_table(summary, x, metric, hue)
            alt = f"{metric_label(metric)} by {factor_label(x)}"
            self.figure_out.outputs = (_display_data(
                {"image/png": base64.b64encode(self.png).decode(), "text/plain": alt}),)
            self.table_out.outputs = (_display_data({"text/html": table_html(self.table),
                                                     "text/plain": self.table.to_string(index=False)}),)
        self.status.value = (f"<b>{len(sel)}</b> of {n_all} runs · {html.escape(self.path.name)} · mean per level "
                             f"with its Student-t 95 % CI; faint dots are the runs")
        self.renders += 1

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widgets where a widget manager renders them (JupyterLab), else the current plot (nbconvert,
        a static view of the executed notebook)."""
        bundle = dict(self.ui._repr_mimebundle_(**kwargs) or {})
        if self.png is not None:
            bundle["image/png"] = base64.b64encode(self.png).decode()
        bundle["text/plain"] = f"Explorer of {self.path} ({len(self.selected)} of {len(self.runs)} runs)"
        return bundle


# ------------------------------------------------------------------------------------ live throughput


class LiveThroughput:
    """A live chart of sysbench's per-second throughput while runs measure (notebook 10).

    ``on_interval(run_id, interval)`` takes each parsed per-second line (the dicts of
    :func:`dbmatrix.parse.sysbench.parse_intervals`: ``t_s``, ``tps``, ``qps``, ``lat_ms``, ...). The chart
    is an SVG string in an HTML widget, so an update costs the kernel microseconds, not a matplotlib render,
    on a machine that is measuring. The current run is drawn in colour, the ``keep - 1`` runs before it in
    grey. Safe to call from the runner's worker threads.
    """

    WIDTH, HEIGHT = 560, 170

    def __init__(self, keep: int = 4) -> None:
        import ipywidgets as w

        self.keep = keep
        self.series: OrderedDict[str, list[tuple[float, float]]] = OrderedDict()
        self.last: dict[str, Any] = {}
        self.current: str | None = None
        self.updates = 0
        self._lock = threading.Lock()
        self.html = w.HTML(value=self._html())
        self.ui = self.html

    def on_interval(self, run_id: str, interval: dict[str, Any]) -> None:
        t, tps = interval.get("t_s"), interval.get("tps")
        if t is None or tps is None:
            return
        with self._lock:
            if run_id not in self.series:
                self.series[run_id] = []
                while len(self.series) > self.keep:
                    self.series.popitem(last=False)
            self.series[run_id].append((float(t), float(tps)))
            self.current, self.last = run_id, dict(interval)
            value = self._html()
            self.updates += 1
        self.html.value = value

    def svg(self) -> str:
        """The chart: throughput over the measured seconds of the last runs (current one in colour)."""
        W, H, L, B, T, R = self.WIDTH, self.HEIGHT, 46, 22, 8, 8
        pts = [p for s in self.series.values() for p in s]
        tmax = max((t for t, _ in pts), default=1.0) or 1.0
        ymax = max((y for _, y in pts), default=1.0) or 1.0
        ymax = _nice_ceiling(ymax)

        def xy(t: float, y: float) -> str:
            return f"{L + (W - L - R) * t / tmax:.1f},{H - B - (H - B - T) * y / ymax:.1f}"

        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
                 f'font-family="sans-serif" font-size="11" role="img" aria-label="live throughput">',
                 f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="#999"/>',
                 f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="#999"/>',
                 f'<text x="{L - 4}" y="{T + 8}" text-anchor="end" fill="#666">{format_number(ymax)}</text>',
                 f'<text x="{L - 4}" y="{H - B}" text-anchor="end" fill="#666">0</text>',
                 f'<text x="{W - R}" y="{H - 6}" text-anchor="end" fill="#666">{_level(float(tmax))} s</text>',
                 f'<text x="{L}" y="{H - 6}" fill="#666">txn/s over the measured seconds</text>']
        for rid, s in self.series.items():
            if not s:
                continue
            now = rid == self.current
            parts.append(f'<polyline data-run="{html.escape(rid)}" fill="none" stroke="{"#0173b2" if now else "#bbb"}" '
                         f'stroke-width="{2 if now else 1}" points="{" ".join(xy(t, y) for t, y in s)}"/>')
        parts.append("</svg>")
        return "".join(parts)

    def _html(self) -> str:
        if not self.current:
            head = "<i>waiting for the first measured second…</i>"
        else:
            i = self.last
            lat = i.get("lat_ms")
            pct = i.get("lat_pct")
            lat_txt = (f" · p{_level(float(pct))} latency {format_number(lat)} ms" if lat is not None and pct
                       else f" · latency {format_number(lat)} ms" if lat is not None else "")
            qps = f" · {format_number(i['qps'])} queries/s" if i.get("qps") is not None else ""
            head = (f"<b>{html.escape(self.current)}</b> · {_level(float(i['t_s']))} s · "
                    f"<b>{format_number(i.get('tps'))} txn/s</b>{qps}{lat_txt}")
        return f"<div style='font-size:12px;line-height:1.6'>{head}</div>{self.svg()}"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = dict(self.ui._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = f"LiveThroughput ({len(self.series)} runs)"
        return bundle


def _nice_ceiling(v: float) -> float:
    """The next 1-2-5 step at or above v (axis top)."""
    if v <= 0 or not math.isfinite(v):
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    return next(m * e for m in (1, 2, 2.5, 5, 10) if m * e >= v)


def live_throughput(keep: int = 4) -> LiveThroughput | None:
    """A :class:`LiveThroughput`, displayed, when running in a Jupyter kernel with ipywidgets; else None
    (a plain Python session, or ipywidgets not installed): pass ``live.on_interval`` to ``run_all``."""
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    ip = get_ipython()
    if ip is None or not hasattr(ip, "kernel"):
        return None
    live = LiveThroughput(keep)
    display(live)
    return live
