"""Sentences of the paper that describe the method, written from the records rather than by hand: how
the warm-up ran (each run's manifest records its ``window_mode``), what the campaigns were (their records:
boots, commits, datasets), the warm-up truncation the runs used and what a baseline's interval means.

They read the processed tables only: the runs table's ``window_mode`` columns and each study's
``processed/campaigns.json`` (:mod:`dbmatrix.analyse.campaign_records`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pandas as pd

from dbmatrix.analyse.figure_data import StudyTables, efficiency_figure_table
from dbmatrix.publish.paper import and_list, latex_escape
from dbmatrix.publish.paper_inputs import repetitions_text


def _tt(name: str) -> str:
    return f"\\texttt{{{latex_escape(name)}}}"


def window_modes(runs: pd.DataFrame | None) -> tuple[Counter[str], list[str]]:
    """How a study's completed runs warmed up (``one_process``, ``two_process``, ``measure_only``;
    ``unrecorded`` where a run did not record it) and the reasons recorded for a two-process window."""
    if runs is None or runs.empty:
        return Counter(), []
    ok = runs[runs["status"] == "ok"] if "status" in runs.columns else runs
    modes = ok.get("window_mode", pd.Series(index=ok.index, dtype=object))
    reasons = ok.get("window_mode_reason", pd.Series(index=ok.index, dtype=object))
    return (Counter(modes.where(modes.notna(), "unrecorded").astype(str)),
            list(dict.fromkeys(str(r) for r in reasons.dropna() if str(r))))


def warmup_text(studies: Sequence[StudyTables]) -> dict[str, str]:
    """``warmupModeText``: in how many runs warm-up and window were one sysbench process, and which runs
    warmed up in a separate one (and why); with the counts as macros."""
    per = {st.name: window_modes(st.a.runs if st.a is not None else None) for st in studies}
    total: Counter[str] = Counter()
    for modes, _ in per.values():
        total.update(modes)
    n = sum(total.values())
    one, two = total.get("one_process", 0), total.get("two_process", 0)
    parts = []
    if one:
        parts.append(f"in {one} of the build's {n} runs the warm-up and the measured window are one sysbench "
                     "process: at the end of the warm-up sysbench prints a checkpoint report and resets its "
                     "counters and latency histogram (\\texttt{-{}-report-checkpoints}), and the window's "
                     "snapshots are taken at that report, so the window follows the warm-up without a pause")
    if two:
        studies_two = [name for name, (m, _) in per.items() if m.get("two_process")]
        reasons = sorted({r for name in studies_two for r in per[name][1]})
        parts.append(f"in {two} runs ({', '.join(_tt(s) for s in studies_two)}) the warm-up is a separate "
                     "sysbench run before the window opens"
                     + (f" ({latex_escape('; '.join(reasons))})" if reasons else ""))
    other = n - one - two
    if other:
        parts.append(f"{other} runs measured without a warm-up or recorded no window mode")
    text = "; ".join(parts) if parts else "no completed run records how it warmed up"
    return {"warmupModeText": text[:1].upper() + text[1:], "nOneProcessRuns": str(one),
            "nTwoProcessRuns": str(two), "nBuildRuns": str(n)}


def _day_time(utc: Any) -> str:
    s = str(utc or "")
    return s[:16].replace("T", " ") if s else "an unrecorded time"


def campaigns_text(studies: Sequence[StudyTables]) -> dict[str, str]:
    """``campaignsText``: how many campaigns each study has and what differs between them (boots, code,
    datasets, start), from the campaign records; ``nCampaignsMax``."""
    rows = []
    for st in studies:
        for r in st.campaign_summaries():
            datasets = r.get("datasets") or []
            rows.append({"study": st.name, "k": int(r["campaign"]), "boots": tuple(r.get("boot_ids") or ()),
                         "hosts": tuple(r.get("hosts") or ()), "start": r.get("started_utc"),
                         "commits": tuple(str(c)[:8] for c in r.get("commits") or ()), "dirty": bool(r.get("dirty")),
                         "reused": sum(not d.get("fresh") for d in datasets), "datasets": len(datasets)})
    if not rows:
        return {"campaignsText": "No study of this build has a campaign record: every study is one campaign, "
                                 "and its intervals are within one campaign.", "nCampaignsMax": "1"}
    df = pd.DataFrame(rows)
    counts = df.groupby("study", sort=False)["k"].nunique()
    most = int(counts.max())
    same_counts = counts.nunique() == 1
    lead = (f"Every study of this build has {most} campaign{'s' if most > 1 else ''}" if same_counts else
            "The studies have " + ", ".join(f"{int(c)} ({_tt(s)})" for s, c in counts.items()) + " campaigns")
    if most < 2:
        return {"campaignsText": lead + ", so its intervals are within one campaign.", "nCampaignsMax": str(most)}
    boots = {b for bs in df["boots"] for b in bs}
    hosts = sorted({h for hs in df["hosts"] for h in hs})
    later = df[df["k"] > 1]
    facts = []
    if len(boots) == 1:
        facts.append(f"all of them ran on the same boot of {', '.join(_tt(h) for h in hosts)} (one boot id), "
                     "so the campaign level does not capture a reboot")
    else:
        facts.append(f"they ran on {len(boots)} boots of {', '.join(_tt(h) for h in hosts)}")
    starts = pd.to_datetime(df["start"], utc=True, errors="coerce")
    if starts.notna().all():
        span = (starts.max() - starts.min()).total_seconds() / 3600
        facts.append(f"the campaigns started between {_day_time(df['start'].min())} and "
                     f"{_day_time(df['start'].max())} UTC ({span:.1f}\\,h apart at most)")
    commits = sorted({c for cs in df["commits"] for c in cs if c})
    dirty = sorted({c for cs, d in zip(df["commits"], df["dirty"]) if d for c in cs if c})
    if len(commits) > 1:
        facts.append(f"the code differed (commits {', '.join(_tt(c) for c in commits)}"
                     + (f"; {', '.join(_tt(c) for c in dirty)} with uncommitted changes" if dirty else "") + ")")
    elif commits:
        facts.append(f"the code was the same (commit {_tt(commits[0])}"
                     + (", with uncommitted changes" if dirty else "") + ")")
    reused, total = int(later["reused"].sum()), int(later["datasets"].sum())
    if total:
        facts.append("the later campaigns reused the first one's dataset snapshots" if reused == total else
                     "the later campaigns prepared fresh datasets" if reused == 0 else
                     f"the later campaigns reused {reused} of their {total} dataset snapshots")
    text = (lead + "; " + "; ".join(facts) + ". The variation between campaigns is therefore that between "
            "runs of the whole matrix at different times" + (" on one boot" if len(boots) == 1 else "")
            + ", which the claims' intervals include.")
    return {"campaignsText": text, "nCampaignsMax": str(most)}


READ_BELOW_P = 0.05  # the pooled drifts whose counters the method text reads out


def _latex_pct(r: float) -> str:
    return f"${100 * (r - 1):+.1f}$\\,\\%"


def sentinel_text(studies: Sequence[StudyTables]) -> dict[str, str]:
    """``sentinelText``: the A/A sentinel's drift per study and campaign (``processed/sentinel-drift.csv``,
    :mod:`dbmatrix.analyse.sentinel`), or that no study has run one yet."""
    from dbmatrix.analyse.sentinel import DRIFT_ALPHA, pooled_drift

    parts, drifted, pooled, readings, unprobed = [], 0, [], [], []
    for st in studies:
        f = st.store.processed / "sentinel-drift.csv"
        if not f.is_file() or f.stat().st_size == 0:
            continue
        t = pd.read_csv(f)
        if (pool := pooled_drift(t)) is not None:
            pooled.append(f"{_tt(st.name)} ${100 * (pool.ratio - 1):+.0f}$\\,\\% over {pool.campaigns} "
                          f"campaigns ($Z = {pool.z:.2f}$, $p = {pool.p:.2g}$)")
            if pool.p < READ_BELOW_P and (reading := pool.reading(pct=_latex_pct, say_unprobed=False)):
                if not math.isfinite(pool.ratios.get("probe_cpu_ratio", math.nan)):
                    unprobed.append(_tt(st.name))
                readings.append(f"{_tt(st.name)}: {reading}")
        for _, r in t.iterrows():
            ratio, p = float(r["ratio"]), float(r["p"])
            if not (math.isfinite(ratio) and math.isfinite(p)):
                parts.append(f"{_tt(st.name)} campaign {int(r['campaign'])}: {latex_escape(str(r['note']))}")
                continue
            drifted += str(r["drift"]) == "yes"
            parts.append(f"{_tt(st.name)} campaign {int(r['campaign'])}: ${100 * (ratio - 1):+.0f}$\\,\\% "
                         f"($z = {float(r['z']):.2f}$, $p = {p:.2g}$)")
    if not parts:
        return {"sentinelText": "No campaign of this build ran the A/A sentinel (a fixed cell at a campaign's start "
                                "and end) yet."}
    return {"sentinelText": (
        "A fixed A/A sentinel cell ran at the start and at the end of the campaigns that have one; its closing "
        "throughput against its opening one, tested against the study's run-to-run spread: " + "; ".join(parts)
        + (f". No campaign drifted at the registered level ($p < {DRIFT_ALPHA:g}$), so none is set aside for "
           "drift." if not drifted else f". {drifted} drifted at the registered level ($p < {DRIFT_ALPHA:g}$): "
           "their campaigns are kept and flagged.")
        + (" Over each study's campaigns (Stouffer's combination of their $z$; a descriptive check we added "
           "after these numbers showed closing runs below opening ones in every campaign of some studies): "
           + "; ".join(pooled) + ". A drift in one direction within every sitting is noise in every contrast "
           "(the runs' order is random), not a bias; it widens the runs' variance component the intervals "
           "already carry." if pooled else "")
        + (f" What the sentinel runs' own counters say where the pooled drift has $p < {READ_BELOW_P:g}$ "
           "(throughput is CPU use over CPU time per transaction, exactly; the closing runs' ratios to the "
           "opening ones, geometric means over the campaigns): " + "; ".join(readings) + "."
           + (f" The campaigns of {and_list(unprobed)} ran before the platform probe (fixed CPU work and "
              "synchronous writes with the server stopped, after every sentinel run), which tells the platform's "
              "speed from the server's waiting." if unprobed else "") if readings else "")
        + " The sentinel is a check on the sitting, not part of the design: no claim reads its runs.")}


def trim_text(runs: pd.DataFrame, measure_s: int, min_seconds: int) -> str:
    """``steadyTrimText``: which warm-up truncation the runs used; when none was (windows too short),
    say so instead of naming a method "none"."""
    used = sorted({str(m) for m in runs.get("trim_method", pd.Series(dtype=object)).dropna() if str(m) != "none"})
    if not used:
        return (f"No run was truncated: MSER \\citep{{white1997,white2000}} needs windows of at least "
                f"{min_seconds}\\,s and these are {measure_s}\\,s, so each run's whole measured window is kept")
    n = int(runs["trim_method"].isin(used).sum())
    return (f"{latex_escape(' and '.join(used))} truncation (MSER on batch means of that many seconds; "
            f"\\citealp{{white1997,white2000}}) finds the end of the initial transient in {n} of "
            f"{len(runs)} runs (the others' windows are too short to search)")


def baseline_text(drawn: dict[str, StudyTables]) -> str:
    """``baselineText``: a baseline compared with itself is 1; whether the efficiency figure draws an
    interval around it (and what that interval is) comes from the figure's own table."""
    text = ("In the ratio tables a baseline cell compared with itself is 1 by definition and has no "
            "interval")
    if "efficiency" not in drawn:
        return text + "."
    table, _ = efficiency_figure_table(drawn["efficiency"])
    base = table[table["label"].str.endswith("(baseline)")]
    if base.empty:
        return text + "."
    return text + ", as in Figure~\\ref{fig:efficiency} (drawn at 1 without bars)."


