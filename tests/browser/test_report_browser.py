"""The HTML report (`dbmatrix report`) in a real browser: headless Chromium (Debian's chromium + chromedriver,
driven by Selenium) opens the file from disk (file://, no server), and every figure decodes, the claims
table has rows, and no request leaves the file.

Built from the repository's committed figures and generated paper inputs (read only). The screenshot goes to
$DBMATRIX_ARTEFACTS/browser (else a pytest temporary directory); its path is printed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lib"))
from tests.browser.chromium import artefacts_dir, chromium  # noqa: E402

from dbmatrix.publish.report import TITLE, write_report  # noqa: E402


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return artefacts_dir(tmp_path_factory, "report-screenshots")


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium("1300,1600", tmp_path_factory.mktemp("chromium")) as d:
        d.set_page_load_timeout(60)
        yield d


def test_the_report_opens_from_disk_with_every_figure_and_the_claims(driver: Any, artefacts: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from selenium.webdriver.common.by import By

    # the repository's committed figures and paper inputs, for this test only (a later test, e.g. notebook 30
    # under nbval, must still write into the temporary output root)
    monkeypatch.delenv("DBMATRIX_OUTPUT_ROOT", raising=False)
    page = write_report(tmp_path / "report.html")
    driver.get(page.resolve().as_uri())
    assert driver.title == TITLE
    images = driver.execute_script(
        "return Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth, i.src.slice(0, 22)]);")
    assert len(images) >= 5, images
    broken = [alt for alt, complete, width, _ in images if not complete or width <= 0]
    assert broken == [], f"figures that did not decode: {broken}"
    assert {src for *_, src in images} == {"data:image/png;base64,"}
    rows = driver.find_elements(By.CSS_SELECTOR, "table.claims tbody tr")
    assert len(rows) > 0
    verdicts = {r.find_elements(By.TAG_NAME, "td")[5].text for r in rows}
    assert verdicts & {"agree", "disagree", "inconclusive"}, verdicts
    assert driver.find_elements(By.CSS_SELECTOR, "table.cells tbody tr"), "no cells table"
    assert driver.find_elements(By.CSS_SELECTOR, "table.hosts tbody tr"), "no host facts"
    # nothing was fetched but the file itself (no server, no network)
    fetched = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name);")
    assert [u for u in fetched if not u.startswith(("data:", "file:"))] == []
    shot = artefacts / "report.png"
    driver.save_screenshot(str(shot))
    driver.execute_script("document.getElementById('figures').scrollIntoView();")
    figures_shot = artefacts / "report-figures.png"
    driver.save_screenshot(str(figures_shot))
    print(f"report screenshots: {shot} (top), {figures_shot} (figures); report {page}")
