"""LLM experts as tools: models from the endpoint registry behind the aliases expert-1..n, priced per token from the
instance's pricing schedule, called through the project's one LLM client.

The agent sees only the alias and a description (never the model's name), as in the paper's ``call_expert``. A
call that the endpoint does not answer (refused connection, timeout, missing key, HTTP error) is an error
observation, never an exception.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.client import LLMClient
from inference.cost import LOCAL_PRICE
from inference.endpoints import Endpoint
from inference.records import CallRecord
from inference.pricing import ModelPrice, PricingError, PricingSchedule
from train.environment.tools.base import Tool, ToolResult, error_result

DEFAULT_DESCRIPTION = "A general-purpose language model: answers questions, reasons step by step and drafts text."
MAX_QUESTION_CHARS = 8_000


@dataclass(frozen=True)
class ExpertSpec:
    """One expert: which registry endpoint answers, which schedule entry prices it, and what the agent is told.

    ``priced_as`` names a model of the pricing schedules (e.g. "Qwen/Qwen3-32B"); None prices it by the endpoint's
    own ``pricing_key``, and a local endpoint the schedule does not list costs 0."""

    endpoint: Endpoint
    priced_as: str | None = None
    description: str = DEFAULT_DESCRIPTION
    max_tokens: int = 256


class ExpertPool:
    """The experts of a run, one client each, shared by every episode (the client is thread-safe)."""

    def __init__(self, specs: list[ExpertSpec], cache_dir: str | Path | None = None, timeout_s: float = 60.0,
                 max_retries: int = 1) -> None:
        self.specs = list(specs)
        self.cache_dir = cache_dir
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._clients: dict[int, LLMClient] = {}
        self._lock = threading.Lock()

    @property
    def aliases(self) -> list[str]:
        return [f"expert-{i}" for i in range(1, len(self.specs) + 1)]

    def client(self, index: int) -> LLMClient:
        with self._lock:
            if index not in self._clients:
                self._clients[index] = LLMClient(self.specs[index].endpoint, cache_dir=self.cache_dir,
                                                 stage="expert", timeout_s=self.timeout_s,
                                                 max_retries=self.max_retries)
            return self._clients[index]

    def tools(self, schedule: PricingSchedule | None) -> list[ExpertTool]:
        return [ExpertTool(self, i, schedule) for i in range(len(self.specs))]

    def records(self) -> list[CallRecord]:
        """Every call the experts made so far (tokens, cost, latency, errors), for the warehouse's llm_calls."""
        with self._lock:
            return [r for client in self._clients.values() for r in client.records]

    def flush_records(self, warehouse: str | Path) -> int:
        """Write the experts' call records to the warehouse and forget them."""
        with self._lock:
            clients = list(self._clients.values())
        return sum(client.flush_records(warehouse) for client in clients)

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

    def __enter__(self) -> ExpertPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ExpertTool(Tool):
    """``expert-N(question)``: the expert's answer; cost from the schedule's price for its model, latency measured."""

    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS,
                                    "description": "The question or task for the expert, self-contained."}},
        "required": ["question"],
        "additionalProperties": False,
    }

    def __init__(self, pool: ExpertPool, index: int, schedule: PricingSchedule | None):
        self.pool, self.index = pool, index
        self.spec = pool.specs[index]
        self.name = f"expert-{index + 1}"
        self.price = expert_price(self.spec, schedule)
        self.description = self.spec.description

    def listed_price(self) -> dict[str, Any]:
        """What the system prompt shows: USD per 1M input and output tokens, and the schedule's latency figure."""
        if self.price is None:
            return {"price": "unknown"}
        out: dict[str, Any] = {"usd_per_1m_input_tokens": self.price.input_usd_per_1m,
                               "usd_per_1m_output_tokens": self.price.output_usd_per_1m}
        # the schedule's figure for the model in its expert role, else any role's
        latency = next((lat.seconds for lat in sorted(self.price.latencies, key=lambda x: not x.alias.startswith(
            ("expert", "any")))), None)
        if latency is not None:
            out["typical_latency_s"] = latency
        return out

    def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        if self.price is None:  # an unpriced paid model would make the cost feature a lie
            return error_result(f"{self.name} has no price in this instance's pricing schedule; not called")
        client = self.pool.client(self.index)
        reply = client.chat([{"role": "user", "content": arguments["question"]}], max_tokens=self.spec.max_tokens,
                            temperature=0)
        if not reply.ok:
            return error_result(f"{self.name} did not answer ({reply.error_kind}): {reply.error_detail or ''}"[:300],
                                reply.latency_s)
        cost = self.price.cost_usd(reply.prompt_tokens, reply.completion_tokens)
        if reply.cache_hit:
            cost = 0.0  # nothing was paid for a cached answer in this run
        observation = json.dumps({"answer": reply.text or ""}, ensure_ascii=False)
        return ToolResult(observation, cost, reply.latency_s)


def expert_price(spec: ExpertSpec, schedule: PricingSchedule | None) -> ModelPrice | None:
    """The schedule's price for the expert's model; a local endpoint the schedule does not list is free."""
    model = spec.priced_as or spec.endpoint.pricing_key
    if schedule is not None:
        try:
            return schedule.price(model)
        except PricingError:
            if spec.priced_as is not None:
                raise  # a named model the schedule lacks is a configuration mistake, not a free call
    if spec.endpoint.provider == "local":
        return ModelPrice(model, LOCAL_PRICE.input_per_m, LOCAL_PRICE.output_per_m, LOCAL_PRICE.source)
    return None
