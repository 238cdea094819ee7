"""``docs/registry.md``'s generated block: the claim registry side by side with the seed texts (each claim's
location, the seed's own words, our reading, its band, the levels it is judged at and the seed's conditions),
our further findings, and what the rebuild from the seed texts merged, moved, added and revised. Pure text
from :mod:`.catalogue`; ``dbmatrix readme`` writes it and ``tests/unit/test_readme.py`` fails while the
committed file differs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dbmatrix.analyse.claims.catalogue import CLAIMS, FURTHER, HISTORY
from dbmatrix.analyse.claims.model import Claim, SeedConditions

SEEDS = {"000": "NDB Cluster in a box (000_*.txt)", "001": "GreatSQL, local vs InfiniBand NVMe (001_*.txt)",
         "002": "Galera applier threads (002_*.txt)", "003": "MyRocks on NVMe vs Optane PMEM (003_*.txt)",
         "004": "NVMe layout for NDB (004_*.txt)"}


def _plain(text: str) -> str:
    """The registry's LaTeX wording as markdown text, safe in a table cell."""
    for a, b in (("\\,", " "), ("\\%", "%"), ("$\\times$", "×"), ("--", "–"), ("\\_", "_"), ("~", " ")):
        text = text.replace(a, b)
    return text.replace("|", "\\|")


def _cell(text: str) -> str:
    """Plain text (the seeds' conditions, not LaTeX) safe in a table cell."""
    return text.replace("|", "\\|")


def _num(x: float) -> str:
    return f"{x:.3g}"


def band_words(c: Claim) -> str:
    """The band as a reader says it: "1–1.1 (direction)", "≤ 1.03 (within)", "> 1 (direction)"."""
    lo, hi = c.band
    unit = " pts" if c.kind == "difference" else " (share)" if c.kind == "share" else ""
    if math.isinf(hi):
        body = f"> {_num(lo)}"
    elif c.kind == "ratio" and lo <= 0:
        body = f"≤ {_num(hi)}"
    else:
        body = f"{_num(lo)} to {_num(hi)}" if lo < 0 else f"{_num(lo)}–{_num(hi)}"
    return f"{body}{unit} ({c.test})"


def judged_at(c: Claim) -> str:
    """What the claim compares and at which levels: "block_size 4k / 16k at engine=myrocks, cache_pct=0;
    per compression"."""
    if c.not_tested:
        return "not tested: " + _cell(c.not_tested)
    if c.factor is None:
        return f"{c.metric} ({c.kind}) over the {' / '.join(c.sources)} studies"
    at = ", ".join(f"{f}={v}" for f, v in c.at.items())
    return (f"{c.metric}: {c.factor} {c.a} / {c.b}" + (f" at {at}" if at else "")
            + (f"; per {', '.join(c.per)}" if c.per else "") + f" ({' / '.join(c.sources)})")


def _conditions(cond: SeedConditions) -> list[str]:
    lo, hi = cond.cache_pct or (0.0, 0.0)
    pct = ("" if cond.cache_pct is None else
           f" (cache {_num(lo)}" + (f"–{_num(hi)}" if hi != lo else "") + " % of the data)")
    threads = ("not said" if cond.threads == (0, 0) else
               f"{cond.threads[0]}–{cond.threads[1]}" if cond.threads[0] != cond.threads[1] else str(cond.threads[0]))
    here = ("—" if cond.threads_here == (0, 0) else
            f"{cond.threads_here[0]}–{cond.threads_here[1]}" if cond.threads_here[0] != cond.threads_here[1]
            else str(cond.threads_here[0]))
    return [f"- workload: {_cell(cond.workload)}", f"- engine: {_cell(cond.engine)}",
            f"- access distribution: {_cell(cond.access or 'not said')}", f"- cache: {_cell(cond.cache)}{pct}",
            f"- durability / binlog: {_cell(cond.durability)}",
            f"- client threads: the seed's {threads}; here {here} ({_cell(cond.thread_scaling)})",
            f"- hardware: {_cell(cond.hardware)}", f"- the seed's bottleneck: {_cell(cond.bottleneck)}",
            f"- how this repository reproduces it: {_cell(cond.reproduction)}"]


def _differs(cond: SeedConditions, base: SeedConditions) -> str:
    """The fields in which a claim's conditions differ from its seed's first claim's, in words."""
    parts = [f"{k}: {_cell(str(getattr(cond, k)))}" for k in ("workload", "engine", "access", "cache",
                                                                   "durability")
             if getattr(cond, k) != getattr(base, k)]
    return "; ".join(parts) or "as above"


def _claims_table(claims: Sequence[Claim], base: SeedConditions | None) -> list[str]:
    out = ["| claim | where | the seed's words | our reading | band | judged at | conditions |",
           "|---|---|---|---|---|---|---|"]
    for c in claims:
        cond = _differs(c.conditions, base) if c.conditions is not None and base is not None else "—"
        quote = "“" + c.quote.replace("|", "\\|") + "”" if c.quote else "—"
        out.append(f"| `{c.id}` | {_plain(c.where)} | {quote} | "
                   f"{_plain(c.text)} | {band_words(c)} | {judged_at(c)} | {cond} |")
    return out


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in ids)


def render_registry(claims: Sequence[Claim] = CLAIMS, further: Sequence[Claim] = FURTHER,
                    history: Sequence[Any] = HISTORY) -> str:
    """The generated block of ``docs/registry.md`` (markdown)."""
    lines = [f"{len(claims)} seed claims ({sum(1 for c in claims if c.not_tested)} of them not testable here, "
             f"each with its reason), {len(further)} further findings of ours.", ""]
    for seed in sorted({c.seed for c in claims}):
        mine = [c for c in claims if c.seed == seed]
        conds = [c.conditions for c in mine if c.conditions is not None]
        base = max(conds, key=conds.count) if conds else None  # the conditions most of its claims share
        lines += [f"### Seed {seed}: {SEEDS.get(seed, seed)}", ""]
        if base is not None:
            lines += ["The seed's conditions (those most of its claims share; a claim whose conditions differ "
                      "says how in its last column):", "", *_conditions(base), ""]
        lines += [*_claims_table(mine, base), ""]
    lines += ["### Further findings (ours, not the seeds' conclusions)", "",
              "Judged by the same rule, published in their own table (`paper/generated/further.csv`, "
              "Table `tab:further` of the paper).", "", *_claims_table(further, None), ""]
    lines += ["### Merged, moved, added, revised (the rebuild from the seed texts, issue 26)", "",
              "| change | before | after | why |", "|---|---|---|---|"]
    for h in history:
        lines.append(f"| {h.kind} | {_ids(h.old)} | {('`' + h.new + '`') if h.new else '—'} | {_cell(h.why)} |")
    counts = {k: sum(1 for h in history if h.kind == k) for k in ("merged", "moved", "added", "revised")}
    lines += ["", ", ".join(f"{n} {k}" for k, n in counts.items()) + " (rows above).", ""]
    lines += ["### The levels a study must measure for each claim (the paper profile's specs)", "",
              "| claim | study kinds | compared | held at | judged per |", "|---|---|---|---|---|"]
    for c in [*claims, *further]:
        if c.not_tested or c.factor is None:
            continue
        held = ", ".join(f"{f}={v}" for f, v in c.at.items()) or "—"
        lines.append(f"| `{c.id}` | {' / '.join(c.sources)} | {c.factor}: {c.a} / {c.b} | {held} | "
                     f"{', '.join(c.per) or '—'} |")
    return "\n".join(lines) + "\n"
