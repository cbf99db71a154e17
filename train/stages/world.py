"""Where this process stands in a multi-process run: its rank, the world's size, whether it is the one writer, where
the other ranks' output goes, dying with its parent, and the checkpoint every rank resumes from.

Rank 0 (or the only process) writes the warehouse, the plots and the summary; the entry point every rank runs is
train/stages/ranks.py.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.models.checkpoints import resume_point

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def rank() -> int:
    """This process's global rank (0 when not launched by accelerate/torchrun)."""
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main() -> bool:
    """True in the one process that writes the warehouse, the plots and the summary."""
    return rank() == 0


def rank_log(log_dir: str | Path, n: int) -> Path:
    return Path(log_dir) / f"rank-{n}.log"


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies; exit now if it is already gone."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent or parent == 1:  # the parent died before the request took hold
        os._exit(1)


def shared_resume_point(output_dir: str, progress: Callable[[str], None] | None, accelerator: Any) -> str | None:
    """The checkpoint every rank resumes from: the main process sets incomplete folders aside first, then the others
    choose from what is left, so all ranks continue at the same step."""
    start = resume_point(output_dir, progress, move=True) if is_main() else None
    if world_size() > 1:
        accelerator.wait_for_everyone()
    if not is_main():
        start = resume_point(output_dir, progress, move=False)
    return start


def _cpu_rank_storage(storage: Any, location: str) -> Any:
    return storage if re.fullmatch(r"cpu:\d+", location) else None


def accept_cpu_rank_locations() -> None:
    """Let ``torch.load`` map onto ``cpu:N``: on resume the Trainer loads the optimizer with ``map_location`` set to
    the rank's device, which for CPU rank N is ``cpu:N``, a location torch does not know by itself."""
    import torch.serialization

    torch.serialization.register_package(100, lambda obj: None, _cpu_rank_storage)
