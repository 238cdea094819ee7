"""Issue 25 items 6-7: what a campaign level captured, read from the campaign records, and claims fixed
before their data (a registry digest in each campaign's first record; "revised after data" otherwise)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.unit.test_claims import full_factorial, synthetic_runs

from dbmatrix.analyse.campaign_records import (
    INDEPENDENT,
    ONE,
    WITHIN_SESSION,
    independence,
    load_campaign_summaries,
    summaries,
    write_campaign_summaries,
)
from dbmatrix.analyse.claims import Claim, Evidence, Premise, evaluate
from dbmatrix.analyse.claims.registration import (
    claim_digest,
    code_changed,
    code_digest_of,
    files_changed,
    first_registration,
    registration_status,
    registry,
    verdict_code_digest,
    verdict_code_files,
)
from dbmatrix.publish.build import campaign_macros
from dbmatrix.run.campaigns import CampaignState, merge_record
from dbmatrix.store import ResultStore

BOOT_A, BOOT_B = "aaaaaaaa-0000", "bbbbbbbb-0000"
CLAIM = Claim("blockTest", "003", "here", "4k up to 20 % faster", "tps", (1.0, 1.2), factor="block_size",
              a="4k", b="16k", at={"engine": "myrocks", "cache_pct": 100})


def _record(k: int, start: str, boot: str, datasets: list[dict[str, Any]], *, kernel: str = "6.1.0-1",
            registration: dict[str, Any] | None = None, old: dict[str, Any] | None = None,
            dataset_load: str | None = None) -> dict[str, Any]:
    return merge_record(old, campaign=k, experiment="e", campaign_started_utc=start, session_started_utc=start,
                        now_utc=start.replace("T10", "T11"), hosts={"h1": boot}, datasets=datasets,
                        git={"commit": "abc", "dirty": False}, spec_digest="d", state=CampaignState(k, 4, 4),
                        kernels={"h1": kernel}, registration=registration, dataset_load=dataset_load)


def _ds(key: str, created: str) -> dict[str, Any]:
    return {"key": key, "host": "h1", "snapshot": f"/s/{key}", "created_utc": created}


# ---------------------------------------------------------------------------- the records

def test_the_record_keeps_kernels_and_the_first_registration() -> None:
    reg1, reg2 = registry([CLAIM], "code1"), registry([dataclasses.replace(CLAIM, band=(1.0, 1.5))], "code2")
    r = _record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [], registration=reg1)
    assert r["kernels"] == {"h1": ["6.1.0-1"]} and r["registration"] == reg1
    again = _record(1, "2026-01-02T10:00:00+00:00", BOOT_B, [], kernel="6.1.0-2", registration=reg2, old=r)
    assert again["registration"] == reg1  # fixed when the campaign started, never replaced
    assert again["kernels"] == {"h1": ["6.1.0-1", "6.1.0-2"]} and again["hosts"] == {"h1": [BOOT_A, BOOT_B]}


def test_independent_boots_and_fresh_datasets() -> None:
    c1 = _record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [_ds("k", "2026-01-01T10:00:05+00:00")])
    c2 = _record(2, "2026-01-02T10:00:00+00:00", BOOT_B, [_ds("k", "2026-01-02T10:00:05+00:00")])
    ind = independence(summaries([c2, c1]))
    assert ind.label == INDEPENDENT and ind.campaigns == 2
    assert "2 campaigns on 2 boots" in ind.sentence() and "2 dataset snapshots" in ind.sentence()


def test_same_boot_and_reused_snapshots_is_within_session_replication() -> None:
    snap = _ds("k", "2026-01-01T10:00:05+00:00")
    c1 = _record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [snap])
    c2 = _record(2, "2026-01-01T10:30:00+00:00", BOOT_A, [snap])
    assert independence(summaries([c1, c2])).label == WITHIN_SESSION


def test_mixed_cases_name_what_was_shared() -> None:
    snap = _ds("k", "2026-01-01T10:00:05+00:00")
    c1 = _record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [snap])
    c2 = _record(2, "2026-01-02T10:00:00+00:00", BOOT_B, [snap])  # rebooted, same snapshot
    assert independence(summaries([c1, c2])).label == "independent boots, reused snapshots"
    c3 = _record(2, "2026-01-01T10:30:00+00:00", BOOT_A, [_ds("k", "2026-01-01T10:30:05+00:00")])
    assert independence(summaries([c1, c3])).label == "same boot, fresh datasets"
    assert independence(summaries([c1])).label == ONE
    unknown = {**c2, "boot_ids": []}
    assert independence(summaries([c1, unknown])).label.startswith("boots unknown")


def test_a_snapshot_loaded_for_the_campaign_before_its_recorded_start_is_fresh() -> None:
    """A campaign resumed after an interrupted first attempt keeps the snapshot that attempt loaded for it:
    created before the campaign's recorded start, but marked as loaded for it (``prepared_for``)."""
    early = {**_ds("k", "2026-01-01T09:55:00+00:00"), "prepared_for": "e@/r#campaign-1"}
    c1 = _record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [early], dataset_load="per_campaign")
    c2 = _record(2, "2026-01-01T10:30:00+00:00", BOOT_A, [_ds("k", "2026-01-01T10:30:05+00:00")])
    assert independence(summaries([c1, c2])).label == "same boot, fresh datasets"
    for other in ("e@/r#campaign-2", "f@/r#campaign-1", None):  # another campaign's, another study's, unmarked
        c1 = _record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [{**early, "prepared_for": other}],
                     dataset_load="per_campaign")
        assert independence(summaries([c1, c2])).label == "same boot, datasets reused from before the campaigns"


