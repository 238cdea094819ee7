"""Headless Chromium for the browser tests (Debian's chromium + chromedriver, driven by Selenium): the one
place that checks they are there, starts a driver and says where screenshots go."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def need_browser() -> Any:
    """Selenium's webdriver module; skips where Chromium is missing and we are not root, fails as root
    (`make setup` installs it)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip: the test extra)")
    if missing:
        msg = f"browser test needs {', '.join(missing)} (make setup installs them: test role, .[test])"
        if os.geteuid() != 0:
            pytest.skip(msg + "; not root, so not installable here")
        pytest.fail(msg)
    from selenium import webdriver

    return webdriver


@contextmanager
def chromium(window: str, user_data_dir: Path) -> Iterator[Any]:
    """A headless Chromium of `window` size ("1300,1600"), quit on exit."""
    webdriver = need_browser()
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={window}",
              f"--user-data-dir={user_data_dir}", "--force-device-scale-factor=1"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield d
    finally:
        d.quit()


def artefacts_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """$DBMATRIX_ARTEFACTS/browser, else a pytest temporary directory called `name`."""
    env = os.environ.get("DBMATRIX_ARTEFACTS")
    d = Path(env) / "browser" if env else tmp_path_factory.mktemp(name)
    d.mkdir(parents=True, exist_ok=True)
    return d
