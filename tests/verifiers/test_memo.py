"""Remembered verdicts (``verifiers.memo``): a shard's records are the same whether its worker verified other shards
of the domain before (reports and gold figures reused) or starts cold."""

from __future__ import annotations

import json

from domains.engine import ToolCall
from domains.registry import get_engine
from synthesis.generate import ShardConfig, generate_shard
from verifiers import memo
from verifiers.types import VerifiableTask
from verifiers.verify import check_task, check_task_memo


def _records(shards: range) -> list[str]:
    return [json.dumps(r, sort_keys=True, default=str)
            for i in shards for r in generate_shard(ShardConfig("finance", 0, i, 24, 2))["records"]]


def test_a_warm_worker_writes_the_records_a_cold_one_does() -> None:
    memo.forget()
    _records(range(0, 8))  # a worker that has verified eight shards of the domain already
    warm = _records(range(8, 14))
    memo.forget()
    cold = _records(range(8, 14))
    assert warm == cold


def test_a_remembered_report_is_keyed_by_what_must_be_said_too() -> None:
    memo.forget()
    engine = get_engine("weather", 0)
    gold = (ToolCall("get_alert", {"alert_id": "AL0004"}),
            ToolCall("escalate_alert", {"alert_id": "AL0004", "severity": "warning"}))
    silent, said = VerifiableTask("weather", 0, gold), VerifiableTask("weather", 0, gold, ("warning",))
    first = check_task_memo(silent, engine)
    second = check_task_memo(said, engine)
    assert first == check_task(silent, engine) and second == check_task(said, engine)
    assert first.no_action.reason != second.no_action.reason  # the empty trajectory also fails fidelity
    assert check_task_memo(silent, engine) is first  # computed once


def test_only_the_engine_used_last_keeps_its_memos() -> None:
    """A worker that has run every domain holds one domain's memos, not ten (about 9 KB an entry)."""
    memo.forget()
    weather, railway = get_engine("weather", 0), get_engine("railway", 0)
    assert memo.remembered(weather, "k", "a", lambda: 1) == 1
    assert memo.remembered(weather, "k", "a", lambda: 2) == 1  # remembered
    assert memo.remembered(railway, "k", "a", lambda: 3) == 3  # another engine: its own value
    assert memo.remembered(weather, "k", "a", lambda: 4) == 4  # weather's memo went when railway came
