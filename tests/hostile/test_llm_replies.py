"""Hostile LLM servers: every fault a loopback server sends back is one failed reply of a fixed kind, in bounded
time, never cached and never raised; every call is recorded and the records flush whole. Unknown costs stay
unknown; a budget works on a priced endpoint."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import duckdb
import pytest

from inference.budget import Budget, BudgetExceeded
from inference.cache import DiskCache, request_key
from inference.client import LLMClient
from inference.cost import Price, format_usd, run_lookup, table_lookup
from inference.endpoints import Endpoint, EndpointError, load_endpoints
from inference.pricing import nominal_schedule
from inference.records import ERROR_KINDS, CallRecord, write_llm_calls
from synthesis.llm_stages import LLMStagesConfig, stage_pricing
from tests.hostile.fake_llm import FakeLLM, wait_until

TIMEOUT_S = 1.5

# fault -> the error kind the reply must carry
REFUSED = {
    "deep_outside_choices": "too_deep",
    "deep_inside_choices": "too_deep",
    "deep_choice_list": "too_deep",
    "deep_tool_arguments_object": "too_deep",
    "endless_chunks": "too_large",
    "huge_content_length": "too_large",
    "error_endless_body": "too_large",
    "twenty_mb_completion": "too_large",
    "long_completion": "too_long",
    "overcounted_completion": "too_long",
    "trickle_body": "timeout",
    "trickle_headers": "timeout",
    "silent": "timeout",
    "gzip_body": "bad_encoding",
    "usage_2_pow_63": "bad_usage",
    "usage_negative": "bad_usage",
    "usage_float": "bad_usage",
    "usage_text": "bad_usage",
    "usage_bool": "bad_usage",
    "usage_list": "bad_usage",
    "usage_total_huge": "bad_usage",
    "finish_reason_object": "bad_finish_reason",
    "finish_reason_unknown": "bad_finish_reason",
    "finish_reason_number": "bad_finish_reason",
    "finish_reason_list": "bad_finish_reason",
    "lone_surrogate": "bad_text",
    "invalid_utf8": "bad_text",
    "tool_name_object": "bad_tool_call",
    "tool_arguments_number": "bad_tool_call",
    "nan_in_body": "malformed_json",
    "array_body": "malformed_json",
    "content_object": "malformed_json",
}
SLOW = {"trickle_body", "trickle_headers", "silent"}


@pytest.fixture(scope="module")
def server() -> FakeLLM:
    with FakeLLM() as fake:
        yield fake


def _endpoint(server: FakeLLM, provider: str = "local") -> Endpoint:
    return Endpoint("hostile", server.base_url, "m", provider, "hostile")


def _client(server: FakeLLM, cache: Path, **kw: object) -> LLMClient:
    options = {"max_retries": 0, "timeout_s": TIMEOUT_S, "backoff_s": 0.01, "stage": "hostile", **kw}
    return LLMClient(_endpoint(server), cache_dir=cache, **options)  # type: ignore[arg-type]


def _ask(fault: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"fault:{fault}"}]


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("llm")}


@pytest.mark.parametrize("fault", sorted(REFUSED))
def test_each_hostile_reply_is_one_failed_call_of_its_kind(server: FakeLLM, tmp_path: Path, fault: str) -> None:
    cache = tmp_path / "cache"
    start = time.monotonic()
    with _client(server, cache) as llm:
        reply = llm.chat(_ask(fault), max_tokens=16)
        records = list(llm.records)
    elapsed = time.monotonic() - start
    assert not reply.ok and reply.error_kind == REFUSED[fault], (fault, reply.error_kind, reply.error_detail)
    assert reply.error_kind in ERROR_KINDS
    assert reply.error_detail and "\n" not in reply.error_detail and "Traceback" not in reply.error_detail
    # the deadline is total: a server trickling a byte a second is cut off at timeout_s, not per read
    # (a trickled answer would take minutes in full, the silent server holds on for 30 s: loose bounds for a busy
    # machine still tell them apart)
    assert elapsed < (TIMEOUT_S + 6 if fault in SLOW else TIMEOUT_S + 10), elapsed
    assert len(DiskCache(cache)) == 0, "a refused answer was cached"
    assert [r.error_kind for r in records] == [REFUSED[fault]]


def test_a_deeply_nested_tool_argument_text_is_refused_by_the_strict_parser(server: FakeLLM, tmp_path: Path) -> None:
    with _client(server, tmp_path / "c") as llm:
        reply = llm.chat(_ask("deep_tool_arguments_text"), max_tokens=100_000)
    assert reply.ok and reply.tool_calls[0].arguments is None
    assert "nested deeper than 8 levels" in (reply.tool_calls[0].arguments_problem or "")


def test_duplicate_keys_in_tool_arguments_are_refused(server: FakeLLM, tmp_path: Path) -> None:
    with _client(server, tmp_path / "c") as llm:
        reply = llm.chat(_ask("duplicate_tool_keys"))
    assert reply.ok and reply.tool_calls[0].arguments is None
    assert "'station_id' appears twice" in (reply.tool_calls[0].arguments_problem or "")


def test_a_request_with_a_lone_surrogate_is_refused_before_sending(server: FakeLLM, tmp_path: Path) -> None:
    before = sum(server.requests.values())
    with _client(server, tmp_path / "c") as llm:
        reply = llm.chat([{"role": "user", "content": "hello \ud800"}])
        nan = llm.chat(_ask("ok"), temperature=float("nan"))
    assert not reply.ok and reply.error_kind == "invalid_request" and "not valid Unicode" in reply.error_detail
    assert not nan.ok and nan.error_kind == "invalid_request"
    assert sum(server.requests.values()) == before


def test_a_poisoned_cache_entry_is_a_miss_and_is_replaced(server: FakeLLM, tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "c")
    messages = _ask("ok")
    key = request_key("m", messages, {"tools": None, "tool_choice": None})
    poisoned = {"choices": [{"message": {"content": "poison"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 2**63, "completion_tokens": 1}}
    cache.put(key, {"response": poisoned})
    with _client(server, tmp_path / "c") as llm:
        reply = llm.chat(messages)
    assert reply.ok and not reply.cache_hit and reply.text == "fine"
    assert cache.get(key)["response"]["choices"][0]["message"]["content"] == "fine"


def test_a_batch_of_faults_loses_no_record_and_counts_each_kind(server: FakeLLM, tmp_path: Path) -> None:
    faults = ["ok", "usage_2_pow_63", "lone_surrogate", "deep_inside_choices", "finish_reason_object",
              "gzip_body", "ok", "usage_negative"]
    warehouse = tmp_path / "wh.duckdb"
    with _client(server, tmp_path / "c", max_concurrency=4) as llm:
        replies = [llm.chat(_ask(f), max_tokens=16) for f in faults]
        totals = llm.totals()
        written = llm.flush_records(warehouse)
    assert written == len(faults) and sum(r.ok for r in replies) == 2
    assert totals["failures"] == {"bad_usage": 2, "bad_text": 1, "too_deep": 1, "bad_finish_reason": 1,
                                  "bad_encoding": 1}
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute("SELECT error_kind, prompt_tokens FROM llm_calls ORDER BY call_id").fetchall()
    finally:
        con.close()
    assert [r[0] for r in rows] == [None if f == "ok" else REFUSED[f] for f in faults]
    assert all(0 <= r[1] < 2**31 for r in rows)


def test_one_unstorable_record_does_not_lose_the_others(tmp_path: Path) -> None:
    from datetime import datetime

    def record(i: int, **kw: object) -> CallRecord:
        base = dict(call_id=f"r-{i}", run_id="r", created_at=datetime(2026, 1, 1), endpoint="e", model="m",
                    provider="local", stage="s", request_hash="h", prompt_tokens=1, completion_tokens=1,
                    cost_usd=0.0, latency_s=0.1, cache_hit=False, attempts=1)
        return CallRecord(**{**base, **kw})  # type: ignore[arg-type]

    warehouse = tmp_path / "wh.duckdb"
    records = [record(0), record(1, prompt_tokens=2**63), record(2, error_detail="bad \ud800 text"),
               record(3, cost_usd=float("inf")), record(4)]
    assert write_llm_calls(warehouse, records) == 5
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute("SELECT call_id, prompt_tokens, cost_usd, error_detail FROM llm_calls "
                           "ORDER BY call_id").fetchall()
    finally:
        con.close()
    assert [r[0] for r in rows] == [f"r-{i}" for i in range(5)]
    assert rows[1][1] == 0 and "out of range" in rows[1][3]
    assert rows[3][2] is None and "not finite" in rows[3][3]


def test_an_unknown_cost_is_null_and_printed_unknown(server: FakeLLM, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh.duckdb"
    with LLMClient(_endpoint(server, provider="someprovider"), cache_dir=tmp_path / "c", timeout_s=5) as llm:
        assert llm.chat(_ask("ok")).ok
        totals = llm.totals()
        llm.flush_records(warehouse)
    assert totals["cost_usd"] is None and totals["unpriced_calls"] == 1
    assert format_usd(totals["cost_usd"]) == "unknown" and format_usd(0.5) == "$0.500000"
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        assert con.execute("SELECT cost_usd FROM llm_calls").fetchall() == [(None,)]
    finally:
        con.close()


def test_a_budget_works_on_a_priced_endpoint(server: FakeLLM, tmp_path: Path) -> None:
    endpoint = _endpoint(server, provider="someprovider")
    with pytest.raises(EndpointError, match="no price"):
        LLMClient(endpoint, budget=1.0)
    budget = Budget(0.00001)
    with LLMClient(endpoint, cache_dir=tmp_path / "c", budget=budget, timeout_s=5,
                   pricing=table_lookup({"hostile": Price(1.0, 1.0, "test")})) as llm:
        assert llm.chat(_ask("ok")).ok  # 10 tokens at $1/M: $0.00001, the whole budget
        with pytest.raises(BudgetExceeded):
            llm.chat([{"role": "user", "content": "another"}])
    assert budget.exhausted and budget.paid_calls == 1


def test_llm_stages_budget_is_priced_from_the_nominal_table_and_a_price_file(tmp_path: Path) -> None:
    lookup = run_lookup(nominal_schedule())
    assert lookup("qwen3-8b") is not None and lookup("Qwen/Qwen3-8B") == lookup("qwen3-8b")
    assert lookup("no-such-model") is None
    registry = load_endpoints()
    assert stage_pricing(None)(registry.get("vllm-qwen3-8b").pricing_key) is not None
    LLMStagesConfig(warehouse=str(tmp_path / "w.duckdb"), endpoint="vllm-qwen3-8b", budget_usd=0.5).check()
    with pytest.raises(ValueError, match="--budget needs a price for endpoint 'openai-gpt-4o-mini'"):
        LLMStagesConfig(warehouse=str(tmp_path / "w.duckdb"), endpoint="openai-gpt-4o-mini", budget_usd=0.5).check()
    prices = tmp_path / "prices.yaml"
    prices.write_text(json.dumps({"provider": "OpenAI", "source": "https://example.invalid/pricing",
                                  "retrieved": "2026-11-30", "currency": "USD",
                                  "models": [{"name": "gpt-4o-mini", "input_usd_per_1M": 0.15,
                                              "output_usd_per_1M": 0.6}]}))
    LLMStagesConfig(warehouse=str(tmp_path / "w.duckdb"), endpoint="openai-gpt-4o-mini", budget_usd=0.5,
                    prices=str(prices)).check()
    assert stage_pricing(str(prices))("gpt-4o-mini") == Price(0.15, 0.6, stage_pricing(str(prices))(
        "gpt-4o-mini").source)


def test_nothing_is_left_running_after_the_hostile_calls(server: FakeLLM, tmp_path: Path) -> None:
    with _client(server, tmp_path / "c") as llm:
        from inference.client import ChatRequest

        replies = llm.chat_many([ChatRequest(_ask(f)) for f in ("trickle_body", "endless_chunks", "silent", "ok")])
    assert [r.error_kind for r in replies] == ["timeout", "too_large", "timeout", None]
    assert wait_until(lambda: not _threads()), _threads()
