"""One training run folder, one run: a lock held for as long as a run trains into its folder.

Two ``train.run`` of the same profile, snapshot and warehouse name the same run folder; without a lock both trained
into it, both reported "finished", and the final checkpoint could mix files from both. The lock is an advisory
``flock`` on ``<run folder>.lock`` beside the folder, holding the first run's pid and start; the kernel drops it when
that process dies (a kill -9 included), so a stale file never blocks a rerun.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from train.stages.inputs import BadInput


class RunLocked(BadInput):
    """Another process is training the same run: the message names its pid."""


def lock_path(run_folder: str | Path) -> Path:
    folder = Path(run_folder)
    return folder.with_name(folder.name + ".lock")


@contextmanager
def run_lock(run_folder: str | Path) -> Iterator[Path]:
    """Hold the lock of ``run_folder`` while the body runs; a ``RunLocked`` naming the holder's pid when another
    process holds it."""
    path = lock_path(run_folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(f"run folder {run_folder} is in use by {_holder(fd)}; wait for it to end (or stop it), "
                            "then rerun to resume") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "started": datetime.now(timezone.utc).isoformat(
            timespec="seconds")}).encode())
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # the file stays (removing it would race a waiting run); empty means free
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _holder(fd: int) -> str:
    try:
        held = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {int(held['pid'])} (started {held.get('started', '?')})"
    except (ValueError, KeyError, TypeError):
        return "another process"
