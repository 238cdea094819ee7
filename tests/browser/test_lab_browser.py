"""A person in JupyterLab, in a real browser: headless Chromium (Debian's chromium + chromedriver, driven by
Selenium) against JupyterLab started here on 127.0.0.1 with a token, over a temporary copy of the notebooks.

- Opening a notebook does not mark it modified (its metadata are what Lab writes for the dbmatrix kernel).
- Notebook 40: Run All shows the explorer with a rendered figure and no error; pressing a level and picking
  another metric redraw the figure; saving leaves the tracked notebook byte for byte as committed.
- Every notebook is opened as committed, with no injected parameters: 20 and 30 open and render (their Run
  All on the committed reference, a copy in DBMATRIX_REFERENCE, is nbval's in the same `make test`);
  Run All on 00 and 10 gives no error and only prints what they would install and run (their
  `confirm_install` / `run` default to False).

Screenshots go to $DBMATRIX_ARTEFACTS (else a pytest temporary directory); their paths are printed.
Skipped only where Chromium is missing and we are not root (as root, `make setup` installs it: a failure).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lib"))
from tests.browser.chromium import artefacts_dir, chromium, need_browser  # noqa: E402

from dbmatrix import lab  # noqa: E402
from dbmatrix.explore import metric_options  # noqa: E402


def explore_label(metric: str) -> str:
    """The metric dropdown's text for a column (its options are (label, column) pairs)."""
    import pandas as pd

    return dict((v, k) for k, v in metric_options(pd.DataFrame({metric: [1.0]})))[metric]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kernelspec_installed() -> bool:
    dirs = [Path(sys.prefix) / "share/jupyter/kernels", Path("/usr/local/share/jupyter/kernels"),
            Path("/usr/share/jupyter/kernels")]
    return any((d / lab.KERNEL_NAME / "kernel.json").is_file() for d in dirs)


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return artefacts_dir(tmp_path_factory, "lab-screenshots")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    need_browser()
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    # The notebooks are opened as committed (no injected parameters): 20/30 read the committed reference
    # and 20 writes processed tables beside it, so the reference they see is a copy (DBMATRIX_REFERENCE).
    shutil.copytree(ROOT / "data" / "reference", tmp / "reference")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "lib"), os.environ.get("PYTHONPATH")])),
           "DBMATRIX_OUTPUT_ROOT": str(tmp / "out"), "DBMATRIX_REFERENCE": str(tmp / "reference")}
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR",
                "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        env[var] = str(tmp / var.lower())
        Path(env[var]).mkdir()
    notif = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text('{"checkForUpdates": false, "fetchNews": "false"}')
    if not _kernelspec_installed():  # make setup installs it into the venv; without it, here only
        spec = Path(env["JUPYTER_DATA_DIR"]) / "kernels" / lab.KERNEL_NAME
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": lab.KERNEL_DISPLAY_NAME, "language": "python", "metadata": {"debugger": True}}))
        print(f"kernel {lab.KERNEL_NAME} not installed (make setup does): using {spec}")
    port, token = _free_port(), os.urandom(16).hex()
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--ServerApp.token={token}", f"--ServerApp.root_dir={root}", "--allow-root",
         "--ContentsManager.pre_save_hook=dbmatrix.lab.pre_save_hook", "--LabApp.expose_app_in_browser=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(tmp / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.2)
        yield {"base": base, "token": token, "root": root, "tmp": tmp, "log": tmp / "lab.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def driver(server: dict[str, Any]) -> Iterator[Any]:
    with chromium("1500,1150", server["tmp"] / "chromium") as d:
        d.set_script_timeout(30)
        yield d


# ------------------------------------------------------------------------------------ helpers

STATE_JS = """
const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!w || !w.context || !w.sessionContext) return null;
const k = w.sessionContext.session && w.sessionContext.session.kernel;
const cells = [];
for (const c of w.model.cells) {
  if (c.type !== 'code') continue;
  cells.push({n: c.executionCount, errors: c.outputs.toJSON().filter(o => o.output_type === 'error')
                                      .map(o => o.ename + ': ' + o.evalue),
              stderr: c.outputs.toJSON().filter(o => o.output_type === 'stream' && o.name === 'stderr')
                                      .map(o => String(o.text))});
}
return {path: w.context.path, status: k ? k.status : null, kernel: k ? k.name : null,
        dirty: w.context.model.dirty, cells: cells};
"""


def wait_for(fn: Any, timeout: float, what: str, driver: Any = None, shot: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    from selenium.common.exceptions import StaleElementReferenceException

    while True:
        try:
            v = fn()
        except StaleElementReferenceException:  # the page re-rendered what `fn` was reading: not ready yet
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            if driver is not None and shot is not None:
                driver.save_screenshot(str(shot))
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}"
                                 + (f" (screenshot {shot})" if shot else ""))
        time.sleep(0.25)


def state(driver: Any) -> dict[str, Any] | None:
    return driver.execute_script(STATE_JS)


def open_notebook(driver: Any, server: dict[str, Any], name: str, artefacts: Path) -> dict[str, Any]:
    driver.get(f"{server['base']}/lab/tree/notebooks/{name}.ipynb?token={server['token']}&reset")
    st = wait_for(lambda: (s := state(driver)) and s["path"].endswith(f"{name}.ipynb") and s["status"] == "idle" and s,
                  60, f"{name} open with an idle kernel", driver, artefacts / f"{name}-timeout.png")
    assert st["kernel"] == lab.KERNEL_NAME, f"{name} runs in kernel {st['kernel']}, not the project's"
    time.sleep(0.5)  # Lab writes kernel metadata once the kernel is ready: let it
    if lab.running_python_matches():
        assert not state(driver)["dirty"], f"opening {name} marked it modified (metadata rewritten)"
    return st


