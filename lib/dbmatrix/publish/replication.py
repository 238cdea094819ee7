"""The Galera study in the paper: macros, the settings table, figures (from analyse.replication's tables)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix.analyse.claims import FC_PAUSED
from dbmatrix.analyse.claims.catalogue import SEED002
from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.host_facts import run_facts

# Factors that can vary besides slave_threads in a replication study; settings are compared within them.
from dbmatrix.analyse.replication import (
    LEVEL,
    SEED_CLAIMS,
    SEED_FIGURES,
    SEED_MACHINE,
    WITHIN,
    group_keys,
    load_replication,
    pressured_setting,
    seed_position,
)
from dbmatrix.analyse.verdict_text import DEFAULT_CONFIDENCE, confidence_of, level_label, verdict_and_reason
from dbmatrix.publish import paper
from dbmatrix.spec.experiment import Experiment
from dbmatrix.store import write_text_atomic

# =============================================================================== paper

def _f(x: Any, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "--"
    return f"{float(x):,.{digits}f}".replace(",", "{,}").replace("-", "$-$")


def _signed(x: Any, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "--"
    return ("$+$" if float(x) >= 0 else "") + _f(x, digits)


def _change_pct(ratio: Any) -> str:
    """A ratio as a signed percentage change (1.11 -> +11.0)."""
    return _signed((ratio - 1) * 100, 1)


def _machine(facts: dict[str, Any]) -> dict[str, str]:
    cpus = facts.get("online_cpus") or facts.get("logical_cpus")
    mem = facts.get("mem_total_bytes")
    virt = facts.get("hypervisor_vendor")
    return {
        "replMachineCpus": str(cpus) if cpus else "--",
        "replMachineMemGiB": _f(mem / 2**30, 0) if mem else "--",
        "replMachineCpuModel": paper.latex_escape(str(facts.get("cpu_model") or "unknown CPU")),
        "replMachineVirt": paper.latex_escape(f"a {virt} virtual machine" if virt else "this machine"),
        "replMariadbVersion": paper.latex_escape(str(facts.get("mariadb_version") or "--")),
        "replGaleraVersion": paper.latex_escape(str(facts.get("galera_version") or "--")),
    }


def _setting(settings: pd.DataFrame, level: int, metric: str, within: dict[str, Any]) -> pd.Series | None:
    s = settings[(settings[LEVEL] == level) & (settings["metric"] == metric)]
    for k, v in within.items():
        s = s[s[k].astype(str) == str(v)]
    return None if s.empty else s.iloc[0]


# Every macro paper/replication.tex may use (defined as "--" when the data cannot give it).
MACRO_NAMES = tuple(
    [f"repl{k}" for k in ("VerdictRule", "SeedMachine", "Runs", "RunsFailed", "MachineCpus", "MachineMemGiB",
                          "MachineCpuModel", "MachineVirt", "MariadbVersion", "GaleraVersion", "Nodes",
                          "Repetitions", "MeasureS", "WarmupS", "Workload", "Tables", "TableSize",
                          "ClientThreads", "SstMethod", "Levels", "WriteTo", "FlushAtCommit", "Low", "High",
                          "ClusterStartS", "SstS", "PausedDiff", "PausedDiffLo", "PausedDiffHi",
                          "PausedSeedDiff", "LatPctlRatio", "LatPctlRatioLo", "LatPctlRatioHi",
                          "PausedNodeSpread", "Premise", "PremiseMet", "Campaigns", "Setting", "CalmSetting",
                          "CalMedium", "CalLimit", "CalCandidates", "CalTarget", "CalChosen", "CalPausedChosen",
                          "CalReached", "CalRuns", "CalWindowS", "Calibrated", "FollowersText",
                          "CalibrationText", "CalmText", "BottleneckText", "FitsText", "PausedCi", "TpsCi",
                          "LatCi")]
    + [f"replCalm{m}{n}" for m in ("Paused", "Tps", "LatAvg") for n in ("Low", "High")]
    + [f"replCalm{k}{b}" for k in ("PausedDiff", "TpsChangePct", "LatAvgChangePct") for b in ("", "Lo", "Hi")]
    + [f"repl{m}{n}{b}" for m in ("Paused", "Tps", "LatPctl", "LatAvg", "RecvQueue", "FcSent", "CertDeps")
       for n in ("Low", "High") for b in ("", "Lo", "Hi")]
    + [f"replN{n}" for n in ("Low", "High")]
    + [f"repl{c}{k}" for c in ("Paused", "Tps", "Lat") for k in ("Verdict", "SeedPosition")]
    + [f"repl{k}{x}" for k in ("Tps", "LatAvg") for x in ("Ratio", "RatioLo", "RatioHi", "ChangePct",
                                                          "ChangeLoPct", "ChangeHiPct", "SeedChangePct")]
)


# The seed's claims in this section -> their ids in the claims registry (dbmatrix.analyse.claims.CLAIMS).
CLAIM_IDS = {"paused": "applierPause", "tps": "applierTps", "lat": "applierLatency"}
VERDICT_RULE = ("the rule of the claims table (Method): a premise checked first (flow control must pause "
                f"the nodes at least {FC_PAUSED.threshold:g} % of the time with one applier, as the seed's did; "
                "not met or uncertain: not tested), then the whole interval, at the level stated beside it, "
                "against the claimed region beyond the margin of no effect (inside: agree; missing it: disagree; "
                "otherwise inconclusive), pooled over the campaigns, each campaign's own estimate a consistency "
                "check")


def replication_macros(tables: dict[str, pd.DataFrame], exp: Experiment | None = None,
                       facts: dict[str, Any] | None = None, claims: pd.DataFrame | None = None) -> dict[str, str]:
    """LaTeX number macros (names letters only, prefix ``repl``) for paper/replication.tex: settings,
    per-setting means with CIs, effects of the highest level against the lowest, the seed's claims
    with our verdicts (rule in ``replVerdictRule``), and the machine size from the host facts."""
    runs, settings, eff = (tables.get(k, pd.DataFrame()) for k in ("runs", "settings", "effects"))
    failed = tables.get("failed", pd.DataFrame())
    m: dict[str, str] = dict.fromkeys(MACRO_NAMES, "--")  # every name the section uses exists, even without data
    m.update(SEED_FIGURES)
    m.update({"replVerdictRule": paper.latex_escape(VERDICT_RULE),
                         "replSeedMachine": paper.latex_escape(SEED_MACHINE),
                         "replRuns": str(len(runs)), "replRunsFailed": str(len(failed))})
    m.update(_machine(facts or {}))
    if exp is not None:
        w = exp.workload
        per_setting = runs.groupby(LEVEL).size() if LEVEL in runs and len(runs) else pd.Series(dtype=int)
        reps = (str(exp.repetitions) if per_setting.empty else
                str(int(per_setting.min())) if per_setting.nunique() == 1 else
                f"{int(per_setting.min())}--{int(per_setting.max())}")
        m.update(replNodes=str(exp.topology.nodes), replRepetitions=reps,
                 replMeasureS=str(exp.measure_s), replWarmupS=str(exp.warmup_s),
                 replWorkload=paper.latex_escape(w.name if len(exp.factors["workload"]) == 1
                                                 else ", ".join(exp.factors["workload"])),
                 replTables=str(w.tables), replTableSize=_f(w.table_size, 0),
                 replClientThreads=", ".join(str(t) for t in exp.factors["threads"]),
                 replSstMethod=paper.latex_escape(exp.topology.sst_method),
                 replLevels=", ".join(str(v) for v in exp.factors[LEVEL]),
                 replWriteTo=paper.latex_escape(", ".join(exp.factors["write_to"])),
                 replFlushAtCommit=paper.latex_escape(str(exp.server_options.get(
                     "innodb_flush_log_at_trx_commit", "1 (the default)"))))
    m["replFollowersText"] = "the nodes keep their data on the same disk"
    small_pool = exp is not None and pool_below_data(exp.factors["cache_pct"])
    if exp is not None:
        m["replFollowersText"] += buffer_pool_words(exp.factors["cache_pct"])
    # what holds the appliers back (a calibrated limit overrides it: _prose), and whether the data fit in memory
    m["replBottleneckText"] = (
        "The followers are held back as the seed's were, by a buffer pool smaller than the data (an applier "
        "waits on page reads), not by an artificial limit; the reads come from this machine's storage, not the "
        "seed's NVMe, so the sizes of the pauses are this machine's." if small_pool else
        "Nothing but that flush holds the appliers back: no limit, and the data fit in the buffer pool.")
    m["replFitsText"] = "The windows are" if small_pool else "The dataset fits in the buffer pool, the windows are"
    m["replCalibrationText"] = "\\relax"  # no paragraph on purpose (an empty value reads as a missing number)
    m["replCalmText"] = "\\relax"
    if runs.empty or settings.empty:
        return m
    levels = sorted(int(v) for v in runs[LEVEL].unique())
    low, high = levels[0], levels[-1]
    m.update(replLow=str(low), replHigh=str(high))
    pressured = pressured_setting(runs)
    within = _within_dict(pressured)
    m["replSetting"] = paper.latex_escape(_setting_words(pressured))
    m.update(_calm_macros(runs, settings, eff, pressured, low, high))
    m.update(calibration_macros(tables.get("calibration", pd.DataFrame())))
    for name, level in (("Low", low), ("High", high)):
        for metric, macro, digits in (("fc_paused_pct", "Paused", 1), ("tps", "Tps", 0),
                                      ("lat_p95_ms", "LatPctl", 2), ("lat_avg_ms", "LatAvg", 2),
                                      ("recv_queue_avg", "RecvQueue", 1), ("fc_sent", "FcSent", 0),
                                      ("cert_deps_distance", "CertDeps", 0)):
            r = _setting(settings, level, metric, within)
            if r is None:
                continue
            m[f"repl{macro}{name}"] = _f(r["mean"], digits)
            m[f"repl{macro}{name}Lo"] = _f(r["ci_lo"], digits)
            m[f"repl{macro}{name}Hi"] = _f(r["ci_hi"], digits)
        r = _setting(settings, level, "fc_paused_pct", within)
        if r is not None:
            m[f"replN{name}"] = str(int(r["n"]))
    spread = pd.to_numeric(runs["fc_paused_pct_spread"], errors="coerce").dropna()
    m["replPausedNodeSpread"] = _f(spread.max(), 1) if len(spread) else "--"
    for metric, unit in (("cluster_start_s", 1), ("sst_s", 1)):
        v = pd.to_numeric(runs[metric], errors="coerce").dropna()
        macro = {"cluster_start_s": "replClusterStartS", "sst_s": "replSstS"}[metric]
        m[macro] = _f(v.mean(), unit) if len(v) else "--"
    judged = claims.set_index("id") if claims is not None and not claims.empty else pd.DataFrame()
    for claim, c in SEED_CLAIMS.items():
        e = eff[eff["metric"] == c["metric"]] if not eff.empty else eff
        if not e.empty and pressured != "all":
            e = e[e["within"].astype(str) == pressured]
        if e.empty:
            continue
        r = e.sort_values(["within", "level_a"], ascending=[True, False], kind="stable").iloc[0]
        est, lo, hi = float(r["estimate"]), float(r["ci_lo"]), float(r["ci_hi"])
        cid = CLAIM_IDS[claim]
        if cid in judged.index and pd.notna(judged.loc[cid, "estimate"]):
            j = judged.loc[cid]  # pooled over campaigns; stated as the claim states it
            est, lo, hi = float(j["estimate"]), float(j["ci_lo"]), float(j["ci_hi"])
            if claim == "lat":  # the claim: 1 applier / 16; this section: 16 / 1
                est, lo, hi = 1 / est, 1 / hi, 1 / lo
        cap = claim.capitalize()
        # the interval's level: the claims table's (a study run until decided: its last look's), else the
        # effects table's own interval (the analysis' default level)
        conf = confidence_of(judged.loc[cid]) if cid in judged.index and pd.notna(judged.loc[cid, "estimate"]) \
            else DEFAULT_CONFIDENCE
        m[f"repl{cap}Ci"] = level_label(conf, tex=True)
        m[f"repl{cap}Verdict"] = (verdict_and_reason(judged.loc[cid])[0] if cid in judged.index
                                  else "not tested")
        m[f"repl{cap}SeedPosition"] = seed_position(lo, hi, float(c["value"]))
        if claim == "paused":
            m.update(replPausedDiff=_signed(est), replPausedDiffLo=_signed(lo),
                     replPausedDiffHi=_signed(hi), replPausedSeedDiff=_signed(c["value"], 0))
        else:
            key = "Tps" if claim == "tps" else "LatAvg"
            m.update({f"repl{key}Ratio": _f(est, 3), f"repl{key}RatioLo": _f(lo, 3),
                      f"repl{key}RatioHi": _f(hi, 3), f"repl{key}ChangePct": _change_pct(est),
                      f"repl{key}ChangeLoPct": _change_pct(lo),
                      f"repl{key}ChangeHiPct": _change_pct(hi),
                      f"repl{key}SeedChangePct": _change_pct(c["value"])})
    if "applierPause" in judged.index:
        j = judged.loc["applierPause"]
        m["replPremise"] = paper.latex_escape(str(j.get("premise_value") or "--"))
        m["replPremiseMet"] = {"yes": "met", "no": "not met", "uncertain": "uncertain"}.get(
            str(j.get("premise_met")), "not checked")
        m["replCampaigns"] = str(int(j.get("campaigns") or 0))
    m.update(_prose(m))
    p95 = eff[(eff["metric"] == "lat_p95_ratio") & (eff["level_a"] == high) & (eff["level_b"] == low)]
    if not p95.empty and pressured != "all":
        p95 = p95[p95["within"].astype(str) == pressured]
    if not p95.empty:
        r = p95.iloc[0]
        m.update(replLatPctlRatio=_f(r["estimate"], 3), replLatPctlRatioLo=_f(r["ci_lo"], 3),
                 replLatPctlRatioHi=_f(r["ci_hi"], 3))
    return m


def pool_below_data(levels: Sequence[Any]) -> bool:
    """Every node's buffer pool smaller than the data at every level (the seed's condition)."""
    return max(float(v) for v in levels) < 100


def buffer_pool_words(levels: Sequence[Any]) -> str:
    """How large every node's buffer pool is against the data (", each with a buffer pool of 9 % of the data
    (smaller than the data, as in the seed: <its cache condition>; an applier then waits on page reads)")."""
    pcts = [float(v) for v in levels]
    words = " or ".join(f"{_f(v, 1 if v % 1 else 0)}\\,\\%" for v in pcts)
    text = f", each with a buffer pool of {words} of the data"
    if pool_below_data(pcts):  # the seed's condition in the registry's words, not typed again here
        text += (f" (smaller than the data, as in the seed: {paper.latex_escape(SEED002.cache)}; an applier then "
                 "waits on page reads)")
    return text


