"""What the run API hands back: a command's :class:`RunReport` (``run_study``) and a study's
:class:`StudyStatus` (``study_status``), as dataclasses; ``as_dict`` gives the JSON ``dbmatrix run`` prints
and the row notebook 10 shows (optional parts left out when empty)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def _as_dict(obj: Any, optional: frozenset[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        if f.name in optional and (v is None or v == {} or v == []):
            continue
        out[f.name] = v
    return out


@dataclass
class RunReport:
    """One run command's counts for one study: the campaign it ran and why, runs planned, already done,
    measured ok or failed in this command (``adaptive``: of them added by the adaptive rule), not attempted;
    with several hosts or a lost one, per-host figures and what was not run."""

    campaign: int
    campaign_reason: str
    planned: int
    already_done: int
    ok: int = 0
    failed: int = 0
    adaptive: int = 0
    not_attempted: int = 0
    other_hosts_runs: int | None = None  # --host: runs of the plan other hosts measure
    campaign_complete: bool | None = None  # None: nothing ran (the campaign record was not updated)
    not_run: dict[str, str] = field(default_factory=dict)  # run id -> why
    lost_hosts: dict[str, str] = field(default_factory=dict)  # host -> why
    lost_hosts_allowed: bool | None = None
    blocks_moved: list[dict[str, Any]] = field(default_factory=list)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # Fleet.summary()

    def count(self, status: str | None) -> None:
        """One more run measured with `status` (ok or failed)."""
        if status == "ok":
            self.ok += 1
        else:
            self.failed += 1

    def as_dict(self) -> dict[str, Any]:
        return _as_dict(self, _REPORT_OPTIONAL)

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([self.as_dict()])


_REPORT_OPTIONAL = frozenset({"other_hosts_runs", "campaign_complete", "not_run", "lost_hosts",
                              "lost_hosts_allowed", "blocks_moved", "hosts"})


def resume_hint(reports: dict[str, RunReport], campaign_option: str | int) -> str | None:
    """What to type to retry the failed runs of a run command over several studies, or None when none
    failed. With ``--campaign auto`` (the same command again) every study whose campaign is complete would
    start a new campaign beside the retries, and ``new`` would start new ones; ``last`` only continues the
    incomplete ones."""
    incomplete = {name: r for name, r in reports.items() if r.failed and not r.campaign_complete}
    if not incomplete:
        return None
    what = ", ".join(f"{name} campaign {r.campaign} ({r.failed} failed)" for name, r in incomplete.items())
    complete = [name for name, r in reports.items() if r.campaign_complete is True]  # at the maximum: None
    if campaign_option == "new":
        return f"incomplete: {what}; retry the failed runs with --campaign last (--campaign new starts another)"
    if campaign_option == "auto" and complete:
        return (f"incomplete: {what}; retry the failed runs with --campaign last (the same command, with "
                f"--campaign auto, would also start a new campaign of {', '.join(complete)})")
    return f"incomplete: {what}; the same command retries the failed runs in the same campaign"


@dataclass
class StudyStatus:
    """Counts of done/failed/pending runs and the estimated time left, in total and per host.

    ``estimated_remaining_s`` is the wall-clock time left (the hosts measure in parallel; the busiest
    host's share), ``estimated_remaining_machine_s`` the time summed over hosts. ``per_host`` gives each
    host's runs (planned, ok, failed, pending), its busy time (``busy_s``: the seconds its runs took,
    its own clock) and its remaining estimate; ``busy_s_total`` adds them over hosts (machine time, not
    wall time). ``lost_hosts`` names hosts the last run command lost.

    The counts are the latest campaign's (what ``--campaign last`` continues); ``campaigns`` lists every
    campaign with its completeness and boots, and ``next_auto`` what ``--campaign auto`` would do."""

    results_dir: str
    experiment: str
    campaign: int
    campaigns: list[dict[str, Any]]
    next_auto: str
    planned: int
    ok: int
    failed: list[str]  # run ids
    pending: int
    estimated_remaining_s: float
    estimated_remaining_machine_s: float
    hosts: list[str]
    per_host: dict[str, dict[str, Any]]
    busy_s_total: float
    lost_hosts: dict[str, str]
    host_check: str | None = None  # the last analysis's host check, one line

    def as_dict(self) -> dict[str, Any]:
        return _as_dict(self, frozenset())

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([self.as_dict()])


__all__ = ["RunReport", "StudyStatus"]
