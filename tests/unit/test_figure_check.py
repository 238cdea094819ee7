"""Tests of dbmatrix.publish.figure_check: every rule fails on a synthetic figure that breaks it and passes on
one that does not; the broken `replication-throughput-latency` as committed at 5c762bd (a fixture) gives
its specific findings. That every figure the build draws from the committed reference has none is checked
where the build draws them: notebook 30 as committed draws the quick profile's figures from the reference
with the check failing the build (`make test` runs it under nbval), and every `dbmatrix figures` does the
same."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from matplotlib.figure import Figure

from dbmatrix.publish import figures_replication
from dbmatrix.publish.figure_check import MIN_AXES_FRACTION, Finding, check_figure, format_findings
from dbmatrix.publish.figures import subplots

ROOT = Path(__file__).resolve().parents[2]
GALERA = ROOT / "data" / "reference" / "galera-quick" / "processed"


def _kinds(findings: list[Finding]) -> list[str]:
    return sorted({f.kind for f in findings})


def _broken() -> ModuleType:
    path = ROOT / "tests" / "fixtures" / "figures" / "broken_replication.py"
    spec = importlib.util.spec_from_file_location("broken_replication", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _galera() -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_csv(GALERA / "replication-settings.csv"), pd.read_csv(GALERA / "replication-runs.csv")


# ------------------------------------------------------------------------------------ the broken fixture


@pytest.mark.filterwarnings("ignore:constrained_layout not applied")
def test_the_committed_replication_figure_fails_with_its_defects() -> None:
    settings, runs = _galera()
    fig, _ = _broken().throughput_latency_per_setting(settings, runs)
    findings = check_figure(fig, "replication-throughput-latency")
    text = format_findings(findings)
    # both panels squeezed to slivers
    slivers = [f for f in findings if f.kind == "degenerate-axes"]
    assert [f.artists for f in slivers] == [("axes 'Throughput (tx/s)'",), ("axes 'p95 latency (ms)'",)], text
    # the thread ticks "1 4 16" printed as "1416": "4" and "16" closer than a word space, in both panels
    ticks = [f.artists for f in findings if f.kind == "overlap" and "x tick label '16'" in " ".join(f.artists)]
    assert ticks == [(f"x tick label '4' of axes {a}", f"x tick label '16' of axes {a}")
                     for a in ("'Throughput (tx/s)'", "'p95 latency (ms)'")], text
    # the legend covers the right panel's y label
    assert any(f.kind == "legend-covers" and "y label 'p95 latency (ms)'" in f.artists for f in findings), text
    assert any(f.kind == "overlap" and "y label 'p95 latency (ms)'" in f.artists
               and any(a.startswith("legend text") for a in f.artists) for f in findings), text
    # the right panel is cut off by the figure's edge (its x label past the right edge)
    assert any(f.kind == "clipped" and f.artists == ("x label 'Appliers'",) and "right" in f.detail
               for f in findings), text


def test_the_fixed_replication_figure_passes() -> None:
    settings, runs = _galera()
    fig, _ = figures_replication.throughput_latency_per_setting(settings, runs)
    assert check_figure(fig, "replication-throughput-latency") == []


# ------------------------------------------------------------------------------------ every figure of the build


def test_the_build_fails_on_a_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbmatrix.publish import build, figures

    def bad(fig: Figure, name: str, **_: object) -> list[Finding]:
        return [Finding(name, "overlap", ("a", "b"), "synthetic")]

    monkeypatch.setattr(figures, "check_figure", bad)
    settings, runs = _galera()
    fig, _ = figures_replication.paused_per_setting(settings, runs)
    found: list[Finding] = []
    figures.save_figure(fig, tmp_path, "x", data_sha="d", title="t", check=found)
    assert [f.kind for f in found] == ["overlap"]
    err = build.FigureCheckError(found)
    assert "1 finding(s)" in str(err) and "x: overlap: a | b (synthetic)" in str(err)


# ------------------------------------------------------------------------------------ each rule, both ways


def _fig(w: float = 3.0, h: float = 2.0) -> tuple[Figure, object]:
    return subplots(figsize=(w, h), layout="constrained")


def test_overlap() -> None:
    fig, ax = _fig()
    ax.text(0.5, 0.5, "first label", transform=ax.transAxes)
    ax.text(0.52, 0.5, "second label", transform=ax.transAxes)
    found = check_figure(fig, "t")
    assert _kinds(found) == ["overlap"] and found[0].artists == ("annotation 'first label'",
                                                                    "annotation 'second label'")
    fig, ax = _fig()
    ax.text(0.1, 0.2, "first label", transform=ax.transAxes)
    ax.text(0.1, 0.7, "second label", transform=ax.transAxes)
    assert check_figure(fig, "t") == []


def test_tick_labels_closer_than_a_space_read_as_one() -> None:
    fig, ax = _fig(0.9, 2.0)
    ax.set_xlim(0, 1)
    ax.set_xticks([0.0, 0.18, 0.36], ["1000", "2000", "3000"])
    assert "overlap" in _kinds(check_figure(fig, "t"))
    fig, ax = _fig(3.0, 2.0)
    ax.set_xticks([0.0, 0.5, 1.0], ["1000", "2000", "3000"])
    assert check_figure(fig, "t") == []


def test_clipped() -> None:
    fig, _ax = _fig()
    fig.text(0.9, 0.5, "runs off the edge")
    found = check_figure(fig, "t")
    assert _kinds(found) == ["clipped"] and "right" in found[0].detail
    fig, _ax = _fig()
    fig.text(0.05, 0.5, "inside")
    assert check_figure(fig, "t") == []


def test_degenerate_axes() -> None:
    fig = Figure(figsize=(3.0, 2.0))
    fig.add_axes((0.2, 0.2, MIN_AXES_FRACTION / 2, 0.7))
    found = check_figure(fig, "t")
    assert _kinds(found) == ["degenerate-axes"] and f"minimum {MIN_AXES_FRACTION}" in found[0].detail
    fig = Figure(figsize=(3.0, 2.0))
    fig.add_axes((0.2, 0.2, 0.7, 0.7))
    assert check_figure(fig, "t") == []


def test_every_series_has_a_legend_entry() -> None:
    fig, ax = _fig()
    ax.plot([0, 1], [0, 1], color="C0", label="a")
    ax.plot([0, 1], [1, 0], color="C1", label="b")
    found = check_figure(fig, "t")  # labelled, but no legend
    assert _kinds(found) == ["no-legend-entry"] and len(found) == 2
    fig, ax = _fig()  # unlabelled, told apart by line style only: the style needs an entry
    ax.plot([0, 1], [0, 1], color="C0", linestyle="-", label="a")
    ax.plot([0, 1], [1, 0], color="C0", linestyle="--")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 1.6))
    found = [f for f in check_figure(fig, "t") if f.kind == "no-legend-entry"]
    assert len(found) == 1 and "linestyle --" in found[0].detail
    fig, ax = _fig(3.0, 3.0)
    ax.plot([0, 1], [0, 1], color="C0", label="a")
    ax.plot([0, 1], [1, 0], color="C1", label="b")
    fig.legend(loc="outside upper center", ncols=2)
    assert check_figure(fig, "t") == []


def test_two_legend_entries_that_look_alike() -> None:
    """The throughput-over-time legend of ten runs had eight line styles: two runs drawn alike."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    def legend(*handles: object) -> list:
        fig, ax = _fig(3.0, 3.0)
        ax.plot([0, 1], [0, 1], color="C0")
        fig.legend(handles=list(handles), loc="outside lower center", ncols=2)
        return [f for f in check_figure(fig, "t") if f.kind == "ambiguous-legend"]

    dashed = {"color": "0.3", "linestyle": (0, (6, 1.5))}
    found = legend(Line2D([], [], label="campaign 1", **dashed), Line2D([], [], label="campaign 9", **dashed))
    assert len(found) == 1 and "'campaign 1' and 'campaign 9' look alike" in found[0].detail
    # another dash pattern, a marker, its fill or another colour tell them apart
    assert legend(Line2D([], [], label="a", **dashed), Line2D([], [], label="b", color="0.3",
                                                              linestyle=(0, (3, 1, 1, 1)))) == []
    assert legend(Line2D([], [], label="a", **dashed), Line2D([], [], label="b", marker="o", **dashed)) == []
    assert legend(Line2D([], [], label="a", marker="o", markerfacecolor="none", **dashed),
                  Line2D([], [], label="b", marker="o", **dashed)) == []
    assert legend(Patch(color="C0", label="a"), Patch(color="C0", hatch="//", label="b")) == []
    assert len(legend(Patch(color="C0", label="a"), Patch(color="C0", label="b"))) == 1
    # text-only entries (no line, no marker) are notes, not series
    assert legend(Line2D([], [], linestyle="none", label="n = 3"), Line2D([], [], linestyle="none",
                                                                          label="95 % CI")) == []


