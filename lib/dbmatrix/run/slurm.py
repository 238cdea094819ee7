"""Hosts from a lab's Slurm pool: one allocation of whole nodes per replicate block.

A block's allocation is ``salloc --no-shell --exclusive -N<n> --nodelist=<its planned nodes>
--constraint=<features of its media> -t <limit> -J dbmatrix-<experiment>-b<block>``: salloc waits in the
queue, returns once Slurm grants the nodes, and the allocation stays until ``scancel`` (or its time
limit). Nothing runs as a Slurm job step: the fleet reaches the leased nodes over SSH (fabric) as it
reaches any inventory host, so the Slurm node name maps to an inventory host (``slurm.nodes``, default
the same name). The planned node is asked for by name so that the plan (blocks per host, the design's
host blocks) is the same as with a static inventory; the constraint makes Slurm refuse a node that lacks
the medium.

A lease is lost when the job ends under it (``CANCELLED`` from outside, ``PREEMPTED``, ``TIMEOUT``,
``NODE_FAIL``...) or its node leaves service (``drain``, ``down``): the fleet's lost-host semantics apply.

The command lines and the parsing of ``squeue``/``sinfo``/``sacct``/``scontrol`` output are pure
functions (unit-tested without Slurm); :class:`SlurmLeaser` runs them through
:class:`dbmatrix.hosts.remote.LocalHost` on the controller.
"""

from __future__ import annotations

import math
import re
import shlex
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbmatrix.hosts.inventory import Inventory, SlurmSection
from dbmatrix.hosts.remote import Host, LocalHost
from dbmatrix.run.context import media_used
from dbmatrix.run.leasing import Lease, LeaseFailed, Leaser, LeaseRequest, StaticLeaser, lease_record
from dbmatrix.spec.experiment import Experiment

# Job states in which the allocation no longer holds (squeue/sacct %T names).
JOB_ENDED = ("CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL",
             "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT")
# Node states (sinfo %T, lower case; a trailing * = not responding) that take a node out of service.
NODE_OUT = ("drain", "draining", "drained", "down", "fail", "failing", "maint", "reboot", "future",
            "unknown", "not_responding", "inval", "power_down", "powered_down", "powering_down")
SACCT_FIELDS = ("JobID", "JobName", "Partition", "Account", "User", "NodeList", "AllocNodes", "State",
                "Submit", "Start", "End", "Elapsed", "Timelimit", "ExitCode")
# scontrol show job keys for the same fields, when the cluster keeps no accounting (no slurmdbd).
SCONTROL_FOR_SACCT = {"JobID": "JobId", "JobName": "JobName", "Partition": "Partition", "Account": "Account",
                      "User": "UserId", "NodeList": "NodeList", "AllocNodes": "NumNodes", "State": "JobState",
                      "Submit": "SubmitTime", "Start": "StartTime", "End": "EndTime", "Elapsed": "RunTime",
                      "Timelimit": "TimeLimit", "ExitCode": "ExitCode"}
_GRANTED = re.compile(r"Granted job allocation (\d+)")
_PENDING = re.compile(r"(?:Pending|Required node not available.*?) job allocation (\d+)")


# ------------------------------------------------------------------------------------------ pure parts

def format_time(seconds: float) -> str:
    """A Slurm time limit, rounded up to whole minutes: ``HH:MM:00`` or ``D-HH:MM:00``."""
    minutes = max(1, math.ceil(seconds / 60))
    d, rem = divmod(minutes, 1440)
    h, m = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:00" if d else f"{h:02d}:{m:02d}:00"


def time_limit_s(estimated_s: float, cfg: SlurmSection) -> int:
    """The time limit a block asks for: the fixed ``time_limit``, or its estimate plus the margin, at least
    ``min_time_limit``, in whole minutes."""
    if cfg.time_limit is not None:
        return cfg.time_limit
    want = max(float(cfg.min_time_limit), estimated_s * (1 + cfg.time_margin_pct / 100))
    return 60 * max(1, math.ceil(want / 60))


