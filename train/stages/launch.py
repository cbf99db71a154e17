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
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from train.stages.profiles import PROFILES_DIR, Profile, load_profile
from train.stages.ranks import die_with_parent, rank_log
from train.evaluation.report import run_markdown
from train.stages.run import TrainRunConfig, TrainRunResult
from warehouse.location import default_warehouse
from warehouse.train_store import read_training_run, read_training_steps

ROOT = Path(__file__).resolve().parents[2]
ERROR_LINE = re.compile(r"^(error: |[A-Za-z_.]*(Error|Exception|Interrupt)\b(: |$))")
ROOT_CAUSE_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s?")  # torch's elastic agent prefixes a rank's error output


class LaunchError(RuntimeError):
    """A multi-process run that failed: the message is the failing rank's error line."""


@dataclass(frozen=True)
class Site:
    """Where the command runs: the interpreter, the project's folder, the working folder (paths as the nodes see them)."""

    python: str = field(default_factory=lambda: sys.executable)
    root: str = str(ROOT)
    cwd: str = field(default_factory=os.getcwd)


def needs_launch(profile: Profile) -> bool:
    """True when the trainer must run under accelerate rather than in the caller's process."""
    return profile.processes > 1 or profile.launch.gpus_per_node > 1 or profile.launch.scheduler == "slurm"


def job_args(cfg: TrainRunConfig) -> list[str]:
    """``python -m train.stages.run`` arguments for ``cfg`` (paths made absolute: a node may start elsewhere)."""
    args = ["--profile", _profile_arg(cfg.profile), "--warehouse", str(Path(cfg.warehouse).absolute()),
            "--snapshot", cfg.snapshot, "--output-root", str(Path(cfg.output_root).absolute()),
            "--work-dir", str(Path(cfg.work_dir).absolute()), "--pricing-seed", str(cfg.pricing_seed)]
    return args + (["--preference-run", cfg.preference_run] if cfg.preference_run is not None else [])


def _profile_arg(profile: str) -> str:
    return str(Path(profile).absolute()) if Path(profile).suffix else profile


def accelerate_args(profile: Profile, site: Site, machine_rank: str = "0",
                    main_process_ip: str = "127.0.0.1") -> list[str]:
    """The ``accelerate launch`` options for the profile's layout (``machine_rank`` / ``main_process_ip`` may be
    shell expressions when rendered into a job script)."""
    launch = profile.launch
    args = ["--num_machines", str(launch.nodes), "--num_processes", str(profile.processes),
            "--machine_rank", machine_rank, "--main_process_ip", main_process_ip,
            "--main_process_port", str(launch.main_process_port), "--dynamo_backend", "no",
            "--mixed_precision", "bf16" if profile.model.bf16 else "no"]
    if launch.accelerate_config:
        args = ["--config_file", _profile_file(site, launch.accelerate_config)] + args
    if launch.deepspeed_config:
        return args + ["--use_deepspeed", "--deepspeed_config_file", _profile_file(site, launch.deepspeed_config),
                       "--deepspeed_multinode_launcher", "standard"]
    return args + ["--multi_gpu"]  # torchrun's DDP launcher; the trainer picks gloo when the profile is on CPU


def _profile_file(site: Site, rel: str) -> str:
    """A launcher config as the nodes see it: under the project folder (validation kept it inside the profiles)."""
    return str(Path(site.root) / PROFILES_DIR.relative_to(ROOT) / rel)


def launch_command(profile: Profile, cfg: TrainRunConfig, log_dir: str | Path, site: Site | None = None,
                   machine_rank: str = "0", main_process_ip: str = "127.0.0.1") -> list[str]:
    """The whole ``accelerate launch ... -m train.stages.ranks ...`` command line."""
    site = site or Site()
    return ([site.python, "-m", "accelerate.commands.launch"] + accelerate_args(profile, site, machine_rank, main_process_ip)
            + ["-m", "train.stages.ranks", "--log-dir", str(Path(log_dir).absolute()), "--"] + job_args(cfg))


def launch_env(profile: Profile, site: Site | None = None) -> dict[str, str]:
    site = site or Site()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site.root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # rank 0's lines arrive as they are written
    if profile.model.use_cpu and "OMP_NUM_THREADS" not in env:  # the ranks share the cores
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // profile.processes))
    return env


def error_line(lines: list[str]) -> str | None:
    """The last line of a rank's output that says what went wrong."""
    bare = (RANK_PREFIX.sub("", line).strip() for line in reversed(lines))
    return next((line for line in bare if ERROR_LINE.match(line)), None)


def failure_line(output: list[str], log_dir: str | Path, world: int, returncode: int) -> str:
    """The failing rank and its error line: the rank torchrun names as the root cause, else the first rank with an
    error line (rank 0's output is ``output``, the others' are their log files)."""
    logs = {0: output}
    for n in range(1, world):
        path = rank_log(log_dir, n)
        logs[n] = path.read_text(errors="replace").splitlines() if path.is_file() else []
    cause = next((int(m.group(1)) for i, line in enumerate(output) if "Root Cause" in line
                  for later in output[i + 1:i + 12] if (m := ROOT_CAUSE_RANK.match(later))), None)
    order = ([cause] if cause is not None and cause in logs else []) + sorted(logs)
    for n in order:
        if (line := error_line(logs[n])) is not None:
            return f"rank {n} failed: {line.removeprefix('error: ')}"
    last = next((line.strip() for line in reversed(output) if line.strip()), "")
    return f"the launch exited with status {returncode}" + (f": {last}" if last else "")


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
    """Run ``cfg`` with every rank its profile asks for (here, or as a slurm job) and return the recorded run."""
    from train.stages.slurm import run_job

    from train.models.model import resolve_model

    profile = load_profile(cfg.profile)
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
    try:
        profile = load_profile(cfg.profile)
        if args.render_sbatch:
            print(render_sbatch(profile, cfg, Path(cfg.output_root).absolute() / "launch"), end="")
            return 0
        result = launch_training(cfg, progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (ValueError, OSError, LaunchError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    run = result.run
    print(json.dumps({"run_id": run["run_id"], "status": run["status"], "global_step": run["global_step"],
                      "steps_this_attempt": result.steps_this_attempt, "resumed_from": run["resumed_from"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
