"""Synthesised telecom tasks (dual control): a customer's phone is broken by the outcome's setup calls (as tau2's
initialization actions break it), the agent identifies the customer, reads what the user sees on the phone and
decides the fix by the written rule, and the user makes the fix on their own device (or the agent changes the
account: roaming on the line, a data refuel). "Solved" is judged on both sides: the operator's records and the phone,
with the outcome's assertions. Each accepted record passes the realism audit with nothing invented."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from domains import external
from domains.engine import ToolCall
from domains.registry import get_engine, get_spec
from synthesis.generate import ShardConfig, generate_shard
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import verify

pytestmark = pytest.mark.skipif(not all(external.available(s) for s in get_spec("telecom").sources.values()),
                                reason="tau2's telecom data is not installed (scripts/setup_tau2.sh)")

ROW_ID = re.compile(r"\b[LCBDP]\d{4}\b")  # the operator's record ids, which a caller never knows


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    out = []
    for shard in range(2):
        out += generate_shard(ShardConfig("telecom", 0, shard))["records"]
    return out


def _task(record: dict[str, Any]) -> VerifiableTask:
    return VerifiableTask.from_dict({"domain": "telecom", "gold_calls": record["gold_calls"],
                                     "communicate_info": record["communicate_info"], **record["verification"]})


def test_every_outcome_is_synthesised_and_accepted(records: list[dict[str, Any]]) -> None:
    accepted = [r for r in records if r["accepted"]]
    assert len(accepted) >= 0.9 * len(records), Counter(r["reason"] for r in records)
    outcomes = Counter(n for r in accepted for n in r["notes"] if n.startswith("outcome="))
    assert set(outcomes) == {f"outcome={o.name}" for i in get_spec("telecom").intents for o in i.outcomes}
    assert any("forbidden=other_owner" in r["notes"] for r in accepted)  # another customer's line, refused


def test_a_task_starts_broken_and_is_judged_on_both_sides(records: list[dict[str, Any]]) -> None:
    engine = get_engine("telecom")
    writes = {t.name for t in engine.spec.tools if t.kind == "write"}
    toggled = 0
    for record in (r for r in records if r["accepted"]):
        task = _task(record)
        assert [c.side for c in task.setup_calls] == ["setup"] * len(task.setup_calls) and task.env_assertions
        assert "assertions" in task.criteria and task.gold_calls[0].name == "get_customer_by_name"
        assert verify(task, Trajectory(task.gold_calls), engine).solved, record["task_id"]
        empty = verify(task, Trajectory(), engine)
        assert not empty.solved and not empty.assertions.passed, record["task_id"]
        # the last write left undone: the phone (or the line) is still broken
        last = max(i for i, c in enumerate(task.gold_calls) if c.name in writes)
        short = verify(task, Trajectory(task.gold_calls[:last] + task.gold_calls[last + 1:]), engine)
        assert not short.solved, record["task_id"]
        # the setup really is the start: without it, a toggle that fixed the phone switches it off instead
        if any(n in record["notes"] for n in ("outcome=airplane_mode", "outcome=data_off")):
            unbroken = VerifiableTask("telecom", 0, task.gold_calls, task.communicate_info, task.user,
                                      task.identify_tools, task.criteria, (), task.env_assertions)
            assert not verify(unbroken, Trajectory(task.gold_calls), engine).assertions.passed, record["task_id"]
            toggled += 1
    assert toggled >= 2


def test_the_fix_is_the_users_and_follows_what_the_phone_shows(records: list[dict[str, Any]]) -> None:
    spec = get_spec("telecom")
    user_tools = {t.name for t in spec.side_tools("user")}
    for record in (r for r in records if r["accepted"]):
        calls = [ToolCall(c["name"], c["arguments"], c.get("side", "agent")) for c in record["gold_calls"]]
        assert all((c.side == "user") == (c.name in user_tools) for c in calls), record["task_id"]
        outcome = next(n.split("=", 1)[1] for n in record["notes"] if n.startswith("outcome="))
        names = [c.name for c in calls]
        # the agent reads the phone (through the user) before any fix is made on it
        first_read = min(i for i, c in enumerate(calls) if c.side == "user")
        assert spec.tool(names[first_read]).kind == "read", (outcome, names)
        fix = {"airplane_mode": "toggle_airplane_mode", "sim_missing": "reseat_sim_card", "data_off": "toggle_data",
               "data_used_up": "refuel_data", "line_without_roaming": "toggle_roaming",
               "line_allows_roaming": "toggle_roaming"}[outcome]
        assert fix in names, (outcome, names)
        assert ("enable_roaming" in names) == (outcome == "line_without_roaming"), (outcome, names)


def test_nothing_in_the_request_or_gold_is_invented(records: list[dict[str, Any]]) -> None:
    for record in (r for r in records if r["accepted"]):
        request = record["tau2"]["user_scenario"]["instructions"]["reason_for_call"]
        assert not ROW_ID.search(request), request  # the caller gives a phone number, never a line id
        assert record["underivable"] == [], record["task_id"]
        figures = record["realism"]
        assert figures["identified"] and figures["internal_ids"] == 0 and figures["noop_writes"] == 0
        assert figures["empty_passes"] == 0 and figures["parrot_passes"] == 0
        # a forbidden request about another customer's line is left undone
        if "forbidden=other_owner" in record["notes"]:
            own = {c["arguments"].get("line_id") for c in record["gold_calls"] if "line_id" in c["arguments"]}
            other_lines = set(re.findall(r"\b555-123-\d{4}\b", request)) - set(
                c["arguments"].get("phone_number") for c in record["verification"]["setup_calls"])
            assert other_lines and len(own) <= 1, request
