#!/bin/bash
# Slurm epilog (root, on each node when an allocation ends: scancel by dbmatrix after the block, Ctrl-C,
# a time limit, preemption): leave the node clean for the next user.
# Install as /etc/slurm/epilog.sh. A non-zero exit drains the node.
set -u
log() { logger -t slurm-epilog "job ${SLURM_JOB_ID:-?}: $*"; }
WORKDIR=${DBMATRIX_WORKDIR:-/var/tmp/dbmatrix}   # the inventory's workdir for this host

# 1. Servers and clients the job left running (dbmatrix stops its own; a killed controller does not).
for prog in mariadbd mysqld sysbench mpstat iostat vmstat pidstat; do
    pgrep -x "$prog" >/dev/null && { log "stopping $prog"; pkill -TERM -x "$prog"; }
done
sleep 5
for prog in mariadbd mysqld sysbench; do pkill -KILL -x "$prog" 2>/dev/null; done

# 2. Mounts under the workdir (media the job built: tmpfs, loop devices, XFS on NVMe/PMEM):
#    unmount deepest first, then detach loop devices whose backing file lives there. dbmatrix mounts
#    them again when it next leases the node (media are ensured under every new lease).
findmnt -rn -o TARGET | grep -E "^$WORKDIR(/|$)" | sort -r | while read -r m; do
    umount "$m" || umount -l "$m" || log "cannot unmount $m"
done
for l in $(losetup -n -O NAME,BACK-FILE | awk -v w="$WORKDIR" 'index($2, w) == 1 {print $1}'); do
    losetup -d "$l" || log "cannot detach $l"
done
# Mount points the inventory puts elsewhere (e.g. /mnt/nvme, /mnt/pmem-fsdax): list them here.
for m in /mnt/nvme /mnt/pmem-fsdax /mnt/pmem-sector; do
    mountpoint -q "$m" && { umount "$m" || log "cannot unmount $m"; }
done

# 3. Page cache.
sync
echo 3 > /proc/sys/vm/drop_caches

# Dataset snapshots in $WORKDIR/snapshots are kept: a later block of the same study reuses them
# (remove the workdir here instead if your lab's policy is a wiped node).
exit 0
