"""A study = profile + experiment spec + inventory + result store; what notebooks and the CLI load."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import paths
from .inventory import Inventory, load_inventory
from .spec import Experiment, SpecError, check_media, load_spec
from .store import ResultStore

PROFILES = ("smoke", "quick", "full")


@dataclass(frozen=True)
class Study:
    profile: str
    spec_path: Path
    experiment: Experiment
    inventory: Inventory
    store: ResultStore

    def check(self) -> None:
        """Everything that can be checked before the first run (media names per host)."""
        for h in self.inventory.hosts:
            check_media(self.experiment, h.media, h.name)


def profile_params(profile: str) -> dict[str, Any]:
    p = paths.params_file(profile)
    if not p.is_file():
        known = sorted(x.stem for x in p.parent.glob("*.yaml"))
        raise SpecError(f"profile: unknown profile {profile!r}; allowed: {', '.join(known)}")
    return yaml.safe_load(p.read_text()) or {}


def _resolve(path: str | Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else paths.repo_root() / p


def load_study(
    profile: str = "smoke",
    spec: str | Path | None = None,
    inventory: str | Path | None = None,
    results_dir: str | Path | None = None,
) -> Study:
    """Resolve a profile's parameters (notebooks/params/<profile>.yaml), overridable one by one."""
    params = profile_params(profile)
    spec_path = _resolve(spec or params.get("spec") or f"specs/{profile}.yaml")
    inv = inventory or params.get("inventory")
    experiment = load_spec(spec_path)
    study = Study(
        profile=profile,
        spec_path=spec_path,
        experiment=experiment,
        inventory=load_inventory(_resolve(inv) if inv else None),
        store=ResultStore(Path(results_dir) if results_dir else paths.results_dir(profile)),
    )
    study.check()
    return study
