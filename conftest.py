"""Test-session environment: every output goes to a temporary tree, never into the repository.

Set here (the root conftest) so that the notebook tests (nbval kernels inherit the environment)
and the unit/integration tests share it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

pytest_plugins = ["tests.conftest_sshd", "tests.conftest_netns"]

_made: list[str] = []


def pytest_configure(config):  # noqa: ANN001
    if "DBMATRIX_OUTPUT_ROOT" not in os.environ:
        root = tempfile.mkdtemp(prefix="dbmatrix-test-")
        _made.append(root)
        os.environ["DBMATRIX_OUTPUT_ROOT"] = os.path.join(root, "out")
        # Short path: unix socket paths are limited to 107 bytes.
        os.environ.setdefault("DBMATRIX_WORKDIR", os.path.join(root, "w"))
        for var, sub in (("JUPYTER_CONFIG_DIR", "jupyter-config"), ("JUPYTER_DATA_DIR", "jupyter-data"),
                         ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"), ("IPYTHONDIR", "ipython"),
                         ("MPLCONFIGDIR", "mpl")):
            os.environ.setdefault(var, os.path.join(root, sub))


def _unmount_under(root: str) -> None:
    """Safety net: unmount file systems a failed test left mounted under our temporary tree
    (deepest first), so removing the tree never walks into a mount and none is leaked."""
    out = subprocess.run(["findmnt", "-rn", "-o", "TARGET"], capture_output=True, text=True).stdout
    prefix = os.path.realpath(root) + os.sep
    for target in sorted((t for t in out.splitlines() if t.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True)


def pytest_unconfigure(config):  # noqa: ANN001
    for root in _made:
        _unmount_under(root)
        shutil.rmtree(root, ignore_errors=True)
