"""What each process of a multi-process run needs to know about its rank, and the entry point every rank runs.

    accelerate launch --num_processes 2 ... -m train.stages.ranks --log-dir LOGS -- --profile cpu-smoke ...

train/stages/launch.py builds that line. Every rank runs the plain job (``train.stages.run``); only rank 0 writes the warehouse,
the plots and the summary, and rank 0's output goes to the launcher (which streams it into the flow run's log).
The other ranks write theirs to ``LOGS/rank-N.log``, where the launcher finds the error line of a rank that failed.
Each rank dies with the process that started it (``PR_SET_PDEATHSIG``), so a kill -9 of the flow leaves no rank
running.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    from train.models.checkpoints import resume_point

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


def _send_output_to(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.stages.ranks", description=__doc__.splitlines()[0])
    parser.add_argument("--log-dir", required=True, help="ranks other than 0 write their output here")
    parser.add_argument("job", nargs=argparse.REMAINDER, help="-- then the arguments of python -m train.stages.run")
    args = parser.parse_args(argv)
    die_with_parent()
    accept_cpu_rank_locations()
    if not is_main():
        _send_output_to(rank_log(args.log_dir, rank()))
    from train.stages.run import main as run_main

    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    return run_main(job)


if __name__ == "__main__":
    raise SystemExit(main())
