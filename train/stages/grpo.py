"""GRPO training of an orchestrator on a published snapshot: TRL's GRPOTrainer with multi-turn domain episodes.

    python -m train.stages.grpo --profile cpu-smoke --warehouse warehouse/toolscale.duckdb --output-dir work/train/smoke
    python -m train.stages.grpo --profile h100 --dry-run          # parse, build the datasets, construct the trainer on CPU
    accelerate launch --config_file train/profiles/launch/accelerate-2x8.yaml ... -m train.stages.grpo --profile h100

Rollouts come in through TRL's ``rollout_func``: each prompt of the batch becomes one episode of the orchestration
environment (train/environment/env.py, the one evaluation uses: same prompt, catalog, prices, user simulator and verdict),
played at the token level (train/environment/episode.py); its model tokens are trained on and the environment's tokens
(observations, user replies) masked out (``env_mask``). The profile's ``environment`` section says which tools
and which user simulator the rollouts get. The reward is
``train.environment.rewards.toolscale_reward`` over each group. Checkpoints go to ``<output-dir>/checkpoint-N``; a rerun with the
same output dir resumes from the newest complete one (train/models/checkpoints.py: a folder a kill left half-written is
set aside under ``<output-dir>/incomplete/``, never resumed from or deleted).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from train.models.checkpoints import complete_checkpoints
from train.environment.env import Environment
from train.environment.episode import EpisodeLimits, run_episodes, start_episode
from train.models.model import HFGenerator, VLLMGenerator, load_tokenizer, resolve_model
from train.stages.profiles import Profile, load_profile
from train.stages.world import shared_resume_point
from train.environment.rewards import reward_with_min_std
from train.stages.rollout_env import RolloutWorld, build_world
from train.environment.tasks import TrainingSet, TrainingTask, load_training_set


@dataclass
class Instance:
    """One training prompt: a task and the messages every episode of it starts from (the environment's system
    prompt for the task's instance, then the user's opening)."""

    task: TrainingTask
    opening: list[dict[str, str]]

    def messages(self) -> list[dict[str, str]]:
        return [dict(m) for m in self.opening]


@dataclass
class RolloutTimer:
    """Where rollout time goes (for bench/grpo_smoke.py and the run summary)."""

    seconds: float = 0.0
    episodes: int = 0
    model_tokens: int = 0
    endings: Counter[str] = field(default_factory=Counter)  # how the episodes ended (train/environment/env.py ENDINGS)


@dataclass
class RunResult:
    output_dir: str
    global_step: int
    checkpoints: list[str]
    dropped: dict[str, int]
    log_history: list[dict[str, Any]] = field(default_factory=list)
    rollout: RolloutTimer = field(default_factory=RolloutTimer)
    step_seconds: list[float] = field(default_factory=list)


def prompt_key(messages: list[dict[str, Any]]) -> str:
    return "\x00".join(str(m.get("content", "")) for m in messages)


def build_instances(data: TrainingSet, profile: Profile, tokenizer: Any,
                    env: Environment) -> tuple[list[Instance], Counter[str]]:
    """One instance per task, drawn by the environment with the profile's seed; over-long and duplicate prompts
    are counted out."""
    instances, dropped, seen = [], Counter[str](), set()
    for task in data.tasks:
        inst = Instance(task, env.opening_messages(task))
        key = prompt_key(inst.messages())
        if key in seen:
            dropped["duplicate_prompt"] += 1
            continue
        n = len(tokenizer.apply_chat_template(inst.messages(), add_generation_prompt=True, tokenize=True,
                                              return_dict=True)["input_ids"])
        if n > profile.data.max_prompt_tokens:
            dropped["prompt_too_long"] += 1
            continue
        seen.add(key)
        instances.append(inst)
    return instances, dropped


def make_rollout_func(instances: list[Instance], profile: Profile, tokenizer: Any, timer: RolloutTimer,
                      world: RolloutWorld) -> Any:
    by_prompt = {prompt_key(i.messages()): i for i in instances}
    limits = EpisodeLimits(profile.episode.max_turns, profile.episode.max_completion_tokens,
                           profile.episode.max_turn_tokens)

    def rollout_func(prompts: list[list[dict[str, Any]]], trainer: Any) -> dict[str, Any]:
        started = time.perf_counter()
        if trainer.use_vllm:
            generator: Any = VLLMGenerator(trainer.vllm_generation)
        else:
            generator = HFGenerator(trainer.accelerator.unwrap_model(trainer.model), tokenizer,
                                    profile.grpo.temperature, profile.grpo.top_p, bf16=profile.model.sample_bf16)
        rank, step, size = trainer.accelerator.process_index, trainer.state.global_step, trainer.num_generations
        episodes = []
        for i, prompt in enumerate(prompts):
            inst = by_prompt[prompt_key(prompt)]
            # TRL groups completions by global position // num_generations; the reward groups the same way
            group = f"{step}:{(rank * len(prompts) + i) // size}"
            episodes.append(start_episode(world.env, inst.task, world.user(inst.task), tokenizer, group))
        run_episodes(episodes, generator, tokenizer, limits, world.user_workers)
        timer.seconds += time.perf_counter() - started
        timer.episodes += len(episodes)
        timer.model_tokens += generator.generated_tokens
        timer.endings.update(e.finish().ended_by for e in episodes)
        return {"prompt_ids": [e.prompt_ids for e in episodes],
                "completion_ids": [e.completion_ids for e in episodes],
                "logprobs": None,  # no sampling logprobs: TRL recomputes them (importance correction is off)
                "env_mask": [e.env_mask for e in episodes],
                "rollout": [e.stats().to_dict() for e in episodes]}

    return rollout_func


def grpo_config(profile: Profile, output_dir: str, processes: int | None = None) -> Any:
    from trl import GRPOConfig

    g, bf16 = profile.grpo, profile.model.bf16
    return GRPOConfig(
        output_dir=output_dir, learning_rate=g.learning_rate, num_generations=g.num_generations,
        per_device_train_batch_size=profile.per_device_batch(processes),
        gradient_accumulation_steps=g.gradient_accumulation_steps, max_steps=g.max_steps, beta=g.beta,
        temperature=g.temperature, top_p=g.top_p, max_completion_length=profile.episode.max_completion_tokens,
        save_strategy="steps", save_steps=g.save_steps, save_total_limit=g.save_total_limit,
        logging_steps=g.logging_steps, use_cpu=profile.model.use_cpu, bf16=bf16,
        model_init_kwargs={"dtype": profile.model.dtype}, use_vllm=g.use_vllm, vllm_mode=g.vllm_mode,
        vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization,
        vllm_max_model_length=profile.data.max_prompt_tokens + profile.episode.max_completion_tokens,
        vllm_importance_sampling_correction=False, gradient_checkpointing=g.gradient_checkpointing,
        report_to="none", seed=profile.data.seed, remove_unused_columns=False, dataloader_num_workers=0,
        disable_tqdm=True)


def dry_run_profile(profile: Profile) -> Profile:
    """The same data and episode settings, on SmolLM2 on CPU, one process: what a machine without GPUs can build."""
    return replace(profile, model=replace(profile.model, name="smollm2-gguf", dtype="float32", use_cpu=True),
                   grpo=replace(profile.grpo, use_vllm=False, gradient_checkpointing=False))


@dataclass
class BuiltTrainer:
    trainer: Any
    instances: list[Instance]
    dropped: Counter[str]
    timer: RolloutTimer
    world: RolloutWorld


def build_trainer(profile: Profile, warehouse: str, output_dir: str, work_dir: str,
                  snapshot: str | None = None, processes: int | None = None, data: TrainingSet | None = None,
                  pricing_seed: int = 0, progress: Callable[[str], None] | None = None) -> BuiltTrainer:
    """The trainer over ``data`` (default: the snapshot's train-split tasks as they are, accuracy-first, unscaled prices), its
    rollouts played in the environment the profile describes (``pricing_seed``: the synthetic schedules' seed)."""
    from datasets import Dataset
    from trl import GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model_path = resolve_model(profile.model.name, work_dir)
    tokenizer = load_tokenizer(model_path)
    if data is None:
        data = load_training_set(warehouse, snapshot or profile.data.snapshot, profile.data.domains,
                                 profile.data.max_tasks, split="train")
    world = build_world(profile, tokenizer, pricing_seed, progress)
    try:
        instances, dropped = build_instances(data, profile, tokenizer, world.env)
        if not instances:
            raise ValueError(f"no usable task in snapshot {data.snapshot_id} ({dict(dropped)})")
        dataset = Dataset.from_list([{"prompt": i.messages(), "task_id": i.task.task_id} for i in instances])
        timer = RolloutTimer()
        trainer = GRPOTrainer(model=model_path, reward_funcs=[reward_with_min_std(profile.grpo.min_group_std)],
                              args=grpo_config(profile, output_dir, processes), train_dataset=dataset,
                              processing_class=tokenizer,
                              rollout_func=make_rollout_func(instances, profile, tokenizer, timer, world))
    except BaseException:
        world.close()
        raise
    return BuiltTrainer(trainer, instances, dropped, timer, world)


def checkpoints(output_dir: str | Path) -> list[str]:
    """The run's complete checkpoint folders, oldest first: a half-written one is never listed."""
    return complete_checkpoints(output_dir)


def train(profile: Profile, warehouse: str, output_dir: str, work_dir: str = "work",
          snapshot: str | None = None, data: TrainingSet | None = None,
          callbacks: Sequence[Any] = (), progress: Callable[[str], None] | None = None,
          pricing_seed: int = 0) -> RunResult:
    """Train, checkpointing every ``save_steps``; resumes from the newest complete checkpoint in ``output_dir``
    if any, after setting aside the incomplete ones (``progress``, default stderr, gets one line for each)."""
    from transformers import TrainerCallback

    step_seconds: list[float] = []

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            step_seconds.append(time.perf_counter() - self.started)

    built = build_trainer(profile, warehouse, output_dir, work_dir, snapshot, data=data, pricing_seed=pricing_seed,
                          progress=progress)
    trainer = built.trainer
    trainer.add_callback(StepClock())
    for callback in callbacks:
        trainer.add_callback(callback)
    # under accelerate every process resumes from the same folder; only the main one renames the incomplete ones
    start = shared_resume_point(output_dir, progress, trainer.accelerator)
    try:
        trainer.train(resume_from_checkpoint=start)
    finally:
        built.world.close()
    return RunResult(output_dir, trainer.state.global_step, checkpoints(output_dir), dict(built.dropped),
                     trainer.state.log_history, built.timer, step_seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.stages.grpo", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-smoke", help="profile name (train/profiles/) or YAML path")
    parser.add_argument("--warehouse", default=os.environ.get("TOOLSCALE_WAREHOUSE", "warehouse/toolscale.duckdb"))
    parser.add_argument("--snapshot", default=None, help="snapshot id or 'latest' (default: the profile's)")
    parser.add_argument("--output-dir", default=None, help="checkpoints go here (default: work/train/<profile>)")
    parser.add_argument("--work-dir", default="work", help="cache for converted models")
    parser.add_argument("--dry-run", action="store_true",
                        help="build the datasets and construct the trainer on SmolLM2 on CPU; do not train")
    parser.add_argument("--max-steps", type=int, default=None, help="train this many steps instead of the profile's")
    args = parser.parse_args(argv)
    from train.stages.inputs import check_folder, check_text, check_whole, exit_status, published_snapshot
    from train.stages.profiles import MAX_STEPS
    from train.stages.run_lock import run_lock

    chosen: dict[str, Any] = {}

    def check() -> None:  # the profile, the options, the warehouse and snapshot, before a model loads: exit 2
        for option in ("profile", "warehouse", "snapshot", "output_dir", "work_dir"):
            check_text(f"--{option.replace('_', '-')}", getattr(args, option))
        profile = load_profile(args.profile)
        if args.max_steps is not None:
            check_whole("--max-steps", args.max_steps, 1, MAX_STEPS)
            profile = replace(profile, grpo=replace(profile.grpo, max_steps=args.max_steps))
        output_dir = args.output_dir or str(Path(args.work_dir) / "train" / profile.name)
        check_folder("--output-dir", output_dir)
        check_folder("--work-dir", args.work_dir)
        published_snapshot(args.warehouse, args.snapshot or profile.data.snapshot)
        chosen.update(profile=profile, output_dir=output_dir)

    def run() -> int:  # a failure from here on is a failed run: exit 3
        profile, output_dir = chosen["profile"], chosen["output_dir"]
        if args.dry_run:
            built = build_trainer(dry_run_profile(profile), args.warehouse, output_dir, args.work_dir, args.snapshot,
                                  processes=profile.processes)
            built.world.close()
            env = built.world.env
            print(json.dumps({"profile": profile.name, "instances": len(built.instances),
                              "dropped": dict(built.dropped),
                              "per_device_batch": built.trainer.args.per_device_train_batch_size,
                              "num_generations": built.trainer.num_generations, "processes": profile.processes,
                              "user": built.world.user_mode, "local_search": env.config.local_search,
                              "code_interpreter": env.config.code_interpreter,
                              "experts": env.experts.aliases if env.experts else [], "notes": built.world.notes}))
            return 0
        with run_lock(output_dir):  # one run trains into a folder at a time
            result = train(profile, args.warehouse, output_dir, args.work_dir, args.snapshot)
        print(json.dumps({"output_dir": result.output_dir, "global_step": result.global_step,
                          "checkpoints": result.checkpoints, "dropped": result.dropped}))
        return 0

    return exit_status(run, check)


if __name__ == "__main__":
    raise SystemExit(main())
