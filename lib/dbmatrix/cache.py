"""What dbmatrix keeps between invocations because it is slow to compute: hosts' option lists
(:mod:`dbmatrix.hosts.server_options`), and answers computed from the package's own source, such as the
verdict code's file digests (:mod:`dbmatrix.analyse.claims.registration`) and the makefile's code lists
(``dbmatrix sources --make``), which parse every module (seconds) where reading the bytes takes milliseconds.
Each is keyed so that a stale entry is never read: the latter by the bytes they are computed from. No imports
from the package: the verdict code reads it, and its digest covers what it imports."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
KEEP = 16  # the newest entries kept per kind (a checkout being edited makes one per edit)


def cache_dir() -> Path:
    """``$DBMATRIX_CACHE_DIR``, else ``$XDG_CACHE_HOME/dbmatrix``, else ``~/.cache/dbmatrix``."""
    env = os.environ.get("DBMATRIX_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dbmatrix"


def content_key(root: Path, files: Iterable[Path], *extra: str) -> str:
    """A digest of where `root` is, each file's path under it and bytes, and `extra` strings."""
    h = hashlib.sha256(json.dumps([str(root), *extra]).encode())
    for p in sorted(files):
        data = p.read_bytes()
        h.update(f"{p.relative_to(root)}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:32]


def kept(kind: str, key: str, compute: Callable[[], Any], cache: Path | None = None,
         load: Callable[[Any], T] = lambda value: value, keep: int | None = KEEP) -> T:
    """`load` of `compute()`'s JSON value, read from ``<cache>/<kind>/<key>.json`` when there (a file that
    does not parse, or that `load` refuses with ValueError, KeyError, TypeError or AssertionError, is computed
    again), else computed and written there; the newest `keep` of a kind stay (None: all). A cache that cannot
    be written only costs the time."""
    path = (cache or cache_dir()) / kind / f"{key}.json"
    try:
        return load(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        pass
    value = compute()
    loaded = load(value)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value, sort_keys=True))
        tmp.replace(path)
        if keep is not None:
            for old in sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)[:-keep]:
                old.unlink(missing_ok=True)
    except OSError:
        pass
    return loaded
