"""Start every rank of a multi-process training run: ``accelerate launch`` here, or a slurm job over several nodes.

    python -m train.stages.launch --profile cpu-smoke-2proc --warehouse warehouse/toolscale.duckdb
    python -m train.stages.launch --profile h100 --render-sbatch     # print the job script; submit nothing

A profile with ``launch.processes > 1`` or ``launch.gpus_per_node > 1`` runs its trainer (``train.stages.run``, through
``train.stages.ranks``) under ``accelerate launch``: DeepSpeed when the profile names a ZeRO config, DDP otherwise (gloo
on CPU). Rank 0's output comes back line by line (the flow logs it); when any rank fails, the launch fails with
that rank's error line. With ``launch.scheduler: slurm`` the same accelerate command runs once per node inside an
sbatch job (train/stages/slurm.py), which is then followed until it ends. The launcher dies with its caller, and every
rank with the launcher, so a kill -9 of the flow leaves nothing running; rerunning resumes at the same step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from train.evaluation.report import run_markdown
from train.stages.command import LaunchError, failure_line, launch_command, launch_env
from train.stages.inputs import check_job_values, check_run_inputs, exit_status
from train.stages.profiles import Profile, load_profile
from train.stages.records import TrainRunConfig, TrainRunResult, load_built
from train.stages.world import die_with_parent
from warehouse.location import default_warehouse
from warehouse.train_store import read_training_run, read_training_steps


def needs_launch(profile: Profile) -> bool:
    """True when the trainer must run under accelerate rather than in the caller's process."""
    return profile.processes > 1 or profile.launch.gpus_per_node > 1 or profile.launch.scheduler == "slurm"


def _child_dies_with_caller() -> None:
    die_with_parent()


def stream(command: list[str], env: dict[str, str], cwd: str, progress: Callable[[str], None]) -> tuple[int, list[str]]:
    """Run ``command``, passing each output line to ``progress`` as it comes; its status and every line."""
    lines: list[str] = []
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1,
                          preexec_fn=_child_dies_with_caller) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            lines.append(line)
            progress(line)
        return proc.wait(), lines


def log_folder(cfg: TrainRunConfig, profile: Profile) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path(cfg.output_root).absolute() / "launch" / f"{profile.name}-{stamp}-{os.getpid()}"


def result_from(lines: list[str], cfg: TrainRunConfig) -> TrainRunResult:
    """The finished run as rank 0 reported it (its last JSON line), read back from the warehouse."""
    summary = next((d for line in reversed(lines) if (d := _json_object(line)) and "run_id" in d), None)
    if summary is None:
        raise LaunchError("the launch ended without rank 0's summary line; see the run's log")
    run = read_training_run(cfg.warehouse, summary["run_id"])
    if run is None:
        raise LaunchError(f"run {summary['run_id']} is not in warehouse {cfg.warehouse}")
    steps = read_training_steps(cfg.warehouse, run["run_id"])
    return TrainRunResult(run, steps, int(summary.get("steps_this_attempt", 0)), run_markdown(run, steps))


def _json_object(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def launch_training(cfg: TrainRunConfig, progress: Callable[[str], None] = print,
                    poll_seconds: float = 30.0) -> TrainRunResult:
    """Run ``cfg`` with every rank its profile asks for (here, or as a slurm job) and return the recorded run. The
    inputs are checked before the model is converted, and the run's folder is locked for all its ranks."""
    from train.stages.run import holding_run

    profile = load_profile(cfg.profile)
    check_run_inputs(cfg, cfg.snapshot if cfg.snapshot != "latest" else profile.data.snapshot)
    with holding_run(cfg, profile, load_built(cfg, profile)):
        return _launch(cfg, profile, progress, poll_seconds)


def _launch(cfg: TrainRunConfig, profile: Profile, progress: Callable[[str], None],
            poll_seconds: float) -> TrainRunResult:
    from train.stages.slurm import run_job

    from train.models.model import resolve_model

    resolve_model(profile.model.name, cfg.work_dir)  # a model converted once here, not by every rank at once
    log_dir = log_folder(cfg, profile)
    log_dir.mkdir(parents=True, exist_ok=True)
    if profile.launch.scheduler == "slurm":
        lines = run_job(profile, cfg, log_dir, progress, poll_seconds)
        return result_from(lines, cfg)
    command = launch_command(profile, cfg, log_dir)
    progress(f"launching {profile.processes} processes: accelerate launch ... -m train.stages.ranks (rank logs in {log_dir})")
    code, lines = stream(command, launch_env(profile), os.getcwd(), progress)
    if code != 0:
        raise LaunchError(failure_line(lines, log_dir, profile.processes, code))
    return result_from(lines, cfg)


def main(argv: list[str] | None = None) -> int:
    from train.stages.slurm import render_sbatch

    parser = argparse.ArgumentParser(prog="python -m train.stages.launch", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-smoke-2proc", help="profile name (train/profiles/) or YAML path")
    parser.add_argument("--warehouse", default=default_warehouse())
    parser.add_argument("--snapshot", default="latest")
    parser.add_argument("--output-root", default="work/train")
    parser.add_argument("--work-dir", default="work")
    parser.add_argument("--pricing-seed", type=int, default=0)
    parser.add_argument("--preference-run", default=None)
    parser.add_argument("--render-sbatch", action="store_true", help="print the slurm job script and stop")
    args = parser.parse_args(argv)
    cfg = TrainRunConfig(args.profile, args.warehouse, args.snapshot, args.output_root, args.work_dir,
                         args.pricing_seed, args.preference_run)
    if args.render_sbatch:  # the job script, with the checks a slurm launch applies; nothing is submitted
        def render() -> int:
            print(render_sbatch(load_profile(cfg.profile), cfg, Path(cfg.output_root).absolute() / "launch"), end="")
            return 0

        return exit_status(lambda: 0, lambda: render())

    def check() -> None:  # the profile, every value and the warehouse, before a model is converted: exit 2
        check_job_values(cfg)
        profile = load_profile(cfg.profile)
        check_run_inputs(cfg, cfg.snapshot if cfg.snapshot != "latest" else profile.data.snapshot)

    def run() -> int:  # a failure from here on is a failed run (a rank's error line): exit 3
        result = launch_training(cfg, progress=lambda m: print(m, file=sys.stderr, flush=True))
        row = result.run
        print(json.dumps({"run_id": row["run_id"], "status": row["status"], "global_step": row["global_step"],
                          "steps_this_attempt": result.steps_this_attempt, "resumed_from": row["resumed_from"]}))
        return 0

    return exit_status(run, check)


if __name__ == "__main__":
    raise SystemExit(main())
