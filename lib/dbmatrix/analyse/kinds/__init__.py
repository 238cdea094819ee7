"""The study-kind registry: soak, galera, scaleout, tpcc, threads, media, builds, storage (in the order they are
recognised).

Every kind is an object (:class:`StudyKind`, one module each beside this one) that analysis, the claims and
publishing dispatch through; nothing outside this package branches on a kind's name. A new kind is one
module with a :class:`StudyKind` subclass, registered with :func:`register` (its figures and paper hooks,
if it has its own, live in :mod:`dbmatrix.publish`: see ``tests/unit/test_study_kinds.py``)."""

from __future__ import annotations

from pathlib import Path

from dbmatrix.analyse.figure_data import StudyTables
from dbmatrix.analyse.kinds.base import STANDARD_FIGURES, PaperSection, StudyKind
from dbmatrix.spec.experiment import Experiment, SpecError
from dbmatrix.store import ResultStore

_KINDS: dict[str, StudyKind] = {}


def register(kind: StudyKind) -> StudyKind:
    """Add a kind; it is recognised before the fallback kind (storage), after the kinds registered before."""
    if not kind.name:
        raise ValueError("study kind: name must be set")
    if kind.name in _KINDS:
        raise ValueError(f"study kind: {kind.name!r} is registered already; registered: {', '.join(_KINDS)}")
    items = list(_KINDS.items())
    at = next((i for i, (_, k) in enumerate(items) if k.fallback), len(items))
    items.insert(at, (kind.name, kind))
    _KINDS.clear()
    _KINDS.update(items)
    return kind


def unregister(name: str) -> None:
    """Remove a kind (tests that register one of their own)."""
    _KINDS.pop(name, None)


def kinds() -> list[StudyKind]:
    """Every registered kind, in the order they are recognised."""
    return list(_KINDS.values())


def get_kind(name: str) -> StudyKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise SpecError(f"study kind: {name!r}; allowed: {', '.join(_KINDS)}") from None


def find_kind(name: str) -> StudyKind | None:
    """The kind of that name, None for a name no kind has (e.g. the pooled evidence of the claims)."""
    return _KINDS.get(name)


def kind_of(exp: Experiment) -> StudyKind:
    """What a study measures, the first kind that recognises its experiment."""
    for k in _KINDS.values():
        if k.recognises(exp):
            return k
    raise SpecError(f"{exp.name}: no study kind recognises it; registered: {', '.join(_KINDS)}")


def load_study_tables(store: ResultStore, exp: Experiment, kind: str = "storage", prefix: str = "",
                      spec_path: Path | None = None) -> StudyTables:
    """The processed tables of a study, as its kind loads them (:meth:`StudyKind.load_tables`)."""
    return get_kind(kind).load_tables(store, exp, prefix, spec_path)


def _register_builtin() -> None:
    from dbmatrix.analyse.kinds.builds import BuildsKind
    from dbmatrix.analyse.kinds.galera import GaleraKind
    from dbmatrix.analyse.kinds.media import MediaKind
    from dbmatrix.analyse.kinds.scaleout import ScaleoutKind
    from dbmatrix.analyse.kinds.soak import SoakKind
    from dbmatrix.analyse.kinds.storage import StorageKind
    from dbmatrix.analyse.kinds.threads import ThreadsKind
    from dbmatrix.analyse.kinds.tpcc import TpccKind

    for k in (StorageKind(), SoakKind(), GaleraKind(), ScaleoutKind(), TpccKind(), ThreadsKind(), MediaKind(),
              BuildsKind()):
        register(k)


_register_builtin()

__all__ = ["STANDARD_FIGURES", "PaperSection", "StudyKind", "find_kind", "get_kind", "kind_of", "kinds",
           "load_study_tables", "register", "unregister"]
