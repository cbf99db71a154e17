"""The one LLM client: OpenAI-protocol chat completions with a disk cache, retries, a concurrency bound, a budget
and one record per call.

Failures are data: a call that still fails after its retries returns a ``ChatReply`` with ``ok=False`` and an
``error_kind`` (see ``inference.records.ERROR_KINDS``); nothing a server sends can crash the caller. The one
exception raised on purpose is ``BudgetExceeded`` from ``chat`` (``chat_many`` turns it into refused replies).
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import openai

from inference.budget import Budget, BudgetExceeded
from inference.cache import DiskCache, request_key
from inference.endpoints import Endpoint, EndpointError
from inference.cost import PricingLookup, price_for
from inference.records import CallRecord, StageOutcome, write_llm_calls

__all__ = ["BudgetExceeded", "ChatReply", "ChatRequest", "LLMClient", "ToolCall", "force_tool"]

RETRYABLE = frozenset({"rate_limited", "server_error", "timeout", "connection", "malformed_json", "truncated"})


@dataclass
class ToolCall:
    id: str
    name: str
    arguments_json: str
    arguments: dict[str, Any] | None  # None when arguments_json is not a JSON object


@dataclass
class ChatReply:
    ok: bool
    text: str | None
    tool_calls: list[ToolCall]
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float
    cache_hit: bool
    attempts: int
    request_hash: str
    error_kind: str | None = None
    error_detail: str | None = None

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation. ``content`` is "" (not null) beside tool calls:
        llama.cpp answers a follow-up with HTTP 500 otherwise."""
        out: dict[str, Any] = {"role": "assistant", "content": self.text or ""}
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments_json}}
                                 for c in self.tool_calls]
        return out


