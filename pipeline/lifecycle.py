"""Child processes that end with the run that started them, even when that run is killed with SIGKILL."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
import time

PR_SET_PDEATHSIG = 1
_watching = False


def die_with_parent() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: the kernel sends SIGKILL to this child when the thread that
    started it ends (call it from the main thread of a long-lived process). Linux only; a no-op elsewhere."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def exit_when_orphaned(interval: float = 0.5) -> None:
    """In a worker process (process pool, Dask worker): exit as soon as the parent process is gone.

    A pool worker busy with a shard would otherwise finish it, and more, after its run was killed. Polling the
    parent id works whichever thread created the process (``PR_SET_PDEATHSIG`` is tied to that thread, and
    pool workers are started from helper threads). Idempotent; does nothing in the main process."""
    global _watching
    if _watching or multiprocessing.parent_process() is None:
        return
    _watching = True
    exit_when_parent_gone(os.getppid(), interval)


def exit_when_parent_gone(parent: int, interval: float = 0.5) -> None:
    """Exit this process (a watchdog thread) as soon as its parent is no longer ``parent``, the process id the
    parent passed down: a parent that died before this was called is noticed too (the parent id is already 1
    or a subreaper's). A second guard beside ``die_with_parent``, which is tied to one thread of the parent."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)  # the run is gone; nothing of this process is worth finishing

    threading.Thread(target=watch, name="exit-when-orphaned", daemon=True).start()
