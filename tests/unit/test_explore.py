"""The exploration widgets without a browser: the explorer's options, that a change re-renders, the formatted
table; the live throughput chart fed per-second intervals; run_all's on_interval pass-through."""

from __future__ import annotations

import base64
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dbmatrix import explore, steps
from dbmatrix.run.reports import RunReport

pytest.importorskip("ipywidgets")


def write_results(root: Path, runs: pd.DataFrame) -> Path:
    (root / "processed").mkdir(parents=True)
    runs.to_csv(root / "processed" / "runs.csv", index=False)
    return root


def small_runs(campaign: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for engine in ("innodb", "myrocks"):
        for cache in (25, 100):
            for rep in (1, 2, 3):
                base = (500 if engine == "innodb" else 300) * (1.6 if cache == 100 else 1.0)
                rows.append({"run_id": f"{engine}-{cache}-r{rep}", "engine": engine, "cache_pct": cache,
                             "medium": "disk", "threads": 4, "repetition": rep,
                             "tps": base + rng.normal(0, 10), "p95_ms": 10 + rng.normal(0, 1),
                             "write_kb_per_txn": 12.5 + rep, **({"campaign": f"c{rep % 2}"} if campaign else {})})
    return pd.DataFrame(rows)


def test_format_estimate_and_numbers() -> None:
    assert explore.format_estimate(553.2, 524.4, 582.9) == "553 (524–583)"
    assert explore.format_estimate(12.21, 10.2, 14.25) == "12.2 (10.2–14.2)"
    assert explore.format_estimate(1361.7, 1107.0, 1617.0) == "1,362 (1,107–1,617)"
    assert explore.format_estimate(0.0123, 0.0101, 0.01456) == "0.0123 (0.0101–0.0146)"
    assert explore.format_estimate(553.0, float("nan"), float("nan")) == "553 (one run)"
    assert explore.format_number(float("nan")) == "–"
    assert explore.metric_unit("tps") == "txn/s" and explore.metric_unit("p99_ms") == "ms"
    assert explore.metric_unit("proc_write_kb_per_txn") == "KiB/txn"
    assert explore.metric_label("mysqld_cpu_us_per_txn") == "mysqld CPU (µs/txn)"


def test_summary_table_reads_like_a_table() -> None:
    summary = pd.DataFrame({"cache_pct": [100, 25], "engine": ["a", "a"], "n": [3, 1],
                            "mean": [905.1, 553.0], "ci_lo": [827.4, np.nan], "ci_hi": [982.0, np.nan]})
    t = explore.summary_table(summary, "cache_pct", "tps", hue="engine")
    assert list(t.columns) == ["Cache (% of data)", "Engine", "runs", "Throughput (txn/s), mean (95 % CI)"]
    assert t.values.tolist() == [["25", "a", 1, "553 (one run)"], ["100", "a", 3, "905 (827–982)"]]
    html = explore.table_html(t)
    assert "<table" in html and "905 (827–982)" in html and ">0<" not in html  # no bare index


def test_explorer_options_render_and_react(tmp_path: Path) -> None:
    ref = write_results(tmp_path / "ref", small_runs())
    ex = explore.Explorer(ref, filters={"engine": "myrocks"}, x="cache_pct", metric="tps", hue="engine",
                          results=[ref])
    # options: varied factors only (medium and threads are the same in every run), metrics with units
    assert [v for _, v in ex.x_w.options] == ["engine", "cache_pct"]
    assert [v for _, v in ex.hue_w.options] == ["", "engine", "cache_pct"]
    metrics = [v for _, v in ex.metric_w.options]
    assert metrics[:2] == ["tps", "p95_ms"] and "repetition" not in metrics and "threads" not in metrics
    assert "Client threads 4" in ex.constants.value and "Medium disk" in ex.constants.value
    assert ex.campaign_w.layout.display == "none"  # no campaign column: no campaign control
    assert ex.selection == {"engine": ("myrocks",), "cache_pct": (25, 100)}
    assert ex.renders == 1 and len(ex.selected) == 6 and ex.png.startswith(b"\x89PNG")
    assert ex.table["runs"].tolist() == [3, 3]
    first = ex.png
    out = ex.figure_out.outputs[0]["data"]["image/png"]
    assert base64.b64decode(out) == first and "<table" in ex.table_out.outputs[0]["data"]["text/html"]

    ex.filters["engine"].buttons[0].value = True  # press innodb
    assert ex.renders == 2 and len(ex.selected) == 12 and ex.png != first
    assert ex.table["Engine"].tolist() == ["innodb", "myrocks", "innodb", "myrocks"]
    ex.metric_w.value = "write_kb_per_txn"
    assert ex.renders == 3 and ex.table.columns[-1] == "Device writes (KiB/txn), mean (95 % CI)"
    assert ex.table.iloc[0, -1] == "14.5 (12.0–17.0)"
    ex.hue_w.value = ""
    assert ex.renders == 4 and list(ex.table.columns)[:2] == ["Cache (% of data)", "runs"]
    ex.x_w.value = "engine"
    assert ex.renders == 5 and ex.table.iloc[:, 0].tolist() == ["innodb", "myrocks"]

    ex.filters["engine"].value = ()  # nothing pressed: a message, not an error
    assert ex.renders == 6 and ex.png is None and ex.selected.empty
    assert "no runs match" in ex.figure_out.outputs[0]["data"]["text/plain"]

    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/plain" in bundle


def test_explorer_switches_results_and_shows_campaigns_only_when_there_are_some(tmp_path: Path) -> None:
    a = write_results(tmp_path / "a", small_runs())
    b = write_results(tmp_path / "b", small_runs(campaign=True))
    ex = explore.Explorer(a, x="cache_pct", metric="p95_ms", results=[a, b])
    assert [Path(v) for _, v in ex.results_w.options] == [a.resolve(), b.resolve()]
    assert ex.campaign_w.layout.display == "none"
    n = ex.renders
    ex.results_w.value = str(b.resolve())
    assert ex.renders == n + 1, "a new results directory draws once, not once per rebuilt control"
    assert ex.campaign_w.layout.display is None and [v for _, v in ex.campaign_w.options] == ["", "c0", "c1"]
    assert ex.metric_w.value == "p95_ms" and ex.x_w.value == "cache_pct"  # choices that still apply stay
    ex.campaign_w.value = "c1"
    assert ex.renders == n + 2 and set(ex.selected["campaign"]) == {"c1"} and len(ex.selected) == 8
    ex.results_w.value = str(a.resolve())
    assert ex.campaign_w.layout.display == "none" and len(ex.selected) == 12


def test_explorer_names_unknown_filters(tmp_path: Path) -> None:
    ref = write_results(tmp_path / "ref", small_runs())
    with pytest.raises(ValueError, match="filters.engine: aria not among the levels innodb, myrocks"):
        explore.Explorer(ref, filters={"engine": "aria"}, results=[ref])


def test_explorer_opens_the_committed_reference() -> None:
    ex = explore.Explorer(filters={"engine": "myrocks"}, x="cache_pct", metric="tps", hue="medium")
    assert ex.path.name == "storage-matrix-quick" and len(ex.selected) == 32  # two campaigns of 16
    assert ex.table.iloc[0].tolist()[:3] == ["25", "disk", 8] and "(" in ex.table.iloc[0, -1]
    assert ex.campaign_w.layout.display is None and [v for _, v in ex.campaign_w.options] == ["", "1", "2"]
    ex.campaign_w.value = "2"
    assert len(ex.selected) == 16 and set(ex.selected["campaign"].astype(str)) == {"2"}


def intervals(n: int, base: float) -> list[dict[str, Any]]:
    return [{"t_s": float(t), "threads": 4, "tps": base + t, "qps": 20 * (base + t), "lat_ms": 12.5,
             "lat_pct": 95.0, "err_ps": 0.0} for t in range(1, n + 1)]


def test_live_throughput_follows_the_intervals() -> None:
    live = explore.LiveThroughput(keep=2)
    assert "waiting" in live.html.value
    for i in intervals(30, 500):
        live.on_interval("run-a", i)
    assert live.updates == 30 and live.current == "run-a"
    value = live.html.value
    assert "<b>run-a</b> · 30 s · <b>530 txn/s</b>" in value and "p95 latency 12.5 ms" in value
    assert value.count("<polyline") == 1 and value.count(",") >= 30
    for i in intervals(5, 300):
        live.on_interval("run-b", i)
    for i in intervals(3, 100):
        live.on_interval("run-c", i)
    assert list(live.series) == ["run-b", "run-c"], "only the last `keep` runs are drawn"
    svg = live.svg()
    assert svg.count("<polyline") == 2 and 'data-run="run-c" fill="none" stroke="#0173b2"' in svg
    live.on_interval("run-c", {"t_s": 4.0, "tps": None})  # a line without throughput is skipped
    assert live.updates == 38
    assert "application/vnd.jupyter.widget-view+json" in live._repr_mimebundle_()


def test_live_throughput_is_none_outside_a_kernel() -> None:
    assert explore.live_throughput() is None


def test_run_all_passes_on_interval_through(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    class S:
        class experiment:
            name = "e"

    def with_hook(study: Any, *, progress: bool = True, on_interval: Any = None,
                  campaign: Any = None, registration: Any = None) -> RunReport:
        calls.append({"progress": progress, "on_interval": on_interval, "campaign": campaign})
        if on_interval:
            for i in intervals(2, 10):
                on_interval("r1", i)
        return RunReport(campaign=1, campaign_reason="", planned=1, already_done=0, ok=1)

    monkeypatch.setattr(steps, "run_study", with_hook)
    monkeypatch.setattr(steps, "study_status", lambda s: SimpleNamespace(as_dict=dict))
    monkeypatch.setattr(steps, "refuse_unidentified", lambda studies: None)  # a stand-in study: no design
    monkeypatch.setattr(steps, "sittings", lambda studies: (list(studies), []))  # nor a kind
    live = explore.LiveThroughput()
    df = steps.run_all([S()], on_interval=live.on_interval)
    assert df["ok"].tolist() == [1] and calls[-1]["on_interval"] == live.on_interval and live.updates == 2
    assert calls[-1]["campaign"] == "last"  # notebook 10's default: resume the latest campaign
    steps.run_all([S()], campaign="auto")
    assert calls[-1]["on_interval"] is None and calls[-1]["campaign"] == "auto"



def test_titles_come_from_the_factor_registry_and_hosts_split_only_when_several() -> None:
    from dbmatrix.spec.factors import REGISTRY

    assert all(explore.factor_label(f.name) == f.title for f in REGISTRY)
    assert explore.factor_label("host") == "Host"
    one = pd.DataFrame({"engine": ["innodb", "myrocks"], "cache_pct": [25, 100], "host": ["h1", "h1"]})
    assert explore.split_columns(one) == ["engine", "cache_pct"]
    two = one.assign(host=["h1", "h2"])
    assert explore.split_columns(two) == ["engine", "cache_pct", "host"]
