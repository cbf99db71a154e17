"""The plain training job: a GRPO run from a published snapshot, recorded in the warehouse, resumable after a kill.

    python -m train.stages.run --profile cpu-smoke --warehouse warehouse/toolscale.duckdb

The run id and output dir come from the snapshot, the profile and a hash of the config
(``<output-root>/train-<profile>-<snapshot>-<hash>``): a rerun of the same command after a kill finds the same
folder and resumes from its last checkpoint; a rerun of a finished run does no step and says so. It trains on the
snapshot's ``train`` split only (train/environment/splits.py) and records both splits' sizes. The ``training_runs`` row is
written when the run starts, at each checkpoint (with the steps logged so far) and at the end; what went wrong
when nothing learned is put in words (train/evaluation/diagnose.py) on the curves, in the summary and in the log.
``flows/train_orchestrator.py`` wraps this job for Prefect.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from train.stages.grpo_job import train_grpo
from train.stages.inputs import check_run_inputs, check_whole, exit_status
from train.stages.profiles import Profile, load_profile
from train.stages.records import TrainRunConfig, TrainRunResult, load_built, run_identity
from train.stages.run_lock import run_lock
from train.stages.trainset import BuiltSet
from train.stages.world import world_size
from warehouse.location import default_warehouse


def run_training(cfg: TrainRunConfig, progress: Callable[[str], None] = print, profile: Profile | None = None,
                 built: BuiltSet | None = None) -> TrainRunResult:
    """Train (or resume) the run that ``cfg`` names, recording it in the warehouse; the final row and steps.

    A profile with ``stages:`` runs them all in order (train/stages/sequence.py); without, it is one GRPO run.
    The run's folder is locked while it trains (``holding_run``): a second run of the same identity refuses."""
    profile = profile or load_profile(cfg.profile)
    built = built or load_built(cfg, profile)
    # under a launcher the launcher holds the lock for every rank (train/stages/launch.py)
    with holding_run(cfg, profile, built) if world_size() == 1 else nullcontext():
        if profile.stages is not None:
            from train.stages.sequence import run_stages

            return run_stages(cfg, progress, profile, built).as_run_result()
        return train_grpo(cfg, profile, built, progress)


@contextmanager
def holding_run(cfg: TrainRunConfig, profile: Profile, built: BuiltSet) -> Iterator[Path]:
    """The lock of the run folder ``cfg``, ``profile`` and ``built`` name, held for the body (a ``RunLocked``
    naming the first run's pid when another process trains it)."""
    with run_lock(Path(cfg.output_root) / run_identity(profile, built)[0]) as path:
        yield path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.stages.run", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-smoke", help="profile name (train/profiles/) or YAML path")
    parser.add_argument("--warehouse", default=default_warehouse())
    parser.add_argument("--snapshot", default="latest", help="a published snapshot id, or latest")
    parser.add_argument("--output-root", default="work/train", help="each run gets a folder under it")
    parser.add_argument("--work-dir", default="work", help="cache for converted models")
    parser.add_argument("--pricing-seed", type=int, default=0)
    parser.add_argument("--preference-run", default=None, help="a preference run id, none, or (default) the latest")
    args = parser.parse_args(argv)
    cfg = TrainRunConfig(args.profile, args.warehouse, args.snapshot, args.output_root, args.work_dir,
                         args.pricing_seed, args.preference_run)
    checked: dict[str, object] = {}

    def check() -> None:  # everything before a model loads: bad input is exit 2
        check_whole("--pricing-seed", cfg.pricing_seed, 0, 2**31 - 1)
        profile = load_profile(cfg.profile)
        check_run_inputs(cfg, cfg.snapshot if cfg.snapshot != "latest" else profile.data.snapshot)
        checked.update(profile=profile, built=load_built(cfg, profile))

    def run() -> int:  # a failure from here on is a failed run: exit 3
        result = run_training(cfg, lambda m: print(m, file=sys.stderr), checked["profile"],  # type: ignore[arg-type]
                              checked["built"])  # type: ignore[arg-type]
        row = result.run
        print(json.dumps({"run_id": row["run_id"], "status": row["status"], "global_step": row["global_step"],
                          "steps_this_attempt": result.steps_this_attempt, "resumed_from": row["resumed_from"],
                          "final_checkpoint": row["final_checkpoint"], "reward_curve_png": row["reward_curve_png"]}))
        return 0

    return exit_status(run, check)


if __name__ == "__main__":
    raise SystemExit(main())
