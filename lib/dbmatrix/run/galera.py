"""One measured run of a Galera cell: the cluster counterpart of :func:`dbmatrix.run.matrix.execute_run`.

Per run: plan the nodes (ports, directories) -> restore the dataset snapshot onto node 1 (cold) ->
drop OS caches -> bootstrap node 1 -> join the other nodes one by one (full state transfer) and wait
until all are Synced -> check every node's variables -> warm up -> FLUSH LOCAL STATUS on every node and
snapshot -> measure with sysbench (wsrep sampler on every node, system collectors on node 1's host) ->
snapshot -> stop every node (node 1 last) -> keep every raw output and every node's error log.
Any failure, a node dying included, is recorded as a failed run with its step; all nodes are stopped.
"""

from __future__ import annotations

import shlex
import time
import traceback
from dataclasses import asdict
from typing import Any

from dbmatrix.hosts import collect, media
from dbmatrix.workload import sysbench
from dbmatrix.run.datasets import DatasetInfo, drop_os_caches, restore
from dbmatrix.run.galera_cluster import (
    GaleraCluster,
    NodePlan,
    WsrepSampler,
    check_sst_method,
    client_sockets,
    cluster_name,
    first_free_base,
    node_options,
    parse_sst_seconds,
    plan_nodes,
    run_as_user,
)
from dbmatrix.analyse.wsrep import parse_samples, summarize_samples, wsrep_deltas
from dbmatrix.run.mysqld import cache_bytes
from dbmatrix.hosts.remote import Host, RunInterrupted
from dbmatrix.run.matrix import (
    HostContext,
    RunFailed,
    StepClock,
    _fetch,
    _shielded,
    parse_listening_ports,
    run_manifest,
    sysbench_seed,
)
from dbmatrix.spec.experiment import Experiment, PlannedRun, SpecError
from dbmatrix.store import ResultStore, utc_now, write_text_atomic

# Fixed cost of a galera run beyond warm-up and measurement, measured on the 2-vCPU VM with 3 nodes and a
# 160 MB datadir: restore ~0.5-1 s, bootstrap ~0.5 s, two joins with rsync SST ~10-14 s, the measured window's
# snapshots, sampler and collectors ~3 s, stopping the nodes ~6 s.
GALERA_RUN_OVERHEAD_S = 25.0
# Bytes per second a state transfer is assumed to reach at worst when sizing the sync timeout.
SST_MIN_BPS = 20 * 1024 * 1024
SYNC_TIMEOUT_MIN_S = 300.0


def sync_timeout_s(dataset: DatasetInfo) -> float:
    """How long a node may take to start and sync: enough for a slow state transfer of the whole datadir."""
    return round(max(SYNC_TIMEOUT_MIN_S, dataset.datadir_physical_bytes / SST_MIN_BPS), 1)


def _tsv(pairs: dict[str, str]) -> str:
    return "".join(f"{k}\t{v}\n" for k, v in sorted(pairs.items()))


def _hosts_of(ctxs: list[HostContext]) -> dict[str, Host]:
    """Distinct hosts by name, in node order."""
    out: dict[str, Host] = {}
    for c in ctxs:
        out.setdefault(c.host.name, c.host)
    return out


