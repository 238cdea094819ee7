"""`plan`, `status` and `verdicts --json`: the content their text shows, as one JSON document on stdout.

Each builder reads the same objects the text output formats (the plan summary, the study status, the claims'
verdicts) and keeps their field names; what the text only has as sentences from other modules (the claims a
plan decides, the Kalibera-Jones allocation, the campaign-level notes) comes as those lines. Numbers stay
numbers (seconds, not "1h02m"); a missing number (NaN) is null.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbmatrix import paths


def jsonable(x: Any) -> Any:
    """`x` with paths as strings, NaN and infinities as null, numpy/pandas scalars as Python numbers,
    dataclasses and data frames as objects and lists of rows."""
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return jsonable({f.name: getattr(x, f.name) for f in dataclasses.fields(x)})
    if hasattr(x, "to_dict") and hasattr(x, "columns"):  # a data frame: its rows
        return jsonable(x.to_dict(orient="records"))
    if isinstance(x, Path):
        return str(x)
    if hasattr(x, "item") and callable(x.item):  # a numpy scalar
        x = x.item()
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if x is None or isinstance(x, (str, int, bool)):
        return x
    return str(x)


def emit(doc: Any) -> None:
    """`doc` as indented JSON on stdout (strict JSON: no NaN)."""
    sys.stdout.write(json.dumps(jsonable(doc), indent=2, allow_nan=False) + "\n")


def _campaigns(study: Any) -> dict[str, Any]:
    """The campaigns of the study's results directory and what ``--campaign auto``/``last`` would run."""
    from dbmatrix.run.campaigns import choose
    from dbmatrix.run.matrix import campaign_table
    from dbmatrix.study import campaign_states_of

    states = campaign_states_of(study.store, study.experiment)
    return {"results_dir": study.store.root, "campaigns": campaign_table(study.store, states),
            "auto_would_run": choose("auto", states, study.experiment.campaign_maximum).line(),
            "last_would_run": choose("last", states).line()}


