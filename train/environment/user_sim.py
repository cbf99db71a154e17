"""The simulated user of an episode, in two modes: ``scripted`` (deterministic, from the task's known facts) and
``llm`` (any endpoint, prompted with the task's user scenario as tau2's user simulator is).

The user opens with the task's request, answers what the agent says, and ends the episode by writing ``STOP``. In a
dual-control domain (telecom) the user also acts on their own device when the agent asks: the scripted user runs
each of its own tools (side ``user``) that the agent's message names, with the JSON object written after the name
as arguments ("please run toggle_airplane_mode {} on your phone"), and tells the agent what it saw. The LLM user is
shown its own tools and acts by writing ``<tool_call>`` blocks, as the agent does: each runs on its device (a name
that is not one of its tools gets an error and runs nothing), it sees what the phone shows, and then writes its
message to the agent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from domains.arguments import MAX_ARGUMENT_BYTES, parse_arguments
from domains.engine import Database, ToolCall, ToolResult
from inference.client import LLMClient
from train.environment.tasks import TrainingTask
from train.environment.turns import MAX_CALLS_PER_TURN, OPEN, tool_call_blocks

STOP = "###STOP###"
MAX_DEVICE_ROUNDS = 4  # the LLM user's tool-call rounds on its phone before one message to the agent
MAX_DEVICE_CALLS = 4  # tool calls in one of them
_WORD = re.compile(r"[a-z0-9]+")
_IGNORED = frozenset({"the", "your", "you", "what", "which", "please", "can", "could", "and", "for", "that", "this",
                      "give", "tell", "need", "with", "have", "are", "is", "of", "me", "do", "to", "a", "an", "id",
                      "know", "also", "help", "everything", "else", "anything", "would", "like"})
# a stored fact is written to the person ("your e-mail address is ..."); the person says it of themselves
_SECOND_PERSON = re.compile(r"\b(you are|you were|you're|you've|you'd|you'll|yourself|yours|your|you)\b", re.IGNORECASE)
# a scenario written to the person playing the user opens with "You ..." (tau2's reason_for_call)
_NARRATED = re.compile(r"\s*(You|Your)\b")
_FIRST_PERSON = {"you are": "I am", "you were": "I was", "you're": "I'm", "you've": "I've", "you'd": "I'd",
                 "you'll": "I'll", "yourself": "myself", "yours": "mine", "your": "my", "you": "I"}


class UserSimulator(Protocol):
    def opening(self) -> str: ...
    def reply(self, agent_message: str) -> str: ...


def is_stop(text: str) -> bool:
    return STOP in text


def _words(text: str) -> set[str]:
    # "e-mail" and "email" are one word to the person answering; "born" answers "date of birth"
    text = text.lower().replace("e-mail", "email").replace("born", "birth")
    return {w for w in _WORD.findall(text) if w not in _IGNORED and len(w) > 1}


def first_person(fact: str) -> str:
    """A known fact as the user says it: "your full name is Uma Kim" -> "my full name is Uma Kim".

    >>> first_person("you were born on 1990-04-01; your e-mail address is uma@example.com")
    'I was born on 1990-04-01; my e-mail address is uma@example.com'
    """
    def swap(found: re.Match[str]) -> str:
        said = _FIRST_PERSON[found.group(1).lower()]
        return said[0].upper() + said[1:] if found.group(1)[0].isupper() else said

    return _SECOND_PERSON.sub(swap, fact)


def _sentence(parts: list[str]) -> str:
    return "; ".join(first_person(p) for p in parts).rstrip(".") + "."


@dataclass
class Device:
    """The user's own tools on the episode's database (the spec's side ``user`` tools, and no other): what a user
    simulator does when the agent asks it to act on the phone. Every call is handed to ``record`` (with side
    ``user``), so the verdict replays it where it happened among the agent's calls."""

    db: Database
    record: Callable[[ToolCall], None]

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.db.engine.spec.side_tools("user"))

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        call = ToolCall(name, arguments, "user")
        self.record(call)
        return self.db.call(name, arguments, "user")

    def requested(self, message: str) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """The user tools ``message`` names, in the order it names them, each with the JSON object written right
        after its name as arguments ({} when there is none), and the message's format error (None when it has
        none). The agent's caps and parser hold: more than ``MAX_CALLS_PER_TURN`` calls, or arguments that
        ``parse_arguments`` refuses (a duplicate key, too deep, too large), run none of them."""
        found = []
        for name in self.tools:
            for match in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", message):
                found.append((match.start(), match.end(), name))
                if len(found) > MAX_CALLS_PER_TURN:  # counted as found: a 2,000-name message stops here
                    return [], (f"more than {MAX_CALLS_PER_TURN} things to do on the phone in one message; none "
                                f"of them was done. Ask for at most {MAX_CALLS_PER_TURN} at a time")
        calls = []
        for _, end, name in sorted(found):
            try:
                calls.append((name, _arguments_after(message, end)))
            except ValueError as exc:
                return [], f"the arguments of {name} cannot be read ({str(exc)[:120]}); nothing was done"
        return calls, None


