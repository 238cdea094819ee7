"""A client-thread sweep that varies no storage factor (seed 001's concurrency axis, seed 000's saturation)."""

from __future__ import annotations

from typing import ClassVar

from dbmatrix.analyse.kinds.base import StudyKind
from dbmatrix.spec.experiment import Experiment

STORAGE_FACTORS = ("engine", "block_size", "compression", "medium", "log_medium")
OTHER = ("server_build",)  # a sweep across server builds is a builds study (kinds.builds)


class ThreadsKind(StudyKind):
    name: ClassVar[str] = "threads"
    noun: ClassVar[str] = "threads study"
    prefix: ClassVar[str] = "thr"
    paper_hooks: ClassVar[tuple[str, ...]] = ("threads-macros",)

    def recognises(self, exp: Experiment) -> bool:
        return len(exp.factors.get("threads", ())) > 1 and not any(
            len(exp.factors.get(f, ())) > 1 for f in (*STORAGE_FACTORS, *OTHER))