def _prose(m: dict[str, str]) -> dict[str, str]:
    """The sentences of the section that exist only for a study with throttled followers (LaTeX)."""
    if m.get("replCalibrated") != "yes":
        return {}
    if "CPU" in m["replCalLimit"]:  # topology.calibrate limit cpu_max: the followers limited in CPU, not in I/O
        followers = (
            "every node keeps its data on the root disk; each follower (the other nodes) runs in its own cgroup "
            f"under a {m['replCalLimit']} limit (the kernel's CPU bandwidth control) chosen by a calibration "
            "before every campaign (Table~\\ref{tab:repl-calibration}), so that applying writesets is the "
            "bottleneck as on the seed's small nodes; node~1 is never limited")
    else:
        followers = (
            "node~1 keeps its data on the root disk; in one setting the followers (the other nodes) do too, in "
            f"the other they keep theirs on medium \\texttt{{{m['replCalMedium']}}} (XFS on a RAM-backed loop "
            f"device, all followers in one blkio cgroup) under a {m['replCalLimit']} limit chosen by a calibration "
            "before every campaign (Table~\\ref{tab:repl-calibration}), so that the appliers are the bottleneck "
            "as in the seed; node~1 is never throttled")
    calibration = (
        "\\paragraph{Calibration.} Seed~002's result rests on its appliers being the bottleneck; on one "
        "machine the followers keep up unless they are slowed. Before a campaign's runs, one run per candidate "
        f"{m['replCalLimit']} limit ({m['replCalCandidates']}; mildest first), with one applier, "
        f"{m['replCalWindowS']}\\,s measured, until flow control paused the cluster at least "
        f"{m['replCalTarget']}\\,\\% of the window: the limit chosen was {m['replCalChosen']} "
        f"(paused {m['replCalPausedChosen']}\\,\\%; target {m['replCalReached']}). The calibration runs are "
        "recorded like any other run and are not part of the estimates.")
    calm = "\\relax"  # no paragraph without an unthrottled setting
    if m.get("replCalmSetting", "--") != "--":
        calm = (
            f"\\paragraph{{Without throttling.}} With {m['replCalmSetting']}, flow control paused the nodes "
            f"{m['replCalmPausedLow']}\\,\\% of the window with {m['replLow']} applier and "
            f"{m['replCalmPausedHigh']}\\,\\% with {m['replHigh']} (difference {m['replCalmPausedDiff']} "
            f"points, {m['replCalmPausedDiffLo']} to {m['replCalmPausedDiffHi']}); throughput was "
            f"{m['replCalmTpsLow']} and {m['replCalmTpsHigh']} transactions per second "
            f"({m['replCalmTpsChangePct']}\\,\\%, {m['replCalmTpsChangePctLo']} to {m['replCalmTpsChangePctHi']}) "
            f"and the average latency changed by {m['replCalmLatAvgChangePct']}\\,\\% "
            f"({m['replCalmLatAvgChangePctLo']} to {m['replCalmLatAvgChangePctHi']}). This cluster never waits "
            "for its appliers, so it does not have the seed's premise; the seed's claims are judged with the "
            f"throttled followers ({m['replSetting']}).")
    limit = "a CPU limit" if "CPU" in m["replCalLimit"] else "an I/O limit"
    bottleneck = (f"The throttled followers make that the bottleneck on purpose, through {limit} the seed did not "
                  "have (its appliers were short of CPU and parallelism on separate machines), so the mechanism is "
                  "similar, not the same; the limit is calibrated, not measured on the seed's hardware.")
    return {"replFollowersText": followers, "replCalibrationText": calibration, "replCalmText": calm,
            "replBottleneckText": bottleneck}


