"""The A/A sentinel of a study's campaigns, read: drift within each campaign, and change points over them.

The sentinel (:mod:`dbmatrix.spec.sentinel`) is one cell measured at the start and at the end of every
campaign, outside the design. Two readings, both from the sentinel runs alone:

- **drift within a campaign**: d = ln(closing tps) - ln(opening tps). Without drift the two runs are two
  runs of one cell on one load, so d ~ N(0, 2 s^2) with s the study's run-to-run SD (the design's run
  variance component, :func:`dbmatrix.analyse.cell_model.study_components`); z = d / (s sqrt 2), two-sided
  p, and a campaign is flagged at p < :data:`DRIFT_ALPHA`. A drift inflates every contrast's run noise
  (the order is random), and a drift large against the effects is a reason to rerun the campaign.
- **a change point in the series** (every sentinel run in time order): Pettitt's rank test (Pettitt 1979,
  "A non-parametric approach to the change-point problem"), p from :data:`PERMUTATIONS` seeded permutations
  (exact enough at the short series campaigns give; deterministic). The most likely change point is
  placed between two runs: between campaigns it is a campaign-level shift (a platform change, see
  :mod:`dbmatrix.platform_facts`, that the campaign block absorbs); within a campaign it is drift.

Over a study's campaigns, :func:`pooled_drift` combines their z (Stouffer): a drift too small to flag in one
campaign but in the same direction in every one (a descriptive check, added after the data showed it).

Where a drift came from: each campaign's row also carries the pair's end/start ratios of CPU use, CPU per
transaction, work per transaction and the platform probe, and a reading of them
(:mod:`dbmatrix.analyse.sentinel_mechanism`).

Outputs: ``processed/sentinel.csv`` (one row per sentinel run, with its counters and probe), ``processed/
sentinel-drift.csv`` (one row per campaign) and ``processed/sentinel.json`` (the change-point test). A study
without a sentinel writes none.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dbmatrix.analyse.sentinel_mechanism import (
    COUNTERS,
    RATIOS,
    as_float,
    drift_ratios,
    drift_reading,
    pooled_ratios,
)
from dbmatrix.store import PROBE_FIGURES, SENTINEL_DIR, ResultStore, write_text_atomic

DRIFT_ALPHA = 0.01
CHANGE_ALPHA = 0.05
PERMUTATIONS = 9999
SEED = 20261129
DRIFT_COLUMNS = ["campaign", "start_tps", "end_tps", "ratio", "z", "p", "drift", "note", *RATIOS, "reading"]


def load_sentinel(root: Path) -> pd.DataFrame:
    """One row per sentinel run of the results directory `root`: campaign, position (start/end), run id,
    status, tps and when it started; empty without a sentinel."""
    rows = []
    base = Path(root) / SENTINEL_DIR
    dirs = sorted(base.glob("campaign-*"), key=lambda p: int(p.name.split("-")[1])) if base.is_dir() else []
    for d in dirs:
        store = ResultStore(d)
        runs = store.load_runs(include_failed=True)
        for _, r in runs.iterrows():
            ok = r["status"] == "ok"
            row = {"campaign": int(r["campaign"]), "position": "start" if int(r["repetition"]) == 1 else "end",
                   "run_id": r["run_id"], "cell_id": r["cell_id"], "status": r["status"],
                   "tps": float(r["tps"]) if ok and pd.notna(r.get("tps")) else math.nan,
                   "started_utc": r["started_utc"]}
            row.update({k: as_float(r.get(k)) if ok else math.nan for k in COUNTERS})
            probe = store.probe(str(r["run_id"]))
            row.update({f"probe_{k}": as_float(probe.get(k)) for k in PROBE_FIGURES})
            rows.append(row)
    cols = ["campaign", "position", "run_id", "cell_id", "status", "tps", "started_utc", *COUNTERS,
            *(f"probe_{k}" for k in PROBE_FIGURES)]
    return pd.DataFrame(rows, columns=cols).sort_values(["campaign", "position"], ascending=[True, False],
                                                        kind="stable").reset_index(drop=True)


def drift_table(runs: pd.DataFrame, run_sd: float | None) -> pd.DataFrame:
    """Per campaign: the opening and closing tps, their ratio, z and p against the run SD (log scale) and
    whether the campaign drifted, and the counters' end/start ratios with their reading; a campaign without
    both runs ok says which is missing."""
    rows = []
    for k, g in runs.groupby("campaign", sort=True):
        tps = {p: g.loc[(g["position"] == p) & (g["status"] == "ok"), "tps"] for p in ("start", "end")}
        a = float(tps["start"].iloc[0]) if len(tps["start"]) else math.nan
        b = float(tps["end"].iloc[0]) if len(tps["end"]) else math.nan
        row: dict[str, Any] = {"campaign": int(k), "start_tps": a, "end_tps": b, "ratio": math.nan, "z": math.nan,
                               "p": math.nan, "drift": "", "note": ""}
        if not (a > 0 and b > 0):
            row["note"] = "no " + " and no ".join(p for p, v in (("opening run", a), ("closing run", b))
                                                  if not v > 0)
        else:
            d = math.log(b / a)
            row["ratio"] = b / a
            if run_sd is not None and math.isfinite(run_sd) and run_sd > 0:
                z = d / (run_sd * math.sqrt(2.0))
                p = float(2 * stats.norm.sf(abs(z)))
                row.update(z=z, p=p, drift="yes" if p < DRIFT_ALPHA else "no")
            else:
                row["note"] = "no run SD to judge the ratio against"
        start = g[(g["position"] == "start") & (g["status"] == "ok")]
        end = g[(g["position"] == "end") & (g["status"] == "ok")]
        ratios = (drift_ratios(start.iloc[0].to_dict(), end.iloc[0].to_dict()) if len(start) and len(end)
                  else dict.fromkeys(RATIOS, math.nan))
        row.update(ratios)
        row["reading"] = drift_reading(row["ratio"], ratios)
        rows.append(row)
    return pd.DataFrame(rows, columns=DRIFT_COLUMNS)


def pettitt_statistic(x: np.ndarray) -> tuple[float, int]:
    """Pettitt's K = max_t |U_t| and the t (1-based: the change lies after the t-th value) that reaches it."""
    n = len(x)
    sgn = np.sign(x[None, :] - x[:, None])  # sgn[i, j] = sign(x_j - x_i)
    u = np.array([sgn[:t, t:].sum() for t in range(1, n)], dtype=float)
    t = int(np.argmax(np.abs(u)))
    return float(abs(u[t])), t + 1


