"""``dbmatrix report``: one self-contained HTML file of a build — figures, the claims with their verdicts,
each study's cells with intervals, provenance and host facts — that opens from disk without a server.

Figures are embedded as base64 PNG, the style is inline, and there is no script and no external URL
(:func:`external_references` checks a page for them). Built from what ``dbmatrix figures`` wrote
(``figures/*.png``, ``paper/generated/provenance.json`` and the judgement's claims tables, shown through the
one claims formatter, :mod:`dbmatrix.analyse.claims_view`) and the studies' processed tables it names
(``processed/cells.csv``, ``processed/host-facts.json``): processed outputs only.
:func:`render` is pure; :func:`load_inputs` and :func:`write_report` read and write.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix import paths
from dbmatrix.analyse import claims_view
from dbmatrix.analyse.judgement import CAMPAIGN_COLUMNS, LEVEL_COLUMNS, ClaimVerdicts, read_verdicts
from dbmatrix.analyse.verdict_text import DEFAULT_CONFIDENCE, class_of, counts_text, level_label
from dbmatrix.store import write_text_atomic

TITLE = "dbmatrix report"
CELL_LEVEL = level_label(DEFAULT_CONFIDENCE)  # the cells' intervals: the analysis' default level
CELL_COLUMNS = [("cell_id", "cell"), ("n", "runs"), ("mean", "mean tps"), ("ci_lo", f"{CELL_LEVEL} low"),
                ("ci_hi", f"{CELL_LEVEL} high"), ("p95_ms", "p95 ms"), ("n_not_steady", "not steady")]
HOST_FIELDS = [("host", "host"), ("boot_id", "boot"), ("os_pretty", "OS"), ("kernel", "kernel"),
               ("cpu_model", "CPU"), ("online_cpus", "CPUs"), ("mem_total_bytes", "memory"),
               ("mariadb_version", "MariaDB"), ("sysbench_version", "sysbench"), ("galera_version", "Galera"),
               ("fio_version", "fio")]
VERDICT_CLASS = {"agree": "agree", "disagree": "disagree", "depends": "depends", "inconclusive": "inconclusive"}
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:12.5px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f3f3f3}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.agree{background:#e3f4e3}.disagree{background:#f9dede}.inconclusive{background:#fdf5d8}.depends{background:#e4ecf9}
td small{display:block;color:#555}
figure{display:inline-block;margin:0 1em 1.5em 0;max-width:48%;vertical-align:top}
figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:12px;color:#555}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 1em}dt{font-weight:600}dd{margin:0}
.note{color:#555;font-size:12.5px}
"""


@dataclass
class StudySection:
    """One study in the report: where its data are, its cells and the hosts it ran on."""

    name: str
    results_dir: str
    n_runs: int | None = None
    cells: pd.DataFrame = field(default_factory=pd.DataFrame)
    hosts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Figure:
    stem: str
    study: str
    png: bytes


@dataclass
class ReportInputs:
    provenance: dict[str, Any]
    claims: pd.DataFrame
    studies: list[StudySection]
    figures: list[Figure]
    levels: pd.DataFrame | None = None  # claims-levels.csv: each condition's estimate and verdict (None: basis)


def _e(x: Any) -> str:
    """Text escaped for HTML; None and NaN (an empty CSV field) as nothing."""
    return html.escape("" if x is None or (isinstance(x, float) and math.isnan(x)) else str(x))


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        return f"{x:.{digits}g}" if abs(x) < 1e6 else f"{x:.0f}"
    return str(x)


def _table(headers: list[str], rows: list[list[tuple[str, str]]], cls: str = "") -> str:
    """rows: (cell html, td class) pairs."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="{c}">{v}</td>' if c else f"<td>{v}</td>" for v, c in r) + "</tr>"
                   for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def host_rows(host_facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The distinct hosts (host and boot) of a study's processed host-facts.json, with the report's fields."""
    rows: list[dict[str, Any]] = []
    for facts in (host_facts.get("facts") or {}).values():
        row = {k: facts.get(k) for k, _ in HOST_FIELDS}
        row["boot_id"] = str(row["boot_id"] or "")[:8]
        mem = row.get("mem_total_bytes")
        row["mem_total_bytes"] = f"{mem / 2**30:.1f} GiB" if isinstance(mem, (int, float)) else mem
        if row not in rows:
            rows.append(row)
    return rows


