"""Agents an episode can run: a model behind any OpenAI-compatible endpoint, and scripted ones for tests and
benchmarks (the oracle that replays the gold, the oracle that first asks the user for what it needs, the empty
agent, a fixed list of turns)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from inference.client import LLMClient
from train.environment.tasks import TrainingTask
from train.environment.user_sim import ask_to_act


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
            return ask_to_act(call) if call.side == "user" else tool_call_text(call.name, call.arguments)
        return ("All done. " + " ".join(self.task.communicate_info)).strip()


def unsaid_values(arguments: dict[str, Any], facts: tuple[str, ...], messages: list[dict[str, str]]) -> list[str]:
    """The arguments whose values only the user knows (they appear in one of ``facts``) and nobody has said yet
    in ``messages`` (the system prompt aside), in argument order."""
    said = "\n".join(m["content"] for m in messages if m["role"] != "system").lower()
    known = "\n".join(facts).lower()
    missing = []
    for name, value in arguments.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or len(str(value)) < 2:
            continue
        word = re.compile(rf"(?<![\w@.]){re.escape(str(value).lower())}(?![\w@]|\.\w)")
        if word.search(known) and not word.search(said):
            missing.append(name)
    return missing


def ask_for(names: list[str]) -> str:
    """A question for the user naming what the agent needs: ``["full_name", "date_of_birth"]`` -> "Could you tell
    me your full name and date of birth?"."""
    words = [" ".join("number" if w == "no" else w for w in n.split("_")) for n in names]
    listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"Could you tell me your {listed}?"


@dataclass
class DialogueOracle:
    """The gold as a careful agent plays it: before a gold call that uses values only the user knows and has not
    said yet, it asks for them (once per call; the scripted user answers from its facts); then it makes the
    call, one per turn; at the end it tells the user everything they must hear. Its episodes are the ``messages``
    of the HF export (warehouse/hf_export.py): no value in them appears before someone said or returned it."""

    task: TrainingTask
    position: int = 0
    asked: set[int] = field(default_factory=set)

    def act(self, messages: list[dict[str, str]]) -> str:
        if self.position < len(self.task.gold_calls):
            call = self.task.gold_calls[self.position]
            if self.position not in self.asked:
                self.asked.add(self.position)
                missing = unsaid_values(call.arguments, self.task.known_facts, messages)
                if missing:
                    return ask_for(missing)
            self.position += 1
            return ask_to_act(call) if call.side == "user" else tool_call_text(call.name, call.arguments)
        said = "; ".join(self.task.communicate_info)
        return f"Everything you asked for is done. {said}." if said else "Everything you asked for is done."


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