def _arguments_after(message: str, at: int) -> dict[str, Any]:
    """The JSON object written right after a tool's name, read as strictly as an agent's arguments ({} when no
    object follows). Its end is found by one scan that knows strings, so no parser recursion sees it unbounded."""
    rest = message[at:at + MAX_ARGUMENT_BYTES + 1].lstrip()
    if not rest.startswith("{"):
        return {}
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(rest):
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return parse_arguments(rest[:i + 1])
    raise ValueError(f"the object after the name is not closed within {MAX_ARGUMENT_BYTES:,} bytes")


def ask_to_act(call: ToolCall) -> str:
    """What an agent says to have the user make ``call`` on their own device (what the scripted user acts on)."""
    return (f"Please do this on your phone: {call.name} {json.dumps(call.arguments, ensure_ascii=False)}, "
            f"and tell me what you see.")


@dataclass
class ScriptedUser:
    """Deterministic user: opens with the request; a question is answered, in the first person, with the known facts
    whose words it mentions (all facts not yet given when it mentions none); anything else ends the conversation."""

    task: TrainingTask
    given: set[str] = field(default_factory=set)
    device: Device | None = None  # a dual-control domain's episode binds the user's own tools (bind_device)

    def bind_device(self, device: Device) -> None:
        self.device = device

    def opening(self) -> str:
        return opening_message(self.task)

    def reply(self, agent_message: str) -> str:
        requested, problem = self.device.requested(agent_message) if self.device is not None else ([], None)
        if problem is not None:  # the agent's format error, said back to it: nothing ran
            return f"I could not do that on my phone: {problem}."
        if requested:  # asked to act on the phone: do it, and say what the phone showed
            return " ".join(f"I did {name} on my phone; it shows: {self.device.call(name, args).to_json()}"
                            for name, args in requested)  # type: ignore[union-attr]
        if "?" not in agent_message:
            return f"Thank you, that is all. {STOP}"
        facts = self.task.known_facts
        asked = _words(agent_message)
        matching = [f for f in facts if _words(f.partition(":")[0] or f) & asked]
        answer = matching or [f for f in facts if f not in self.given]
        if not answer:  # nothing left to tell: the user has no more to offer and leaves
            return f"I have told you everything I know. {STOP}"
        self.given.update(answer)
        return _sentence(answer)


def opening_message(task: TrainingTask) -> str:
    """The user's first message: the request as the person words it (the scenario's reason for the call).

    tau2's own scenarios (imported tasks) narrate the call to the person playing the user ("You received your
    order #W2378156 and wish to exchange ..."); the person says it of themselves ("I received my order ...").
    A synthesised request is already the person's words, where "you" is the agent, and is left as it is.
    """
    ins = (task.user_scenario or {}).get("instructions") or {}
    text = str(ins.get("reason_for_call") or task.instruction)
    return first_person(text) if _NARRATED.match(text) else text


def scenario_prompt(task: TrainingTask) -> str:
    """The user simulator's system prompt: the tau2 user scenario as instructions to role-play."""
    scenario = task.user_scenario or {}
    ins = scenario.get("instructions") or {}
    persona = scenario.get("persona")
    lines = ["You are playing a user who contacts a customer-service agent. Stay in role: write only what this "
             "user would write, one short message at a time, and never act as the agent.",
             f"Persona: {persona}" if persona else "",
             f"Why you are writing: {ins.get('reason_for_call') or task.instruction}",
             f"What you know: {ins.get('known_info')}" if ins.get("known_info") else "",
             str(ins.get("unknown_info") or ""),
             f"How to behave: {ins.get('task_instructions')}" if ins.get("task_instructions") else "",
             f"When the agent has done everything you asked, or cannot help further, write {STOP} on its own line "
             "to end the conversation."]
    return "\n".join(line for line in lines if line)


