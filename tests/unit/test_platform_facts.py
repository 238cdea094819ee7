"""Issue 39 item 2: the records say when the campaigns of a study ran on different platforms (the paper
reference's campaigns 1-2 and 3 ran on two VM types, L2 2 MiB vs 1 MiB, found by hand before this)."""

from __future__ import annotations

from typing import Any

from dbmatrix.analyse.campaign_records import INDEPENDENT, independence, summaries
from dbmatrix.campaign_state import campaign_states, platforms_by_campaign
from dbmatrix.platform_facts import platform_changes, platform_of, platform_summary
from dbmatrix.record import RunRecord


def _facts(l2: str = "2 MiB (2 instances)", kernel: str = "6.18.44-fc-v669", **kw: Any) -> dict[str, Any]:
    return {"cpu_vendor": "AuthenticAMD", "cpu_model": "AMD EPYC", "logical_cpus": 2,
            "caches": {"l1d": "64 KiB (2 instances)", "l2": l2, "l3": "32 MiB (1 instance)"},
            "mem_total_bytes": 25276502016, "hypervisor": True, "hypervisor_vendor": "KVM", "kernel": kernel,
            "kernel_cmdline": "console=ttyS0 quiet", "os_pretty": "Debian GNU/Linux 12 (bookworm)",
            "mariadb_version": "10.11.19-MariaDB-0+deb12u1", "sysbench_version": "1.0.20", **kw}


def test_platform_of_keeps_the_defining_facts_and_leaves_out_missing_ones() -> None:
    p = platform_of(_facts())
    assert p["cpu"] == "AuthenticAMD AMD EPYC" and p["cpus"] == "2" and p["l2"] == "2 MiB (2 instances)"
    assert p["memory"] == "24 GiB" and p["hypervisor"] == "KVM" and p["kernel_cmdline"].startswith("sha256:")
    # a few pages more or less between boots of one VM type is the same platform
    assert platform_of(_facts(mem_total_bytes=25276510208)) == p
    assert platform_of({}) == {}
    assert "l2" not in platform_of({"caches": {}, "cpu_model": "x"})


def test_changes_name_each_fact_that_moved_and_the_campaigns_on_each_side() -> None:
    a, b = platform_of(_facts()), platform_of(_facts(l2="1 MiB (2 instances)", kernel="6.18.44-fc-v657"))
    changes = platform_changes({1: {"localhost": [a]}, 2: {"localhost": [a]}, 3: {"localhost": [b]}})
    assert changes[0] == ("hardware differs: L2 cache 2 MiB (2 instances) in campaigns 1-2, "
                          "1 MiB (2 instances) in campaign 3")
    assert changes[1].startswith("software differs: kernel 6.18.44-fc-v669 in campaigns 1-2, "
                                 "6.18.44-fc-v657 in campaign 3")
    assert platform_changes({1: {"h": [a]}, 2: {"h": [a]}}) == []
    # a fact older records lack is no difference; several hosts are named
    old = {k: v for k, v in a.items() if k != "l2"}
    assert platform_changes({1: {"h": [old]}, 2: {"h": [a]}}) == []
    two = platform_changes({1: {"h1": [a], "h2": [a]}, 2: {"h1": [a], "h2": [b]}})
    assert len(two) == 2 and all(" on h2: " in c for c in two)
    assert "2 CPUs, L2 2 MiB (2 instances), 24 GiB" in platform_summary({1: {"h": [a]}})


def _run(run_id: str, campaign: int, facts: dict[str, Any]) -> RunRecord:
    return RunRecord(run_id=run_id, experiment="e", cell_id=run_id, cell={}, repetition=1, host="localhost",
                     campaign=campaign, status="ok", boot_id=f"boot{campaign}", host_facts=facts)


def test_campaign_states_carry_each_campaigns_platform() -> None:
    recs = [_run("a", 1, _facts()), _run("b", 2, _facts(l2="1 MiB (2 instances)"))]
    states = campaign_states({1: ["a"], 2: ["b"]}, recs)
    by = platforms_by_campaign(states)
    assert by[1]["localhost"][0]["l2"] == "2 MiB (2 instances)" and by[2]["localhost"][0]["l2"].startswith("1 MiB")
    assert platform_changes(by) == ["hardware differs: L2 cache 2 MiB (2 instances) in campaign 1, "
                                    "1 MiB (2 instances) in campaign 2"]


def test_the_campaign_label_says_when_the_machine_changed() -> None:
    def rec(k: int, boot: str) -> dict[str, Any]:
        start = f"2026-01-0{k}T00:00:00+00:00"
        return {"campaign": k, "started_utc": start, "boot_ids": [boot], "hosts": {"h": [boot]},
                "datasets": [{"host": "h", "key": "d", "created_utc": start}]}
    a, b = platform_of(_facts()), platform_of(_facts(l2="1 MiB (2 instances)"))
    same = independence(summaries([rec(1, "x"), rec(2, "y")], {1: {"h": [a]}, 2: {"h": [a]}}))
    assert same.label == INDEPENDENT
    moved = independence(summaries([rec(1, "x"), rec(2, "y")], {1: {"h": [a]}, 2: {"h": [b]}}))
    assert moved.label == f"{INDEPENDENT} (hardware differs between campaigns)"
    assert any(d.startswith("hardware differs: L2 cache") for d in moved.details)
