"""The multi-process launch (train/stages/launch.py, train/stages/ranks.py, train/stages/slurm.py): the accelerate command and the sbatch
script rendered from a profile, the submit-and-follow path against stand-in slurm tools, the launch profile keys,
and one real 2-process run on CPU (gloo) killed with -9 after its first step and resumed at the same step."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.train.conftest import MODEL_CACHE, REPO
from train.stages.command import LaunchError, Site, failure_line, launch_command
from train.stages.launch import launch_training, needs_launch, result_from
from train.stages.profiles import PROFILES_DIR, ProfileError, load_profile
from train.stages.records import TrainRunConfig
from warehouse.errors import WarehouseError
from train.stages.slurm import render_sbatch, run_job
from flows.train_orchestrator import train_flow
from warehouse.train_store import read_training_run, read_training_steps

SITE = Site(python="/opt/venv/bin/python", root="/srv/toolscale", cwd="/srv/run")
CFG = TrainRunConfig("h100", "/data/wh.duckdb", "latest", "/data/train", "/data/work")

H100_SBATCH = """\
#!/bin/bash
#SBATCH --job-name=toolscale-train-h100
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --time=24:00:00
#SBATCH --output=/data/train/launch/h100/slurm-%j.out
# rendered by train/stages/launch.py from profile h100: 2 node(s) x 8 process(es), rendezvous on the first node
set -euo pipefail
cd /srv/run
export PYTHONPATH=/srv/toolscale${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export MAIN_PROCESS_IP="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
srun --kill-on-bad-exit=1 bash -c 'exec /opt/venv/bin/python -m accelerate.commands.launch \
--config_file /srv/toolscale/train/profiles/launch/accelerate-2x8.yaml --num_machines 2 --num_processes 16 \
--machine_rank "$SLURM_NODEID" --main_process_ip "$MAIN_PROCESS_IP" --main_process_port 29500 --dynamo_backend no \
--mixed_precision bf16 --use_deepspeed --deepspeed_config_file /srv/toolscale/train/profiles/launch/deepspeed-zero3.json \
--deepspeed_multinode_launcher standard -m train.stages.ranks --log-dir /data/train/launch/h100 -- --profile h100 \
--warehouse /data/wh.duckdb --snapshot latest --output-root /data/train --work-dir /data/work --pricing-seed 0'
""".replace(" \\\n", " ").replace("\\\n", "")


def test_the_h100_sbatch_script_is_rendered_exactly() -> None:
    h100 = load_profile("h100")
    assert needs_launch(h100) and h100.processes == 16
    assert render_sbatch(h100, CFG, "/data/train/launch/h100", SITE) == H100_SBATCH


def test_a_cpu_multi_process_profile_is_ddp_on_this_machine_and_a_single_process_one_is_not_launched() -> None:
    two = load_profile("cpu-smoke-2proc")
    cmd = launch_command(two, CFG, "/logs", SITE)
    assert cmd[:3] == ["/opt/venv/bin/python", "-m", "accelerate.commands.launch"]
    assert "--multi_gpu" in cmd and "--use_deepspeed" not in cmd and "--config_file" not in cmd
    assert cmd[cmd.index("--num_processes") + 1] == "2" and cmd[cmd.index("--mixed_precision") + 1] == "no"
    assert cmd[cmd.index("--main_process_port") + 1] == "29511"
    assert cmd[cmd.index("-m", 3):cmd.index("--", 3) + 1] == ["-m", "train.stages.ranks", "--log-dir", "/logs", "--"]
    assert needs_launch(two) and not needs_launch(load_profile("cpu-smoke"))
    assert two.per_device_batch() == 1  # the group of 2 rollouts is split over the 2 ranks


def _h100_with(tmp_path: Path, **launch: object) -> Path:
    data = yaml.safe_load((PROFILES_DIR / "h100.yaml").read_text())
    data["launch"].update(launch)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    # launcher configs are found beside the profile too: give them their shipped place
    shutil.copytree(PROFILES_DIR / "launch", tmp_path / "launch", dirs_exist_ok=True)
    return path


@pytest.mark.parametrize("launch, message", [
    ({"scheduler": "kubernetes"}, "launch.scheduler must be one of local, slurm, got 'kubernetes'"),
    ({"scheduler": "local"}, "launch.nodes 2: several nodes need launch.scheduler slurm"),
    ({"processes": 12}, "launch.processes (12) must be launch.nodes x launch.gpus_per_node (16)"),
    ({"processes": 3, "gpus_per_node": 0}, "launch.processes (3) must divide evenly over launch.nodes (2)"),
    ({"processes": 0}, "launch.processes: 0 is out of range"),
    ({"main_process_port": 80}, "launch.main_process_port: 80 is out of range; it must be from 1024 to 65535"),
    ({"main_process_port": 70000}, "launch.main_process_port: 70000 is out of range"),
    ({"main_process_port": float("nan")}, "launch.main_process_port: expected int, got nan"),
    ({"slurm_time": "tomorrow"}, "launch.slurm_time 'tomorrow' must be minutes, HH:MM:SS or D-HH:MM:SS"),
    ({"slurm_partition": "gpu; rm -rf /"}, "launch.slurm_partition 'gpu; rm -rf /' must be 1-64 letters"),
    ({"deepspeed": "zero3"}, "launch: unknown key(s) deepspeed"),
])
def test_a_bad_launch_key_is_one_error_naming_it(tmp_path: Path, launch: dict[str, object], message: str) -> None:
    with pytest.raises(ProfileError, match="^.*" + message.replace("(", r"\(").replace(")", r"\)")):
        load_profile(_h100_with(tmp_path, **launch))


STANDINS = {
    # records the script it was given and writes the job's output file the way the job itself would
    "sbatch": """#!/bin/bash
script="${@: -1}"; cp "$script" "$STANDIN/submitted.sbatch"
[ -n "$STANDIN_REFUSE" ] && { echo "sbatch: error: invalid partition specified: gpu" >&2; exit 1; }
out=$(sed -n 's/^#SBATCH --output=//p' "$script"); out=${out//%j/4242}
printf 'run train-h100-x: 4 tasks\\nstep 1: checkpoint saved and recorded\\n' > "$out"
[ "$STANDIN_STATE" = FAILED ] && printf 'Traceback (most recent call last):\\nValueError: no published snapshot\\n' >> "$out"
echo 4242
""",
    # the job is listed (RUNNING) for two polls, then leaves the queue
    "squeue": """#!/bin/bash
echo x >> "$STANDIN/polls"; [ "$(wc -l < "$STANDIN/polls")" -le 2 ] && echo RUNNING; exit 0
""",
    "sacct": """#!/bin/bash
echo "$*" > "$STANDIN/sacct.args"; echo "$STANDIN_STATE"
""",
}


@pytest.fixture
def slurm_standins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in STANDINS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN", str(tmp_path))
    return tmp_path


def test_slurm_submits_the_rendered_script_and_follows_the_job_to_its_end(slurm_standins: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    h100, logs, lines = load_profile("h100"), slurm_standins / "logs", []
    logs.mkdir()
    monkeypatch.setenv("STANDIN_STATE", "COMPLETED")
    out = run_job(h100, CFG, logs, lines.append, poll_seconds=0.01)
    assert (slurm_standins / "submitted.sbatch").read_text() == render_sbatch(h100, CFG, logs)
    assert out == ["run train-h100-x: 4 tasks", "step 1: checkpoint saved and recorded"]
    assert lines[0].startswith("submitted slurm job 4242 (2 node(s)") and lines[1:] == out  # streamed as it came
    assert (slurm_standins / "polls").read_text().count("x") == 3  # followed until the job left the queue
    assert "-j 4242" in (slurm_standins / "sacct.args").read_text()
    with pytest.raises(LaunchError, match="without rank 0's summary line"):
        result_from(out, CFG)  # a job that printed no summary is not taken for a finished run


def test_a_failed_or_refused_slurm_job_fails_with_its_error_line(slurm_standins: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    h100, logs = load_profile("h100"), slurm_standins / "logs"
    logs.mkdir()
    monkeypatch.setenv("STANDIN_STATE", "FAILED")
    with pytest.raises(LaunchError, match="^slurm job 4242 ended FAILED: rank 0 failed: ValueError: no published"):
        run_job(h100, CFG, logs, lambda m: None, poll_seconds=0.01)
    monkeypatch.setenv("STANDIN_REFUSE", "1")
    with pytest.raises(LaunchError, match="sbatch refused .*: sbatch: error: invalid partition specified: gpu"):
        run_job(h100, CFG, logs, lambda m: None, poll_seconds=0.01)


def test_the_failing_rank_is_the_one_torchrun_names(tmp_path: Path) -> None:
    (tmp_path / "rank-1.log").write_text("loading\n[rank1]: Traceback (most recent call last):\n"
                                         "[rank1]: RuntimeError: out of memory\n[rank1]:   see above\n")
    output = ["step 1", "Root Cause (first observed failure):", "[1]:", "  time      : now", "  rank      : 1 (local_rank: 1)"]
    assert failure_line(output, tmp_path, 2, 1) == "rank 1 failed: RuntimeError: out of memory"
    assert failure_line(["error: bad snapshot"], tmp_path, 1, 2) == "rank 0 failed: bad snapshot"
    assert failure_line(["just this"], tmp_path / "none", 2, 9) == "the launch exited with status 9: just this"


def test_a_cpu_rank_loads_state_saved_for_its_own_device() -> None:
    """The Trainer resumes rank N's optimizer with ``map_location='cpu:N'``; the ranks must accept that."""
    import io

    import torch

    from train.stages.world import accept_cpu_rank_locations

    saved = io.BytesIO()
    torch.save({"exp_avg": torch.ones(3)}, saved)
    accept_cpu_rank_locations()
    saved.seek(0)
    assert torch.load(saved, map_location="cpu:1", weights_only=True)["exp_avg"].tolist() == [1.0, 1.0, 1.0]


def test_a_launch_on_an_absent_snapshot_is_refused_before_any_rank_starts(snapshot_warehouse: str,
                                                                         smollm2_path: str, tmp_path: Path) -> None:
    """Issue 38: the launch checks its inputs before any process starts (it used to start two ranks that each
    failed on the absent snapshot)."""
    data = yaml.safe_load((PROFILES_DIR / "cpu-smoke-2proc.yaml").read_text())
    data["launch"]["main_process_port"] = _free_port()
    profile = tmp_path / "two.yaml"
    profile.write_text(yaml.safe_dump(data))
    lines: list[str] = []
    cfg = TrainRunConfig(str(profile), snapshot_warehouse, "ts-absent", str(tmp_path / "runs"), str(MODEL_CACHE))
    with pytest.raises(WarehouseError, match=r"^no snapshot 'ts-absent' in the warehouse$"):
        launch_training(cfg, progress=lines.append)
    assert not any(line.startswith("launching") for line in lines)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@contextmanager
def _prefect_harness(tmp_path: Path) -> Iterator[None]:
    from prefect.settings import PREFECT_HOME, PREFECT_LOCAL_STORAGE_PATH, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    home = tmp_path / "prefect-home"
    with temporary_settings(updates={PREFECT_HOME: home, PREFECT_LOCAL_STORAGE_PATH: home / "storage"}):
        with prefect_test_harness(server_startup_timeout=90):
            yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _processes_marked(mark: str) -> list[int]:
    """Pids of live processes whose environment carries ``mark`` (every rank inherits the launcher's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if f"LAUNCH_TEST_MARK={mark}".encode() in environ.split(b"\0") and "State:\tZ" not in status:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_two_gloo_ranks_train_are_killed_with_the_launcher_and_resume_at_the_same_step(
        snapshot_warehouse: str, tiny_profile: Callable[..., Path], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """2 CPU processes run GRPO; a kill -9 of the launcher after step 1 leaves no rank running; the rerun, through
    the train-orchestrator flow, resumes every rank at checkpoint-1, does step 2, and the run is recorded once."""
    warehouse = str(tmp_path / "wh.duckdb")
    shutil.copyfile(snapshot_warehouse, warehouse)
    profile = tiny_profile("cpu-smoke-2proc", launch={"main_process_port": _free_port()},
                           episode={"max_turns": 1, "max_completion_tokens": 8, "max_turn_tokens": 8})
    out, mark = tmp_path / "runs", uuid.uuid4().hex
    job = ["--profile", str(profile), "--warehouse", warehouse, "--output-root", str(out),
           "--work-dir", str(MODEL_CACHE)]
    launcher = subprocess.Popen([sys.executable, "-m", "train.stages.launch", *job], cwd=REPO, text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=dict(os.environ, LAUNCH_TEST_MARK=mark))
    seen: list[str] = []

    def read() -> None:
        assert launcher.stderr is not None
        for line in launcher.stderr:
            seen.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 900
    while not any(line.startswith("step 1: checkpoint saved") for line in seen):
        assert launcher.poll() is None and time.monotonic() < deadline, "\n".join(seen[-30:])
        time.sleep(0.2)
    assert len(_processes_marked(mark)) >= 3  # the launcher, accelerate, and the ranks
    launcher.kill()  # kill -9 of what the flow run is
    launcher.wait()
    for _ in range(100):
        if not (left := _processes_marked(mark)):
            break
        time.sleep(0.1)
    assert not left, f"processes outlived the killed launcher: {left}"

    with _prefect_harness(tmp_path):
        state = train_flow(profile=str(profile), warehouse=warehouse, output_root=str(out),
                           work_dir=str(MODEL_CACHE), return_state=True)
    assert state.is_completed(), state.message
    flow_result = state.result()
    run = read_training_run(warehouse, flow_result["run_id"])
    assert run is not None and run["status"] == "finished" and run["global_step"] == 2
    assert flow_result["steps_this_attempt"] == 1 and run["resumed_from"].endswith("checkpoint-1")
    assert run["resumes"] == 1
    lines = [r.getMessage() for r in caplog.records]
    assert any("resuming from" in line and "checkpoint-1" in line for line in lines)  # rank 0's lines in the log
    import duckdb

    con = duckdb.connect(warehouse, read_only=True)
    runs = con.execute("SELECT run_id FROM training_runs WHERE starts_with(output_dir, ?)", [str(out)]).fetchall()
    con.close()
    assert runs == [(run["run_id"],)]  # recorded once, by rank 0
    assert [s["step"] for s in read_training_steps(warehouse, run["run_id"])] == [1, 2]
    rank1 = [p for p in (out / "launch").glob("*/rank-1.log")]
    assert len(rank1) == 2 and all("resuming from" in p.read_text() or "step 1" in p.read_text() for p in rank1)
