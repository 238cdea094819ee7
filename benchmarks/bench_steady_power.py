"""Size and power of the steady-state test (``dbmatrix.analyse.stats.steady_state``) on synthetic series.

Per case: ``trials`` flat series and ``trials`` series with a linear drift of ``drift`` (10 %: the level
goes from m to 1.1 m over the run), per-second noise AR(1) with coefficient ``phi`` and marginal CV ``cv``
around m = 1000 tps. Printed per case: the share flagged (drift CI excludes 0) of flat series (the size,
target <= 5 %) and of drifting ones (the power, target >= 90 %), and the verdicts against the +-5 % band
(steady True / False / undetermined).

Realistic noise: the kept windows of the committed reference runs (``--measure``) have a per-second CV of
6.2 % (median over 78 runs; residual CV about a fitted line: also 6.2 %) and a lag-1 autocorrelation of
0.18 (demeaned) to 0.36 (detrended) once corrected for the bias of 8-14-s windows; PHI_REAL = 0.35 is the
conservative end. ``--compare`` also prints the alternatives the method was picked from: the truncation
(MSER-1 vs MSER-5) and the drift CI (Newey-West HAC with a small-sample correction vs Prais-Winsten FGLS).

Seeded and deterministic::

    PYTHONPATH=lib python benchmarks/bench_steady_power.py [--trials 2000] [--compare] [--measure]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from dbmatrix.analyse.stats import drift_fgls, mser_truncation, steady_state
from dbmatrix.analyse.tables import steady_params
from dbmatrix.store import ResultStore

PHI_REAL = 0.35  # lag-1 autocorrelation of the reference runs' per-second tps (bias-corrected, upper end)
CV_REAL = 0.062  # per-second CV of the reference runs' kept windows (median)
SEED = 20261123


def ar1(rng: np.random.Generator, k: int, n: int, phi: float) -> np.ndarray:
    """k stationary AR(1) series of length n with unit marginal variance."""
    e = rng.normal(size=(k, n))
    x = np.empty_like(e)
    x[:, 0] = e[:, 0]
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + np.sqrt(1 - phi * phi) * e[:, t]
    return x


def series(rng: np.random.Generator, k: int, n: int, phi: float, cv: float, drift: float) -> np.ndarray:
    """k per-second tps series: level 1000 x (1 + drift * t / (n - 1)) plus AR(1) noise of CV cv."""
    return 1000 * (1 + drift * np.linspace(0, 1, n))[None, :] + 1000 * cv * ar1(rng, k, n, phi)


def frame(X: np.ndarray) -> pd.DataFrame:
    k, n = X.shape
    return pd.DataFrame({"run_id": np.repeat([f"s{i:05d}" for i in range(k)], n),
                         "t_s": np.tile(np.arange(1, n + 1), k), "tps": X.ravel()})


def rates(df: pd.DataFrame) -> dict[str, float]:
    st = df["steady"]
    return {"flagged": float(df["flagged"].map(lambda v: v is True).mean()),
            "steady": float(st.map(lambda v: v is True).mean()),
            "not_steady": float(st.map(lambda v: v is False).mean()),
            "undetermined": float((df["steady_reason"] == "undetermined").mean()),
            "untested": float((df["steady_reason"] == "too_short").mean()),
            "trim_s": float(df["trim_s"].where(df["steady_reason"] != "drift").mean())}


def case(phi: float, cv: float, *, n: int = 60, drift: float = 0.10, trials: int = 2000, seed: int = SEED,
         batch_s: int = 1) -> dict[str, float]:
    """Rates of flat and drifting series for one noise setting (``steady_state`` as the analysis runs it)."""
    rng = np.random.default_rng([seed, round(phi * 1000), round(cv * 10000), n])
    flat = rates(steady_state(frame(series(rng, trials, n, phi, cv, 0.0)), batch_s=batch_s))
    drifting = rates(steady_state(frame(series(rng, trials, n, phi, cv, drift)), batch_s=batch_s))
    return {"phi": phi, "cv_pct": cv * 100, "n_s": n, "trials": trials,
            **{f"flat_{k}": v for k, v in flat.items()}, **{f"drift_{k}": v for k, v in drifting.items()}}


def table(cases: Sequence[tuple[float, float, int]], trials: int, seed: int = SEED) -> pd.DataFrame:
    return pd.DataFrame([case(phi, cv, n=n, trials=trials, seed=seed) for phi, cv, n in cases])


# ------------------------------------------------------------------ alternatives (for --compare)


def newey_west(X: np.ndarray, start: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """OLS drift and its CI half-width with a Newey-West (Bartlett) standard error, bandwidth
    floor(4 (L/100)^(2/9)), small-sample factor L/(L-2) and Student t with L-2 df (rows: equal L only)."""
    n = X.shape[1]
    L = n - int(start[0])
    assert np.all(start == start[0])
    Y = X[:, int(start[0]):]
    Y = Y / Y.mean(axis=1, keepdims=True)
    tc = np.arange(L) - (L - 1) / 2
    sxx = (tc * tc).sum()
    b = (Y * tc).sum(axis=1) / sxx
    e = Y - Y.mean(axis=1, keepdims=True) - b[:, None] * tc
    u = e * tc
    lag = int(np.floor(4 * (L / 100) ** (2 / 9)))
    s = (u * u).sum(axis=1)
    for j in range(1, lag + 1):
        s += 2 * (1 - j / (lag + 1)) * (u[:, j:] * u[:, :-j]).sum(axis=1)
    se = np.sqrt(np.maximum(s, 0) * L / (L - 2)) / sxx
    q = sps.t.ppf((1 + confidence) / 2, L - 2)
    return b * (L - 1), q * se * (L - 1)


def compare(trials: int, seed: int = SEED) -> pd.DataFrame:
    """Flag rates of the alternatives on 60-s series: truncation MSER-1 / MSER-5 / none, drift CI by
    Prais-Winsten FGLS or Newey-West; and the residual warm-up bias of the kept mean after a 10-s ramp."""
    rows = []
    n = 60
    for phi in (0.0, PHI_REAL, 0.6):
        rng = np.random.default_rng([seed, 7, round(phi * 1000)])
        flat = series(rng, trials, n, phi, CV_REAL, 0.0)
        drift = series(rng, trials, n, phi, CV_REAL, 0.10)
        warm = flat.copy()
        warm[:, :10] *= np.linspace(0.5, 1.0, 10)[None, :]
        for trunc in ("none", "MSER-1", "MSER-5"):
            row: dict[str, object] = {"phi": phi, "truncation": trunc}
            for label, X in (("flat", flat), ("drift", drift), ("warmup", warm)):
                b = {"none": 0, "MSER-1": 1, "MSER-5": 5}[trunc]
                start = mser_truncation(X, b) * b if b else np.zeros(len(X), dtype=np.int64)
                if label == "warmup":
                    kept = np.where(np.arange(n)[None, :] >= start[:, None], X, np.nan)
                    row["warmup_bias_pct"] = float((np.nanmean(kept, axis=1) / 1000 - 1).mean() * 100)
                    continue
                row[f"{label}_trim_s"] = float(start.mean())
                keep = n - start >= 20
                d = drift_fgls(X[keep], start[keep])
                row[f"{label}_fgls"] = float(((d["ci_lo"] > 0) | (d["ci_hi"] < 0)).sum() / len(X))
                if trunc == "none":
                    est, half = newey_west(X, start)
                    row[f"{label}_hac"] = float((np.abs(est) > half).mean())
            rows.append(row)
    return pd.DataFrame(rows)


def measure(root: Path) -> pd.DataFrame:
    """Per-second CV and lag-1 autocorrelation of the kept windows of the reference runs (raw)."""
    rows = []
    for raw in sorted(root.glob("*/raw")):
        iv = ResultStore(raw.parent).load_intervals()
        if iv.empty:
            continue
        n = int(iv.groupby("run_id")["t_s"].count().max())
        st = steady_state(iv, **steady_params(n)).set_index("run_id")
        for rid, g in iv.sort_values(["run_id", "t_s"]).groupby("run_id"):
            w = g["tps"].to_numpy(dtype=float)[int(st.loc[rid, "trim_s"]):]
            if w.size < 6 or w.mean() <= 0:
                continue
            t = np.arange(w.size) - (w.size - 1) / 2
            dm = w - w.mean()
            dt = dm - (dm * t).sum() / (t * t).sum() * t
            rows.append({"study": raw.parent.name, "n": w.size, "cv": w.std(ddof=1) / w.mean(),
                         "num_m": (dm[1:] * dm[:-1]).sum(), "den_m": (dm * dm).sum(),
                         "num_t": (dt[1:] * dt[:-1]).sum(), "den_t": (dt * dt).sum()})
    return pd.DataFrame(rows)


def _pooled_r1(lens: np.ndarray, phi: float, detrend: bool, rng: np.random.Generator) -> float:
    num = den = 0.0
    for L in np.unique(lens):
        x = ar1(rng, int((lens == L).sum()) * 300, int(L), phi)
        x = x - x.mean(axis=1, keepdims=True)
        if detrend:
            t = np.arange(L) - (L - 1) / 2
            x = x - np.outer((x * t).sum(axis=1) / (t * t).sum(), t)
        num += (x[:, 1:] * x[:, :-1]).sum()
        den += (x * x).sum()
    return num / den


def measured_noise(root: Path, seed: int = SEED) -> dict[str, float]:
    """Median CV and pooled lag-1 autocorrelation (raw and corrected for the short windows' bias: the
    phi whose simulated pooled estimate on windows of the same lengths matches the observed one)."""
    m = measure(root)
    rng = np.random.default_rng(seed)
    grid = np.round(np.arange(0.0, 0.951, 0.05), 2)
    out = {"runs": float(len(m)), "median_window_s": float(m["n"].median()), "cv_median": float(m["cv"].median())}
    for key, col, detrend in (("demeaned", "m", False), ("detrended", "t", True)):
        r1 = float(m[f"num_{col}"].sum() / m[f"den_{col}"].sum())
        sim = np.array([_pooled_r1(m["n"].to_numpy(), p, detrend, rng) for p in grid])
        out[f"r1_{key}"] = r1
        out[f"phi_{key}"] = float(np.interp(r1, sim, grid))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--compare", action="store_true", help="also the alternatives (truncation, HAC)")
    ap.add_argument("--measure", type=Path, nargs="?", const=Path("data/reference"), default=None,
                    help="measure CV and phi on a results root (default data/reference)")
    a = ap.parse_args(argv)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    if a.measure is not None:
        print("measured noise:", {k: round(v, 4) for k, v in measured_noise(a.measure, a.seed).items()})
    cases = [(0.0, CV_REAL, 60), (PHI_REAL, CV_REAL, 60), (0.6, CV_REAL, 60), (PHI_REAL, CV_REAL * 2, 60),
             (PHI_REAL, CV_REAL / 2, 60), (0.0, 0.03, 60), (PHI_REAL, 0.01, 60),
             (PHI_REAL, CV_REAL, 20), (PHI_REAL, CV_REAL, 120), (PHI_REAL, CV_REAL, 180)]
    t = table(cases, a.trials, a.seed)
    cols = ["phi", "cv_pct", "n_s", "flat_flagged", "flat_steady", "flat_not_steady", "flat_undetermined",
            "flat_untested", "drift_flagged", "drift_steady", "drift_not_steady", "drift_undetermined",
            "drift_trim_s"]
    print(t[cols].round(3).to_string(index=False))
    if a.compare:
        print(compare(a.trials, a.seed).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
