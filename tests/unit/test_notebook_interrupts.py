"""Ctrl-C during `dbmatrix notebooks`: passed on to the kernel, whose cell stops cleanly; the command then
ends with its own message and exit code 130, with no traceback of papermill's event loop after it, and
what the kernel process itself writes to its stderr once asked to shut down goes to a log beside the
notebook. Starts one Jupyter kernel (a few seconds), no database server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from dbmatrix import paths
from dbmatrix.commands.interrupts import KernelStderr

CELL = """\
import atexit, os, signal, sys, time
# the kernel process's own stderr, where its logging goes (fd 2, or its copy when ipykernel captures fd 2)
late = os.dup(getattr(sys.stderr, "_original_stdstream_copy", None) or 2)
atexit.register(os.write, late, b"Traceback (most recent call last):\\n  the kernel's last words\\n")
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
    # what the kernel process wrote to its stderr after the shutdown request (ipykernel can log a ZMQ
    # traceback there while its sockets close) is kept beside the notebook, not printed after our line
    assert "the kernel's last words" in (tmp_path / "out.kernel.log").read_text()


def test_the_kernels_own_stderr_reaches_the_terminal_until_the_shutdown_then_its_log(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    relay = KernelStderr(tmp_path / "nb.kernel.log")
    write = relay.open()
    os.write(write, b"a warning while the notebook runs\n")
    deadline = time.monotonic() + 10
    seen = ""
    while "a warning" not in seen and time.monotonic() < deadline:
        seen += capfd.readouterr().err
        time.sleep(0.01)
    assert "a warning while the notebook runs" in seen
    assert not relay.log.exists()  # nothing muted yet: no log
    relay.mute()
    os.write(write, b"zmq.error.ZMQError: Socket operation on non-socket\n")
    started = time.monotonic()
    relay.close(wait=0.2)  # the pipe is still open (a server the kernel left would hold it): no hang
    assert time.monotonic() - started < 5
    os.close(write)
    relay.close(wait=5)
    assert "ZMQError" not in capfd.readouterr().err
    assert relay.log.read_text() == "zmq.error.ZMQError: Socket operation on non-socket\n"


def test_no_log_when_the_kernel_says_nothing_after_the_shutdown(tmp_path: Path) -> None:
    relay = KernelStderr(tmp_path / "nb.kernel.log")
    os.close(relay.open())
    relay.mute()
    relay.close(wait=5)
    assert not relay.log.exists()


KERNEL_TRANSPORT = """\
import json, os
from ipykernel import get_connection_info
info = json.loads(get_connection_info())
print(json.dumps({"transport": info["transport"], "ip": info["ip"],
                  "socket": os.path.exists(f"{info['ip']}-{info['shell_port']}")}))
"""


def test_the_kernel_listens_on_private_unix_sockets_not_tcp(tmp_path: Path,
                                                            capfd: pytest.CaptureFixture[str]) -> None:
    """No TCP port of the kernel's can take one a benchmark server leased, and ipykernel has no warning
    about TCP without encryption to print at every notebook's start; the sockets' directory goes with it."""
    import json

    from dbmatrix.commands.interrupts import execute_notebook

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(KERNEL_TRANSPORT)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "transport.ipynb")
    execute_notebook(str(tmp_path / "transport.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
                     progress_bar=False, log_output=False)
    (cell,) = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    info = json.loads("".join(o.get("text", "") for o in cell.outputs))
    assert info["transport"] == "ipc" and info["socket"], info
    sockets = Path(info["ip"]).parent
    assert sockets.name.startswith("dbmatrix-kernel-") and not sockets.exists(), info
    assert "without encryption" not in capfd.readouterr().err


def test_a_socket_path_too_long_for_af_unix_keeps_the_kernel_on_tcp(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import tempfile

    from dbmatrix.commands.interrupts import kernel_manager_class

    deep = tmp_path / ("d" * (110 - len(str(tmp_path))))
    deep.mkdir()
    for where, transport in ((deep, "tcp"), (Path("/tmp"), "ipc")):
        monkeypatch.setattr(tempfile, "tempdir", str(where))
        km = kernel_manager_class()(kernel_name="python3")
        assert km.transport == transport, (len(str(where)), km.ip)
        sockets = Path(km.ipc_dir)
        assert sockets.is_dir()
        del km  # a manager whose kernel never started leaves no directory behind
        gc.collect()
        assert not sockets.exists()