def menu(driver: Any, top: str, item: str) -> None:
    """Click a main-menu entry as a person does (e.g. Run > Run All Cells)."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.XPATH, f"//li[contains(@class,'lm-MenuBar-item')][.//div[text()='{top}']]").click()
    wait_for(lambda: driver.find_elements(By.XPATH, f"//li[contains(@class,'lm-Menu-item')][.//div[text()='{item}']]"),
             10, f"menu {top} > {item}")
    driver.find_element(By.XPATH, f"//li[contains(@class,'lm-Menu-item')][.//div[text()='{item}']]").click()


def run_all(driver: Any, name: str, timeout: float, artefacts: Path) -> dict[str, Any]:
    menu(driver, "Run", "Run All Cells")

    def done() -> dict[str, Any] | None:
        s = state(driver)
        return s if s and s["status"] == "idle" and all(c["n"] is not None for c in s["cells"]) else None

    st = wait_for(done, timeout, f"{name}: every cell run", driver, artefacts / f"{name}-timeout.png")
    errors = [e for c in st["cells"] for e in c["errors"]]
    assert not errors, f"{name}: error outputs {errors}"
    tracebacks = [t for c in st["cells"] for t in c["stderr"] if "Traceback" in t or "Error" in t]
    assert not tracebacks, f"{name}: {tracebacks}"
    return st


def figure_srcs(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    return [i.get_attribute("src") for i in driver.find_elements(
        By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img")]


def shoot(driver: Any, element: Any, path: Path) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
    time.sleep(0.3)
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")


# ------------------------------------------------------------------------------------ the test


def test_explore_and_analysis_notebooks_in_jupyterlab(server: dict[str, Any], driver: Any,
                                                      artefacts: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    t0 = time.monotonic()
    nb40 = server["root"] / "notebooks" / "40-explore.ipynb"
    committed = nb40.read_bytes()

    # ---- 40: Run All, a figure, no error
    open_notebook(driver, server, "40-explore", artefacts)
    run_all(driver, "40-explore", 90, artefacts)
    srcs = wait_for(lambda: [s for s in figure_srcs(driver) if s and s.startswith("data:image/png")], 30,
                    "a rendered figure in 40", driver, artefacts / "40-no-figure.png")
    explorer = driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .widget-vbox")
    shoot(driver, explorer, artefacts / "40-explore-run-all.png")
    explorer.screenshot(str(artefacts / "40-explorer-widget.png"))
    print(f"screenshot: {artefacts / '40-explorer-widget.png'}")
    assert not driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) "
                                                     "[data-mime-type='application/vnd.jupyter.stderr']")

    # ---- press a level: the figure changes
    innodb = driver.find_element(By.XPATH, "//button[contains(@class,'widget-toggle-button')][normalize-space()='innodb']")
    assert "mod-active" not in innodb.get_attribute("class")  # the parameters filter engine = myrocks
    innodb.click()
    srcs2 = wait_for(lambda: [s for s in figure_srcs(driver) if s and s.startswith("data:image/png") and s not in srcs],
                     30, "the figure to change after pressing innodb", driver, artefacts / "40-no-change.png")
    # ---- pick another metric: the figure and the table change
    metric = driver.find_element(By.XPATH, "//div[contains(@class,'widget-dropdown')][.//label[text()='Metric']]//select")
    Select(metric).select_by_visible_text(explore_label("p95_ms"))
    wait_for(lambda: [s for s in figure_srcs(driver) if s and s.startswith("data:image/png") and s not in srcs2],
             30, "the figure to change after picking p95", driver, artefacts / "40-no-change-metric.png")
    wait_for(lambda: "p95 latency (ms)" in explorer.text, 10, "the table to show p95 latency (ms)")
    shoot(driver, explorer, artefacts / "40-explore-innodb-p95.png")
    explorer.screenshot(str(artefacts / "40-explorer-widget-p95.png"))

    # ---- save: the tracked notebook stays as committed (outputs dropped, metadata unchanged)
    driver.execute_script("return window.jupyterapp.commands.execute('docmanager:save')")
    wait_for(lambda: not state(driver)["dirty"], 15, "40 saved")
    time.sleep(0.5)
    saved = nb40.read_bytes()
    if lab.running_python_matches():
        assert saved == committed, "running 40 and saving changed the tracked notebook"
    assert all(not c.get("outputs") for c in json.loads(saved)["cells"] if c["cell_type"] == "code")

    # ---- 20 and 30 as committed: they open and render (Run All of both, on a copy of the reference, is
    # nbval's: `pytest notebooks` executes them with their committed parameters in the same session)
    for name, title in (("20-analysis", "Analysis"), ("30-figures", "Figures and paper inputs")):
        open_notebook(driver, server, name, artefacts)
        heading = driver.find_element(By.CSS_SELECTOR,
                                      ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown h1")
        assert title in heading.text, (name, heading.text)
        driver.save_screenshot(str(artefacts / f"{name}.png"))

    # ---- 00 and 10 as committed: a plan printed, nothing installed or measured
    for name, said in (("00-host-setup", "confirm_install = False: nothing was changed"),
                       ("10-run-matrix", "run = False: nothing measured")):
        open_notebook(driver, server, name, artefacts)
        run_all(driver, name, 120, artefacts)
        panel = driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden)")
        wait_for(lambda said=said, panel=panel: said in panel.text, 10, f"{name} to say {said!r}", driver,
                 artefacts / f"{name}-no-plan.png")
        driver.save_screenshot(str(artefacts / f"{name}.png"))
    assert not list((server["tmp"] / "out").glob("data/runs/*/raw/*")), "a notebook as committed measured"
    print(f"browser test: {time.monotonic() - t0:.1f} s after JupyterLab was up; screenshots in {artefacts}")