def _within_dict(setting: str) -> dict[str, str]:
    return {} if setting == "all" else dict(part.split("=", 1) for part in setting.split(", "))


def _setting_words(setting: str) -> str:
    """'follower_medium=slow' -> 'the followers on medium slow' (plain text)."""
    if setting == "all":
        return "every run"
    words = []
    for k, v in _within_dict(setting).items():
        if k == "follower_medium":
            words.append("the followers on the writer's medium" if v == "same" else f"the followers on medium {v}")
        else:
            words.append(f"{k.replace('_', ' ')} {v}")
    return ", ".join(words)


def _calm_macros(runs: pd.DataFrame, settings: pd.DataFrame, eff: pd.DataFrame, pressured: str, low: int,
                 high: int) -> dict[str, str]:
    """The setting beside the pressured one (the unthrottled followers): its paused share, throughput and
    average latency at the lowest and highest applier level and its effects (macros ``replCalm...``)."""
    keys = group_keys(runs)
    others = sorted({", ".join(f"{k}={v}" for k, v in zip(keys, key if isinstance(key, tuple) else (key,)))
                     for key, _ in runs.groupby(keys, sort=True, dropna=False)} - {pressured}) if keys else []
    if not others:
        return {}
    calm = others[0]
    within = _within_dict(calm)
    m = {"replCalmSetting": paper.latex_escape(_setting_words(calm))}
    for name, level in (("Low", low), ("High", high)):
        for metric, macro, digits in (("fc_paused_pct", "Paused", 1), ("tps", "Tps", 0), ("lat_avg_ms", "LatAvg", 2)):
            r = _setting(settings, level, metric, within)
            if r is not None:
                m[f"replCalm{macro}{name}"] = _f(r["mean"], digits)
    e = eff[(eff["within"].astype(str) == calm) & (eff["level_a"] == high) & (eff["level_b"] == low)] \
        if not eff.empty else eff
    for metric, key in (("fc_paused_pct_points", "PausedDiff"), ("tps_ratio", "TpsChangePct"),
                        ("lat_avg_ratio", "LatAvgChangePct")):
        r = e[e["metric"] == metric]
        if r.empty:
            continue
        r = r.iloc[0]
        conv = _signed if metric == "fc_paused_pct_points" else _change_pct
        m.update({f"replCalm{key}": conv(r["estimate"]), f"replCalm{key}Lo": conv(r["ci_lo"]),
                  f"replCalm{key}Hi": conv(r["ci_hi"])})
    return m


