"""Which results a study's analysis, figures and paper read: an explicit choice, never a silent switch.

The choice (``--data`` on the command line, ``make … DATA=…``, the notebooks' ``data`` parameter):

- ``reference``: the committed ``data/reference/<experiment>`` (the analysis notebooks' default);
- ``runs``: your own ``data/runs/<experiment>``, complete or not (you asked for it);
- a directory: a data root holding ``<dir>/<experiment>``;
- ``auto`` (the command line's and make's default): your runs once they hold a *complete* campaign (every
  planned run of it ok), else the committed reference, else whatever your runs hold (a study with no
  reference). So one finished run, or a campaign stopped half way, never replaces the complete reference;
  finishing the campaign (or asking for ``runs``) does.

Pure: callers (:func:`dbmatrix.study.data_source`) read the campaigns' states from the results directories.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dbmatrix.campaign_state import CampaignState

CHOICES = ("auto", "reference", "runs")
DataArg = str | os.PathLike[str] | None


def parse_choice(value: DataArg) -> str:
    """``auto`` (also for None or ""), ``reference``, ``runs``, or the directory as given."""
    if value is None or str(value).strip() == "":
        return "auto"
    text = str(value).strip()
    return text.lower() if text.lower() in CHOICES else text


def is_keyword(value: DataArg) -> bool:
    """Whether `value` names a choice (auto, reference, runs) rather than a directory."""
    return parse_choice(value) in CHOICES


@dataclass(frozen=True)
class DataSource:
    """Where one study's results are read from, which choice picked it, and why (one line for the user)."""

    experiment: str
    path: Path
    origin: str  # reference | runs | dir
    choice: str  # auto | reference | runs | the directory given
    reason: str

    def line(self) -> str:
        return f"{self.origin} {self.path} (--data {self.choice}: {self.reason})"


def _runs_summary(states: Sequence[CampaignState]) -> str:
    if not states:
        return "no runs"
    return "; ".join(s.describe() for s in states)


def choose_source(experiment: str, choice: DataArg, *, runs: Path, reference: Path, reference_exists: bool,
                  runs_states: Sequence[CampaignState]) -> DataSource:
    """The results directory `choice` selects for `experiment` (see the module doc for the rule).

    `runs`/`reference`: the experiment's own runs and reference directories; `runs_states`: the campaigns
    found in `runs` with their completeness (:func:`dbmatrix.campaigns.campaign_states`)."""
    c = parse_choice(choice)
    if c not in CHOICES:
        path = Path(c).resolve() / experiment
        return DataSource(experiment, path, "dir", c, "a data root named explicitly")
    if c == "reference":
        why = "asked for" if reference_exists else "asked for, but this study has no committed reference (not run)"
        return DataSource(experiment, reference, "reference", c, why)
    if c == "runs":
        return DataSource(experiment, runs, "runs", c, f"asked for: {_runs_summary(runs_states)}")
    complete = [s.number for s in runs_states if s.complete]
    if complete:
        return DataSource(experiment, runs, "runs", c,
                          f"your runs hold complete campaign(s) {', '.join(map(str, complete))}")
    if reference_exists:
        mine = (f"your runs ({_runs_summary(runs_states)}) hold no complete campaign; --data runs reads them"
                if runs_states else "no runs of your own yet")
        return DataSource(experiment, reference, "reference", c, mine)
    return DataSource(experiment, runs, "runs", c,
                      f"no committed reference for this study; {_runs_summary(runs_states)}")
