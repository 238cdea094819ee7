"""A comparison of storage media across client threads, nothing else of the storage varied (seed 001's
local against remote storage: specs/paper-remote.yaml). Its own kind, not the storage matrix: the paper's
primary study and its unprefixed numbers stay the storage matrix's (or the first study's)."""

from __future__ import annotations

from typing import ClassVar

from dbmatrix.analyse.kinds.base import StudyKind
from dbmatrix.spec.experiment import Experiment

OTHER_STORAGE = ("engine", "block_size", "compression", "log_medium")


class MediaKind(StudyKind):
    name: ClassVar[str] = "media"
    noun: ClassVar[str] = "media study"
    prefix: ClassVar[str] = "med"

    def recognises(self, exp: Experiment) -> bool:
        f = exp.factors
        return (len(f.get("medium", ())) > 1 and len(f.get("threads", ())) > 1
                and not any(len(f.get(x, ())) > 1 for x in OTHER_STORAGE))
