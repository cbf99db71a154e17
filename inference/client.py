"""The one LLM client: OpenAI-protocol chat completions with a disk cache, retries, a concurrency bound, a budget
and one record per call.

Failures are data: a call that still fails after its retries returns a ``ChatReply`` with ``ok=False`` and an
``error_kind`` (see ``inference.records.ERROR_KINDS``); nothing a server sends can crash or hang the caller. Each
HTTP request has a total deadline (``timeout_s``, not per read) and a byte cap (``max_reply_bytes``), and its answer
must pass ``inference.replies.check_body`` (depth, types, usage, finish_reason, Unicode, length for max_tokens)
before it is believed or cached. The one exception raised on purpose is ``BudgetExceeded`` from ``chat``
(``chat_many`` turns it into refused replies).
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

from domains.arguments import parse_arguments
from inference.budget import Budget, BudgetExceeded
from inference.cache import DiskCache, request_key
from inference.endpoints import Endpoint, EndpointError
from inference.cost import PricingLookup, price_for
from inference.records import CallRecord, StageOutcome, write_llm_calls
from inference.replies import MAX_REPLY_BYTES, ReplyProblem, check_body, parse_body
from inference.transport import Allowance, allowance, guarded_http_client

__all__ = ["BudgetExceeded", "ChatReply", "ChatRequest", "LLMClient", "ToolCall", "force_tool"]

RETRYABLE = frozenset({"rate_limited", "server_error", "timeout", "connection", "malformed_json", "truncated"})


@dataclass
class ToolCall:
    id: str
    name: str
    arguments_json: str
    arguments: dict[str, Any] | None  # None when arguments_json is not one strict JSON object
    arguments_problem: str | None = None  # why arguments is None (duplicate keys, too deep, not JSON, ...)


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
                 seed: int | None = None, max_reply_bytes: int = MAX_REPLY_BYTES) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= 3600):  # NaN fails every comparison
            raise ValueError(f"timeout_s must be a number of seconds from 0 to 3600, got {timeout_s}")
        if max_reply_bytes < 1:
            raise ValueError(f"max_reply_bytes must be >= 1, got {max_reply_bytes}")
        self.timeout_s = float(timeout_s)
        self.max_reply_bytes = max_reply_bytes
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
        # every socket operation of a request draws on one allowance: a total deadline and a byte cap
        self._http = guarded_http_client(timeout=timeout_s, follow_redirects=False,
                                         event_hooks={"response": [_refuse_compressed]})
        self._openai = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key(), max_retries=0,
                                     timeout=timeout_s, http_client=self._http)

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._openai.close()
        self._http.close()

    def chat(self, messages: Sequence[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
             tool_choice: str | dict[str, Any] | None = None, stage: str | None = None, task_id: str | None = None,
             **params: Any) -> ChatReply:
        """One chat completion; ``params`` are OpenAI chat parameters (temperature, max_tokens, seed, ...).
        Raises BudgetExceeded (after recording the refusal) when the run's budget is spent."""
        if params.get("stream"):
            raise ValueError("LLMClient.chat does not stream: a cached, recorded call needs the whole answer")
        start = time.perf_counter()
        messages = [_sendable(m) for m in messages]
        problem = _request_problem(messages, tools, tool_choice, params)
        if problem:  # nothing is sent and nothing is cached for a request that cannot be written as JSON
            reply = _failed("", "invalid_request", problem, 0, time.perf_counter() - start)
            self._record(reply, stage, task_id)
            return reply
        key = request_key(self.endpoint.model, messages, {**params, "tools": tools, "tool_choice": tool_choice})
        cached = self._cached_body(key, params)
        if cached is not None:
            reply = _reply_from_body(cached, key, cache_hit=True, attempts=0)
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

    def _cached_body(self, key: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The cached answer when there is one that passes the same checks as a fresh one; else None (a miss)."""
        entry = self.cache.get(key) if self.cache is not None else None
        body = entry.get("response") if entry is not None else None
        if not isinstance(body, dict):
            return None
        try:
            check_body(body, params)
        except ReplyProblem:
            return None
        return body

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
                # None ("unknown") as soon as one paid call had no price: a partial sum would read as the cost
                "cost_usd": None if any(r.cost_usd is None for r in records)
                else sum(r.cost_usd or 0.0 for r in records),
                "unpriced_calls": sum(r.cost_usd is None for r in records),
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
            failure: _CallFailed | None = None
            try:
                with self._slots:
                    body = self._request(messages, tools, tool_choice, params)
                reply = _reply_from_body(body, key, cache_hit=False, attempts=attempts)
            except _CallFailed as exc:
                failure = exc
            except Exception as exc:  # nothing a server sends may raise out of chat; a bug shows as its own kind
                failure = _CallFailed("unexpected", f"{type(exc).__name__}: {exc}"[:300])
            if failure is not None:
                with self._lock:
                    self.attempt_failures[failure.kind] += 1
                if failure.kind not in RETRYABLE or attempts > self.max_retries:
                    return _failed(key, failure.kind, failure.detail, attempts, time.perf_counter() - start)
                time.sleep(self._delay(attempts, failure.retry_after))
                continue
            reply.latency_s = time.perf_counter() - start
            if self.cache is not None:
                try:
                    self.cache.put(key, {"endpoint": self.endpoint.name, "model": self.endpoint.model,
                                         "response": body, "created_at": datetime.now(timezone.utc).isoformat()})
                except OSError:  # a full disk costs the cache entry, not the answer
                    with self._lock:
                        self.attempt_failures["cache_write"] += 1
            return reply

    def _delay(self, attempts: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter (half fixed, half random), or the server's Retry-After, capped."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (attempts - 1))
        with self._lock:
            delay = ceiling / 2 + self._rng.uniform(0, ceiling / 2)
        return min(self.max_backoff_s, max(delay, retry_after or 0.0))

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 tool_choice: str | dict[str, Any] | None, params: dict[str, Any]) -> dict[str, Any]:
        """One HTTP request within ``timeout_s`` and ``max_reply_bytes`` in all; returns the checked JSON body or
        raises _CallFailed with its kind."""
        extra: dict[str, Any] = {}
        if tools is not None:
            extra["tools"] = tools
        if tool_choice is not None:
            extra["tool_choice"] = tool_choice
        with allowance(self.timeout_s, self.max_reply_bytes) as limits:
            try:
                # identity: a compressed answer could inflate past any byte cap on the wire
                with self._openai.chat.completions.with_streaming_response.create(
                        model=self.endpoint.model, messages=messages, extra_headers={"Accept-Encoding": "identity"},
                        **extra, **params) as response:
                    raw = _read_capped(response.http_response, self.max_reply_bytes)
            except openai.APIStatusError as exc:
                raise _status_failure(exc.status_code, exc.response) from None
            except openai.APITimeoutError:
                raise _limit_failure(limits) or _CallFailed("timeout", "no complete answer within the timeout") \
                    from None
            except openai.APIConnectionError as exc:
                raise _limit_failure(limits) or _connection_failure(exc.__cause__ or exc) from None
            except _CallFailed:
                raise
            except Exception as exc:  # a body read that fails after the status line arrived
                if not _is(exc, "HTTPError"):
                    raise
                raise _limit_failure(limits) or _connection_failure(exc) from None
        try:
            body = parse_body(raw)
            check_body(body, params)
            return body
        except ReplyProblem as problem:
            raise _CallFailed(problem.kind, problem.detail) from None

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


def _request_problem(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                     tool_choice: str | dict[str, Any] | None, params: dict[str, Any]) -> str | None:
    """Why the request cannot be sent as JSON (a lone surrogate, NaN, an object JSON has no word for), or None."""
    try:
        json.dumps({"messages": messages, "tools": tools, "tool_choice": tool_choice, **params},
                   ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"the request holds text that is not valid Unicode ({exc.reason} {exc.object[exc.start:exc.end]!a})"
    except (TypeError, ValueError, RecursionError) as exc:
        return f"the request cannot be written as JSON ({str(exc)[:120]})"
    return None


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


def _read_capped(response: Any, max_bytes: int) -> bytes:
    """The body, read in chunks, refused once it passes ``max_bytes`` (the socket cap counts the wire; this one
    counts what httpx hands over)."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise _CallFailed("too_large", f"the answer is over {max_bytes:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _limit_failure(limits: Allowance) -> _CallFailed | None:
    """The failure when the request's own limits stopped it (not the server or the network)."""
    if limits.tripped == "too_large":
        return _CallFailed("too_large", f"the answer is over {limits.max_bytes:,} bytes")
    if limits.tripped == "deadline" or limits.remaining_s() <= 0:
        return _CallFailed("timeout", "no complete answer within the total deadline of the request")
    return None


def _refuse_compressed(response: Any) -> None:
    """httpx response hook: an encoded (compressed) body could inflate past every cap, and we asked for none."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        response.close()
        raise _CallFailed("bad_encoding", f"the answer is {encoding[:20]}-encoded; the client asked for identity")


def _reply_from_body(body: dict[str, Any], key: str, *, cache_hit: bool, attempts: int) -> ChatReply:
    """The reply of a body that ``check_body`` passed."""
    choice = body["choices"][0]
    message = choice["message"]
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        raw_arguments = fn.get("arguments")
        arguments_json = raw_arguments if isinstance(raw_arguments, str) else json.dumps(raw_arguments or {})
        try:  # strictly: one object, no duplicate keys, bounded depth and size (what the environment demands)
            parsed: dict[str, Any] | None = parse_arguments(arguments_json)
            problem = None
        except ValueError as exc:
            parsed, problem = None, str(exc)
        calls.append(ToolCall(id=call.get("id") or f"call_{i}", name=fn["name"], arguments_json=arguments_json,
                              arguments=parsed, arguments_problem=problem))
    usage = body.get("usage") or {}
    return ChatReply(ok=True, text=message.get("content"), tool_calls=calls, finish_reason=choice.get("finish_reason"),
                     prompt_tokens=usage.get("prompt_tokens") or 0, completion_tokens=usage.get("completion_tokens")
                     or 0, cost_usd=None, latency_s=0.0, cache_hit=cache_hit, attempts=attempts, request_hash=key)
