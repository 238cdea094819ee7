"""No placeholder in the paper: a number the data does not give must fail the build, not print as "--".

Three nets, from the source to the PDF:

1. :func:`missing_value`: a generated macro without a value (``--``, ``n/a``, ``nan``, empty, ...) is
   written as ``\\dbmatrixMissing{name}``, which stops LaTeX with an error naming the macro
   (:data:`MISSING_DEFINITION`) wherever the text uses it;
2. :func:`check_sources`: every generated macro the paper's own ``.tex`` files use, whose value is or
   contains a placeholder, with the file and line of each use (before LaTeX runs);
3. :func:`check_log` and :func:`check_text`: after LaTeX, undefined references, citations and control
   sequences in the log, and placeholders left in the built PDF's text (``pdftotext``): a lone en dash or
   ``--`` where a number belongs, ``n/a``, ``??``, ``nan``.

A table cell that has no value on purpose (not applicable) prints :data:`NOT_APPLICABLE`, an em dash,
which the checks accept; a lone en dash is always a placeholder ("--" in LaTeX source).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

MISSING_MACRO = "dbmatrixMissing"
# \PackageError stops a -halt-on-error build; the message names the macro without a value.
MISSING_DEFINITION = (
    f"\\providecommand{{\\{MISSING_MACRO}}}[1]{{\\PackageError{{dbmatrix}}{{no value for macro #1 (the data "
    "of this build does not give it)}{A generated macro is a placeholder; see paper/generated/macros.tex}}\n")
NOT_APPLICABLE = "\u2014"  # (an em dash) a table cell without a value on purpose (the caption says why)

# (not "none": a level's name, e.g. compression none; Python's None is caught case-sensitively)
_PLACEHOLDER_VALUES = {"", "-", "--", "---", "n/a", "na", "nan", "null", "?", "??", "unknown", "inf", "-inf",
                       "+inf"}
# inside a longer value: a lone "--" or en dash (not a range between two numbers or words), n/a, ??, nan
_IN_VALUE = re.compile(r"(?<![\w.}])(?:--|\u2013)(?![\w{\\$])|\bn/a\b|\?\?|\bnan\b|\bNaN\b|\bNone\b|"
                       + re.escape("\\" + MISSING_MACRO))
# in the PDF's text: the same, and an en dash or "--" alone between spaces/punctuation
_IN_TEXT = re.compile(r"(?<![\w.\-\u2013])(?:--|\u2013)(?![\w\-\u2013])|\bn/a\b|\?\?|\bnan\b|\bNaN\b")


@dataclass(frozen=True)
class Finding:
    """One placeholder: where (a file and line, or a PDF page), what, and the macro when one is to blame."""

    where: str
    text: str
    macro: str = ""

    def __str__(self) -> str:
        who = f"\\{self.macro}: " if self.macro else ""
        return f"{self.where}: {who}{self.text}"


class PlaceholderError(RuntimeError):
    """The paper has placeholders where numbers belong (the findings name the macros and places)."""

    def __init__(self, findings: Iterable[Finding]):
        self.findings = list(findings)
        super().__init__("placeholders in the paper:\n" + "\n".join(f"  {f}" for f in self.findings))


def is_placeholder(value: str) -> bool:
    """A macro value that stands for a missing number: "--", "n/a", "nan", "", "None", "??" ..."""
    v = value.strip().replace("\\textendash", "--").replace("{}", "").strip()
    return v.lower() in _PLACEHOLDER_VALUES or v == "None"


def missing_value(name: str) -> str:
    """The macro body written in place of a placeholder: a LaTeX error naming the macro when used."""
    return f"\\{MISSING_MACRO}{{{name}}}"


def value_placeholders(value: str) -> list[str]:
    """The placeholders inside a macro value (empty: none); a whole-value placeholder counts too."""
    if is_placeholder(value):
        return [value.strip() or "(empty)"]
    return [m.group(0) for m in _IN_VALUE.finditer(_strip_tex_dashes(value))]


def _strip_tex_dashes(tex: str) -> str:
    """A LaTeX value without the dashes that are not placeholders: -{}- (a literal --), ranges a--b."""
    return tex.replace("-{}-", "").replace("\\textemdash", "")


_DEF = re.compile(r"\\(?:newcommand|renewcommand|providecommand)\{\\([A-Za-z]+)\}\{(.*)\}\s*$")
_USE = re.compile(r"\\([A-Za-z]+)")


def read_macros(tex: str) -> dict[str, str]:
    """name -> value of the one-line ``\\newcommand{\\name}{value}`` definitions (generated macro files)."""
    out = {}
    for line in tex.splitlines():
        m = _DEF.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _uncommented(line: str) -> str:
    return re.split(r"(?<!\\)%", line, maxsplit=1)[0]


_INPUT = re.compile(r"\\(?:input|include)\{([^}]+)\}")


def included_files(paper_dir: Path, main: str = "main.tex") -> list[Path]:
    """main.tex and every .tex file it inputs, recursively (a figure's fragment only when the build's
    generated/figures.tex inputs it)."""
    seen: list[Path] = []
    todo = [paper_dir / main]
    while todo:
        f = todo.pop(0)
        if f in seen or not f.is_file():
            continue
        seen.append(f)
        for line in f.read_text().splitlines():
            for name in _INPUT.findall(_uncommented(line)):
                todo.append(paper_dir / (name if name.endswith(".tex") else name + ".tex"))
    return seen


def check_sources(paper_dir: Path, macros: Mapping[str, str] | None = None) -> list[Finding]:
    """Each use, in the .tex files the paper inputs (:func:`included_files`), of a generated macro whose
    value is or holds a placeholder: file:line and the macro's name. `macros` defaults to every
    generated ``*macros.tex`` of ``paper_dir/generated``."""
    if macros is None:
        macros = {}
        for f in sorted((paper_dir / "generated").glob("*macros.tex")):
            macros = {**macros, **read_macros(f.read_text())}
    bad = {n: value_placeholders(v) for n, v in macros.items()}
    bad = {n: p for n, p in bad.items() if p}
    findings = []
    for f in included_files(paper_dir):
        if f.name.endswith("macros.tex"):
            continue
        rel = f.relative_to(paper_dir)
        for i, line in enumerate(f.read_text().splitlines(), 1):
            for name in _USE.findall(_uncommented(line)):
                if name in bad:
                    value = macros[name]
                    findings.append(Finding(f"{rel}:{i}", "has no value in this build's data" if (
                        is_placeholder(value) or value.startswith("\\" + MISSING_MACRO)) else
                        f"its value holds a placeholder ({', '.join(bad[name])}): {value}", name))
    return findings


_LOG_PATTERNS = (
    re.compile(r"LaTeX Warning: (?:Reference|Citation) [`'](?P<what>[^']+)' on page \d+ undefined"),
    re.compile(r"Package natbib Warning: Citation [`'](?P<what>[^']+)' on page \d+ undefined"),
    re.compile(r"! Undefined control sequence\.\s*\n(?:.*\n)?l\.(?P<line>\d+) (?P<what>.*)"),
    re.compile(r"! Package dbmatrix Error: (?P<what>(?:.+\n)+?)\n"),  # (the log wraps long lines)
    re.compile(r"LaTeX Warning: There were undefined references"),
    re.compile(r"Warning--I didn't find a database entry for \"(?P<what>[^\"]+)\""),
)


def check_log(log: str, blg: str = "") -> list[Finding]:
    """Undefined references, citations and control sequences, and dbmatrix's missing-value errors, in
    LaTeX's log (and a citation BibTeX could not find, in its .blg)."""
    findings = []
    for text, where in ((log, "main.log"), (blg, "main.blg")):
        for pat in _LOG_PATTERNS:
            for m in pat.finditer(text):
                what = (m.groupdict().get("what") or m.group(0)).replace("\n", "")
                line = m.groupdict().get("line")
                macro = re.search(r"no value for macro (\w+)", what)
                findings.append(Finding(f"{where}" + (f" l.{line}" if line else ""),
                                        f"undefined: {what.strip()}" if line else
                                        what.strip() if macro else m.group(0).splitlines()[0],
                                        macro.group(1) if macro else ""))
    return findings


def check_text(text: str) -> list[Finding]:
    """Placeholders in a PDF's text (pdftotext; pages split at form feeds): page, line and context."""
    findings = []
    for page, body in enumerate(text.split("\f"), 1):
        for i, line in enumerate(body.splitlines(), 1):
            for m in _IN_TEXT.finditer(line):
                lo, hi = max(0, m.start() - 30), m.end() + 30
                findings.append(Finding(f"page {page}, line {i}", repr(line[lo:hi].strip())))
    return findings


def check_built(paper_dir: Path, pdf_text: str) -> list[Finding]:
    """After a build: the log's and the PDF text's findings."""
    log = paper_dir / "main.log"
    blg = paper_dir / "main.blg"
    return (check_log(log.read_text(errors="replace") if log.is_file() else "",
                      blg.read_text(errors="replace") if blg.is_file() else "")
            + check_text(pdf_text))