LIMIT_WORDS = {"write_iops": "write IOPS", "read_iops": "read IOPS", "write_bps": "write bytes/s",
               "read_bps": "read bytes/s", "cpu_max": "CPU (% of one CPU)"}


def calibration_macros(cal: pd.DataFrame) -> dict[str, str]:
    """The calibration of the followers' throttled medium (macros ``replCal...``; ``replCalibrated`` is
    'yes' when the study has one)."""
    if cal is None or cal.empty:
        return {"replCalibrated": "no"}
    chosen = cal[cal["chosen"].astype(bool)]
    per = [f"{int(r['limit']):,}".replace(",", "{,}") + (f" (campaign {int(r['campaign'])})"
                                                          if cal["campaign"].nunique() > 1 else "")
           for _, r in chosen.iterrows()]
    paused = [_f(r["fc_paused_pct"], 1) for _, r in chosen.iterrows()]
    first = cal.iloc[0]
    cands = sorted({int(x) for x in cal["limit"]}, reverse=True)
    reached = cal.groupby("campaign")["reached"].first()
    return {"replCalibrated": "yes", "replCalMedium": paper.latex_escape(str(first["medium"])),
            "replCalLimit": paper.latex_escape(LIMIT_WORDS.get(str(first["limit_kind"]), str(first["limit_kind"]))),
            "replCalCandidates": ", ".join(f"{c:,}".replace(",", "{,}") for c in cands),
            "replCalTarget": _f(first["target_pct"], 0), "replCalChosen": "; ".join(per) or "--",
            "replCalPausedChosen": "; ".join(paused) or "--",
            "replCalReached": "reached" if bool(reached.all()) else "not reached in every campaign",
            "replCalRuns": str(len(cal)), "replCalWindowS": _f(first["window_s"], 0)}