def test_the_reference_campaigns_are_within_session_replication() -> None:
    """The committed reference: both campaigns of every study on one boot with reused snapshots: the
    label says so rather than calling them independent."""
    root = Path(__file__).resolve().parents[2] / "data" / "reference"
    for study in ("storage-matrix-quick", "tpcc-quick", "galera-quick"):
        camps = summaries(ResultStore(root / study).campaigns())
        assert len(camps) == 2 and independence(camps).label == WITHIN_SESSION, study


def test_summaries_round_trip_through_processed(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r")
    (store.root / "campaigns").mkdir(parents=True)
    store.processed.mkdir(parents=True)
    import json

    c1 = _record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [_ds("k", "2026-01-01T10:00:05+00:00")])
    (store.root / "campaigns" / "1.json").write_text(json.dumps(c1))
    write_campaign_summaries(store)
    got = load_campaign_summaries(store)
    assert got == summaries([c1]) and got[0]["kernels"] == ["6.1.0-1"] and got[0]["datasets"][0]["fresh"]


# ---------------------------------------------------------------------------- registration

def test_a_claims_digest_is_its_definition_not_its_wording() -> None:
    reworded = dataclasses.replace(CLAIM, text="4k pages: up to a fifth faster", where="slide 13",
                                   premises=(Premise("cache_below_data", 1.0, "said one way"),))
    again = dataclasses.replace(reworded, premises=(Premise("cache_below_data", 1.0, "said another way"),))
    assert claim_digest(reworded) == claim_digest(again) != claim_digest(CLAIM)  # a premise is definition
    assert claim_digest(dataclasses.replace(CLAIM, text="other words")) == claim_digest(CLAIM)
    assert claim_digest(dataclasses.replace(CLAIM, band=(1.0, 1.3))) != claim_digest(CLAIM)


def test_registration_status() -> None:
    reg = registry([CLAIM], "code1")
    assert registration_status(CLAIM, reg) == "fixed before data"
    assert registration_status(dataclasses.replace(CLAIM, band=(1.0, 1.5)), reg) == "revised after data"
    assert registration_status(dataclasses.replace(CLAIM, id="newClaim"), reg) == "added after data"
    assert registration_status(CLAIM, None) == registration_status(CLAIM, {}) == "not registered"
    camps = [{"campaign": 2, "registration": registry([], "code2")}, {"campaign": 1, "registration": reg}]
    assert first_registration(camps) == reg  # the first campaign's, whatever the order given
    assert code_changed(camps, "code1") == [2] and code_changed(camps, "code2") == [1]
    assert code_changed([{"campaign": 1}], "x") == []


