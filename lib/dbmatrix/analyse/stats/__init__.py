"""Statistics a reviewer would trust. Pure functions of DataFrames/arrays, no I/O.

- Per run (per-second series and histogram): warm-up truncation (MSER) and a steady-state test with
  power (drift of the kept 1-s samples with a CI from a trend with AR(1) errors, judged against a +-5 %
  band; :func:`steady_state`), the per-second throughput distribution, hardware efficiency per transaction
  and space/write amplification (:func:`efficiency`), latency percentiles from histograms merged by
  adding counts (:func:`merged_percentiles`).
- Across runs (repetitions are the unit of replication): seeded bootstrap CIs of means and of ratios to
  a baseline cell, Student-t and Welch intervals that keep their coverage at 3-5 repetitions, Holm,
  Hedges' g, the noise report and the adaptive-repetition rule (:func:`adaptive_additions`).

Seeds are explicit and derived from the cells' identities, so the same raw data gives the same numbers
whatever the row order.

The package: :mod:`.intervals` (bootstrap, t and Welch intervals, Holm, Hedges' g), :mod:`.steady` (the
steady-state test), :mod:`.per_run` (efficiency, merged latency percentiles) and :mod:`.cells` (per-cell
summaries, ratios to a baseline, noise, adaptive repetitions); callers import the names below from here.
"""

from __future__ import annotations

from dbmatrix.analyse.stats.cells import (
    adaptive_additions,
    cell_summary,
    noise_report,
    ratios_to_baseline,
    ratios_to_baseline_cells,
    summarise_cells,
)
from dbmatrix.analyse.stats.intervals import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    bootstrap_mean_ci,
    bootstrap_mean_cols,
    bootstrap_ratio_ci,
    bootstrap_ratio_cols,
    hedges_g,
    holm,
    level_key,
    stable_seed,
    t_halfwidth_pct,
    t_mean_ci,
    welch_log_ratio,
)
from dbmatrix.analyse.stats.per_run import (
    EFFICIENCY_METRICS,
    ROW_WRITES_PER_TXN,
    SYSBENCH_ROW_BYTES,
    efficiency,
    merged_percentiles,
)
from dbmatrix.analyse.stats.steady import (
    AR1_BIAS,
    AR1_PHI_MAX,
    DRIFT_CHUNK_CELLS,
    DRIFT_CONFIDENCE,
    DRIFT_METHOD,
    MIN_DRIFT_SAMPLES,
    MIN_STEADY_S,
    STABLE_BAND_PCT,
    STALL_FRACTION,
    STEADY_BATCH_S,
    STEADY_COLUMNS,
    UNTESTED_REASONS,
    drift_fgls,
    mser_truncation,
    steady_state,
    steady_state_series,
    steady_verdict,
)

__all__ = [
    "AR1_BIAS",
    "AR1_PHI_MAX",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "DRIFT_CHUNK_CELLS",
    "DRIFT_CONFIDENCE",
    "DRIFT_METHOD",
    "EFFICIENCY_METRICS",
    "MIN_DRIFT_SAMPLES",
    "MIN_STEADY_S",
    "ROW_WRITES_PER_TXN",
    "STABLE_BAND_PCT",
    "STALL_FRACTION",
    "STEADY_BATCH_S",
    "STEADY_COLUMNS",
    "SYSBENCH_ROW_BYTES",
    "UNTESTED_REASONS",
    "adaptive_additions",
    "bootstrap_mean_ci",
    "bootstrap_mean_cols",
    "bootstrap_ratio_ci",
    "bootstrap_ratio_cols",
    "cell_summary",
    "drift_fgls",
    "efficiency",
    "hedges_g",
    "holm",
    "level_key",
    "merged_percentiles",
    "mser_truncation",
    "noise_report",
    "ratios_to_baseline",
    "ratios_to_baseline_cells",
    "stable_seed",
    "steady_state",
    "steady_state_series",
    "steady_verdict",
    "summarise_cells",
    "t_halfwidth_pct",
    "t_mean_ci",
    "welch_log_ratio",
]
