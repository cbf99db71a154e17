"""The entry point every rank of a multi-process run runs (what a rank knows of itself is train/stages/world.py).

    accelerate launch --num_processes 2 ... -m train.stages.ranks --log-dir LOGS -- --profile cpu-smoke ...

train/stages/launch.py builds that line. Every rank runs the plain job (``train.stages.run``); only rank 0 writes the warehouse,
the plots and the summary, and rank 0's output goes to the launcher (which streams it into the flow run's log).
The other ranks write theirs to ``LOGS/rank-N.log``, where the launcher finds the error line of a rank that failed.
Each rank dies with the process that started it (``PR_SET_PDEATHSIG``), so a kill -9 of the flow leaves no rank
running.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from train.stages.world import accept_cpu_rank_locations, die_with_parent, is_main, rank, rank_log


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
    from train.stages.run import main as run_main  # after die_with_parent: the trainer's imports take seconds

    job = args.job[1:] if args.job[:1] == ["--"] else args.job
    return run_main(job)


if __name__ == "__main__":
    raise SystemExit(main())
