"""Each profile's committed reference was recorded under its spec's current design (issue 42, item 3): a
user's runs of a profile are compared with cells they would also run, never with cells the spec no longer
has (the quick TPC-C reference once held 4 KB and 16 KB cells while the quick spec had 16 KB only)."""

from __future__ import annotations

import json
import re

import pytest

from dbmatrix import paths
from dbmatrix.spec.experiment import load_spec
from dbmatrix.study import profile_params, recorded_design


def _specs() -> list[tuple[str, str]]:
    out = []
    for params in sorted((paths.repo_root() / "notebooks" / "params").glob("*.yaml")):
        out += [(params.stem, spec) for spec in profile_params(params.stem).get("specs") or []]
    return out


@pytest.mark.parametrize(("profile", "spec"), _specs())
def test_the_committed_reference_has_the_specs_design(profile: str, spec: str) -> None:
    exp = load_spec(paths.repo_root() / spec)
    ref = paths.reference_dir(exp.name)
    if not (ref / "plan.json").is_file():
        pytest.skip(f"{profile}: {exp.name} has no committed reference")
    recorded = recorded_design(exp, ref)
    assert recorded is exp, (
        f"{profile}: {spec} ({exp.design}, {dict(exp.factors)}) differs in design from its committed reference "
        f"{paths.display_path(ref)} ({recorded.design}, {dict(recorded.factors)}): measure the reference again")
    # the cells (run ids without the repetition and campaign: repetitions until decided add blocks)
    cell = re.compile(r"-r\d+(-camp\d+)?$")
    planned = {cell.sub("", r.run_id) for r in exp.plan()}
    ran = {cell.sub("", json.loads(m.read_text())["run_id"]) for m in (ref / "raw").glob("*/manifest.json")}
    assert ran <= planned, f"{exp.name}: reference cells the spec does not plan: {sorted(ran - planned)[:4]}"
