"""The nbd medium without side effects: its recipe's validation, the exact plan (server in a network
namespace over TCP, or on a unix socket; nbdfuse; the loop device), its teardown and reset, the prerequisite
messages and the evaluation of facts captured from a real nbd medium on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dbmatrix.hosts import media
from dbmatrix.hosts.inventory import Medium, localhost_inventory, parse_medium
from dbmatrix.hosts.media import MediaError, evaluate, parse_sections, plan, prerequisite_problems, teardown_plan
from dbmatrix.hosts.media.nbd import nbd_names, nbd_reset_steps, rate_bits
from dbmatrix.hosts.medium_recipes import nbd_default_subnet
from dbmatrix.spec.errors import SpecError

FACTS = (Path(__file__).parent / "data" / "nbd-facts.txt").read_text()


def med(raw: dict[str, Any], name: str = "net", workdir: str = "/w") -> Medium:
    return parse_medium({"kind": "nbd", "size": "512M", **raw}, host="db1", name=name, workdir=workdir)


def test_defaults_and_round_trip() -> None:
    m = med({})
    o = m.options
    assert (o["transport"], o["port"], o["rate"], o["delay_ms"], o["connections"], o["direct_io"]) == (
        "tcp", 10809, None, 0, 4, True)
    assert o["backing_file"] == "/w/media-backing/net.img" and o["run_dir"] == "/w/media-backing/net.nbd"
    assert o["subnet"] == nbd_default_subnet("net") and o["subnet"].startswith("10.213.")
    assert parse_medium(m.to_dict(), host="db1", name="net", workdir=None) == m
    u = med({"transport": "unix"}, name="ctl")
    assert (u.options["subnet"], u.options["port"]) == (None, None)
    assert parse_medium(u.to_dict(), host="db1", name="ctl", workdir=None) == u


def test_default_subnets_are_stable_slash_30_networks() -> None:
    for name in ("remote", "nbdlocal", "a", "x" * 64):
        net = nbd_default_subnet(name)
        assert net == nbd_default_subnet(name)
        last = int(net.split("/")[0].split(".")[3])
        assert net.endswith("/30") and last % 4 == 0 and last <= 252


@pytest.mark.parametrize(("raw", "error"), [
    ({"transport": "udp"}, r"\.transport: 'udp' is not allowed; allowed: tcp, unix"),
    ({"transport": "unix", "rate": "1gbit"}, r"\.rate: only for transport tcp"),
    ({"transport": "unix", "subnet": "10.0.0.0/30"}, r"\.subnet: only for transport tcp"),
    ({"rate": "fast"}, r"\.rate: 'fast' must be a tc rate in bits per second such as 10gbit"),
    ({"subnet": "10.0.0.1/30"}, r"\.subnet: '10.0.0.1/30' must be an IPv4 /30 network"),
    ({"subnet": "10.0.0.0/24"}, r"\.subnet: .* must be an IPv4 /30 network"),
    ({"delay_ms": 0.1}, r"\.delay_ms: 0.1 must be whole milliseconds in 0..1000"),
    ({"port": 70000}, r"\.port: 70000 is not a TCP port"),
    ({"partition_pct": 60}, r"unknown key\(s\) partition_pct for kind nbd"),
    ({"size": "100M"}, r"\.size: 100M leaves 100 MiB for XFS"),
])
def test_bad_recipes_name_the_field(raw: dict[str, Any], error: str) -> None:
    with pytest.raises(SpecError, match=error):
        med(raw)


def test_tcp_plan_builds_namespace_link_shaping_server_client_loop_and_fs() -> None:
    m = med({"rate": "10gbit", "delay_ms": 2, "subnet": "10.213.250.0/30", "connections": 2})
    n = nbd_names(m)
    assert (n.netns, n.host_if, n.server_if, n.host_addr, n.server_addr) == (
        "dbmatrix-net", "dbx0ad5fa00h", "dbx0ad5fa00s", "10.213.250.1", "10.213.250.2")
    assert len(n.host_if) <= 15
    cmds = plan(m)
    assert cmds[:3] == ['mkdir -p "$(dirname /w/media-backing/net.img)" && fallocate -l 536870912 '
                        '/w/media-backing/net.img', "mkdir -p /w/media-backing/net.nbd/fuse", "ip netns add dbmatrix-net"]
    assert cmds[3] == "ip link add dbx0ad5fa00h type veth peer name dbx0ad5fa00s netns dbmatrix-net"
    assert "ip -n dbmatrix-net addr replace 10.213.250.2/30 dev dbx0ad5fa00s" in cmds[4]
    assert cmds[5] == ("tc qdisc replace dev dbx0ad5fa00h root handle 1: htb default 1 && tc class replace dev "
                       "dbx0ad5fa00h parent 1: classid 1:1 htb rate 10gbit && ip netns exec dbmatrix-net tc qdisc "
                       "replace dev dbx0ad5fa00s root handle 1: htb default 1 && ip netns exec dbmatrix-net tc class "
                       "replace dev dbx0ad5fa00s parent 1: classid 1:1 htb rate 10gbit")
    assert cmds[6] == ("ip netns exec dbmatrix-net env -u DBMATRIX_RUN_ID -u DBMATRIX_GUARD setsid nbdkit --ipaddr 10.213.250.2 --port 10809 --pidfile "
                       "/w/media-backing/net.nbd/nbdkit.pid --filter=delay file /w/media-backing/net.img "
                       "rdelay=2ms wdelay=2ms")
    assert cmds[7].startswith("rm -f /w/media-backing/net.nbd/nbdfuse.pid; env -u DBMATRIX_RUN_ID -u DBMATRIX_GUARD "
                              "setsid nbdfuse -C 2 -P "
                              "/w/media-backing/net.nbd/nbdfuse.pid /w/media-backing/net.nbd/fuse/disk "
                              "nbd://10.213.250.2:10809 < /dev/null > /w/media-backing/net.nbd/nbdfuse.log 2>&1 & ")
    assert cmds[8] == "losetup --find --show --direct-io=on /w/media-backing/net.nbd/fuse/disk"
    assert cmds[9] == 'mkfs.xfs -q -b size=4096 "$(losetup -nO NAME -j /w/media-backing/net.nbd/fuse/disk)"'
    assert cmds[10].endswith("/w/media/net") and len(cmds) == 11


def test_unix_plan_has_no_network() -> None:
    cmds = plan(med({"transport": "unix"}, name="ctl"))
    assert not any(c.startswith(("ip ", "tc ")) for c in cmds)
    assert "rm -f /w/media-backing/ctl.nbd/nbd.sock && env -u DBMATRIX_RUN_ID -u DBMATRIX_GUARD setsid nbdkit --unix /w/media-backing/ctl.nbd/nbd.sock --pidfile /w/media-backing/ctl.nbd/nbdkit.pid file " \
           "/w/media-backing/ctl.img" in cmds
    assert any("'nbd+unix:///?socket=/w/media-backing/ctl.nbd/nbd.sock'" in c for c in cmds)


def test_every_apply_step_but_the_shaping_has_a_done_test() -> None:
    for s in media.apply_steps(med({"rate": "1gbit"})):
        assert s.done or s.what.startswith("shape "), s


def test_teardown_stops_what_it_started_by_pid_file_and_keeps_nothing() -> None:
    cmds = teardown_plan(med({}))
    assert cmds[0] == ("while awk -v p=/w/media/net '$2 == p {found=1} END {exit !found}' /proc/self/mounts; do "
                       "umount /w/media/net || umount -l /w/media/net || exit 1; done")
    assert cmds[2] == ("while awk -v p=/w/media-backing/net.nbd/fuse '$2 == p {found=1} END {exit !found}' "
                       "/proc/self/mounts; do fusermount3 -uz /w/media-backing/net.nbd/fuse 2>/dev/null || "
                       "umount -l /w/media-backing/net.nbd/fuse || exit 1; done")  # stale or stacked mounts too
    stop = [c for c in cmds if "kill" in c]
    assert len(stop) == 2 and all("/proc/$pid/comm" in c for c in stop)  # never a stale pid's other process
    assert "nbdfuse" in stop[0] and "nbdkit" in stop[1]
    assert cmds[-3:] == ["rmdir --ignore-fail-on-non-empty /w/media/net", "rm -rf /w/media-backing/net.nbd",
                         "rm -f /w/media-backing/net.img"]
    assert "ip netns delete dbmatrix-net" in cmds
    reset = [s.command for s in nbd_reset_steps(med({}))]
    assert "rm -f /w/media-backing/net.img" not in reset and reset == cmds[:len(reset)]


def test_prerequisites_name_the_packages() -> None:
    m = med({"rate": "1gbit", "delay_ms": 1})
    assert {"nbdkit", "nbdfuse", "fusermount3", "ip", "tc", "losetup"} <= set(media.required_tools(m))
    assert "tc" not in media.required_tools(med({}))
    out = prerequisite_problems(m, "tool nbdfuse\ntool fusermount3\nno-fuse\nno-delay-filter\n", "db1")
    assert "nbd: no /dev/fuse on host db1" in out[0]
    assert "no delay filter" in out[1]
    assert "nbdfuse (package libnbd-bin), fusermount3 (package fuse3)" in out[2]


def test_evaluate_facts_of_a_real_medium() -> None:
    m = med({"rate": "10gbit", "subnet": "10.213.250.0/30"}, workdir="/tmp/nbdw")
    st = evaluate(m, parse_sections(FACTS), host="h")
    assert (st.kind, st.device, st.disk, st.fstype) == ("nbd", "loop2", "loop2", "xfs")
    assert "nbdkit serves /tmp/nbdw/media-backing/net.img (nbd://10.213.250.2:10809)" in st.checks
    assert "link shaped to 10gbit" in st.checks and "loop direct I/O on" in st.checks


@pytest.mark.parametrize(("change", "expected"), [
    (("nbdkit=alive", ""), "nbdkit is not running"),
    (("nbdfuse=alive", ""), "nbdfuse is not serving /tmp/nbdw/media-backing/net.nbd/fuse/disk"),
    (("rate=10Gbit", "rate=1Gbit"), "the link's htb rate is 1Gbit, the recipe says 10gbit"),
    (("server_addr=yes", ""), "no server address 10.213.250.2 in network namespace dbmatrix-net"),
    (("loop_dio=1", "loop_dio=0"), "loop direct I/O is off"),
    (("export=readable", ""), "reading the export fails"),
])
def test_evaluate_names_what_differs(change: tuple[str, str], expected: str) -> None:
    m = med({"rate": "10gbit", "subnet": "10.213.250.0/30"}, workdir="/tmp/nbdw")
    with pytest.raises(MediaError, match=expected):
        evaluate(m, parse_sections(FACTS.replace(*change)), host="h")


def test_a_dead_client_is_named_even_when_the_loop_device_went_with_it() -> None:
    """CI saw both orders: the FUSE client killed, and the loop device under the mount gone or not yet."""
    m = med({"rate": "10gbit", "subnet": "10.213.250.0/30"}, workdir="/tmp/nbdw")
    dead = FACTS.replace("nbdfuse=alive", "").replace("fuse=mounted", "").replace("export=readable", "")
    for facts in (dead, dead.replace("target=loop2", "target=")):
        with pytest.raises(MediaError, match="nbdfuse is not serving") as e:
            evaluate(m, parse_sections(facts), host="h")
        assert "reading the export fails" in str(e.value)


def test_rate_bits() -> None:
    assert rate_bits("10gbit") == rate_bits("10Gbit") == 10**10
    assert rate_bits("500Mbit") == 5 * 10**8 and rate_bits("800bit") == 800


def test_this_machine_offers_the_remote_medium_and_its_control() -> None:
    m = localhost_inventory("/var/tmp/dbmatrix").hosts[0].media
    assert (m["remote"].kind, m["remote"].options["transport"], m["remote"].emulates) == ("nbd", "tcp", "remote-nvme")
    assert (m["nbdlocal"].kind, m["nbdlocal"].options["transport"]) == ("nbd", "unix")
    assert m["remote"].options["size"] == m["nbdlocal"].options["size"]


def test_the_registered_stand_in_names_the_rate_this_machine_shapes_the_link_to() -> None:
    """The claims' stand-in prose (catalogue.REMOTE_STAND_IN) is typed once; it must say the inventory's rate."""
    from dbmatrix.analyse.claims.catalogue import REMOTE_STAND_IN

    rate = localhost_inventory("/w").hosts[0].media["remote"].options["rate"]
    assert f"shaped to {rate_bits(rate) // 10**9} Gbit/s" in REMOTE_STAND_IN
