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
from collections.abc import Callable

from train.stages.grpo_job import train_grpo
from train.stages.profiles import load_profile
from train.stages.records import TrainRunConfig, TrainRunResult, load_built
from warehouse.errors import WarehouseError
from warehouse.location import default_warehouse


def run_training(cfg: TrainRunConfig, progress: Callable[[str], None] = print) -> TrainRunResult:
    """Train (or resume) the run that ``cfg`` names, recording it in the warehouse; the final row and steps.

    A profile with ``stages:`` runs them all in order (train/stages/sequence.py); without, it is one GRPO run."""
    profile = load_profile(cfg.profile)
    if profile.stages is not None:
        from train.stages.sequence import run_stages

        return run_stages(cfg, progress, profile).as_run_result()
    return train_grpo(cfg, profile, load_built(cfg, profile), progress)


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
    try:
        result = run_training(cfg, progress=lambda m: print(m, file=sys.stderr))
    except (ValueError, OSError, WarehouseError) as exc:  # a bad profile, snapshot, warehouse or pair
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    run = result.run
    print(json.dumps({"run_id": run["run_id"], "status": run["status"], "global_step": run["global_step"],
                      "steps_this_attempt": result.steps_this_attempt, "resumed_from": run["resumed_from"],
                      "final_checkpoint": run["final_checkpoint"], "reward_curve_png": run["reward_curve_png"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
