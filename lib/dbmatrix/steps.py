"""The four steps of a study as functions, so notebooks (and the CLI) stay a few lines each."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from . import paths
from .analysis import Analysis, analyse, publish
from .hostsetup import setup_packages
from .runner import host_facts, run_study, study_status, summarize_plan
from .store import write_json_atomic
from .study import Study


def setup_hosts(study: Study, roles: tuple[str, ...] = ("server",)) -> pd.DataFrame:
    """Step 00: packages (installed only if missing), host facts, and the media the spec uses
    (applied and verified; media it does not use are left alone); one row per host."""
    from .runner import prepare_media

    rows = []
    for hs in study.inventory.hosts:
        with hs.connect() as host:
            report = setup_packages(host, roles)
            facts = host_facts(host, study.store)
            states = prepare_media(host, hs, study.experiment)
            write_json_atomic(study.store.hosts / f"{hs.name}.media.json", {
                name: {"error": f"{type(st).__name__}: {st}"} if isinstance(st, Exception) else st.to_dict()
                for name, st in sorted(states.items())})
            rows.append({
                "host": hs.name, "os": facts.get("os_pretty"), "kernel": facts.get("kernel"),
                "cpu": facts.get("cpu_model"), "cpus": facts.get("online_cpus"),
                "mem_GiB": round((facts.get("mem_total_bytes") or 0) / 2**30, 1),
                "mariadb": facts.get("mariadb_version"), "sysbench": facts.get("sysbench_version"),
                "installed_now": " ".join(report.missing_before) or "-",
                "media": "; ".join(_medium_line(hs.media[n], st) for n, st in sorted(states.items())),
            })
    return pd.DataFrame(rows)


def _medium_line(medium: Any, state: Any) -> str:
    label = f"{medium.name}={medium.kind}:{medium.path}"
    if medium.emulates:
        label += f" (emulates {medium.emulates})"
    if isinstance(state, Exception):
        return f"{label} FAILED: {state}"
    return label + (f" on {state.device}" if state.device else "")


def plan_table(study: Study) -> tuple[pd.DataFrame, str]:
    from .runner import format_duration

    exp = study.experiment
    s = summarize_plan(exp)
    info = exp.design_info()
    design = (f"{info['fraction']} fraction, resolution {info['resolution']} ({', '.join(info['generators'])})"
              if info["design"] == "fractional" else "full factorial")
    return pd.DataFrame(s.table()), (f"{len(exp.cells())} cells ({design}) x {exp.repetitions} repetitions = "
                                     f"{len(s.runs)} runs, datasets {', '.join(s.datasets)}, "
                                     f"estimated {format_duration(s.estimated_s)}")


def run_matrix(study: Study, progress: bool = True) -> dict[str, Any]:
    """Step 10: run or resume the matrix; returns counts and the status afterwards."""
    counts = run_study(study, progress=progress)
    return {**counts, **study_status(study)}


def analyse_study(study: Study) -> Analysis:
    """Step 20: processed tables from the raw runs."""
    return analyse(study.store, study.experiment)


def make_figures(study: Study) -> list[Path]:
    """Step 30: figures and the paper's generated inputs from the processed tables."""
    written = publish(study.store, study.experiment, study.profile, paths.figures_dir(),
                      paths.generated_dir())
    write_json_atomic(paths.generated_dir() / "provenance.json", {
        "profile": study.profile, "results_dir": os.path.relpath(study.store.root, paths.output_root()), "experiment": study.experiment.name,
        "spec_digest": study.experiment.digest(),
    })
    return written