@dataclass
class ChatRequest:
    """One request of a batch for ``chat_many``."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    stage: str | None = None
    task_id: str | None = None


def force_tool(name: str) -> dict[str, Any]:
    """A tool_choice that forces one function (SmolLM2 on llama.cpp never calls a tool with "auto")."""
    return {"type": "function", "function": {"name": name}}


class _CallFailed(Exception):
    def __init__(self, kind: str, detail: str, retry_after: float | None = None) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail, self.retry_after = kind, detail, retry_after


class LLMClient:
    """Chat completions against one endpoint. Thread-safe; use as a context manager or call ``close()``."""

    def __init__(self, endpoint: Endpoint, *, cache_dir: str | Path | None = None, stage: str = "default",
                 budget: Budget | float | None = None, pricing: PricingLookup | None = None,
                 max_concurrency: int = 4, max_retries: int = 4, backoff_s: float = 0.5, max_backoff_s: float = 20.0,
                 timeout_s: float = 60.0, run_id: str | None = None, snapshot_id: str | None = None,
                 seed: int | None = None) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.endpoint = endpoint
        self.stage = stage
        self.cache = DiskCache(cache_dir) if cache_dir is not None else None
        self.budget = budget if isinstance(budget, Budget) else Budget(budget)
        self.price = price_for(endpoint, pricing)
        if self.price is None and self.budget.limit_usd is not None:
            raise EndpointError(f"endpoint {endpoint.name!r}: no price for pricing key {endpoint.pricing_key!r}, "
                                f"so a budget cannot be enforced; give a pricing lookup that knows it")
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.run_id = run_id or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S-") + uuid.uuid4().hex[:8]
        self.snapshot_id = snapshot_id
        self.records: list[CallRecord] = []
        self.attempt_failures: Counter[str] = Counter()  # every failed HTTP attempt, retried or not
        self._rng = random.Random(seed)
        self._sequence = 0  # call ids stay unique across flushes
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._openai = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), max_retries=0,
                                     timeout=timeout_s)

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._openai.close()

    def chat(self, messages: Sequence[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             tool_choice: str | dict[str, Any] | None = None, stage: str | None = None, task_id: str | None = None,
             **params: Any) -> ChatReply:
        """One chat completion; ``params`` are OpenAI chat parameters (temperature, max_tokens, seed, ...).
        Raises BudgetExceeded (after recording the refusal) when the run's budget is spent."""
        if params.get("stream"):
            raise ValueError("LLMClient.chat does not stream: a cached, recorded call needs the whole answer")
        messages = [_sendable(m) for m in messages]
        key = request_key(self.endpoint.model, messages, {**params, "tools": tools, "tool_choice": tool_choice})
        start = time.perf_counter()
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            reply = _reply_from_body(cached["response"], key, cache_hit=True, attempts=0)
            reply.cost_usd = 0.0  # nothing was paid for this answer in this run
            reply.latency_s = time.perf_counter() - start
            self._record(reply, stage, task_id)
            return reply
        try:
            self.budget.check()
        except BudgetExceeded as exc:
            self._record(_failed(key, "budget_exceeded", str(exc), 0, time.perf_counter() - start), stage, task_id)
            raise
        reply = self._call_with_retries(messages, tools, tool_choice, params, key)
        if reply.ok:
            reply.cost_usd = self.price.cost(reply.prompt_tokens, reply.completion_tokens) if self.price else None
            self.budget.charge(reply.cost_usd)
        self._record(reply, stage, task_id)
        return reply

    def chat_many(self, requests: Sequence[ChatRequest]) -> list[ChatReply]:
        """Run a batch, at most ``max_concurrency`` at a time, in the order given. Once the budget is spent the
        remaining requests come back refused (error_kind "budget_exceeded") and ``self.budget.exhausted`` is set."""
        def one(request: ChatRequest) -> ChatReply:
            try:
                return self.chat(request.messages, tools=request.tools, tool_choice=request.tool_choice,
                                 stage=request.stage, task_id=request.task_id, **request.params)
            except BudgetExceeded as exc:
                return _failed("", "budget_exceeded", str(exc), 0, 0.0)

        with ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="llm") as pool:
            return list(pool.map(one, requests))

    def failures(self) -> Counter[str]:
        """Calls that finally failed, by error kind (attempts that a retry recovered are in attempt_failures)."""
        return Counter(r.error_kind for r in self.records if r.error_kind)

    def totals(self) -> dict[str, Any]:
        """The run's figures so far: calls, cache hits, tokens, cost, failures by kind."""
        with self._lock:
            records = list(self.records)
        return {"calls": len(records), "cache_hits": sum(r.cache_hit for r in records),
                "prompt_tokens": sum(r.prompt_tokens for r in records),
                "completion_tokens": sum(r.completion_tokens for r in records),
                "cost_usd": sum(r.cost_usd or 0.0 for r in records),
                "failures": dict(self.failures()), "attempt_failures": dict(self.attempt_failures)}

    def flush_records(self, warehouse: str | Path, outcomes: list[StageOutcome] | None = None) -> int:
        """Write the records collected so far to ``llm_calls`` (and any stage outcomes) in one transaction and
        forget them."""
        with self._lock:
            pending = list(self.records)
        written = write_llm_calls(warehouse, pending, outcomes)
        with self._lock:
            del self.records[:len(pending)]  # records appended meanwhile stay for the next flush
        return written

    def _call_with_retries(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                           tool_choice: str | dict[str, Any] | None, params: dict[str, Any], key: str) -> ChatReply:
        start = time.perf_counter()
        attempts = 0
        while True:
            attempts += 1
            try:
                with self._slots:
                    body = self._request(messages, tools, tool_choice, params)
                reply = _reply_from_body(body, key, cache_hit=False, attempts=attempts)
            except _CallFailed as failure:
                with self._lock:
                    self.attempt_failures[failure.kind] += 1
                if failure.kind not in RETRYABLE or attempts > self.max_retries:
                    return _failed(key, failure.kind, failure.detail, attempts, time.perf_counter() - start)
                time.sleep(self._delay(attempts, failure.retry_after))
                continue
            reply.latency_s = time.perf_counter() - start
            if self.cache is not None:
                self.cache.put(key, {"endpoint": self.endpoint.name, "model": self.endpoint.model, "response": body,
                                     "created_at": datetime.now(timezone.utc).isoformat()})
            return reply

    def _delay(self, attempts: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter (half fixed, half random), or the server's Retry-After, capped."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempts - 1))
        with self._lock:
            delay = ceiling / 2 + self._rng.uniform(0, ceiling / 2)
        return min(self.max_backoff_s, max(delay, retry_after or 0.0))

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 tool_choice: str | dict[str, Any] | None, params: dict[str, Any]) -> dict[str, Any]:
        """One HTTP request; returns the parsed JSON body or raises _CallFailed with its kind."""
        extra: dict[str, Any] = {}
        if tools is not None:
            extra["tools"] = tools
        if tool_choice is not None:
            extra["tool_choice"] = tool_choice
        try:
            raw = self._openai.chat.completions.with_raw_response.create(
                model=self.endpoint.model, messages=messages, **extra, **params)
            text = raw.http_response.text
        except openai.APIStatusError as exc:
            raise _status_failure(exc.status_code, exc.response) from None
        except openai.APITimeoutError:
            raise _CallFailed("timeout", "no complete answer within the timeout") from None
        except openai.APIConnectionError as exc:
            raise _connection_failure(exc.__cause__ or exc) from None
        except Exception as exc:  # a body read that fails after the status line arrived
            if not _is(exc, "HTTPError"):
                raise
            raise _connection_failure(exc) from None
        try:
            body = json.loads(text)
        except ValueError as exc:
            kind = "truncated" if _looks_truncated(text) else "malformed_json"
            raise _CallFailed(kind, f"the answer is not JSON ({exc}); first bytes: {text[:80]!r}") from None
        problem = _shape_problem(body)
        if problem:
            raise _CallFailed("malformed_json", problem)
        return body

    def _record(self, reply: ChatReply, stage: str | None, task_id: str | None) -> None:
        with self._lock:
            call_id = f"{self.run_id}-{self._sequence:06d}"
            self.records.append(CallRecord(
                call_id=call_id, run_id=self.run_id, created_at=datetime.now(timezone.utc).replace(tzinfo=None),
                endpoint=self.endpoint.name, model=self.endpoint.model, provider=self.endpoint.provider,
                stage=stage or self.stage, request_hash=reply.request_hash, prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens, cost_usd=reply.cost_usd, latency_s=reply.latency_s,
                cache_hit=reply.cache_hit, attempts=reply.attempts, error_kind=reply.error_kind,
                error_detail=reply.error_detail, finish_reason=reply.finish_reason, snapshot_id=self.snapshot_id,
                task_id=task_id))
            self._sequence += 1


