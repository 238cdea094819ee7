"""The steps of a profile as functions, so notebooks (and the CLI) stay a few lines each.

A profile runs several studies (``notebooks/params/<profile>.yaml`` lists their specs); each step takes
one study or the list of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix import paths
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.judge import judge, publishable, study_digest
from dbmatrix.analyse.judgement import (
    ClaimVerdicts,
    Judgement,
    flips,
    inputs_digest,
    judgement_inputs,
    load_judgement,
    write_judgement,
)
from dbmatrix.analyse.tables import Analysis, analyse
from dbmatrix.claim_plan import refuse_unidentified
from dbmatrix.datachoice import is_keyword
from dbmatrix.hosts.setup import setup_packages
from dbmatrix.publish.build import publish_all
from dbmatrix.publish.paper_inputs import macro_prefixes
from dbmatrix.publish.registry import Published
from dbmatrix.run.context import host_facts
from dbmatrix.run.matrix import run_study, study_status, summarize_plan
from dbmatrix.spec.experiment import Experiment, design_text
from dbmatrix.store import ResultStore, write_json_atomic, write_text_atomic
from dbmatrix.study import ANALYSIS_STAMP as STAMP
from dbmatrix.study import Study, sittings, studies_with_data, study_kind


def setup_hosts(studies: Study | Sequence[Study], roles: tuple[str, ...] = ("server",)) -> pd.DataFrame:
    """Step 00: packages (installed only if missing), host facts, and the media the studies use
    (applied and verified; media no study uses are left alone); one row per host and study."""
    from dbmatrix.run.context import prepare_media

    rows = []
    for study in [studies] if isinstance(studies, Study) else studies:
        for hs in study.inventory.hosts:
            with hs.connect() as host:
                report = setup_packages(host, roles)
                facts = host_facts(host, study.store)
                states = prepare_media(host, hs, study.experiment)
                write_json_atomic(study.store.hosts / f"{hs.name}.media.json", {
                    name: {"error": f"{type(st).__name__}: {st}"} if isinstance(st, Exception) else st.to_dict()
                    for name, st in sorted(states.items())})
                rows.append({
                    "study": study.experiment.name, "host": hs.name, "os": facts.get("os_pretty"),
                    "kernel": facts.get("kernel"), "cpu": facts.get("cpu_model"), "cpus": facts.get("online_cpus"),
                    "mem_GiB": round((facts.get("mem_total_bytes") or 0) / 2**30, 1),
                    "mariadb": facts.get("mariadb_version"), "sysbench": facts.get("sysbench_version"),
                    "installed_now": " ".join(report.missing_before) or "-",
                    "media": "; ".join(_medium_line(hs.media[n], st) for n, st in sorted(states.items())),
                })
    return pd.DataFrame(rows)


def setup_plan(studies: Study | Sequence[Study], roles: tuple[str, ...] = ("server",)) -> pd.DataFrame:
    """What step 00 would do, without doing it (notebook 00 as committed): per host and study, the packages
    it would install (asked of the package manager) with the commands, and the commands that would build
    each medium the study uses. Nothing is installed, mounted or written."""
    from dbmatrix.hosts import media
    from dbmatrix.run.context import media_used

    rows = []
    for study in [studies] if isinstance(studies, Study) else studies:
        for hs in study.inventory.hosts:
            with hs.connect() as host:
                report = setup_packages(host, roles, dry_run=True)
            media_lines = []
            for name in media_used(study.experiment):
                m = hs.media[name]
                media_lines.append(f"{name}={m.kind}:{m.path}: " + (" && ".join(media.plan(m)) or "nothing to do"))
            rows.append({"study": study.experiment.name, "host": hs.name,
                         "would_install": " ".join(report.missing_before) or "-",
                         "commands": "; ".join(report.commands) or "-", "media": " | ".join(media_lines)})
    return pd.DataFrame(rows)


def _medium_line(medium: Any, state: Any) -> str:
    label = f"{medium.name}={medium.kind}:{medium.path}"
    if medium.emulates:
        label += f" (emulates {medium.emulates})"
    if isinstance(state, Exception):
        return f"{label} FAILED: {state}"
    return label + (f" on {state.device}" if state.device else "")


def plan_table(study: Study) -> tuple[pd.DataFrame, str]:
    from dbmatrix.run.matrix import format_duration

    exp = study.experiment
    s = summarize_plan(exp)
    info = exp.design_info()
    design = design_text(info)
    return pd.DataFrame(s.table()), (f"{exp.name}: {len(exp.cells())} cells ({design}) x {exp.repetitions} "
                                     f"repetitions = {len(s.runs)} runs, datasets {', '.join(s.datasets)}, "
                                     f"estimated {format_duration(s.estimated_s)}")


def run_matrix(study: Study, progress: bool = True,
               on_interval: Callable[[str, dict[str, Any]], None] | None = None,
               campaign: str | int = "last", until_decided: bool = False,
               budget: str | None = None, rounds: Any = None) -> dict[str, Any]:
    """Step 10: run or resume one study's matrix; returns counts and the status afterwards. `until_decided`
    (`budget`: "2h", "90m", ...): then replicate blocks for the claims still open (:mod:`dbmatrix.decide`).

    `on_interval(run_id, interval)` receives each parsed sysbench per-second line while a run measures
    (e.g. ``explore.LiveThroughput.on_interval``). A new campaign records the claims as they are
    (:func:`dbmatrix.analyse.claims.registration.current_registration`)."""
    from dbmatrix.analyse.claims.registration import current_registration
    from dbmatrix.decide import rounds_option

    rounds = rounds or rounds_option(until_decided, budget)
    extra: dict[str, Any] = {"next_round": rounds(study)} if rounds else {}  # passed only when asked for
    counts = run_study(study, progress=progress, on_interval=on_interval, campaign=campaign,
                       registration=current_registration(), **extra)
    return {**counts.as_dict(), **study_status(study).as_dict()}


def run_all(studies: Sequence[Study], progress: bool = True,
            on_interval: Callable[[str, dict[str, Any]], None] | None = None,
            campaign: str | int = "last", until_decided: bool = False, budget: str | None = None) -> pd.DataFrame:
    """Step 10 for every study of the profile, one after the other; one row of counts per study.
    `campaign`: auto, new, last or a number (:mod:`dbmatrix.run.campaigns`); `until_decided`, `budget`: as
    ``dbmatrix run --until-decided --budget`` (the budget is the studies' together, split in proportion to
    their planned durations; each share counts from its study's start). A study whose
    design does not identify one of its claims' contrasts is refused before any runs (:mod:`dbmatrix.claim_plan`)."""
    studies, left = sittings(studies)
    for line in left:
        print(line)
    refuse_unidentified(studies)
    from dbmatrix.decide import rounds_option

    rounds = rounds_option(until_decided, budget, studies)
    rows = []
    for s in studies:
        r = run_matrix(s, progress, on_interval, campaign, until_decided, budget, rounds)
        r["campaigns"] = len(r.get("campaigns") or [])  # one cell per study: the table is in study_status
        rows.append({"experiment": s.experiment.name, **r})
    return pd.DataFrame(rows)


def analyse_study(study: Study) -> Analysis:
    """Step 20: processed tables from the raw runs: the standard tables, the study kind's own (e.g. a
    Galera study's replication tables; :class:`dbmatrix.analyse.kinds.StudyKind`).

    `processed/analysis.json` is written last, so its presence means the tables are complete."""
    exp, store = study.experiment, study.store
    kind = study_kind(exp)
    notes: list[str] = []
    kind.before_analysis(store, exp)
    a = analyse(store, exp)
    kind.after_analysis(store, exp, a)
    write_text_atomic(store.processed / STAMP, json.dumps({
        "experiment": exp.name, "spec_digest": exp.digest(), "kind": study.kind,
        "runs": len(a.runs), "notes": notes,
        "tables": sorted(p.name for p in store.processed.iterdir() if p.name != STAMP),
    }, indent=2, sort_keys=True) + "\n")
    return a


def study_tables(studies: Sequence[Study]) -> list[StudyTables]:
    """The processed tables of the studies (each under its macro prefix)."""
    prefixes = macro_prefixes(list(studies))
    out = []
    for s in studies:
        out.append(study_kind(s.experiment).load_tables(s.store, s.experiment, prefixes[s.experiment.name],
                                                        s.spec_path))
    return out


def make_figures(studies: Study | Sequence[Study], *, timeline_cells: Sequence[str] | None = None,
                 data: str | Path | None = None, out: str | Path | None = None) -> Published:
    """Step 30: the judgement (:func:`judge_build`), then figures, the claims table and every generated paper
    input formatted from it, from the processed tables of the studies that have data (the others are named as
    not run). They go to ``<out>/figures`` and ``<out>/paper/generated`` when `out` is given, else to the
    repository's (or the output root's)."""
    studies = [studies] if isinstance(studies, Study) else list(studies)
    have, missing = studies_with_data(studies)
    if not have:
        raise RuntimeError("no study has completed runs: " + ", ".join(
            f"{s.experiment.name} ({s.store.root})" for s in studies))
    profile = studies[0].profile
    return publish_tables(study_tables(have), profile, paths.figures_dir(out), paths.generated_dir(out),
                          not_run=[s.experiment.name for s in missing],
                          data_root=None if is_keyword(data) else str(data),  # a data root; each study's dir is listed
                          opts={"timeline_cells": list(timeline_cells) if timeline_cells else None})


def code_digest() -> str:
    """The verdict code's digest (:func:`dbmatrix.analyse.claims.registration.verdict_code_digest`)."""
    from dbmatrix.analyse.claims.registration import verdict_code_digest

    return verdict_code_digest()


def judge_build(tables: Sequence[StudyTables], generated_dir: Path) -> tuple[Judgement, list[Path]]:
    """The judge step of a build: the studies judged once (:func:`dbmatrix.analyse.judge.judge`), written into
    `generated_dir` and read back from there, as every view reads it; the judgement and its files."""
    written = write_judgement(judge(tables, code_digest()), generated_dir)
    return load_judgement(generated_dir), written


def publish_tables(tables: Sequence[StudyTables], profile: str, figures_dir: Path, generated_dir: Path, *,
                   not_run: Sequence[str] = (), data_root: str | None = None,
                   opts: dict[str, Any] | None = None) -> Published:
    """A build from processed tables: :func:`judge_build`, then :func:`dbmatrix.publish.build.publish_all`
    formats the figures and the paper's inputs from that judgement."""
    j, written = judge_build(tables, generated_dir)
    out = publish_all(tables, profile, figures_dir, generated_dir, judgement=j, not_run=not_run,
                      data_root=data_root, opts=opts)
    out.written = [*written, *out.written]
    return out


def publish(store: ResultStore, exp: Experiment, profile: str, figures_dir: Path, generated_dir: Path) -> list[Path]:
    """One study's judgement, figures and paper inputs (:func:`publish_tables` for a single storage study)."""
    kind = study_kind(exp)
    st = kind.load_tables(store, exp, kind.prefix)
    return publish_tables([st], profile, figures_dir, generated_dir).written


def judgement_for(studies: Sequence[Study], out: str | Path | None = None) -> tuple[Judgement, str]:
    """The judgement of the studies that have data: the build's in ``<out>/paper/generated`` (the committed
    build without `out`) when it was judged from exactly these data by this code (its inputs' digest), else
    judged now by the same step (nothing written); with a line saying which."""
    have, _ = studies_with_data(list(studies))
    tables = publishable(study_tables(have))
    gen = paths.generated_dir(out)
    code = code_digest()
    if judgement_inputs(gen) == inputs_digest({st.name: study_digest(st) for st in tables}, code):
        return load_judgement(gen), f"judgement: read from {paths.display_path(gen)} (the build of these data)"
    return judge(tables, code), (f"judgement: judged now (the build in {paths.display_path(gen)} was not made "
                                 "from these data by this code)")


def campaign_lines(table: pd.DataFrame, studies: Sequence[Study]) -> list[str]:
    """What each judging study's campaign level captured, whether the claims were fixed before their
    data, and the studies whose verdict code changed since a campaign recorded it (``dbmatrix verdicts``)."""
    from dbmatrix.analyse.campaign_records import load_campaign_summaries
    from dbmatrix.analyse.claims.registration import code_changed, code_digest_of, files_changed, verdict_code_files

    out = []
    tested = table[table["study"].fillna("").astype(str) != ""]
    for study, g in tested.groupby("study", sort=True):
        levels = sorted({str(x) for x in g["campaign_level"].fillna("") if x})
        out.append(f"campaign level of {study}: {'; '.join(levels) or 'unknown'}")
    counts = tested["registration"].fillna("").value_counts()
    out.append("claims vs the registry their first campaign recorded: "
               + ", ".join(f"{int(n)} {k}" for k, n in sorted(counts.items()) if k))
    files = verdict_code_files()
    code = code_digest_of(files)
    for s in studies:
        records = load_campaign_summaries(s.store)
        changed = code_changed(records, code)
        if changed:
            last = max((r for r in records if int(r.get("campaign") or 0) in changed),
                       key=lambda r: int(r.get("campaign") or 0))
            which = files_changed(last.get("registration"), files)
            since = (f"since campaign {int(last.get('campaign') or 0)}: {', '.join(which)}" if which is not None
                     else "which files: not recorded (campaigns before per-file digests)")
            out.append(f"{s.experiment.name}: the verdict code changed since campaign(s) "
                       f"{', '.join(map(str, changed))} recorded it; {since}")
    return out


def verdicts(studies: Study | Sequence[Study]) -> tuple[ClaimVerdicts, pd.DataFrame]:
    """The claims' verdicts of the studies with data (:func:`judgement_for`: what the paper prints, ``.claims``
    per claim, ``.campaigns`` per claim and campaign) and, per claim, each campaign's verdict beside the pooled
    one with a `flip` flag (the campaigns' verdicts differ)."""
    j, _ = judgement_for([studies] if isinstance(studies, Study) else list(studies))
    return j.verdicts, flips(j.verdicts)
