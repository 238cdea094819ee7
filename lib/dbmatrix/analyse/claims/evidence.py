"""What the studies of a build offer the claims, from their processed tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from dbmatrix.analyse.claims.model import Evidence
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.host_facts import merge_host_facts
from dbmatrix.analyse.kinds import get_kind

# Shares of the host's CPU time from a run's counters, in per cent: column -> its CPU-seconds per second column.
HOST_SHARES = {"host_iowait_pct": "host_iowait_cpus"}


def with_host_shares(runs: pd.DataFrame, cpus: Mapping[str, int]) -> pd.DataFrame:
    """The runs with :data:`HOST_SHARES` added: CPU-seconds per second over the host's logical CPUs, in %
    (NaN where the host's CPU count is unknown)."""
    if "host" not in runs.columns or not any(src in runs.columns for src in HOST_SHARES.values()):
        return runs
    runs = runs.copy()
    n = runs["host"].map(lambda h: cpus.get(str(h), float("nan"))).astype(float)
    for col, src in HOST_SHARES.items():
        if src in runs.columns:
            runs[col] = pd.to_numeric(runs[src], errors="coerce") / n * 100.0
    return runs


def claims_evidence(studies: Sequence[StudyTables]) -> list[Evidence]:
    """Per study (:class:`Evidence`): its runs, design, the host CPU counts of the build, and what its kind's
    estimators read (:meth:`dbmatrix.analyse.kinds.StudyKind.evidence_tables`), overall and per campaign
    (:meth:`~dbmatrix.analyse.kinds.StudyKind.campaign_tables`)."""
    cpus = {str(f.get("host")): int(f["logical_cpus"])
            for f, _ in merge_host_facts([st.host_record() for st in studies]) if f.get("logical_cpus")}
    out = []
    for st in studies:
        kind = get_kind(st.kind)
        runs = with_host_shares(st.runs, cpus) if st.a is not None else pd.DataFrame()
        extra, replication = kind.evidence_tables(st)
        out.append(Evidence(st.name, st.kind, runs, dict(st.experiment.factors),
                            replication, st.a.hosts if st.a is not None else None,
                            extra, design=st.experiment.design_info(), host_cpus=cpus,
                            campaign_extra=kind.campaign_tables(st), campaign_records=st.campaign_summaries(),
                            campaign_looks=st.experiment.campaign_repetitions is not None,
                            registered=tuple(st.experiment.claims)))
    return out
