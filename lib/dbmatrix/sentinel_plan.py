"""What `dbmatrix plan` and `status` say about a study's A/A sentinel (:mod:`dbmatrix.spec.sentinel`): the
cell and from which campaign it runs, and once measured, its drift per campaign and the change-point test
(:mod:`dbmatrix.analyse.sentinel`)."""

from __future__ import annotations

import json

from dbmatrix.analyse.sentinel import change_point, drift_table, load_sentinel, sentinel_lines
from dbmatrix.study import Study


def sentinel_plan_lines(study: Study) -> list[str]:
    """Indented lines (empty for a study without a sentinel)."""
    exp = study.experiment
    runs = load_sentinel(study.store.root)
    if runs.empty:
        s = exp.campaign_sentinel
        if s is None:
            return []
        cell = exp.sentinel_cell(s.from_campaign)
        return [f"  sentinel A/A: {cell.cell_id if cell else '?'} at the start and end of every campaign from "
                f"campaign {s.from_campaign} on; none measured yet"]
    doc = study.store.processed / "sentinel.json"
    sd = json.loads(doc.read_text()).get("run_sd_log") if doc.is_file() else None
    return [f"  {x}" for x in sentinel_lines(runs, drift_table(runs, sd), change_point(runs))]


__all__ = ["sentinel_plan_lines"]
