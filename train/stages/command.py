"""The ``accelerate launch`` line every rank of a run starts with, where it runs (the site), and the failing rank's
error line: one command for a local launch (train/stages/launch.py) and for each node of a slurm job
(train/stages/slurm.py).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from train.stages.profiles import PROFILES_DIR, Profile, launcher_file
from train.stages.records import TrainRunConfig
from train.stages.world import rank_log

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


def job_args(cfg: TrainRunConfig) -> list[str]:
    """``python -m train.stages.run`` arguments for ``cfg`` (paths made absolute: a node may start elsewhere)."""
    args = ["--profile", _profile_arg(cfg.profile), "--warehouse", str(Path(cfg.warehouse).absolute()),
            "--snapshot", cfg.snapshot, "--output-root", str(Path(cfg.output_root).absolute()),
            "--work-dir", str(Path(cfg.work_dir).absolute()), "--pricing-seed", str(cfg.pricing_seed)]
    return args + (["--preference-run", cfg.preference_run] if cfg.preference_run is not None else [])


def _profile_arg(profile: str) -> str:
    return str(Path(profile).absolute()) if Path(profile).suffix else profile


class ShellWord(str):
    """A word of a job script that the shell must expand (``"$SLURM_NODEID"``): written as it is, where every other
    word is quoted. Only the template makes one; a user's value is a plain ``str`` and is always quoted."""


def accelerate_args(profile: Profile, site: Site, machine_rank: str = "0",
                    main_process_ip: str = "127.0.0.1", profile_ref: str | None = None) -> list[str]:
    """The ``accelerate launch`` options for the profile's layout (``machine_rank`` / ``main_process_ip`` may be
    ``ShellWord`` expressions when rendered into a job script). ``profile_ref``: the profile's name or path, whose
    folder holds its launcher configs (default: its name, in the shipped folder)."""
    launch = profile.launch
    args = ["--num_machines", str(launch.nodes), "--num_processes", str(profile.processes),
            "--machine_rank", machine_rank, "--main_process_ip", main_process_ip,
            "--main_process_port", str(launch.main_process_port), "--dynamo_backend", "no",
            "--mixed_precision", "bf16" if profile.model.bf16 else "no"]
    ref = profile_ref or profile.name
    if launch.accelerate_config:
        args = ["--config_file", _profile_file(site, ref, launch.accelerate_config)] + args
    if launch.deepspeed_config:
        return args + ["--use_deepspeed", "--deepspeed_config_file", _profile_file(site, ref, launch.deepspeed_config),
                       "--deepspeed_multinode_launcher", "standard"]
    return args + ["--multi_gpu"]  # torchrun's DDP launcher; the trainer picks gloo when the profile is on CPU


def _profile_file(site: Site, profile_ref: str, rel: str) -> str:
    """A launcher config as the nodes see it: the file the profile check accepted, a shipped one under the project
    folder as the site has it, a user's own by its absolute path."""
    found = launcher_file(profile_ref, rel)
    shipped = PROFILES_DIR.resolve()
    if found.is_relative_to(shipped):
        return str(Path(site.root) / PROFILES_DIR.relative_to(ROOT) / found.relative_to(shipped))
    return str(found)


def launch_command(profile: Profile, cfg: TrainRunConfig, log_dir: str | Path, site: Site | None = None,
                   machine_rank: str = "0", main_process_ip: str = "127.0.0.1") -> list[str]:
    """The whole ``accelerate launch ... -m train.stages.ranks ...`` command line."""
    site = site or Site()
    return ([site.python, "-m", "accelerate.commands.launch"]
            + accelerate_args(profile, site, machine_rank, main_process_ip, cfg.profile)
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
