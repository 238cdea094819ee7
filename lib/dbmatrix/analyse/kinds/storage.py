"""The storage matrix: engines, cache, block size, compression and media (the fallback kind)."""

from __future__ import annotations

from typing import ClassVar

from dbmatrix.analyse.kinds.base import StudyKind


class StorageKind(StudyKind):
    name: ClassVar[str] = "storage"
    prefix: ClassVar[str] = ""
    fallback: ClassVar[bool] = True
    primary: ClassVar[bool] = True
