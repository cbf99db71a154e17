"""SFT warm start: TRL's SFTTrainer on oracle demonstrations of the snapshot's training split.

A demonstration is an episode of ``train.environment.policies.DialogueOracle`` (the gold played as a careful agent: it asks for
what only the user knows, makes the gold calls, tells the user what they must hear) in the environment GRPO and
evaluation use (train/stages/rollout_env.py: same system prompt, tool subset, prices, preference instruction and user
simulator). Only episodes the verifier passes are kept. Each is rendered through the model's chat template piece by
piece, as the GRPO rollouts are (train/environment/episode.py), and only the assistant's tokens carry labels; everything else is
-100. SmolLM2's template has no ``{% generation %}`` markers, so TRL's ``assistant_only_loss`` cannot build that
mask: the labels are built here and handed to SFTTrainer as a tokenized dataset.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from train.models.checkpoints import complete_checkpoints, resume_point
from train.environment.env import Environment, EpisodeResult
from train.environment.episode import appended_text, chat_ids
from train.evaluation.evaluate import evaluation_split
from train.environment.policies import DialogueOracle
from train.stages.profiles import Profile
from train.environment.tasks import TrainingTask
from train.environment.user_sim import UserSimulator

IGNORE = -100  # the label of a token that carries no loss


@dataclass
class Demonstration:
    task_id: str
    input_ids: list[int]
    labels: list[int]  # the token where the assistant wrote it, IGNORE elsewhere

    def row(self) -> dict[str, Any]:
        return {"input_ids": self.input_ids, "labels": self.labels, "task_id": self.task_id}


@dataclass
class StageResult:
    """What a fine-tuning stage (sft, one rft round) did."""

    output_dir: str
    global_step: int
    checkpoints: list[str]
    final_checkpoint: str | None
    examples: int
    dropped: dict[str, int] = field(default_factory=dict)
    log_history: list[dict[str, Any]] = field(default_factory=list)


def training_split(warehouse: str, snapshot_id: str, tasks: list[TrainingTask]) -> list[TrainingTask]:
    """The tasks of ``tasks`` outside the snapshot's evaluation split (the split ``toolscale evaluate`` scores)."""
    test = {t.task_id for t in evaluation_split(warehouse, snapshot_id, tasks)[0]}
    return [t for t in tasks if t.task_id not in test]


def render(tokenizer: Any, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of a finished episode: the system prompt and opening as the prompt, then each
    message in the chat template as the rollouts tokenize it; labels only on assistant tokens (with their
    end-of-turn token)."""
    start = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    ids = chat_ids(tokenizer, messages[:start])
    labels = [IGNORE] * len(ids)
    i = start
    while i < len(messages):
        turn = tokenizer.encode(messages[i]["content"], add_special_tokens=False) + [tokenizer.eos_token_id]
        ids += turn
        labels += turn
        j = i + 1
        while j < len(messages) and messages[j]["role"] != "assistant":
            j += 1
        if j < len(messages):  # what the environment appended, and the next assistant turn's opening
            between = tokenizer.encode(appended_text(tokenizer, messages[i + 1:j]), add_special_tokens=False)
            ids += between
            labels += [IGNORE] * len(between)
        i = j
    return ids, labels


def demonstrate(env: Environment, task: TrainingTask, user: UserSimulator) -> EpisodeResult:
    """The oracle's episode of ``task`` in ``env``."""
    return env.run(task, DialogueOracle(task), user)


def demonstrations(episodes: Sequence[EpisodeResult], tokenizer: Any, max_length: int,
                   dropped: Counter[str] | None = None) -> list[Demonstration]:
    """Solved episodes as demonstrations; unsolved and over-long ones are counted in ``dropped``."""
    dropped = dropped if dropped is not None else Counter()
    out = []
    for episode in episodes:
        if not episode.solved:
            dropped[f"unsolved_{episode.ended_by}"] += 1
            continue
        ids, labels = render(tokenizer, episode.messages)
        if len(ids) > max_length:
            dropped["too_long"] += 1
            continue
        out.append(Demonstration(episode.task_id, ids, labels))
    return out


def fine_tune(profile: Profile, model_path: str, tokenizer: Any, examples: list[Demonstration], output_dir: str,
              callbacks: Sequence[Any] = (), progress: Callable[[str], None] | None = None,
              max_steps: int | None = None, learning_rate: float | None = None) -> StageResult:
    """SFTTrainer over ``examples`` from ``model_path`` into ``output_dir`` (at ``learning_rate``, default
    ``sft.learning_rate``); resumes from the newest complete checkpoint there (train/models/checkpoints.py), a finished
    one does no step."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if not examples:
        raise ValueError("no demonstration to fine-tune on (every episode was unsolved or too long)")
    s = profile.sft
    steps = max_steps or s.max_steps
    bf16 = profile.model.bf16
    args = SFTConfig(output_dir=output_dir, learning_rate=learning_rate or s.learning_rate, num_train_epochs=s.epochs,
                     max_steps=steps or -1, per_device_train_batch_size=s.batch_size,
                     gradient_accumulation_steps=s.gradient_accumulation_steps, max_length=s.max_length,
                     save_strategy="steps", save_steps=min(s.save_steps, steps) if steps else s.save_steps,
                     save_total_limit=s.save_total_limit,
                     logging_steps=1, use_cpu=profile.model.use_cpu, bf16=bf16, report_to="none",
                     seed=profile.data.seed, dataloader_num_workers=0, disable_tqdm=True,
                     model_init_kwargs={"dtype": profile.model.dtype}, remove_unused_columns=True)
    dataset = Dataset.from_list([{"input_ids": e.input_ids, "labels": e.labels} for e in examples])
    trainer = SFTTrainer(model=model_path, args=args, train_dataset=dataset, processing_class=tokenizer,
                         callbacks=list(callbacks))
    start = resume_point(output_dir, progress, move=int(os.environ.get("RANK", "0")) == 0)
    trainer.train(resume_from_checkpoint=start)
    final = os.path.join(output_dir, "final")
    trainer.save_model(final)
    tokenizer.save_pretrained(final)
    # save_model adds the Trainer's args, which would make ``final`` read as a half-written checkpoint
    # (train/models/checkpoints.py): it is a plain model folder, and each checkpoint keeps its own args
    Path(final, "training_args.bin").unlink(missing_ok=True)
    saved = complete_checkpoints(output_dir)
    return StageResult(output_dir, trainer.state.global_step, saved, final,
                       len(examples), {}, trainer.state.log_history)


def run_sft(profile: Profile, tasks: list[TrainingTask], env: Environment, user: Callable[[TrainingTask], Any],
            model_path: str, tokenizer: Any, output_dir: str, callbacks: Sequence[Any] = (),
            progress: Callable[[str], None] = print) -> StageResult:
    """Oracle demonstrations of ``tasks`` (already the training split), then SFT on them."""
    dropped: Counter[str] = Counter()
    episodes = [demonstrate(env, t, user(t)) for t in tasks]
    examples = demonstrations(episodes, tokenizer, profile.sft.max_length, dropped)
    progress(f"sft: {len(examples)} demonstrations of {len(tasks)} training tasks"
             + (f" (left out: {dict(dropped)})" if dropped else ""))
    result = fine_tune(profile, model_path, tokenizer, examples, output_dir, callbacks, progress)
    result.dropped = dict(dropped)
    return result