def test_a_legend_does_not_cover_data() -> None:
    fig, ax = _fig()
    ax.plot([0.1, 0.5, 0.9], [0.9, 0.9, 0.9], "o", color="C0", label="points")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper center")
    found = check_figure(fig, "t")
    assert _kinds(found) == ["legend-covers"] and "data point" in found[0].detail
    fig, ax = _fig()
    ax.plot([0.1, 0.5, 0.9], [0.1, 0.1, 0.1], "o", color="C0", label="points")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper center")
    assert check_figure(fig, "t") == []


def test_emulated_media_are_labelled() -> None:
    fig, ax = _fig()
    ax.set_xticks([0, 1], ["disk", "tmpfs"])
    found = check_figure(fig, "t", emulated={"tmpfs": "pmem-fsdax"})
    assert _kinds(found) == ["emulated-unlabelled"] and found[0].artists[0].startswith("x tick label 'tmpfs'")
    fig, ax = _fig()
    ax.set_xticks([0, 1], ["disk", "tmpfs"])
    ax.set_xlabel("Medium (tmpfs is emulated PMEM)")
    assert check_figure(fig, "t", emulated={"tmpfs": "pmem-fsdax"}) == []
    fig, ax = _fig()  # a medium that is not emulated needs no word
    ax.set_xticks([0, 1], ["disk", "tmpfs"])
    assert check_figure(fig, "t") == []
