"""The result store: one directory per run (manifest + raw outputs), atomic writes, tidy loaders.

Layout under a results directory (``data/<profile>/``)::

    plan.json                  the planned runs in their randomised order, and the seed
    hosts/<host>.json          host facts
    campaigns/<k>.json         campaign k: start, finish, hosts and boot ids, git, datasets used
                               (dbmatrix.run.campaigns merges them; read and written here)
    datasets/<host>/<key>.json dataset sizes and prepare times
    raw/<run_id>/              manifest.json (a dbmatrix.record.RunRecord) + raw outputs of a finished
                               run (ok or failed)
    failed/<run_id>@<utc>/     earlier failed attempts, kept when a rerun retries them
    processed/                 tables derived from raw/ (recomputable)
    notebooks/                 executed notebooks of this study, with papermill's provenance

A run directory is assembled under ``raw/.tmp-*`` and renamed into place only when complete, so an
interrupted run never looks finished, and a finished one is never redone by a rerun.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from dbmatrix import engines
from dbmatrix.parse import binlog_counters, cache_counters, sysbench, vmstat
from dbmatrix.parse.system_counters import DELTA_KEYS as SYSTEM_COUNTERS  # keys of a record's system
from dbmatrix.record import RunRecord
from dbmatrix.record import load as load_record
from dbmatrix.spec.experiment import FACTORS

MANIFEST = "manifest.json"
VMSTAT_FILE = "vmstat.txt"  # the host's per-second samples of a run (dbmatrix.hosts.collect)


SENTINEL_DIR = "sentinel"
# the platform probe (run.probes) beside a run's manifest: after a sentinel run; before and after a long run
PROBE_FILE = "platform-probe.json"
PROBE_BEFORE_FILE = "platform-probe-before.json"
PROBE_AFTER_FILE = "platform-probe-after.json"
PROBE_FIGURES = ("cpu_eps_1", "cpu_eps_all", "sync_write_ms")  # what a probe file holds (run.platform_probe)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def umask() -> int:
    """The process's umask, read without changing it (/proc/self/status; else set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def write_text_atomic(path: Path, text: str | bytes) -> None:
    """Write via a temporary file in the same directory and rename over the target. The file gets the mode
    a plain open() would give (0666 less the umask), not the temporary file's 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(text, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, mode) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


class ResultStore:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def failed(self) -> Path:
        return self.root / "failed"

    @property
    def processed(self) -> Path:
        return self.root / "processed"

    @property
    def hosts(self) -> Path:
        return self.root / "hosts"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    def dataset_file(self, host: str, key: str) -> Path:
        return self.root / "datasets" / host / f"{key}.json"

    # -- campaigns ----------------------------------------------------------------------------
    def sentinel_dir(self, campaign: int) -> Path:
        """Where `campaign`'s A/A sentinel runs are kept, a results directory of their own (never read as
        the design's runs: :mod:`dbmatrix.spec.sentinel`)."""
        return self.root / SENTINEL_DIR / f"campaign-{campaign}"

    def campaign_file(self, campaign: int) -> Path:
        return self.root / "campaigns" / f"{campaign}.json"

    def campaign_record(self, campaign: int) -> dict[str, Any] | None:
        p = self.campaign_file(campaign)
        return json.loads(p.read_text()) if p.is_file() else None

    def write_campaign_record(self, record: dict[str, Any]) -> None:
        write_json_atomic(self.campaign_file(int(record["campaign"])), record)

    def campaigns(self) -> list[dict[str, Any]]:
        """The campaign records (campaigns/<k>.json), by campaign number. A directory measured before
        campaigns existed has none: its runs are campaign 1 (see :func:`load_runs`' ``campaign``)."""
        d = self.root / "campaigns"
        if not d.is_dir():
            return []
        recs = [json.loads(p.read_text()) for p in d.glob("*.json") if p.stem.isdigit()]
        return sorted(recs, key=lambda r: int(r["campaign"]))

    # -- runs ---------------------------------------------------------------------------------
    def record(self, run_id: str) -> RunRecord | None:
        """A committed run's record (its manifest of any schema version, migrated), or None."""
        p = self.raw / run_id / MANIFEST
        return load_record(p.read_text()) if p.is_file() else None

    def status(self, run_id: str) -> str | None:
        r = self.record(run_id)
        return None if r is None else r.status

    def records(self) -> Iterator[RunRecord]:
        """Every committed run's record, by run id (the one load path of manifests)."""
        if not self.raw.is_dir():
            return
        for d in sorted(self.raw.iterdir()):
            if d.name.startswith(".") or not (d / MANIFEST).is_file():
                continue
            yield load_record((d / MANIFEST).read_text())

    def begin_run(self, run_id: str) -> Path:
        """A fresh staging directory for a run's outputs."""
        self.raw.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".tmp-{run_id}-", dir=self.raw))

    def commit_run(self, staging: Path, record: RunRecord) -> Path:
        """Write the record (with the list of the run's outputs) and move the staging directory into place.

        An earlier failed attempt of the same run is moved to failed/ first, never deleted.
        """
        run_id = record.run_id
        record.files = sorted(p.name for p in staging.iterdir() if p.name != MANIFEST)
        write_text_atomic(staging / MANIFEST, record.to_json())
        final = self.raw / run_id
        if final.exists():
            old = self.record(run_id)
            if old is not None and old.ok:
                raise FileExistsError(f"run {run_id} already completed; refusing to overwrite it")
            self.failed.mkdir(parents=True, exist_ok=True)
            stamp = ((old.finished_utc if old else None) or utc_now()).replace(":", "")
            os.replace(final, self.failed / f"{run_id}@{stamp}")
        os.replace(staging, final)
        return final

    def discard(self, staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)

    def forget(self, run_id: str) -> None:
        """Remove a committed run that was not a measurement (a fleet run cut short by Ctrl-C)."""
        r = self.record(run_id)
        if r is not None and r.ok:
            raise FileExistsError(f"run {run_id} completed; refusing to forget it")
        shutil.rmtree(self.raw / run_id, ignore_errors=True)

    def rewrite_record(self, record: RunRecord) -> None:
        """Replace a committed run's manifest (annotations added after the fact, e.g. host_lost)."""
        write_text_atomic(self.raw / record.run_id / MANIFEST, record.to_json())

    def clean_staging(self) -> int:
        """Remove staging directories left by interrupted runs; returns how many."""
        if not self.raw.is_dir():
            return 0
        stale = [d for d in self.raw.iterdir() if d.name.startswith(".tmp-")]
        for d in stale:
            shutil.rmtree(d, ignore_errors=True)
        return len(stale)

    # -- loaders ------------------------------------------------------------------------------
    def probe(self, run_id: str, name: str = PROBE_FILE) -> dict[str, Any]:
        """A measured run's platform probe file `name` (:mod:`dbmatrix.run.probes`), or {} (none, or unreadable)."""
        try:
            doc = json.loads((self.raw / run_id / name).read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def parsed(self, run_id: str) -> sysbench.SysbenchOutput:
        d = self.raw / run_id
        err = d / "sysbench.err"
        return sysbench.parse_output((d / "sysbench.out").read_text(),
                                     err.read_text() if err.is_file() else "")

    def load_runs(self, include_failed: bool = False) -> pd.DataFrame:
        """One row per run: identity (with its ``campaign``, 1 for manifests older than campaigns, and the
        host's ``boot_id``), factor levels, sizes, and the sysbench summary."""
        rows = []
        classes = False
        for m in self.records():
            if not m.ok and not include_failed:
                continue
            ds = m.dataset or {}
            row: dict[str, Any] = {
                "run_id": m.run_id, "experiment": m.experiment, "cell_id": m.cell_id,
                "campaign": m.campaign, "boot_id": m.boot_id,
                **{f: m.cell[f] for f in FACTORS},
                "repetition": m.repetition, "block": m.block, "order": m.order,
                "host": m.host, "status": m.status, "emulated": (m.medium or {}).get("emulates"),
                "cache_bytes": m.cache_bytes,
                "cache_bytes_effective": m.cache_bytes_effective,
                "cache_clamped_to_minimum": m.cache_clamped_to_minimum,
                "rate_tps": m.rate_tps,
                "adaptive": m.adaptive,
                "cache_basis": m.cache_basis,  # cache_pct is of this size (record migration 3)
                "data_physical_bytes": ds.get("data_physical_bytes"),
                "data_logical_bytes": ds.get("data_logical_bytes"),
                "data_apparent_bytes": ds.get("data_apparent_bytes"),
                "started_utc": m.started_utc,
                "window_mode": m.window_mode, "window_mode_reason": m.window_mode_reason,
                # Exact counter deltas over the measured window (None where not measurable).
                **{k: (m.system or {}).get(k) for k in SYSTEM_COUNTERS},
            }
            if m.host_class is not None:  # the inventory's host class (a column only if declared)
                row["host_class"] = m.host_class
                classes = True
            if m.ok:
                s = self.parsed(m.run_id).summary
                for k in ("tps", "qps", "transactions", "ignored_errors", "reconnects", "total_time_s",
                          "lat_avg_ms", "lat_pct_ms", "lat_max_ms", "threads"):
                    row[k] = s.get(k)
                row.update(self.cache_counters(m))
                row.update(self.binlog_counters(m))
            rows.append(row)
        df = pd.DataFrame(rows)
        if classes:
            df["host_class"] = df["host_class"].where(df["host_class"].notna(), df["host"])
        if not df.empty:
            df = df.sort_values("run_id", kind="stable").reset_index(drop=True)
        return df

    def cache_counters(self, m: RunRecord) -> dict[str, float]:
        """The engine's cache hit ratio over the window (:mod:`dbmatrix.analyse.cache`), from the status
        snapshots a single-server run saves around its window; NaN for runs without them."""
        d = self.raw / m.run_id
        before, after = d / "status-before.tsv", d / "status-after.tsv"
        if not (before.is_file() and after.is_file()):
            return dict.fromkeys(cache_counters.COLUMNS, float("nan"))
        engine = engines.find(str(m.cell.get("engine")))
        return cache_counters.cache_counters(engine.status_counters if engine else None,
                                             cache_counters.parse_status(before.read_text()),
                                             cache_counters.parse_status(after.read_text()))

    def binlog_counters(self, m: RunRecord) -> dict[str, float]:
        """Whether the run's binary log was on and synced, and its group commits over the window
        (:mod:`dbmatrix.parse.binlog_counters`); NaN for runs without the saved variables and status."""
        d = self.raw / m.run_id
        files = [d / "variables.tsv", d / "status-before.tsv", d / "status-after.tsv"]
        if not all(f.is_file() for f in files):
            return dict.fromkeys(binlog_counters.COLUMNS, float("nan"))
        variables, before, after = (cache_counters.parse_status(f.read_text()) for f in files)
        return binlog_counters.binlog_counters(variables, before, after)

    def load_intervals(self) -> pd.DataFrame:
        """Per-second sysbench rows of every completed run (autocorrelated: not replicates)."""
        frames = []
        for m in self.records():
            if not m.ok:
                continue
            rows = self.parsed(m.run_id).intervals
            if rows:
                f = pd.DataFrame(rows)
                f.insert(0, "run_id", m.run_id)
                f.insert(1, "cell_id", m.cell_id)
                frames.append(f)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def load_host_series(self) -> pd.DataFrame:
        """The host's per-second samples (``vmstat.txt``) of every completed run inside its measured window:
        run_id, cell_id, t_s (the window's second, as sysbench numbers its rows) and
        :data:`dbmatrix.parse.vmstat.COLUMNS`. A run without the file or without its window's start time
        has no rows. The samples are the host's, so a host that ran two things at once shows both."""
        frames = []
        for m in self.records():
            start = (m.window or {}).get("start_epoch")
            f = self.raw / m.run_id / VMSTAT_FILE
            if not m.ok or start is None or not f.is_file():
                continue
            rows = vmstat.parse_vmstat(f.read_text(errors="replace"))
            if rows.empty:
                continue
            rows.insert(0, "t_s", vmstat.window_seconds(rows, float(start)))
            rows.insert(0, "cell_id", m.cell_id)
            rows.insert(0, "run_id", m.run_id)
            frames.append(rows[rows["t_s"] >= 1])
        cols = ["run_id", "cell_id", "t_s", *vmstat.COLUMNS]
        return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)

    def load_histograms(self) -> pd.DataFrame:
        """Latency histogram buckets (ms, count) per run: merge by adding counts."""
        frames = []
        for m in self.records():
            if not m.ok:
                continue
            h = self.parsed(m.run_id).histogram
            if h:
                f = pd.DataFrame(h, columns=["value_ms", "count"])
                f.insert(0, "run_id", m.run_id)
                f.insert(1, "cell_id", m.cell_id)
                frames.append(f)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
