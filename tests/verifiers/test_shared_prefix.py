"""Mutants replayed from the gold's state after the calls they share with it (``SharedPrefix``) get the verdicts
of mutants replayed from the start: whole shards' records are compared both ways, to the letter."""

from __future__ import annotations

import json

import pytest

from domains.engine import ToolCall
from domains.registry import get_engine
from synthesis.generate import ShardConfig, generate_shard
from verifiers import memo
from verifiers.replay import SharedPrefix, replay, shared_prefix
from verifiers.types import VerifiableTask
from verifiers.verify import check_task

SHARDS = [ShardConfig("finance", 0, 3, 24, 2), ShardConfig("railway", 1_000_000, 5, 24, 2),
          ShardConfig("medicine", 0, 2, 24, 2), ShardConfig("restaurant", 2_000_000, 7, 24, 2),
          ShardConfig("telecom", 0, 1, 24, 2), ShardConfig("airline", 0, 0, imported=True, imported_limit=40),
          ShardConfig("retail", 0, 0, imported=True, imported_limit=40)]


def _records(shard: ShardConfig) -> list[str]:
    memo.forget()  # each way verifies every candidate itself
    return [json.dumps(r, sort_keys=True, default=str) for r in generate_shard(shard)["records"]]


@pytest.mark.parametrize("shard", SHARDS, ids=[s.shard_id for s in SHARDS])
def test_a_shard_writes_the_same_records_with_and_without_shared_prefixes(shard: ShardConfig,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    shared = _records(shard)
    monkeypatch.setattr("verifiers.verify.SHARE_PREFIXES", False)
    from_start = _records(shard)
    assert shared == from_start
    records = [json.loads(r) for r in shared]
    assert len(records) >= 20 and sum(r["mutants"] for r in records) > 50  # many mutants judged, each both ways


def test_a_resumed_replay_is_the_replay_from_the_start() -> None:
    engine = get_engine("weather", 0)
    gold = (ToolCall("get_alert", {"alert_id": "AL0004"}),
            ToolCall("escalate_alert", {"alert_id": "AL0004", "severity": "warning"}),
            ToolCall("get_alert", {"alert_id": "AL0004"}))
    mutant = gold[:2] + (ToolCall("get_alert", {"alert_id": "AL0005"}),)
    dropped = gold[1:]
    shared = SharedPrefix(engine, gold)
    try:
        assert shared_prefix(mutant, gold) == shared.shared(mutant) == 2 and shared.shared(dropped) == 0
        for calls in (mutant, dropped):  # the longest shared prefix first
            resumed, fresh = shared.run(calls), replay(engine, calls)
            try:
                assert resumed.results == fresh.results and resumed.db.fingerprint() == fresh.db.fingerprint()
            finally:
                fresh.close()
        with pytest.raises(ValueError, match="descending order"):
            shared.run(mutant)  # its savepoint went when the run went back before it
    finally:
        shared.close()


def test_a_value_that_python_calls_equal_is_not_the_same_argument() -> None:
    """1 == True == 1.0 in Python; to a tool they are three values, so a mutant changing one to another shares no
    prefix there."""
    engine = get_engine("weather", 0)
    gold = (ToolCall("get_alert", {"alert_id": 1}),)
    shared = SharedPrefix(engine, gold)
    try:
        assert shared.shared((ToolCall("get_alert", {"alert_id": True}),)) == 0
        assert shared.shared((ToolCall("get_alert", {"alert_id": 1.0}),)) == 0
        assert shared.shared((ToolCall("get_alert", {"alert_id": 1}),)) == 1
    finally:
        shared.close()


def test_check_task_reports_the_same_both_ways() -> None:
    engine = get_engine("weather", 0)
    gold = (ToolCall("get_alert", {"alert_id": "AL0004"}),
            ToolCall("escalate_alert", {"alert_id": "AL0004", "severity": "warning"}))
    task = VerifiableTask("weather", 0, gold, ("warning",))
    assert check_task(task, engine, share_prefixes=True) == check_task(task, engine, share_prefixes=False)
    assert check_task(task, engine).mutation.total > 0
