"""Tests of dbmatrix.hosts.inventory: media recipes per kind, defaults, round trips and error messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbmatrix.hosts.inventory import (
    EMULATES,
    KIND_OPTIONS,
    MEDIUM_KINDS,
    HostSpec,
    Inventory,
    Medium,
    default_workdir,
    human_size,
    load_inventory,
    localhost_inventory,
    parse_inventory,
    parse_medium,
    parse_size,
)
from dbmatrix.spec.experiment import SpecError

WD = "/var/tmp/dbm"

EXAMPLES: dict[str, dict[str, Any]] = {
    "dir": {"kind": "dir"},
    "tmpfs": {"kind": "tmpfs", "size": "4G", "emulates": "pmem-fsdax"},
    "loop": {"kind": "loop", "size": "2G", "partition_pct": 60, "sunit": 512, "swidth": 1024,
             "mount_options": "noatime,nodiratime"},
    "ram-block": {"kind": "ram-block", "size": "1G", "emulates": "pmem-sector"},
    "blockdev": {"kind": "blockdev", "device": "/dev/nvme0n1", "partition_pct": 60, "sunit": 512, "swidth": 512},
    "mdraid": {"kind": "mdraid", "devices": ["/dev/nvme6n1", "/dev/nvme7n1"], "chunk": "256K"},
    "pmem": {"kind": "pmem", "mode": "fsdax", "align": "2M"},
    "nvmeof": {"kind": "nvmeof", "transport": "rdma", "address": "192.0.2.10",
               "nqn": "nqn.2019-08.org.example:pool1"},
    "nbd": {"kind": "nbd", "size": "1G", "transport": "tcp", "rate": "10gbit", "delay_ms": 1},
    "throttled": {"kind": "throttled", "base": {"kind": "loop", "size": "1G"}, "read_iops": 300,
                  "write_bps": "50M", "emulates": "remote-nvme"},
}


def med(raw: dict[str, Any], name: str = "m", workdir: str | None = WD) -> Medium:
    return parse_medium(raw, host="db1", name=name, workdir=workdir)


def err(raw: dict[str, Any], name: str = "m") -> str:
    with pytest.raises(SpecError) as ei:
        med(raw, name)
    return str(ei.value)


def test_every_kind_has_an_example() -> None:
    assert set(EXAMPLES) == set(MEDIUM_KINDS) == set(KIND_OPTIONS)


@pytest.mark.parametrize("kind", MEDIUM_KINDS)
def test_round_trip_through_to_dict(kind: str) -> None:
    m = med(EXAMPLES[kind])
    d = m.to_dict()
    json.dumps(d)  # recorded in manifests
    assert {"name", "kind", "path", "emulates", "description"} <= set(d)
    again = parse_medium(d, host="other", name=m.name, workdir=None)  # nothing left to derive
    assert again == m
    assert yaml.safe_load(yaml.safe_dump(d)) == d


def test_defaults_are_filled_in_and_recorded() -> None:
    m = med(EXAMPLES["loop"], name="nvme")
    assert m.path == f"{WD}/media/nvme"
    assert m.options == {"size": 2 * 2**30, "backing_file": f"{WD}/media-backing/nvme.img", "direct_io": True,
                         "partition_pct": 60, "fstype": "xfs", "block_size": 4096, "sunit": 512, "swidth": 1024,
                         "mkfs_options": [], "mount_options": ["noatime", "nodiratime"]}
    rb = med(EXAMPLES["ram-block"], name="rb")
    assert rb.options["backing_dir"] == f"{WD}/media-backing/rb"
    assert rb.options["direct_io"] is False
    assert rb.emulated and rb.emulates == "pmem-sector"


def test_mdraid_stripe_geometry_follows_the_chunk() -> None:
    m = med(EXAMPLES["mdraid"])
    # seed 004: chunk 256K over 2 devices -> mkfs.xfs -d sunit=512,swidth=1024
    assert (m.options["chunk"], m.options["sunit"], m.options["swidth"]) == (262144, 512, 1024)
    assert m.options["level"] == 0
    explicit = med({**EXAMPLES["mdraid"], "sunit": 128, "swidth": 256})
    assert (explicit.options["sunit"], explicit.options["swidth"]) == (128, 256)


def test_pmem_defaults_per_mode() -> None:
    fsdax = med({"kind": "pmem", "mode": "fsdax"})
    assert fsdax.options["namespace"] == "namespace0.0"
    assert fsdax.options["mount_options"] == ["noatime", "dax"]
    assert fsdax.options["map"] == "mem"
    sector = med({"kind": "pmem", "mode": "sector"})
    assert sector.options["mount_options"] == ["noatime"]
    assert sector.options["sector_size"] == 4096
    devdax = med({"kind": "pmem", "mode": "devdax"})
    assert "fstype" not in devdax.options


def test_throttled_base_is_a_medium_at_the_same_path() -> None:
    m = med(EXAMPLES["throttled"], name="slow")
    base = m.base
    assert base is not None and base.kind == "loop" and base.path == m.path and base.name == "slow"
    assert base.options["backing_file"] == f"{WD}/media-backing/slow.img"
    assert m.options["read_iops"] == 300 and m.options["write_bps"] == 50 * 2**20
    assert m.options["write_iops"] is None and m.options["cgroup"] == "auto"
    assert med(EXAMPLES["loop"]).base is None


def test_localhost_inventory_offers_disk_and_emulated_pmem() -> None:
    inv = localhost_inventory("/w")
    (h,) = inv.hosts
    assert h.name == "localhost" and h.is_local and h.workdir == "/w"
    assert list(h.media) == ["disk", "tmpfs", "ramblock", "slow", "remote", "nbdlocal"]
    slow = h.media["slow"]
    assert slow.kind == "throttled" and slow.base is not None and slow.base.kind == "ram-block"
    disk, tmpfs, rb = h.media["disk"], h.media["tmpfs"], h.media["ramblock"]
    assert (disk.kind, disk.path, disk.emulates) == ("dir", "/w/media/disk", None)
    assert (tmpfs.kind, tmpfs.emulates, tmpfs.options["size"]) == ("tmpfs", "pmem-fsdax", 4 * 2**30)
    assert (rb.kind, rb.emulates, rb.options["fstype"]) == ("ram-block", "pmem-sector", "xfs")
    assert rb.options["backing_dir"] == "/w/media-backing/ramblock"
    assert all(m.description for m in h.media.values())


def test_default_workdir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBMATRIX_WORKDIR", "/x/y")
    assert default_workdir() == "/x/y"
    assert localhost_inventory().hosts[0].media["disk"].path == "/x/y/media/disk"
    monkeypatch.delenv("DBMATRIX_WORKDIR")
    assert default_workdir() == "/var/tmp/dbmatrix"


def test_medium_built_by_hand_keeps_working() -> None:
    m = Medium("disk", "dir", "/data")
    assert m.options == {} and not m.emulated
    assert m.to_dict() == {"name": "disk", "kind": "dir", "path": "/data", "emulates": None, "description": ""}
    assert hash(m) == hash(Medium("disk", "dir", "/data"))


@pytest.mark.parametrize("text,n", [
    ("4G", 4 * 2**30), ("4GiB", 4 * 2**30), ("4g", 4 * 2**30), ("256M", 256 * 2**20), ("512K", 512 * 1024),
    ("1T", 2**40), ("4096", 4096), (8192, 8192), (" 64 M ", 64 * 2**20),
])
def test_parse_size(text: Any, n: int) -> None:
    assert parse_size(text, "x") == n


@pytest.mark.parametrize("bad", ["4GB", "1.5G", "-1", "lots", 0, -5, True, None, [1]])
def test_parse_size_rejects(bad: Any) -> None:
    with pytest.raises(SpecError, match=r"^x\.size: .*(allowed|positive)"):
        parse_size(bad, "x.size")


def test_human_size() -> None:
    assert human_size(4 * 2**30) == "4G" and human_size(1000) == "1000" and human_size(2048) == "2K"


@pytest.mark.parametrize("raw,field,allowed", [
    ({"kind": "nvme"}, "kind", "allowed: dir, tmpfs, loop, ram-block, blockdev, mdraid, pmem, nvmeof, nbd, throttled"),
    ({"kind": "tmpfs"}, "size", "required"),
    ({"kind": "tmpfs", "size": "4GB"}, "size", "allowed: a number of bytes"),
    ({"kind": "tmpfs", "size": 1000}, "size", "multiple of 4K"),
    ({"kind": "loop", "size": "1G", "fstype": "btrfs"}, "fstype", "allowed: xfs, ext4"),
    ({"kind": "loop", "size": "1G", "fstype": "ext4", "block_size": 16384}, "block_size", "allowed: 1024, 2048, 4096"),
    ({"kind": "loop", "size": "1G", "sunit": 512}, "swidth", "go together"),
    ({"kind": "loop", "size": "1G", "sunit": 512, "swidth": 700}, "swidth", "multiple of sunit"),
    ({"kind": "loop", "size": "1G", "sunit": 4, "swidth": 8}, "sunit", "multiple of the block size"),
    ({"kind": "loop", "size": "1G", "partition_pct": 0}, "partition_pct", "(0, 100]"),
    ({"kind": "loop", "size": "1G", "partition_pct": 150}, "partition_pct", "(0, 100]"),
    ({"kind": "loop", "size": "256M"}, "size", "XFS, which needs at least 300 MiB"),
    ({"kind": "loop", "size": "512M", "partition_pct": 50}, "size", "512M x 50 % leaves 256 MiB"),
    ({"kind": "loop", "size": "1G", "direct_io": "yes"}, "direct_io", "true or false"),
    ({"kind": "loop", "size": "1G", "mount_options": ["noatime", "bad opt"]}, "mount_options", "not a mount option"),
    ({"kind": "loop", "size": "1G", "mkfs_options": "-K"}, "mkfs_options", "list of strings"),
    ({"kind": "loop", "size": "1G", "backing_file": "rel.img"}, "backing_file", "absolute path"),
    ({"kind": "blockdev"}, "device", "required"),
    ({"kind": "blockdev", "device": "sdb"}, "device", "/dev/nvme0n1"),
    ({"kind": "mdraid", "devices": ["/dev/sdb"]}, "devices", "at least 2"),
    ({"kind": "mdraid", "devices": ["/dev/sdb", "/dev/sdb"]}, "devices", "twice"),
    ({"kind": "mdraid", "devices": ["/dev/sdb", "/dev/sdc"], "chunk": "300K"}, "chunk", "power of two"),
    ({"kind": "mdraid", "devices": ["/dev/sdb", "/dev/sdc"], "level": 5}, "level", "allowed: 0"),
    ({"kind": "pmem"}, "mode", "allowed: fsdax, sector, devdax"),
    ({"kind": "pmem", "mode": "memory"}, "mode", "allowed: fsdax, sector, devdax"),
    ({"kind": "pmem", "mode": "fsdax", "namespace": "ns0"}, "namespace", "namespace0.0"),
    ({"kind": "pmem", "mode": "fsdax", "sector_size": 512}, "sector_size", "only for mode sector"),
    ({"kind": "pmem", "mode": "sector", "align": "2M"}, "align", "only for mode fsdax or devdax"),
    ({"kind": "pmem", "mode": "fsdax", "align": "4M"}, "align", "allowed: 4K, 2M, 1G"),
    ({"kind": "pmem", "mode": "devdax", "fstype": "xfs"}, "fstype", "only for mode fsdax or sector"),
    ({"kind": "pmem", "mode": "sector", "mount_options": ["dax"]}, "mount_options", "sector mode"),
    ({"kind": "throttled", "read_iops": 10}, "base", "allowed kinds: loop, ram-block, blockdev, mdraid, pmem"),
    ({"kind": "throttled", "base": {"kind": "tmpfs", "size": "1G"}, "read_iops": 10}, "base.kind",
     "no block device"),
    ({"kind": "throttled", "base": {"kind": "loop", "size": "1G", "path": "/x"}, "read_iops": 10}, "base.path",
     "on the throttled medium itself"),
    ({"kind": "throttled", "base": {"kind": "loop", "size": "1G"}}, "", "at least one of read_iops"),
    ({"kind": "throttled", "base": {"kind": "loop", "size": "1G"}, "read_iops": -3}, "read_iops", "positive"),
    ({"kind": "throttled", "base": {"kind": "loop", "size": "1G"}, "read_iops": 3, "cgroup": "v3"}, "cgroup",
     "allowed: auto, v1, v2"),
    ({"kind": "throttled", "base": {"kind": "loop"}, "read_iops": 3}, "base.size", "required"),
    ({"kind": "throttled", "base": {"kind": "pmem", "mode": "devdax"}, "read_iops": 3}, "base.mode",
     "allowed: fsdax, sector"),
    ({"kind": "tmpfs", "size": "1G", "emulates": "optane"}, "emulates", "allowed: " + ", ".join(EMULATES)),
    ({"kind": "tmpfs", "size": "1G", "path": "relative"}, "path", "absolute path"),
    ({"kind": "tmpfs", "size": "1G", "path": "/"}, "path", "absolute path below /"),
    ({"kind": "dir", "description": 3}, "description", "string"),
])
def test_errors_name_the_field_and_what_is_allowed(raw: dict[str, Any], field: str, allowed: str) -> None:
    msg = err(raw)
    prefix = "inventory.hosts[db1].media.m" + (f".{field}" if field else "")
    assert msg.startswith(prefix + ":"), msg
    assert allowed in msg, msg


def test_unknown_keys_list_the_allowed_ones_for_the_kind() -> None:
    msg = err({"kind": "tmpfs", "size": "1G", "fstype": "xfs"})
    assert msg.startswith("inventory.hosts[db1].media.m: unknown key(s) fstype for kind tmpfs")
    assert "allowed: kind, path, emulates, description, size, mount_options" in msg
    assert "unknown key(s) sunits" in err({"kind": "loop", "size": "1G", "sunits": 1})


def test_medium_names_must_be_usable_in_file_and_cgroup_names() -> None:
    assert "medium name 'a b'" in err({"kind": "dir"}, name="a b")
    assert "medium name '../x'" in err({"kind": "dir"}, name="../x")


def inv(media: dict[str, Any], **host: Any) -> Inventory:
    return parse_inventory({"hosts": [{"name": "db1", "media": media, **host}]})


def test_parse_inventory_with_media(tmp_path: Path) -> None:
    i = inv(EXAMPLES, workdir="/srv/dbm")
    h = i.host("db1")
    assert isinstance(h, HostSpec) and set(h.media) == set(EXAMPLES)
    assert h.media["loop"].options["backing_file"] == "/srv/dbm/media-backing/loop.img"
    f = tmp_path / "inv.yaml"
    f.write_text(yaml.safe_dump({"hosts": [{"name": "db1", "workdir": "/srv/dbm", "media": EXAMPLES}]}))
    assert load_inventory(f) == i


def test_host_without_media_gets_the_disk_directory() -> None:
    h = parse_inventory({"hosts": [{"name": "db1", "workdir": "/w"}]}).hosts[0]
    assert list(h.media) == ["disk"] and h.media["disk"] == Medium("disk", "dir", "/w/media/disk")


def test_media_paths_must_not_overlap() -> None:
    with pytest.raises(SpecError, match=r"media\.b\.path: '/d/x' is also the path of medium 'a'"):
        inv({"a": {"kind": "dir", "path": "/d/x"}, "b": {"kind": "tmpfs", "size": "1G", "path": "/d/x"}})
    with pytest.raises(SpecError, match=r"media\.b\.path: '/d/x/y' is inside medium 'a'"):
        inv({"a": {"kind": "tmpfs", "size": "1G", "path": "/d/x"}, "b": {"kind": "dir", "path": "/d/x/y"}})
    # a directory may contain other media's mount points
    inv({"a": {"kind": "dir", "path": "/d"}, "b": {"kind": "tmpfs", "size": "1G", "path": "/d/t"}})


def test_inventory_level_errors() -> None:
    with pytest.raises(SpecError, match=r"inventory\.hosts: must be a non-empty list"):
        parse_inventory({"hosts": []})
    with pytest.raises(SpecError, match=r"inventory\.hosts\[db1\]\.media: must be a mapping"):
        inv(["disk"])  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"inventory\.hosts\[db1\]\.workdir: 'w' must be an absolute path"):
        inv({}, workdir="w")
    with pytest.raises(SpecError, match=r"inventory\.hosts\[db1\]\.port"):
        inv({}, port=70000)
    with pytest.raises(SpecError, match="no host 'x'; hosts: db1"):
        inv({}).host("x")
    with pytest.raises(SpecError, match="does not exist"):
        load_inventory("/nonexistent/inventory.yaml")


def test_host_class_is_parsed_and_validated() -> None:
    inv = parse_inventory({"hosts": [{"name": "a", "class": "big"}, {"name": "b"}]})
    assert [h.host_class for h in inv.hosts] == ["big", None]
    with pytest.raises(SpecError, match=r"inventory.hosts\[a\].class"):
        parse_inventory({"hosts": [{"name": "a", "class": "big machine"}]})
    with pytest.raises(SpecError, match=r"inventory.hosts\[a\].class"):
        parse_inventory({"hosts": [{"name": "a", "class": 3}]})
