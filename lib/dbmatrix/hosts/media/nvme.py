"""Real block devices (pure): ``blockdev`` (a local disk, optionally partitioned) and ``nvmeof`` (a
namespace of an NVMe over Fabrics subsystem, connected with ``nvme connect``).
"""

from __future__ import annotations

from collections.abc import Mapping

from dbmatrix.hosts.inventory import Medium
from dbmatrix.hosts.media.core import Checks, Step, parse_kv, q
from dbmatrix.hosts.media.devices import nvmeof_lookup, target_expr
from dbmatrix.hosts.media.filesystem import fs_steps, parted


def nvme_connect_command(m: Medium) -> str:
    o = m.options
    args = ["nvme", "connect", "-t", o["transport"], "-a", o["address"], "-s", str(o["service_id"]), "-n", o["nqn"]]
    if o["host_nqn"]:
        args += ["--hostnqn", o["host_nqn"]]
    return " ".join(q(a) for a in args)


def steps_nvmeof(m: Medium) -> list[Step]:
    o = m.options
    module = f"nvme-{o['transport']}"
    connected = f'[ -n "$({nvmeof_lookup(o["nqn"], o["namespace"])})" ]'
    return [Step(f"load {module}", f"modprobe {module}", f"[ -d /sys/module/nvme_{o['transport']} ]"),
            Step(f"connect to {o['nqn']} at {o['address']}:{o['service_id']} over {o['transport']}",
                 f"{nvme_connect_command(m)} && udevadm settle", connected),
            *fs_steps(m)]


def steps_blockdev(m: Medium) -> list[Step]:
    o = m.options
    steps = []
    if o["partition_pct"]:
        steps.append(Step("partition the device", parted(q(o["device"]), o["partition_pct"]),
                          f"test -b {target_expr(m)}"))
    return steps + fs_steps(m)


def check_nvmeof(m: Medium, sections: Mapping[str, str], c: Checks) -> None:
    o = m.options
    nv = parse_kv(sections.get("nvmeof", ""))
    if c.expect(nv.get("found") == "yes", f"subsystem {o['nqn']} connected",
                f"subsystem {o['nqn']} is not connected (nvme list-subsys shows it not)"):
        c.expect(nv.get("transport") == o["transport"], f"over {o['transport']}",
                 f"connected over {nv.get('transport')}, the recipe says {o['transport']}")
        c.expect(nv.get("state") == "live", "controller live",
                 f"controller state {nv.get('state')!r} (want live)")
        c.expect(f"traddr={o['address']}" in nv.get("address", ""), f"target {o['address']}",
                 f"connected to {nv.get('address')!r}, the recipe says {o['address']}")
