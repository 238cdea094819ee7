"""The soak study's paper section (seed 000's run length): its figure (``soak-time``: 30-s batch means over the
run, the warm-up and the short windows marked, in transactions per second and against each run's own hour),
``generated/soak-macros.tex`` and the body of ``generated/soak-section.tex`` (``paper/soak.tex``). The verdicts
are the claims table's. Campaigns on different machines run at different speeds, so the text and the lower
panel compare each run with itself, as the claims do; absolute throughput appears only as each run's own
level."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.soak import BATCH_S, WINDOWS, pooled_ratio, probe_text
from dbmatrix.publish import paper
from dbmatrix.publish.hooks import HookContext, HookOutput, hook
from dbmatrix.publish.paper_inputs import fmt_num
from dbmatrix.spec.experiment import Experiment

STEM = "soak-time"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "." if text else ""


def soak_macros(runs: pd.DataFrame, exp: Experiment | None = None) -> dict[str, str]:
    """The section's numbers from ``processed/soak-runs.csv``: the ratios pooled as the claims pool them
    (:func:`dbmatrix.analyse.soak.pooled_ratio`), each run's hour level and batch noise (never averaged over
    runs of machines of different speeds and noise), the windows and batch length from the estimator's
    constants and the setting from the spec."""
    if runs.empty:
        return {}
    hours = runs.sort_values("campaign")
    pct = lambda metric: f"{100 * (pooled_ratio(runs, metric).estimate - 1):+.1f}".replace("-", "$-$")  # noqa: E731
    n = len(runs)
    windows = sorted(WINDOWS.values())
    m = {"soakRunsMeasured": str(n), "soakRunsText": "one run" if n == 1 else f"{n} runs, one per campaign,",
         "soakCampaignsMeasured": str(runs["campaign"].nunique()),
         "soakMeasuredMinutes": f"{runs['measured_s'].min() / 60:.0f}",
         "soakHourTps": f"{paper.and_list([fmt_num(t) for t in hours['tps_hour']])} transactions per second in "
                        f"campaign{'s' if n > 1 else ''} {paper.and_list([str(int(c)) for c in hours['campaign']])}",
         "soakBatchCv": paper.and_list([f"{v:.1f}" for v in hours["batch_cv_pct"]]),
         "soakBatchRone": paper.and_list([f"{v:.2f}" for v in hours["batch_r1"]]), "soakBatchSeconds": str(BATCH_S),
         "soakMserSeconds": ", ".join(f"{int(v)}" for v in runs["mser_s"]),
         "soakWindowsSeconds": paper.and_list([str(w) for w in windows]),
         "soakWindowsMinutes": paper.and_list([str(w // 60) for w in windows]),
         "soakHourFivePct": pct("hour_over_5min"), "soakMinuteHourPct": pct("minute_over_hour"),
         "soakTwoMinHourPct": pct("2min_over_hour"),
         "soakProbeText": paper.latex_escape(_sentence(probe_text(runs)))}
    if exp is not None:
        f = exp.factors
        m["soakSetting"] = (f"{f['instances'][0]}~instances, {f['threads'][0]}~clients"
                            if "instances" in f else f"{f['threads'][0]}~clients")
    return m


def draw_soak(series: pd.DataFrame, runs: pd.DataFrame, figures_dir: Path, check: list | None = None) -> list[Path]:
    """``soak-time``: each run's 30-s batch means from its start (a colour per campaign), the warm-up shaded and
    the ends of the short windows a run of minutes would have measured; above in transactions per second with
    each run's hour mean, below as a percentage of the run's own hour mean (what the claims compare: a run of
    a slower machine is flat beside the others above, and its own course shows below)."""
    from dbmatrix.publish import figures as plots

    plots.apply_style()
    fig, (ax, rel) = plots.subplots(2, 1, figsize=(3.4, 4.6), sharex=True)
    warm = float(runs["warmup_s"].min()) / 60
    for a in (ax, rel):  # labelled once, on the upper panel, for the figure's legend
        a.axvspan(0, warm, color="0.9", label=f"warm-up ({warm:g} min)" if a is ax else None)
    for k, (rid, g) in enumerate(series.groupby("run_id", sort=True)):
        camp = int(g["campaign"].iloc[0])
        colour = f"C{k % 10}"
        ax.plot(g["t_min"], g["tps"], color=colour, lw=0.9, label=f"campaign {camp}, 30-s means")
        hour = runs.loc[runs["run_id"] == rid, "tps_hour"]
        if not hour.empty:
            level = float(hour.iloc[0])
            ax.axhline(level, color=colour, lw=0.8, ls=":", label=f"campaign {camp}, hour mean")
            rel.plot(g["t_min"], 100 * g["tps"] / level, color=colour, lw=0.9)
    rel.axhline(100, color="0.2", lw=0.7)
    for a in (ax, rel):
        for i, w in enumerate(sorted(WINDOWS.values())):
            a.axvline(warm + w / 60, color="0.35", lw=0.7, ls=("--", "-.", (0, (1, 1)))[i % 3],
                      label=f"end of the first {w // 60} min measured" if a is ax else None)
    plots.zero_based(ax)
    rel.set_xlim(0, float(series["t_min"].max()) + 0.5)
    rel.set_xlabel("minutes from the run's start")
    ax.set_ylabel("transactions per second")
    rel.set_ylabel("% of the run's hour mean")
    fig.legend(loc="outside lower center", ncol=2, fontsize=6, frameon=False)
    sha = plots.data_hash(series, runs)
    return plots.save_figure(fig, figures_dir, STEM, data_sha=sha, title="Soak: throughput over the hour",
                             check=check)


@hook("soak-section")
def soak_section(st: StudyTables, ctx: HookContext) -> HookOutput:
    """The soak section's figure and macros, and the body of its include (None without a long run)."""
    runs = st.extra.get("soak-runs", pd.DataFrame())
    series = st.extra.get("soak-series", pd.DataFrame())
    if runs is None or runs.empty or series is None or series.empty:
        return HookOutput()
    files = draw_soak(series, runs, ctx.figures_dir, check=ctx.findings)
    path = ctx.generated_dir / "soak-macros.tex"
    paper.write_macros(soak_macros(runs, st.experiment), path)
    src = ctx.paper_src / "soak.tex"
    body = "\\input{generated/soak-macros.tex}\n\\input{soak}" if src.is_file() else None
    return HookOutput(written=[*files, path], figures={STEM: st.name}, body=body)
