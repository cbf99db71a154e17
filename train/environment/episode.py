"""GRPO rollouts at the token level: many environment sessions (train/environment/env.py) played in lock step, one batched
generation per turn, with the token bookkeeping TRL needs.

Everything an episode means comes from the environment: the system prompt, the instance's catalog and prices, the
parsing of a turn, the tool calls, the user simulator, the limits, the endings and the verdict. This file only turns
model tokens into agent turns and the environment's answers (observations, user replies) into tokens: the model's
own tokens get ``env_mask`` 1 (trained on), everything the environment appends gets 0. A turn cut off by the token
budget is a format error that ends the episode (``token_limit``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from train.environment.env import Environment, EpisodeResult, Session
from train.environment.rewards import Preference, RolloutStats
from train.environment.tasks import TrainingTask
from train.environment.user_sim import UserSimulator

_MARK = "\x1fagent-turn\x1f"  # stands for an agent turn when the chat template renders what follows one


class Tokenizer(Protocol):
    eos_token_id: int | None
    eos_token: str | None

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...
    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...


class Generator(Protocol):
    """Continues each token context by at most ``max_new_tokens`` tokens (stopping at end of turn)."""

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]: ...


@dataclass(frozen=True)
class EpisodeLimits:
    max_turns: int = 50
    max_completion_tokens: int = 8_000  # model, observation and user tokens after the prompt, all turns together
    max_turn_tokens: int = 1_024


@dataclass
class Episode:
    """One rollout: an environment session and its token stream."""

    session: Session
    group_id: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: model token (trained on), 0: environment token
    result: EpisodeResult | None = None

    @property
    def task(self) -> TrainingTask:
        return self.session.task

    @property
    def done(self) -> bool:
        return self.session.done

    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def finish(self) -> EpisodeResult:
        """Score the episode with the environment's verdict and release its database."""
        if self.result is None:
            try:
                self.result = self.session.result()
            finally:
                self.session.close()
        return self.result

    def stats(self) -> RolloutStats:
        return self.finish().stats(self.group_id, Preference.from_dict(self.task.preference))


def chat_ids(tokenizer: Tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """The prompt's tokens in the model's chat template, ending with the opened assistant turn."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def appended_text(tokenizer: Tokenizer, messages: list[dict[str, str]]) -> str:
    """What follows a finished agent turn (ending with the end-of-turn token) in the chat template: ``messages``
    (user turns: observations, the user's replies) and the opening of the next assistant turn."""
    eos = tokenizer.eos_token
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": _MARK}]
    try:
        full = tokenizer.apply_chat_template(base + messages, tokenize=False, add_generation_prompt=True)
        cut = full.index(eos, full.index(_MARK)) + len(eos) if eos else -1
    except (ValueError, TypeError, AttributeError):
        cut = -1
    if cut < 0:  # no usable template: ChatML, which Qwen's and SmolLM2's templates both write
        body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return f"\n{body}<|im_start|>assistant\n"
    return str(full[cut:])


def start_episode(env: Environment, task: TrainingTask, user: UserSimulator, tokenizer: Tokenizer,
                  group_id: str) -> Episode:
    """A session of ``task`` opened by ``user``, its prompt (system prompt + opening) in tokens."""
    session = env.start(task, user)
    try:
        session.open()
        return Episode(session, group_id, chat_ids(tokenizer, session.messages))
    except BaseException:
        session.close()
        raise


def _answer_users(sessions: list[Session], workers: int) -> None:
    """Every held message gets its user's reply; an LLM user is a network call, so they run side by side."""
    if workers <= 1 or len(sessions) <= 1:
        for s in sessions:
            s.user_turn()
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(sessions))) as pool:
        list(pool.map(Session.user_turn, sessions))


def _over(episode: Episode, limits: EpisodeLimits) -> bool:
    """Whether the episode has ended, ending it at the turn limit or the environment's own limits."""
    if not episode.done and episode.session.turns >= limits.max_turns:
        episode.session.end("turn_limit")
    return episode.session.at_limit()


def run_episodes(episodes: list[Episode], generator: Generator, tokenizer: Tokenizer, limits: EpisodeLimits,
                 user_workers: int = 1, progress: Callable[[str], None] | None = None) -> list[Episode]:
    """Run every episode to its end in lock step (one batched generation per turn), then score each. ``progress``
    hears a line per turn (how many episodes played it, and the seconds so far)."""
    eos = tokenizer.eos_token_id
    started, turn = time.perf_counter(), 0
    try:
        while True:
            active = [e for e in episodes if not _over(e, limits)]
            if not active:
                break
            budget = min(limits.max_turn_tokens,
                         max(limits.max_completion_tokens - len(e.completion_ids) for e in active))
            generating = time.perf_counter()
            outputs = generator.generate([e.context() for e in active], budget)
            # one batched generation serves every active episode: each is charged its share of it against its
            # wall-clock budget, not the whole, so the batch size and the machine's speed do not end episodes
            waited = (time.perf_counter() - generating) * (1 - 1 / len(active))
            for episode in active:
                episode.session.credit(waited)
            turn += 1
            if progress is not None:
                progress(f"turn {turn}: {len(active)} of {len(episodes)} episodes played it "
                         f"({time.perf_counter() - started:.0f}s so far)")
            played: list[tuple[Episode, int]] = []
            for episode, ids in zip(active, outputs):
                room = limits.max_completion_tokens - len(episode.completion_ids)
                ids = list(ids[: min(room, limits.max_turn_tokens)])
                if eos in ids:
                    ids = ids[: ids.index(eos) + 1]
                episode.completion_ids += ids
                episode.env_mask += [1] * len(ids)
                text = tokenizer.decode(ids, skip_special_tokens=True)
                if eos is not None and (not ids or ids[-1] != eos):  # ran out of tokens: no usable answer
                    episode.session.cut_off(text, f"turn cut off after {len(ids)} tokens, before its end")
                    continue
                played.append((episode, len(episode.session.messages)))
                episode.session.agent_turn(text)
            _answer_users([e.session for e, _ in played if e.session.awaiting_user is not None], user_workers)
            for episode, before in played:
                session = episode.session
                if _over(episode, limits):
                    continue
                # what the environment appended after the agent's turn: an observation or the user's reply
                appended = session.messages[before + 1:]
                ids = tokenizer.encode(appended_text(tokenizer, appended), add_special_tokens=False)
                if len(episode.completion_ids) + len(ids) >= limits.max_completion_tokens:
                    session.end("token_limit")  # no room left for another agent turn
                    continue
                episode.completion_ids += ids
                episode.env_mask += [0] * len(ids)
    finally:
        for episode in episodes:
            episode.finish()
    return episodes
