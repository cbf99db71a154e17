"""The training run end to end: a kill -9 after the first checkpoint and a rerun that continues from it, then the
``train-orchestrator/cpu-smoke`` deployment on a real Prefect server through a process worker. Both record the run
in the warehouse, and the final checkpoint plays an episode. The profile is cpu-smoke with the one-layer Llama for
its model (``tiny_profile``): the same job and trainer, a second a step. docs/training.md's examples, run by
tests/test_docs.py, train SmolLM2 itself."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import (ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey,
                                           DeploymentFilter, DeploymentFilterId)

from flows.train_orchestrator import ARTIFACT_KEY
from tests.train.conftest import MODEL_CACHE, REPO
from train.environment.env import EnvConfig, Environment
from train.environment.episode import EpisodeLimits, run_episodes, start_episode
from train.models.model import HFGenerator, load_checkpoint
from train.stages.run import main as train_main
from train.environment.tasks import load_training_set
from train.environment.user_sim import ScriptedUser
from warehouse.train_store import read_training_run, read_training_steps
from tests.prefect_stack import prefect_stack

JOB_TIMEOUT = 900  # seconds; two tiny-model steps take seconds, the start-up most of a minute when loaded


def _only_run(warehouse: str, output_root: Path) -> dict[str, Any] | None:
    """The one training run whose folder is under ``output_root`` (the shared snapshot may hold others)."""
    import duckdb

    try:
        con = duckdb.connect(warehouse, read_only=True)
    except duckdb.Error:
        return None  # the writer is swapping the file in; look again
    try:
        if not con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'training_runs'").fetchone():
            return None
        rows = con.execute("SELECT run_id FROM training_runs WHERE starts_with(output_dir, ?)",
                           [str(output_root)]).fetchall()
    finally:
        con.close()
    assert len(rows) <= 1, rows
    return read_training_run(warehouse, rows[0][0]) if rows else None


def _plays_an_episode(checkpoint: str, warehouse: str) -> None:
    """What evaluation needs from a checkpoint: a model and tokenizer that run an episode to a verdict."""
    model, tokenizer = load_checkpoint(checkpoint)
    data = load_training_set(warehouse, "latest", ["weather"], 1)
    task = data.tasks[0]
    env = Environment(EnvConfig(max_turns=1, max_tools=2))
    episode = start_episode(env, task, ScriptedUser(task), tokenizer, "eval")
    (done,) = run_episodes([episode], HFGenerator(model, tokenizer), tokenizer, EpisodeLimits(1, 16, 16))
    assert done.done and done.finish().turns == 1 and len(done.completion_ids) > 0


def _check_recorded(warehouse: str, run: dict[str, Any]) -> list[dict[str, Any]]:
    assert run["status"] == "finished" and run["global_step"] == run["max_steps"] == 2
    steps = read_training_steps(warehouse, run["run_id"])
    assert [s["step"] for s in steps] == [1, 2]
    for s in steps:  # each step: 1 task x 2 rollouts, every filter counted
        assert s["drop_format_error"] + s["drop_no_final_output"] + s["drop_low_std_group"] <= 2
        assert s["completion_tokens"] > 0 and s["loss"] is not None and s["learning_rate"] > 0
    assert Path(run["final_checkpoint"]).name == "checkpoint-2"
    assert Path(run["reward_curve_png"]).read_bytes()[:4] == b"\x89PNG"
    assert json.loads(run["config_json"])["snapshot_id"] == run["snapshot_id"]
    return steps


@pytest.mark.slow
def test_kill_9_after_the_first_checkpoint_then_a_rerun_resumes_from_it(
        snapshot_warehouse: str, tiny_profile: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = str(tmp_path / "wh.duckdb")
    shutil.copyfile(snapshot_warehouse, warehouse)  # this run's records stay out of the shared snapshot
    args = [sys.executable, "-m", "train.stages.run", "--profile", str(tiny_profile("cpu-smoke")), "--warehouse", warehouse,
            "--output-root", str(tmp_path / "train"), "--work-dir", str(MODEL_CACHE)]
    with open(tmp_path / "first.log", "wb") as log:
        first = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + JOB_TIMEOUT
        while (run := _only_run(warehouse, tmp_path / "train")) is None or run["global_step"] < 1:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint recorded in time"
            time.sleep(0.5)
        os.killpg(first.pid, signal.SIGKILL)  # kill -9: no handler, no cleanup
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    killed = _only_run(warehouse, tmp_path / "train")
    assert killed is not None and killed["status"] == "running" and killed["global_step"] == 1
    out = Path(killed["output_dir"])
    assert not (out / "checkpoint-2").exists()

    rerun = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=JOB_TIMEOUT)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    # the step count continues: the rerun trained step 2 only, from checkpoint-1 of the same run folder
    assert report["run_id"] == killed["run_id"] and report["global_step"] == 2
    assert report["steps_this_attempt"] == 1 and report["resumed_from"] == str(out / "checkpoint-1")
    run = read_training_run(warehouse, killed["run_id"])
    assert run is not None and run["resumes"] == 1 and run["started_at"] == killed["started_at"]
    steps = _check_recorded(warehouse, run)
    assert steps[0]["seconds"] is not None and steps[1]["seconds"] is not None
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    _plays_an_episode(run["final_checkpoint"], warehouse)

    assert train_main(args[3:]) == 0  # the finished run once more (in this process: no second start-up)
    captured = capsys.readouterr()
    assert f"run {run['run_id']} already finished at step 2 of 2; nothing to do" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["steps_this_attempt"] == 0
    assert not (out / "checkpoint-3").exists() and read_training_run(warehouse, run["run_id"]) == run


@pytest.mark.slow
@pytest.mark.server
def test_cpu_smoke_deployment_trains_on_a_real_server_through_a_process_worker(snapshot_warehouse: str,
                                                                              tiny_profile: Callable[..., Path],
                                                                              tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh.duckdb")
    shutil.copyfile(snapshot_warehouse, warehouse)  # this run's records stay out of the shared snapshot
    port = int(os.environ.get("TOOLSCALE_TEST_PREFECT_PORT") or 0) or None
    with prefect_stack(tmp_path, deploy=("--all",), port=port, health_s=90, deploy_timeout=180) as stack:
        params = {"profile": str(tiny_profile("cpu-smoke")), "warehouse": warehouse,
                  "output_root": str(tmp_path / "train"), "work_dir": str(MODEL_CACHE)}
        stack.cli("deployment", "run", "train-orchestrator/cpu-smoke", "--params", json.dumps(params),
                 "--watch", "--watch-interval", "2", "--watch-timeout", str(JOB_TIMEOUT),
                  timeout=JOB_TIMEOUT + 60)

        with SyncPrefectClient(stack.api) as client:
            smoke = client.read_deployment_by_name("train-orchestrator/cpu-smoke")
            h100 = client.read_deployment_by_name("train-orchestrator/h100")
            (flow_run,) = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[smoke.id])))
            artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[ARTIFACT_KEY]), flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run.id])))
        assert flow_run.state is not None and flow_run.state.is_completed(), \
            stack.worker_log()
        assert h100.parameters["profile"] == "h100" and h100.work_pool_name == smoke.work_pool_name

        run = _only_run(warehouse, tmp_path / "train")
        assert run is not None and run["profile"] == "cpu-smoke" and run["resumes"] == 0
        _check_recorded(warehouse, run)
        (artifact,) = artifacts
        assert artifact.type == "markdown" and run["run_id"] in artifact.data
        assert run["reward_curve_png"] in artifact.data and "| 2 |" in artifact.data
        _plays_an_episode(run["final_checkpoint"], warehouse)
