"""dbmatrix.hosts.mounts: the one findmnt -J parser and its helpers."""

from __future__ import annotations

import json

import pytest

from dbmatrix.hosts.mounts import Mount, mount_of, parse_findmnt_json, real_mounts, visible_mount

# `findmnt -J -o TARGET,SOURCE,FSTYPE,OPTIONS` on this machine (util-linux 2.38.1), cut to a few mounts.
TREE = """{
   "filesystems": [
      {
         "target": "/",
         "source": "/dev/vda",
         "fstype": "ext4",
         "options": "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534",
         "children": [
            {
               "target": "/proc",
               "source": "proc",
               "fstype": "proc",
               "options": "rw,relatime"
            },{
               "target": "/sys",
               "source": "sysfs",
               "fstype": "sysfs",
               "options": "rw,relatime",
               "children": [
                  {
                     "target": "/sys/fs/cgroup",
                     "source": "tmpfs",
                     "fstype": "tmpfs",
                     "options": "rw,relatime,mode=755"
                  }
               ]
            },{
               "target": "/dev/shm",
               "source": "tmpfs",
               "fstype": "tmpfs",
               "options": "rw,relatime,size=24684084k"
            }
         ]
      }
   ]
}
"""


def test_parse_flattens_the_tree_parents_first() -> None:
    mounts = parse_findmnt_json(TREE)
    assert [m.target for m in mounts] == ["/", "/proc", "/sys", "/sys/fs/cgroup", "/dev/shm"]
    assert mounts[0] == Mount("/", "/dev/vda", "ext4", "rw,relatime,discard,resv_strict,resuid=65534,resgid=65534")
    assert mounts[0].option_list[:2] == ("rw", "relatime") and mounts[0].size is None
    assert [m.target for m in real_mounts(mounts)] == ["/", "/sys/fs/cgroup", "/dev/shm"]
    assert mounts[4].as_fact() == {"target": "/dev/shm", "source": "tmpfs", "fstype": "tmpfs",
                                   "options": "rw,relatime,size=24684084k"}


def test_columns_not_asked_for_are_none_and_size_is_an_int() -> None:
    text = json.dumps({"filesystems": [{"target": "/m", "source": "t", "fstype": "tmpfs", "size": 67108864},
                                       {"target": "/m", "source": "u", "fstype": "tmpfs", "size": "1024"}]})
    a, b = parse_findmnt_json(text)
    assert a.options is None and a.option_list == () and a.size == 67108864 and b.size == 1024
    assert visible_mount([a, b]) is b and mount_of([a, b], "/m") is b and mount_of([a, b], "/n") is None
    assert visible_mount([]) is None


def test_empty_and_garbage() -> None:
    assert parse_findmnt_json("") == [] and parse_findmnt_json(" \n") == []
    assert parse_findmnt_json('{"filesystems": []}') == []
    with pytest.raises(ValueError):
        parse_findmnt_json("findmnt: unknown column")
    with pytest.raises(ValueError):
        parse_findmnt_json("[1, 2]")


@pytest.mark.parametrize(("source", "fstype", "device"), [
    ("/dev/vda", "ext4", "/dev/vda"),
    ("/dev/vda2[/@home]", "btrfs", "/dev/vda2"),
    ("tmpfs", "tmpfs", None),
    ("/dev/fuse", "fuse.sshfs", None),
    ("server:/export", "nfs4", None),
    (None, None, None),
])
def test_block_source(source: str | None, fstype: str | None, device: str | None) -> None:
    assert Mount("/x", source, fstype, None).block_source == device