def _claims_html(claims: pd.DataFrame, levels: pd.DataFrame | None = None) -> str:
    """One row per claim through the claims formatter's HTML view: its estimate with its interval (at the
    level the heading names, else its own stated), each condition's estimate and verdict where it was judged at
    several, the verdict ("depends on <factor>" its own class) with how its conditions combine, the reason and
    the campaigns' consistency test."""
    if claims.empty:
        return '<p class="note">No claims table (run <code>dbmatrix figures</code>).</p>'
    v = ClaimVerdicts(claims, pd.DataFrame(columns=list(CAMPAIGN_COLUMNS)),
                      levels if levels is not None else pd.DataFrame(columns=list(LEVEL_COLUMNS)))
    table = claims_view.render("html", claims_view.claim_rows(v), heading=claims_view.heading(v),
                   css=lambda verdict: VERDICT_CLASS.get(class_of(verdict), ""))
    summary = counts_text(claims["verdict"].fillna("").astype(str)) if "verdict" in claims.columns else ""
    return (f'<p>{len(claims)} claims: {_e(summary)}. A claim judged at several conditions shows each with its own '
            "verdict; with several campaigns the pooled interval decides and the campaigns' own estimates are a "
            "consistency check (its test under the reason).</p>" + table.strip())


def _cells_html(s: StudySection) -> str:
    if s.cells.empty:
        return '<p class="note">No processed cells table.</p>'
    cols = [(c, label) for c, label in CELL_COLUMNS if c in s.cells.columns]
    t = s.cells[s.cells["metric"] == "tps"] if "metric" in s.cells.columns else s.cells
    rows = [[(_e(_fmt(r[c], 4)), "num" if c != "cell_id" else "") for c, _ in cols] for _, r in t.iterrows()]
    return _table([label for _, label in cols], rows, "cells")


def _hosts_html(hosts: list[dict[str, Any]]) -> str:
    if not hosts:
        return '<p class="note">No host facts.</p>'
    fields = [(k, label) for k, label in HOST_FIELDS if any(h.get(k) not in (None, "") for h in hosts)]
    return _table([label for _, label in fields], [[(_e(h.get(k)), "") for k, _ in fields] for h in hosts], "hosts")


def render(inputs: ReportInputs, title: str = TITLE) -> str:
    """The report as one HTML document (no script, no external reference)."""
    p = inputs.provenance
    commit = str(p.get("git_commit") or "unknown")
    prov = "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in [
        ("profile", _e(p.get("profile"))), ("git commit", f"<code>{_e(commit)}</code>"),
        ("data", _e(p.get("data") or "per study: data/runs when it has runs, else data/reference")),
        ("data digest", f"<code>{_e(p.get('data_sha'))}</code>"),
        ("studies", _e(", ".join(f"{s.name} ({s.n_runs} runs, {s.results_dir})" for s in inputs.studies))),
        ("not run", _e(", ".join(p.get("not_run") or []) or "none")),
    ])
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             '<p class="note">How storage configuration shapes MySQL-family OLTP performance: the seeds\' claims '
             "beside what these runs measured. One file: figures embedded, no server needed.</p>",
             "<h2 id=\"claims\">Claims and verdicts</h2>", _claims_html(inputs.claims, inputs.levels),
             "<h2 id=\"figures\">Figures</h2>"]
    for f in inputs.figures:
        b64 = base64.b64encode(f.png).decode("ascii")
        parts.append(f'<figure><img alt="{_e(f.stem)}" src="data:image/png;base64,{b64}">'
                     f"<figcaption>{_e(f.stem)} ({_e(f.study)})</figcaption></figure>")
    if not inputs.figures:
        parts.append('<p class="note">No figures (run <code>dbmatrix figures</code>).</p>')
    for s in inputs.studies:
        parts += [f"<h2 id=\"study-{_e(s.name)}\">Study {_e(s.name)}</h2>",
                  f'<p class="note">{_e(s.n_runs)} runs from {_e(s.results_dir)}; throughput per cell with its '
                  f"{_e(CELL_LEVEL)} (as the analysis computed it, processed/cells.csv).</p>",
                  _cells_html(s), "<h3>Hosts</h3>", _hosts_html(s.hosts)]
    parts += ["<h2 id=\"provenance\">Provenance</h2>", f"<dl>{prov}</dl>",
              '<p class="note">Versions of MariaDB, sysbench, Galera and fio are the hosts\' (above), as recorded '
              "when the runs were measured.</p></body></html>"]
    return "\n".join(parts) + "\n"


