"""SFT warm start: oracle demonstrations of training-split tasks, labels on assistant tokens only, one real step."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from train.environment.env import EnvConfig, Environment
from train.stages.profiles import load_profile
from train.stages.sft import IGNORE, demonstrate, demonstrations, fine_tune, training_split
from train.environment.tasks import load_training_set
from train.environment.user_sim import ScriptedUser


def _environment(tokenizer: Any) -> Environment:
    return Environment(EnvConfig(max_turns=12, max_tools=2), None, None,
                       lambda text: len(tokenizer.encode(text, add_special_tokens=False)))


def test_demonstrations_train_on_assistant_tokens_only(snapshot_warehouse: str, tokenizer: Any, tiny_model_path: str,
                                                       tmp_path: Path) -> None:
    data = load_training_set(snapshot_warehouse, "latest", ["weather"])
    train = training_split(snapshot_warehouse, data.snapshot_id, data.tasks)
    from train.evaluation.evaluate import evaluation_split

    test_ids = {t.task_id for t in evaluation_split(snapshot_warehouse, data.snapshot_id, data.tasks)[0]}
    assert train and test_ids and not test_ids & {t.task_id for t in train}

    env = _environment(tokenizer)
    episode = demonstrate(env, train[0], ScriptedUser(train[0]))
    assert episode.solved, episode.failed_checks
    [demo] = demonstrations([episode], tokenizer, 4096)
    assert len(demo.input_ids) == len(demo.labels)
    trained = tokenizer.decode([t for t in demo.labels if t != IGNORE])
    said = [m["content"] for m in episode.messages if m["role"] == "assistant"]
    # every assistant turn is trained on, and nothing else: no system prompt, no user turn, no tool response
    assert trained == "<|im_end|>".join(said) + "<|im_end|>"
    assert "<tool_response>" not in trained and "# Policy" not in trained
    assert any(m["role"] == "user" and "<tool_response>" in m["content"] for m in episode.messages)
    assert demo.labels[0] == IGNORE
    # and the tokens are the chat template's: the whole input decodes to the rendered conversation
    assert tokenizer.decode(demo.input_ids).startswith(
        tokenizer.apply_chat_template(episode.messages[:2], tokenize=False))

    profile = load_profile("cpu-smoke")
    profile = replace(profile, sft=replace(profile.sft, max_steps=1, save_steps=1, max_length=4096))
    # SFTTrainer on a one-layer model with SmolLM2's tokenizer: the same trainer, labels and checkpoints in seconds
    result = fine_tune(profile, tiny_model_path, tokenizer, [demo], str(tmp_path / "sft"))
    assert result.global_step == 1 and result.checkpoints
    loss = [e["loss"] for e in result.log_history if "loss" in e]
    assert loss and loss[0] > 0
    assert (Path(result.final_checkpoint) / "model.safetensors").exists()
    again = fine_tune(profile, tiny_model_path, tokenizer, [demo], str(tmp_path / "sft"))  # a finished stage: no step
    assert again.global_step == 1
