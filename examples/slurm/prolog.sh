#!/bin/bash
# Slurm prolog (root, on each node of an allocation, before dbmatrix gets it): start every job from a
# known state. Install as /etc/slurm/prolog.sh with PrologFlags=Alloc in slurm.conf.
# A non-zero exit drains the node (Slurm then requeues or fails the job): dbmatrix sees a lost host.
set -u
log() { logger -t slurm-prolog "job ${SLURM_JOB_ID:-?}: $*"; }

# 1. No database server or load generator left from an earlier job (dbmatrix's or anyone's).
for prog in mariadbd mysqld sysbench; do
    if pgrep -x "$prog" >/dev/null; then
        log "killing leftover $prog"
        pkill -TERM -x "$prog"; sleep 5; pkill -KILL -x "$prog"
    fi
done

# 2. Cold caches: the measurement must not inherit the last job's page cache.
sync
echo 3 > /proc/sys/vm/drop_caches

# 3. No blkio/io throttle left on the devices (dbmatrix's throttled media set them per run).
for f in /sys/fs/cgroup/blkio/blkio.throttle.{read,write}_{iops,bps}_device; do
    [ -w "$f" ] || continue
    while read -r dev _; do echo "$dev 0" > "$f"; done < "$f"
done

# 4. Fail (drain the node) rather than hand out a host that is not clean.
if pgrep -x mariadbd >/dev/null; then log "mariadbd still running"; exit 1; fi
exit 0
