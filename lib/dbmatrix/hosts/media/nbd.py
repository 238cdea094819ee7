"""Network block devices (kind ``nbd``, pure): nbdkit serving a backing file, in a network namespace of
its own over a veth pair (``tcp``) or on a unix socket (``unix``, the control), nbdfuse exposing the
export as a file, and the loop device over that file that the file system sits on.

The pieces and why: there is no kernel NBD client, iSCSI or NVMe-oF here, but FUSE is, so the client is
``nbdfuse`` (libnbd) and a loop device with direct I/O makes a block device of its file. The server side
(``nbdkit file``) reads and writes the backing file through the host's page cache, as a storage server
with a RAM cache would. The tcp medium crosses a real TCP connection between two network namespaces
(veth, optionally shaped by ``tc htb`` in both directions, optionally delayed by nbdkit's delay filter);
the unix medium is the same nbdkit, nbdfuse and loop device without the network, so that the contrast
of the two isolates the network path, not FUSE.

Processes: nbdkit forks into the background and writes its pid file once it listens; nbdfuse is started
with ``setsid`` and writes its pid file once the FUSE mount serves. Teardown stops both by their pid files
(``fusermount3 -u`` for nbdfuse, as its manual asks) and deletes the namespace (which removes the veth
pair). A medium left from an earlier boot or session (processes gone, mounts stale) is reset by
:func:`nbd_reset_steps` before it is built again; the backing file stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import Checks, Step, in_mount_table, parse_kv, q
from dbmatrix.hosts.media.devices import loop_lookup, loop_lookup_all
from dbmatrix.hosts.remote import without_markers

# The server and the client outlive the command that starts them, like a mount: in a session of their own (a
# signal to the starter's process group, e.g. a notebook kernel's shutdown, made nbdkit quit serving while it
# kept running) and without our per-command and run-guard markers (Host.interrupt and the run guard kill what
# carries them); teardown stops them by pid file.
DETACH = f"{without_markers()} setsid"
NBDFUSE_WAIT_S = 20  # nbdfuse connects and mounts in well under a second here; a loaded host may take longer


@dataclass(frozen=True)
class NbdNames:
    """Every name a nbd medium's commands use, derived from its recipe."""

    netns: str | None
    host_if: str | None
    server_if: str | None
    host_addr: str | None
    server_addr: str | None
    run_dir: str
    fuse_dir: str
    fuse_file: str
    socket: str | None
    nbdkit_pid: str
    nbdfuse_pid: str
    nbdfuse_log: str
    uri: str


def nbd_names(m: Medium) -> NbdNames:
    o = m.options
    run = o["run_dir"]
    tcp = o["transport"] == "tcp"
    netns = host_if = server_if = host_addr = server_addr = sock = None
    if tcp:
        net = o["subnet"].split("/")[0].split(".")
        base = ".".join(net[:3])
        host_addr, server_addr = f"{base}.{int(net[3]) + 1}", f"{base}.{int(net[3]) + 2}"
        netns = f"dbmatrix-{m.name}"
        tag = "".join(f"{int(x):02x}" for x in net)  # the network in hex: unique, and names fit 15 characters
        host_if, server_if = f"dbx{tag}h", f"dbx{tag}s"
        uri = f"nbd://{server_addr}:{o['port']}"
    else:
        sock = f"{run}/nbd.sock"
        uri = f"nbd+unix:///?socket={sock}"
    return NbdNames(netns, host_if, server_if, host_addr, server_addr, run, f"{run}/fuse", f"{run}/fuse/disk",
                    sock, f"{run}/nbdkit.pid", f"{run}/nbdfuse.pid", f"{run}/nbdfuse.log", uri)


def _alive(pidfile: str) -> str:
    """A shell test: the pid file's process runs (a zombie does not: an init that does not reap keeps one)."""
    return (f'pid=$(cat {q(pidfile)} 2>/dev/null) && kill -0 "$pid" 2>/dev/null && '
            '! grep -q "^State:[[:space:]]*Z" "/proc/$pid/status" 2>/dev/null')


def nbdkit_command(m: Medium) -> str:
    """The server: ``nbdkit [--filter=delay] file <backing> [rdelay= wdelay=]`` on the veth address or socket."""
    o = m.options
    n = nbd_names(m)
    listen = (f"ip netns exec {q(n.netns)} {DETACH} nbdkit --ipaddr {n.server_addr} --port {o['port']}" if n.netns
              else f"rm -f {q(str(n.socket))} && {DETACH} nbdkit --unix {q(str(n.socket))}")  # a killed one leaves it
    delay = o["delay_ms"]
    filt = " --filter=delay" if delay else ""
    params = f" rdelay={delay}ms wdelay={delay}ms" if delay else ""
    return f"{listen} --pidfile {q(n.nbdkit_pid)}{filt} file {q(o['backing_file'])}{params}"


