"""What the studies of a build offer the claims, from their processed tables."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from dbmatrix.analyse.claims.model import Evidence
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.host_facts import merge_host_facts
from dbmatrix.analyse.kinds import get_kind


def claims_evidence(studies: Sequence[StudyTables]) -> list[Evidence]:
    """Per study (:class:`Evidence`): its runs, design, the host CPU counts of the build, and what its kind's
    estimators read (:meth:`dbmatrix.analyse.kinds.StudyKind.evidence_tables`), overall and per campaign
    (:meth:`~dbmatrix.analyse.kinds.StudyKind.campaign_tables`)."""
    cpus = {str(f.get("host")): int(f["logical_cpus"])
            for f, _ in merge_host_facts([st.host_record() for st in studies]) if f.get("logical_cpus")}
    out = []
    for st in studies:
        kind = get_kind(st.kind)
        runs = st.runs if st.a is not None else pd.DataFrame()
        extra, replication = kind.evidence_tables(st)
        out.append(Evidence(st.name, st.kind, runs, dict(st.experiment.factors),
                            replication, st.a.hosts if st.a is not None else None,
                            extra, design=st.experiment.design_info(), host_cpus=cpus,
                            campaign_extra=kind.campaign_tables(st), campaign_records=st.campaign_summaries()))
    return out