def intervals_text(st: StudyTables) -> dict[str, str]:
    """``intervalsText``: how many runs a cell's interval rests on (repetitions x campaigns) and its degrees
    of freedom, from the study's processed cells and runs; ``nStudyCampaigns``."""
    from scipy import stats as sps

    cells, runs = st.analysis.cells, st.analysis.runs
    k = int(runs["campaign"].nunique()) if "campaign" in runs.columns and len(runs) else 1
    n = pd.to_numeric(cells.get("n", pd.Series(dtype=float)), errors="coerce").dropna()
    each = f"in each of {k} campaigns" if k > 1 else "in its one campaign"
    if n.empty:
        return {"intervalsText": "No cell has runs to give an interval.", "nStudyCampaigns": str(k),
                "campaignsPerCellText": each}
    lo, hi = int(n.min()), int(n.max())
    runs_text = f"{lo}" if lo == hi else f"{lo} to {hi}"
    reps = repetitions_text(runs) if "cell_id" in runs.columns else (
        f"{st.experiment.repetitions} repetitions in each of {k} campaigns")
    per = f" ({reps})" if k > 1 else ""
    if lo < 2:
        df_text = "a cell with one run has no interval"
    else:
        t = float(sps.t.ppf(0.975, lo - 1))
        df_text = (f"so a cell's Student-$t$ interval has {lo - 1} degree{'s' if lo > 2 else ''} of freedom "
                   f"(t = {t:.2f})" + (" or more" if hi > lo else ""))
    return {"intervalsText": f"Each cell of {_tt(st.name)} has {runs_text} runs{per}, {df_text}.",
            "nStudyCampaigns": str(k), "campaignsPerCellText": each}


