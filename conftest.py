"""Test-session environment: every output goes to a temporary tree, never into the repository.

Set here (the root conftest) so that the notebook tests (nbval kernels inherit the environment)
and the unit/integration tests share it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

pytest_plugins = ["tests.conftest_sshd", "tests.conftest_netns", "tests.conftest_slurm"]

_made: list[str] = []
_nb_reference: list[str] = []  # the notebooks' copy of the reference (nbval only)
_REPO = os.path.dirname(os.path.abspath(__file__))
_TRACKED_OUTPUTS = ("figures", os.path.join("paper", "generated"), os.path.join("data", "reference"))
_before: dict[str, tuple[int, int]] = {}


def _snapshot() -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under the committed outputs (figures, paper inputs, the reference)."""
    out = {}
    for top in _TRACKED_OUTPUTS:
        for d, _, files in os.walk(os.path.join(_REPO, top)):
            for f in files:
                st = os.stat(os.path.join(d, f))
                out[os.path.relpath(os.path.join(d, f), _REPO)] = (st.st_size, st.st_mtime_ns)
    return out


def _xdist_controller(config) -> bool:
    """The pytest-xdist controller (``-n N``) runs no test: its workers each make their own tree below."""
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def pytest_configure(config):
    _before.update(_snapshot())
    if "DBMATRIX_OUTPUT_ROOT" not in os.environ and not _xdist_controller(config):
        root = tempfile.mkdtemp(prefix="dbmatrix-test-")
        _made.append(root)
        os.environ["DBMATRIX_OUTPUT_ROOT"] = os.path.join(root, "out")
        # Short path: unix socket paths are limited to 107 bytes.
        os.environ.setdefault("DBMATRIX_WORKDIR", os.path.join(root, "w"))
        os.environ.setdefault("DBMATRIX_CACHE_DIR", os.path.join(root, "cache"))  # hosts' option lists
        # Runs keep the page cache (dbmatrix.run.datasets.os_cache_policy): a drop before each of the suite's
        # hundred-odd runs makes the other worker's tests read their libraries, LaTeX and binaries from disk
        # again. A test of the drop itself sets DBMATRIX_OS_CACHE=drop.
        os.environ.setdefault("DBMATRIX_OS_CACHE", "keep")
        # The notebooks run as committed read the committed reference and analyse it (notebook 20 writes
        # processed tables beside the raw runs): give them a copy, so a test never writes into the repository.
        # Only the notebooks see it (pytest_runtest_setup below, which copies it before this worker's first
        # notebook): every other test reads the repository's.
        nbval = getattr(config.option, "nbval", False) or getattr(config.option, "nbval_lax", False)
        if nbval and "DBMATRIX_REFERENCE" not in os.environ:
            _nb_reference.append(os.path.join(root, "reference"))
        for var, sub in (("JUPYTER_CONFIG_DIR", "jupyter-config"), ("JUPYTER_DATA_DIR", "jupyter-data"),
                         ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"), ("IPYTHONDIR", "ipython"),
                         ("MPLCONFIGDIR", "mpl")):
            os.environ.setdefault(var, os.path.join(root, sub))


def pytest_collection_modifyitems(session, config, items):
    """The slow files first, the unit tests last (a stable sort: the order within each part stays). Under
    pytest-xdist (`make test`: --dist loadfile --no-loadscope-reorder) a worker takes the next whole file when it
    is free, so many short unit files at the end even out the two workers' finishing times; xdist's own order
    (files with the most tests first) put the integration files of one to three tests of a minute or two each
    last, where one worker ran such a file while the other had nothing left."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/unit/"))


def _is_notebook(item: pytest.Item | None) -> bool:
    return item is not None and item.nodeid.split("::")[0].endswith(".ipynb")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a notebook's first cell (nbval starts its kernel then, which inherits the environment)."""
    if _nb_reference and _is_notebook(item):
        if not os.path.isdir(_nb_reference[0]):
            shutil.copytree(os.path.join(_REPO, "data", "reference"), _nb_reference[0])
        os.environ["DBMATRIX_REFERENCE"] = _nb_reference[0]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if _nb_reference and _is_notebook(item) and not _is_notebook(nextitem):
        os.environ.pop("DBMATRIX_REFERENCE", None)


def _unmount_under(root: str) -> None:
    """Safety net: unmount file systems a failed test left mounted under our temporary tree
    (deepest first), so removing the tree never walks into a mount and none is leaked."""
    out = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    prefix = os.path.realpath(root) + os.sep
    for target in sorted((t for t in out.splitlines() if t.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True)


def pytest_unconfigure(config):
    for root in _made:
        _unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)


# ---- integration tests must run where they can --------------------------------------------------------
# On a machine that can run them (root, with mariadbd, sysbench and sshd installed, as `make setup` leaves
# CI), an integration test that skips is a failure: otherwise a broken fixture turns into a green run that
# tested nothing. Skips that say the hardware *exists* here (so the refusal path cannot be shown) are fine.
_HARDWARE_PRESENT = ("mariabackup is installed", "this host has PMEM regions", "this kernel has MD RAID",
                     "has no block device behind it")
_integration_skips: list[str] = []


def _can_run_integration() -> bool:
    return os.geteuid() == 0 and all(shutil.which(t) for t in ("mariadbd", "sysbench", "/usr/sbin/sshd"))


def pytest_runtest_logreport(report):
    if report.skipped and "integration" in report.keywords:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not any(ok in reason for ok in _HARDWARE_PRESENT):
            _integration_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    written = sorted(p for p, v in _snapshot().items() if _before.get(p) != v)
    if written:  # a test wrote into the repository's committed outputs (e.g. left DBMATRIX_OUTPUT_ROOT unset)
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(f"{len(written)} committed output file(s) written during the tests: "
                          + ", ".join(written[:8]) + (" ..." if len(written) > 8 else ""), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if _integration_skips and _can_run_integration() and not os.environ.get("DBMATRIX_ALLOW_SKIPS"):
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line("")
            tr.write_line(f"{len(_integration_skips)} integration test(s) skipped on a machine that can run them "
                          "(root, mariadbd, sysbench, sshd); set DBMATRIX_ALLOW_SKIPS=1 to accept:", red=True)
            for line in _integration_skips:
                tr.write_line(f"  {line}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