def _evidence(campaign_records: list[dict[str, Any]]) -> Evidence:
    cells = full_factorial(engine=["innodb", "myrocks"], cache_pct=[25, 100], block_size=["4k", "16k"])
    one = synthetic_runs(cells, seed=1).assign(campaign=1)
    two = synthetic_runs(cells, seed=2).assign(campaign=2)
    two["run_id"] += "-camp2"
    return Evidence("m", "storage", pd.concat([one, two], ignore_index=True), {},
                    campaign_records=campaign_records)


def test_a_claim_edited_after_its_campaign_is_revised_after_data() -> None:
    """The claim's band was widened after campaign 1 recorded it: the table says so, and the paper's
    sentence counts it; the same claim unchanged is fixed before its data."""
    reg = registry([CLAIM], "code")
    snap = _ds("k", "2026-01-01T10:00:05+00:00")
    recs = summaries([_record(1, "2026-01-01T10:00:00+00:00", BOOT_A, [snap], registration=reg),
                      _record(2, "2026-01-01T10:30:00+00:00", BOOT_A, [snap], registration=reg)])
    edited = dataclasses.replace(CLAIM, band=(1.0, 1.3))
    table = evaluate([_evidence(recs)], [edited, CLAIM]).claims
    assert list(table["registration"]) == ["revised after data", "fixed before data"]
    assert set(table["campaign_level"]) == {WITHIN_SESSION}
    assert all(b.endswith(f"campaign level: {WITHIN_SESSION}") for b in table["basis"])
    m = campaign_macros(table)
    assert m["nClaimsRevisedAfterData"] == "1" and m["nClaimsFixedBeforeData"] == "1"
    assert "1 were revised or added after it" in m["claimsRegistration"]
    assert m["campaignLevels"].startswith("m: same boot")
    bare = evaluate([_evidence([])], [CLAIM]).claims
    assert bare["registration"].iloc[0] == "not registered" and bare["campaign_level"].iloc[0] == ""
    assert campaign_macros(bare)["claimsRegistration"].startswith("No claim was fixed before its data")


def test_the_verdict_code_digest_follows_the_claims_import_closure(tmp_path: Path) -> None:
    pkg = tmp_path / "dbmatrix"
    for d in (pkg, pkg / "analyse", pkg / "analyse" / "claims"):
        d.mkdir(parents=True)
        (d / "__init__.py").write_text("")
    (pkg / "analyse" / "claims" / "__init__.py").write_text("from dbmatrix.analyse import rule\n")
    (pkg / "analyse" / "rule.py").write_text("BAND = 1\n")
    (pkg / "analyse" / "figures.py").write_text("X = 1\n")
    before = verdict_code_digest(tmp_path)
    (pkg / "analyse" / "figures.py").write_text("X = 2\n")
    assert verdict_code_digest(tmp_path) == before  # not what computes verdicts
    # rewording an explanation is no change: comments, layout and docstrings are not in the digest
    (pkg / "analyse" / "rule.py").write_text('"""The band."""\n\n# one\nBAND = (\n    1)\n')
    assert verdict_code_digest(tmp_path) == before
    files = verdict_code_files(tmp_path)
    assert set(files) == {"dbmatrix/__init__.py", "dbmatrix/analyse/__init__.py",
                          "dbmatrix/analyse/claims/__init__.py", "dbmatrix/analyse/rule.py"}
    reg = registry([CLAIM], code_digest_of(files), files)
    assert reg["verdict_code"] == before and files_changed(reg, files) == []
    (pkg / "analyse" / "rule.py").write_text("BAND = 2\n")
    assert verdict_code_digest(tmp_path) != before
    assert files_changed(reg, verdict_code_files(tmp_path)) == ["dbmatrix/analyse/rule.py"]
    (pkg / "analyse" / "limits.py").write_text("TOP = 3\n")
    (pkg / "analyse" / "claims" / "__init__.py").write_text("from dbmatrix.analyse import rule, limits\n")
    assert files_changed(reg, verdict_code_files(tmp_path)) == [
        "dbmatrix/analyse/claims/__init__.py", "dbmatrix/analyse/limits.py", "dbmatrix/analyse/rule.py"]
    assert files_changed(registry([CLAIM], "old"), files) is None  # recorded before per-file digests
    assert len(verdict_code_digest()) == 16


