"""The client against a misbehaving loopback server: a batch completes, failures are counted by kind, retries
recover transient faults, the cache and the warehouse hold only whole entries, and the budget stops calls."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from inference.budget import Budget, BudgetExceeded
from inference.client import ChatRequest, LLMClient
from inference.endpoints import Endpoint
from inference.cost import Price, table_lookup
from inference.records import write_llm_calls
from tests.inference.fault_server import FaultServer

ALWAYS = ["500", "503", "429", "400", "malformed", "shape", "cut", "truncated", "chunked", "timeout"]
EXPECTED_KIND = {"500": "server_error", "503": "server_error", "429": "rate_limited", "400": "client_error",
                 "malformed": "malformed_json", "shape": "malformed_json", "cut": "truncated",
                 "truncated": "truncated", "chunked": "truncated", "timeout": "timeout"}
RETRIES = 2


@pytest.fixture()
def server() -> FaultServer:
    with FaultServer(slow_s=1.5) as fs:
        yield fs


def _endpoint(server: FaultServer) -> Endpoint:
    return Endpoint("fault", f"http://127.0.0.1:{server.port}/v1", "fault-model", "local", "fault")


def _client(server: FaultServer, cache: Path, **kw: object) -> LLMClient:
    options = {"max_retries": RETRIES, "backoff_s": 0.01, "max_backoff_s": 0.05, "timeout_s": 0.4,
               "max_concurrency": 4, "seed": 0, "stage": "fault-test", **kw}
    return LLMClient(_endpoint(server), cache_dir=cache, **options)  # type: ignore[arg-type]


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_a_faulty_batch_completes_counts_each_kind_and_writes_only_whole_results(server: FaultServer,
                                                                                 tmp_path: Path) -> None:
    good = [f"question {i}" for i in range(6)]
    flaky = [f"fault:{mode}:1" for mode in ("500", "429", "malformed", "truncated", "timeout")]
    broken = [f"fault:{mode}" for mode in ALWAYS]
    texts = good + flaky + broken
    cache_dir, warehouse = tmp_path / "cache", tmp_path / "wh.duckdb"

    with _client(server, cache_dir) as llm:
        replies = llm.chat_many([ChatRequest(_user(t)) for t in texts])
        totals = llm.totals()
        written = llm.flush_records(warehouse)

    assert len(replies) == len(texts)
    by_text = dict(zip(texts, replies))
    assert all(by_text[t].ok and by_text[t].text == f"echo {t}" for t in good + flaky)
    assert all(by_text[t].attempts == 2 for t in flaky)  # one fault, then the retry got through
    for mode in ALWAYS:
        reply = by_text[f"fault:{mode}"]
        assert not reply.ok and reply.error_kind == EXPECTED_KIND[mode], (mode, reply.error_kind, reply.error_detail)
        assert reply.attempts == (1 if mode == "400" else RETRIES + 1)  # a 400 is our fault: never retried
    assert totals["failures"] == dict(Counter(EXPECTED_KIND[m] for m in ALWAYS))
    assert sum(totals["attempt_failures"].values()) == len(flaky) + 1 + (RETRIES + 1) * (len(ALWAYS) - 1)
    assert totals["prompt_tokens"] == 10 * len(good + flaky)

    # the cache holds exactly the successful answers, each a whole JSON file; no temporary file is left
    entries = sorted(cache_dir.glob("*/*.json"))
    assert len(entries) == len(good + flaky)
    assert {json.loads(p.read_text())["response"]["choices"][0]["message"]["content"] for p in entries} == \
        {f"echo {t}" for t in good + flaky}
    assert not [p for p in cache_dir.rglob("*") if p.is_file() and p.suffix != ".json"]

    # one row per call in the warehouse, failures by kind as the client counted them
    assert written == len(texts)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = dict(con.execute("SELECT COALESCE(error_kind, 'ok'), COUNT(*) FROM llm_calls GROUP BY ALL").fetchall())
        stages = con.execute("SELECT DISTINCT stage, endpoint, model FROM llm_calls").fetchall()
    finally:
        con.close()
    assert rows == {"ok": len(good + flaky), **totals["failures"]}
    assert stages == [("fault-test", "fault", "fault-model")]
    assert not list(tmp_path.glob("wh.duckdb.tmp-*"))

    # a rerun resumes: successes come from the cache (no request reaches the server), only failures are retried
    before = Counter(server.requests)
    with _client(server, cache_dir) as llm:
        again = llm.chat_many([ChatRequest(_user(t)) for t in texts])
        llm.flush_records(warehouse)
    new_requests = Counter(server.requests) - before
    assert set(new_requests) == set(broken)
    assert all(again[i].cache_hit and again[i].text == replies[i].text for i, t in enumerate(texts) if t not in broken)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        assert con.execute("SELECT COUNT(*), COUNT(DISTINCT run_id), SUM(cache_hit::INT) FROM llm_calls").fetchone() \
            == (2 * len(texts), 2, len(good + flaky))
    finally:
        con.close()


def test_a_failed_flush_leaves_the_warehouse_as_it_was(server: FaultServer, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh.duckdb"
    with _client(server, tmp_path / "cache") as llm:
        llm.chat(_user("first"))
        llm.flush_records(warehouse)
        llm.chat(_user("second"))
        llm.chat(_user("third"))
        pending = list(llm.records)
    before = warehouse.read_bytes()
    broken = replace(pending[1], latency_s=None)  # NOT NULL column: the insert fails after the first row
    with pytest.raises(duckdb.Error):
        write_llm_calls(warehouse, [pending[0], broken])
    assert warehouse.read_bytes() == before
    assert not list(tmp_path.glob("wh.duckdb.tmp-*"))
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        assert con.execute("SELECT COUNT(*) FROM llm_calls").fetchone() == (1,)
    finally:
        con.close()


def test_the_budget_stops_new_calls_once_reached_and_says_so(server: FaultServer, tmp_path: Path) -> None:
    # each answer is 10 prompt + 5 completion tokens: (10 * 1000 + 5 * 2000) / 1M = $0.02 a call
    pricing = table_lookup({"fault": Price(1000.0, 2000.0, "test figures")})
    budget = Budget(0.05)
    with _client(server, tmp_path / "cache", budget=budget, pricing=pricing, max_concurrency=1) as llm:
        costs = [llm.chat(_user(f"paid {i}")).cost_usd for i in range(3)]
        assert costs == pytest.approx([0.02, 0.02, 0.02])
        assert budget.exhausted and budget.spent_usd == pytest.approx(0.06)
        with pytest.raises(BudgetExceeded, match=r"budget of \$0\.050000 reached: \$0\.060000 spent on 3 calls"):
            llm.chat(_user("one too many"))
        refused = llm.chat_many([ChatRequest(_user(f"later {i}")) for i in range(4)])
        assert [r.error_kind for r in refused] == ["budget_exceeded"] * 4
        # an answer already paid for is still served from the cache: a spent run can be resumed
        assert llm.chat(_user("paid 1")).cache_hit
        totals = llm.totals()
    assert server.total_requests == 3
    assert "one too many" not in server.requests
    assert totals["cost_usd"] == pytest.approx(0.06)
    assert totals["failures"] == {"budget_exceeded": 5}
    assert budget.refused_calls == 5


def test_a_budget_needs_a_price(server: FaultServer, tmp_path: Path) -> None:
    priced_nowhere = replace(_endpoint(server), provider="somecloud")
    with pytest.raises(ValueError, match="no price for pricing key 'fault'"):
        LLMClient(priced_nowhere, budget=1.0)
    with LLMClient(priced_nowhere) as llm:  # without a budget an unknown price is recorded as NULL, not invented
        assert llm.chat(_user("hello")).cost_usd is None


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after(server: FaultServer, tmp_path: Path) -> None:
    with _client(server, tmp_path, backoff_s=1.0, max_backoff_s=8.0) as llm:
        for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
            delays = {llm._delay(attempt, None) for _ in range(50)}
            assert all(ceiling / 2 <= d <= ceiling for d in delays) and len(delays) > 40
        assert llm._delay(1, 5.0) == 5.0
        assert llm._delay(1, 100.0) == 8.0


def test_cache_key_covers_model_messages_and_parameters(server: FaultServer, tmp_path: Path) -> None:
    with _client(server, tmp_path / "cache") as llm:
        a = llm.chat(_user("same"), temperature=0.0)
        b = llm.chat(_user("same"), temperature=0.0)
        c = llm.chat(_user("same"), temperature=0.5)
        d = llm.chat(_user("same"), temperature=0.0, tools=[{"type": "function", "function": {"name": "f"}}])
    assert (a.cache_hit, b.cache_hit, c.cache_hit, d.cache_hit) == (False, True, False, False)
    assert a.request_hash == b.request_hash != c.request_hash != d.request_hash
    assert server.requests["same"] == 3
    other_model = replace(_endpoint(server), model="another-model")
    with LLMClient(other_model, cache_dir=tmp_path / "cache") as llm:
        assert not llm.chat(_user("same"), temperature=0.0).cache_hit


def test_a_corrupt_cache_entry_is_a_miss_and_gets_rewritten(server: FaultServer, tmp_path: Path) -> None:
    with _client(server, tmp_path / "cache") as llm:
        first = llm.chat(_user("entry"))
        path = llm.cache.path(first.request_hash)
        path.write_text('{"key": "' + first.request_hash + '", "resp')
        again = llm.chat(_user("entry"))
    assert not again.cache_hit and again.ok
    assert json.loads(path.read_text())["key"] == first.request_hash
