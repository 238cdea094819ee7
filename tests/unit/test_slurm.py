"""The Slurm leaser's pure parts (command lines, output parsing, time limits, features), the inventory's
``scheduler: slurm`` section, and the leaser driven through a scripted host (no Slurm needed)."""

from __future__ import annotations

import json

import pytest

from dbmatrix.hosts.inventory import SlurmSection, parse_inventory, parse_slurm_section, parse_slurm_time
from dbmatrix.hosts.scripted import ScriptedHost
from dbmatrix.record import RunRecord
from dbmatrix.run.leasing import LeaseFailed, LeaseRequest, StaticLeaser, lease_record, with_lease
from dbmatrix.run.slurm import (
    SACCT_FIELDS,
    JobState,
    SlurmLeaser,
    block_request,
    expand_nodelist,
    features_for,
    format_time,
    job_name,
    leaser_for,
    lost_reason,
    node_names,
    node_out_of_service,
    parse_granted,
    parse_sacct,
    parse_scontrol_job,
    parse_sinfo,
    parse_squeue,
    salloc_argv,
    scancel_argv,
    time_limit_s,
)
from dbmatrix.spec.experiment import SpecError, parse_experiment

HOSTS = [{"name": "n1", "address": "10.0.0.1"}, {"name": "n2", "address": "10.0.0.2", "class": "big"}]
CFG = SlurmSection(partition="bench", account="dblab", features={"tmpfs": "tmpfs", "big": "bigmem"})


# ------------------------------------------------------------------------ inventory section

def test_inventory_without_scheduler_is_static() -> None:
    inv = parse_inventory({"hosts": HOSTS})
    assert inv.scheduler == "static" and inv.slurm is None


def test_inventory_slurm_section_parsed_with_defaults() -> None:
    inv = parse_inventory({"scheduler": "slurm", "hosts": HOSTS,
                           "slurm": {"partition": "bench", "account": "dblab", "time_limit": "1:30:00",
                                     "features": {"tmpfs": "tmpfs"}, "nodes": {"node-07": "n1"}}})
    s = inv.slurm
    assert inv.scheduler == "slurm" and s is not None
    assert (s.partition, s.account, s.time_limit, s.time_margin_pct, s.min_time_limit) == \
        ("bench", "dblab", 5400, 50.0, 300)
    assert s.host_of_node("node-07") == "n1" and s.node_of_host("n1") == "node-07"
    assert s.host_of_node("n2") == "n2" and s.node_of_host("n2") == "n2"  # same name by default
    auto = parse_inventory({"scheduler": "slurm", "hosts": HOSTS}).slurm
    assert auto is not None and auto.time_limit is None and auto.partition is None


@pytest.mark.parametrize("raw,message", [
    ({"scheduler": "pbs"}, "inventory.scheduler: 'pbs' is not allowed; allowed: static, slurm"),
    ({"slurm": {"partition": "x"}}, "inventory.slurm: only with scheduler: slurm"),
    ({"scheduler": "slurm", "slurm": {"queue": "x"}}, "inventory.slurm: unknown key(s) queue; allowed: partition"),
    ({"scheduler": "slurm", "slurm": {"partition": "a b"}}, "inventory.slurm.partition: 'a b' must be a Slurm"),
    ({"scheduler": "slurm", "slurm": {"time_limit": "soon"}}, "inventory.slurm.time_limit (or auto): 'soon'"),
    ({"scheduler": "slurm", "slurm": {"time_margin_pct": -1}}, "inventory.slurm.time_margin_pct: -1 must be"),
    ({"scheduler": "slurm", "slurm": {"nodes": {"node-1": "n9"}}},
     "inventory.slurm.nodes.node-1: 'n9' is not an inventory host; hosts: n1, n2"),
    ({"scheduler": "slurm", "slurm": {"nodes": {"a": "n1", "b": "n1"}}}, "two Slurm nodes map to one"),
    ({"scheduler": "slurm", "slurm": {"features": ["tmpfs"]}}, "inventory.slurm.features: ['tmpfs'] must map"),
    ({"scheduler": "slurm", "slurm": {"grant_timeout_s": 0}}, "inventory.slurm.grant_timeout_s: 0 must be"),
    ({"scheduler": "slurm", "slurm": "bench"}, "inventory.slurm: must be a mapping"),
])
def test_inventory_slurm_section_errors_name_the_field(raw: dict, message: str) -> None:
    with pytest.raises(SpecError) as ei:
        parse_inventory({"hosts": HOSTS, **raw})
    assert message in str(ei.value)


