"""The claims of the seeds and the premises they depend on: data only (what each claim compares, in which
band, at which conditions, from which study kinds); estimated by :mod:`.estimators`, judged by :mod:`.verdicts`.
``sources`` names study kinds of the registry (:mod:`dbmatrix.analyse.kinds`), preferred first.

:data:`CLAIMS` is the seeds' list: one row per claim a seed makes, with its location, its own words
(``quote``), its band as stated and its conditions as the seed had them (``conditions``). :data:`FURTHER`
holds our own findings (comparisons the seeds' charts suggest but no seed concludes), judged by the same rule
and published in their own table. :data:`HISTORY` says what was merged, moved, added and renamed when the
registry was rebuilt from the seed texts (issue 26); ``docs/registry.md`` is generated from all three
(:mod:`dbmatrix.analyse.claims.registry_doc`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from dbmatrix.analyse.claims.model import Claim, Premise, SeedConditions, about, no_effect

# ============================================================================ premises

FC_PAUSED = Premise("fc_paused", 20.0, "flow control paused the nodes at least 20 % of the time with one "
                    "applier (the seed: 64 %)")
COMPRESSES = Premise("compresses", 2.0, "the data compresses at least 2x under lz4 (the seed: about 4x)")
SATURATED = Premise("saturated", 0.90, "the host is saturated (CPUs at least 90 % busy) at the lower compared "
                    "thread count")
ENGINE_WRITES = Premise("engine_writes", 0.0, "the engine wrote data in the window (MyRocks flush + compaction "
                        "bytes above 0): lz4 compresses SST files, never the WAL")
HALVES = Premise("halves", 5.0, "the runs' windows are long enough for two halves of at least 5 s each")
# The crossing ratio's fits need levels near each crossing: steps of at most x1.5 (registered 2026-11-30 with
# the crossing estimator, before the scale-out grid study's first campaign, in place of x2; x2 steps put two
# levels or fewer within x3 of the threshold on the p95 curves measured here)
CROSSING_GRID = Premise("doubling_grid", 1.5, "the grid has an instance count n and 2n, thread counts at most "
                        "x1.5 apart, and the host has a CPU for every instance at 2n")
BINLOG_SYNCED = Premise("binlog_synced", 1.0, "the binary log was on and synced at every commit (log_bin ON, "
                        "sync_binlog = 1), as the seed ran")
CACHE_BELOW = Premise("cache_below_data", 1.0, "the cache at the low level is smaller than the working set "
                      "(uniform access: all the data)")

# ============================================================================ the seeds' conditions
# As each seed states them (verified against ../shared/seeds/00*.txt); `threads_here` scales the seed's
# client threads to this repository's 2-vCPU machine by the rule given; `reproduction` is our note.

# The cache level that stands for seed 003's "block cache enabled" (30 GB against about 350 GB of
# uncompressed data, 8.5 %; 31-33 % of the lz4 data on disk): a percentage of the logical (uncompressed)
# data, as every cache level here (DESIGN: cache % of the measured logical size). The paper profile's TPC-C
# study measures it; a study without it leaves the claim "not tested" there, saying so.
SEED003_CACHE_PCT = 8.5
SEED003_NO_CACHE = 0  # "block cache disabled": the engine's minimum (1 KiB), cache_pct 0 in the specs

SEED003 = SeedConditions(
    workload="sysbench-TPCC (tpcc.lua), 5000 warehouses (scale 500 x 10 tables), read committed, 900 s",
    engine="MyRocks (Percona Server 5.7.22 with RocksDB), direct I/O: the file-system page cache disabled",
    access="pareto",
    cache=("block cache disabled (0 GB) or enabled (30 GB) against datasets of 90-98 GB (lz4) and 351-353 GB "
           "(uncompressed) on disk: enabled is 8.5 % of the uncompressed (logical) data, 31-33 % of the lz4 data "
           "on disk; slides 13-14 do not say which state a result holds for"),
    cache_pct=(0.0, 33.0),
    durability="no binlog ('# direct, no_binlog' on slides 13-15); the WAL sync setting is not said",
    threads=(48, 48), threads_here=(2, 2),
    thread_scaling=("one connection per logical CPU kept: 48 connections on one socket of 24 cores / 48 "
                    "threads (numactl --cpubind=1) -> 2 on this machine's 2 vCPUs"),
    hardware="2 x Xeon Platinum 8260L (one socket used), 192 GB DRAM, 1.5 TB Optane DC PMEM, 2 x P4510 NVMe",
    bottleneck=("not said; without a block cache every read reaches the medium, so its latency dominates "
                "(slide 16: PMEM 'removed NVMe %iowait overhead')"),
    reproduction=("tpcc study: the repository's TPC-C Lua with compressible strings (lz4 about 4x as in the "
                  "seed), MyRocks with direct reads, tmpfs for PMEM in fsdax mode, XFS on a RAM-backed loop "
                  "device for PMEM in sector mode, the root disk for NVMe (emulated media: RAM, upper bounds); "
                  f"the paper profile: --rand-type=pareto, block cache {SEED003_NO_CACHE} (the engine's minimum) "
                  f"and {SEED003_CACHE_PCT} % of the logical data, log_bin OFF, a full 2^3 x 3 media design"),
)
SEED003_NOCACHE = replace(SEED003, cache="block cache disabled (0 GB)", cache_pct=(0.0, 0.0))
SEED003_CACHED = replace(SEED003, cache="block cache enabled: 30 GB against 90-353 GB on disk (8.5 % of the "
                         "uncompressed data, 31-33 % of the lz4 data on disk)", cache_pct=(8.5, 33.0))

SEED001 = SeedConditions(
    workload="sysbench oltp_read_write, 64 tables x 12.5 M rows (about 186 GB), 900 s per run",
    engine="InnoDB (GreatSQL 5.7 and 8.0)",
    access="uniform",
    cache="buffer pool 47, 93, 140 and 186 GB: about 25, 50, 75 and 100 % of the 186 GB of data",
    cache_pct=(25.0, 100.0),
    durability=("binlog on and synced (sync_binlog = 1), innodb_flush_log_at_trx_commit = 1, doublewrite, "
                "O_DIRECT, innodb_thread_concurrency = 0"),
    threads=(8, 128), threads_here=(1, 2),
    thread_scaling=("threads per logical CPU kept: 8-128 on 128 logical CPUs is 1/16 to 1 per CPU -> 1-2 on "
                    "2 vCPUs (1/16 rounds up to 1); keeping the seed's x16 span instead needs 1-16 threads "
                    "(8 per vCPU at the top)"),
    hardware=("2 x AMD EPYC 7542 (64 cores, 128 threads), 512 GB, local PCIe 4.0 NVMe or NVMe-oF over 100 Gb/s "
              "InfiniBand (HDR100)"),
    bottleneck=("not said; with the buffer pool under the data, reads reach the drive (its conclusion 6: "
                "faster local I/O rather than more memory)"),
    reproduction=("threads study: InnoDB oltp_read_write, uniform, buffer pool 25 and 100 %; the paper profile's "
                  "threads 2, 8 and 32 on the root disk with the binlog on and synced (sync_binlog = 1), and its "
                  "group-commit study the same design with MariaDB's default group commit against a 1 ms "
                  "leader wait; its remote-storage study the same design on a network block device (nbdkit over "
                  "TCP from another network namespace) against its unix-socket control; the quick profile's "
                  "threads 1, 4, 16 with log_bin OFF; GreatSQL 5.7/8.0 and NVMe over InfiniBand do not exist "
                  "here"),
)

SEED002 = SeedConditions(
    workload="sysbench oltp_write_only, 28 tables x 10 M rows (about 90 GB), prepared with 16 threads",
    engine="InnoDB in a 3-node Galera cluster (server version not said)",
    access="not said (sysbench's default: special)",
    cache="buffer pool 8 GB against about 90 GB of data (about 9 %)",
    cache_pct=(9.0, 9.0),
    durability="binary logs on (the servers ran out of disk space for them); redo logs 2 x 1 GB; flush not said",
    threads=(16, 16), threads_here=(4, 4),
    thread_scaling=("the run's threads are not said (the prepare used 16): 16 clients on the writer's 4 vCPUs "
                    "is 4 per vCPU -> 4 on this machine, where 3 nodes and the client share 2 vCPUs"),
    hardware="3 x m5d.xlarge (4 vCPUs, 16 GB, a local NVMe SSD each)",
    bottleneck=("applying write-sets on the followers: flow control paused the nodes 64 % of the time with one "
                "applier; storage kept out of the way on purpose (local NVMe, io_capacity 2000/10000), though "
                "the seed blames its noise mainly on 'unstable I/O storage performance and flow control', and "
                "its small nodes were 'not powerful enough' to gain from more appliers (CPU, not said in "
                "those words)"),
    reproduction=("galera study: 3 nodes on one 2-vCPU machine; the quick profile throttles the followers' "
                  "write IOPS (a storage limit the seed avoided: every 1-applier run sits at the cap's "
                  "throughput); the paper profile has the seed's own condition instead: the buffer pool at 9 % of "
                  "the data, so one applier is limited by the page reads of applying write-sets, and no "
                  "throttle (a CPU quota on the followers paused the cluster at most 2.6 % in that study's first "
                  "setup, 34-39 % in a smaller one: an artificial limit whose effect depends on the setup)"),
)

SEED000 = SeedConditions(
    workload="sysbench 1.1.0 oltp_point_select, 8 tables x 10 M rows (about 60 GB in memory), 300 s after a "
             "120 s warm-up",
    engine="MySQL NDB Cluster 8.0.26: 2 data nodes, 1-16 MySQL servers as SQL front-ends",
    access="uniform",
    cache="all data in memory (NDB DataMemory 128 GB per data node)",
    cache_pct=(100.0, 100.0),
    durability="NDB disk checkpoints on (the default); binlog not said",
    threads=(1, 2048), threads_here=(1, 16),
    thread_scaling=("the single server's peak kept in clients per CPU: it peaked at 32 clients using 14 "
                    "logical CPUs (about 2.3 per CPU) -> about 4-5 on 2 vCPUs; 1-16 here spans the single "
                    "server's sweep past its peak"),
    hardware="Dell R7525, 2 x AMD EPYC 7742 (256 threads), 2 TB RAM, 4 x NVMe; client on the same machine",
    bottleneck="mysqld CPU with one front-end (NDB mostly idle); NDB's tc threads at 16 front-ends",
    reproduction=("scale-out study: MariaDB instances (InnoDB, data in the buffer pool) stand in for the SQL "
                  "front-ends; no NDB here (not packaged); 1-2 instances on 2 vCPUs, 8 and 16 need a larger "
                  "host (inventories)"),
)

# Seed 000's run-length statements (its setup section), judged on a soak study (dbmatrix.analyse.soak): the
# scale-out study's headline cell, one run of over an hour per campaign, in a sitting of its own.
SEED000_SOAK = replace(SEED000, workload="sysbench 1.1.0 oltp_point_select, 8 tables x 10 M rows, 120 s warm-up, "
                       "then 300 s (its runs) or over an hour (its check)", threads=(1024, 1024),
                       threads_here=(16, 16),
                       thread_scaling="the seed's long run was its headline setting (16 front-ends, 1024 clients): "
                                      "here the scale-out study's largest (2 instances, 16 clients)",
                       reproduction="soak study (specs/paper-soak.yaml): 2 MariaDB instances, 16 clients, "
                                    "oltp_point_select on data in memory, 120 s warm-up and 3600 s measured with "
                                    "1-s reports, one run per campaign in a sitting of its own")
SOAK_MARGIN = 0.05  # the throughput margin (MARGINS["tps"]), declared on the claims: their metrics are new
SOAK_STAND_IN = ("MariaDB instances for the SQL front-ends (the scale-out study's setting of 2 instances and 16 "
                 "clients); the seed's long run against its 5-minute runs is read within each long run, whose "
                 "beginning is what a short run measures, so the campaign's level cancels; interval from 30-s "
                 "batch means within a run, and between the runs of several campaigns once they exceed it")

SEED004 = SeedConditions(
    workload="YCSB 0.15.0 (modified) against NDB disk-data tables, about 20 TB of user data, inserts and updates",
    engine="MySQL NDB Cluster 8.0.20 (disk data)",
    access="not said",
    cache="not said (768 GB of memory, a 4 GB UNDO buffer)",
    cache_pct=None,
    durability="REDO and UNDO logs and checkpoints on a RAID0 of two NVMe",
    threads=(0, 0), threads_here=(0, 0),
    thread_scaling="not applicable: the seed states no client threads",
    hardware="Oracle Cloud BM.DenseIO2.52: 2 x Xeon Platinum 8167 (104 CPUs), 768 GB, 8 x 6.4 TB NVMe",
    bottleneck="the NVMe drives' free space for new writes (a full drive halved throughput); network bandwidth",
    reproduction="cannot: no NVMe here (no flash translation layer) and no MD RAID on this kernel",
)

# The RAM stand-ins for PMEM are faster than real PMEM: a ratio with the stand-in on the faster side is an upper
# bound of the real one (Claim.bound, one-sided verdicts). Judged per medium with XFS on a RAM-backed loop device
# (ramblock) as the primary stand-in: it goes through the block layer, like PMEM in sector mode; tmpfs (fsdax,
# no block layer) is the sensitivity check.
PMEM_PRIMARY = "ramblock"
_UPPER = ("RAM is faster than real PMEM, so the ratio measured here is an upper bound of the real one: an "
          "interval below the claim disagrees, one above it cannot contradict it; ramblock (the block layer, like "
          "sector mode) is primary, tmpfs the sensitivity check")

NO_VERSIONS = ("only MariaDB 10.11 builds are here: GreatSQL (MySQL) 5.7 and 8.0 are not available, so the version "
               "comparison cannot be made; on a lab's hosts it is the server\\_build factor with both builds in the "
               "inventory (dialect mysql, their basedirs) and specs/paper-threads.yaml's design across them "
               "(docs/hosts.md); the factor itself is checked here by its A/A study (buildsEquivalent)")
# The server_build factor's A/A check (specs/paper-builds.yaml): the inventory's previous point release of the
# installed server (dbmatrix.hosts.inventory.LOCAL_BUILDS).
PREVIOUS_BUILD = "mariadb10_11_18"
REMOTE_STAND_IN = ("a network block device stands in for NVMe-oF over InfiniBand: nbdkit serving a file from its own "
                   "network namespace over TCP through a veth pair shaped to 10 Gbit/s (the seed: 100 Gb/s HDR100), "
                   "nbdfuse and a loop device with XFS on the database side; the local side is its control, the "
                   "same nbdkit, nbdfuse and loop device over a unix socket, so the contrast isolates the network "
                   "path (TCP stack, namespace crossing, shaping), not FUSE; not shown: RDMA, NVMe-oF offload")
NO_NDB = "NDB Cluster is not packaged for this machine; MariaDB instances stand in for SQL front-ends only"

# ============================================================================ the claims
# ``per``: judged at every level of a factor only where the seed says its result holds at each (slide 13: "for
# both lz4 and uncompressed datasets"; slide 15's "persistent memory": each PMEM mode against NVMe); other free
# factors are averaged over where the design identifies that, else the claim is "not identified".

_T = ("tpcc",)  # seed 003's results are TPC-C (slides 13-15: "sysbench-TPCC/5000 warehouses")
_MYROCKS_FSDAX = {"engine": "myrocks", "medium": "emulated:pmem-fsdax"}

CLAIMS: tuple[Claim, ...] = (
    # ---------------------------------------------------------------- seed 003 (Intel, MyRocks on PMEM/NVMe)
    Claim("blockSmallCache", "003", "slide 13",
          "4\\,KB blocks give up to 10\\,\\% more throughput than 16\\,KB on PMEM without a block cache",
          "tps", (1.0, 1.10), factor="block_size", a="4k", b="16k",
          at={**_MYROCKS_FSDAX, "cache_pct": SEED003_NO_CACHE}, sources=_T,
          stand_in="the engine's minimum cache (1 KiB) for a disabled block cache; tmpfs for PMEM (fsdax)",
          premises=(CACHE_BELOW,), per=("compression",), combine="all",
          quote="providing up to 10% improvement in throughput and latency for both lz4 and uncompressed datasets",
          conditions=SEED003_NOCACHE),
    Claim("blockSmallCacheLatency", "003", "slide 13",
          "4\\,KB blocks give up to 10\\,\\% lower latency than 16\\,KB on PMEM without a block cache",
          "p99_ms", (0.90, 1.0), factor="block_size", a="4k", b="16k",
          at={**_MYROCKS_FSDAX, "cache_pct": SEED003_NO_CACHE}, sources=_T,
          stand_in="p99 latency from the histograms (the seed reported the 99th percentile); closed loop; the engine's "
                   "minimum cache for a disabled block cache; tmpfs for PMEM (fsdax)",
          premises=(CACHE_BELOW,), per=("compression",), combine="all",
          quote="providing up to 10% improvement in throughput and latency for both lz4 and uncompressed datasets",
          conditions=SEED003_NOCACHE),
    Claim("blockLargeCache", "003", "slide 13",
          "with the block cache enabled, 4\\,KB and 16\\,KB blocks differ negligibly",
          "tps", no_effect("tps"), test="within", factor="block_size", a="4k", b="16k",
          at={"engine": "myrocks", "cache_pct": SEED003_CACHE_PCT}, sources=_T, per=("compression",), combine="all",
          stand_in=f"block cache {SEED003_CACHE_PCT} % of the logical data for the seed's 30 GB",
          quote="When the block cache is enabled, RocksDB will amortize reads, providing a negligible difference "
                "between 16KB and 4KB",
          conditions=SEED003_CACHED),
    Claim("blockSize", "003", "slide 13", "4\\,KB blocks may grow the dataset by up to 10\\,\\%",
          "data_physical_bytes", (1.0, 1.10), factor="block_size", a="4k", b="16k", at={"engine": "myrocks"},
          sources=_T, combine="largest",
          stand_in="'up to 10 %' read as the seed reads it: the largest of the dataset pairs (the seed's own pairs: "
                   "98/90 = 1.089 and 353/351 = 1.006)",
          quote="Reducing block size may increase dataset size up to 10%", conditions=SEED003),
    Claim("lzFourTps", "003", "slide 14", "lz4 costs almost no throughput (PMEM)",
          "tps", no_effect("tps"), test="within", factor="compression", a="lz4", b="none",
          at=_MYROCKS_FSDAX, sources=_T, premises=(COMPRESSES,), per=("block_size",), combine="all",
          quote="Results obtained for persistent memory for both lz4 and uncompressed datasets show almost no "
                "differences",
          conditions=SEED003),
    Claim("lzFourSize", "003", "slide 14", "the lz4 dataset is 4$\\times$ smaller than the uncompressed one",
          "data_physical_bytes", about(4.0, 1.0), test="about", factor="compression", a="none", b="lz4",
          at={"engine": "myrocks"}, sources=_T, combine="all", quote="lz4 dataset 4x smaller than uncompressed",
          conditions=SEED003),
    Claim("lzFourReads", "003", "slide 14", "lz4 cuts the read rate by up to 2.5$\\times$",
          "read_kb_per_txn", (1.0, 2.5), factor="compression", a="none", b="lz4",
          at={"engine": "myrocks", "cache_pct": SEED003_NO_CACHE}, per=("medium",), sources=_T,
          premises=(COMPRESSES,), combine="largest",
          stand_in="device KiB read per transaction (media without a block device, tmpfs, have no reads to "
                   "count); 'up to 2.5x' judged on the largest reduction over the media",
          quote="lz4 reduces reads rate up to 2.5x, writes rate up to 2.5x", conditions=SEED003_NOCACHE),
    Claim("lzFourWrites", "003", "slide 14", "lz4 cuts the write rate by up to 2.5$\\times$",
          "write_kb_per_txn", (1.0, 2.5), factor="compression", a="none", b="lz4", at={"engine": "myrocks"},
          sources=_T, premises=(COMPRESSES, ENGINE_WRITES),
          quote="lz4 reduces reads rate up to 2.5x, writes rate up to 2.5x", conditions=SEED003),
    Claim("lzFourCpu", "003", "slide 14", "lz4 costs at most 2--3\\,\\% more CPU",
          "mysqld_cpu_us_per_txn", (0.0, 1.03), test="within", factor="compression", a="lz4", b="none",
          at={"engine": "myrocks"}, sources=_T, premises=(COMPRESSES,),
          stand_in="mysqld CPU time (user + system, /proc) per transaction: the seed does not say how it "
                   "measured CPU",
          quote="CPU overhead of lz4 compression only 2-3%", conditions=SEED003),
    Claim("pmemNoCache", "003", "slide 15",
          "without a block cache, PMEM outperforms NVMe by up to 4$\\times$",
          "tps", (1.0, 4.0), factor="medium", a="emulated:pmem", b="native",
          at={"engine": "myrocks", "cache_pct": SEED003_NO_CACHE}, per=("medium",), sources=_T,
          bound="upper", combine="primary", primary=PMEM_PRIMARY,
          stand_in="tmpfs (RAM) for PMEM in fsdax mode and XFS on a RAM-backed loop device for sector mode, "
                   "each judged; the root disk for NVMe; the engine's minimum cache for no block cache; " + _UPPER,
          premises=(CACHE_BELOW,), quote="outperforms NVMe up to 4x", conditions=SEED003_NOCACHE),
    Claim("pmemNoCacheSlight", "003", "slide 15",
          "without a block cache, PMEM is only slightly slower than with one",
          "tps", (0.85, 1.0), test="within", factor="cache_pct", a=SEED003_NO_CACHE, b=SEED003_CACHE_PCT,
          at={"engine": "myrocks", "medium": "emulated:pmem"}, per=("medium",), sources=_T,
          bound="upper", combine="primary", primary=PMEM_PRIMARY,
          stand_in=f"block cache at the engine's minimum against {SEED003_CACHE_PCT} % of the logical data; "
                   "'slight' declared as a drop of at most 15 %; each emulated PMEM mode judged. An upper bound: "
                   "without the cache every miss is a read from the medium, so the ratio no cache / cache falls "
                   "as the medium slows; on RAM, faster than PMEM, it is at least the real one. A drop beyond "
                   "15 % here is a larger drop on real PMEM (a disagree stands); a ratio above 1 here cannot "
                   "contradict the claim; an agree says only that the real ratio is at most the interval's "
                   "upper end; ramblock primary, tmpfs the sensitivity check",
          quote="persistent memory shows a slight drop in performance versus", conditions=SEED003),
    Claim("pmemCache", "003", "slide 15",
          "with the block cache enabled, PMEM's advantage over NVMe is up to 25\\,\\%",
          "tps", (1.0, 1.25), factor="medium", a="emulated:pmem", b="native",
          at={"engine": "myrocks", "cache_pct": SEED003_CACHE_PCT}, per=("medium",), sources=_T,
          bound="upper", combine="primary", primary=PMEM_PRIMARY,
          stand_in=f"each emulated PMEM mode against the root disk; block cache {SEED003_CACHE_PCT} % of the "
                   "logical data for the seed's 30 GB; " + _UPPER,
          quote="block cache enabled: the advantage of persistent memory over NVMe is up to 25%",
          conditions=SEED003_CACHED),
    Claim("pmemTps", "003", "slide 16", "PMEM gives up to 3$\\times$ the transactions per second of NVMe",
          "tps", (1.0, 3.0), factor="medium", a="emulated:pmem", b="native",
          at={"engine": "myrocks", "cache_pct": SEED003_NO_CACHE}, per=("medium",), sources=_T,
          bound="upper", combine="primary", primary=PMEM_PRIMARY,
          stand_in="judged where slide 15 puts PMEM's largest advantage (no block cache); each emulated PMEM "
                   "mode against the root disk; " + _UPPER,
          premises=(CACHE_BELOW,), quote="Up to 3x Transactions/Queries per second Vs NVMe",
          conditions=SEED003_NOCACHE),
    Claim("pmemLatency", "003", "slide 16", "NVMe's query latency is up to 5.7$\\times$ PMEM's",
          "p99_ms", (1.0, 5.7), factor="medium", a="native", b="emulated:pmem",
          at={"engine": "myrocks", "cache_pct": SEED003_NO_CACHE}, per=("medium",), sources=_T,
          bound="upper", combine="primary", primary=PMEM_PRIMARY,
          stand_in="p99 latency (the seed reported the 99th percentile), closed loop, where slide 15 puts PMEM's "
                   "largest advantage (no block cache); each emulated PMEM mode against the root disk; NVMe's "
                   "latency over the stand-in's, whose lower latency in the denominator makes the ratio at least "
                   "the real one; " + _UPPER,
          premises=(CACHE_BELOW,), quote="Up to 5.7x Query Latency using Persistent Memory Vs NVMe",
          conditions=SEED003_NOCACHE),
    Claim("pmemCpu", "003", "slide 16", "PMEM as storage gives up to 59\\,\\% better CPU utilisation",
          "host_cpu_us_per_txn", (1.0, 1.59),
          not_tested="the slide does not say what 'better CPU utilization' measures (more CPU busy with "
                     "less iowait, or less CPU per query), so no estimate can agree or disagree with it",
          quote="Persistent Memory as Storage saw up to 59% better CPU Utilization", conditions=SEED003),
    Claim("pmemIowait", "003", "slide 16", "PMEM removes NVMe's \\%iowait overhead",
          "host_iowait_pct", (-100.0, 0.0), kind="difference", factor="medium", a="emulated:pmem", b="native",
          at={"engine": "myrocks", "cache_pct": SEED003_NO_CACHE}, per=("medium",), sources=_T,
          combine="primary", primary=PMEM_PRIMARY,
          stand_in="the host's iowait as a share of its CPU time (/proc/stat over the window), each emulated PMEM "
                   "mode minus the root disk, in points, where slide 15 puts PMEM's largest advantage (no block "
                   "cache); 'removes' judged as 'lowers' (an interval below 0 points), the PMEM side's own share "
                   "in the basis; ramblock (the block layer, like sector mode) primary, tmpfs the sensitivity "
                   "check. Not an upper bound: iowait is time a CPU waits on a block device, which tmpfs has "
                   "none of and a RAM-backed loop device little",
          premises=(CACHE_BELOW,), quote="Removed NVMe %iowait overhead",
          conditions=SEED003_NOCACHE),
    # ---------------------------------------------------------------- seed 001 (GreatSQL, local vs remote NVMe)
    Claim("versionLowPool", "001", "section 3.1, conclusion 1.1",
          "with the buffer pool under the data, GreatSQL 8.0 far outperforms 5.7", "tps", (1.0, math.inf),
          not_tested=NO_VERSIONS, quote="GreatSQL 8.x性能遠高於GreatSQL 5.7", conditions=SEED001),
    Claim("remoteGap", "001", "section 3.1, conclusion 1.2",
          "the more client threads, the smaller the gap between InfiniBand-pooled and local NVMe",
          "tps", (1.0, math.inf), factor="medium", a="remote", b="nbdlocal",
          at={"engine": "innodb", "cache_pct": "min"}, trend=("threads", "max", "min"), sources=("media",),
          premises=(BINLOG_SYNCED,),
          stand_in=REMOTE_STAND_IN + "; the network can only slow the remote medium against its control, so the "
                   "gap narrows when the ratio remote/local rises toward 1: the estimate is that ratio at the most "
                   "client threads over the ratio at the fewest, with the buffer pool under the data (the seed's "
                   "condition, 25 %)",
          quote="併發線程數越高,IB+NVMe SSD vs 本地NVMe SSD 的差距越小", conditions=SEED001),
    Claim("versionConverge", "001", "section 3.1, conclusion 1.3",
          "the larger the buffer pool, the closer GreatSQL 5.7 and 8.0 perform", "tps", (1.0, math.inf),
          not_tested=NO_VERSIONS, quote="ibp越大,GreatSQL 5.7和8.0性能越接近", conditions=SEED001),
    Claim("versionFullPool", "001", "section 3.1, conclusion 2.1",
          "with the buffer pool covering the data, GreatSQL 5.7 is slightly faster than 8.0", "tps",
          (1.0, math.inf), not_tested=NO_VERSIONS, quote="GreatSQL 5.7的性能整體比GreatSQL 8.0略好",
          conditions=SEED001),
    Claim("remoteNvme", "001", "section 3.1, conclusion 3",
          "NVMe pooled over InfiniBand performs better and more stably than local NVMe",
          "tps", (1.0, math.inf), factor="medium", a="remote", b="nbdlocal", at={"engine": "innodb"},
          sources=("media",), premises=(BINLOG_SYNCED,),
          stand_in=REMOTE_STAND_IN + "; both media serve the same kind of file through the same server, so the "
                   "contrast is the network path alone: the pool's own drives, which may be where the seed's "
                   "advantage came from, are not modelled, and a disagreement says only that the network path "
                   "does not make storage faster; throughput averaged over buffer pool and threads (the seed's "
                   "'overall'); 'more stably' is not judged",
          quote="IB NVMe SSD 相比 本地NVMe SSD的性能更好,也更穩定一些", conditions=SEED001),
    Claim("groupCommit", "001", "section 3.1, conclusion 4",
          "binlog group commit has little effect on performance", "tps", no_effect("tps"), test="within",
          factor="group_commit", a="max", b="min", at={"engine": "innodb"}, sources=("threads",),
          per=("threads",), combine="all", premises=(BINLOG_SYNCED,),
          stand_in="MariaDB groups commits that queue behind a binlog sync by default (group-commit wait 0); "
                   "the setting compared is the leader's wait for more commits (binlog_commit_wait_usec 1000 "
                   "with binlog_commit_wait_count = the client threads, MySQL's binlog_group_commit_sync_delay): "
                   "the seed does not say which settings it compared; judged at every thread level, averaged "
                   "over the buffer pool levels",
          quote="在本案中對性能影響很小", conditions=SEED001),
    Claim("threadConcurrency", "001", "section 3.1, conclusion 5",
          "innodb\\_thread\\_concurrency = 64 or 128 steadies throughput and raises it about 8--10\\,\\% at 128 "
          "threads with a large buffer pool",
          "tps", about(1.09, 0.01), test="about",
          not_tested="MariaDB 10.11 (the server here) removed innodb_thread_concurrency (it \"does nothing "
                     "now\"; preflight refuses it), so the setting cannot be varied; scaled to 2 vCPUs the seed's "
                     "limit of 64-128 of 128 threads on 128 CPUs would be a limit of 1-2 threads",
          quote="最終整體性能也能提升約8% ~ 10%", conditions=SEED001),
    Claim("memoryCost", "001", "section 3.1, conclusion 6",
          "with memory short of the data, adding memory is not cost-effective; faster local I/O is",
          "tps", (1.0, math.inf),
          not_tested="a judgement of cost: it needs prices of memory and drives, which no measurement here has",
          quote="如果單靠增加物理記憶體以提升資料庫性能可能從性價比角度看並不划算", conditions=SEED001),
    # ---------------------------------------------------------------- seed 002 (Galera applier threads)
    Claim("applierPause", "002", "flow-control charts",
          "16 applier threads cut flow-control pauses (from 64\\,\\% to 20\\,\\% of the time)",
          "fc_paused_pct_points", (-100.0, 0.0), kind="difference", factor="slave_threads", a="max", b="min",
          sources=("galera",), premises=(FC_PAUSED,),
          quote="les nœuds ont été mis en pause en raison du contrôle de flux environ 20 % du temps",
          conditions=SEED002),
    Claim("applierTps", "002", "throughput chart", "16 applier threads give about 11\\,\\% more throughput",
          "tps_ratio", about(1.11, 0.05), test="about", factor="slave_threads", a="max", b="min", sources=("galera",),
          premises=(FC_PAUSED,),
          quote="environ 11 % de l'amélioration lorsque nous avons ajouté plus de wsrep_slave_threads",
          conditions=SEED002),
    Claim("applierLatency", "002", "latency chart",
          "one applier thread has 27\\,\\% higher average latency than 16",
          "lat_avg_ratio", about(1.27, 0.05), test="about", factor="slave_threads", a="min", b="max",
          sources=("galera",), premises=(FC_PAUSED,),
          quote="la latence de wsrep_slave_thread=1 est supérieure de 27 % à la latence avec 16 threads esclaves",
          conditions=SEED002),
    # ---------------------------------------------------------------- seed 000 (NDB Cluster in a box)
    # Answered by the scale-out study with MariaDB instances standing in for the seed's SQL front-ends (no
    # NDB data nodes: each instance holds its own copy of the data).
    Claim("scaleSaturation", "000", "scaling a single MySQL server",
          "one front-end saturates: past its peak, more client threads add no throughput",
          "scale_saturation", (0.0, 1.05), test="within", sources=("scaleout",),
          stand_in="one MariaDB instance for one SQL node; premise: the tested thread counts go past the peak "
                   "(the saturation point is below the largest thread count)",
          quote="从 128 个客户端开始,吞吐量或 CPU 利用率不再增加", conditions=SEED000),
    Claim("saturationLatency", "000", "p95 latency chart",
          "past saturation, p95 latency grows with clients",
          "p95_ms", (1.0, math.inf), factor="threads", a="max", b="second-max",
          at={"instances": 1, "cache_pct": "max"}, sources=("scaleout",),
          stand_in="one MariaDB instance for one SQL node, the data in its buffer pool",
          premises=(SATURATED,), quote="然后在使用更多客户端时呈指数增长", conditions=SEED000),
    Claim("scaleDoubling", "000", "p95 latency chart",
          "doubling the front-ends doubles the clients that keep p95 under 0.5\\,ms",
          "scale_p95_doubling", about(2.0, 0.2), test="about", sources=("scaleout",), premises=(CROSSING_GRID,),
          stand_in="MariaDB instances for SQL nodes; per campaign, the client threads where the runs' p95 reaches "
                   "0.5 ms at 2n and at n instances, from log-log fits over the thread levels near it, their "
                   "ratio pooled over campaigns with the campaign as the unit; judged on the study registered "
                   "for it (specs/paper-scalegrid.yaml: a x1.5 thread grid past both crossings)",
          quote="将 MySQL 服务器的数量加倍允许将客户端(sysbench 线程)的数量加倍,同时保持低于 0.5 毫秒的相同低延迟",
          conditions=SEED000),
    Claim("scaleSixteen", "000", "scaling several MySQL servers",
          "from 8 to 16 front-ends, peak throughput no longer doubles",
          "scale_peak_16_8", (0.0, 1.8), test="within", sources=("scaleout",),
          stand_in="MariaDB instances for SQL nodes; premise: 8 and 16 instances measured on a host with CPUs "
                   "for them (a 2-vCPU host stops at 2)",
          quote="当 MySQL 服务器从 8 台增加到 16 台时,我们不再能够将吞吐量翻倍", conditions=SEED000),
    Claim("steadyRuns", "000", "per-second charts",
          "unless the system saturates, per-second throughput (and latency) are very stable",
          "steady", (0.90, 1.0), test="within", kind="share", sources=("scaleout", "storage", "threads", "tpcc"),
          stand_in="the share of runs the steady-state test shows stable after warm-up, over every standalone "
                   "run of the build (the scale-out study's runs included)",
          quote="对于吞吐量和延迟,除非我们达到系统饱和,否则两者都非常稳定", conditions=SEED000),
    Claim("longRun", "000", "benchmark setup",
          "runs of over an hour give no significantly different average throughput",
          "soak_hour_over_5min", no_effect("tps"), test="within", margin=SOAK_MARGIN, sources=("soak",),
          stand_in=SOAK_STAND_IN + "; the estimate is the hour's average over its own first 300 s (the seed's "
                   "5-minute runs after the same 2-minute warm-up: a run of minutes is the long run's beginning)",
          quote="我们已经验证运行基准测试超过 1 小时,记录的平均吞吐量没有显着变化",
          conditions=SEED000_SOAK),
    Claim("warmUp", "000", "benchmark setup",
          "after 2 minutes of warm-up, measuring 1--2 minutes suffices (it averages what an hour does)",
          "soak_minute_over_hour", no_effect("tps"), test="within", margin=SOAK_MARGIN, sources=("soak",),
          stand_in=SOAK_STAND_IN + "; the estimate is the first 60 s measured after the 2-minute warm-up over "
                   "the whole hour (the seed's shortest sufficient measurement; the first 120 s and MSER-5's end "
                   "of the warm-up transient are reported beside it)",
          quote="在实践中,我们已经看到,预热时间为 2 分钟,运行基准测试 1-2 分钟就足够了",
          conditions=SEED000_SOAK),
    Claim("sharedMemory", "000", "NDB configuration (UseShm)",
          "shared-memory connections between co-located SQL and data nodes give 20\\,\\% more performance",
          "tps", about(1.20, 0.05), test="about", not_tested=NO_NDB,
          quote="这是必须的,因为它提供了 20% 的性能改进", conditions=SEED000),
    # ---------------------------------------------------------------- seed 004 (NVMe layout for NDB)
    Claim("overProvisioning", "004", "tablespace file systems",
          "leaving 40\\,\\% of each NVMe unpartitioned keeps write throughput; a full drive halves it",
          "tps", (1.0, math.inf),
          not_tested="no NVMe here: loop devices have no flash translation layer to over-provision",
          quote="Using the full disk space cut performance in half", conditions=SEED004),
    Claim("raidChunk", "004", "log file system",
          "RAID0 of two NVMe with 256\\,KB chunks carries 2--3\\,GB/s of sequential log writes",
          "tps", (1.0, math.inf),
          not_tested="no NVMe, and this kernel has no MD RAID (mdadm cannot create an array)",
          quote="2 of the 8 NVMe drives will handle this nicely", conditions=SEED004),
)

# ============================================================================ further findings (ours)
# Comparisons our own studies make that no seed concludes: judged by the same rule, published apart
# (claims_tex.render_further_table), headed as ours. ``seed`` names the seed whose study design they follow.

FURTHER: tuple[Claim, ...] = (
    Claim("bufferPool", "001", "our thread sweep, after the seed's charts",
          "throughput grows with the InnoDB buffer pool share of the data (25 to 100\\,\\%)",
          "tps", (1.0, math.inf), factor="cache_pct", a="max", b="min", at={"engine": "innodb"},
          sources=("threads", "storage"), premises=(CACHE_BELOW,), per=("threads",), combine="all"),
    Claim("threadsScale", "001", "our thread sweep, after the seed's charts",
          "throughput rises with client threads (lowest to highest level)",
          "tps", (1.0, math.inf), factor="threads", a="max", b="min", sources=("threads",), per=("cache_pct",),
          combine="all"),
    Claim("threadsSaturation", "000", "our thread sweep, after the seed's saturation sentence",
          "past saturation, more client threads add no throughput", "tps", (0.0, 1.05), test="within",
          factor="threads", a="max", b="second-max", at={"cache_pct": "max"}, sources=("threads",),
          stand_in="the largest cache level", premises=(SATURATED,)),
    Claim("indexCacheCollapse", "003", "our TPC-C diagnostic study, after slide 14's lz4 results",
          "with 4\\,KB blocks and lz4, holding the index and filter blocks outside the block cache more than "
          "doubles throughput", "tps", (2.0, math.inf), factor="index_cache", a="table", b="cache",
          at={"engine": "myrocks", "block_size": "4k", "compression": "lz4", "cache_pct": SEED003_CACHE_PCT},
          sources=_T,
          stand_in="the TPC-C study's 4 KB + lz4 cells ran 4-5x slower than uncompressed with the block cache "
                   "on, their index blocks missing the cache ~75,000 times a window; rocksdb_cache_index_and_"
                   "filter_blocks OFF (index_cache: table) keeps them out of it: the collapse's cause if this "
                   "more than doubles throughput"),
    Claim("indexCacheControl", "003", "our TPC-C diagnostic study, the control",
          "without compression, where 4\\,KB index blocks fit the cache, where they are held makes no difference",
          "tps", no_effect("tps"), test="within", factor="index_cache", a="table", b="cache",
          at={"engine": "myrocks", "block_size": "4k", "compression": "none", "cache_pct": SEED003_CACHE_PCT},
          sources=_T),
    Claim("indexCacheNoCache", "003", "our TPC-C diagnostic study, the disabled block cache's stand-in",
          "at the engine's minimum block cache, holding the index and filter blocks outside it raises throughput",
          "tps", (1.0, math.inf), factor="index_cache", a="table", b="cache",
          at={"engine": "myrocks", "block_size": "4k", "cache_pct": SEED003_NO_CACHE}, sources=_T,
          per=("compression",), combine="all",
          stand_in="a RocksDB without a block cache (the seed's 'disabled') holds index and filter blocks in its "
                   "table readers; the stand-in here, a 1 KiB cache with them inside, re-reads an index block at "
                   "nearly every lookup: if this agrees, the no-cache claims measure that re-reading too"),
    Claim("buildsEquivalent", "001", "our A/A check of the server-build factor, for seed 001's version comparison",
          "two point releases of one server (MariaDB 10.11.18 and the installed 10.11.19, Debian's builds) perform "
          "alike at every buffer pool size", "tps", no_effect("tps"), test="within", factor="server_build",
          a=PREVIOUS_BUILD, b="system", at={"engine": "innodb"}, sources=("builds",), per=("cache_pct",),
          combine="all",
          stand_in="the server build as a factor (each build its own server binary, install script, plugins and "
                   "datasets) exercised by two real builds that should not differ: a disagreement would say the "
                   "harness, not the server, makes a difference, and seed 001's GreatSQL 5.7/8.0 comparison could "
                   "not be trusted to it"),
)


# ============================================================================ what the rebuild changed


@dataclass(frozen=True)
class Change:
    """One step of the rebuild from the seed texts (issue 26): ``kind`` merged / moved / added / renamed /
    revised; ``old`` the ids before, ``new`` the id after ("" when removed), ``why`` in words."""

    kind: str
    old: tuple[str, ...]
    new: str
    why: str


HISTORY: tuple[Change, ...] = (
    Change("merged", ("scaleSaturation", "saturationTps"), "scaleSaturation",
           "one seed-000 sentence ('from 128 clients on, neither throughput nor CPU utilisation grows') that had "
           "two rows with two estimates; judged on the scale-out study, seed 000's miniature; the thread "
           "sweep's estimate moved to the further findings (threadsSaturation)"),
    Change("merged", ("steadyRuns", "scaleStable"), "steadyRuns",
           "one seed-000 sentence ('unless the system saturates, throughput and latency are both very stable') "
           "that had two rows; judged by the steady-state test over every standalone run, the scale-out "
           "study's first (the half ratio of the best cell, scaleStable's estimator, is gone from the claims)"),
    Change("merged", ("pmemNoCache", "sectorNoCache"), "pmemNoCache",
           "slide 15's bullet says 'persistent memory' without naming a mode: one claim, judged for each "
           "emulated PMEM mode (fsdax, sector) against NVMe through `per`"),
    Change("merged", ("pmemCache", "sectorCache"), "pmemCache",
           "slide 15's other bullet, the same way: one claim judged per PMEM mode"),
    Change("moved", ("bufferPool",), "bufferPool",
           "not a conclusion of seed 001 (its conclusions are about versions, remote storage, group commit, "
           "innodb_thread_concurrency and memory's cost): a further finding of ours"),
    Change("moved", ("threadsScale",), "threadsScale", "not a conclusion of seed 001: a further finding of ours"),
    Change("moved", ("saturationTps",), "threadsSaturation",
           "seed 000's saturation sentence judged on seed 001's workload: ours, not the seed's (the seed's own "
           "is scaleSaturation)"),
    Change("added", ("blockSmallCacheLatency",), "blockSmallCacheLatency",
           "slide 13's 4 KB result names latency as well as throughput"),
    Change("added", ("lzFourCpu",), "lzFourCpu", "slide 14: 'CPU overhead of lz4 compression only 2-3%'"),
    Change("added", ("pmemNoCacheSlight",), "pmemNoCacheSlight",
           "slide 15: without a block cache PMEM is only slightly slower than with one"),
    Change("added", ("pmemTps",), "pmemTps", "slide 16's headline: up to 3x transactions per second"),
    Change("added", ("pmemLatency",), "pmemLatency", "slide 16's headline: up to 5.7x query latency"),
    Change("added", ("pmemCpu",), "pmemCpu", "slide 16: up to 59 % better CPU utilisation (not tested: ambiguous)"),
    Change("added", ("versionLowPool", "versionConverge", "versionFullPool"), "",
           "seed 001's conclusions 1.1, 1.3 and 2.1 (GreatSQL 5.7 against 8.0): not tested, one server here"),
    Change("added", ("remoteGap",), "remoteGap", "seed 001's conclusion 1.2 (not tested: no network storage)"),
    Change("added", ("groupCommit",), "groupCommit", "seed 001's conclusion 4 (not tested: binlog off here)"),
    Change("revised", ("groupCommit",), "groupCommit",
           "issue 40: testable on the paper profile's group-commit study (binlog on and synced, MariaDB's default "
           "group commit against a 1 ms leader wait, at 2, 8 and 32 threads), registered before its first data"),
    Change("revised", ("remoteGap", "remoteNvme"), "remoteGap",
           "issue 40: testable on the paper profile's remote-storage study (specs/paper-remote.yaml): a network "
           "block device (nbdkit over TCP from another network namespace) against its FUSE control (the same "
           "server over a unix socket); remoteGap as the trend of the ratio along the client threads (a ratio of "
           "ratios, the interaction contrast of the cell means), registered before the study's first data"),
    Change("revised", ("lzFourTps",), "lzFourTps",
           "issue 41: judged at each block size (all must agree, else 'depends on block size'): the TPC-C study's "
           "4 KB + lz4 cells collapse for a reason of their own (index blocks thrashing the block cache), which "
           "an average over block sizes would carry into slide 14's PMEM sentence"),
    Change("added", ("indexCacheCollapse", "indexCacheControl", "indexCacheNoCache"), "indexCacheCollapse",
           "issue 41: the mechanism of the TPC-C study's largest effect as our own finding, with its control, "
           "on a diagnostic study (specs/paper-tpcc-index.yaml), registered before its data"),
    Change("added", ("buildsEquivalent",), "buildsEquivalent",
           "issue 40: the server-build factor's A/A check (MariaDB 10.11.18 against the installed 10.11.19, each "
           "its own datasets) on its own study (specs/paper-builds.yaml), registered before its data"),
    Change("added", ("pmemIowait",), "pmemIowait",
           "issue 40: slide 16's 'removed NVMe %iowait overhead' as a claim of its own, the reading of "
           "pmemCpu that the runs can measure (the host's iowait share), registered before the campaign that "
           "first judges it (the committed TPC-C campaigns already hold the counters)"),
    Change("added", ("threadConcurrency",), "threadConcurrency",
           "seed 001's conclusion 5 (not tested: no innodb_thread_concurrency factor)"),
    Change("added", ("memoryCost",), "memoryCost", "seed 001's conclusion 6 (not tested: a judgement of cost)"),
    Change("added", ("longRun",), "longRun", "seed 000: hour-long runs average the same (not tested)"),
    Change("revised", ("longRun",), "longRun",
           "issue 40: testable on the soak study (specs/paper-soak.yaml: the scale-out study's headline cell "
           "measured for an hour after the seed's 2-minute warm-up), the hour's average against its first 5 "
           "minutes, registered before the study's first data"),
    Change("added", ("warmUp",), "warmUp",
           "issue 40: seed 000's '2 minutes of warm-up and 1-2 minutes of measuring suffice', judged on the soak "
           "study's long runs, registered before their data"),
    Change("added", ("sharedMemory",), "sharedMemory", "seed 000: UseShm gives 20 % (not tested: no NDB)"),
    Change("revised", ("blockLargeCache", "pmemCache", "pmemNoCacheSlight"), "",
           f"'block cache enabled' is the seed's 30 GB against about 350 GB of uncompressed data: cache_pct "
           f"{SEED003_CACHE_PCT} (was the largest level, 100 %); a study without that level leaves them not tested"),
    Change("revised", ("blockSmallCache", "blockSmallCacheLatency", "lzFourReads", "pmemNoCache", "pmemTps",
                       "pmemLatency"), "",
           f"'block cache disabled' is cache_pct {SEED003_NO_CACHE}, the engine's minimum (was 'min', the lowest "
           "level of whatever study judged it: 25 % in the oltp storage matrix)"),
    Change("revised", tuple(c.id for c in CLAIMS if c.seed == "003" and c.sources == _T), "",
           "seed 003's results are sysbench-TPCC: judged on the TPC-C study only (the oltp storage matrix, with "
           "data that does not compress and uniform keys, no longer stands in)"),
    Change("revised", tuple(c.id for c in CLAIMS + FURTHER if c.per or c.bound), "",
           "issue 38: how a claim's conditions combine is registered (all; the largest, the seeds' 'up to'; a "
           "primary condition, ramblock for PMEM, with tmpfs as sensitivity), RAM stand-ins for PMEM are judged "
           "one-sided as upper bounds, and the three-way rule, its margins and the premises enter every claim's "
           "registration: every claim judged on the reference campaigns is revised after their data"),
    Change("revised", ("saturationLatency",), "",
           "judged on the scale-out study at one instance (seed 000's single server), not on the thread sweep"),
)


def all_claims() -> tuple[Claim, ...]:
    """The seeds' claims and our further findings (ids are unique across both)."""
    return CLAIMS + FURTHER