def features_for(media: Iterable[str], host_classes: Iterable[str | None], cfg: SlurmSection) -> tuple[str, ...]:
    """The Slurm features a block's nodes need: those ``slurm.features`` maps the block's media and host
    classes to (a medium or class without a mapping needs no feature)."""
    names = [*media, *(c for c in host_classes if c)]
    return tuple(sorted({cfg.features[n] for n in names if n in cfg.features}))


def job_name(experiment: str, block: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", experiment)
    return f"dbmatrix-{safe}-b{block}"


def salloc_argv(cfg: SlurmSection, nodes: Sequence[str], features: Sequence[str], limit_s: float,
                name: str) -> list[str]:
    """``salloc`` for one block: whole nodes, no shell (the allocation stays until scancel)."""
    argv = ["salloc", f"--nodes={len(nodes)}", "--exclusive", "--no-shell", f"--job-name={name}",
            f"--time={format_time(limit_s)}", f"--nodelist={','.join(nodes)}"]
    if cfg.partition:
        argv.append(f"--partition={cfg.partition}")
    if cfg.account:
        argv.append(f"--account={cfg.account}")
    if features:
        argv.append(f"--constraint={'&'.join(features)}")
    return argv


def squeue_argv(job_ids: Sequence[str]) -> list[str]:
    return ["squeue", "--noheader", "--states=all", f"--jobs={','.join(job_ids)}", "--format=%i|%T|%N|%r|%j"]


def sinfo_argv(nodes: Sequence[str] = ()) -> list[str]:
    argv = ["sinfo", "--noheader", "--Node", "--format=%N|%T|%f|%o"]
    return [*argv, f"--nodes={','.join(nodes)}"] if nodes else argv


def sacct_argv(job_id: str) -> list[str]:
    return ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={job_id}",
            f"--format={','.join(SACCT_FIELDS)}"]


def scontrol_job_argv(job_id: str) -> list[str]:
    return ["scontrol", "--oneliner", "show", "job", job_id]


def scancel_argv(job_ids: Sequence[str] = (), name: str | None = None) -> list[str]:
    """Cancel jobs by id, or (a request still waiting, whose id salloc has not printed) by name (scancel
    takes one name: a comma in it is part of the name)."""
    if job_ids:
        return ["scancel", *job_ids]
    return ["scancel", f"--name={name}"]


def parse_granted(stderr: str) -> str | None:
    """The job id salloc printed when the allocation was granted."""
    m = _GRANTED.search(stderr)
    return m.group(1) if m else None


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str
    nodes: tuple[str, ...]
    reason: str
    name: str


def expand_nodelist(text: str) -> tuple[str, ...]:
    """``h[1-3],gpu7`` -> (h1, h2, h3, gpu7) (Slurm's bracket ranges, zero padding kept)."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text.strip()):
        m = re.fullmatch(r"(.*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        pre, ranges, post = m.groups()
        for r in ranges.split(","):
            a, _, b = r.partition("-")
            for i in range(int(a), int(b or a) + 1):
                out.append(f"{pre}{str(i).zfill(len(a))}{post}")
    return tuple(x for x in out if x and x not in ("(null)", "None"))


def parse_squeue(text: str) -> dict[str, JobState]:
    """Job id -> state from :func:`squeue_argv`'s output."""
    jobs = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 5 and parts[0]:
            jobs[parts[0]] = JobState(parts[0], parts[1], expand_nodelist(parts[2]), parts[3], parts[4])
    return jobs


def parse_sinfo(text: str) -> dict[str, dict[str, Any]]:
    """Node -> {state, features, address} from :func:`sinfo_argv`'s output."""
    nodes = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 4 and parts[0]:
            nodes[parts[0]] = {"state": parts[1], "features": tuple(f for f in parts[2].split(",") if f
                                                                     and f != "(null)"), "address": parts[3]}
    return nodes


def node_out_of_service(state: str) -> bool:
    """Is a node in this sinfo state out of service (drained, down, not responding...)?"""
    s = state.lower()
    if s.endswith("*"):
        return True
    return any(s == x or s.startswith(x) or f"+{x}" in s for x in NODE_OUT)


def parse_sacct(text: str) -> dict[str, str] | None:
    """The allocation's line of :func:`sacct_argv` (``--parsable2``: fields split by ``|``)."""
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == len(SACCT_FIELDS) and parts[0]:
            return dict(zip(SACCT_FIELDS, parts))
    return None