def test_slurm_times() -> None:
    assert parse_slurm_time(90, "t") == 90
    assert parse_slurm_time("30", "t") == 1800  # minutes, as Slurm reads it
    assert parse_slurm_time("05:30", "t") == 330
    assert parse_slurm_time("2:00:00", "t") == 7200
    assert parse_slurm_time("1-02", "t") == 93600
    assert parse_slurm_time("1-00:00:30", "t") == 86430
    for bad in ("0", "x", True, "1:2:3:4"):
        with pytest.raises(SpecError):
            parse_slurm_time(bad, "t")
    assert format_time(1) == "00:01:00" and format_time(61) == "00:02:00" and format_time(90000) == "1-01:00:00"


def test_time_limit_is_the_estimate_plus_margin_at_least_the_minimum() -> None:
    assert time_limit_s(1000, CFG) == 1500  # +50 %, whole minutes
    assert time_limit_s(10, CFG) == 300  # at least min_time_limit
    assert time_limit_s(1000, SlurmSection(time_margin_pct=0, min_time_limit=60)) == 1020  # rounded up
    assert time_limit_s(99999, SlurmSection(time_limit=600)) == 600  # fixed


# ------------------------------------------------------------------------ command lines and parsing

def test_salloc_asks_for_whole_planned_nodes_with_the_media_features() -> None:
    argv = salloc_argv(CFG, ["n1", "n2"], ("bigmem", "tmpfs"), 1500, "dbmatrix-x-b3")
    assert argv == ["salloc", "--nodes=2", "--exclusive", "--no-shell", "--job-name=dbmatrix-x-b3",
                    "--time=00:25:00", "--nodelist=n1,n2", "--partition=bench", "--account=dblab",
                    "--constraint=bigmem&tmpfs"]
    bare = salloc_argv(SlurmSection(), ["n1"], (), 60, "j")
    assert not any(a.startswith(("--partition", "--account", "--constraint")) for a in bare)
    assert scancel_argv(["12", "13"]) == ["scancel", "12", "13"]
    assert scancel_argv(name="a") == ["scancel", "--name=a"]
    assert job_name("my exp/1", 2) == "dbmatrix-my_exp_1-b2"


def test_features_come_from_media_and_host_classes() -> None:
    assert features_for(["tmpfs", "disk"], [None, "big"], CFG) == ("bigmem", "tmpfs")
    assert features_for(["disk"], [None], CFG) == ()


def test_block_request_of_a_spread_cluster_asks_for_every_host_at_once() -> None:
    inv = parse_inventory({"scheduler": "slurm", "hosts": HOSTS, "slurm": {"features": {"big": "bigmem"}}})
    exp = parse_experiment({"experiment": "g", "factors": {"cache_pct": 50}, "topology": {
        "kind": "galera", "nodes": 3, "hosts": ["n1", "n2", "n2"]}, "repetitions": 1})
    req = block_request(exp, inv, 1, "n1", 100)
    assert req.hosts == ("n1", "n2") and req.features == ("bigmem",) and req.time_limit_s == 300
    assert req.name == "dbmatrix-g-b1"
    static = block_request(exp, parse_inventory({"hosts": HOSTS}), 1, "n1", 100)
    assert static.hosts == ("n1", "n2") and static.features == ()
    assert isinstance(leaser_for(parse_inventory({"hosts": HOSTS})), StaticLeaser)
    assert isinstance(leaser_for(inv), SlurmLeaser)


def test_parse_salloc_squeue_sinfo() -> None:
    assert parse_granted("salloc: Pending job allocation 7\nsalloc: Granted job allocation 7\n") == "7"
    assert parse_granted("salloc: error: Job submit/allocate failed: Invalid feature specification") is None
    jobs = parse_squeue("7|RUNNING|node[01-02,7]|None|dbmatrix-x-b1\n8|PENDING||Resources|dbmatrix-x-b2\n")
    assert jobs["7"] == JobState("7", "RUNNING", ("node01", "node02", "node7"), "None", "dbmatrix-x-b1")
    assert jobs["8"].nodes == () and jobs["8"].reason == "Resources"
    assert expand_nodelist("h1,h2") == ("h1", "h2") and expand_nodelist("(null)") == ()
    nodes = parse_sinfo("h1|allocated|tmpfs,disk|10.0.0.1\nh2|draining|(null)|10.0.0.2\n")
    assert nodes["h1"] == {"state": "allocated", "features": ("tmpfs", "disk"), "address": "10.0.0.1"}
    assert nodes["h2"]["features"] == ()


