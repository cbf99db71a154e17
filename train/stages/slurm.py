"""A training run as a slurm job: the sbatch script rendered from the profile, submitted, and followed until it ends.

One task per node; each runs the same ``accelerate launch`` line as a local launch (train/stages/launch.py) with its node
rank (``$SLURM_NODEID``) and the rendezvous at the first node's hostname on ``launch.main_process_port``. The job's
output file is streamed to the caller while ``squeue`` lists the job; ``sacct`` then says how it ended.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from dataclasses import replace

from train.stages.command import LaunchError, ShellWord, Site, failure_line, launch_command
from train.stages.inputs import check_job_values
from train.stages.profiles import Profile, ProfileError, launch_problem
from train.stages.records import TrainRunConfig

OK_STATES = {"COMPLETED"}
SACCT_TRIES = 10  # sacct can lag a few seconds behind squeue


def job_output(log_dir: str | Path, job_id: str) -> Path:
    return Path(log_dir) / f"slurm-{job_id}.out"


def render_sbatch(profile: Profile, cfg: TrainRunConfig, log_dir: str | Path, site: Site | None = None) -> str:
    """The job script: ``launch.nodes`` nodes, one task each with ``launch.gpus_per_node`` GPUs, accelerate on each.

    The profile is checked as a slurm launch checks it (a CPU profile is refused), and every value is checked
    (``check_job_values``: no newline, no NUL, numbers in range) before a line is written. Every word is quoted
    for the shell; only the template's two ``ShellWord`` expressions (the node rank, the first node's address) are
    left for it to expand, so a user's value is never rewritten or run."""
    site = site or Site()
    launch = profile.launch
    problem = launch_problem(replace(launch, scheduler="slurm"), profile.model.use_cpu)
    if problem is not None:
        raise ProfileError(f"profile {profile.name} cannot run as a slurm job: {problem}")
    check_job_values(cfg, log_dir, site)
    accelerate = launch_command(profile, cfg, log_dir, site, machine_rank=ShellWord('"$SLURM_NODEID"'),
                                main_process_ip=ShellWord('"$MAIN_PROCESS_IP"'))
    inner = "exec " + " ".join(w if isinstance(w, ShellWord) else shlex.quote(w) for w in accelerate)
    head = [f"#SBATCH --job-name=toolscale-train-{profile.name}", f"#SBATCH --nodes={launch.nodes}",
            "#SBATCH --ntasks-per-node=1"]
    if launch.gpus_per_node:
        head.append(f"#SBATCH --gpus-per-node={launch.gpus_per_node}")
    if launch.slurm_partition:
        head.append(f"#SBATCH --partition={launch.slurm_partition}")
    if launch.slurm_time:
        head.append(f"#SBATCH --time={launch.slurm_time}")
    head.append(f"#SBATCH --output={shlex.quote(f'{Path(log_dir).absolute()}/slurm-%j.out')}")
    return "\n".join([
        "#!/bin/bash", *head,
        f"# rendered by train/stages/launch.py from profile {profile.name}: {launch.nodes} node(s) x "
        f"{profile.processes // launch.nodes} process(es), rendezvous on the first node",
        "set -euo pipefail",
        f"cd {shlex.quote(site.cwd)}",
        f"export PYTHONPATH={shlex.quote(site.root)}${{PYTHONPATH:+:$PYTHONPATH}}",
        "export PYTHONUNBUFFERED=1",
        'export MAIN_PROCESS_IP="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        f"srun --kill-on-bad-exit=1 bash -c {shlex.quote(inner)}", ""])


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise LaunchError(f"{command[0]} not found: launch.scheduler slurm needs the slurm client tools on PATH")
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{shlex.join(command)} did not answer within 120 s")


def submit(script: Path) -> str:
    """``sbatch`` the script; the job id."""
    done = _run(["sbatch", "--parsable", str(script)])
    job_id = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job_id.isdigit():
        said = (done.stderr.strip() or done.stdout.strip() or f"status {done.returncode}").splitlines()[0]
        raise LaunchError(f"sbatch refused {script}: {said}")
    return job_id


def in_queue(job_id: str) -> bool:
    done = _run(["squeue", "-h", "-j", job_id, "-o", "%T"])
    return done.returncode == 0 and bool(done.stdout.strip())


def final_state(job_id: str, poll_seconds: float) -> str:
    """The job's state once it has left the queue (``sacct``), e.g. COMPLETED, FAILED, CANCELLED, TIMEOUT."""
    for _ in range(SACCT_TRIES):
        done = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"])
        state = done.stdout.strip().splitlines()[0].split()[0] if done.stdout.strip() else ""
        if state and state not in ("PENDING", "RUNNING", "COMPLETING"):
            return state
        time.sleep(poll_seconds)
    raise LaunchError(f"slurm job {job_id} left the queue but sacct gives no final state")


class _Tail:
    """New whole lines of a growing file, each passed on once."""

    def __init__(self, path: Path, progress: Callable[[str], None]) -> None:
        self.path, self.progress, self.offset, self.lines = path, progress, 0, list[str]()

    def read(self, final: bool = False) -> None:
        if not self.path.is_file():
            return
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = len(data) if final else data.rfind(b"\n") + 1
        for line in data[:end].decode(errors="replace").splitlines():
            self.lines.append(line)
            self.progress(line)
        self.offset += end


def follow(job_id: str, log_dir: str | Path, progress: Callable[[str], None], poll_seconds: float = 30.0,
           world: int = 1) -> list[str]:
    """Stream the job's output until it leaves the queue; its lines, or a LaunchError when it did not complete."""
    tail = _Tail(job_output(log_dir, job_id), progress)
    while in_queue(job_id):
        tail.read()
        time.sleep(poll_seconds)
    tail.read(final=True)
    state = final_state(job_id, poll_seconds)
    if state not in OK_STATES:
        raise LaunchError(f"slurm job {job_id} ended {state}: {failure_line(tail.lines, log_dir, world, 1)}")
    return tail.lines


def run_job(profile: Profile, cfg: TrainRunConfig, log_dir: Path, progress: Callable[[str], None],
            poll_seconds: float = 30.0) -> list[str]:
    """Render, submit and follow the job; the lines of its output."""
    script = log_dir / "train.sbatch"
    script.write_text(render_sbatch(profile, cfg, log_dir))
    job_id = submit(script)
    progress(f"submitted slurm job {job_id} ({profile.launch.nodes} node(s), script {script})")
    return follow(job_id, log_dir, progress, poll_seconds, profile.processes)