def design_threat_text(studies: Sequence[StudyTables]) -> str:
    """``designThreatText``: what each study's design leaves aliased (the threats paragraph), from the designs
    the studies were recorded with; a build of full factorials says nothing is aliased."""
    from dbmatrix.analyse.kinds import get_kind

    parts = []
    for st in studies:
        info = st.experiment.design_info()
        noun = f"The {get_kind(st.kind).noun} ({_tt(st.name)})"
        if info["design"] == "fractional":
            r = int(info["resolution"])
            parts.append(f"{noun} is a fraction of resolution {r}: it aliases each main effect "
                         f"with interactions of {r - 1} factors and each two-way interaction with interactions of "
                         f"{r - 2}, which the model assumes negligible.")
        elif info["design"] == "crossed":
            two = [latex_escape(f) for f in info["letters"]]
            parts.append(f"{noun} is a half fraction of its two-level factors ("
                         + ", ".join(two) + ") crossed with "
                         + ", ".join(latex_escape(f) for f in info["crossed_with"])
                         + ": each of their main effects is aliased with the interaction of the others, so a "
                         "claim that needs one of those contrasts is not identified (the claims table says which).")
    if not parts:
        return "Every study of this build is a full factorial of its factors: no effect is aliased."
    rest = " The other studies are full factorials." if len(parts) < len(studies) else ""
    return " ".join(parts) + rest


