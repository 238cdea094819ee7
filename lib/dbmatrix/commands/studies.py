"""`dbmatrix status`, `sources`, `analyse`, `figures` and `verdicts`: what a profile's studies hold and what
is made from it."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix import paths
from dbmatrix.commands.common import studies_of
from dbmatrix.spec.experiment import SpecError


def cmd_status(args: argparse.Namespace) -> int:
    from dbmatrix.run.matrix import campaign_lines, format_duration, study_status, time_accounting
    from dbmatrix.sentinel_plan import sentinel_plan_lines
    from dbmatrix.study import data_source

    if getattr(args, "as_json", False):
        from dbmatrix.commands.documents import emit, status_doc

        emit({"profile": args.profile, "studies": [status_doc(s, args.data) for s in studies_of(args)]})
        return 0
    for study in studies_of(args):
        src = data_source(study.experiment, args.data)
        print(f"{study.experiment.name}: figures and paper read {paths.display_path(src.path)} "
              f"({src.origin}; --data {src.choice}: {src.reason})")
        st = study_status(study)
        print(f"{st.experiment}: {st.ok}/{st.planned} runs done, {len(st.failed)} failed, "
              f"{st.pending} not started; ~{format_duration(st.estimated_remaining_s)} left "
              f"({st.results_dir}); "
              + (f"campaign {st.campaign} of {len(st.campaigns)}" if st.campaigns else "no campaign yet"))
        for run_id in st.failed:
            print(f"  failed: {run_id}")
        if len(st.per_host) > 1 or st.lost_hosts:
            for h, v in st.per_host.items():
                print(f"  host {h}: {v['ok']}/{v['planned']} done, {v['failed']} failed, {v['pending']} not "
                      f"started, busy {format_duration(v['busy_s'])}, ~{format_duration(v['estimated_remaining_s'])}"
                      " left" + (f"; LOST: {st.lost_hosts[h]}" if h in st.lost_hosts else ""))
            print(f"  busy time summed over hosts {format_duration(st.busy_s_total)} (machine time; the "
                  "time left above is wall-clock, hosts in parallel)")
        if st.host_check:
            print(f"  {st.host_check}")
        for line in [*campaign_lines(study), *sentinel_plan_lines(study)]:
            print(line)
        t = time_accounting(study.store)
        if t["total_s"]:
            steps = ", ".join(f"{k[:-2]} {format_duration(v)}" for k, v in t.items()
                              if k.endswith("_s") and k != "total_s" and v >= 1)
            print(f"time recorded {format_duration(t['total_s'])}, {t['measure_fraction']:.0%} of it measuring "
                  f"({steps})")
    return 0


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not text")
    return value


def with_code_lists(rules: str, profile: str) -> str:
    """The make fragment with ANALYSIS_CODE and FIGURE_CODE (from the import graph) set before its first
    rule, whose prerequisites make expands as it reads them."""
    from dbmatrix.cache import content_key, kept
    from dbmatrix.codedeps import FIGURES_NOTEBOOK, make_variables

    repo = paths.repo_root()
    # make asks for these at every `make figures`/`paper`; parsing the package takes seconds, its bytes not
    key = content_key(repo, [*(repo / "lib").rglob("*.py"), repo / FIGURES_NOTEBOOK], profile)
    code = kept("make-code-lists", key, lambda: make_variables(repo, profile), load=_text)
    head, sep, rest = rules.partition("\n\n")
    return head + "\n" + code + sep + rest


def cmd_sources(args: argparse.Namespace) -> int:
    """Where figures and the paper read each study's data (runs, else the committed reference)."""
    from dbmatrix.datachoice import is_keyword
    from dbmatrix.study import make_rules, sources

    studies = studies_of(args, for_run=False)
    if args.make:
        # The fragment names a data root inside the repository relative to it (as `make DATA=…` gives it),
        # so it reads the same from any checkout and make's rules compare equal.
        data = args.data
        if data and not is_keyword(data) and Path(data).is_relative_to(paths.repo_root().resolve()):
            data = str(Path(data).relative_to(paths.repo_root().resolve()))
        sys.stdout.write(with_code_lists(make_rules(studies, args.profile, data), args.profile))
        return 0
    for _, r in sources(studies).iterrows():
        origin = "reference" if r["reference"] else "runs"
        state = "completed runs" if r["has_data"] else "no completed runs (not run)"
        print(f"{r['experiment']:<28} {r['kind']:<8} {r['results_dir']} ({origin}; {state}; --data {r['choice']}: "
              f"{r['reason']})")
    return 0