def parse_scontrol_job(text: str) -> dict[str, str] | None:
    """:func:`scontrol_job_argv`'s one line as the sacct fields (the same names), ``source`` said."""
    kv: dict[str, str] = {m.group(1): m.group(2) for m in re.finditer(r"(\S+?)=(\S*)", text)}
    if "JobId" not in kv:
        return None
    rec = {f: kv.get(k, "") for f, k in SCONTROL_FOR_SACCT.items()}
    rec["User"] = rec["User"].split("(")[0]
    return rec


def lost_reason(job: JobState | None, nodes: Mapping[str, Mapping[str, Any]], job_id: str) -> str | None:
    """Why an allocation no longer holds, from squeue (`job`) and sinfo (`nodes` of the allocation)."""
    if job is None:
        return f"Slurm job {job_id} is gone from the queue"
    if job.state in JOB_ENDED:
        return f"Slurm job {job_id} {job.state}" + (f" ({job.reason})" if job.reason not in ("", "None") else "")
    for n in job.nodes:
        st = str(nodes.get(n, {}).get("state", ""))
        if st and node_out_of_service(st):
            return f"Slurm node {n} is {st}"
    return None


def node_names(cfg: SlurmSection, hosts: Mapping[str, str], sinfo: Mapping[str, Mapping[str, Any]]
               ) -> dict[str, str]:
    """Inventory host -> Slurm node: the ``slurm.nodes`` map, else the node of the same name, else the node
    whose NodeAddr is the host's address (`hosts`: host -> address; `sinfo`: :func:`parse_sinfo`)."""
    by_addr = {str(v.get("address")): n for n, v in sinfo.items()}
    out = {}
    for host, address in hosts.items():
        mapped = cfg.node_of_host(host)
        out[host] = mapped if mapped != host or host in sinfo else by_addr.get(address, host)
    return out


def describe_request(cfg: SlurmSection, request: LeaseRequest) -> str:
    """What `dbmatrix plan` prints for one block's allocation."""
    nodes = [cfg.node_of_host(h) for h in request.hosts]
    argv = salloc_argv(cfg, nodes, request.features, request.time_limit_s, request.name)
    return f"block {request.block}: {shlex.join(argv)}"


def block_request(exp: Experiment, inventory: Inventory, block: int, host: str, estimated_s: float
                  ) -> LeaseRequest:
    """What block `block` (planned on `host`) asks for: its host and the other hosts of a cluster spread
    over hosts or scale-out instances and their client on other hosts (``topology.hosts``: all at once),
    the features of the media the plan uses and of the hosts' classes, and the time limit its estimated
    duration needs (a static inventory: the hosts only)."""
    hosts = tuple(dict.fromkeys([host, *exp.topology.hosts]))
    cfg = inventory.slurm
    if cfg is None:
        return LeaseRequest(block, hosts, (), estimated_s, job_name(exp.name, block))
    features = features_for(media_used(exp), [inventory.host(h).host_class for h in hosts], cfg)
    return LeaseRequest(block, hosts, features, time_limit_s(estimated_s, cfg), job_name(exp.name, block))


def leaser_for(inventory: Inventory) -> Leaser:
    """The inventory's leaser: Slurm with ``scheduler: slurm``, else the static inventory."""
    if inventory.scheduler == "slurm" and inventory.slurm is not None:
        return SlurmLeaser(inventory.slurm, LocalHost("slurm"), {h.name: h.address for h in inventory.hosts})
    return StaticLeaser()


# ------------------------------------------------------------------------------------------ the leaser

