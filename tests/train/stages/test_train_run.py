"""The training job's pieces without training: per-instance preferences and TRAINING pricing schedules, the
warehouse records (upsert rules, through the single writer, older files migrated) and the reward-curve PNG that
says in words why nothing learned."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from inference.pricing import synthetic_schedules
from synthesis.preferences.build import PreferenceConfig, build_and_store
from train.environment.env import Environment
from train.evaluation.diagnose import diagnose_steps
from train.evaluation.report import plot_reward_curves, reward_figure, run_markdown
from train.stages.profiles import load_profile
from train.stages.records import run_identity, steps_from_log
from train.stages.run import main
from train.stages.trainset import build_training_set, preference_from_pair
from warehouse.pricing_store import read_pairs
from warehouse.train_store import read_training_run, read_training_steps, store_training


@pytest.fixture(scope="module")
def with_pairs(snapshot_warehouse: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A copy of the shared snapshot with a small preference run in it (the shared file stays pair-free)."""
    path = tmp_path_factory.mktemp("pairs") / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, path)
    build_and_store(PreferenceConfig(count=12, seed=0), path)
    return str(path)


def test_without_pairs_every_instance_is_accuracy_first_on_a_training_schedule(snapshot_warehouse: str) -> None:
    built = build_training_set(snapshot_warehouse, "latest", ["weather"], 6, pricing_seed=3)
    schedules = synthetic_schedules(seed=3)
    training = {s.schedule_id for s in schedules.training}
    assert built.preference_run_id is None and len(built.draws) == len(built.data.tasks) == 6
    assert all(t.preference is None and t.schedule_id in training for t in built.data.tasks)
    assert not {d.schedule_id for d in built.draws} & {s.schedule_id for s in schedules.heldout}
    assert len({(t.cost_scale, t.latency_scale) for t in built.data.tasks}) > 1  # schedules differ per instance
    again = build_training_set(snapshot_warehouse, "latest", ["weather"], 6, pricing_seed=3)
    assert again.draws == built.draws  # the seed decides the draws
    assert build_training_set(snapshot_warehouse, "latest", ["weather"], 6, pricing_seed=4).draws != built.draws


def test_pairs_give_each_instance_its_vector_and_instruction(with_pairs: str) -> None:
    built = build_training_set(with_pairs, "latest", ["weather"], 5, pricing_seed=0)
    pairs = {p["pair_id"]: p for p in read_pairs(with_pairs, split="train")}
    assert built.preference_run_id is not None
    for task, draw in zip(built.data.tasks, built.draws):
        pair = pairs[draw.pair_id]  # only train-split pairs are drawn
        assert task.preference == preference_from_pair(pair)
        assert task.preference["outcome"] == pair["vector"][-3] and task.preference["latency"] == pair["vector"][-1]
        assert task.preference_instruction == pair["instruction"]
        # the environment shows it in the system prompt, as the task's own preference
        assert f"# The user's preference\n{pair['instruction']}" in Environment().opening_messages(task)[0]["content"]
        assert draw.schedule_id == pair["schedule_id"]  # the pair's own schedule is a training one (seed 0)
    none = build_training_set(with_pairs, "latest", ["weather"], 5, preference_run="none")
    assert all(t.preference is None for t in none.data.tasks)


def test_a_pair_whose_vector_does_not_fit_its_tools_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="pair-x: vector has 3 entries for 2 tools"):
        preference_from_pair({"pair_id": "pair-x", "tools": ["a", "b"], "vector": [1.0, 0.0, 0.0]})


def _run_row(run_id: str, status: str = "running") -> dict[str, object]:
    now = datetime(2026, 11, 30, 12, 0)
    return {"run_id": run_id, "snapshot_id": "ts-x", "profile": "cpu-smoke", "config_hash": "abc",
            "config_json": "{}", "code_version": "c", "status": status, "output_dir": "/o", "started_at": now,
            "updated_at": now, "finished_at": None, "global_step": 1, "max_steps": 2, "resumes": 0,
            "resumed_from": None, "checkpoints_json": "[]", "final_checkpoint": None, "instances": 4,
            "dropped_json": "{}", "preference_run_id": None, "pricing_seed": 0, "reward_curve_png": None,
            "error": None}