EXTERNAL = re.compile(r"""(<script\b|\b(?:src|href)\s*=\s*["']?(?!data:|#)[a-z]+:|@import|url\((?!["']?data:))""",
                      re.IGNORECASE)


def external_references(page: str) -> list[str]:
    """Scripts, external sources and links, imports or url()s in a page (empty: self-contained)."""
    return [m.group(0) for m in EXTERNAL.finditer(page)]


def _study_dir(results_dir: str) -> Path:
    p = Path(results_dir)
    if p.is_absolute():
        return p
    for root in (paths.repo_root(), paths.output_root()):
        if (root / p).is_dir():
            return root / p
    return paths.repo_root() / p


def load_inputs(out: str | Path | None = None) -> ReportInputs:
    """What ``dbmatrix figures`` (with the same `out`) wrote, and the studies' processed tables it names."""
    gen, figs = paths.generated_dir(out), paths.figures_dir(out)
    prov_file = gen / "provenance.json"
    if not prov_file.is_file():
        raise FileNotFoundError(f"report: {prov_file} does not exist; run `dbmatrix figures` (or make figures) first")
    prov = json.loads(prov_file.read_text())
    build_file = gen / "build.json"  # the build's commit: an untracked sidecar (the tracked provenance has none)
    if build_file.is_file() and "git_commit" not in prov:
        git = json.loads(build_file.read_text()).get("git") or {}
        if git.get("commit"):
            prov["git_commit"] = str(git["commit"]) + (" (uncommitted changes)" if git.get("dirty") else "")
    verdicts = read_verdicts(gen)  # the judgement's claims tables (empty when the build has none)
    studies = []
    for st in prov.get("studies", []):
        d = _study_dir(str(st.get("results_dir", "")))
        cells_file, facts_file = d / "processed" / "cells.csv", d / "processed" / "host-facts.json"
        studies.append(StudySection(
            name=str(st.get("experiment")), results_dir=str(st.get("results_dir")), n_runs=st.get("n_runs"),
            cells=pd.read_csv(cells_file) if cells_file.is_file() else pd.DataFrame(),
            hosts=host_rows(json.loads(facts_file.read_text())) if facts_file.is_file() else []))
    drawn = prov.get("figures") or {}
    tex = gen / "figures.tex"  # the paper's order of the figures
    order = re.findall(r"\\input\{fig-([^}]+)\}", tex.read_text()) if tex.is_file() else []
    stems = [s for s in order if s in drawn] + sorted(s for s in drawn if s not in order)
    figures = [Figure(stem, str(drawn[stem]), (figs / f"{stem}.png").read_bytes())
               for stem in stems if (figs / f"{stem}.png").is_file()]
    return ReportInputs(prov, verdicts.claims if len(verdicts.claims) else pd.DataFrame(), studies, figures,
                        verdicts.levels)


def write_report(path: str | Path, out: str | Path | None = None) -> Path:
    """Render the build's report into `path` (one file)."""
    page = render(load_inputs(out))
    bad = external_references(page)
    if bad:  # a guard on the template: the file must open without a server or network
        raise RuntimeError(f"report: not self-contained: {bad[:3]}")
    target = Path(path)
    write_text_atomic(target, page)
    return target
