"""The nbd medium against the local medium and its FUSE control, measured with fio (issue 40, acceptance).

Builds three media under a fresh work directory (root; one benchmark at a time on a machine):

- ``loop``: XFS on a loop device (direct I/O) over a file on the root disk: the local drive, without FUSE;
- ``nbdlocal``: nbdkit on a unix socket, nbdfuse, a loop device (direct I/O), XFS: the FUSE control;
- ``remote``: the same over TCP from nbdkit in its own network namespace, the veth pair shaped to 10 Gbit/s.

then runs fio (16 KiB random reads, then random writes with O_DIRECT, psync) with 1, 4 and 16 jobs on each,
and prints IOPS, mean and p99 completion latency, and the remote/control and control/loop ratios by jobs:
what the network path costs (remote against the control) and what FUSE costs (the control against the
local loop device). Every medium is torn down at the end.

    nice -n 0 .venv/bin/python benchmarks/bench_nbd.py                 # 10 s per point, about 3 minutes
    .venv/bin/python benchmarks/bench_nbd.py --seconds 5 --jobs 1 8
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from typing import Any

from dbmatrix.hosts import media
from dbmatrix.hosts.inventory import parse_medium
from dbmatrix.hosts.remote import LocalHost

MEDIA = {
    "loop": {"kind": "loop", "size": "1G"},
    "nbdlocal": {"kind": "nbd", "size": "1G", "transport": "unix"},
    "remote": {"kind": "nbd", "size": "1G", "transport": "tcp", "rate": "10gbit"},
}


def fio(path: str, rw: str, jobs: int, seconds: int) -> dict[str, float]:
    """IOPS, mean and p99 completion latency (µs) of one fio point on the file system at `path`."""
    cmd = ["fio", "--name=p", f"--directory={path}", "--size=32M", f"--rw={rw}", "--bs=16k", "--direct=1",
           "--ioengine=psync", f"--numjobs={jobs}", "--group_reporting", "--time_based", f"--runtime={seconds}",
           "--ramp_time=1", "--output-format=json"]
    out = json.loads(LocalHost().run(shlex.join(cmd)).stdout)
    side = out["jobs"][0]["read" if "read" in rw else "write"]
    clat = side["clat_ns"]
    return {"iops": side["iops"], "mean_us": clat["mean"] / 1e3,
            "p99_us": clat.get("percentile", {}).get("99.000000", float("nan")) / 1e3}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 4, 16])
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (loop devices, namespaces, FUSE)", file=sys.stderr)
        return 2
    host = LocalHost()
    workdir = tempfile.mkdtemp(prefix="bench-nbd-", dir="/var/tmp")
    built = [parse_medium(raw, host="localhost", name=f"b{name}", workdir=workdir) for name, raw in MEDIA.items()]
    results: dict[tuple[str, str, int], dict[str, Any]] = {}
    try:
        for m in built:
            media.ensure(host, m)
        for rw in ("randread", "randwrite"):
            for jobs in args.jobs:
                for m in built:  # interleaved: a drift of the machine touches every medium alike
                    results[(m.name[1:], rw, jobs)] = fio(m.path, rw, jobs, args.seconds)
    finally:
        for m in built:
            media.teardown(host, m)
        host.run(f"rm -rf {shlex.quote(workdir)}", check=False)
    print(f"fio 16 KiB O_DIRECT psync, {args.seconds} s per point (1 s ramp), files on the root disk")
    print(f"{'rw':<10} {'jobs':>4} {'medium':<9} {'IOPS':>8} {'mean µs':>8} {'p99 µs':>8}")
    for (name, rw, jobs), r in results.items():
        print(f"{rw:<10} {jobs:>4} {name:<9} {r['iops']:>8.0f} {r['mean_us']:>8.1f} {r['p99_us']:>8.1f}")
    print("\nratios of IOPS by jobs: remote / nbdlocal (the network path), nbdlocal / loop (FUSE)")
    for rw in ("randread", "randwrite"):
        for jobs in args.jobs:
            r, c, lo = (results[(n, rw, jobs)]["iops"] for n in ("remote", "nbdlocal", "loop"))
            print(f"{rw:<10} {jobs:>4}  remote/nbdlocal {r / c:5.2f}   nbdlocal/loop {c / lo:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
