"""Reading one agent turn: ``<tool_call>`` blocks or a plain message to the user, strictly, never raising.

Both episode drivers use it (train/environment/env.py, message level; train/environment/episode.py, token level), so a turn means the same
thing in training and in evaluation. The reader is one left-to-right scan with ``str.find`` (linear in the turn's
length, whatever tags it holds), and it stops at the first call past ``max_calls``: a turn of 40,000 calls is one
error, read in milliseconds, and none of its calls runs. Each call is parsed strictly (``parse_arguments``): one
object, no duplicate keys anywhere, bounded size and depth, no NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from domains.arguments import parse_arguments
from domains.engine import ToolCall

OPEN, CLOSE = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
MAX_CALLS_PER_TURN = 16


@dataclass(frozen=True)
class ParsedTurn:
    calls: tuple[ToolCall, ...] = ()
    message: str = ""  # what the agent said to the user this turn
    error: str | None = None

    @property
    def final(self) -> bool:
        """A plain message to the user: no tool call and nothing wrong."""
        return self.error is None and not self.calls


def without_thinking(text: str) -> str:
    """``text`` without its closed ``<think>...</think>`` spans (an unclosed one stays), in one pass."""
    if THINK_OPEN not in text:
        return text
    kept: list[str] = []
    pos = 0
    while True:
        start = text.find(THINK_OPEN, pos)
        end = text.find(THINK_CLOSE, start + len(THINK_OPEN)) if start >= 0 else -1
        if end < 0:
            kept.append(text[pos:])
            return "".join(kept)
        kept.append(text[pos:start])
        pos = end + len(THINK_CLOSE)


def tool_call_blocks(text: str, max_calls: int) -> tuple[list[str], int, str | None]:
    """The inner text of each ``<tool_call>`` block, where the first block starts, and the turn's format error
    (None when it has none). Everything between and after blocks must be blank."""
    blocks: list[str] = []
    first = text.find(OPEN)
    if first < 0 or CLOSE in text[:first]:
        return [], max(first, 0), "unbalanced <tool_call> tags"
    pos = first
    while True:
        start = text.find(OPEN, pos)
        if start < 0:
            break
        if blocks and text[pos:start].strip():
            return [], first, "text after or between tool calls; put tool calls last"
        inner_start = start + len(OPEN)
        end = text.find(CLOSE, inner_start)
        if end < 0 or OPEN in text[inner_start:end]:
            return [], first, "unbalanced <tool_call> tags"
        blocks.append(text[inner_start:end])
        if len(blocks) > max_calls:
            return [], first, (f"more than {max_calls} tool calls in one turn; none of them ran. Make at most "
                               f"{max_calls} calls per turn")
        pos = end + len(CLOSE)
    rest = text[pos:]
    if CLOSE in rest:
        return [], first, "unbalanced <tool_call> tags"
    if rest.strip():
        return [], first, "text after or between tool calls; put tool calls last"
    return blocks, first, None


def parse_turn(text: str, tools: Collection[str],
               check_arguments: Callable[[str, dict[str, Any]], str | None] | None = None,
               max_calls: int = MAX_CALLS_PER_TURN) -> ParsedTurn:
    """Read one agent turn strictly. ``tools``: the names on offer (a dict by name will do);
    ``check_arguments(name, args)`` returns a schema problem or None; more than ``max_calls`` calls is an error."""
    text = without_thinking(text).strip()
    if not text:
        return ParsedTurn(error="empty turn: call a tool or answer the user")
    if OPEN not in text and CLOSE not in text:
        return ParsedTurn(message=text)
    blocks, first, error = tool_call_blocks(text, max_calls)
    if error is not None:
        return ParsedTurn(error=error)
    calls = []
    for block in blocks:
        try:
            data = parse_arguments(block.strip())
        except ValueError as exc:
            return ParsedTurn(error=f"tool call is not valid JSON ({str(exc)[:80]})")
        if set(data) - {"name", "arguments"} or not isinstance(data.get("name"), str):
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
    return ParsedTurn(calls=tuple(calls), message=text[:first].strip())
