"""`dbmatrix report`: one self-contained HTML file (dbmatrix.publish.report), on synthetic inputs."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path

import pandas as pd
import pytest

from dbmatrix import cli
from dbmatrix.publish import report


def tiny_png() -> bytes:
    """A valid 1x1 PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


FACTS = {"facts": {
    "a": {"host": "h1", "boot_id": "ff4c5d32-4cc7", "os_pretty": "Debian 12", "kernel": "6.1", "cpu_model": "EPYC",
          "online_cpus": 2, "mem_total_bytes": 2 * 2**30, "mariadb_version": "10.11.19", "sysbench_version": "1.0.20"},
    "b": {"host": "h1", "boot_id": "ff4c5d32-4cc7", "os_pretty": "Debian 12", "kernel": "6.1", "cpu_model": "EPYC",
          "online_cpus": 2, "mem_total_bytes": 2 * 2**30, "mariadb_version": "10.11.19", "sysbench_version": "1.0.20",
          "collected_utc": "later"}}}


def inputs() -> report.ReportInputs:
    claims = pd.DataFrame({"id": ["c1", "c2"], "seed": ["003", "001"], "claim": ["4$\\times$ faster", "10\\,\\% <more>"],
                           "study": ["s", float("nan")], "estimate": [1.2, float("nan")], "ci_lo": [1.1, float("nan")],
                           "ci_hi": [1.3, float("nan")], "verdict": ["agree", "not tested"],
                           "reason": [float("nan"), "no NVMe here"]})
    cells = pd.DataFrame({"cell_id": ["x-c25", "x-c25"], "metric": ["tps", "qps"], "n": [4, 4],
                          "mean": [812.25, 9999.0], "ci_lo": [700.0, 1.0], "ci_hi": [900.0, 2.0], "p95_ms": [8.7, 1.0]})
    study = report.StudySection("s", "data/reference/s", 8, cells, report.host_rows(FACTS))
    return report.ReportInputs({"git_commit": "abc123", "profile": "quick", "data_sha": "d1"}, claims, [study],
                               [report.Figure("fig-a", "s", tiny_png())])


def test_the_page_is_self_contained_with_figures_claims_cells_and_provenance() -> None:
    page = report.render(inputs())
    assert report.external_references(page) == []
    assert "<title>dbmatrix report</title>" in page
    assert f'src="data:image/png;base64,{base64.b64encode(tiny_png()).decode()}"' in page
    assert '<td class="agree">agree</td>' in page and "4× faster" in page and "10\u202f% &lt;more&gt;" in page
    assert "no NVMe here" in page and ">nan<" not in page
    assert ">x-c25<" in page and ">812.2<" in page and ">9999<" not in page  # the tps rows only
    assert "<code>abc123</code>" in page and ">10.11.19<" in page and ">2.0 GiB<" in page


def test_host_rows_keep_distinct_hosts_once() -> None:
    rows = report.host_rows(FACTS)
    assert len(rows) == 1 and rows[0]["boot_id"] == "ff4c5d32"


@pytest.mark.parametrize("snippet", ['<script src="x.js"></script>', '<img src="https://example.org/a.png">',
                                     '<link href="http://cdn/x.css">', "<style>@import 'x.css';</style>",
                                     "<div style=\"background:url(http://x/y.png)\">"])
def test_external_references_are_found(snippet: str) -> None:
    assert report.external_references(snippet)


def test_data_urls_and_anchors_are_not_external() -> None:
    assert report.external_references('<img src="data:image/png;base64,AAA"><a href="#claims">x</a>') == []


def test_cli_report_from_a_figures_out_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "build"
    study = tmp_path / "s"
    (study / "processed").mkdir(parents=True)
    inputs().studies[0].cells.to_csv(study / "processed" / "cells.csv", index=False)
    (study / "processed" / "host-facts.json").write_text(json.dumps(FACTS))
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "b.png").write_bytes(tiny_png())
    (out / "figures" / "a.png").write_bytes(tiny_png())
    gen = out / "paper" / "generated"
    gen.mkdir(parents=True)
    (gen / "figures.tex").write_text("\\input{fig-b}\n\\input{fig-a}\n")
    (gen / "provenance.json").write_text(json.dumps({
        "git_commit": "abc", "figures": {"a": "s", "b": "s"},
        "studies": [{"experiment": "s", "results_dir": str(study), "n_runs": 8}]}))
    inputs().claims.to_csv(gen / "claims.csv", index=False)
    html_file = tmp_path / "r.html"
    assert cli.main(["report", "--out", str(out), "--html", str(html_file)]) == 0
    assert str(html_file) in capsys.readouterr().out
    page = html_file.read_text()
    assert page.index('alt="b"') < page.index('alt="a"')  # the paper's order
    assert ">003<" in page and ">EPYC<" in page
    assert cli.main(["report", "--out", str(tmp_path / "nothing"), "--html", str(html_file)]) == 2
    assert "run `dbmatrix figures`" in capsys.readouterr().err


def test_the_claims_show_each_level_each_condition_the_combination_and_the_consistency_test() -> None:
    claims = pd.DataFrame({
        "id": ["a", "b", "c"], "seed": ["003"] * 3, "claim": ["x", "y", "z"], "study": ["s"] * 3,
        "estimate": [1.04, float("nan"), 0.5], "ci_lo": [1.02, float("nan"), 0.4], "ci_hi": [1.06, float("nan"), 0.6],
        "confidence": [0.9736, 0.9736, float("nan")],
        "verdict": ["agree", "depends on compression", "premise not met"],  # c: an older table's verdict
        "reason": ["", "compression none disagree; compression lz4 agree", "lz4 shrinks the data 1.04x"],
        "combine": ["", "all conditions", ""],
        "heterogeneity": ["campaigns differ (F = 9.1 on 1 and 20 df, p = 0.007)", "", ""], "basis": ["", "", ""]})
    levels = pd.DataFrame([
        {"id": "b", "level": "compression none", "campaign": 0, "estimate": 1.01, "ci_lo": 0.99, "ci_hi": 1.03,
         "verdict": "disagree"},
        {"id": "b", "level": "compression lz4", "campaign": 0, "estimate": 1.23, "ci_lo": 1.15, "ci_hi": 1.3,
         "verdict": "agree"}])
    page = report.render(report.ReportInputs({}, claims, [], [], levels))
    assert "<th>estimate (97.4 % CI unless stated)</th>" in page
    assert ">1.04 [1.02, 1.06]<" in page and "0.50 [0.40, 0.60]<small>95 % CI</small>" in page
    assert "compression none: 1.01 [0.99, 1.03] (disagree)<br>compression lz4: 1.23 [1.15, 1.30] (agree)" in page
    assert '<td class="depends">depends on compression<small>combined: all conditions</small></td>' in page
    assert "<small>campaigns differ (F = 9.1 on 1 and 20 df, p = 0.007)</small>" in page
    assert "1 agree, 1 depends on a condition, 1 not tested" in page
    assert "premise not met</td>" not in page and "premise not met: lz4 shrinks the data 1.04x" in page
    assert "95 % CI low" in report.render(inputs())  # the cells' intervals: the analysis' level, stated
