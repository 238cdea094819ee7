"""The engine registry: innodb, myrocks (in the order specs and messages list them).

Every storage engine is an object (:class:`Engine`, one module each beside this one) that the spec, the
parsers' callers and the run side look up by the cell's ``engine`` level; nothing outside this package
branches on an engine's name (``tests/unit/test_engines.py`` checks it). A new engine is one module with an
:class:`Engine` subclass, added to :data:`BUILTIN` below: its levels, server options, cache, counters and
dataset measures all live in that module.
"""

from __future__ import annotations

from dbmatrix.engines.base import Engine, block_size_bytes
from dbmatrix.engines.innodb import InnoDB
from dbmatrix.engines.myrocks import MyRocks

__all__ = ["BUILTIN", "Engine", "block_size_bytes", "engine", "engines", "find", "harness_options", "names",
           "plugin_option", "register", "startup_options", "unregister"]

BUILTIN: tuple[Engine, ...] = (InnoDB(), MyRocks())
_ENGINES: dict[str, Engine] = {}


def register(e: Engine) -> Engine:
    """Add an engine after those registered before."""
    if not e.name:
        raise ValueError("engine: name must be set")
    if e.name in _ENGINES:
        raise ValueError(f"engine: {e.name!r} is registered already; registered: {', '.join(_ENGINES)}")
    _ENGINES[e.name] = e
    return e


def unregister(name: str) -> None:
    """Remove an engine (tests that register one of their own)."""
    _ENGINES.pop(name, None)


def engines() -> tuple[Engine, ...]:
    return tuple(_ENGINES.values())


def names() -> tuple[str, ...]:
    return tuple(_ENGINES)


def engine(name: str) -> Engine:
    """The engine of a cell's ``engine`` level; ValueError naming the registered ones."""
    try:
        return _ENGINES[name]
    except KeyError:
        raise ValueError(f"engine: {name!r}; allowed: {', '.join(_ENGINES)}") from None


def find(name: str) -> Engine | None:
    """The engine of that name, None for a name no engine has (an old or foreign record)."""
    return _ENGINES.get(name)


def harness_options() -> frozenset[str]:
    """The server options the engines' renderings set (a spec may not hold them constant)."""
    return frozenset().union(*(e.harness_options for e in _ENGINES.values()))


def startup_options() -> list[str]:
    """The options every server gets from its built-in engines, whatever the cell's engine."""
    return [o for e in _ENGINES.values() if e.plugin is None for o in e.startup_options]


def plugin_option(option: str, cell_engine: str) -> bool:
    """Whether a server option (underscores) belongs to a plugin engine other than the cell's: mariadbd
    refuses it where that plugin is not loaded."""
    return any(e.plugin is not None and e.name != cell_engine and option.startswith(e.option_prefix)
               for e in _ENGINES.values())


for _e in BUILTIN:
    register(_e)
