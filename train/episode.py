"""A minimal multi-turn episode over one task: the model calls domain tools until it answers, then the verifier scores it.

The system prompt holds the domain policy and the instance's tools as JSON. Each model turn is either tool calls,
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (prose may precede them), or a final message to
the user. Anything else (bad JSON, unknown tool, bad arguments, text after a call, an empty or cut-off turn) is a
counted format error answered with an error observation; nothing the model writes can raise. Many episodes run in
lock step so that each turn is one batched generation. Issue 10's environment grows from this file.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from domains.engine import Database, ToolCall
from domains.registry import get_engine
from train.rewards import Preference, RolloutStats
from train.tasks import CatalogTool, TrainingTask
from verifiers.types import Trajectory
from verifiers.verify import verify

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
MAX_OBSERVATION_CHARS = 4_000


class Tokenizer(Protocol):
    eos_token_id: int | None

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...
    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...


class Generator(Protocol):
    """Continues each token context by at most ``max_new_tokens`` tokens (stopping at end of turn)."""

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[list[int]]: ...


@dataclass(frozen=True)
class EpisodeLimits:
    max_turns: int = 50
    max_completion_tokens: int = 8_000  # model and observation tokens after the prompt, all turns together
    max_turn_tokens: int = 1_024


@dataclass(frozen=True)
class ParsedTurn:
    calls: tuple[ToolCall, ...] = ()
    message: str = ""  # what the model said to the user this turn
    error: str | None = None

    @property
    def final(self) -> bool:
        return self.error is None and not self.calls


def system_prompt(policy: str, tools: Sequence[CatalogTool]) -> str:
    schemas = json.dumps([t.schema() for t in tools], ensure_ascii=False)
    return (f"You are a customer-service agent. Follow this policy.\n\n# Policy\n{policy}\n\n# Tools\n{schemas}\n\n"
            "To call tools, write one or more <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call> blocks "
            "and nothing after them. When you are done, answer the user in plain text without any tool call.")


def instance_tools(catalog: Sequence[CatalogTool], task: TrainingTask, max_tools: int | None,
                   rng: random.Random) -> list[CatalogTool]:
    """The tools this instance offers: every tool the gold needs, plus others drawn at random up to ``max_tools``."""
    needed = {c.name for c in task.gold_calls}
    keep = [t for t in catalog if t.name in needed]
    others = [t for t in catalog if t.name not in needed]
    room = len(others) if max_tools is None else max(0, max_tools - len(keep))
    keep += rng.sample(others, min(room, len(others)))
    return sorted(keep, key=lambda t: t.name)


def parse_turn(text: str, tools: Collection[str], check_arguments: Any = None) -> ParsedTurn:
    """Read one model turn strictly. ``tools``: the names on offer (a dict by name will do);
    ``check_arguments(name, args)`` returns a schema problem or None."""
    text = THINK.sub("", text).strip()
    if not text:
        return ParsedTurn(error="empty turn: call a tool or answer the user")
    if "<tool_call>" not in text and "</tool_call>" not in text:
        return ParsedTurn(message=text)
    blocks = list(TOOL_CALL.finditer(text))
    if not blocks or text.count("<tool_call>") != len(blocks) or text.count("</tool_call>") != len(blocks):
        return ParsedTurn(error="unbalanced <tool_call> tags")
    between = [text[a.end():b.start()] for a, b in zip(blocks, blocks[1:])] + [text[blocks[-1].end():]]
    if any(s.strip() for s in between):
        return ParsedTurn(error="text after or between tool calls; put tool calls last")
    calls = []
    for block in blocks:
        try:
            data = json.loads(block.group(1))
        except (ValueError, RecursionError) as exc:
            return ParsedTurn(error=f"tool call is not valid JSON ({str(exc)[:80]})")
        if not isinstance(data, dict) or set(data) - {"name", "arguments"} or not isinstance(data.get("name"), str):
            return ParsedTurn(error='a tool call must be {"name": <string>, "arguments": <object>}')
        name, args = data["name"], data.get("arguments", {})
        if name not in tools:
            return ParsedTurn(error=f"unknown tool {name[:60]!r}; available: {', '.join(sorted(tools))}")
        if not isinstance(args, dict):
            return ParsedTurn(error=f"arguments of {name} must be a JSON object")
        problem = check_arguments(name, args) if check_arguments else None
        if problem:
            return ParsedTurn(error=f"bad arguments for {name}: {problem}")
        calls.append(ToolCall(name, args))
    return ParsedTurn(calls=tuple(calls), message=text[:blocks[0].start()].strip())


@dataclass
class Episode:
    """One rollout's state: the live database, what the model did, and its token stream."""

    task: TrainingTask
    tools: list[CatalogTool]
    group_id: str
    prompt_ids: list[int]
    db: Database
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: model token (trained on), 0: observation token
    calls: list[ToolCall] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    tool_counts: Counter[str] = field(default_factory=Counter)
    cost: float = 0.0
    latency: float = 0.0
    format_errors: int = 0
    turns: int = 0
    has_final: bool = False
    done: bool = False
    solved: bool = False

    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def step(self, text: str) -> str | None:
        """Apply one model turn; the observation to show next, or None when the episode is over."""
        self.turns += 1
        by_name = {t.name: t for t in self.tools}
        turn = parse_turn(text, by_name, self.db.engine.argument_problem)
        if turn.message:
            self.said.append(turn.message)
        if turn.error is not None:
            self.format_errors += 1
            return json.dumps({"format_error": turn.error})
        if turn.final:
            self.has_final = True
            self.done = True
            return None
        results = []
        for call in turn.calls:
            result = self.db.call(call.name, call.arguments)
            self.calls.append(call)
            self.tool_counts[call.name] += 1
            self.cost += by_name[call.name].cost
            self.latency += by_name[call.name].latency
            results.append({"name": call.name, "result": json.loads(result.to_json())})
        return json.dumps(results, ensure_ascii=False, default=str)[:MAX_OBSERVATION_CHARS]

    def finish(self) -> None:
        """Score the episode with the project's verifier and release the database."""
        if self.db is not None:
            self.db.close()
        self.done = True
        if self.has_final:
            self.solved = verify(self.task.verifiable(), Trajectory(tuple(self.calls), "\n".join(self.said))).solved

    def stats(self) -> RolloutStats:
        return RolloutStats(self.group_id, tuple(t.name for t in self.tools), dict(self.tool_counts), self.solved,
                            self.cost, self.latency, self.format_errors, self.has_final,
                            Preference.from_dict(self.task.preference))


