"""Rejection-sampling fine-tuning: per round, k episodes per training task sampled from the current policy in the
GRPO environment (train/episode.py, the rollouts' own token-level driver), the ones the verifier passes kept, and
SFT on them (train/sft.py). Each round starts from the previous round's model and reports its acceptance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from train.env import Environment, EpisodeResult
from train.episode import EpisodeLimits, Generator, run_episodes, start_episode
from train.profiles import Profile
from train.sft import StageResult, demonstrations, fine_tune
from train.tasks import TrainingTask


@dataclass(frozen=True)
class Acceptance:
    """One round's sampling: how many episodes were drawn and how many the verifier passed."""

    round: int
    sampled: int
    accepted: int

    @property
    def rate(self) -> float:
        return self.accepted / self.sampled if self.sampled else 0.0


def sample_episodes(env: Environment, tasks: Sequence[TrainingTask], user: Callable[[TrainingTask], Any],
                    generator: Generator, tokenizer: Any, k: int, limits: EpisodeLimits) -> list[EpisodeResult]:
    """``k`` episodes of each task, played in lock step by ``generator``; each scored by the environment."""
    episodes = [start_episode(env, t, user(t), tokenizer, f"rft:{t.task_id}") for t in tasks for _ in range(k)]
    return [e.finish() for e in run_episodes(episodes, generator, tokenizer, limits)]


def accept(episodes: Sequence[EpisodeResult], round_no: int = 1) -> tuple[list[EpisodeResult], Acceptance]:
    """The episodes the verifier passed (``solved`` is ``verifiers.verify``'s verdict), and the round's count."""
    kept = [e for e in episodes if e.solved]
    return kept, Acceptance(round_no, len(episodes), len(kept))


def run_rft(profile: Profile, tasks: list[TrainingTask], env: Environment, user: Callable[[TrainingTask], Any],
            model_path: str, tokenizer: Any, output_dir: str, callbacks: Sequence[Any] = (),
            progress: Callable[[str], None] = print) -> tuple[StageResult | None, list[Acceptance]]:
    """``rft.rounds`` rounds from ``model_path``; the last round's result (None when no round kept an episode:
    the model is left as it was) and every round's acceptance."""
    import torch
    from transformers import AutoModelForCausalLM

    from train.model import HFGenerator

    limits = EpisodeLimits(profile.episode.max_turns, profile.episode.max_completion_tokens,
                           profile.episode.max_turn_tokens)
    current, result, rounds = model_path, None, []
    for n in range(1, profile.rft.rounds + 1):
        folder = Path(output_dir) / f"round-{n}"
        if (folder / "final" / "config.json").exists():  # a finished round: its model is the next one's start
            progress(f"rft round {n}: finished earlier, kept")
            current = str(folder / "final")
            continue
        model = AutoModelForCausalLM.from_pretrained(current, dtype=torch.float32)
        generator = HFGenerator(model, tokenizer, profile.rft.temperature, profile.rft.top_p)
        kept, acceptance = accept(sample_episodes(env, tasks, user, generator, tokenizer,
                                                  profile.rft.samples_per_task, limits), n)
        del model
        rounds.append(acceptance)
        progress(f"rft round {n}: accepted {acceptance.accepted} of {acceptance.sampled} episodes "
                 f"({acceptance.rate:.1%})")
        examples = demonstrations(kept, tokenizer, profile.sft.max_length)
        if not examples:
            continue
        result = fine_tune(profile, current, tokenizer, examples, str(folder), callbacks, progress)
        current = str(result.final_checkpoint)
    return result, rounds
