"""How noisy the platform probe (dbmatrix.run.platform_probe) is on this machine, with nothing changing.

Runs the probe `--n` times back to back on this host (real sysbench cpu and dd with O_DSYNC, in `--dir`, which
should be on the medium a study uses) and prints, per figure, its values and the SD of their logarithm: the
noise one probe carries. The ratio of two probes carries about sqrt(2) times that; the sentinel reading's
thresholds (:data:`dbmatrix.analyse.sentinel_mechanism.PROBE_SD`) come from it. Needs the machine to itself
(one benchmark at a time): the probe measures the platform, and anything else running is part of what it sees.

    PYTHONPATH=lib .venv/bin/python benchmarks/bench_platform_probe.py [--n 10] [--dir /var/tmp]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics

from dbmatrix.hosts.remote import LocalHost
from dbmatrix.run.probes import run_probe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10, help="probes back to back (default 10)")
    ap.add_argument("--dir", default="/var/tmp", help="where the synchronous writes go (default /var/tmp)")
    args = ap.parse_args()
    if args.n < 2:
        ap.error("--n must be at least 2")
    cpus = os.cpu_count() or 1
    recs = [run_probe(LocalHost(), args.dir, "local", cpus) for _ in range(args.n)]
    failed = [r["error"] for r in recs if r["error"]]
    if failed:
        print(f"{len(failed)} of {args.n} probes failed: {failed[0]}")
        return 1
    print(f"{args.n} probes back to back in {args.dir} ({cpus} CPUs):")
    for key, what in (("cpu_eps_1", "CPU events/s, 1 thread"), ("cpu_eps_all", f"CPU events/s, {cpus} threads"),
                      ("sync_write_ms", "ms per synchronous 4 KiB write")):
        v = [float(r[key]) for r in recs]
        sd = statistics.stdev(math.log(x) for x in v)
        print(f"  {what:34s} median {statistics.median(v):10.4g}  SD of ln {100 * sd:5.1f} %  "
              f"(a ratio of two: {100 * sd * math.sqrt(2):5.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
