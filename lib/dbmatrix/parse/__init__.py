"""Parsers of raw run outputs, one module per output family (pure: text in, values out).

``sysbench`` (per-second lines, histogram, summary, checkpoint split), ``tpcc`` (the TPC-C script's
report and consistency check), ``system_counters`` (/proc counters read around a window and their
deltas), ``cache_counters`` (engine status counters -> cache hit ratios), ``wsrep`` (Galera status and
the sampler's series). The run side (run/, workload/, hosts/collect) and the analysis both read raw
outputs through here; this package imports no other dbmatrix package and does no I/O.
"""
