"""The soak study (seed 000's run length): window ratios within a long run, their batch-means intervals, pooling
over campaigns, the claims' verdicts on synthetic runs with a known answer, and the kind's place in a profile."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from dbmatrix.analyse.claims.catalogue import all_claims
from dbmatrix.analyse.claims.model import Evidence
from dbmatrix.analyse.claims.verdicts import judge
from dbmatrix.analyse.contrasts import NotTestable
from dbmatrix.analyse.kinds import get_kind, kind_of
from dbmatrix.analyse.soak import pooled_ratio, soak_run, soak_table
from dbmatrix.publish.paper_inputs import fmt_num
from dbmatrix.spec.experiment import load_spec

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = {c.id: c for c in all_claims()}


def ar1(rng: np.random.Generator, n: int, phi: float = 0.5, cv: float = 0.03) -> np.ndarray:
    """A stationary AR(1) series around 1 with the given coefficient of variation."""
    e = rng.normal(0, cv * np.sqrt(1 - phi * phi), n)
    x = np.empty(n)
    x[0] = rng.normal(0, cv)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return 1 + x


def run(rng: np.random.Generator, level: float = 1000.0, drift: float = 0.0, warm: int = 120,
        hour: int = 3600, early: float = 0.0) -> tuple[list[float], list[float]]:
    """(warm-up, measured) 1-s tps: a cold ramp in the warm-up, then AR(1) noise, a linear drift of `drift`
    across the hour, and a deficit of `early` in the first minute measured (a warm-up too short)."""
    w = level * np.minimum(1.0, 0.4 + np.arange(warm) / 60) * ar1(rng, warm)
    t = np.arange(hour)
    m = level * (1 + drift * (t / hour - 0.5)) * ar1(rng, hour) * np.where(t < 60, 1 - early, 1.0)
    return list(w), list(m)


def table(runs: list[tuple[list[float], list[float]]]) -> pd.DataFrame:
    return soak_table((f"c-r1-camp{k}", "c", k, w, m) for k, (w, m) in enumerate(runs, start=1))


def evidence(t: pd.DataFrame) -> Evidence:
    return Evidence("soak-paper", "soak", pd.DataFrame({"run_id": t["run_id"]}), extra={"soak-runs": t})


def verdict(claim_id: str, t: pd.DataFrame, confidence: float = 0.95) -> str:
    claim = CLAIMS[claim_id]
    est = get_kind("soak").claim_estimate(claim, evidence(t), confidence)
    return judge(claim, est)[0]


def test_a_steady_hour_agrees_with_both_run_length_claims() -> None:
    t = table([run(np.random.default_rng(1))])
    row = t.iloc[0]
    assert row["measured_s"] == 3600 and row["warmup_s"] == 120 and row["batches"] == 120
    assert row["hour_over_5min"] == pytest.approx(row["tps_hour"] / row["tps_5min"])
    assert row["minute_over_hour"] == pytest.approx(row["tps_minute"] / row["tps_hour"])
    assert 0 <= row["mser_s"] <= 200  # the cold ramp ends at 36 s; MSER-5 finds it near there
    assert verdict("longRun", t) == "agree"
    assert verdict("warmUp", t) == "agree"


def test_a_drifting_hour_disagrees_and_a_short_warm_up_fails_the_minute() -> None:
    rng = np.random.default_rng(2)
    drifting = table([run(rng, drift=0.25)])  # +25 % across the hour: the 5 minutes are ~11 % below the hour
    assert drifting.iloc[0]["hour_over_5min"] > 1.08
    assert verdict("longRun", drifting) == "disagree"
    cold = table([run(rng, early=0.3)])  # the first measured minute 30 % low: 2 minutes did not suffice
    assert verdict("warmUp", cold) == "disagree"
    assert verdict("longRun", cold) in ("agree", "inconclusive")  # 60 s of 300 at -30 %: -6 % of the 5 minutes


def test_the_within_run_interval_covers_a_steady_runs_ratio_at_its_level() -> None:
    """Calibration: on stationary AR(1) runs (phi 0.5 at 1 s: batch means of 30 s nearly independent) the 95 %
    interval of the hour over its first 5 minutes holds 1 in about 95 % of runs; a test that can fail."""
    rng = np.random.default_rng(3)
    hits = []
    for _ in range(200):
        r = pooled_ratio(table([run(rng)]), "hour_over_5min")
        hits.append(r.ci_lo <= 1.0 <= r.ci_hi)
    assert 0.9 <= np.mean(hits) <= 0.99


def test_pooling_over_campaigns_uses_the_larger_of_between_and_within_run_variance() -> None:
    rng = np.random.default_rng(4)
    one = pooled_ratio(table([run(rng)]), "hour_over_5min")
    assert one.runs == 1 and "within the run" in one.basis and "not estimated" in one.basis
    differ = table([run(rng, drift=d) for d in (-0.3, 0.0, 0.3)])  # campaigns whose drift differs
    r = pooled_ratio(differ, "hour_over_5min")
    assert r.runs == 3 and r.df == 2 and "between the 3 runs" in r.basis
    alike = pooled_ratio(table([run(rng) for _ in range(3)]), "hour_over_5min")
    assert alike.runs == 3 and (alike.df == 2 or "within the 3 runs" in alike.basis)


def test_short_runs_are_left_out_and_the_claims_say_why() -> None:
    rng = np.random.default_rng(5)
    assert soak_run("r", "c", 1, *run(rng, hour=500)) is None  # shorter than twice the 5-minute window
    with pytest.raises(NotTestable, match="an hour"):
        get_kind("soak").claim_estimate(CLAIMS["longRun"], evidence(table([])))


def test_the_soak_spec_is_a_soak_study_and_runs_in_a_sitting_of_its_own() -> None:
    from dbmatrix.steps import sittings

    soak = load_spec(ROOT / "specs/paper-soak.yaml")
    assert kind_of(soak).name == "soak"
    assert kind_of(load_spec(ROOT / "specs/paper-scaleout.yaml")).name == "scaleout"
    studies = [SimpleNamespace(experiment=soak, spec_path=Path("specs/paper-soak.yaml")),
               SimpleNamespace(experiment=load_spec(ROOT / "specs/paper-scaleout.yaml"), spec_path=None)]
    run_now, left = sittings(studies)  # type: ignore[arg-type]
    assert [s.experiment.name for s in run_now] == ["scaleout-paper"]
    assert "sitting of its own" in left[0] and "--spec specs/paper-soak.yaml" in left[0]
    named, none_left = sittings(studies, named=True)  # type: ignore[arg-type]
    assert len(named) == 2 and not none_left


def test_the_soak_figure_and_macros_from_two_campaigns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbmatrix.analyse.soak import series_table
    from dbmatrix.publish.soak import draw_soak, soak_macros

    rng = np.random.default_rng(6)
    items = [(f"c-r1-camp{k}", "c", k, *run(rng, level=level)) for k, level in ((1, 60000.0), (2, 52000.0))]
    runs, series = soak_table(items), series_table(items)
    assert set(series["phase"]) == {"warm-up", "measured"} and len(series) == 2 * (120 + 3600) // 30
    findings: list = []
    files = draw_soak(series, runs, tmp_path, check=findings)
    assert [f.name for f in files] == ["soak-time.pdf", "soak-time.png"] and findings == []
    m = soak_macros(runs, load_spec(ROOT / "specs/paper-soak.yaml"))
    assert m["soakRunsMeasured"] == "2" and m["soakMeasuredMinutes"] == "60"
    assert m["soakSetting"] == "2~instances, 16~clients" and m["soakWindowsSeconds"] == "60, 120 and 300"
    assert m["soakHourFivePct"] == f"{100 * (pooled_ratio(runs, 'hour_over_5min').estimate - 1):+.1f}".replace("-", "$-$")
    assert m["soakRunsText"] == "2 runs, one per campaign," and soak_macros(runs[:1])["soakRunsText"] == "one run"
    assert set(m) >= {"soakHourTps", "soakHourFivePct", "soakMinuteHourPct", "soakTwoMinHourPct"}
    # each campaign's own level, never a mean over machines of different speeds
    a, b = (fmt_num(t) for t in runs["tps_hour"])
    assert m["soakHourTps"] == f"{a} and {b} transactions per second in campaigns 1 and 2"
    assert soak_macros(runs[:1])["soakHourTps"] == f"{a} transactions per second in campaign 1"
    assert not any(k.endswith("MinTps") for k in m)
    # and each run's own batch noise, in the same campaign order: runs on different machines scatter differently
    cv, r1 = runs.sort_values("campaign")[["batch_cv_pct", "batch_r1"]].T.to_numpy()
    assert m["soakBatchCv"] == f"{cv[0]:.1f} and {cv[1]:.1f}" and m["soakBatchRone"] == f"{r1[0]:.2f} and {r1[1]:.2f}"
    # the lower panel: every run around 100 % of its own hour, whatever its level
    fig_axes = _drawn_axes(series, runs, monkeypatch)
    assert [a.get_ylabel() for a in fig_axes] == ["transactions per second", "% of the run's hour mean"]
    levels = [np.mean(line.get_ydata()) for line in fig_axes[1].get_lines() if len(line.get_ydata()) > 2]
    assert len(levels) == 2 and all(95 < v < 105 for v in levels)


def _drawn_axes(series, runs, monkeypatch: pytest.MonkeyPatch) -> list:
    """The axes draw_soak draws on, caught where the figure would be saved."""
    from dbmatrix.publish import figures as plots
    from dbmatrix.publish.soak import draw_soak

    caught: list = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, *a, **k: caught.extend(fig.axes) or [])
    draw_soak(series, runs, Path("/nonexistent"))
    return caught


def test_each_long_run_carries_the_platform_probe_around_it_and_the_paper_says_what_it_saw() -> None:
    """A run bracketed by the probe gets its after/before ratios; one that ran before the probe existed gets
    NaN and the text says so; a table with no probe at all says that the platform's speed was not measured."""
    from dbmatrix.analyse.soak import PROBE_COLUMNS, probe_text, with_probes
    from dbmatrix.publish.soak import soak_macros

    rng = np.random.default_rng(7)
    t = table([run(rng), run(rng)])
    bare = with_probes(t, {})
    assert list(bare.columns[-3:]) == list(PROBE_COLUMNS) and bare["probe_cpu_ratio"].isna().all()
    assert probe_text(bare).startswith("no run was bracketed by the platform probe")
    probes = {"c-r1-camp2": ({"cpu_eps_1": 3300.0, "cpu_eps_all": 6500.0, "sync_write_ms": 0.12},
                             {"cpu_eps_1": 3000.0, "cpu_eps_all": 6240.0, "sync_write_ms": None})}
    t2 = with_probes(t, probes)
    assert t2["probe_cpu_ratio"].iloc[1] == pytest.approx(3000 / 3300) and np.isnan(t2["probe_cpu_ratio"].iloc[0])
    assert t2["probe_cpu_all_ratio"].iloc[1] == pytest.approx(0.96) and np.isnan(t2["probe_sync_ratio"].iloc[1])
    text = probe_text(t2)
    assert "campaign 1: no probe (it ran before the probe); campaign 2: -9.1 % on one thread, -4.0 % on every CPU" \
        in text
    assert soak_macros(t2)["soakProbeText"].startswith("The platform probe's fixed CPU work") and \
        soak_macros(t2)["soakProbeText"].endswith("-4.0 \\% on every CPU.")
    # the claims' basis carries it
    est = get_kind("soak").claim_estimate(CLAIMS["longRun"], evidence(t2))
    assert est.basis.endswith(text)
    assert probe_text(t2.iloc[:0]) == ""
