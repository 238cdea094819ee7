"""Ctrl-C during `dbmatrix notebooks`: passed on to the kernel, whose cell stops cleanly; the command then
ends with its own message and exit code 130, with no traceback of papermill's event loop after it. Starts
one Jupyter kernel (a few seconds), no database server."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat

from dbmatrix import paths

CELL = """\
import signal, sys, time
print('started', flush=True)
try:
    time.sleep(120)
except KeyboardInterrupt:
    print('kernel: stopping cleanly', file=sys.stderr, flush=True)
    time.sleep(1)  # a cleanup that takes a moment (stopping servers); papermill used to kill it
    print('kernel: stopped', file=sys.stderr, flush=True)
    raise
"""

DRIVER = """\
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background job ignores it)
from dbmatrix import cli
from dbmatrix.commands import notebooks
from dbmatrix.commands.interrupts import execute_notebook

def run_notebooks(*args, **kwargs):
    execute_notebook({nb!r}, {out!r}, kernel_name="python3", progress_bar=False, log_output=False,
                     stdout_file=sys.stdout, stderr_file=sys.stderr)

notebooks.run_notebooks = run_notebooks
sys.exit(cli.main(["notebooks", "--profile", "smoke"]))
"""


def test_ctrl_c_stops_the_kernels_cell_cleanly_and_ends_with_our_message_only(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "sleep.ipynb")
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    script = DRIVER.format(nb=str(tmp_path / "sleep.ipynb"), out=str(tmp_path / "out.ipynb"))
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=o, stderr=e,
                                cwd=paths.repo_root())
        deadline = time.monotonic() + 90
        while "started" not in out.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "started" in out.read_text(), err.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, err.read_text()
    stderr = err.read_text()
    assert "kernel: stopping cleanly" in stderr and "kernel: stopped" in stderr  # not killed mid-cleanup
    assert "Traceback" not in stderr and "Task exception" not in stderr, stderr
    assert stderr.rstrip().endswith("interrupted: completed runs are kept; run the same command again to resume")