def test_the_verdict_code_files_are_kept_on_disk_per_content_of_the_package(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A second invocation (a new process: the in-process cache cleared) reads the answer from the disk cache
    and parses nothing; any change of the package's bytes, even one that keeps size and mtime, is a new key;
    a damaged file is computed again; the newest KEEP are kept."""
    from dbmatrix import codedeps
    from dbmatrix.analyse.claims import registration
    from dbmatrix.cache import KEEP

    lib, cache = tmp_path / "lib", tmp_path / "cache"
    pkg = lib / "dbmatrix"
    for d in (pkg, pkg / "analyse", pkg / "analyse" / "claims"):
        d.mkdir(parents=True)
        (d / "__init__.py").write_text("")
    (pkg / "analyse" / "claims" / "__init__.py").write_text("from dbmatrix.analyse import rule\n")
    rule = pkg / "analyse" / "rule.py"
    rule.write_text("BAND = 1\n")
    first = verdict_code_files(lib, cache)
    (stored,) = (cache / "verdict-code").glob("*.json")

    def no_parsing(*_: object) -> None:
        raise AssertionError("parsed the package again")

    registration._verdict_code_files.cache_clear()
    with monkeypatch.context() as m:
        m.setattr(codedeps, "load_graph", no_parsing)
        assert verdict_code_files(lib, cache) == first  # from the disk
    st = rule.stat()
    rule.write_text("BAND = 2\n")  # same size, and the same mtime
    os.utime(rule, ns=(st.st_atime_ns, st.st_mtime_ns))
    registration._verdict_code_files.cache_clear()
    second = verdict_code_files(lib, cache)
    assert second["dbmatrix/analyse/rule.py"] != first["dbmatrix/analyse/rule.py"]
    assert len(list((cache / "verdict-code").glob("*.json"))) == 2
    stored.write_text("{not json")
    rule.write_text("BAND = 1\n")
    registration._verdict_code_files.cache_clear()
    assert verdict_code_files(lib, cache) == first  # the damaged file computed again
    assert json.loads(stored.read_text()) == [list(e) for e in first.items()]
    for i in range(KEEP + 3):
        rule.write_text(f"BAND = {i + 10}\n")
        verdict_code_files(lib, cache)
    assert len(list((cache / "verdict-code").glob("*.json"))) == KEEP
    assert not list((cache / "verdict-code").glob("*.tmp"))


def test_the_verdicts_view_names_the_files_changed_since_the_last_campaign_that_recorded_them(tmp_path: Path) -> None:
    """`dbmatrix verdicts`' campaign lines: a study whose campaigns recorded other verdict code is named, with
    the files that differ since its last such campaign, or a word that they were not recorded."""
    from types import SimpleNamespace

    from dbmatrix import steps

    files = verdict_code_files()
    one = next(iter(files))
    older = {**files, one: "0" * 16}
    recs = {"new": [{"campaign": 1, "registration": registry([], code_digest_of(older), older)},
                    {"campaign": 2, "registration": registry([], code_digest_of(files), files)},
                    {"campaign": 3, "registration": registry([], code_digest_of(older), older)}],
            "old": [{"campaign": 1, "registration": registry([], "f00d")}],
            "same": [{"campaign": 1, "registration": registry([], code_digest_of(files), files)}]}
    studies = []
    for name, r in recs.items():
        store = ResultStore(tmp_path / name)
        store.processed.mkdir(parents=True)
        (store.processed / "campaigns.json").write_text(json.dumps(r))
        studies.append(SimpleNamespace(experiment=SimpleNamespace(name=name), store=store))
    table = pd.DataFrame({"study": ["new"], "campaign_level": [""], "registration": ["fixed before data"]})
    lines = steps.campaign_lines(table, studies)  # type: ignore[arg-type]
    assert f"new: the verdict code changed since campaign(s) 1, 3 recorded it; since campaign 3: {one}" in lines
    assert ("old: the verdict code changed since campaign(s) 1 recorded it; which files: not recorded (campaigns "
            "before per-file digests)") in lines
    assert not any(x.startswith("same:") for x in lines)