def observation_ids(tokenizer: Tokenizer, observation: str) -> list[int]:
    """Close the model's turn and hand back a tool response in ChatML, as Qwen's and SmolLM2's templates do."""
    text = (f"\n<|im_start|>user\n<tool_response>\n{observation}\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n")
    return tokenizer.encode(text, add_special_tokens=False)


def start_episode(task: TrainingTask, tools: list[CatalogTool], policy: str, tokenizer: Tokenizer,
                  group_id: str) -> Episode:
    messages = [{"role": "system", "content": system_prompt(policy, tools)},
                {"role": "user", "content": task.instruction}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
        ids = ids["input_ids"]
    return Episode(task, tools, group_id, list(ids), get_engine(task.domain, task.seed).fresh())


def run_episodes(episodes: list[Episode], generator: Generator, tokenizer: Tokenizer,
                 limits: EpisodeLimits) -> list[Episode]:
    """Run every episode to its end in lock step (one batched generation per turn), then score each."""
    eos = tokenizer.eos_token_id
    try:
        while True:
            active = [e for e in episodes if not e.done]
            if not active:
                break
            budget = min(limits.max_turn_tokens,
                         max(limits.max_completion_tokens - len(e.completion_ids) for e in active))
            outputs = generator.generate([e.context() for e in active], budget)
            for episode, ids in zip(active, outputs):
                room = limits.max_completion_tokens - len(episode.completion_ids)
                ids = list(ids[: min(room, limits.max_turn_tokens)])
                if eos in ids:
                    ids = ids[: ids.index(eos) + 1]
                episode.completion_ids += ids
                episode.env_mask += [1] * len(ids)
                cut_off = eos is not None and (not ids or ids[-1] != eos)
                text = tokenizer.decode(ids, skip_special_tokens=True)
                if cut_off:  # a turn that ran out of tokens is not a usable answer
                    episode.turns += 1
                    episode.format_errors += 1
                    episode.done = True
                    continue
                observation = episode.step(text)
                if observation is None:
                    continue
                if episode.turns >= limits.max_turns:
                    episode.done = True
                    continue
                obs = observation_ids(tokenizer, observation)
                if len(episode.completion_ids) + len(obs) >= limits.max_completion_tokens:
                    episode.done = True  # no room left for another model turn
                    continue
                episode.completion_ids += obs
                episode.env_mask += [0] * len(obs)
    finally:
        for episode in episodes:
            episode.finish()
    return episodes
