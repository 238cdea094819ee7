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
before the kernel has started, interrupts this process directly."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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


def kernel_manager_class() -> type:
    """jupyter_client's asynchronous kernel manager (nbclient's default) that records its kernel's
    process group in KERNEL_GROUPS once the kernel has started."""
    from jupyter_client.manager import AsyncKernelManager

    class InterruptibleKernelManager(AsyncKernelManager):
        async def _async_post_start_kernel(self, **kw: Any) -> None:
            await super()._async_post_start_kernel(**kw)
            if pgid := getattr(self.provisioner, "pgid", None):
                KERNEL_GROUPS.append(pgid)

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

    with interrupts_go_to_the_kernel() as seen:
        try:
            pm.execute_notebook(src, dst, kernel_manager_class=kernel_manager_class(), **kwargs)
        except PapermillExecutionError:
            if not seen:
                raise
    if seen:
        raise KeyboardInterrupt