@dataclass(frozen=True)
class ChangePoint:
    """Pettitt's test on a series: K, its permutation p, where the most likely change lies (after run
    `after` of `n`), the means of log tps before and after (as a ratio), and in words where that is."""

    n: int
    k_stat: float
    p: float
    after: int
    ratio: float
    where: str
    significant: bool

    def line(self) -> str:
        verdict = "a change point" if self.significant else "no change point"
        return (f"{verdict} (Pettitt K {self.k_stat:g}, p {self.p:.3f} over {self.n} sentinel runs); most likely "
                f"{self.where}, after/before {self.ratio:.3f}")


def pettitt(x: np.ndarray, permutations: int = PERMUTATIONS, seed: int = SEED) -> tuple[float, int, float]:
    """(K, change after index, permutation p) of the series `x` (seeded: same series, same p)."""
    k, after = pettitt_statistic(x)
    rng = np.random.default_rng(seed)
    hits = sum(pettitt_statistic(rng.permutation(x))[0] >= k - 1e-9 for _ in range(permutations))
    return k, after, (1 + hits) / (1 + permutations)


def change_point(runs: pd.DataFrame, permutations: int = PERMUTATIONS) -> ChangePoint | None:
    """Pettitt's test on the ok sentinel runs in time order (None below 4 runs: nothing to test)."""
    ok = runs[(runs["status"] == "ok") & (runs["tps"] > 0)].sort_values("started_utc", kind="stable")
    if len(ok) < 4:
        return None
    x = np.log(ok["tps"].to_numpy(dtype=float))
    k, after, p = pettitt(x, permutations)
    before_run, after_run = ok.iloc[after - 1], ok.iloc[after]
    if int(before_run["campaign"]) == int(after_run["campaign"]):
        where = f"within campaign {int(before_run['campaign'])}"
    else:
        where = f"between campaigns {int(before_run['campaign'])} and {int(after_run['campaign'])}"
    ratio = float(math.exp(x[after:].mean() - x[:after].mean()))
    return ChangePoint(len(ok), k, p, after, ratio, where, p < CHANGE_ALPHA)