@pytest.mark.parametrize("state,out", [("idle", False), ("allocated", False), ("mixed", False),
                                       ("draining", True), ("drained", True), ("down", True),
                                       ("allocated*", True), ("allocated+drain", True), ("idle~", False)])
def test_node_states_out_of_service(state: str, out: bool) -> None:
    assert node_out_of_service(state) is out


def test_lost_reason() -> None:
    nodes = {"h1": {"state": "allocated"}, "h2": {"state": "draining"}}
    assert lost_reason(JobState("7", "RUNNING", ("h1",), "None", "j"), nodes, "7") is None
    assert lost_reason(JobState("7", "RUNNING", ("h2",), "None", "j"), nodes, "7") == "Slurm node h2 is draining"
    assert lost_reason(JobState("7", "TIMEOUT", ("h1",), "TimeLimit", "j"), nodes, "7") == \
        "Slurm job 7 TIMEOUT (TimeLimit)"
    assert lost_reason(JobState("7", "PREEMPTED", ("h1",), "None", "j"), nodes, "7") == "Slurm job 7 PREEMPTED"
    assert lost_reason(None, nodes, "7") == "Slurm job 7 is gone from the queue"


def test_parse_sacct_and_its_scontrol_stand_in() -> None:
    line = "12|dbmatrix-x-b1|bench|dblab|ana|h1|1|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:01|" \
           "2026-01-01T00:10:00|00:09:59|00:30:00|0:0"
    rec = parse_sacct(line + "\n")
    assert rec is not None and list(rec) == list(SACCT_FIELDS) and rec["State"] == "COMPLETED"
    assert parse_sacct("") is None
    sc = parse_scontrol_job("JobId=12 JobName=dbmatrix-x-b1 UserId=ana(1000) Account=dblab JobState=CANCELLED "
                            "Reason=None RunTime=00:00:08 TimeLimit=00:02:00 SubmitTime=2026-01-01T00:00:00 "
                            "StartTime=2026-01-01T00:00:00 EndTime=2026-01-01T00:00:08 Partition=bench "
                            "NodeList=h2 NumNodes=1 ExitCode=0:0")
    assert sc is not None and list(sc) == list(SACCT_FIELDS)
    assert (sc["JobID"], sc["User"], sc["State"], sc["NodeList"], sc["Elapsed"]) == \
        ("12", "ana", "CANCELLED", "h2", "00:00:08")
    assert parse_scontrol_job("slurm_load_jobs error: Invalid job id specified") is None


def test_lease_record_is_one_shape_and_only_slurm_leases_are_recorded() -> None:
    rec = lease_record("slurm", "12", ("h1",), "bench", None, {"State": "RUNNING"})
    assert rec == {"scheduler": "slurm", "job_id": "12", "nodes": ["h1"], "partition": "bench",
                   "account": None, "sacct": {"State": "RUNNING"}}
    run = RunRecord(run_id="r", experiment="e", cell_id="c", cell={}, repetition=1, host="h1")
    lease = with_lease(run, rec).lease
    assert lease is not None and lease.to_dict() == {k: v for k, v in rec.items() if v is not None}
    assert RunRecord.from_json(run.to_json()).lease == lease  # the lease survives the record's JSON
    bare = RunRecord(run_id="r", experiment="e", cell_id="c", cell={}, repetition=1, host="h1")
    assert with_lease(bare, None).lease is None and "lease" not in json.loads(bare.to_json())


# ------------------------------------------------------------------------ the leaser over a scripted host

