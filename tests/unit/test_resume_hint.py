"""The line a run command over several studies ends with when runs failed: how to retry them without
starting campaigns nobody asked for (boot 776df624: scalegrid's campaign 5 lost one run to a stalled host;
the same command with --campaign auto retried it and also started campaign 6 of remote and builds)."""

from __future__ import annotations

from dbmatrix.run.reports import RunReport, resume_hint


def _report(campaign: int, ok: int, failed: int, complete: bool | None) -> RunReport:
    return RunReport(campaign=campaign, campaign_reason="", planned=ok + failed, already_done=0, ok=ok,
                     failed=failed, campaign_complete=complete)


def test_auto_says_last_retries_only_the_failed_runs_and_names_what_auto_would_start() -> None:
    reports = {"tpcc-paper": _report(6, 0, 0, None),  # at its maximum: nothing ran, auto starts nothing
               "scalegrid-paper": _report(5, 19, 1, False),
               "remote-paper": _report(5, 12, 0, True), "builds-paper": _report(5, 4, 0, True)}
    hint = resume_hint(reports, "auto")
    assert hint == ("incomplete: scalegrid-paper campaign 5 (1 failed); retry the failed runs with --campaign "
                    "last (the same command, with --campaign auto, would also start a new campaign of "
                    "remote-paper, builds-paper)")


def test_no_hint_without_a_failure_and_a_plain_one_where_the_same_command_resumes() -> None:
    assert resume_hint({"a": _report(2, 4, 0, True)}, "auto") is None
    assert resume_hint({}, "last") is None
    only = {"a": _report(2, 3, 1, False)}
    for option in ("auto", "last", 2):  # auto: no complete campaign beside it to start anew
        assert resume_hint(only, option) == ("incomplete: a campaign 2 (1 failed); the same command retries "
                                             "the failed runs in the same campaign")
    assert resume_hint(only, "new") == ("incomplete: a campaign 2 (1 failed); retry the failed runs with "
                                        "--campaign last (--campaign new starts another)")