def execute_galera_run(ctxs: list[HostContext], exp: Experiment, run: PlannedRun, dataset: DatasetInfo,
                       store: ResultStore) -> dict[str, Any]:
    """Measure one run of a Galera cell; always returns a committed manifest (ok or failed) unless
    interrupted. `ctxs[i]` is the context of node i+1's host (the same context N times on one host);
    `dataset` was prepared on node 1's host."""
    topo = exp.topology
    if not topo.galera or len(ctxs) != topo.nodes:
        raise SpecError(f"topology: a galera run of {topo.nodes} nodes needs one host context per node, "
                        f"got {len(ctxs)}")
    cell = run.cell
    ctx1 = ctxs[0]
    host1 = ctx1.host
    cache = cache_bytes(cell, dataset.data_physical_bytes)
    placement = exp.cpu_placement
    client_prefix = placement.prefix("client")
    w = exp.workload
    seed = sysbench_seed(exp.seed, run.run_id)
    timeout = sync_timeout_s(dataset)
    staging = store.begin_run(run.run_id)
    state1 = ctx1.media.get(cell.medium)
    manifest = run_manifest(exp, run, ctx1, dataset,
                            {cell.medium: state1.to_dict()} if hasattr(state1, "to_dict") else {})
    manifest.update(log_dir=None, topology={**asdict(topo), "hosts": [c.spec.name for c in ctxs]},
                    cluster={"sync_timeout_s": timeout}, nodes={}, wsrep={})
    clock = StepClock(manifest["steps"], "plan")
    mark = clock.mark

    def save(name: str, text: str) -> None:
        write_text_atomic(staging / name, text)

    t0 = time.monotonic()
    cluster: GaleraCluster | None = None
    nodes: list[NodePlan] = []
    collectors: collect.CollectorSet | None = None
    samplers: list[WsrepSampler] = []

    def stop_monitors() -> None:
        if collectors is not None:
            collectors.stop()
        for s in samplers:
            s.stop()

    try:
        for c in ctxs:
            state = c.media.get(cell.medium)
            if isinstance(state, Exception) or state is None:
                raise RunFailed(f"medium {cell.medium!r} on host {c.host.name} is not usable: {state}")
        hosts = _hosts_of(ctxs)
        run_as_by_host = {name: run_as_user(h) for name, h in hosts.items()}
        for h in hosts.values():
            check_sst_method(h, topo.sst_method)
        listening = {name: parse_listening_ports(h.run("ss -Htln", check=False).stdout)
                     for name, h in hosts.items()}
        base = first_free_base([listening[c.host.name] for c in ctxs], ctx1.port)
        nodes = plan_nodes(topo, [c.spec for c in ctxs], [c.spec.media[cell.medium].path for c in ctxs], base)
        sockets = client_sockets(nodes, cell.write_to)
        name = cluster_name(run.run_id, base)
        run_as = [run_as_by_host[c.host.name] for c in ctxs]
        options = [node_options(cell, nodes, n.index, user=run_as[n.index - 1] or ctxs[n.index - 1].user,
                                cache=cache, constants=exp.server_options, name=name,
                                sst_method=topo.sst_method) for n in nodes]
        prefixes = [[*media.launch_prefix(c.spec.media[cell.medium]), *placement.prefix("server")] for c in ctxs]
        cluster = GaleraCluster([c.host for c in ctxs], nodes, options, run_as, prefixes)
        manifest["cluster"].update(name=name, base_port=base, run_as=run_as)
        manifest["client"] = {"write_to": cell.write_to, "sockets": sockets, "host": host1.name}
        manifest["nodes"] = {n.name: {**n.to_dict(), "command": s.command, "options": o}
                             for n, s, o in zip(nodes, cluster.servers, options)}
        manifest["server"] = {"command": cluster.servers[0].command, "options": options[0]}

        def bench(time_s: int, histogram: bool) -> str:
            argv = sysbench.build_command(
                cell.workload, "run", socket=",".join(sockets), tables=w.tables, table_size=w.table_size,
                threads=cell.threads, time_s=time_s, rand_type=w.rand_type, seed=seed, histogram=histogram)
            return sysbench.command_string([*client_prefix, *argv])

        mark("restore")
        cluster.prepare_dirs()
        restore(host1, dataset, nodes[0].paths.datadir)
        cluster.chown_datadir(1)
        mark("drop_caches")
        manifest["os_cache_dropped"] = all(drop_os_caches(h) for h in hosts.values())
        mark("bootstrap")
        t_cluster = time.monotonic()
        manifest["cluster"]["bootstrap_s"] = round(cluster.bootstrap(timeout), 3)
        manifest["nodes"]["node1"]["pid"] = cluster.servers[0].pid
        mark("join")
        for n in nodes[1:]:
            cluster.join(n.index, timeout)
            s = cluster.servers[n.index - 1]
            log = s.host.run(f"cat {shlex.quote(s.paths.error_log)}", check=False).stdout
            manifest["nodes"][n.name].update(pid=s.pid, join_s=cluster.join_s[n.name],
                                             sst_s=parse_sst_seconds(log))
        manifest["cluster"]["start_s"] = round(time.monotonic() - t_cluster, 3)
        manifest["server"]["pid"] = cluster.servers[0].pid
        mark("variables")
        for n, s in zip(nodes, cluster.servers):
            v = s.global_variables()
            save(f"variables-{n.name}.tsv", _tsv(v))
            problems = [f"{k}={v.get(k)!r} (want {want!r})" for k, want in
                        (("wsrep_on", "ON"), ("wsrep_slave_threads", str(cell.slave_threads)),
                         ("wsrep_cluster_name", name)) if v.get(k) != want]
            if problems:
                raise RunFailed(f"{n.name}: {', '.join(problems)}")
            if n.index == 1:
                manifest["cache_bytes_effective"] = int(v.get("innodb_buffer_pool_size", 0) or 0)
        if exp.warmup_s > 0:
            mark("warmup")
            cmd = bench(exp.warmup_s, False)
            r = host1.run(cmd, check=False, timeout=exp.warmup_s + 300)
            save("warmup.out", r.stdout)
            save("warmup.err", r.stderr)
            manifest["sysbench_warmup"] = {"command": cmd, "exit_code": r.exit_code}
            if not r.ok:
                raise RunFailed(f"warm-up sysbench exited {r.exit_code}: {(r.stderr or r.stdout)[-500:]}")
            dead = cluster.dead_nodes()
            if dead:
                raise RunFailed(f"{', '.join(dead)} died during the warm-up")
        mark("measure")
        devices = sorted({st.device for st in [state1] if getattr(st, "device", None)})
        workdirs = {c.host.name: c.spec.workdir for c in reversed(ctxs)}
        samplers.extend(WsrepSampler(h, [n for n in nodes if n.host == hname], f"{workdirs[hname]}/run/galera")
                        for hname, h in hosts.items())
        for s in samplers:
            s.start()
        collectors = collect.CollectorSet(host1, f"{ctx1.spec.workdir}/run/collect", interval_s=1,
                                          devices=devices, pid=cluster.servers[0].pid)
        collectors.start()
        # The window: FLUSH LOCAL STATUS on every node, a snapshot with each node's clock, sysbench, a snapshot.
        cluster.sql_all("FLUSH LOCAL STATUS")
        before = {n.name: cluster.status(n.index, None) for n in nodes}
        for n in nodes:
            save(f"status-before-{n.name}.tsv", _tsv(before[n.name]))
        counters_before = collect.snapshot_counters(host1, pid=cluster.servers[0].pid, devices=devices)
        cmd = bench(exp.measure_s, True)
        r = host1.run(cmd, check=False, timeout=exp.run_timeout_s or exp.measure_s + 600)
        counters_after = collect.snapshot_counters(host1, pid=cluster.servers[0].pid, devices=devices)
        save("sysbench.out", r.stdout)
        save("sysbench.err", r.stderr)
        manifest["sysbench"] = {"command": cmd, "exit_code": r.exit_code}
        dead = cluster.dead_nodes()
        if dead:
            raise RunFailed(f"{', '.join(dead)} died during the measured window (sysbench exit {r.exit_code})")
        after = {n.name: cluster.status(n.index, None) for n in nodes}
        stop_monitors()
        manifest["system"] = collect.counter_deltas(counters_before, counters_after)
        manifest["collectors"] = {"devices": devices, "errors": collectors.errors}
        for n in nodes:
            save(f"status-after-{n.name}.tsv", _tsv(after[n.name]))
            manifest["wsrep"][n.name] = wsrep_deltas(before[n.name], after[n.name])
        parsed = sysbench.parse_output(r.stdout, r.stderr)
        if not r.ok or not parsed.complete:
            raise RunFailed(f"sysbench exited {r.exit_code}: {'; '.join(parsed.fatal) or r.stderr[-500:]}")
        manifest["summary"] = {k: parsed.summary.get(k) for k in ("tps", "qps", "lat_pct_ms", "ignored_errors")}
        degraded = [f"{k}: cluster_size={d['cluster_size']}, state={d['state']}"
                    for k, d in manifest["wsrep"].items()
                    if d["cluster_size"] != topo.nodes or d["state"] != "Synced"]
        if degraded:
            raise RunFailed(f"the cluster was not intact at the end of the window ({'; '.join(degraded)})")
        mark("stop")
        cluster.stop()
        for n, s in zip(nodes, cluster.servers):
            manifest["nodes"][n.name].update(stop_s=round(s.stop_s or 0, 3), clean_shutdown=s.clean_shutdown)
        manifest["server"].update(stop_s=manifest["nodes"]["node1"]["stop_s"],
                                  clean_shutdown=manifest["nodes"]["node1"]["clean_shutdown"])
        if cluster.stop_errors:
            manifest["stop_error"] = cluster.stop_errors
        mark("done")
        manifest["status"] = "ok"
        manifest["error"] = None
    except (KeyboardInterrupt, RunInterrupted):
        with _shielded():
            stop_monitors()
            if cluster is not None:
                cluster.stop()
            store.discard(staging)
        raise
    except Exception as exc:  # noqa: BLE001 - any failure is recorded with its step; the matrix goes on
        manifest["status"] = "failed"
        manifest["failed_step"] = clock.step
        manifest["error"] = f"{type(exc).__name__}: {exc}"
        save("traceback.txt", traceback.format_exc())
        stop_monitors()
        if cluster is not None:
            manifest["dead_nodes"] = cluster.dead_nodes()
            cluster.stop()
            if cluster.stop_errors:
                manifest["stop_error"] = cluster.stop_errors
    finally:
        if staging.is_dir():
            if collectors is not None:
                for cname, text in collectors.texts.items():
                    save(f"{cname}.txt", text)
            if samplers:
                save("wsrep-samples.txt", "".join(s.text for s in samplers))
                errors = {s.host.name: s.error for s in samplers if s.error}
                manifest["wsrep_samples"] = {"interval_s": samplers[0].interval_s, "errors": errors,
                                             "nodes": summarize_samples(parse_samples(
                                                 "".join(s.text for s in samplers)))}
            if cluster is not None and clock.step != "plan":
                for n, h in zip(nodes, cluster.hosts):
                    _fetch(h, n.paths.error_log, staging / f"mariadbd-{n.name}.err")
    manifest["finished_utc"] = utc_now()
    manifest["duration_s"] = round(time.monotonic() - t0, 3)
    store.commit_run(staging, manifest)
    return manifest


__all__ = ["GALERA_RUN_OVERHEAD_S", "execute_galera_run", "sync_timeout_s"]