def cmd_analyse(args: argparse.Namespace) -> int:
    """Notebook 20 without the notebook: processed tables of every study that has data."""
    from dbmatrix import steps
    from dbmatrix.analyse.hosts import host_check_line

    for study in studies_of(args, for_run=False):
        if not study.has_data():
            print(f"{study.experiment.name}: no completed runs in {study.store.root}; skipped")
            continue
        a = steps.analyse_study(study)
        n = len(a.runs) if a is not None else 0
        print(f"{study.experiment.name}: {n} runs analysed -> {study.store.processed}")
        if a is not None and (line := host_check_line(a.hosts)):
            print(f"  {line}")
    return 0


def cmd_figures(args: argparse.Namespace) -> int:
    """Notebook 30 without the notebook: figures and the paper's generated inputs."""
    from dbmatrix import steps

    studies = studies_of(args, for_run=False)
    have = [s for s in studies if s.has_data()]
    if not have:
        raise SpecError("figures: no study has completed runs: " + ", ".join(
            f"{s.experiment.name} ({s.store.root})" for s in studies) + "; run them first (dbmatrix run), or "
            "name their results with --results/--data")
    out = steps.make_figures(studies, data=args.data, out=args.out,
                             timeline_cells=args.timeline_cells.split(",") if args.timeline_cells else None)
    for stem, exp in out.figures.items():
        print(f"figure {stem} <- {exp}")
    for note in out.skipped:
        print(f"skipped: {note}")
    print(f"figures in {paths.figures_dir(args.out)}, paper inputs in {paths.generated_dir(args.out)}")
    return 0


def cmd_verdicts(args: argparse.Namespace) -> int:
    """Per claim: each campaign's verdict (a consistency check) and the pooled one (the decision), how many
    claims flip between campaigns, then per claim its interval with its level, how its conditions combine,
    each condition's verdict and the campaigns' consistency test (:func:`claim_lines`). The judgement is the
    build's when it was made from these data by this code, else judged now by the same step
    (:func:`dbmatrix.steps.judgement_for`; the last line says which)."""
    from dbmatrix import steps
    from dbmatrix.analyse.judgement import flips as flips_of
    from dbmatrix.analyse.verdict_text import counts_text

    studies = studies_of(args, for_run=False)
    if not any(s.has_data() for s in studies):
        raise SpecError("verdicts: no study has completed runs: " + ", ".join(
            f"{s.experiment.name} ({s.store.root})" for s in studies))
    j, source = steps.judgement_for(studies)
    result = j.verdicts
    flips = flips_of(result)
    table = result.claims
    if getattr(args, "as_json", False):
        from dbmatrix.commands import documents

        doc = documents.verdicts_doc(result, flips, studies, steps.campaign_lines(table, studies),
                                     documents.decisions_doc(j.costs, j.cost_summary), j.boots)
        documents.emit({**doc, "judgement": source, "files": _verdict_csvs(args.csv, result)})
        return 0
    for line in flip_lines(result, flips):
        print(line)
    print()
    print("per claim: the pooled estimate with its interval and level, how its conditions combine, each "
          "condition's verdict, the campaigns' consistency test")
    for line in claim_lines(result):
        print(line)
    print(f"claims: {counts_text(table['verdict'].fillna('').astype(str))}")
    print()
    for line in [*mechanism_lines(j), *look_cost_lines(j), *boot_lines(j)]:
        print(line)
    for line in [*steps.campaign_lines(table, studies), *decision_lines(j.costs, j.cost_summary), source]:
        print(line)
    if args.csv:
        files = _verdict_csvs(args.csv, result)
        print(f"claims table: {files['claims']}; per campaign: {files['campaigns']}; per condition: {files['levels']}")
    return 0


