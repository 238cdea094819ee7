"""Claims fixed before the data: what each claim was when a campaign started, and whether it changed since.

A campaign's record (``campaigns/<k>.json``, :func:`dbmatrix.run.campaigns.merge_record`) stores, when the
campaign starts, the :func:`current_registration`: one digest per claim of its *definition* (metric,
compared levels, conditions, band, test, its effective margin, bound, combination of conditions, premises,
the seed's conditions: everything but the prose that paraphrases or quotes the seed), a digest of the
verdict rule (:data:`dbmatrix.analyse.claims.verdicts.RULE`: regions, bounds, premises, combinations, level,
margins, the steady-state rule) and a digest of the code that computes estimates and verdicts. A claim is
then, against the first campaign whose data it is judged on (:func:`registration_status`):

- ``fixed before data``: its definition and the rule are the ones that campaign recorded (a record from
  before the rule was registered has no rule digest: its claims' digests decide);
- ``revised after data``: that campaign recorded another definition of it, or another rule;
- ``added after data``: that campaign's registry did not have it;
- ``not registered``: the campaign predates registration (its record has none), so nothing says whether
  the claim was fixed before its data; the table says so once, not per claim.

A change of the verdict code since the first campaign is reported per study (:func:`code_changed`): it
can move every verdict, so it is not attributed to one claim. The code's digest is taken over its syntax
trees without docstrings (comments never reach them), so rewording an explanation is not a change; a
campaign also records each file's digest (``verdict_code_files``), so that a later reader is told which files
changed since (:func:`files_changed`), not only that something did.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbmatrix.analyse.claims.model import Claim
from dbmatrix.analyse.claims.verdicts import RULE

STATUSES = ("fixed before data", "revised after data", "added after data", "not registered")
REVISED = ("revised after data", "added after data")  # the statuses a reader must be warned of
# paraphrase, notes and the seed's own words: not the definition. ``quote`` is the source a claim was read
# from (correcting its transcription must not mark the claim revised); the seed's conditions are part of the
# definition (a claim judged under other conditions is another claim), except our note of how they are
# reproduced (``conditions.reproduction``)
PROSE = frozenset({"text", "where", "stand_in", "not_tested", "quote"})
CONDITIONS_PROSE = frozenset({"reproduction"})
VERDICT_CODE = ("dbmatrix.analyse.claims",)  # the import closure of these modules computes the verdicts


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def definition(claim: Claim) -> dict[str, Any]:
    """The claim as a plain dict without its prose (premises without their description either), with its
    effective margin of no effect (declared, else its metric's) and its bound and combination."""
    d = dataclasses.asdict(claim)
    d["equivalence"] = claim.equivalence
    for k in PROSE:
        d.pop(k, None)
    d["premises"] = [{k: v for k, v in p.items() if k != "text"} for p in d.get("premises", [])]
    if d.get("trend") is None:
        d.pop("trend", None)  # a claim without a trend keeps the digest it had before trends existed
    if d.get("conditions") is None:
        d.pop("conditions", None)  # a claim without conditions keeps the digest it had before they existed
    else:
        d["conditions"] = {k: v for k, v in d["conditions"].items() if k not in CONDITIONS_PROSE}
    return d


def claim_digest(claim: Claim) -> str:
    """A short digest of the claim's definition (:func:`definition`): rewording the paraphrase keeps it."""
    return _digest(definition(claim))


def rule_digest() -> str:
    """A short digest of the verdict rule (:data:`~dbmatrix.analyse.claims.verdicts.RULE`)."""
    return _digest(RULE)


def registry(claims: Sequence[Claim], code_digest: str | None = None,
             code_files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The registration a campaign stores: per claim id its digest, the rule's digest, the digest of them
    all (claims and rule), the verdict code's digest and, when given, its files' (path -> digest)."""
    per = {c.id: claim_digest(c) for c in claims}
    rule = rule_digest()
    out = {"claims": per, "rule": rule, "registry": _digest({"claims": per, "rule": rule}),
           "verdict_code": code_digest}
    if code_files is not None:
        out["verdict_code_files"] = dict(sorted(code_files.items()))
    return out


def registration_status(claim: Claim, registration: Mapping[str, Any] | None) -> str:
    """The claim against the registration of the first campaign its verdict uses (see the module doc)."""
    if not registration or not isinstance(registration.get("claims"), Mapping):
        return "not registered"
    recorded = registration["claims"].get(claim.id)
    if recorded is None:
        return "added after data"
    rule = registration.get("rule")
    same_rule = rule is None or rule == rule_digest()  # a record from before the rule was registered: None
    return "fixed before data" if recorded == claim_digest(claim) and same_rule else "revised after data"


def first_registration(campaigns: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The registration of the lowest-numbered campaign (the first data a claim is judged on)."""
    ordered = sorted(campaigns, key=lambda r: int(r.get("campaign") or 0))
    return ordered[0].get("registration") if ordered else None


def code_changed(campaigns: Sequence[Mapping[str, Any]], code_digest: str | None) -> list[int]:
    """The campaigns whose recorded verdict-code digest differs from `code_digest` (registered ones only)."""
    out = []
    for r in sorted(campaigns, key=lambda r: int(r.get("campaign") or 0)):
        reg = r.get("registration") or {}
        if reg.get("verdict_code") and code_digest and reg["verdict_code"] != code_digest:
            out.append(int(r.get("campaign") or 0))
    return out


def files_changed(registration: Mapping[str, Any] | None, files: Mapping[str, str]) -> list[str] | None:
    """The verdict code's files that differ between a campaign's `registration` and `files` (path ->
    digest, :func:`verdict_code_files`): changed, added or removed, sorted; None when the registration has
    no per-file digests (recorded before they were kept)."""
    recorded = (registration or {}).get("verdict_code_files")
    if not isinstance(recorded, Mapping):
        return None
    return sorted(f for f in set(recorded) | set(files) if recorded.get(f) != files.get(f))


def code_digest_of(files: Mapping[str, str]) -> str:
    """The verdict code's digest from its files' digests (:func:`verdict_code_files`)."""
    return _digest(dict(sorted(files.items())))


def source_digest(text: str) -> str:
    """A digest of Python source that ignores comments, layout and docstrings: its syntax tree with the
    docstrings of the module, classes and functions removed (text that does not parse: the text itself)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return hashlib.sha256(text.encode()).hexdigest()[:16]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- reading the code (I/O)

def verdict_code_digest(lib_root: Path | None = None) -> str:
    """A digest of the source files the verdicts are computed by (:func:`verdict_code_files`)."""
    return code_digest_of(verdict_code_files(lib_root))


def verdict_code_files(lib_root: Path | None = None, cache: Path | None = None) -> dict[str, str]:
    """The files the verdicts are computed by: the import closure of :data:`VERDICT_CODE` in the package
    (:mod:`dbmatrix.codedeps`), each path (relative to the package's parent) -> :func:`source_digest`.
    Parsing the import graph takes about two seconds and every run, build and view asks for it, while reading
    the package's bytes takes milliseconds: the answer is kept per content of the package's files (this
    module's own among them) in the process and on disk (:func:`dbmatrix.cache.kept`, under `cache`)."""
    from dbmatrix.cache import content_key

    root = lib_root or Path(__file__).resolve().parents[3]
    return dict(_verdict_code_files(root, content_key(root, root.rglob("*.py")), cache))


@functools.lru_cache(maxsize=8)
def _verdict_code_files(root: Path, content: str, cache: Path | None) -> tuple[tuple[str, str], ...]:
    """:func:`verdict_code_files` for one content of the package (`content` keys both caches)."""
    from dbmatrix import codedeps
    from dbmatrix.cache import kept

    def compute() -> list[list[str]]:
        graph = codedeps.load_graph(root)
        return [[str(Path(f).relative_to(root)), source_digest(Path(f).read_text())]
                for f in codedeps.closure(graph, VERDICT_CODE)]

    def load(value: Any) -> tuple[tuple[str, str], ...]:
        if not (isinstance(value, list) and value and all(
                isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e) for e in value)):
            raise ValueError("not a list of [file, digest] pairs")
        return tuple((f, d) for f, d in value)

    return kept("verdict-code", content, compute, cache, load)


def current_registration() -> dict[str, Any]:
    """The registry of the claims as the code defines them now, with the verdict code's digest."""
    from dbmatrix.analyse.claims.catalogue import all_claims

    files = verdict_code_files()
    return registry(all_claims(), code_digest_of(files), files)