@dataclass(frozen=True)
class PooledDrift:
    """The drift of a study's sentinel over all its campaigns: Stouffer's combination of the campaigns' z
    (z_pooled = sum z / sqrt K, two-sided p) and the geometric mean of their closing/opening ratios. Added
    after the paper reference's sentinels showed closing runs below opening ones in every campaign of two
    studies, none significant alone: its p is descriptive, and nothing is set aside by it."""

    campaigns: int
    ratio: float
    z: float
    p: float
    ratios: dict[str, float] = field(default_factory=dict)  # the counters' ratios, geometric means

    def reading(self, **how: Any) -> str:
        """What the counters say about the pooled drift (:func:`~dbmatrix.analyse.sentinel_mechanism.
        drift_reading`, `how` its formatting)."""
        return drift_reading(self.ratio, self.ratios, **how) if self.ratios else ""


def pooled_drift(drift: pd.DataFrame) -> PooledDrift | None:
    """:class:`PooledDrift` over the campaigns of `drift` (:func:`drift_table`) that have a z; None with
    fewer than two."""
    ok = drift[pd.to_numeric(drift["z"], errors="coerce").notna()] if not drift.empty else drift
    if len(ok) < 2:
        return None
    z = float(ok["z"].astype(float).sum() / math.sqrt(len(ok)))
    ratio = float(np.exp(np.log(ok["ratio"].astype(float)).mean()))
    ratios = pooled_ratios([dict(r) for _, r in ok.iterrows()]) if set(RATIOS) <= set(ok.columns) else {}
    return PooledDrift(len(ok), ratio, z, float(2 * stats.norm.sf(abs(z))), ratios)


def sentinel_lines(runs: pd.DataFrame, drift: pd.DataFrame, cp: ChangePoint | None) -> list[str]:
    """What plan, status and verdicts print about the sentinel (empty without one)."""
    if runs.empty:
        return []
    cell = str(runs["cell_id"].iloc[0])
    out = [f"sentinel A/A ({cell}, at the start and end of each campaign):"]
    for _, r in drift.iterrows():
        if r["note"] and not math.isfinite(r["ratio"]):
            out.append(f"  campaign {r['campaign']}: {r['note']}")
            continue
        judged = (f"z {r['z']:+.2f}, p {r['p']:.3f}: {'drift' if r['drift'] == 'yes' else 'no drift'} at "
                  f"{DRIFT_ALPHA:g}") if r["drift"] else str(r["note"])
        out.append(f"  campaign {r['campaign']}: end/start {r['ratio']:.3f} ({r['start_tps']:.1f} -> "
                   f"{r['end_tps']:.1f} tps; {judged})")
        if isinstance(r.get("reading"), str) and r["reading"]:
            out.append(f"    counters: {r['reading']}")
    if (pool := pooled_drift(drift)) is not None:
        out.append(f"  over {pool.campaigns} campaigns (Stouffer, descriptive): end/start {pool.ratio:.3f}, "
                   f"z {pool.z:+.2f}, p {pool.p:.3g}")
        if reading := pool.reading():
            out.append(f"    counters: {reading}")
    out.append(f"  {cp.line()}" if cp is not None else
               f"  change point: not tested ({int((runs['status'] == 'ok').sum())} ok sentinel runs; 4 needed)")
    return out


def write_sentinel(root: Path, processed: Path, run_sd: float | None) -> list[str]:
    """The three sentinel files of a results directory (removed when it has no sentinel); returns
    :func:`sentinel_lines`."""
    runs = load_sentinel(root)
    files = [processed / "sentinel.csv", processed / "sentinel-drift.csv", processed / "sentinel.json"]
    if runs.empty:
        for f in files:
            if f.is_file():
                f.unlink()
        return []
    drift = drift_table(runs, run_sd)
    cp = change_point(runs)
    write_text_atomic(files[0], runs.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    write_text_atomic(files[1], drift.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    doc = {"run_sd_log": run_sd, "drift_alpha": DRIFT_ALPHA, "change_alpha": CHANGE_ALPHA,
           "permutations": PERMUTATIONS, "seed": SEED, "change_point": asdict(cp) if cp else None}
    write_text_atomic(files[2], json.dumps(doc, indent=1, sort_keys=True, default=float) + "\n")
    return sentinel_lines(runs, drift, cp)


__all__ = ["CHANGE_ALPHA", "DRIFT_ALPHA", "ChangePoint", "PooledDrift", "change_point", "drift_table",
           "load_sentinel", "pettitt", "pettitt_statistic", "pooled_drift", "sentinel_lines", "write_sentinel"]
