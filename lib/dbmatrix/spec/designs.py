"""Designs (pure): the full factorial, regular two-level fractions of resolution V or more with their
generators and resolution, and the crossed design (a half fraction of the two-level factors crossed with
every level of the others) with its aliases; the checks a spec must pass to use one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dbmatrix.spec.errors import SpecError
from dbmatrix.spec.factors import FACTORS

DESIGNS = ("full", "fractional", "crossed")
# Regular two-level fractions of resolution V or more (every main effect and two-way interaction
# estimable, aliased only with three-way or higher interactions), by number of varied factors:
# (index of the generated factor, indexes of the base factors whose product gives it).
# Standard minimum-aberration generators (Montgomery, Design and Analysis of Experiments, table 8.14);
# their resolution is recomputed by `resolution` and checked by the unit tests.
FRACTION_GENERATORS: dict[int, list[tuple[int, tuple[int, ...]]]] = {
    5: [(4, (0, 1, 2, 3))],  # 2^(5-1)_V: E = ABCD
    6: [(5, (0, 1, 2, 3, 4))],  # 2^(6-1)_VI: F = ABCDE
    7: [(6, (0, 1, 2, 3, 4, 5))],  # 2^(7-1)_VII: G = ABCDEF
    8: [(6, (0, 1, 2, 3)), (7, (0, 1, 4, 5))],  # 2^(8-2)_V: G = ABCD, H = ABEF
    9: [(7, (0, 2, 3, 5, 6)), (8, (1, 2, 4, 5, 6))],  # 2^(9-2)_VI: H = ACDFG, J = BCEFG
}


def resolution(k: int, generators: list[tuple[int, tuple[int, ...]]]) -> int:
    """Length of the shortest word in the defining relation of a 2^(k-p) fraction."""
    words = [frozenset((g, *base)) for g, base in generators]
    shortest = k
    for mask in range(1, 2 ** len(words)):
        w: frozenset[int] = frozenset()
        for i, word in enumerate(words):
            if mask >> i & 1:
                w = w ^ word
        shortest = min(shortest, len(w))
    return shortest


def fractional_runs(factors: Mapping[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The runs of the resolution-V fraction for these two-level factors (first level coded -1)."""
    names = list(factors)
    k = len(names)
    gens = FRACTION_GENERATORS[k]
    base = k - len(gens)
    runs = []
    for bits in range(2 ** base):
        code = [1 if bits >> (base - 1 - i) & 1 else -1 for i in range(base)] + [0] * len(gens)
        for g, word in gens:
            prod = 1
            for i in word:
                prod *= code[i]
            code[g] = prod
        runs.append({n: factors[n][0 if c < 0 else 1] for n, c in zip(names, code)})
    return runs


def design_text(info: Mapping[str, Any]) -> str:
    """The design in words (plain text), from :meth:`Experiment.design_info`."""
    if info["design"] == "fractional":
        return f"{info['fraction']} fraction, resolution {info['resolution']} ({', '.join(info['generators'])})"
    if info["design"] == "crossed":
        letters = ", ".join(f"{k}={v}" for k, v in info["letters"].items())
        return (f"{info['fraction']} half fraction ({', '.join(info['generators'])}; {letters}) crossed with "
                f"every level of {', '.join(info['crossed_with'])}; aliased: {'; '.join(info['aliases'])}")
    return "full factorial"


def half_fraction_runs(factors: Mapping[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The half fraction of these two-level factors whose last factor is the product of the others (first
    level coded -1): defining relation I = ABC... (resolution = the number of factors)."""
    names = list(factors)
    k = len(names)
    runs = []
    for bits in range(2 ** (k - 1)):
        code = [1 if bits >> (k - 2 - i) & 1 else -1 for i in range(k - 1)]
        last = 1
        for c in code:
            last *= c
        runs.append({n: factors[n][0 if c < 0 else 1] for n, c in zip(names, [*code, last])})
    return runs


def crossed_design_info(varied: list[str], two: list[str], cells: int) -> dict[str, Any]:
    """A crossed design's description: the half fraction 2^(k-1) of the `two`-level factors (I = the word of
    all of them) crossed with every level of the other varied factors. Aliases: each effect S of the
    two-level factors with its complement in the word (S x W), and so each interaction of a crossed factor M
    with S with M x (S x W). With the crossed factors' interactions with each two-level factor in the model,
    the two-level factors' interactions with each other are the aliased ones left out."""
    letters = dict(zip(two, "ABCDEFGHJK"))
    word = "".join(letters[f] for f in two)
    others = [f for f in varied if f not in two]
    aliases = [f"{letters[f]}={word.replace(letters[f], '')}" for f in two]
    aliases += [f"{m} x {letters[f]} = {m} x {word.replace(letters[f], '')}" for m in others for f in two]
    return {"design": "crossed", "factors": varied, "cells": cells, "letters": letters,
            "generators": [f"{word[-1]}={word[:-1]}"], "resolution": len(two),
            "fraction": f"2^({len(two)}-1)", "crossed_with": others, "aliases": aliases}


def check_fractional(factors: Mapping[str, tuple[Any, ...]]) -> None:
    varied = [f for f in FACTORS if len(factors[f]) > 1]
    for f in varied:
        if len(factors[f]) != 2:
            raise SpecError(f"factors.{f}: a fractional design needs exactly two levels per varied factor; "
                            f"{f} has {len(factors[f])}; use design: full")
    if "rate_fraction" in varied:
        raise SpecError("factors.rate_fraction: open-loop cells need their closed-loop twin in the design; "
                        "use design: full with open-loop levels")
    if len(varied) not in FRACTION_GENERATORS:
        lo, hi = min(FRACTION_GENERATORS), max(FRACTION_GENERATORS)
        raise SpecError(f"design: fractional needs {lo} to {hi} varied two-level factors (fewer have no "
                        f"resolution-V fraction smaller than the full design); this spec varies {len(varied)}"
                        f" ({', '.join(varied) or 'none'}); use design: full")


def check_crossed(factors: Mapping[str, tuple[Any, ...]]) -> None:
    varied = [f for f in FACTORS if len(factors[f]) > 1]
    two = [f for f in varied if len(factors[f]) == 2]
    multi = [f for f in varied if len(factors[f]) > 2]
    if "rate_fraction" in varied:
        raise SpecError("factors.rate_fraction: open-loop cells need their closed-loop twin in the design; "
                        "use design: full with open-loop levels")
    if not 3 <= len(two) <= 6:
        raise SpecError(f"design: crossed halves the two-level factors and needs 3 to 6 of them; this spec "
                        f"varies {len(two)} ({', '.join(two) or 'none'}); use design: full")
    if not multi:
        raise SpecError("design: crossed needs at least one varied factor with three or more levels to cross "
                        "the fraction with; with two-level factors only use design: fractional or full")