LOG = [{"step": 1, "reward": 0.5, "reward_std": 0.25, "episode/solved_rate": 0.5, "episode/cost": 0.001,
        "completions/mean_length": 20.0, "num_tokens": 900.0, "filter/format_error": 1.0,
        "filter/no_final_output": 0.0, "filter/low_std_group": 2.0, "filter/groups_dropped": 1.0, "loss": 0.1,
        "learning_rate": 1e-6},
       {"step": 2, "reward": float("nan"), "reward_std": float("nan"), "filter/format_error": 2.0, "loss": 0.0},
       {"step": 2, "train_runtime": 12.0}]


def test_steps_are_upserted_and_a_measured_step_is_never_overwritten(tmp_path: Path, snapshot_warehouse: str) -> None:
    path = tmp_path / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, path)
    first = steps_from_log(LOG[:1], "run-a", 2, {1: 3.5})
    assert first[0]["completion_tokens"] == 40.0 and first[0]["drop_low_std_group"] == 2
    store_training(path, _run_row("run-a"), first)
    # after a resume step 1 comes back from the checkpoint's log without a clock: its seconds stay
    store_training(path, _run_row("run-a", "finished"), steps_from_log(LOG, "run-a", 2, {2: 4.0}))
    run = read_training_run(path, "run-a")
    steps = read_training_steps(path, "run-a")
    assert run is not None and run["status"] == "finished"
    assert [(s["step"], s["seconds"]) for s in steps] == [(1, 3.5), (2, 4.0)]
    assert steps[1]["reward_mean"] is None and steps[1]["drop_format_error"] == 2  # NaN is stored as NULL
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM training_runs WHERE run_id = 'run-a'").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM snapshots WHERE status = 'published'").fetchone() == (1,)
    finally:
        con.close()


# a run that learned nothing: every rollout cut off at the token limit, hence a format error, so no reward is kept
STUCK = [{"step": n, "reward": float("nan"), "reward_std": float("nan"), "episode/solved_rate": 0.0,
          "episode/rollouts": 4.0, "episode/ended/token_limit": 4.0, "filter/format_error": 4.0, "loss": 0.0}
         for n in (1, 2)]


def test_steps_record_their_rollouts_and_how_they_ended() -> None:
    (step,) = steps_from_log(STUCK[:1], "run-s", 4, {})
    assert step["rollouts"] == 4 and json.loads(step["endings_json"]) == {"token_limit": 4}
    (old,) = steps_from_log(LOG[:1], "run-s", 2, {})  # a log without the counts (an older trainer)
    assert old["rollouts"] is None and json.loads(old["endings_json"]) == {}


def test_the_reward_plot_and_summary_say_why_nothing_learned(tmp_path: Path) -> None:
    steps = steps_from_log(STUCK, "run-b", 4, {1: 2.0, 2: 3.0})
    diagnosis = diagnose_steps(steps)
    assert diagnosis[0] == "all 8 rollouts cut off at the token limit"
    assert "all 8 rollouts had a format error: each was dropped before the reward" in diagnosis
    assert "no rollout solved its task: every reward is 0" in diagnosis
    assert diagnosis[-1] == "no rollout kept a reward in 2 steps: the policy got no gradient from the reward"
    fig = reward_figure(steps, "run-b", diagnosis)
    try:
        top, bottom = fig.axes
        for ax in (top, bottom):  # every legend entry names a series that has points
            handles, labels = ax.get_legend_handles_labels()
            assert labels and all(len(h.get_xdata()) if hasattr(h, "get_xdata") else len(h) for h in handles)
        assert top.get_legend_handles_labels()[1] == ["outcome (solved) rate"]  # no reward mean: no entry
        assert all(float(t).is_integer() for t in bottom.get_xticks())  # steps, not 1.2 and 1.4
        assert any(diagnosis[0] in t.get_text() for t in fig.texts)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    png = plot_reward_curves(steps, tmp_path / "curves" / "reward_curves.png", "run-b")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    row = _run_row("run-b", "finished") | {"reward_curve_png": str(png)}
    text = run_markdown(row, steps, diagnosis)
    assert str(png) in text and "| 1 | 4 | token_limit 4 | - |" in text
    assert "## Why nothing learned" in text and f"- {diagnosis[0]}" in text