def mechanism_lines(j: Any) -> list[str]:
    """Per decided claim (ours too), the counters of its compared cells that moved most (claims-mechanism.csv)."""
    from dbmatrix.analyse.mechanism import moved

    rows = j.mechanism
    if rows.empty:
        return []
    out = ["what moved behind each decided verdict (the engine's and the host's counters of the compared cells, "
           "a vs b, means over runs; claims-mechanism.csv has them all):"]
    both = j.both().claims
    for _, r in both.iterrows():
        if str(r["verdict"]) in ("agree", "disagree") or str(r["verdict"]).startswith("depends"):
            lines = moved(rows, str(r["id"]))
            out += [f"  {r['id']} ({r['verdict']}): {lines[0]}", *(f"    {x}" for x in lines[1:])] if lines else []
    return [*out, ""]


def boot_lines(j: Any) -> list[str]:
    """The boot check (claims-boots.csv): the claims judged again with the boot as the unit, where the study
    ran on enough boots, and the summary the paper's threats section gives."""
    from dbmatrix.analyse.claims.boot_check import COMBINED, summary

    t = j.boots
    if t.empty:
        return []
    out = ["with the boot as the unit (a sensitivity check, never a veto: each boot's campaigns averaged, then t on "
           "boots - 1 df, never narrower than the pooled interval; claims-boots.csv):"]
    for _, r in t[t["level"] == COMBINED].iterrows():
        if not r["verdict"]:
            out.append(f"  {r['id']} ({r['study']}): not checked, {r['note']}")
            continue
        est, lo, hi = (float(r[c]) for c in ("estimate", "ci_lo", "ci_hi"))
        shown = f"{est:.3g} [{lo:.3g}, {hi:.3g}] " if all(map(math.isfinite, (est, lo, hi))) else ""
        moved = "" if r["verdict"] == r["pooled"] else f"  <- pooled: {r['pooled']}"
        out.append(f"  {r['id']} ({r['study']}, {int(r['boots'])} boots): {shown}{r['verdict']}{moved}")
    s = summary(t)
    out.append(f"  {s['decided']} decided of {s['checked']} checked: {len(s['kept'])} stay decided, "
               f"{len(s['opened'])} turn inconclusive, {len(s['changed'])} change verdict")
    return [*out, ""]


def look_cost_lines(j: Any) -> list[str]:
    """Per claim of a study whose campaigns are looks: the look it was decided at and the campaigns' wall
    time until then, or for an open one the campaigns it would need (decisions-campaigns.csv)."""
    from dbmatrix.run.progress import format_duration

    t = j.looks
    if t.empty:
        return []
    out = ["cost per decision (campaigns as looks): decided at look k (the first k campaigns) and their wall "
           "time; open: the interval's half-width now and the one a decision needs (log scale for ratios, points "
           "for differences), and the campaigns that would get there at the measured variance"]
    at = pd.to_numeric(t["decided_at"], errors="coerce")
    proj = pd.to_numeric(t["projected_campaigns"], errors="coerce")
    for (_, r), k, p in zip(t.iterrows(), at, proj):
        if pd.notna(k):
            spent = float(r["machine_s"])
            took = f"after {format_duration(spent)} of campaigns" if math.isfinite(spent) else "(no campaign times)"
            out.append(f"  {r['id']} ({r['study']}): first decided at look {int(k)} of {r['campaigns']} "
                       f"{took} (now: {r['verdict']})")
        elif pd.notna(p):
            out.append(f"  {r['id']} ({r['study']}): open; half-width {float(r['half_width']):.3g}, needs "
                       f"{float(r['needed_half_width']):.3g}: decided at about {int(p)} campaigns")
        else:
            out.append(f"  {r['id']} ({r['study']}): {r['verdict']}" + (f"; {r['note']}" if r["note"] else ""))
    spent = pd.to_numeric(t.loc[at.notna().to_numpy(), "machine_s"], errors="coerce").dropna()
    if len(spent):
        out.append(f"  {int(at.notna().sum())} decided at some look; median wall time of the campaigns until "
                   f"decided {format_duration(float(spent.median()))}")
    return [*out, ""]


