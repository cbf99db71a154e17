"""What an OpenAI-protocol answer must be before the client believes it: bounded, shallow, well typed.

A server is untrusted: its answer is read as bytes and checked here before anything else sees it. Each check that
fails names a fixed kind (``inference.records.ERROR_KINDS``); the client returns it as a failed call and never
caches it. The same check runs on an answer read back from the cache, so an entry edited by hand is a miss.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

MAX_REPLY_BYTES = 8 << 20  # the whole HTTP answer, headers included
MAX_DEPTH = 64  # brackets deep, anywhere in the body (an answer is ~5; tool arguments as objects add a few)
MAX_TOKEN_COUNT = 10_000_000  # a usage figure above this is no real count (2^63 broke the warehouse)
CHARS_PER_TOKEN = 32  # no tokenizer's token is longer; text beyond max_tokens x this was not max_tokens tokens
TOKEN_SLACK_CHARS = 256
FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})
_BRACKETS = str.maketrans({"[": "(", "{": "(", "]": ")", "}": ")"})


@dataclass(frozen=True)
class ReplyProblem(Exception):
    """Why an answer is refused: ``kind`` (one of ERROR_KINDS) and one line of ``detail``."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def json_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text outside strings, in linear time and without recursion."""
    depth = deepest = 0
    start = 0
    # strings hide brackets: walk from quote to closing quote with str.find (C speed), count brackets between
    while True:
        quote = text.find('"', start)
        segment = text[start:] if quote < 0 else text[start:quote]
        steps = [1 if c == "(" else -1 for c in segment.translate(_BRACKETS) if c in "()"] if "[" in segment \
            or "{" in segment or "]" in segment or "}" in segment else []
        if steps:
            running = list(accumulate(steps, initial=depth))
            deepest = max(deepest, max(running))
            depth = running[-1]
        if quote < 0:
            return deepest
        end = quote + 1
        while True:  # the closing quote: the next one not escaped by an odd run of backslashes
            end = text.find('"', end)
            if end < 0:
                return deepest
            backslashes = 0
            while text[end - 1 - backslashes] == "\\":
                backslashes += 1
            if backslashes % 2 == 0:
                break
            end += 1
        start = end + 1


def parse_body(raw: bytes) -> dict[str, Any]:
    """The answer's JSON object, or ReplyProblem. Shape and types are checked by ``check_body``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReplyProblem("bad_text", f"the answer is not UTF-8 (byte {exc.start})") from None
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise ReplyProblem("too_deep", f"the answer is nested {depth} levels deep (limit {MAX_DEPTH})")
    try:
        body = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        kind = "truncated" if _looks_truncated(text) else "malformed_json"
        raise ReplyProblem(kind, f"the answer is not JSON ({str(exc)[:80]}); first bytes: {text[:80]!r}") from None
    if not isinstance(body, dict):
        raise ReplyProblem("malformed_json", "the answer is JSON but not an object")
    return body


def check_body(body: dict[str, Any], params: dict[str, Any]) -> None:
    """Raise ReplyProblem when the answer breaks the protocol or the request's limits (``params``: max_tokens)."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ReplyProblem("malformed_json", "the answer has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ReplyProblem("malformed_json", "the answer's first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ReplyProblem("malformed_json", "the answer's message content is not a string")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("function"), dict)
                                              for c in calls):
        raise ReplyProblem("malformed_json", "the answer's tool_calls are not a list of function calls")
    for i, call in enumerate(calls):
        name, arguments = call["function"].get("name"), call["function"].get("arguments")
        if not isinstance(name, str) or not name:
            raise ReplyProblem("bad_tool_call", f"tool call {i} has no function name")
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise ReplyProblem("bad_tool_call", f"tool call {i} has an id that is not a string")
        if arguments is not None and not isinstance(arguments, (str, dict)):
            raise ReplyProblem("bad_tool_call", f"tool call {i} has arguments that are neither text nor an object")
    finish = choice.get("finish_reason")
    if finish is not None and (not isinstance(finish, str) or finish not in FINISH_REASONS):
        shown = repr(finish)[:40] if isinstance(finish, str) else f"a {type(finish).__name__}"
        raise ReplyProblem("bad_finish_reason", f"finish_reason is {shown}, not one of "
                                                f"{', '.join(sorted(FINISH_REASONS))}")
    _check_usage(body.get("usage"))
    _check_text(body)
    _check_length(message, body.get("usage") or {}, params)


def _check_usage(usage: Any) -> None:
    if usage is None:
        return
    if not isinstance(usage, dict):
        raise ReplyProblem("bad_usage", "the answer's usage is not an object")
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_TOKEN_COUNT:
            shown = str(value)[:30] if isinstance(value, (int, float)) else f"a {type(value).__name__}"
            raise ReplyProblem("bad_usage", f"usage.{name} is {shown}, not a count from 0 to {MAX_TOKEN_COUNT:,}")


def _check_text(body: dict[str, Any]) -> None:
    """Every string must be real Unicode: a lone surrogate cannot be stored, cached or sent on."""
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ReplyProblem("bad_text", f"the answer holds text that is not valid Unicode ({exc.reason} "
                                       f"{exc.object[exc.start:exc.end]!a})") from None


def _check_length(message: dict[str, Any], usage: dict[str, Any], params: dict[str, Any]) -> None:
    limit = params.get("max_completion_tokens") or params.get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        return
    completion = usage.get("completion_tokens")
    if isinstance(completion, int) and completion > limit:
        raise ReplyProblem("too_long", f"usage.completion_tokens is {completion} for max_tokens={limit}")
    written = len(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        arguments = call["function"].get("arguments")
        written += len(call["function"]["name"]) + (len(arguments) if isinstance(arguments, str)
                                                    else len(json.dumps(arguments)))
    ceiling = limit * CHARS_PER_TOKEN + TOKEN_SLACK_CHARS
    if written > ceiling:
        raise ReplyProblem("too_long", f"{written:,} characters of completion for max_tokens={limit} "
                                       f"(at most {ceiling:,} fit)")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _looks_truncated(text: str) -> bool:
    """A JSON document cut short (opened but never closed), as opposed to text that is not JSON at all."""
    stripped = text.strip()
    return stripped.startswith(("{", "[")) and not stripped.endswith(("}", "]"))


__all__ = ["FINISH_REASONS", "MAX_DEPTH", "MAX_REPLY_BYTES", "MAX_TOKEN_COUNT", "ReplyProblem", "check_body",
           "json_depth", "parse_body"]
