"""The claims of the seeds and the premises they depend on: data only (what each claim compares, in which
band, at which conditions, from which study kinds); estimated by :mod:`.estimators`, judged by :mod:`.verdicts`.
``sources`` names study kinds of the registry (:mod:`dbmatrix.analyse.kinds`), preferred first."""

from __future__ import annotations

import math

from dbmatrix.analyse.claims.model import Claim, Premise, about, no_effect

# ============================================================================ premises

FC_PAUSED = Premise("fc_paused", 20.0, "flow control paused the nodes at least 20 % of the time with one "
                    "applier (the seed: 64 %)")
COMPRESSES = Premise("compresses", 2.0, "the data compresses at least 2x under lz4 (the seed: about 4x)")
SATURATED = Premise("saturated", 0.90, "the host is saturated (CPUs at least 90 % busy) at the lower compared "
                    "thread count")
ENGINE_WRITES = Premise("engine_writes", 0.0, "the engine wrote data in the window (MyRocks flush + compaction "
                        "bytes above 0): lz4 compresses SST files, never the WAL")
HALVES = Premise("halves", 5.0, "the runs' windows are long enough for two halves of at least 5 s each")
DOUBLING_GRID = Premise("doubling_grid", 2.0, "the grid has an instance count n and 2n, thread counts at most "
                        "x2 apart, and the host has a CPU for every instance at 2n")
CACHE_BELOW = Premise("cache_below_data", 1.0, "the cache at the low level is smaller than the working set "
                      "(uniform access: all the data)")


# ============================================================================ the claims
# ``per``: judged at every level of a factor only where the seed says its result holds at each (slide 13: "for
# both lz4 and uncompressed datasets"; seed 001's charts per buffer pool and per thread count); other free
# factors are averaged over where the design identifies that, else the claim is "not identified".