class SlurmLeaser:
    """Leases through Slurm's client commands, run on the controller (`host`, a LocalHost) with
    ``SLURM_CONF`` from the inventory's ``slurm.conf`` when it names one."""

    scheduler = "slurm"

    def __init__(self, cfg: SlurmSection, host: Host, addresses: Mapping[str, str] | None = None):
        self.cfg, self.host = cfg, host
        self.addresses = dict(addresses or {})  # inventory host -> address (a node found by its NodeAddr)
        self._nodes: dict[str, str] | None = None  # inventory host -> Slurm node, asked of sinfo once
        self._lock = threading.Lock()
        self._names: set[str] = set()  # every job name asked for (cancel a waiting request by name)
        self._held: dict[str, Lease] = {}  # job id -> lease not yet released

    def _run(self, argv: Sequence[str], timeout: float = 60.0, check: bool = False) -> Any:
        env = {"SLURM_CONF": self.cfg.conf} if self.cfg.conf else None
        return self.host.run(shlex.join(argv), check=check, timeout=timeout, env=env)

    def describe(self, request: LeaseRequest) -> str:
        return describe_request(self.cfg, request)

    def node_of(self, host: str) -> str:
        """The Slurm node of an inventory host (:func:`node_names`; sinfo is asked once)."""
        if self._nodes is None:
            sinfo = parse_sinfo(self._run(sinfo_argv()).stdout) if self.addresses else {}
            self._nodes = node_names(self.cfg, self.addresses, sinfo)
        return self._nodes.get(host, self.cfg.node_of_host(host))

    def lease(self, request: LeaseRequest) -> Lease:
        nodes = [self.node_of(h) for h in dict.fromkeys(request.hosts)]
        with self._lock:
            self._names.add(request.name)
        argv = salloc_argv(self.cfg, nodes, request.features, request.time_limit_s, request.name)
        try:
            r = self._run(argv, timeout=self.cfg.grant_timeout_s)
        except Exception as exc:
            self._run(scancel_argv(name=request.name))
            raise LeaseFailed(f"{shlex.join(argv)}: {type(exc).__name__}: {exc}") from exc
        job = parse_granted(r.stderr)
        if not r.ok or job is None:
            self._run(scancel_argv(name=request.name))
            raise LeaseFailed(f"{shlex.join(argv)} exited {r.exit_code}: {(r.stderr or r.stdout).strip()[-500:]}")
        state = parse_squeue(self._run(squeue_argv([job])).stdout).get(job)
        granted = state.nodes if state and state.nodes else tuple(nodes)
        host_of = {n: h for h, n in (self._nodes or {}).items()}
        lease = Lease(request, tuple(host_of.get(n, self.cfg.host_of_node(n)) for n in granted), job_id=job)
        lease.record = lease_record("slurm", job, granted, self.cfg.partition, self.cfg.account,
                                    self.accounting(job))
        with self._lock:
            self._held[job] = lease
        return lease

    def accounting(self, job_id: str) -> dict[str, str] | None:
        """The job's ``sacct`` line; without accounting storage (no slurmdbd) the same fields from
        ``scontrol show job``, with ``source: scontrol``."""
        r = self._run(sacct_argv(job_id))
        rec = parse_sacct(r.stdout) if r.ok else None
        if rec is not None:
            return {**rec, "source": "sacct"}
        rec = parse_scontrol_job(self._run(scontrol_job_argv(job_id)).stdout)
        return {**rec, "source": "scontrol"} if rec is not None else None

    def _state(self, lease: Lease) -> tuple[JobState | None, dict[str, dict[str, Any]]]:
        assert lease.job_id is not None
        job = parse_squeue(self._run(squeue_argv([lease.job_id])).stdout).get(lease.job_id)
        nodes = parse_sinfo(self._run(sinfo_argv(job.nodes if job else ())).stdout) if job else {}
        return job, nodes

    def lost(self, lease: Lease) -> str | None:
        if lease.job_id is None:
            return None
        job, nodes = self._state(lease)
        return lost_reason(job, nodes, lease.job_id)

    def ended(self, lease: Lease) -> bool:
        if lease.job_id is None:
            return False
        job, _ = self._state(lease)
        return job is None or job.state in JOB_ENDED

    def release(self, lease: Lease) -> None:
        if lease.job_id is None:
            return
        self._run(scancel_argv([lease.job_id]))
        with self._lock:
            self._held.pop(lease.job_id, None)
        if lease.record is not None:
            lease.record["sacct"] = self.accounting(lease.job_id) or lease.record.get("sacct")

    def cancel_all(self) -> None:
        with self._lock:
            ids, names = sorted(self._held), sorted(self._names)
        if ids:
            self._run(scancel_argv(ids))
        for name in names:
            self._run(scancel_argv(name=name))
