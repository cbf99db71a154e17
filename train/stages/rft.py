"""Rejection-sampling fine-tuning: per round, k episodes per training task sampled from the current policy in the
GRPO environment (train/environment/episode.py, the rollouts' own token-level driver), the ones the verifier passes kept, and
SFT on them (train/stages/sft.py). Each round starts from the previous round's model and reports its acceptance; a
round's folder keeps its acceptance and model, so a rerun skips the rounds that finished."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from train.environment.env import Environment, EpisodeResult
from train.environment.episode import EpisodeLimits, Generator, run_episodes, start_episode
from train.stages.profiles import Profile
from train.stages.run_files import RunFileError, counts, read_json, record_of
from train.stages.sft import Demonstration, StageResult, demonstrations, fine_tune
from train.environment.tasks import TrainingTask

ACCEPTANCE_FILE = "acceptance.json"  # a round's sampling count, written (after its examples) before fine-tuning
EXAMPLES_FILE = "examples.jsonl"  # the kept episodes as tokenized demonstrations: a resumed round trains on these
SOLVED_FILE = "solved.json"  # per task id, how many of its sampled episodes the verifier passed (grpo.task_pool)


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
                    generator: Generator, tokenizer: Any, k: int, limits: EpisodeLimits,
                    progress: Callable[[str], None] | None = None) -> list[EpisodeResult]:
    """``k`` episodes of each task, played in lock step by ``generator``; each scored by the environment."""
    episodes = [start_episode(env, t, user(t), tokenizer, f"rft:{t.task_id}") for t in tasks for _ in range(k)]
    return [e.finish() for e in run_episodes(episodes, generator, tokenizer, limits, progress=progress)]


def accept(episodes: Sequence[EpisodeResult], round_no: int = 1) -> tuple[list[EpisodeResult], Acceptance]:
    """The episodes the verifier passed (``solved`` is ``verifiers.verify``'s verdict), and the round's count."""
    kept = [e for e in episodes if e.solved]
    return kept, Acceptance(round_no, len(episodes), len(kept))


def round_done(folder: Path) -> bool:
    """A round is done when its model is saved, or when it sampled and the verifier kept nothing (no model)."""
    if (folder / "final" / "config.json").exists():
        return True
    saved = read_acceptance(folder)
    examples = folder / EXAMPLES_FILE
    return saved is not None and examples.exists() and not examples.read_text().strip()


def read_acceptance(folder: Path) -> Acceptance | None:
    """The acceptance a round recorded in its folder when it sampled (None: it has not)."""
    path = folder / ACCEPTANCE_FILE
    if not path.exists():
        return None
    saved = record_of(path, Acceptance, read_json(path))
    if min(saved.round, saved.sampled, saved.accepted) < 0 or saved.accepted > saved.sampled:
        raise RunFileError(f"{path}: counts must be whole, non-negative, and accepted at most sampled")
    return saved


def run_round(profile: Profile, tasks: list[TrainingTask], env: Environment, user: Callable[[TrainingTask], Any],
              model_path: str, tokenizer: Any, folder: Path, round_no: int, callbacks: Sequence[Any] = (),
              progress: Callable[[str], None] = print) -> tuple[StageResult | None, Acceptance]:
    """One round from ``model_path`` into ``folder``: sample, keep the verified episodes, fine-tune on them (None
    when none was kept). The kept episodes and the acceptance are written to the folder before the fine-tuning, so a
    round killed during it resumes on the same examples; a kill during sampling samples again."""
    saved = read_acceptance(folder)
    if saved is not None and (folder / EXAMPLES_FILE).exists():
        examples = read_examples(folder / EXAMPLES_FILE)
        progress(f"rft round {round_no}: resuming the fine-tuning on the {len(examples)} episodes kept earlier")
        return _fine_tune_round(profile, model_path, tokenizer, examples, folder, callbacks, progress), saved
    kept, acceptance = _sample_round(profile, tasks[:profile.rft.max_tasks], env, user, model_path, tokenizer,
                                     round_no, lambda line: progress(f"rft round {round_no} sampling: {line}"))
    progress(f"rft round {round_no}: accepted {acceptance.accepted} of {acceptance.sampled} episodes "
             f"({acceptance.rate:.1%})")
    examples = demonstrations(kept, tokenizer, profile.sft.max_length)
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(folder / EXAMPLES_FILE, "".join(json.dumps(e.row()) + "\n" for e in examples))
    _write_atomic(folder / SOLVED_FILE, json.dumps(dict(sorted(Counter(e.task_id for e in kept).items()))))
    _write_atomic(folder / ACCEPTANCE_FILE, json.dumps(asdict(acceptance)))
    if not examples:
        return None, acceptance
    return _fine_tune_round(profile, model_path, tokenizer, examples, folder, callbacks, progress), acceptance


def _fine_tune_round(profile: Profile, model_path: str, tokenizer: Any, examples: list[Demonstration], folder: Path,
                     callbacks: Sequence[Any], progress: Callable[[str], None]) -> StageResult:
    """A round's fine-tuning on what it kept: ``round_steps`` steps at ``rft.learning_rate`` (default sft's)."""
    return fine_tune(profile, model_path, tokenizer, examples, str(folder), callbacks, progress,
                     round_steps(profile, len(examples)), profile.rft.learning_rate)


def round_steps(profile: Profile, kept: int) -> int:
    """A round's optimizer steps: ``sft.epochs`` over the episodes it kept, at most ``sft.max_steps``. A round that
    kept 1 of 40 episodes once took all of ``sft.max_steps`` (40) on that one episode, and the model wrote it for
    every task after (all GRPO rollouts then had format errors)."""
    per_step = profile.sft.batch_size * profile.sft.gradient_accumulation_steps
    steps = max(1, math.ceil(kept * profile.sft.epochs / per_step))
    return min(steps, profile.sft.max_steps) if profile.sft.max_steps else steps


def read_solved(folder: Path) -> dict[str, int] | None:
    """Per task id, the verified episodes a round kept (None: the round has not sampled, or predates the file)."""
    path = folder / SOLVED_FILE
    return counts(path, read_json(path)) if path.exists() else None


def read_examples(path: Path) -> list[Demonstration]:
    """The episodes a round kept, one JSON object a line, each checked (a line cut short names the file)."""
    found = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line:
            try:
                row = json.loads(line)
            except ValueError:
                raise RunFileError(f"{path}: line {n} is not valid JSON (cut short by a kill?); move the file aside "
                                   "and rerun to sample the round again") from None
            found.append(record_of(path, Demonstration, row))
    return found


def _sample_round(profile: Profile, tasks: list[TrainingTask], env: Environment, user: Callable[[TrainingTask], Any],
                  model_path: str, tokenizer: Any, round_no: int,
                  progress: Callable[[str], None] | None = None) -> tuple[list[EpisodeResult], Acceptance]:
    import torch
    from transformers import AutoModelForCausalLM

    from train.models.model import HFGenerator

    limits = EpisodeLimits(profile.episode.max_turns, profile.episode.max_completion_tokens,
                           profile.episode.max_turn_tokens)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    generator = HFGenerator(model, tokenizer, profile.rft.temperature, profile.rft.top_p,
                            bf16=profile.model.sample_bf16)
    return accept(sample_episodes(env, tasks, user, generator, tokenizer, profile.rft.samples_per_task, limits,
                                  progress), round_no)


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def run_rft(profile: Profile, tasks: list[TrainingTask], env: Environment, user: Callable[[TrainingTask], Any],
            model_path: str, tokenizer: Any, output_dir: str, callbacks: Sequence[Any] = (),
            progress: Callable[[str], None] = print) -> tuple[StageResult | None, list[Acceptance]]:
    """``rft.rounds`` rounds from ``model_path``; the last round's result (None when no round kept an episode:
    the model is left as it was) and every round's acceptance."""
    current, result, rounds = model_path, None, []
    for n in range(1, profile.rft.rounds + 1):
        folder = Path(output_dir) / f"round-{n}"
        if round_done(folder):  # a finished round: its model (if it kept any episode) is the next one's start
            progress(f"rft round {n}: finished earlier, kept")
            if (saved := read_acceptance(folder)) is not None:
                rounds.append(saved)
            if (folder / "final" / "config.json").exists():
                current = str(folder / "final")
            continue
        round_result, acceptance = run_round(profile, tasks, env, user, current, tokenizer, folder, n, callbacks,
                                             progress)
        rounds.append(acceptance)
        if round_result is not None:
            result, current = round_result, str(round_result.final_checkpoint)
    return result, rounds
