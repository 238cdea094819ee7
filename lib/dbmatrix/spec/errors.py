"""The error every spec and inventory check raises (its own module so that :mod:`dbmatrix.spec.factors` and
:mod:`dbmatrix.spec.experiment` can both raise it; import it from either), and the integer check several
parts of a spec share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SpecError(ValueError):
    """A spec or inventory is invalid; the message names the field and what is allowed."""


def positive_int(d: Mapping[str, Any], key: str, default: int | None, minimum: int = 1,
                 where: str = "") -> int:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{where}{key}: {value!r} must be an integer >= {minimum}")
    return value