CLAIMS: tuple[Claim, ...] = (
    Claim("blockSmallCache", "003", "slide 13",
          "4\\,KB blocks give up to 10\\,\\% more throughput than 16\\,KB on PMEM without a block cache",
          "tps", (1.0, 1.10), factor="block_size", a="4k", b="16k",
          at={"engine": "myrocks", "cache_pct": "min", "medium": "emulated:pmem-fsdax"}, sources=("tpcc", "storage"),
          stand_in="lowest cache level for a disabled block cache", premises=(CACHE_BELOW,), per=("compression",)),
    Claim("blockLargeCache", "003", "slide 13",
          "with the block cache enabled, 4\\,KB and 16\\,KB blocks differ negligibly",
          "tps", no_effect("tps"), test="within", factor="block_size", a="4k", b="16k",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage"), per=("compression",)),
    Claim("blockSize", "003", "slide 13", "4\\,KB blocks may grow the dataset by up to 10\\,\\%",
          "data_physical_bytes", (1.0, 1.10), factor="block_size", a="4k", b="16k", at={"engine": "myrocks"},
          sources=("tpcc", "storage")),
    Claim("lzFourTps", "003", "slide 14", "lz4 costs almost no throughput (PMEM)",
          "tps", no_effect("tps"), test="within", factor="compression", a="lz4", b="none",
          at={"engine": "myrocks", "medium": "emulated:pmem-fsdax"}, sources=("tpcc", "storage"),
          premises=(COMPRESSES,)),
    Claim("lzFourSize", "003", "slide 14", "the lz4 dataset is 4$\\times$ smaller than the uncompressed one",
          "data_physical_bytes", about(4.0, 1.0), test="about", factor="compression", a="none", b="lz4",
          at={"engine": "myrocks"}, sources=("tpcc", "storage")),
    Claim("lzFourReads", "003", "slide 14", "lz4 cuts the read rate by up to 2.5$\\times$",
          "read_kb_per_txn", (1.0, 2.5), factor="compression", a="none", b="lz4",
          at={"engine": "myrocks", "cache_pct": "min"}, per=("medium",), sources=("tpcc", "storage"),
          premises=(COMPRESSES,),
          stand_in="device KiB read per transaction (media without a block device, tmpfs, have no reads to "
                   "count)"),
    Claim("lzFourWrites", "003", "slide 14", "lz4 cuts the write rate by up to 2.5$\\times$",
          "write_kb_per_txn", (1.0, 2.5), factor="compression", a="none", b="lz4", at={"engine": "myrocks"},
          sources=("tpcc", "storage"), premises=(COMPRESSES, ENGINE_WRITES)),
    Claim("pmemNoCache", "003", "slide 15",
          "without a block cache, PMEM (fsdax) outperforms NVMe by up to 4$\\times$",
          "tps", (1.0, 4.0), factor="medium", a="emulated:pmem-fsdax", b="native",
          at={"engine": "myrocks", "cache_pct": "min"}, sources=("tpcc", "storage"),
          stand_in="tmpfs (RAM) for PMEM in fsdax mode, the root disk for NVMe, the engine's minimum cache "
                   "for no block cache", premises=(CACHE_BELOW,)),
    Claim("pmemCache", "003", "slide 15",
          "with the block cache enabled, PMEM's (fsdax) advantage over NVMe is up to 25\\,\\%",
          "tps", (1.0, 1.25), factor="medium", a="emulated:pmem-fsdax", b="native",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage"),
          stand_in="tmpfs (RAM) for PMEM in fsdax mode, the root disk for NVMe"),
    Claim("sectorNoCache", "003", "slide 15",
          "without a block cache, PMEM in sector mode outperforms NVMe by up to 4$\\times$",
          "tps", (1.0, 4.0), factor="medium", a="emulated:pmem-sector", b="native",
          at={"engine": "myrocks", "cache_pct": "min"}, sources=("tpcc", "storage"),
          stand_in="XFS on a RAM-backed loop device for PMEM in sector mode (a block device with 4 KiB "
                   "sectors), the root disk for NVMe, the engine's minimum cache for no block cache",
          premises=(CACHE_BELOW,)),
    Claim("sectorCache", "003", "slide 15",
          "with the block cache enabled, PMEM's (sector mode) advantage over NVMe is up to 25\\,\\%",
          "tps", (1.0, 1.25), factor="medium", a="emulated:pmem-sector", b="native",
          at={"engine": "myrocks", "cache_pct": "max"}, sources=("tpcc", "storage"),
          stand_in="XFS on a RAM-backed loop device for PMEM in sector mode, the root disk for NVMe"),
    Claim("bufferPool", "001", "section 3",
          "throughput grows with the InnoDB buffer pool share of the data (25 to 100\\,\\%)",
          "tps", (1.0, math.inf), factor="cache_pct", a="max", b="min", at={"engine": "innodb"},
          sources=("threads", "storage"), premises=(CACHE_BELOW,), per=("threads",)),
    Claim("threadsScale", "001", "section 3", "throughput rises with client threads (8 to 128)",
          "tps", (1.0, math.inf), factor="threads", a="max", b="min", sources=("threads",), per=("cache_pct",)),
    Claim("remoteNvme", "001", "section 3.1",
          "NVMe pooled over InfiniBand outperforms local NVMe, less so at high concurrency",
          "tps", (1.0, math.inf),
          not_tested="no network block storage here (no nvme-tcp/rdma, nbd, iSCSI target, NFS server or netem; "
                     "FUSE over SSH would measure itself); inventories/seed001-remote.yaml runs it on real hosts"),
    Claim("applierPause", "002", "flow-control charts",
          "16 applier threads cut flow-control pauses (from 64\\,\\% to 20\\,\\% of the time)",
          "fc_paused_pct_points", (-100.0, 0.0), kind="difference", factor="slave_threads", a="max", b="min",
          sources=("galera",), premises=(FC_PAUSED,)),
    Claim("applierTps", "002", "throughput chart", "16 applier threads give about 11\\,\\% more throughput",
          "tps_ratio", about(1.11, 0.05), test="about", factor="slave_threads", a="max", b="min", sources=("galera",),
          premises=(FC_PAUSED,)),
    Claim("applierLatency", "002", "latency chart",
          "one applier thread has 27\\,\\% higher average latency than 16",
          "lat_avg_ratio", about(1.27, 0.05), test="about", factor="slave_threads", a="min", b="max",
          sources=("galera",), premises=(FC_PAUSED,)),
    Claim("steadyRuns", "000", "per-second charts",
          "after warm-up, per-second throughput is stable over the run", "steady", (0.90, 1.0),
          test="within", kind="share", sources=("storage", "threads", "tpcc")),
    Claim("saturationTps", "000", "single-server scaling",
          "past saturation, more client threads add no throughput", "tps", (0.0, 1.05), test="within",
          factor="threads", a="max", b="second-max", at={"cache_pct": "max"}, sources=("threads",),
          stand_in="the largest cache level (the seed's data lived in memory)", premises=(SATURATED,)),
    Claim("saturationLatency", "000", "p95 latency chart", "past saturation, p95 latency grows with clients",
          "p95_ms", (1.0, math.inf), factor="threads", a="max", b="second-max", at={"cache_pct": "max"},
          sources=("threads",), stand_in="the largest cache level (the seed's data lived in memory)",
          premises=(SATURATED,)),
    # Seed 000 (NDB Cluster in a box), answered by the scale-out study with MariaDB instances standing in for
    # the seed's SQL front-ends (no NDB data nodes: each instance holds its own copy of the data).
    Claim("scaleSaturation", "000", "single-server scaling",
          "one front-end saturates: past its peak, more client threads add no throughput",
          "scale_saturation", (0.0, 1.05), test="within", sources=("scaleout",),
          stand_in="one MariaDB instance for one SQL node; premise: the tested thread counts go past the peak "
                   "(the saturation point is below the largest thread count)"),
    Claim("scaleDoubling", "000", "p95 latency chart",
          "doubling the front-ends doubles the clients that keep p95 under 0.5\\,ms",
          "scale_p95_doubling", about(2.0, 0.2), test="about", sources=("scaleout",), premises=(DOUBLING_GRID,),
          stand_in="MariaDB instances for SQL nodes; premise: at both instance counts some but not all thread "
                   "counts keep the merged p95 under 0.5 ms (the interval comes from the neighbouring levels)"),
    Claim("scaleSixteen", "000", "multi-server scaling",
          "from 8 to 16 front-ends, peak throughput no longer doubles",
          "scale_peak_16_8", (0.0, 1.8), test="within", sources=("scaleout",),
          stand_in="MariaDB instances for SQL nodes; premise: 8 and 16 instances measured on a host with CPUs "
                   "for them (a 2-vCPU host stops at 2)"),
    Claim("scaleStable", "000", "per-second charts",
          "at the best setting, per-second throughput stays flat over the run",
          "scale_stability", no_effect("scale_stability"), test="within", sources=("scaleout",), premises=(HALVES,),
          stand_in="second-half over first-half per-second QPS of the best cell's runs; premise: the runs are "
                   "long enough for two halves of several seconds"),
    Claim("overProvisioning", "004", "tablespace file systems",
          "leaving 40\\,\\% of each NVMe unpartitioned keeps write throughput; a full drive halves it",
          "tps", (1.0, math.inf),
          not_tested="no NVMe here: loop devices have no flash translation layer to over-provision"),
    Claim("raidChunk", "004", "log file system",
          "RAID0 of two NVMe with 256\\,KB chunks carries 2--3\\,GB/s of sequential log writes",
          "tps", (1.0, math.inf),
          not_tested="no NVMe, and this kernel has no MD RAID (mdadm cannot create an array)"),
)


