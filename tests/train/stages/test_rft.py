"""Rejection sampling: episodes sampled from a real (one-layer) model in the rollout driver, kept only when the real
verifier passes."""

from __future__ import annotations

from typing import Any

import torch

from train.environment.env import EnvConfig, Environment
from train.environment.episode import EpisodeLimits
from train.models.model import HFGenerator
from train.stages.rft import accept, sample_episodes
from train.stages.sft import demonstrate, training_split
from train.environment.tasks import load_training_set
from train.environment.user_sim import ScriptedUser


def test_acceptance_keeps_only_verified_episodes(snapshot_warehouse: str, tokenizer: Any, tiny_model_path: str) -> None:
    from transformers import AutoModelForCausalLM

    data = load_training_set(snapshot_warehouse, "latest", ["weather"])
    task = training_split(snapshot_warehouse, data.snapshot_id, data.tasks)[0]
    env = Environment(EnvConfig(max_turns=12, max_tools=2), None, None,
                      lambda text: len(tokenizer.encode(text, add_special_tokens=False)))
    torch.manual_seed(0)
    # SmolLM2's tokenizer on a one-layer model: the sampling path is the same, in seconds rather than a minute
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    heard: list[str] = []
    sampled = sample_episodes(env, [task], ScriptedUser, HFGenerator(model, tokenizer), tokenizer, 2,
                              EpisodeLimits(max_turns=2, max_completion_tokens=48, max_turn_tokens=24), heard.append)
    assert len(sampled) == 2 and all(e.task_id == task.task_id for e in sampled)
    assert heard and heard[0].startswith("turn 1: 2 of 2 episodes played it")  # a long sampling shows its progress
    assert not any(e.solved for e in sampled)  # 24 tokens cannot hold the task's tool call: the verifier says no
    oracle = demonstrate(env, task, ScriptedUser(task))
    kept, acceptance = accept([*sampled, oracle], 3)
    assert kept == [oracle] and oracle.solved
    assert (acceptance.round, acceptance.sampled, acceptance.accepted) == (3, 3, 1)
    assert abs(acceptance.rate - 1 / 3) < 1e-9


def test_a_round_trains_its_epochs_over_what_it_kept_not_the_sft_step_count() -> None:
    from dataclasses import replace

    from train.stages.profiles import load_profile
    from train.stages.rft import round_steps

    profile = load_profile("cpu-learn")
    profile = replace(profile, sft=replace(profile.sft, max_steps=40, epochs=2, batch_size=1))
    assert round_steps(profile, 1) == 2  # not 40 steps on one episode
    assert round_steps(profile, 7) == 14 and round_steps(profile, 100) == 40  # the step count stays a ceiling
    unbounded = replace(profile, sft=replace(profile.sft, max_steps=None, epochs=1.5, batch_size=2))
    assert round_steps(unbounded, 5) == 4


def test_a_round_samples_at_most_rft_max_tasks_and_records_what_it_solved(snapshot_warehouse: str, tokenizer: Any,
                                                                          tiny_model_path: str, tmp_path: Any) -> None:
    import json
    from dataclasses import replace

    from train.stages.profiles import load_profile
    from train.stages.rft import SOLVED_FILE, read_acceptance, read_solved, round_done, run_round

    data = load_training_set(snapshot_warehouse, "latest", ["weather"])
    tasks = training_split(snapshot_warehouse, data.snapshot_id, data.tasks)[:3]
    env = Environment(EnvConfig(max_turns=12, max_tools=2), None, None,
                      lambda text: len(tokenizer.encode(text, add_special_tokens=False)))
    profile = load_profile("cpu-learn")
    profile = replace(profile, rft=replace(profile.rft, samples_per_task=1, max_tasks=2),
                      episode=replace(profile.episode, max_turns=1, max_completion_tokens=24, max_turn_tokens=8))
    folder = tmp_path / "round-1"
    result, acceptance = run_round(profile, tasks, env, ScriptedUser, tiny_model_path, tokenizer, folder, 1,
                                   progress=lambda line: None)
    assert result is None and (acceptance.sampled, acceptance.accepted) == (2, 0)  # 2 of the 3 tasks, 8 tokens each
    assert read_acceptance(folder) == acceptance and round_done(folder)
    assert read_solved(folder) == {} and json.loads((folder / SOLVED_FILE).read_text()) == {}
    assert read_solved(tmp_path / "round-2") is None  # a round that has not sampled


def test_a_round_fine_tunes_at_the_rft_rate_not_sfts(tokenizer: Any, tiny_model_path: str, tmp_path: Any) -> None:
    import json
    from dataclasses import asdict, replace

    from train.stages.profiles import load_profile
    from train.stages.rft import ACCEPTANCE_FILE, EXAMPLES_FILE, Acceptance, run_round
    from train.stages.sft import Demonstration

    profile = load_profile("cpu-learn")
    profile = replace(profile, sft=replace(profile.sft, max_steps=1, save_steps=1), rft=replace(profile.rft,
                      learning_rate=3e-6))
    folder = tmp_path / "round-1"  # a round killed after sampling: it resumes on the episodes it kept
    folder.mkdir()
    ids = tokenizer.encode("<|im_start|>assistant\nthe weather is fine<|im_end|>")
    (folder / EXAMPLES_FILE).write_text(json.dumps(Demonstration("t1", ids, [-100] + ids[1:]).row()) + "\n")
    (folder / ACCEPTANCE_FILE).write_text(json.dumps(asdict(Acceptance(1, 4, 1))))
    result, _ = run_round(profile, [], None, ScriptedUser, tiny_model_path, tokenizer, folder, 1,  # type: ignore[arg-type]
                          progress=lambda line: None)
    assert result is not None and result.global_step == 1
    args = torch.load(f"{result.checkpoints[-1]}/training_args.bin", weights_only=False)
    assert args.learning_rate == 3e-6 and profile.sft.learning_rate == 5e-5
