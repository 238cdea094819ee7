"""The host check: are the hosts of a study interchangeable?

With several hosts each host measures whole replicate blocks (:mod:`dbmatrix.spec.assignment`), so every
host measured every cell and the same cells can be compared across hosts. Per cell and host: the ratio
host / reference host (the first host in name order) of the geometric-mean throughput with a Welch 95 %
CI on log throughput (the ratio of arithmetic means beside). Pooled over the cells: the factorial model's
host block effect (:func:`dbmatrix.analyse.effects.factorial_model` with ``blocks=("host",)``), i.e. the
host ratio with every factor's effect removed, and its model CI.

Verdict per host against the reference, with [L, U] the pooled CI and the band [1 - b, 1 + b]
(b = :data:`HOST_BAND`, 5 %):

- **not interchangeable**: the CI lies wholly outside the band (the host is faster or slower by more
  than the band, beyond the noise);
- **interchangeable**: the CI lies inside the band;
- **inconclusive**: otherwise (too noisy to tell).

Claims are pooled over the hosts unless some host is not interchangeable (``pool`` is then False and
:mod:`dbmatrix.analyse.claims` judges each claim on one host class). Pure functions of the runs table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dbmatrix.analyse.effects import factorial_model
from dbmatrix.analyse.stats import welch_log_ratio

HOST_BAND = 0.05
HOST_CHECK_COLUMNS = ("scope", "cell_id", "host", "reference", "host_class", "reference_class", "n_host", "n_ref",
                      "mean_host", "mean_ref", "ratio_of_means", "ratio", "ci_lo", "ci_hi", "p", "verdict", "pool")


def hosts_of(runs: pd.DataFrame) -> list[str]:
    """The hosts that measured the runs, in name order (empty without a host column)."""
    if runs.empty or "host" not in runs.columns:
        return []
    return sorted(str(h) for h in runs["host"].dropna().unique())


def multi_host(runs: pd.DataFrame) -> bool:
    return len(hosts_of(runs)) > 1


def host_verdict(ci_lo: float, ci_hi: float, band: float = HOST_BAND) -> str:
    """The rule of the module docstring for a host ratio's CI."""
    if not (np.isfinite(ci_lo) and np.isfinite(ci_hi)):
        return "inconclusive"
    lo, hi = 1 - band, 1 + band
    if ci_hi < lo or ci_lo > hi:
        return "not interchangeable"
    if lo <= ci_lo and ci_hi <= hi:
        return "interchangeable"
    return "inconclusive"


def host_check(runs: pd.DataFrame, factors: Sequence[str], metric: str = "tps", *, band: float = HOST_BAND,
               level_order: Mapping[str, Sequence[Any]] | None = None) -> pd.DataFrame:
    """Per cell and host, and pooled (scope "pooled", cell_id "all"): the host / reference ratio with its
    95 % CI and, pooled, the verdict and whether claims may pool the hosts. Empty with fewer than two
    hosts. Columns: :data:`HOST_CHECK_COLUMNS`."""
    hosts = hosts_of(runs)
    if len(hosts) < 2 or metric not in runs.columns:
        return pd.DataFrame(columns=list(HOST_CHECK_COLUMNS))
    data = runs[pd.to_numeric(runs[metric], errors="coerce") > 0]
    classes = _classes(data)
    ref = hosts[0]
    rows: list[dict[str, Any]] = []
    for cell_id, g in data.groupby("cell_id", sort=True):
        b = g.loc[g["host"] == ref, metric].astype(float).to_numpy()
        for h in hosts[1:]:
            a = g.loc[g["host"] == h, metric].astype(float).to_numpy()
            if a.size == 0 or b.size == 0:
                continue
            w = welch_log_ratio(a, b)
            rows.append({"scope": "cell", "cell_id": cell_id, "host": h, "reference": ref,
                         "host_class": classes.get(h), "reference_class": classes.get(ref),
                         "n_host": a.size, "n_ref": b.size, "mean_host": float(a.mean()),
                         "mean_ref": float(b.mean()), "ratio_of_means": float(a.mean() / b.mean()),
                         "ratio": w["ratio"], "ci_lo": w["ci_lo"], "ci_hi": w["ci_hi"], "p": w["p"],
                         "verdict": "", "pool": None})
    fit = factorial_model(data, factors, metric, level_order=level_order, blocks=("host",))
    br = fit.block_ratios
    for h in hosts[1:]:
        r = br[(br["block"] == "host") & (br["level"].astype(str) == h)] if not br.empty else br
        ha, hb = data.loc[data["host"] == h, metric].astype(float), data.loc[data["host"] == ref, metric].astype(float)
        est, lo, hi, p = ((float(r[k].iloc[0]) for k in ("ratio", "ci_lo", "ci_hi", "p")) if len(r)
                          else (np.nan,) * 4)
        v = host_verdict(lo, hi, band)
        rows.append({"scope": "pooled", "cell_id": "all", "host": h, "reference": ref,
                     "host_class": classes.get(h), "reference_class": classes.get(ref),
                     "n_host": int(ha.size), "n_ref": int(hb.size), "mean_host": float(ha.mean()),
                     "mean_ref": float(hb.mean()), "ratio_of_means": float(ha.mean() / hb.mean()),
                     "ratio": est, "ci_lo": lo, "ci_hi": hi, "p": p, "verdict": v,
                     "pool": v != "not interchangeable"})
    return pd.DataFrame(rows, columns=list(HOST_CHECK_COLUMNS))


def _classes(runs: pd.DataFrame) -> dict[str, str]:
    """host -> its inventory class (the host itself where none is declared)."""
    if "host_class" not in runs.columns:
        return {str(h): str(h) for h in runs["host"].dropna().unique()}
    return {str(h): str(c) for h, c in runs.groupby("host", sort=True)["host_class"].first().items()}


def pooling_allowed(check: pd.DataFrame) -> bool:
    """Claims may pool the hosts: no host is "not interchangeable" (one host: trivially)."""
    if check is None or check.empty:
        return True
    pooled = check[check["scope"] == "pooled"]
    return bool(pooled.empty or (pooled["verdict"] != "not interchangeable").all())


def host_check_line(check: pd.DataFrame, band: float = HOST_BAND) -> str | None:
    """One line for `dbmatrix analyse`/`status`: the verdict and each host's ratio (None: one host)."""
    if check is None or check.empty:
        return None
    pooled = check[check["scope"] == "pooled"]
    parts = [f"{r['host']}/{r['reference']} x{r['ratio']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}] {r['verdict']}"
             for _, r in pooled.iterrows()]
    verdict = ("hosts NOT interchangeable: claims judged per host class" if not pooling_allowed(check)
               else "claims pooled over hosts")
    return f"host check (band +-{band:.0%}): " + "; ".join(parts) + f" -> {verdict}"