def plan_doc(study: Any, checks: Sequence[Any] | None, lines: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """What `dbmatrix plan` prints for one study (:func:`dbmatrix.cli._plan_one` and the lines after it);
    `lines`: the text's own lines the command has (``hosts``: one per host, ``checked``, ``allocation``: the
    Kalibera-Jones repetitions, ``slurm``: the allocations a Slurm inventory requests)."""
    from dbmatrix.claim_plan import claim_plan_lines
    from dbmatrix.run.context import media_used
    from dbmatrix.run.matrix import summarize_study

    exp, s = study.experiment, summarize_study(study)
    w = exp.workload
    media = study.inventory.hosts[0].media
    workload = {"name": w.name, "tables": w.tables, "rand_type": w.rand_type,
                **({"warehouses": w.warehouses, "isolation": w.isolation, "strings": w.strings}
                   if w.name == "tpcc" else {"table_size": w.table_size})}
    return {
        "experiment": exp.name, "spec": study.spec_path, "digest": exp.digest(), "seed": exp.seed,
        "workload": workload, "warmup_s": exp.warmup_s, "measure_s": exp.measure_s,
        "cells": len(exp.cells()), "varied": exp.varied_factors(), "repetitions": exp.repetitions,
        "design": exp.design_info(),
        "calibration": exp.topology.calibrate,  # a dataclass or None: jsonable makes it an object
        "instances": ({"instances": exp.factors["instances"], "pinning": exp.factors["pinning"],
                       "hosts": list(exp.topology.hosts), "client": exp.topology.client,
                       "placement_tool": exp.cpu_placement.tool} if exp.topology.instances else None),
        "hosts": [{**_host(h), "line": line} for h, line in zip(study.inventory.hosts, lines.get("hosts", ()))],
        "media": [{"name": m, "emulates": media[m].emulates} for m in media_used(exp)],
        "comparisons": [{"factor": c.factor, "a": c.a, "b": c.b, "within": list(c.within)}
                        for c in exp.comparisons],
        "adaptive": ({"max_repetitions": exp.noise.max_repetitions,
                      "target_halfwidth_pct": exp.noise.target_halfwidth_pct} if exp.noise.adaptive else None),
        "datasets": s.datasets, "runs": s.table(),
        "estimate": {**s.as_dict(), "results_dir": study.store.root},
        "checked": ({"hosts": checks, "line": next(iter(lines.get("checked", ())), None)}
                    if checks is not None else None),
        "campaigns": _campaigns(study),
        "claims": claim_plan_lines(study),
        "allocation": list(lines.get("allocation", ())),
        "slurm": list(lines.get("slurm", ())),
    }


def _host(h: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": h.name, "local": h.is_local, "workdir": h.workdir}
    if not h.is_local:
        t = h.ssh_target()
        doc.update(login=t.login, address=h.address, port=h.port, key=t.key_path,
                   known_hosts=t.known_hosts_path, media=sorted(h.media))
    return doc


def status_doc(study: Any, data: str | None) -> dict[str, Any]:
    """What `dbmatrix status` prints for one study: where figures and the paper read it, the latest
    campaign's counts (per host too), the campaigns and the time its records account for."""
    from dbmatrix.run.matrix import study_status, time_accounting
    from dbmatrix.study import data_source

    src = data_source(study.experiment, data)
    return {"experiment": study.experiment.name,
            "reads": {"path": paths.display_path(src.path), "origin": src.origin, "choice": src.choice,
                      "reason": src.reason},
            **study_status(study).as_dict(),
            "last_would_run": _campaigns(study)["last_would_run"],
            "time": time_accounting(study.store)}


def decisions_doc(costs: Any, summary: Any) -> list[dict[str, Any]]:
    """What running until decided cost, per study (the judgement's decision tables, which `verdicts` prints as
    "until decided" lines): its summary per campaign and its rows per claim and campaign."""
    return [{"study": str(study), "campaigns": g, "claims": costs[costs["study"] == study]}
            for study, g in summary.groupby("study", sort=False)] if len(summary) else []


def verdicts_doc(result: Any, flips: Any, studies: Sequence[Any], campaign_notes: Sequence[str],
                 decisions: Sequence[Mapping[str, Any]], boots: Any = None) -> dict[str, Any]:
    """What `dbmatrix verdicts` prints: per claim its campaigns' verdicts and the pooled one, its estimate,
    interval and level, how its conditions combine and each condition's verdict; the counts; the notes; the
    boot check (claims-boots.csv's rows) when given."""
    from dbmatrix.analyse.verdict_text import (
        class_counts,
        combine_of,
        conditions,
        confidence_of,
        heterogeneity_of,
        verdict_and_reason,
    )
    from dbmatrix.publish.claims_tex import opposed_claims

    table = result.claims
    by_id = flips.set_index("id")
    ks = result.campaign_numbers()
    rows = []
    for _, r in table.iterrows():
        verdict, reason = verdict_and_reason(r)
        f = by_id.loc[r["id"]] if r["id"] in by_id.index else None
        rows.append({
            "id": r["id"], "seed": r["seed"], "verdict": verdict, "reason": reason,
            "kind": r.get("kind"), "estimate": r.get("estimate"), "ci_lo": r.get("ci_lo"), "ci_hi": r.get("ci_hi"),
            "confidence": confidence_of(r), "combine": combine_of(r) or "one condition",
            "heterogeneity": heterogeneity_of(r), "campaigns": r.get("campaigns"),
            "registration": r.get("registration") or "", "study": r.get("study"),
            "per_campaign": {str(k): result.campaign_verdict(r["id"], k) or None for k in ks},
            "pooled": None if f is None else f["pooled"],
            "flip": None if f is None else bool(f["flip"]),
            "contradicted": None if f is None else bool(f.get("contradicted", False)),
            "conditions": [dataclasses.asdict(c) for c in conditions(r, result.levels)],
        })
    return {"claims": rows,
            "counts": {k: n for k, n in class_counts(table["verdict"].fillna("").astype(str)).items() if n},
            "campaign_numbers": list(ks),
            "judged_on_several_campaigns": int((table["campaigns"] > 1).sum()),
            "flipping": int(flips["flip"].sum()),
            "opposed": list(opposed_claims(result)),
            "contradicted": flips.loc[flips["contradicted"], "id"].tolist(),
            "campaign_notes": list(campaign_notes),
            "until_decided": list(decisions),
            "boot_check": [] if boots is None or boots.empty else boots.to_dict(orient="records"),
            "studies": [s.experiment.name for s in studies]}