def device_prompt(device: Device) -> str:
    """What the LLM user is told about its own phone: its tools (and no other) and how to use them."""
    spec = device.db.engine.spec
    lines = [f"- {t.name}: {t.description} Arguments: {json.dumps(t.parameters.get('properties') or {})}"
             for t in spec.side_tools("user")]
    return ("You have your own phone, and these tools act on it (only you can use them; the agent cannot see your "
            "phone):\n" + "\n".join(lines) + "\nWhen the agent asks you to check or change something on your phone, "
            f'use the tool by writing {OPEN}{{"name": "<tool>", "arguments": {{...}}}}</tool_call> and nothing else. '
            "You will see what the phone shows; then tell the agent in your own words. Do only what the agent asks.")


@dataclass
class LLMUser:
    """A user played by a model through the LLM client; a failed call ends the conversation (recorded in
    ``errors``) rather than the episode raising. In a dual-control domain it acts on its own device with
    ``<tool_call>`` blocks (``bind_device``)."""

    task: TrainingTask
    client: LLMClient
    params: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 200})
    history: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    device: Device | None = None

    def bind_device(self, device: Device) -> None:
        self.device = device

    def opening(self) -> str:
        text = opening_message(self.task)
        self.history.append({"role": "assistant", "content": text})
        return text

    def reply(self, agent_message: str) -> str:
        # roles are mirrored: the agent speaks as "user" to the model that plays the user
        self.history.append({"role": "user", "content": agent_message})
        system = scenario_prompt(self.task)
        if self.device is not None:
            system += "\n" + device_prompt(self.device)
        for rounds in range(MAX_DEVICE_ROUNDS + 1):
            messages = [{"role": "system", "content": system}, *self.history]
            reply = self.client.chat(messages, stage="user-simulator", task_id=self.task.task_id, **self.params)
            if not reply.ok:
                self.errors.append(f"{reply.error_kind}: {reply.error_detail}")
                return STOP
            text = (reply.text or "").strip() or STOP
            self.history.append({"role": "assistant", "content": text})
            if self.device is None or OPEN not in text:
                return text
            if rounds == MAX_DEVICE_ROUNDS:  # 4 x 4 calls: the agent's 16 a turn, and no more
                break
            # the model acted on its phone: run its calls and show it what the phone says, then ask again
            self.history.append({"role": "user", "content": self._act(text)})
        self.errors.append(f"device: more than {MAX_DEVICE_ROUNDS} rounds of tool calls without a message")
        return STOP

    def _act(self, text: str) -> str:
        """Run the user's ``<tool_call>`` blocks on its device; what each returned, as tool responses."""
        assert self.device is not None
        blocks, _, problem = tool_call_blocks(text[text.find(OPEN):], MAX_DEVICE_CALLS)
        if problem is not None:
            return f"<tool_response>Error: {problem}</tool_response>"
        out = []
        for block in blocks:
            try:  # the agent's parser: one object, no duplicate keys anywhere, bounded size and depth
                call = parse_arguments(block.strip())
            except ValueError as exc:
                out.append(f"Error: the tool call is not valid JSON ({str(exc)[:120]})")
                continue
            name = call.get("name")
            arguments = call.get("arguments", {})
            if set(call) - {"name", "arguments"} or not isinstance(name, str):
                out.append('Error: a tool call must be {"name": <string>, "arguments": <object>}')
            elif name not in self.device.tools:
                out.append(f"Error: {name!r} is not a tool on your phone; yours are {', '.join(self.device.tools)}")
            elif not isinstance(arguments, dict):
                out.append(f"Error: the arguments of {name} must be a JSON object")
            else:
                out.append(self.device.call(name, arguments).to_json())
        return "".join(f"<tool_response>{o}</tool_response>" for o in out)


def make_user(mode: str, task: TrainingTask, client: LLMClient | None = None) -> UserSimulator:
    """``scripted`` or ``llm`` (needs ``client``); an unknown mode is a ValueError naming the known ones."""
    if mode == "scripted":
        return ScriptedUser(task)
    if mode == "llm":
        if client is None:
            raise ValueError("user mode 'llm' needs an LLM client for the user's endpoint")
        return LLMUser(task, client)
    raise ValueError(f"unknown user mode {mode!r}; use 'scripted' or 'llm'")
