"""A fresh dataset load per campaign (spec ``dataset_load: per_campaign``): the spec key, which host snapshot a
campaign may reuse, prepare_dataset re-loading a snapshot another campaign loaded, and the campaign record
saying what it did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dbmatrix.run import datasets as ds
from dbmatrix.run.campaigns import CampaignState, merge_record
from dbmatrix.run.matrix import dataset_token
from dbmatrix.spec.experiment import SpecError, parse_experiment
from dbmatrix.store import ResultStore

BASE: dict[str, Any] = {"experiment": "fresh", "workload": {"name": "oltp_read_write", "tables": 2, "table_size": 100},
                        "factors": {"cache_pct": [25, 100]}, "repetitions": 1, "measure_s": 3}


def info(prepared_for: str | None) -> ds.DatasetInfo:
    return ds.DatasetInfo(key="innodb-b16k-none-oltp-2x100", host="h", snapshot="/w/snapshots/k", engine="innodb",
                          block_size="16k", compression="none", tables=2, table_size=100, data_physical_bytes=1,
                          data_logical_bytes=1, datadir_physical_bytes=1, datadir_logical_bytes=1, prepare_s=1.0,
                          created_utc="2026-11-27T07:00:00+00:00", logical_method=ds.INNODB_LOGICAL,
                          prepared_for=prepared_for)


def test_spec_key_defaults_to_reuse_and_keeps_the_digest() -> None:
    reuse = parse_experiment(BASE)
    assert reuse.dataset_load == "reuse" and not reuse.fresh_datasets
    assert "dataset_load" not in reuse.to_dict()
    fresh = parse_experiment({**BASE, "dataset_load": "per_campaign"})
    assert fresh.fresh_datasets and fresh.to_dict()["dataset_load"] == "per_campaign"
    assert fresh.digest() != reuse.digest()  # results of one policy never resume under the other
    assert parse_experiment({**BASE, "dataset_load": "reuse"}).digest() == reuse.digest()


def test_spec_refuses_an_unknown_dataset_load() -> None:
    with pytest.raises(SpecError, match=r"dataset_load: 'always' is not allowed; allowed: reuse, per_campaign"):
        parse_experiment({**BASE, "dataset_load": "always"})


def test_a_campaign_reuses_only_a_snapshot_loaded_for_it() -> None:
    one, two = ds.fresh_token("/r", "fresh", 1), ds.fresh_token("/r", "fresh", 2)
    assert one != two != ds.fresh_token("/other", "fresh", 2)
    assert not ds.reusable(None, None) and not ds.reusable(None, one)
    assert ds.reusable(info(None), None) and ds.reusable(info(one), None)  # reuse: any snapshot serves
    assert ds.reusable(info(one), one)  # a resumed campaign keeps the snapshot it loaded
    assert not ds.reusable(info(one), two) and not ds.reusable(info(None), two)  # a new campaign loads afresh


def test_dataset_token_only_for_per_campaign_specs(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r")
    assert dataset_token(parse_experiment(BASE), store, 2) is None
    fresh = parse_experiment({**BASE, "dataset_load": "per_campaign"})
    t1, t2 = dataset_token(fresh, store, 1), dataset_token(fresh, store, 2)
    assert t1 and t2 and t1 != t2 and t2.endswith("#campaign-2") and str(store.root.resolve()) in t2


class Loaded(Exception):
    """Raised by the fake host at the first command of a new load."""


class FakeHost:
    name = "h"

    def run(self, cmd: str, **kw: Any) -> Any:
        raise Loaded(cmd)


@pytest.mark.parametrize(("marked", "fresh_for", "loads"), [
    ("fresh@/r#campaign-1", "fresh@/r#campaign-1", False),  # resumed campaign: its own snapshot
    ("fresh@/r#campaign-1", "fresh@/r#campaign-2", True),  # next campaign: a new load
    (None, "fresh@/r#campaign-2", True),  # a snapshot from a reuse study: a new load
    ("fresh@/r#campaign-1", None, False),  # reuse: whatever the host holds
])
def test_prepare_dataset_loads_afresh_for_a_new_campaign(monkeypatch: pytest.MonkeyPatch, marked: str | None,
                                                         fresh_for: str | None, loads: bool) -> None:
    exp = parse_experiment({**BASE, "dataset_load": "per_campaign"})
    monkeypatch.setattr(ds, "cached_dataset", lambda host, workdir, key: info(marked))
    call = lambda: ds.prepare_dataset(FakeHost(), "/w", exp, exp.cells()[0], "root", None,  # type: ignore[arg-type]  # noqa: E731
                                      fresh_for=fresh_for)
    if loads:
        with pytest.raises(Loaded, match="rm -rf"):
            call()
    else:
        assert call().prepared_for == marked


def test_campaign_record_says_the_datasets_were_loaded_for_it() -> None:
    token = "fresh@/r#campaign-2"
    d = {**info(token).to_dict(), "created_utc": "2026-11-27T07:10:00+00:00"}
    rec = merge_record(None, campaign=2, experiment="fresh", campaign_started_utc="2026-11-27T07:09:00+00:00",
                       session_started_utc="2026-11-27T07:09:00+00:00", now_utc="2026-11-27T07:20:00+00:00",
                       hosts={"h": "boot"}, datasets=[d], git=None, spec_digest="x",
                       state=CampaignState(2, 2, 2), dataset_load="per_campaign")
    assert rec["dataset_load"] == "per_campaign"
    (used,) = rec["datasets"]
    assert used["prepared_for"] == token and used["reused"] is False
    old = merge_record(None, campaign=1, experiment="fresh", campaign_started_utc="a", session_started_utc="a",
                       now_utc="b", hosts={}, datasets=[], git=None, spec_digest="x", state=CampaignState(1, 1, 1))
    assert "dataset_load" not in old  # records written without the policy stay as they were
