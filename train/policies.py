"""Agents an episode can run: a model behind any OpenAI-compatible endpoint, and scripted ones for tests and
benchmarks (the oracle that replays the gold, the empty agent, a fixed list of turns)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from inference.client import LLMClient
from train.tasks import TrainingTask


class Policy(Protocol):
    """Given the conversation so far (system, user, assistant, ... messages), write the next assistant turn."""

    def act(self, messages: list[dict[str, str]]) -> str: ...


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


@dataclass
class OraclePolicy:
    """Replays the task's gold calls, one per turn, then tells the user everything they must hear."""

    task: TrainingTask
    position: int = 0

    def act(self, messages: list[dict[str, str]]) -> str:
        if self.position < len(self.task.gold_calls):
            call = self.task.gold_calls[self.position]
            self.position += 1
            return tool_call_text(call.name, call.arguments)
        return ("All done. " + " ".join(self.task.communicate_info)).strip()


@dataclass
class EmptyPolicy:
    """Does nothing and says so: the no-action baseline every published task must fail."""

    def act(self, messages: list[dict[str, str]]) -> str:
        return "I'm sorry, I cannot help with that."


@dataclass
class ScriptedPolicy:
    """Writes the given turns in order, repeating the last one."""

    turns: list[Any]
    position: int = 0

    def act(self, messages: list[dict[str, str]]) -> Any:
        turn = self.turns[min(self.position, len(self.turns) - 1)]
        self.position += 1
        return turn


@dataclass
class LLMPolicy:
    """A model as the agent through the LLM client (a checkpoint served by vLLM, llama.cpp or any provider).
    A failed call raises ``RuntimeError``; the episode records it as a policy error and ends."""

    client: LLMClient
    task_id: str | None = None
    params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 512})
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def act(self, messages: list[dict[str, str]]) -> str:
        reply = self.client.chat(messages, stage="orchestrator", task_id=self.task_id, **self.params)
        if not reply.ok:
            raise RuntimeError(f"agent endpoint failed ({reply.error_kind}): {reply.error_detail}")
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        return reply.text or ""
