"""Stages in one job (train/stages/sequence.py): sft then grpo on a real snapshot, each stage recorded with its name, the
second started from the first's final model, a rerun doing nothing; older warehouses gain the stage column."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from train.stages.records import TrainRunConfig
from train.stages.run import run_training
from warehouse.train_store import read_training_run, read_training_steps, store_training

PROFILE = """
name: stages-test
model: {name: MODEL, dtype: float32, use_cpu: true}
data: {domains: [weather], max_tasks: 1, max_tools: 2, max_prompt_tokens: 2048}
episode: {max_turns: 8, max_completion_tokens: 32, max_turn_tokens: 8}
sft: {max_steps: 1, save_steps: 1, max_length: 4096}
grpo: {num_generations: 2, tasks_per_step: 1, max_steps: 1, save_steps: 1, beta: 0.0}
stages: [sft, grpo]
"""


@pytest.fixture()
def warehouse(snapshot_warehouse: str, tmp_path: Path) -> str:
    path = tmp_path / "wh.duckdb"  # the shared snapshot file stays as it is
    shutil.copyfile(snapshot_warehouse, path)
    return str(path)


def test_sft_then_grpo_are_recorded_as_stages_and_a_rerun_does_nothing(warehouse: str, tiny_model_path: str,
                                                                      tmp_path: Path) -> None:
    profile = tmp_path / "stages-test.yaml"
    profile.write_text(PROFILE.replace("MODEL", tiny_model_path))  # SmolLM2 would take a minute a step here
    cfg = TrainRunConfig(str(profile), warehouse, output_root=str(tmp_path / "runs"))
    lines: list[str] = []
    result = run_training(cfg, progress=lines.append)
    run_id = result.run["run_id"]
    sft, grpo = (read_training_run(warehouse, f"{run_id}-{stage}") for stage in ("sft", "grpo"))
    assert sft is not None and grpo is not None
    assert (sft["stage"], sft["status"], sft["global_step"]) == ("sft", "finished", 1)
    assert (grpo["stage"], grpo["status"], grpo["global_step"]) == ("grpo", "finished", 1)
    # stage 2 started from stage 1's final model, and GRPO's trainer loaded it
    assert Path(sft["final_checkpoint"]).name == "final"
    assert json.loads(grpo["config_json"])["start_model"] == sft["final_checkpoint"]
    assert json.loads(grpo["config_json"])["profile"]["model"]["name"] == sft["final_checkpoint"]
    assert json.loads(sft["config_json"])["start_model"] == tiny_model_path
    steps = {s: read_training_steps(warehouse, f"{run_id}-{s}") for s in ("sft", "grpo")}
    assert [(r["step"], r["stage"]) for r in steps["sft"]] == [(1, "sft")] and steps["sft"][0]["loss"] > 0
    assert [(r["step"], r["stage"]) for r in steps["grpo"]] == [(1, "grpo")]
    assert result.steps_this_attempt == 2 and result.run["final_checkpoint"] == grpo["final_checkpoint"]
    assert Path(result.run["reward_curve_png"]).stat().st_size > 0  # the one stages plot
    assert "| sft |" in result.markdown and "| grpo |" in result.markdown

    again: list[str] = []
    rerun = run_training(cfg, progress=again.append)
    assert rerun.steps_this_attempt == 0
    assert sum("finished earlier" in line and "nothing to do" in line for line in again) == 2
    assert read_training_run(warehouse, f"{run_id}-grpo")["updated_at"] == grpo["updated_at"]  # untouched


def test_an_older_warehouse_gains_the_stage_column_and_its_runs_read_grpo(warehouse: str) -> None:
    con = duckdb.connect(warehouse)
    try:  # as a warehouse written before stages existed
        con.execute("ALTER TABLE training_runs DROP COLUMN stage")
        con.execute("ALTER TABLE training_steps DROP COLUMN stage")
        con.execute("INSERT INTO training_steps (run_id, step, drop_format_error, drop_no_final_output, "
                    "drop_low_std_group, groups_dropped, recorded_at) VALUES ('run-old', 1, 0, 0, 0, 0, now())")
    finally:
        con.close()
    now = read_training_steps(warehouse, "run-old")[0]["recorded_at"]
    run = {"run_id": "run-new", "snapshot_id": "ts-x", "profile": "p", "config_hash": "h", "config_json": "{}",
           "code_version": "c", "status": "running", "output_dir": "/o", "started_at": now, "updated_at": now,
           "global_step": 0, "max_steps": 1, "resumes": 0, "checkpoints_json": "[]", "instances": 1,
           "dropped_json": "{}", "pricing_seed": 0, "stage": "sft"}
    store_training(warehouse, run, [])
    assert read_training_steps(warehouse, "run-old")[0]["stage"] == "grpo"
    assert read_training_run(warehouse, "run-new")["stage"] == "sft"


def test_grpo_draws_only_the_tasks_an_rft_round_solved_when_the_profile_asks(warehouse: str, tmp_path: Path) -> None:
    from train.stages.profiles import load_profile
    from train.stages.rft import SOLVED_FILE
    from train.stages.records import load_built
    from train.stages.sequence import _Context, grpo_pool

    profile_path = tmp_path / "pool-test.yaml"
    profile_path.write_text(PROFILE.replace("MODEL", "smollm2-gguf").replace("max_tasks: 1", "max_tasks: 3")
                            .replace("stages: [sft, grpo]", "stages: [sft, rft, grpo]")
                            .replace("beta: 0.0}", "beta: 0.0, task_pool: rft_solved}"))
    profile = load_profile(profile_path)
    cfg = TrainRunConfig(str(profile_path), warehouse, output_root=str(tmp_path / "runs"))
    built = load_built(cfg, profile)
    ids = [t.task_id for t in built.data.tasks]
    assert len(ids) == 3
    lines: list[str] = []
    ctx = _Context(cfg, profile, built, "run-x", None, lines.append)
    assert grpo_pool(ctx) is built and "no rft round solved a training task" in lines[-1]  # no round yet: all

    round_two = tmp_path / "runs" / "run-x-rft" / "round-2"
    round_two.mkdir(parents=True)
    (round_two / SOLVED_FILE).write_text(json.dumps({ids[1]: 2, "weather-not-in-this-set": 1}))
    pool = grpo_pool(ctx)
    assert [t.task_id for t in pool.data.tasks] == [ids[1]] and [d.task_id for d in pool.draws] == [ids[1]]
    assert pool.data.snapshot_id == built.data.snapshot_id and pool.pricing_seed == built.pricing_seed
    assert "the 1 of 3 training tasks an rft round solved" in lines[-1]
    assert [t.task_id for t in built.data.tasks] == ids  # the stages' own set is left whole