def _slurm_host(granted: bool = True) -> ScriptedHost:
    host = ScriptedHost("slurm")
    if granted:
        host.on(r"^salloc ", stderr="salloc: Granted job allocation 41\n")
    else:
        host.on(r"^salloc ", exit_code=1, stderr="salloc: error: Invalid feature specification\n")
    host.on(r"^squeue ", stdout="41|RUNNING|node-07|None|dbmatrix-x-b1\n")
    host.on(r"^sinfo ", stdout="node-07|allocated|tmpfs|10.0.0.1\n")
    host.on(r"^sacct ", exit_code=1, stderr="Slurm accounting storage is disabled\n")
    host.on(r"^scontrol ", stdout="JobId=41 JobName=dbmatrix-x-b1 UserId=root(0) Account=dblab "
                                  "JobState=RUNNING NodeList=node-07 NumNodes=1 Partition=bench\n")
    host.on(r"^scancel ", stdout="")
    return host


def test_slurm_leaser_leases_records_and_releases() -> None:
    cfg = SlurmSection(partition="bench", account="dblab", nodes={"node-07": "n1"}, conf="/etc/lab/slurm.conf")
    host = _slurm_host()
    leaser = SlurmLeaser(cfg, host)
    lease = leaser.lease(LeaseRequest(1, ("n1",), ("tmpfs",), 600, "dbmatrix-x-b1"))
    assert lease.hosts == ("n1",) and lease.job_id == "41"  # the Slurm node maps back to the inventory host
    assert lease.record is not None and lease.record["nodes"] == ["node-07"]
    assert lease.record["sacct"]["source"] == "scontrol" and lease.record["sacct"]["State"] == "RUNNING"
    salloc = next(c for c in host.commands if c.startswith("salloc"))
    assert "--nodelist=node-07" in salloc and "--constraint=tmpfs" in salloc
    assert all(c.env == {"SLURM_CONF": "/etc/lab/slurm.conf"} for c in host.calls)
    assert leaser.lost(lease) is None and not leaser.ended(lease)
    leaser.release(lease)
    assert "scancel 41" in host.commands
    leaser.lease(LeaseRequest(2, ("n1",), (), 600, "dbmatrix-x-b2"))
    leaser.cancel_all()  # the held job by id, and every name asked for (a request still waiting) one by one
    assert host.commands[-3:] == ["scancel 41", "scancel --name=dbmatrix-x-b1", "scancel --name=dbmatrix-x-b2"]


def test_slurm_leaser_refused_request_fails_and_cancels_by_name() -> None:
    host = _slurm_host(granted=False)
    with pytest.raises(LeaseFailed, match="Invalid feature specification"):
        SlurmLeaser(CFG, host).lease(LeaseRequest(2, ("n1",), ("nope",), 60, "dbmatrix-x-b2"))
    assert host.commands[-1] == "scancel --name=dbmatrix-x-b2"


def test_slurm_section_is_a_value() -> None:
    assert parse_slurm_section(None, ["n1"]) == SlurmSection()


def test_inventory_hosts_map_to_slurm_nodes_by_map_name_or_node_address() -> None:
    cfg = SlurmSection(nodes={"bench07": "pmem1"})
    sinfo = parse_sinfo("bench07|idle|pmem|10.1.0.7\nn2|idle||10.1.0.2\nnode-x|idle||10.0.0.9\n")
    hosts = {"pmem1": "bench07.lab", "n2": "10.1.0.2", "db9": "10.0.0.9", "gone": "10.9.9.9"}
    assert node_names(cfg, hosts, sinfo) == {"pmem1": "bench07", "n2": "n2", "db9": "node-x", "gone": "gone"}


def test_slurm_leaser_finds_a_node_by_its_address() -> None:
    host = _slurm_host()
    host.on(r"^sinfo --noheader --Node --format=%N\|%T\|%f\|%o$", stdout="node-07|idle|tmpfs|10.0.0.1\n")
    leaser = SlurmLeaser(SlurmSection(), host, {"n1": "10.0.0.1"})
    lease = leaser.lease(LeaseRequest(1, ("n1",), (), 600, "dbmatrix-x-b1"))
    assert "--nodelist=node-07" in host.matching(r"^salloc ")[0] and lease.hosts == ("n1",)


def test_scale_out_instances_with_their_client_on_another_host_ask_for_both() -> None:
    inv = parse_inventory({"scheduler": "slurm", "hosts": HOSTS})
    exp = parse_experiment({"experiment": "s", "factors": {"instances": [2], "threads": [1]}, "repetitions": 1,
                            "topology": {"kind": "instances", "hosts": ["n1", "n2"], "client": "n2"}})
    assert block_request(exp, inv, 1, "n1", 10).hosts == ("n1", "n2")
