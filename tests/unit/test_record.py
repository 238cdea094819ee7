"""The run record (dbmatrix.record): every committed reference manifest loads, migrates and round-trips;
each migration step on a minimal legacy example; unknown fields and newer schemas are refused by name."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dbmatrix.record import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Lease,
    RecordError,
    RunRecord,
    load,
    migrate,
    update_to_2,
    update_to_3,
    update_to_4,
    update_to_5,
)
from dbmatrix.spec.experiment import LEGACY_CACHE_BASIS
from dbmatrix.spec.factors import FACTOR_DEFAULTS, FACTORS
from dbmatrix.store import ResultStore

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference"
MANIFESTS = sorted(REFERENCE.glob("**/raw/*/manifest.json"))


def minimal(**extra: Any) -> dict[str, Any]:
    """The smallest manifest of the first shape (schema 1: every field written before the record)."""
    return {"schema": 1, "run_id": "innodb-c25-r1", "experiment": "x", "cell_id": "innodb-c25",
            "cell": {"engine": "innodb", "cache_pct": 25}, "repetition": 1, "host": "localhost", **extra}


# -- the committed reference -------------------------------------------------------------------------

def test_the_reference_has_every_kind_of_run() -> None:
    studies = {p.relative_to(REFERENCE).parts[0] for p in MANIFESTS}
    assert {"storage-matrix-quick", "threads-quick", "tpcc-quick", "galera-quick", "scaleout-quick"} <= studies
    assert any("calibration" in p.parts for p in MANIFESTS)  # the Galera study's calibration runs
    assert len(MANIFESTS) >= 184


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(REFERENCE)))
def test_every_reference_manifest_loads_migrates_and_round_trips(path: Path) -> None:
    text = path.read_text()
    legacy = json.loads(text)
    rec = load(text)
    assert rec.run_id == legacy["run_id"] == path.parent.name
    assert set(FACTORS) <= set(rec.cell)
    assert rec.campaign >= 1 and rec.boot_id and rec.cache_basis
    current = rec.to_json()
    assert json.loads(current)["schema"] == SCHEMA_VERSION
    assert RunRecord.from_json(current) == rec
    assert RunRecord.from_json(current).to_json() == current  # a current-version manifest, byte for byte
    # Nothing the legacy manifest said is lost: every key is kept, except the nulls (absent at schema 5).
    assert {k for k, v in legacy.items() if v is not None} <= set(json.loads(current))


def test_the_store_reads_every_reference_study_through_the_record(tmp_path: Path) -> None:
    for study in sorted({p.relative_to(REFERENCE).parts[0] for p in MANIFESTS}):
        records = list(ResultStore(REFERENCE / study).records())
        assert records and all(isinstance(r, RunRecord) and r.ok for r in records)


# -- one test per migration step ---------------------------------------------------------------------

def test_update_to_2_campaign_and_boot_id() -> None:
    d = update_to_2(minimal(host_facts={"boot_id": "b-1"}))
    assert d["campaign"] == 1 and d["boot_id"] == "b-1"
    kept = update_to_2(minimal(campaign=3, boot_id="own", host_facts={"boot_id": "facts"}))
    assert kept["campaign"] == 3 and kept["boot_id"] == "own"
    assert update_to_2(minimal())["boot_id"] is None  # an early failure had no facts


def test_update_to_3_cache_basis_and_apparent_size() -> None:
    d = update_to_3(minimal(cache_bytes=8 << 20, dataset={"data_logical_bytes": 100, "data_physical_bytes": 90}))
    assert d["cache_basis"] == LEGACY_CACHE_BASIS
    assert d["dataset"]["data_apparent_bytes"] == 100
    new = update_to_3(minimal(cache_bytes=1, cache_basis="logical",
                              dataset={"data_logical_bytes": 100, "data_apparent_bytes": 70}))
    assert new["cache_basis"] == "logical" and new["dataset"]["data_apparent_bytes"] == 70
    assert "cache_basis" not in update_to_3(minimal())  # a run never sized has no basis


def test_update_to_4_every_factor_in_the_cell() -> None:
    d = update_to_4(minimal())
    assert set(d["cell"]) == set(FACTORS)
    assert d["cell"]["engine"] == "innodb" and d["cell"]["follower_medium"] == FACTOR_DEFAULTS["follower_medium"]
    assert d["adaptive"] is False


def test_update_to_5_nulls_are_absent() -> None:
    d = update_to_5(minimal(error=None, log_dir=None, status="ok"))
    assert "error" not in d and "log_dir" not in d and d["status"] == "ok"


def test_migrate_runs_every_step_in_order_and_stamps_the_version() -> None:
    assert sorted(MIGRATIONS) == list(range(2, SCHEMA_VERSION + 1))
    d = migrate({k: v for k, v in minimal(host_facts={"boot_id": "b"}).items() if k != "schema"})
    assert d["schema"] == SCHEMA_VERSION and d["campaign"] == 1 and d["boot_id"] == "b"
    rec = RunRecord.from_dict(minimal(error=None, wsrep={}))
    assert rec.error is None and rec.wsrep == {} and "wsrep" not in rec.to_dict()


def test_a_legacy_failed_run_loads() -> None:
    """What record_early_failure wrote before the record: no facts, no sizing, a null boot id."""
    rec = RunRecord.from_dict(minimal(boot_id=None, status="failed", failed_step="medium",
                                      error="MediaError: no such device", finished_utc="2026-01-01T00:00:00+00:00"))
    assert rec.failed and not rec.ok and rec.failed_step == "medium" and rec.boot_id is None
    assert RunRecord.from_json(rec.to_json()) == rec


# -- refusals ----------------------------------------------------------------------------------------

def test_writing_an_unknown_field_names_it() -> None:
    rec = RunRecord.from_dict(minimal())
    with pytest.raises(AttributeError, match="no field 'tps_mean'"):
        rec.tps_mean = 1.0  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no field 'bogus'"):
        rec.set(bogus=1)


def test_reading_an_unknown_field_names_it() -> None:
    with pytest.raises(RecordError, match="unknown field 'surprise'"):
        RunRecord.from_dict({**minimal(), "schema": SCHEMA_VERSION, "surprise": 1})


def test_reading_a_newer_schema_names_the_version() -> None:
    with pytest.raises(RecordError, match=f"schema {SCHEMA_VERSION + 1} is newer .*up to {SCHEMA_VERSION}\\)"):
        RunRecord.from_dict({**minimal(), "schema": SCHEMA_VERSION + 1})


def test_a_missing_identity_field_and_a_bad_status_are_refused() -> None:
    with pytest.raises(RecordError, match="field 'cell_id' is required"):
        RunRecord.from_dict({k: v for k, v in minimal().items() if k != "cell_id"})
    with pytest.raises(RecordError, match="status 'maybe'"):
        RunRecord.from_dict(minimal(status="maybe"))


# -- writing -----------------------------------------------------------------------------------------

def test_the_named_writers() -> None:
    rec = RunRecord.from_dict(minimal())
    rec.fail("start", "RuntimeError: boom")
    assert (rec.status, rec.failed_step, rec.error) == ("failed", "start", "RuntimeError: boom")
    rec.mark_host_lost("h2")
    assert rec.host_lost and rec.error == "host h2 dropped out: RuntimeError: boom"
    rec.finish("2026-01-01T00:00:00+00:00", 1.5)
    assert rec.duration_s == 1.5
    ok = RunRecord.from_dict(minimal())
    ok.succeed()
    assert ok.ok and ok.error is None


def test_the_lease_round_trips_and_is_checked() -> None:
    rec = RunRecord.from_dict(minimal())
    rec.lease = Lease("slurm", "42", ["n1", "n2"], partition="debug", sacct={"State": "RUNNING"})
    back = RunRecord.from_json(rec.to_json())
    assert back == rec and back.lease is not None and back.lease.nodes == ["n1", "n2"]
    assert "account" not in json.loads(rec.to_json())["lease"]
    with pytest.raises(RecordError, match="lease: unknown field 'queue'"):
        RunRecord.from_dict({**minimal(), "lease": {"scheduler": "slurm", "job_id": "1", "queue": "x"}})
    with pytest.raises(RecordError, match="lease: field 'job_id' is required"):
        RunRecord.from_dict({**minimal(), "lease": {"scheduler": "slurm"}})
    assert RunRecord.from_dict(minimal()).lease is None


def test_a_field_of_the_wrong_type_is_refused_by_name() -> None:
    with pytest.raises(RecordError, match="field 'campaign' is 'two', not int"):
        RunRecord.from_dict(minimal(campaign="two"))
    with pytest.raises(RecordError, match="field 'summary' is"):
        RunRecord.from_dict(minimal(summary=[1, 2]))
    with pytest.raises(RecordError, match="field 'repetition' is True"):
        RunRecord.from_dict(minimal(repetition=True))  # a bool is not a count
    assert RunRecord.from_dict(minimal(cache_pct=25, duration_s=3)).duration_s == 3  # an int is a float


# The reference data as committed before the record (git history): the oldest shapes, loaded for real.
LEGACY_REFERENCE_COMMITS = ("cbd013d", "afa590e", "4a177ee")


def _git(*args: str, stdin: bytes | None = None) -> bytes:
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True, check=False)
    return r.stdout if r.returncode == 0 else b""


@pytest.mark.parametrize("commit", LEGACY_REFERENCE_COMMITS)
def test_the_reference_manifests_of_earlier_commits_load_and_migrate(commit: str) -> None:
    names = [n for n in _git("ls-tree", "-r", "--name-only", commit, "--", "data/reference").decode().split()
             if n.endswith("/manifest.json")]
    if not names:
        pytest.skip(f"git history with {commit} not available (a shallow clone)")
    blobs = _git("cat-file", "--batch", stdin="".join(f"{commit}:{n}\n" for n in names).encode())
    texts, pos = [], 0
    while pos < len(blobs):  # "<sha> blob <size>\n<content>\n" per name
        end = blobs.index(b"\n", pos)
        size = int(blobs[pos:end].split()[2])
        texts.append(blobs[end + 1:end + 1 + size].decode())
        pos = end + 1 + size + 1
    assert len(texts) == len(names)
    for text in texts:
        legacy = json.loads(text)
        rec = load(text)
        assert legacy.get("schema", 1) == 1 and set(FACTORS) <= set(rec.cell)
        assert rec.campaign == legacy.get("campaign", 1) and rec.cache_basis
        assert rec.dataset["data_apparent_bytes"] == legacy["dataset"].get("data_apparent_bytes",
                                                                            legacy["dataset"]["data_logical_bytes"])
        assert RunRecord.from_json(rec.to_json()) == rec