def test_a_step_with_an_advantage_needs_no_excuse() -> None:
    learned = steps_from_log([{"step": 1, "reward": 0.5, "reward_std": 0.5, "episode/solved_rate": 0.5,
                               "episode/rollouts": 2.0, "episode/ended/user_stop": 2.0, "loss": 0.1}], "run-l", 2, {})
    assert diagnose_steps(learned) == []
    low_std = [s | {"drop_format_error": 0, "drop_low_std_group": 4, "endings_json": '{"user_stop": 4}',
                    "outcome_rate": 1.0} for s in steps_from_log(STUCK, "run-c", 4, {})]
    assert diagnose_steps(low_std, 0.25) == [
        "every group's reward std under 0.25: no advantage",
        "no rollout kept a reward in 2 steps: the policy got no gradient from the reward"]


def test_an_older_warehouse_gains_the_step_columns(tmp_path: Path, snapshot_warehouse: str) -> None:
    path = tmp_path / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, path)
    con = duckdb.connect(str(path))
    try:  # as a warehouse written before the columns existed
        con.execute("ALTER TABLE training_steps DROP COLUMN rollouts")
        con.execute("ALTER TABLE training_steps DROP COLUMN endings_json")
        con.execute("INSERT INTO training_steps (run_id, step, drop_format_error, drop_no_final_output, "
                    "drop_low_std_group, groups_dropped, recorded_at) VALUES ('run-old', 1, 0, 0, 0, 0, now())")
    finally:
        con.close()
    store_training(path, _run_row("run-new"), steps_from_log(STUCK[:1], "run-new", 4, {}))
    assert read_training_steps(path, "run-old")[0]["rollouts"] is None
    assert read_training_steps(path, "run-new")[0]["rollouts"] == 4


def test_a_bad_snapshot_is_one_error_line(snapshot_warehouse: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--warehouse", snapshot_warehouse, "--snapshot", "ts-nope", "--output-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: no snapshot 'ts-nope' in the warehouse"


def test_a_finished_run_run_again_does_no_step_and_says_so(snapshot_warehouse: str, trained: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A real Trainer's two checkpoints stand in the folder of a ``cpu-smoke`` run (2 steps): killed after its last
    checkpoint but before the final record, then run again twice."""
    warehouse = tmp_path / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, warehouse)
    profile = load_profile("cpu-smoke")
    built = build_training_set(warehouse, "latest", profile.data.domains, profile.data.max_tasks)
    run_id, _, _ = run_identity(profile, built)
    out = Path(shutil.copytree(trained, tmp_path / "train" / run_id))
    state_file = out / "checkpoint-2" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    for entry in state["log_history"]:  # what the GRPO trainer logs per step
        entry.update({"reward": float("nan"), "episode/rollouts": 2.0, "episode/ended/token_limit": 2.0,
                      "filter/format_error": 2.0})
    state_file.write_text(json.dumps(state))
    args = ["--warehouse", str(warehouse), "--output-root", str(tmp_path / "train"), "--work-dir", str(tmp_path)]

    assert main(args) == 0  # --work-dir holds no model: a step would have to convert one first
    captured = capsys.readouterr()
    assert f"run {run_id} already finished at step 2 of 2; nothing to do" in captured.err
    assert "diagnosis: all 4 rollouts cut off at the token limit" in captured.err
    report = json.loads(captured.out.strip().splitlines()[-1])
    assert (report["status"], report["global_step"], report["steps_this_attempt"]) == ("finished", 2, 0)
    assert report["final_checkpoint"] == str(out / "checkpoint-2") and not (out / "checkpoint-3").exists()
    run = read_training_run(warehouse, run_id)
    assert run is not None and run["resumes"] == 0 and run["finished_at"] is not None
    assert [(s["step"], s["rollouts"]) for s in read_training_steps(warehouse, run_id)] == [(1, 2), (2, 2)]
    summary = (out / "summary.md").read_text()
    assert "## Why nothing learned" in summary
    assert f"`test` split held out for evaluation ({built.data.splits['test']} tasks)" in summary

    assert main(args) == 0  # and once more, now that the record says finished: it is left as it was
    captured = capsys.readouterr()
    assert "already finished at step 2 of 2; nothing to do" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["steps_this_attempt"] == 0
    assert read_training_run(warehouse, run_id) == run