def nbdfuse_command(m: Medium) -> str:
    """The client: nbdfuse in its own session, then wait until its pid file says the mount serves."""
    n = nbd_names(m)
    # Only nbdfuse goes to the background, its output away from ours: a backgrounded list would leave a
    # subshell holding our output pipes open until nbdfuse ends.
    return (f"rm -f {q(n.nbdfuse_pid)}; {DETACH} nbdfuse -C {m.options['connections']} -P {q(n.nbdfuse_pid)} "
            f"{q(n.fuse_file)} {q(n.uri)} < /dev/null > {q(n.nbdfuse_log)} 2>&1 & "
            f"i=0; while [ ! -s {q(n.nbdfuse_pid)} ]; do i=$((i+1)); "
            f"if [ $i -gt {NBDFUSE_WAIT_S * 10} ]; then cat {q(n.nbdfuse_log)} >&2; exit 1; fi; sleep 0.1; done")


def _shape(dev: str, rate: str, netns: str | None = None) -> str:
    tc = f"ip netns exec {q(netns)} tc" if netns else "tc"
    return (f"{tc} qdisc replace dev {dev} root handle 1: htb default 1 && "
            f"{tc} class replace dev {dev} parent 1: classid 1:1 htb rate {rate}")


def nbd_server_steps(m: Medium) -> list[Step]:
    """The backing file, the namespace and link (tcp), the shaping and nbdkit."""
    o = m.options
    n = nbd_names(m)
    file = o["backing_file"]
    steps = [Step("create the backing file",
                  f"mkdir -p \"$(dirname {q(file)})\" && fallocate -l {o['size']} {q(file)}", f"test -f {q(file)}"),
             Step("create the run directory", f"mkdir -p {q(n.fuse_dir)}", f"test -d {q(n.fuse_dir)}")]
    if n.netns:
        ns = q(n.netns)
        steps += [
            Step(f"create the network namespace {n.netns}", f"ip netns add {ns}", f"[ -e /run/netns/{n.netns} ]"),
            Step("create the veth pair", f"ip link add {n.host_if} type veth peer name {n.server_if} netns {ns}",
                 f"ip link show {n.host_if} >/dev/null 2>&1"),
            Step("address the link",
                 f"ip addr replace {n.host_addr}/30 dev {n.host_if} && ip link set {n.host_if} up && "
                 f"ip -n {ns} addr replace {n.server_addr}/30 dev {n.server_if} && "
                 f"ip -n {ns} link set {n.server_if} up && ip -n {ns} link set lo up",
                 f"ip -o addr show dev {n.host_if} | grep -qw {n.host_addr}/30 && "
                 f"ip -n {ns} -o addr show dev {n.server_if} | grep -qw {n.server_addr}/30"),
        ]
        if o["rate"]:
            steps.append(Step(f"shape the link to {o['rate']} each way",
                              f"{_shape(str(n.host_if), o['rate'])} && {_shape(str(n.server_if), o['rate'], n.netns)}"))
    steps.append(Step("start nbdkit", nbdkit_command(m), _alive(n.nbdkit_pid)))
    return steps


def nbd_client_steps(m: Medium) -> list[Step]:
    """nbdfuse and the loop device over its file (the file system follows, as on any block device)."""
    n = nbd_names(m)
    dio = " --direct-io=on" if m.options["direct_io"] else ""
    return [Step("mount the export with nbdfuse", nbdfuse_command(m),
                 f"{in_mount_table(n.fuse_dir)} && test -f {q(n.fuse_file)}"),
            Step("attach the loop device", f"losetup --find --show{dio} {q(n.fuse_file)}",
                 f'[ -n "{loop_lookup(n.fuse_file)}" ]')]


def nbd_reset_steps(m: Medium) -> list[Step]:
    """Everything but the backing file and the mount point: what a stale medium loses before a rebuild."""
    n = nbd_names(m)
    every = loop_lookup_all(n.fuse_file)
    steps = [
        Step("unmount", f"while {in_mount_table(m.path)}; do umount {q(m.path)} || umount -l {q(m.path)} || exit 1; "
             "done", f"! {in_mount_table(m.path)}"),  # XFS over a dead export cannot be stat'ed either
        Step("detach the loop device", f'for d in {every}; do losetup -d "$d"; done', f'[ -z "{every}" ]'),
        # /proc/self/mounts, not mountpoint(1): a FUSE mount whose daemon died cannot be stat'ed (ENOTCONN),
        # so mountpoint calls it not mounted; it may also be stacked (a client started over a stale mount)
        Step("unmount the nbdfuse file",
             f"while {in_mount_table(n.fuse_dir)}; do fusermount3 -uz {q(n.fuse_dir)} 2>/dev/null || "
             f"umount -l {q(n.fuse_dir)} || exit 1; done", f"! {in_mount_table(n.fuse_dir)}"),
        # nbdfuse exits once unmounted; a stale pid file of an earlier boot may name another process, so
        # kill only an nbdfuse or nbdkit of that pid.
        Step("stop nbdfuse", _stop(n.nbdfuse_pid, "nbdfuse"), f"[ ! -e {q(n.nbdfuse_pid)} ]"),
        Step("stop nbdkit", _stop(n.nbdkit_pid, "nbdkit"), f"[ ! -e {q(n.nbdkit_pid)} ]"),
    ]
    if n.netns:
        steps.append(Step(f"delete the network namespace {n.netns} (and its veth pair)",
                          f"ip netns delete {q(n.netns)}", f"[ ! -e /run/netns/{n.netns} ]"))
        steps.append(Step("delete the host end of the veth pair", f"ip link delete {n.host_if}",
                          f"! ip link show {n.host_if} >/dev/null 2>&1"))
    return steps


