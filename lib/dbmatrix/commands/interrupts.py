"""Ctrl-C while papermill runs a notebook: passed on to the kernel, as a terminal passes it to `dbmatrix run`.

The kernel runs in a session of its own (jupyter_client starts it so), so a terminal's Ctrl-C reaches only
`dbmatrix notebooks`. Left alone, the KeyboardInterrupt breaks papermill's event loop in the middle of a
cell: its shutdown of the kernel then kills the kernel a few seconds later, before notebook 10's clean stop
(:func:`dbmatrix.run.session.interrupts_stop_cleanly`: servers stopped, the unfinished run discarded) is
done, and tracebacks follow our message (the kernel's ZMQ errors on its closed sockets; asyncio's "Task
exception was never retrieved" for papermill's abandoned tasks). Here the
first two Ctrl-C go to the kernel's process group instead (the kernel and the servers it started, as
`dbmatrix run` and its servers share a terminal's process group); the cell ends, papermill returns, and
KeyboardInterrupt is raised here, so the command ends with only its own message. A third Ctrl-C, or one
before the kernel has started, interrupts this process directly.

The kernel process's own stderr (its logging, not a cell's output, which papermill relays) reaches the
terminal through a pipe until the kernel is asked to shut down; from then on it goes to
``<notebook>.kernel.log`` beside the executed notebook. ipykernel can log a traceback of its closing ZMQ
sockets while it shuts down (``ZMQError: Socket operation on non-socket`` from its output flush): a race
inside the kernel, not a failure of the notebook, and not something to print after our own last line.

The kernel talks to papermill over unix sockets in a private directory (ZMQ's ipc transport), not TCP:
no port of the kernel's can take one a benchmark server leased (:mod:`dbmatrix.run.ports`), nothing
else on the host can connect to it, and ipykernel has no "running over TCP without encryption"
warning to print at every notebook's start."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

FORWARDED_BEFORE_GIVING_UP = 2
KERNEL_GROUPS: list[int] = []  # the process groups of the kernels started here (a kernel leads its own)


def interrupt_kernels() -> bool:
    """SIGINT to the kernels' process groups still alive; False when there was none."""
    sent = False
    for g in list(KERNEL_GROUPS):
        try:
            os.killpg(g, signal.SIGINT)
            sent = True
        except ProcessLookupError:
            KERNEL_GROUPS.remove(g)
    return sent


class KernelStderr:
    """The kernel process's stderr: a pipe copied to this process's stderr, or, once :meth:`mute` is
    called (the kernel is being shut down), to ``log``, which is created only if something comes."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.muted = False
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None

    def open(self) -> int:
        """A new pipe for a kernel about to start; returns its write end, which the caller closes once
        the kernel has it."""
        read, write = os.pipe()
        t = threading.Thread(target=self._copy, args=(read,), name="kernel-stderr", daemon=True)
        t.start()
        self.threads.append(t)
        return write

    def mute(self) -> None:
        self.muted = True

    def _copy(self, read: int) -> None:
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                self.write(chunk)

    def write(self, chunk: bytes) -> None:
        """Never raises: a relay that stopped reading would block the kernel once the pipe is full."""
        with self._lock:
            try:
                if not self.muted:
                    while chunk:
                        chunk = chunk[os.write(2, chunk):]
                    return
                if self._file is None:
                    self._file = self.log.open("ab")
                self._file.write(chunk)
                self._file.flush()
            except OSError:
                pass  # a closed terminal or a full disk: the kernel's words are lost, the kernel goes on

    def close(self, wait: float = 1.0) -> None:
        """Waits up to ``wait`` seconds for the kernel's last words (a server the kernel left running
        would hold the pipe open for ever), then closes the log."""
        for t in self.threads:
            t.join(wait)
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def kernel_manager_class(stderr: KernelStderr | None = None) -> type:
    """jupyter_client's asynchronous kernel manager (nbclient's default) that records its kernel's
    process group in KERNEL_GROUPS once the kernel has started and, given ``stderr``, starts the kernel
    with its stderr on that relay and mutes it when the kernel is asked to shut down."""
    from jupyter_client.manager import AsyncKernelManager

    class InterruptibleKernelManager(AsyncKernelManager):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            # ZMQ names the sockets <ip>-<port>: the path, port included, must fit AF_UNIX's 107 bytes (a
            # very long TMPDIR would not: the kernel then stays on TCP, as jupyter_client starts it)
            self.ipc_dir = tempfile.mkdtemp(prefix="dbmatrix-kernel-")
            # removed at shutdown, or when a manager whose kernel never started is collected (or at exit)
            self.remove_ipc_dir = weakref.finalize(self, shutil.rmtree, self.ipc_dir, ignore_errors=True)
            if len(os.fsencode(self.ipc_dir)) + len("/k-65535") <= 107:
                self.transport = "ipc"
                self.ip = os.path.join(self.ipc_dir, "k")

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if stderr is None:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            write = stderr.open()
            try:
                await super()._async_launch_kernel(kernel_cmd, **{**kw, "stderr": write})
            finally:
                os.close(write)  # the kernel has its copy: the pipe ends when the kernel's side closes

        async def _async_post_start_kernel(self, **kw: Any) -> None:
            await super()._async_post_start_kernel(**kw)
            if pgid := getattr(self.provisioner, "pgid", None):
                KERNEL_GROUPS.append(pgid)

        # nbclient calls shutdown_kernel, which AsyncKernelManager binds to the base class's coroutine
        # function, so overriding _async_shutdown_kernel would not be reached
        async def shutdown_kernel(self, now: bool = False, restart: bool = False) -> None:  # type: ignore[override]
            if stderr is not None and not restart:
                stderr.mute()
            await super().shutdown_kernel(now=now, restart=restart)
            if not restart:
                self.remove_ipc_dir()

    return InterruptibleKernelManager


@contextmanager
def interrupts_go_to_the_kernel() -> Iterator[list[int]]:
    """While inside, SIGINT goes to the kernels (see the module); yields the signals received so far
    (empty: no Ctrl-C). Outside the main thread nothing changes."""
    seen: list[int] = []

    def forward(signum: int, frame: object) -> None:
        seen.append(signum)
        if len(seen) > FORWARDED_BEFORE_GIVING_UP or not interrupt_kernels():
            raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGINT, forward)
    except ValueError:  # not the main thread
        yield seen
        return
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, old)
        KERNEL_GROUPS.clear()  # papermill has shut its kernel down


def execute_notebook(src: str, dst: str, **kwargs: Any) -> None:
    """papermill's execute_notebook with Ctrl-C passed on to the kernel. After a Ctrl-C it raises
    KeyboardInterrupt once papermill is done: whether the interrupted cell failed (the usual case) or not
    (the signal came between two cells, when a kernel ignores it)."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    stderr = KernelStderr(Path(dst).with_suffix(".kernel.log"))
    stderr.log.unlink(missing_ok=True)  # an earlier execution's
    with interrupts_go_to_the_kernel() as seen:
        try:
            pm.execute_notebook(src, dst, kernel_manager_class=kernel_manager_class(stderr), **kwargs)
        except PapermillExecutionError:
            if not seen:
                raise
        finally:
            stderr.close()
    if seen:
        raise KeyboardInterrupt
