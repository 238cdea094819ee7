"""A run's record: the typed, versioned form of ``raw/<run_id>/manifest.json`` (pure: JSON text and dicts only).

The run session writes a :class:`RunRecord` through its typed fields (``rec.window_mode = ...``; an unknown
name is an error naming it) and the methods for events that set several fields (:meth:`RunRecord.fail`,
:meth:`RunRecord.succeed`, :meth:`RunRecord.finish`, :meth:`RunRecord.mark_host_lost`); the record owns its
JSON form (:meth:`RunRecord.to_json`, :meth:`RunRecord.from_json`). Readers get records from
:class:`dbmatrix.store.ResultStore` (``record``, ``records``), which loads every manifest through
:func:`load`: the one place where older shapes are understood.

Fields, by what they say (a field that is None, or an empty dict or list, is absent from the JSON; nested
dicts are kept as written):

- identity: run_id, experiment, spec_digest, spec, cell_id, cell (every factor's level), repetition, block,
  order, adaptive, campaign, host, host_class, git, started_utc;
- host and boot: boot_id, host_facts, versions; lease (:class:`Lease`, a Slurm job's hosts), host_lost;
- medium and dataset: medium, media_state, log_dir, dataset, datasets (per instance);
- cache sizing: cache_pct, cache_basis, cache_basis_bytes, cache_bytes, cache_bytes_requested,
  cache_bytes_effective, cache_clamped_to_minimum;
- servers: server, server_constants, cpu_placement, os_cache_dropped, stop_error; Galera: topology, client,
  cluster, nodes, wsrep, wsrep_samples, dead_nodes; instances: instances, instances_start_s,
  instances_stop_s, instances_window;
- window and workload: rate_tps, closed_loop_peak_tps, window_mode, window_mode_reason, window,
  collectors_started_epoch, sysbench_seed, sysbench_warmup, sysbench, collectors, system;
- results: summary, warmup_summary, tpcc, tpcc_consistency;
- end: status (``ok``/``failed``), failed_step, error, steps (seconds per step), finished_utc, duration_s,
  files (the run's outputs).

Schema versions (``"schema"`` in the JSON; :data:`SCHEMA_VERSION` is written). Every manifest written
before this module says ``"schema": 1`` whatever its shape, so version 1 means "some shape before the
record" and each step below is written to leave a manifest that already has the newer shape unchanged;
:func:`load` applies, in order, every step above the manifest's version (as asv's ``update_to_X``):

1. the free-form manifests (no ``schema`` key reads as 1);
2. campaigns (4a177ee): ``campaign`` absent -> 1; ``boot_id`` absent -> ``host_facts.boot_id``;
3. cache basis (4a177ee): a sized run without ``cache_basis`` was sized on the physical size
   (``LEGACY_CACHE_BASIS``); a dataset without ``data_apparent_bytes`` (before ``logical_method``)
   measured the apparent size as ``data_logical_bytes``;
4. factors (514f244 instances/pinning, e6b46d8 follower_medium): ``cell`` holds every factor, absent ones
   at their default; ``adaptive`` absent -> False;
5. the typed record: a null field is absent (legacy ``"error": null``, ``"log_dir": null``), and so is an
   empty dict or list (a failed Galera run's ``"wsrep": {}``); new optional field ``lease``; unknown fields,
   and fields of another JSON type than their annotation says, are refused by name;
6. factors again (group_commit, issue 40): ``cell`` holds every factor, the ones added since at their default
   (step 4 for the manifests written at version 5).

``tests/unit/test_record.py`` loads every committed reference manifest (``data/reference/**/raw/*``,
calibration runs included) through this path and round-trips it, and tests each step on a minimal example
of the shape before it (the shapes are those of the reference data in git history: cbd013d, afa590e,
4a177ee, e6b46d8, and the early failures ``record_early_failure`` wrote).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from dbmatrix.spec.experiment import LEGACY_CACHE_BASIS
from dbmatrix.spec.factors import FACTOR_DEFAULTS

SCHEMA_VERSION = 6
STATUSES = ("ok", "failed")


class RecordError(ValueError):
    """A manifest this code cannot read as a run record (unknown field, newer schema, missing field)."""


@dataclass
class Lease:
    """The scheduler's lease a run's hosts came from (a Slurm job): its ``sacct`` record kept as a dict."""

    scheduler: str
    job_id: str
    nodes: list[str] = field(default_factory=list)
    partition: str | None = None
    account: str | None = None
    sacct: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Lease:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise RecordError(f"lease: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(known))}")
        for k in ("scheduler", "job_id"):
            if d.get(k) is None:
                raise RecordError(f"lease: field {k!r} is required")
        args: dict[str, Any] = {k: (list(v) if k == "nodes" else v) for k, v in d.items()}
        return cls(**args)


@dataclass(eq=True)
class RunRecord:
    """One run's record (see the module doc for its fields and schema versions)."""

    # identity
    run_id: str
    experiment: str
    cell_id: str
    cell: dict[str, Any]
    repetition: int
    host: str
    spec_digest: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)
    block: int | None = None
    order: int | None = None
    adaptive: bool = False
    campaign: int = 1
    host_class: str | None = None
    git: dict[str, Any] = field(default_factory=dict)
    started_utc: str | None = None
    # host and boot
    boot_id: str | None = None
    host_facts: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    lease: Lease | None = None
    host_lost: bool | None = None
    # medium and dataset
    medium: dict[str, Any] = field(default_factory=dict)
    media_state: dict[str, Any] = field(default_factory=dict)
    log_dir: str | None = None
    dataset: dict[str, Any] = field(default_factory=dict)
    datasets: dict[str, Any] = field(default_factory=dict)
    # cache sizing
    cache_pct: float | None = None
    cache_basis: str | None = None
    cache_basis_bytes: int | None = None
    cache_bytes: int | None = None
    cache_bytes_requested: int | None = None
    cache_bytes_effective: int | None = None
    cache_clamped_to_minimum: bool | None = None
    # servers
    server: dict[str, Any] = field(default_factory=dict)
    server_constants: dict[str, Any] = field(default_factory=dict)
    cpu_placement: dict[str, Any] = field(default_factory=dict)
    os_cache_dropped: bool | None = None
    stop_error: Any = None
    topology: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)
    nodes: dict[str, Any] = field(default_factory=dict)
    wsrep: dict[str, Any] = field(default_factory=dict)
    wsrep_samples: dict[str, Any] = field(default_factory=dict)
    dead_nodes: list[str] = field(default_factory=list)
    instances: dict[str, Any] = field(default_factory=dict)
    instances_start_s: float | None = None
    instances_stop_s: float | None = None
    instances_window: dict[str, Any] = field(default_factory=dict)
    # window and workload
    rate_tps: int | None = None
    closed_loop_peak_tps: float | None = None
    window_mode: str | None = None
    window_mode_reason: str | None = None
    window: dict[str, Any] = field(default_factory=dict)
    collectors_started_epoch: float | None = None
    sysbench_seed: int | None = None
    sysbench_warmup: dict[str, Any] = field(default_factory=dict)
    sysbench: dict[str, Any] = field(default_factory=dict)
    collectors: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    # results
    summary: dict[str, Any] = field(default_factory=dict)
    warmup_summary: dict[str, Any] = field(default_factory=dict)
    tpcc: dict[str, Any] = field(default_factory=dict)
    tpcc_consistency: dict[str, Any] = field(default_factory=dict)
    # end
    status: str | None = None
    failed_step: str | None = None
    error: str | None = None
    steps: dict[str, float] = field(default_factory=dict)
    finished_utc: str | None = None
    duration_s: float | None = None
    files: list[str] = field(default_factory=list)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"run record: no field {name!r} (a new field needs a schema version: "
                                 "dbmatrix.record)")
        object.__setattr__(self, name, value)

    # -- writing ------------------------------------------------------------------------------
    def set(self, **values: Any) -> None:
        """Set several fields; an unknown name is an error naming it."""
        for k, v in values.items():
            setattr(self, k, v)

    def fail(self, step: str, error: str) -> None:
        self.set(status="failed", failed_step=step, error=error)

    def succeed(self) -> None:
        self.set(status="ok", error=None)

    def finish(self, finished_utc: str, duration_s: float | None = None) -> None:
        self.set(finished_utc=finished_utc, duration_s=duration_s)

    def mark_host_lost(self, host: str) -> None:
        """A failed run whose host dropped out of the fleet (so a reader knows why)."""
        self.set(host_lost=True, error=f"host {host} dropped out: {self.error}")

    # -- reading ------------------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    # -- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON object (with ``schema``); None fields, and empty ones whose default is empty, are left out."""
        out: dict[str, Any] = {"schema": SCHEMA_VERSION}
        for name in _FIELDS:
            v = getattr(self, name)
            if v is None or (name in _CONTAINERS and not v):
                continue
            out[name] = v.to_dict() if isinstance(v, Lease) else v
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str) + "\n"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunRecord:
        """A record from a manifest of any schema version (migrated by :func:`migrate`)."""
        cur = migrate(d)
        cur.pop("schema", None)
        unknown = sorted(set(cur) - set(_FIELDS))
        if unknown:
            raise RecordError(f"run record {cur.get('run_id')!r}: unknown field {unknown[0]!r} "
                              f"(schema {SCHEMA_VERSION}); allowed: {', '.join(_FIELDS)}")
        missing = [k for k in _REQUIRED if cur.get(k) is None]
        if missing:
            raise RecordError(f"run record {cur.get('run_id')!r}: field {missing[0]!r} is required")
        if cur.get("status") is not None and cur["status"] not in STATUSES:
            raise RecordError(f"run record {cur['run_id']!r}: status {cur['status']!r} is not one of "
                              f"{', '.join(STATUSES)}")
        for k, v in cur.items():
            want = _JSON_TYPES[k]
            if want is not None and not _is(v, want):
                raise RecordError(f"run record {cur['run_id']!r}: field {k!r} is {v!r}, not {_FIELD_TYPES[k]}")
        if cur.get("lease") is not None:
            cur["lease"] = Lease.from_dict(cur["lease"])
        return cls(**cur)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        return cls.from_dict(json.loads(text))


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RunRecord))
_CONTAINERS = frozenset(f.name for f in fields(RunRecord) if f.default_factory is not MISSING)
_FIELD_TYPES = {f.name: str(f.type) for f in fields(RunRecord)}


