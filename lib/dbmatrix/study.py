"""A study = profile + ONE experiment spec + inventory + result store; a profile runs several studies.

`notebooks/params/<profile>.yaml` lists the profile's specs (``specs: [...]``; a single ``spec:`` is
accepted too). Where a study's results live depends on what it is loaded for (:mod:`dbmatrix.paths`):
runs always go to ``data/runs/<experiment>`` (never into the committed ``data/reference``); analysis,
figures and the paper read what the data choice selects (:mod:`dbmatrix.datachoice`: ``auto``, the default
of the command line and make, is your runs once they hold a complete campaign, else the reference).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from dbmatrix import paths
from dbmatrix.analyse.kinds import StudyKind, kind_of
from dbmatrix.campaign_state import CampaignState, campaign_states, campaigns_found
from dbmatrix.datachoice import DataArg, DataSource, choose_source, parse_choice
from dbmatrix.hosts.inventory import Inventory, load_inventory
from dbmatrix.spec.designs import DESIGNS
from dbmatrix.spec.experiment import (
    Comparison,
    Experiment,
    SpecError,
    check_builds,
    check_host_cpus,
    check_media,
    load_spec,
)
from dbmatrix.spec.factors import factor as registry_factor
from dbmatrix.store import ResultStore

ANALYSIS_STAMP = "analysis.json"  # written last by steps.analyse_study: make's target for processed tables

PROFILES = ("smoke", "quick", "paper", "full")
PARAM_KEYS = ("spec", "specs", "inventory", "results_dir", "data")


@dataclass(frozen=True)
class Study:
    profile: str
    spec_path: Path
    experiment: Experiment
    inventory: Inventory
    store: ResultStore
    source: DataSource | None = None  # for reading: which data choice picked store.root, and why

    def check(self) -> None:
        """Everything that can be checked before the first run (media names per host; the CPUs of this
        machine's hosts for CPU sets per instance: remote hosts are checked when their run starts)."""
        for h in self.inventory.hosts:
            check_media(self.experiment, h.media, h.name)
            check_builds(self.experiment, h.builds, h.name)
            cal = self.experiment.topology.calibrate
            if cal is not None and not cal.cpu and h.media[cal.medium].kind != "throttled":
                raise SpecError(f"topology.calibrate.medium: {cal.medium!r} on host {h.name!r} is a "
                                f"{h.media[cal.medium].kind} medium; calibration sets a throttle limit, so it "
                                "needs kind: throttled")
            placed = self.experiment.topology.hosts
            if h.is_local and (not placed or h.name in placed):
                check_host_cpus(self.experiment, h.name, len(os.sched_getaffinity(0)))

    @property
    def kind(self) -> str:
        """The name of its study kind (:func:`study_kind`)."""
        return study_kind(self.experiment).name

    def has_data(self) -> bool:
        return paths.has_completed_runs(self.store.root)


def campaign_states_of(store: ResultStore, exp: Experiment) -> list[CampaignState]:
    """Every campaign of the results directory (with a manifest or a record) and how complete it is."""
    records = list(store.records())
    numbers = campaigns_found(records, (int(r["campaign"]) for r in store.campaigns()))
    planned = {k: [r.run_id for r in exp.plan(k)] for k in numbers}
    return campaign_states(planned, records)


def data_source(exp: Experiment, data: DataArg = None) -> DataSource:
    """Which results directory analysis, figures and the paper read for `exp` under the data choice `data`
    (auto, reference, runs or a data root; :mod:`dbmatrix.datachoice`)."""
    runs = paths.run_dir(exp.name)
    states = campaign_states_of(ResultStore(runs), exp) if (runs / "raw").is_dir() else []
    ref = paths.reference_dir(exp.name)
    return choose_source(exp.name, data, runs=runs, reference=ref, reference_exists=ref.is_dir(),
                         runs_states=states)


def study_kind(exp: Experiment) -> StudyKind:
    """What a study measures: the first registered kind that recognises it (:mod:`dbmatrix.analyse.kinds`:
    galera, scaleout, tpcc, threads, else storage)."""
    return kind_of(exp)


def sittings(studies: Sequence[Study], named: bool = False) -> tuple[list[Study], list[str]]:
    """The studies a profile's run runs, and a line for each it leaves to a sitting of its own (a soak:
    :attr:`dbmatrix.analyse.kinds.StudyKind.own_sitting`), saying how to run it; `named`: the user named the
    studies (``--spec``), so all run."""
    run, left = [], []
    for s in studies:
        if named or not study_kind(s.experiment).own_sitting:
            run.append(s)
            continue
        spec = s.spec_path if s.spec_path is not None else "<its spec>"
        left.append(f"{s.experiment.name}: a {study_kind(s.experiment).noun} runs in a sitting of its own, not "
                    f"with the profile's campaign: dbmatrix run --spec {spec} --campaign auto (make soak)")
    return run, left


def profile_params(profile: str) -> dict[str, Any]:
    p = paths.params_file(profile)
    if not p.is_file():
        known = sorted(x.stem for x in p.parent.glob("*.yaml"))
        raise SpecError(f"profile: unknown profile {profile!r}; allowed: {', '.join(known)}")
    params = yaml.safe_load(p.read_text()) or {}
    unknown = sorted(set(params) - set(PARAM_KEYS))
    if unknown:
        raise SpecError(f"{p.name}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(PARAM_KEYS)}")
    return params


def profile_specs(profile: str) -> list[Path]:
    """The profile's spec files in order: ``specs: [...]``, else ``spec:``, else specs/<profile>.yaml."""
    params = profile_params(profile)
    raw = params.get("specs")
    if raw is None:
        raw = [params.get("spec") or f"specs/{profile}.yaml"]
    if isinstance(raw, (str, Path)):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(s, (str, Path)) for s in raw):
        raise SpecError(f"{profile}.yaml: specs must be a non-empty list of spec file paths, got {raw!r}")
    return [_resolve(s) for s in raw]