def calibration_table(cal: pd.DataFrame) -> pd.DataFrame:
    """One row per calibration run: campaign, the limit tried, the paused share and throughput it gave,
    and whether it was chosen."""
    if cal is None or cal.empty:
        return pd.DataFrame(columns=["Campaign", "Limit", "FC paused %", "TPS", "Chosen"])
    return pd.DataFrame({"Campaign": cal["campaign"].astype(int), "Limit": cal["limit"].astype(int),
                         "FC paused %": [_plain(x, 1) for x in cal["fc_paused_pct"]],
                         "TPS": [_plain(x, 0) for x in cal["tps"]],
                         "Chosen": ["yes" if c else "" for c in cal["chosen"].astype(bool)]})


def _plain(x: Any, digits: int) -> str:
    v = pd.to_numeric(x, errors="coerce")
    return "--" if pd.isna(v) else f"{float(v):.{digits}f}"


HEAD_WORDS = {"follower_medium": "followers"}


def settings_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The paper's small table, one column per setting (applier level, with the other varied levels) and
    one row per figure: n, then mean [Student-t CI, at ``replCiPct``] of the paused share, throughput, p95
    and average latency and the average receive queue."""
    s = tables.get("settings", pd.DataFrame())
    rows = [("n", None, 0), ("FC paused %", "fc_paused_pct", 1), ("TPS", "tps", 0), ("p95 ms", "lat_p95_ms", 2),
            ("Avg. latency ms", "lat_avg_ms", 2), ("Recv. queue", "recv_queue_avg", 1)]
    if s.empty:
        return pd.DataFrame(columns=["Appliers"])
    keys = [k for k in WITHIN if k in s and s[k].nunique(dropna=False) > 1]

    def cell(g: pd.DataFrame, metric: str | None, digits: int) -> str:
        r = g[g["metric"] == (metric or "tps")]
        if r.empty:
            return "--"
        r = r.iloc[0]
        if metric is None:
            return str(int(r["n"]))
        ci = "" if pd.isna(r["ci_lo"]) else f" [{r['ci_lo']:.{digits}f}, {r['ci_hi']:.{digits}f}]"
        return f"{r['mean']:.{digits}f}{ci}"

    table: dict[str, list[str]] = {"Appliers": [label for label, _, _ in rows]}
    for key, g in s.groupby([LEVEL, *keys], sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        head = ", ".join([str(key[0]), *(f"{HEAD_WORDS.get(k, k)} {v}" for k, v in zip(keys, key[1:]))])
        table[head] = [cell(g, metric, digits) for _, metric, digits in rows]
    return pd.DataFrame(table)


def _host_facts(record: dict[str, Any], tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """The host facts of the first run (its manifest's, recorded in processed/host-facts.json), else
    those of the first hosts/*.json."""
    runs = tables.get("runs", pd.DataFrame())
    first = str(runs.sort_values("run_id").iloc[0]["run_id"]) if not runs.empty else ""
    return run_facts(record, first)


def publish_replication(st: StudyTables, figures_dir: Path, generated_dir: Path,
                        claims: pd.DataFrame | None = None, check: list[Any] | None = None) -> list[Path]:
    """Figures and the generated LaTeX (``replication-macros.tex``, ``table-replication.tex``) of the
    replication section, from the processed tables (run :func:`analyse_replication` first)."""
    from dbmatrix.publish import figures as plots
    from dbmatrix.publish import figures_replication as plots_replication
    from dbmatrix.publish.captions import interval_text

    store, exp = st.store, st.experiment
    tables = load_replication(store)
    sha = plots.data_hash(tables["runs"], tables["settings"], tables["samples"])
    written = plots_replication.draw_all(tables, figures_dir, data_sha=sha, check=check)
    macros = replication_macros(tables, exp, _host_facts(st.host_record(), tables), claims)
    settings = tables.get("settings", pd.DataFrame())
    if "n" in settings and not settings.empty:  # for the figures' captions (paper/replication.tex)
        macros["replIntervalText"] = interval_text(settings["n"], per="setting",
                                                   interval="Student-$t$ \\replCiPct\\,\\% CIs")
    paper.write_macros(macros, generated_dir / "replication-macros.tex")
    table = settings_table(tables)
    if len(table.columns) < 2:
        tex = "% Generated by dbmatrix; do not edit.\n% tab:replication: no completed galera runs\n"
    else:
        tex = paper.render_table(
            table, caption="Galera: per applier setting (columns), mean and Student-t \\replCiPct\\,\\% CI over "
                           "repetitions of the flow-control paused share (mean over nodes), throughput, p95 and "
                           "average latency, and the average receive queue (largest over nodes).",
            label="tab:replication", column_format="l" + "r" * (len(table.columns) - 1))
        if len(table.columns) > 3:  # more than two settings: span both columns
            tex = tex.replace("\\begin{table}", "\\begin{table*}", 1).replace("\\end{table}", "\\end{table*}", 1)
    write_text_atomic(generated_dir / "table-replication.tex", tex)
    cal = calibration_table(tables.get("calibration", pd.DataFrame()))
    if cal.empty:
        ctex = "% Generated by dbmatrix; do not edit.\n% tab:repl-calibration: this study has no calibration\n"
    else:
        ctex = paper.render_table(
            cal, caption="Galera: calibration of the followers' throttled medium before each campaign, one "
                         "applier, one run per limit (mildest first) until flow control paused the cluster at "
                         "least the target share of the window.",
            label="tab:repl-calibration", column_format="rrrrl")
    write_text_atomic(generated_dir / "table-replication-calibration.tex", ctex)
    return [*written, generated_dir / "replication-macros.tex", generated_dir / "table-replication.tex",
            generated_dir / "table-replication-calibration.tex"]