def _json_type(annotation: str) -> tuple[type, ...] | None:
    """The JSON types a field's annotation allows (None: any); None values never reach the check."""
    base = annotation.split("|")[0].strip().split("[")[0]
    return {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "dict": (dict,),
            "list": (list,), "Lease": (dict,)}.get(base)


def _is(value: Any, want: tuple[type, ...]) -> bool:
    return isinstance(value, want) and (bool in want or not isinstance(value, bool))


_JSON_TYPES = {k: _json_type(t) for k, t in _FIELD_TYPES.items()}
_REQUIRED = ("run_id", "experiment", "cell_id", "cell", "repetition", "host")


# ------------------------------------------------------------------------------------ migrations

def update_to_2(d: dict[str, Any]) -> dict[str, Any]:
    """Campaigns: a manifest without ``campaign`` is campaign 1; its boot id is its host facts'."""
    if d.get("campaign") is None:
        d["campaign"] = 1
    if not d.get("boot_id"):
        d["boot_id"] = (d.get("host_facts") or {}).get("boot_id")
    return d


def update_to_3(d: dict[str, Any]) -> dict[str, Any]:
    """Cache basis: a sized run without ``cache_basis`` was sized on the physical size; a dataset without
    ``data_apparent_bytes`` recorded the apparent size as ``data_logical_bytes``."""
    if not d.get("cache_basis") and d.get("cache_bytes") is not None:
        d["cache_basis"] = LEGACY_CACHE_BASIS
    ds = d.get("dataset")
    if isinstance(ds, dict) and "data_apparent_bytes" not in ds:
        d["dataset"] = {**ds, "data_apparent_bytes": ds.get("data_logical_bytes")}
    return d


