"""The placeholder checker (dbmatrix.publish.placeholders): a planted "--" or an undefined macro fails with
the macro's name and place; clean text passes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dbmatrix.publish.paper import render_macros
from dbmatrix.publish.placeholders import (
    MISSING_MACRO,
    Finding,
    PlaceholderError,
    check_log,
    check_sources,
    check_text,
    is_placeholder,
    missing_value,
    value_placeholders,
)


def _paper(tmp_path: Path, macros: dict[str, str], body: str) -> Path:
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "macros.tex").write_text(render_macros(macros))
    (tmp_path / "main.tex").write_text(body)
    return tmp_path


@pytest.mark.parametrize("value", ["--", " -- ", "", "n/a", "nan", "NaN", "None", "??", "\\textendash{}"])
def test_whole_value_placeholders(value: str) -> None:
    assert is_placeholder(value)
    assert render_macros({"claimX": value}).endswith(f"\\newcommand{{\\claimX}}{{{missing_value('claimX')}}}\n")


@pytest.mark.parametrize("value", ["0.70", "0.32--0.42", "1.15 [1.02, 1.31]", "none", "-36.2 pts",
                                   "\\texttt{-{}-rand-type}", "Prais--Winsten", "agree"])
def test_values_that_are_not_placeholders(value: str) -> None:
    assert not is_placeholder(value) and value_placeholders(value) == []
    assert f"{{{value}}}" in render_macros({"x": value})


def test_a_placeholder_inside_a_value() -> None:
    assert value_placeholders("C1 -- (agree), C2 1.02") == ["--"]
    assert value_placeholders("measured: n/a") == ["n/a"]


def test_a_planted_placeholder_fails_with_the_macro_name_and_place(tmp_path: Path) -> None:
    d = _paper(tmp_path, {"claimBufferPoolMeasured": "--", "claimBufferPoolVerdict": "agree", "unused": "--"},
               "Intro.\n% a comment \\claimBufferPoolMeasured\nbuffer-pool claim: \\claimBufferPoolMeasured, "
               "\\claimBufferPoolVerdict.\n")
    found = check_sources(d)
    assert found == [Finding("main.tex:3", "has no value in this build's data", "claimBufferPoolMeasured")]
    assert "\\claimBufferPoolMeasured" in str(PlaceholderError(found))  # the build's error names it


def test_clean_text_passes(tmp_path: Path) -> None:
    d = _paper(tmp_path, {"cacheRatio": "0.36", "cacheRatioText": "0.36 (95\\,\\% CI 0.32--0.42)"},
               "The ratio is \\cacheRatio{} and \\cacheRatioText.\n")
    assert check_sources(d) == []
    assert check_text("ratio 0.36 (95 % CI 0.32\u20130.42), Prais\u2013Winsten, --rand-type=uniform\n"
                      "\fpage two: 1\u20134 threads, a blank cell \u2014 in a table\n") == []
    assert check_log("LaTeX Warning: Reference `fig:a' on page 1 undefined on input line 3.\n"[:0]) == []


def test_placeholders_in_the_pdf_text_are_found_with_their_page() -> None:
    text = "page one is clean\n\fthe buffer-pool claim: \u2013, agree\nmeasured: n/a and ??\nmean nan\n"
    found = check_text(text)
    assert [f.where for f in found] == ["page 2, line 1", "page 2, line 2", "page 2, line 2", "page 2, line 3"]
    assert "claim: \u2013, agree" in found[0].text
    assert check_text("a lone -- here\n")  # an unrendered -- too


def test_undefined_macros_references_and_citations_in_the_log() -> None:
    log = ("! Undefined control sequence.\n<recently read> \\claimNoSuch \n"
           "l.42 buffer-pool claim: \\claimNoSuch\n"
           "LaTeX Warning: Reference `tab:nosuch' on page 3 undefined on input line 7.\n"
           "LaTeX Warning: Citation `nosuch2020' on page 1 undefined on input line 9.\n"
           "! Package dbmatrix Error: no value for macro c\nlaimX (the data of this build does not give it).\n\n")
    found = check_log(log, 'Warning--I didn\'t find a database entry for "nosuch2020"\n')
    text = "\n".join(str(f) for f in found)
    assert "main.log l.42: undefined: buffer-pool claim: \\claimNoSuch" in text
    assert "tab:nosuch" in text and "nosuch2020" in text and "main.blg" in text
    assert any(f.macro == "claimX" for f in found)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="needs pdflatex")
def test_latex_stops_at_a_macro_without_value_and_names_it(tmp_path: Path) -> None:
    """The generated definition makes LaTeX itself fail where the text uses a macro without a value."""
    (tmp_path / "m.tex").write_text(render_macros({"claimX": "--", "fine": "1.2"}))
    (tmp_path / "t.tex").write_text("\\documentclass{article}\\begin{document}\\input{m.tex}"
                                    "ok \\fine{} then \\claimX\\end{document}\n")
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=tmp_path,
                       capture_output=True, text=True, check=False)
    assert r.returncode != 0
    log = (tmp_path / "t.log").read_text()
    found = check_log(log)
    assert [f.macro for f in found if f.macro] == ["claimX"], log[-800:]
    assert MISSING_MACRO not in (tmp_path / "t.tex").read_text()