def _resolve(path: str | Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else paths.repo_root() / p


def load_study(
    profile: str = "smoke",
    spec: str | Path | None = None,
    inventory: str | Path | None = None,
    results_dir: str | Path | None = None,
    *,
    data: DataArg = None,
    for_run: bool = True,
) -> Study:
    """One study: the profile's (first) spec unless `spec` is given, its inventory unless `inventory` is.

    The results directory: `results_dir` if given; else for runs (``for_run``) ``data/runs/<experiment>``
    (or ``<data>/<experiment>`` for a data root), and for reading what the data choice `data` selects
    (:func:`data_source`). Runs never go into the committed reference."""
    params = profile_params(profile)
    spec_path = _resolve(spec) if spec else profile_specs(profile)[0]
    inv = inventory or params.get("inventory")
    experiment = load_spec(spec_path)
    source = None
    choice = parse_choice(data)
    if results_dir:
        root = Path(results_dir)
    elif for_run:
        named = {"auto": paths.run_dir(experiment.name), "runs": paths.run_dir(experiment.name),
                 "reference": paths.reference_dir(experiment.name)}
        root = named.get(choice) or Path(choice).resolve() / experiment.name
    else:
        source = data_source(experiment, data)
        root = source.path
    if for_run and paths.is_reference(root):
        raise SpecError(f"results: {root} is inside the committed reference data ({paths.reference_root()}); "
                        "runs go to data/runs/<experiment> (or --data DIR / --results DIR elsewhere)")
    if not for_run:
        experiment = recorded_design(experiment, root)
    study = Study(
        profile=profile,
        spec_path=spec_path,
        experiment=experiment,
        inventory=load_inventory(_resolve(inv) if inv else None),
        store=ResultStore(root),
        source=source,
    )
    study.check()
    return study


def recorded_design(exp: Experiment, root: Path) -> Experiment:
    """The spec with the design, factor levels and comparisons its results were recorded under (``plan.json``)
    when the spec file has changed them since (the quick reference's TPC-C half fraction over two block sizes,
    before the study became a full design at one block size): analysis, claims and the paper describe the
    data's cells, not the spec's new ones. Anything else the spec changed (windows, workload) stays the
    spec's; a results directory without a recorded spec, or recorded with the spec's digest, gives `exp`."""
    try:
        recorded = json.loads((root / "plan.json").read_text())
    except (OSError, ValueError):
        return exp
    spec = recorded.get("spec") or {}
    if recorded.get("spec_digest") == exp.digest() or spec.get("design") not in DESIGNS:
        return exp
    try:
        factors = {f: tuple(registry_factor(f).check(v) for v in spec["factors"][f]) if f in spec["factors"]
                   else exp.factors[f] for f in exp.factors}
        comparisons = tuple(Comparison(c["factor"], c["a"], c["b"], tuple(c.get("within") or ()))
                            for c in spec.get("comparisons") or ())
    except (KeyError, TypeError, SpecError):
        return exp
    if (spec["design"], factors, comparisons) == (exp.design, exp.factors, exp.comparisons):
        return exp
    return replace(exp, design=spec["design"], factors=factors, comparisons=comparisons)


def load_studies(
    profile: str = "smoke",
    spec: str | Path | None = None,
    inventory: str | Path | None = None,
    results_dir: str | Path | None = None,
    *,
    data: DataArg = None,
    for_run: bool = True,
) -> list[Study]:
    """Every study of a profile, in the order its params file lists the specs (or the one `spec`).

    `results_dir` names one study's directory, so it needs a single spec; `data` is the data choice (auto,
    reference, runs, or a root holding one directory per experiment)."""
    specs = [_resolve(spec)] if spec else profile_specs(profile)
    if results_dir and len(specs) > 1:
        raise SpecError(f"results: profile {profile!r} lists {len(specs)} specs; --results names one study's "
                        "directory, so give --spec too, or use --data DIR (one directory per experiment)")
    studies = [load_study(profile, s, inventory, results_dir, data=data, for_run=for_run) for s in specs]
    names = [s.experiment.name for s in studies]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpecError(f"specs: experiment name(s) {', '.join(dupes)} used by more than one spec of profile "
                        f"{profile!r}; each study needs its own name (its results directory)")
    return studies


def studies_with_data(studies: list[Study]) -> tuple[list[Study], list[Study]]:
    """Studies with completed runs (what figures and the paper use), and those without."""
    have = [s for s in studies if s.has_data()]
    return have, [s for s in studies if s not in have]


def sources(studies: Sequence[Study]) -> pd.DataFrame:
    """Where each study's data comes from (the data choice, what it picked and why), and whether it has
    completed runs."""
    return pd.DataFrame([{"experiment": s.experiment.name, "kind": s.kind,
                          "spec": paths.display_path(s.spec_path),
                          "results_dir": paths.display_path(s.store.root), "has_data": s.has_data(),
                          "reference": paths.is_reference(s.store.root),
                          "choice": s.source.choice if s.source else "results",
                          "reason": s.source.reason if s.source else "a results directory named explicitly"}
                         for s in studies])


def _make_path(p: Path) -> str:
    """A path for the Makefile, which runs in the repository: relative to it when inside, else absolute."""
    try:
        return str(p.resolve().relative_to(paths.repo_root().resolve()))
    except ValueError:
        return str(p.resolve())


def make_rules(studies: Sequence[Study], profile: str, data: str | None) -> str:
    """A makefile fragment: one rule per study with data, its processed tables (the stamp
    ``processed/analysis.json``) depending on its raw manifests, its spec and the analysis code."""
    have, missing = studies_with_data(list(studies))
    data_arg = f" --data {data}" if data else ""
    lines = [f"# Generated by `dbmatrix sources --profile {profile}{data_arg} --make`; do not edit.",
             f"SOURCES_PROFILE := {profile}", f"SOURCES_DATA := {data or ''}",
             "SOURCES_NOT_RUN := " + " ".join(s.experiment.name for s in missing)]
    stamps = []
    for s in have:
        root, spec = _make_path(s.store.root), _make_path(s.spec_path)
        stamp = f"{root}/processed/{ANALYSIS_STAMP}"
        stamps.append(stamp)
        lines += ["", f"{stamp}: $(wildcard {root}/raw/*/manifest.json) {spec} $(ANALYSIS_CODE)",
                  f"\t$(BIN)/dbmatrix analyse --profile {profile} --spec {spec} --results {root}"]
    lines.insert(4, "STUDY_STAMPS := " + " ".join(stamps))
    return "\n".join(lines) + "\n"