def update_to_4(d: dict[str, Any]) -> dict[str, Any]:
    """Factors added after a manifest was written hold their default in its ``cell``; ``adaptive`` False."""
    d["cell"] = {**{f: v for f, v in FACTOR_DEFAULTS.items() if f not in (d.get("cell") or {})},
                 **(d.get("cell") or {})}
    d["adaptive"] = bool(d.get("adaptive", False))
    return d


def update_to_5(d: dict[str, Any]) -> dict[str, Any]:
    """The typed record: a null field is an absent one."""
    return {k: v for k, v in d.items() if v is not None}


def update_to_6(d: dict[str, Any]) -> dict[str, Any]:
    """Factors added since version 5 (group_commit): :func:`migrate` gives every manifest the defaults of the
    factors its ``cell`` lacks, at any version, so this step only marks the version."""
    return d


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    2: update_to_2, 3: update_to_3, 4: update_to_4, 5: update_to_5, 6: update_to_6}


def schema_of(d: Mapping[str, Any]) -> int:
    v = d.get("schema", 1)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise RecordError(f"run record {d.get('run_id')!r}: schema {v!r} is not a version number >= 1")
    if v > SCHEMA_VERSION:
        raise RecordError(f"run record {d.get('run_id')!r}: schema {v} is newer than this dbmatrix reads "
                          f"(up to {SCHEMA_VERSION}); update dbmatrix to read it")
    return v


def migrate(d: Mapping[str, Any]) -> dict[str, Any]:
    """A manifest of any schema version, brought to :data:`SCHEMA_VERSION` one step at a time (a copy)."""
    version = schema_of(d)
    cur = dict(d)
    for to in range(version + 1, SCHEMA_VERSION + 1):
        cur = MIGRATIONS[to](cur)
        cur["schema"] = to
    return _factor_defaults(cur)


def _factor_defaults(d: dict[str, Any]) -> dict[str, Any]:
    """A factor added after a manifest was written holds its default in its ``cell``, whatever its schema
    version: adding a factor never needs a migration step (steps 4 and 6 did this before it was general)."""
    cell = d.get("cell")
    if isinstance(cell, dict) and cell and any(f not in cell for f in FACTOR_DEFAULTS):
        d["cell"] = {**{f: v for f, v in FACTOR_DEFAULTS.items() if f not in cell}, **cell}
    return d


def load(text: str) -> RunRecord:
    """The record of a manifest's JSON text, whatever its schema version (the one load path)."""
    return RunRecord.from_json(text)


__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "STATUSES", "Lease", "RecordError", "RunRecord", "load", "migrate",
           "schema_of", "update_to_2", "update_to_3", "update_to_4", "update_to_5"]
