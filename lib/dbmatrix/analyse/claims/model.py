"""The claim registry's types: a seed's claim, the premises it depended on, and the evidence a study offers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from dbmatrix.analyse.campaign_model import campaign_column, campaigns_of
from dbmatrix.analyse.hosts import hosts_of, pooling_allowed


@dataclass(frozen=True)
class Premise:
    """A condition the seed's result depended on, checked from our data.

    kinds: ``fc_paused`` (flow control paused the nodes >= threshold % of the time at the lowest applier
    level), ``compresses`` (the claim's engine's dataset under lz4 is at most 1/threshold of the
    uncompressed one), ``saturated`` (the host's CPUs >= threshold busy at the lower compared thread level),
    ``cache_below_data`` (at the claim's lowest cache level the cache holds less than the logical data:
    with uniform access the working set is all of it)."""

    kind: str
    threshold: float
    text: str  # what the seed had, in words (plain text)


@dataclass(frozen=True)
class PremiseCheck:
    met: bool | None  # None: the data cannot tell (said in `value`)
    value: str  # the measured value, in words


@dataclass(frozen=True)
class Claim:
    id: str  # letters only: used in macro names (claim<Id>Verdict ...)
    seed: str  # "003"
    where: str  # "slide 13"
    text: str  # the seed's claim, short, in English
    metric: str
    band: tuple[float, float]  # the values of the estimate the claim asserts
    test: str = "direction"  # "direction" | "within"
    kind: str = "ratio"  # "ratio" (a/b) | "difference" (a - b) | "share"
    factor: str | None = None
    a: Any = None  # level, or "min", "max", "second-max", "emulated:pmem", "native"
    b: Any = None
    at: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ("storage",)  # study kinds that can test it, preferred first
    stand_in: str = ""  # what stands in for the seed's condition (said in the table)
    not_tested: str = ""  # set: never testable here, for this reason
    premises: tuple[Premise, ...] = ()

    @property
    def null(self) -> float:
        return 0.0 if self.kind == "difference" else 1.0


@dataclass
class Evidence:
    """What a study offers the claims: its processed runs (with a ``campaign`` column when it has several
    campaigns), for Galera its effect table and runs, for scale-out its own tables, and per campaign the
    tables that are not recomputed from the runs here (``campaign_extra[k]``)."""

    experiment: str
    kind: str
    runs: pd.DataFrame
    level_order: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    replication: pd.DataFrame | None = None
    host_check: pd.DataFrame | None = None  # processed/hosts.csv (several hosts only)
    extra: Mapping[str, pd.DataFrame] = field(default_factory=dict)  # a scale-out study's own tables
    design: Mapping[str, Any] | None = None  # Experiment.design_info()
    host_cpus: Mapping[str, int] = field(default_factory=dict)  # host -> logical CPUs
    campaign_extra: Mapping[int, Mapping[str, pd.DataFrame]] = field(default_factory=dict)
    campaign_records: Sequence[Mapping[str, Any]] = ()  # processed/campaigns.json (analyse.campaign_records)

    def hosts(self) -> list[str]:
        return hosts_of(self.runs)

    def campaigns(self) -> list[int]:
        return campaigns_of(self.runs)

    def campaign(self, k: int) -> Evidence:
        """The evidence of campaign `k` alone."""
        runs = self.runs[campaign_column(self.runs) == k] if not self.runs.empty else self.runs
        extra = {**self.extra, **self.campaign_extra.get(k, {})}
        repl = extra.get("replication-effects", self.replication)
        return replace(self, runs=runs, extra=extra, replication=repl, campaign_extra={})

    def for_claims(self) -> tuple[Evidence, str]:
        """The runs claims are judged on, and what the claims table says about the hosts: all runs
        ("pooled: h1, h2") when the host check allows pooling (:mod:`dbmatrix.analyse.hosts`), else the
        runs of one host class ("class big: h1"; the class with the most runs, ties by name; a host
        without a declared class is its own class). One host: all runs, ""."""
        hosts = self.hosts()
        if len(hosts) < 2:
            return self, ""
        if pooling_allowed(self.host_check if self.host_check is not None else pd.DataFrame()):
            return self, "pooled: " + ", ".join(hosts)
        cls = (self.runs["host_class"].where(self.runs["host_class"].notna(), self.runs["host"]).astype(str)
               if "host_class" in self.runs.columns else self.runs["host"].astype(str))
        sizes = cls.value_counts()
        best = sorted(sizes.index, key=lambda c: (-int(sizes[c]), c))[0]
        runs = self.runs[cls == best]
        members = ", ".join(sorted(str(h) for h in runs["host"].unique()))
        return replace(self, runs=runs, host_check=None), f"class {best}: {members}"