def _stop(pidfile: str, comm: str) -> str:
    """Stop the process of a pid file if it is `comm` (TERM, then KILL after 5 s), then remove the file."""
    p = q(pidfile)
    return (f'pid=$(cat {p} 2>/dev/null); if [ -n "$pid" ] && [ "$(cat /proc/$pid/comm 2>/dev/null)" = {comm} ]; '
            'then kill "$pid"; i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); '
            f'done; kill -9 "$pid" 2>/dev/null; fi; rm -f {p}')


def nbd_teardown_steps(m: Medium) -> list[Step]:
    n = nbd_names(m)
    file = q(m.options["backing_file"])
    return [*nbd_reset_steps(m),
            Step("remove the mount point", f"rmdir --ignore-fail-on-non-empty {q(m.path)}", f"[ ! -d {q(m.path)} ]"),
            Step("remove the run directory", f"rm -rf {q(n.run_dir)}", f"[ ! -e {q(n.run_dir)} ]"),
            Step("remove the backing file", f"rm -f {file}", f"[ ! -e {file} ]")]


def nbd_fact_sections(m: Medium) -> dict[str, str]:
    """Is nbdkit alive, what nbdfuse has mounted, and (tcp) the namespace, addresses and shaping."""
    n = nbd_names(m)
    lines = [f'{_alive(n.nbdkit_pid)} && echo nbdkit=alive',
             f'{_alive(n.nbdfuse_pid)} && echo nbdfuse=alive',
             f"{in_mount_table(n.fuse_dir)} && echo fuse=mounted",
             f'echo "fuse_bytes=$(stat -c %s {q(n.fuse_file)} 2>/dev/null)"',
             # a live pair of processes can still fail every request (a server that quit serving)
             f"timeout 10 dd if={q(n.fuse_file)} of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null "
             "&& echo export=readable"]
    if n.netns:
        lines += [f"[ -e /run/netns/{n.netns} ] && echo netns=yes",
                  f"ip -n {q(n.netns)} -o addr show dev {n.server_if} 2>/dev/null | grep -qw {n.server_addr}/30 "
                  "&& echo server_addr=yes",
                  f'echo "rate=$(tc class show dev {n.host_if} 2>/dev/null | sed -n "s/.* rate \\([^ ]*\\).*/\\1/p" '
                  '| head -n 1)"']
    return {"nbd": "\n".join(lines)}


TC_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def rate_bits(rate: str) -> int:
    """Bits per second of a tc rate (``10gbit``, ``10Gbit`` as tc prints it, ``500Mbit``)."""
    r = rate.lower().removesuffix("bit")
    unit = r[-1] if r and r[-1] in "kmg" else ""
    return int(float(r[: len(r) - len(unit)]) * TC_UNITS[unit])


def check_nbd(m: Medium, sections: Mapping[str, str], c: Checks) -> None:
    o = m.options
    n = nbd_names(m)
    f = parse_kv(sections.get("nbd", ""))
    c.expect(f.get("nbdkit") == "alive", f"nbdkit serves {o['backing_file']} ({n.uri})",
             f"nbdkit is not running (pid file {n.nbdkit_pid})")
    c.expect(f.get("nbdfuse") == "alive" and f.get("fuse") == "mounted", f"nbdfuse mounts {n.fuse_file}",
             f"nbdfuse is not serving {n.fuse_file}")
    c.expect(f.get("export") == "readable", "the export answers a read", "reading the export fails (the NBD "
             f"connection is down: {n.nbdfuse_log} says why)")
    c.expect(f.get("fuse_bytes") == str(o["size"]), f"the export has {o['size']} bytes",
             f"the export has {f.get('fuse_bytes') or 'no'} bytes, the recipe says {o['size']}")
    if n.netns:
        c.expect(f.get("netns") == "yes" and f.get("server_addr") == "yes",
                 f"server at {n.server_addr} in namespace {n.netns}",
                 f"no server address {n.server_addr} in network namespace {n.netns}")
        if o["rate"]:
            got = f.get("rate") or ""
            c.expect(bool(got) and rate_bits(got) == rate_bits(o["rate"]), f"link shaped to {o['rate']}",
                     f"the link's htb rate is {got or 'unset'}, the recipe says {o['rate']}")
