"""Reading one agent turn: ``<tool_call>`` blocks or a plain message to the user, strictly, never raising.

Both episode drivers use it (train/env.py, message level; train/episode.py, token level), so a turn means the same
thing in training and in evaluation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from domains.engine import ToolCall

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass(frozen=True)
class ParsedTurn:
    calls: tuple[ToolCall, ...] = ()
    message: str = ""  # what the agent said to the user this turn
    error: str | None = None

    @property
    def final(self) -> bool:
        """A plain message to the user: no tool call and nothing wrong."""
        return self.error is None and not self.calls


def parse_turn(text: str, tools: Collection[str],
               check_arguments: Callable[[str, dict[str, Any]], str | None] | None = None) -> ParsedTurn:
    """Read one agent turn strictly. ``tools``: the names on offer (a dict by name will do);
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