def windows_text(studies: Sequence[StudyTables]) -> str:
    """``windowsText``: each study's warm-up and measured window ("3\\,s of warm-up and 45\\,s measured in the
    TPC-C study, 10\\,s and 45\\,s in the Galera study and the scale-out study"), equal windows named once."""
    from dbmatrix.analyse.kinds import get_kind

    by: dict[tuple[int, int], list[str]] = {}
    nouns = [get_kind(st.kind).noun for st in studies]
    for st, noun in zip(studies, nouns):
        # two studies of one kind (the TPC-C study and its diagnostic): named by their experiments
        name = f"the {noun}" if nouns.count(noun) == 1 else f"\\texttt{{{latex_escape(st.name)}}}"
        if name not in by.setdefault((st.experiment.warmup_s, st.experiment.measure_s), []):
            by[(st.experiment.warmup_s, st.experiment.measure_s)].append(name)
    if len(by) == 1:
        (w, m), = by
        return f"Measured windows of {m}\\,s follow a {w}\\,s warm-up"
    parts = []
    for k, ((w, m), nouns) in enumerate(sorted(by.items())):
        warm, measured = (" of warm-up", " measured") if k == 0 else ("", "")
        parts.append(f"{w}\\,s{warm} and {m}\\,s{measured} in {' and '.join(nouns)}")
    return ", ".join(parts)


def duration_threat_text(studies: Sequence[StudyTables]) -> str:
    """``durationThreatText``: whether the steady-state test could guard the averages, from every study's
    runs (a window too short to test is counted, not assumed away)."""
    from dbmatrix.analyse.tables import UNTESTED

    n = untested = 0
    for st in studies:
        runs = st.a.runs if st.a is not None else None
        if runs is None or runs.empty or "steady_reason" not in runs.columns:
            continue
        n += len(runs)
        untested += int(runs["steady_reason"].isin(UNTESTED).sum())
    if n and untested == n:
        return ("every run's window is too short for the steady-state test, so nothing here shows the averages "
                "steady (the \\texttt{paper} profile's windows are long enough to test).")
    if untested:
        return (f"the steady-state test guards the averages of the {n - untested} of {n} runs long enough to test, "
                "not against slow drifts longer than a run.")
    return (f"the steady-state test ran on all {n} runs; it guards the averages, not against slow drifts longer "
            "than a run.")
