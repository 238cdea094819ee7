"""A comparison of server builds (the ``server_build`` factor), nothing of the storage varied: seed 001's server
versions, and here two point releases of MariaDB 10.11 as the factor's A/A check (specs/paper-builds.yaml)."""

from __future__ import annotations

from typing import ClassVar

from dbmatrix.analyse.kinds.base import StudyKind
from dbmatrix.spec.experiment import Experiment

STORAGE = ("engine", "block_size", "compression", "medium", "log_medium")


class BuildsKind(StudyKind):
    name: ClassVar[str] = "builds"
    noun: ClassVar[str] = "server-build study"
    prefix: ClassVar[str] = "bld"

    def recognises(self, exp: Experiment) -> bool:
        f = exp.factors
        return len(f.get("server_build", ())) > 1 and not any(len(f.get(x, ())) > 1 for x in STORAGE)