def flip_lines(result: Any, flips: Any) -> list[str]:
    """Per claim each campaign's verdict beside the pooled one, and how many claims flip between campaigns."""
    from dbmatrix.publish.claims_tex import opposed_claims

    table = result.claims
    ks = result.campaign_numbers()
    camps = table.set_index("id")["campaigns"]
    registration = table.set_index("id")["registration"]
    width = max(len(i) for i in flips["id"])
    col = max([17, *(len(str(v)) + 2 for v in result.campaigns["verdict"])])
    out = ["per claim: each campaign's own verdict (a consistency check) and the pooled verdict (the decision)",
           f"{'claim':<{width}}  seed  campaigns  " + "".join(f"{'C' + str(k):<{col}}" for k in ks) + "pooled"]
    for _, r in flips.iterrows():
        per = "".join(f"{result.campaign_verdict(r['id'], k) or '-':<{col}}" for k in ks)
        flag = "  <- flips" if r["flip"] else ""
        reg = registration.get(r["id"], "")
        flag += f"  ({reg})" if reg in ("revised after data", "added after data") else ""
        out.append(f"{r['id']:<{width}}  {r['seed']:<4}  {int(camps[r['id']]):<9}  {per}{r['pooled']}{flag}")
    opposed = opposed_claims(result)
    out.append(f"claims judged on two or more campaigns: {int((table['campaigns'] > 1).sum())}; flipping between "
               f"campaigns: {int(flips['flip'].sum())}; agree in one campaign, disagree in another: "
               f"{', '.join(opposed) if opposed else 'none'}")
    opposite = flips.loc[flips["contradicted"], "id"].tolist()
    out.append("pooled agree/disagree contradicted by a campaign: " + (", ".join(opposite) if opposite else "none"))
    return out


def _verdict_csvs(csv: str | None, result: Any) -> dict[str, str]:
    """--csv FILE: the claims table in FILE, each campaign's rows in <name>-campaigns.csv and each
    condition's in <name>-levels.csv beside it, as the build's claims.csv holds them; which files were written
    (none without --csv)."""
    from dbmatrix.analyse.judgement import table_text

    if not csv:
        return {}
    per_campaign = Path(csv).with_name(Path(csv).stem + "-campaigns.csv")
    levels = Path(csv).with_name(Path(csv).stem + "-levels.csv")
    for path, df in ((Path(csv), result.claims), (per_campaign, result.campaigns), (levels, result.levels)):
        path.write_text(table_text(df))
    return {"claims": str(csv), "campaigns": str(per_campaign), "levels": str(levels)}


def claim_lines(result: Any) -> list[str]:
    """Per claim of a :class:`~dbmatrix.analyse.judgement.ClaimVerdicts` through the claims formatter's text
    view (:mod:`dbmatrix.analyse.claims_view`): "id (seed): verdict", then its estimate with its interval and
    level, each condition's estimate, interval and verdict (where it was judged at several), how its conditions
    combine, the campaigns' consistency test and the reason. A claim no study tested: one line with the reason."""
    from dbmatrix.analyse import claims_view
    from dbmatrix.analyse.verdict_text import is_premise_reason

    text = claims_view.render("txt", claims_view.claim_rows(result), premise=is_premise_reason)
    return text.rstrip("\n").split("\n") if text.strip() else []


def decision_lines(costs: Any, summary: Any) -> list[str]:
    """What running until decided cost, per study campaign that did (the judgement's decision tables,
    :mod:`dbmatrix.analyse.claims.costs`): claims decided, blocks, looks, elapsed time per decided claim, then
    per claim the block it was decided at (or the projected further blocks of an open one) and the machine time
    of the runs it read."""
    out: list[str] = []
    for _, s in summary.iterrows():
        per = (f"{s['elapsed_s_per_decided'] / 60:.1f} min per decided claim" if s["decided"]
               else "no claim decided")
        out.append(f"until decided: {s['study']} C{s['campaign']}: {s['decided']} of {s['claims']} claims "
                   f"decided, {s['open']} open, {s['not_by_runs']} not decided by runs; {s['blocks']} blocks, "
                   f"{s['looks']} looks (last at {100 * s['confidence']:.2f} %), {s['runs']} runs, "
                   f"{s['elapsed_s'] / 60:.1f} min elapsed, {per}; stopped: {s['stopped']}")
        rows = costs[(costs["study"] == s["study"]) & (costs["campaign"] == s["campaign"])]
        for _, r in rows.iterrows():
            when = str(r["state"])
            if when == "decided":
                when = f"decided at block {int(r['decided_at'])}"
            elif when == "open" and math.isfinite(r["projected_blocks"]):
                when = f"open, +{int(r['projected_blocks'])} blocks projected"
            out.append(f"  {r['claim']:<24} {r['verdict']:<16} {when}; {r['runs']} runs, "
                       f"{r['run_s'] / 60:.1f} min of runs")
    return out