def _sendable(message: dict[str, Any]) -> dict[str, Any]:
    """A copy safe to send: an assistant message with tool calls gets "" content (llama.cpp rejects null)."""
    out = dict(message)
    if out.get("role") == "assistant" and out.get("tool_calls") and out.get("content") is None:
        out["content"] = ""
    return out


def _failed(key: str, kind: str, detail: str, attempts: int, latency: float) -> ChatReply:
    return ChatReply(ok=False, text=None, tool_calls=[], finish_reason=None, prompt_tokens=0, completion_tokens=0,
                     cost_usd=0.0, latency_s=latency, cache_hit=False, attempts=attempts, request_hash=key,
                     error_kind=kind, error_detail=detail[:500])


def _status_failure(status: int, response: Any) -> _CallFailed:
    try:
        detail = response.text[:200]
    except Exception:  # the error body itself may be cut short; the status says enough
        detail = ""
    if status == 429:
        retry_after = response.headers.get("retry-after")
        seconds = float(retry_after) if retry_after and retry_after.replace(".", "", 1).isdigit() else None
        return _CallFailed("rate_limited", f"HTTP 429 {detail}", seconds)
    if status == 408:
        return _CallFailed("timeout", f"HTTP 408 {detail}")
    if status >= 500:
        return _CallFailed("server_error", f"HTTP {status} {detail}")
    return _CallFailed("client_error", f"HTTP {status} {detail}")


def _is(exc: BaseException, class_name: str) -> bool:
    """Match transport errors by class name: openai ships its own httpx fork (httpx2), whose classes are not
    httpx's, and which one a given openai release uses is not ours to pin."""
    return any(cls.__name__ == class_name for cls in type(exc).__mro__)


def _connection_failure(cause: BaseException) -> _CallFailed:
    if _is(cause, "TimeoutException"):
        return _CallFailed("timeout", "no complete answer within the timeout")
    if _is(cause, "RemoteProtocolError") or (_is(cause, "ReadError") and not _is(cause, "ConnectError")):
        # the server closed the connection before the announced body had arrived
        return _CallFailed("truncated", f"the answer stopped early: {cause}")
    return _CallFailed("connection", str(cause) or type(cause).__name__)


def _looks_truncated(text: str) -> bool:
    """A JSON document cut short (opened but never closed), as opposed to text that is not JSON at all."""
    stripped = text.strip()
    return stripped.startswith(("{", "[")) and not stripped.endswith(("}", "]"))


def _shape_problem(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "the answer is JSON but not an object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "the answer has no choices"
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return "the answer's first choice has no message"
    if message.get("content") is not None and not isinstance(message["content"], str):
        return "the answer's message content is not a string"
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("function"), dict)
                                              for c in calls):
        return "the answer's tool_calls are not a list of function calls"
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "the answer's usage is not an object"
    for name in ("prompt_tokens", "completion_tokens"):
        value = (usage or {}).get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            return f"the answer's usage.{name} is not a count"
    return None


def _reply_from_body(body: dict[str, Any], key: str, *, cache_hit: bool, attempts: int) -> ChatReply:
    choice = body["choices"][0]
    message = choice["message"]
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        raw_arguments = fn.get("arguments")
        arguments_json = raw_arguments if isinstance(raw_arguments, str) else json.dumps(raw_arguments)
        try:
            parsed = json.loads(arguments_json)
        except (TypeError, ValueError):
            parsed = None
        calls.append(ToolCall(id=str(call.get("id") or f"call_{i}"), name=str(fn.get("name", "")),
                              arguments_json=arguments_json, arguments=parsed if isinstance(parsed, dict) else None))
    usage = body.get("usage") or {}
    return ChatReply(ok=True, text=message.get("content"), tool_calls=calls, finish_reason=choice.get("finish_reason"),
                     prompt_tokens=int(usage.get("prompt_tokens") or 0),
                     completion_tokens=int(usage.get("completion_tokens") or 0), cost_usd=None, latency_s=0.0,
                     cache_hit=cache_hit, attempts=attempts, request_hash=key)
