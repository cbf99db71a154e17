"""The verification contract stored with a published task: a dual-control task's setup calls, assertions and
actions survive the round trip (JSON, as the warehouse stores it); every other task keeps the contract's old shape,
its content hash and its dedup key."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from domains.engine import ToolCall
from synthesis.dedup import dedup, exact_key
from synthesis.requests import Request
from synthesis.task import Task
from verifiers.types import VerifiableTask

SETUP = (ToolCall("set_user_info", {"name": "John Smith", "phone_number": "555-123-2002"}, "setup"),
         ToolCall("turn_data_off", {}, "setup"))
GOLD = (ToolCall("toggle_data", {}, "user"), ToolCall("get_customer_by_phone", {"phone_number": "555-123-2002"}))
ASSERTIONS = ({"env_type": "user", "func_name": "assert_mobile_data_status", "arguments": {"expected_status": True},
               "assert_value": True, "message": None},)
ACTIONS = ({"action_id": "a0", "requestor": "user", "name": "toggle_data", "arguments": {}, "compare_args": None},)


def _dual() -> VerifiableTask:
    return VerifiableTask("telecom", 0, GOLD, (), criteria=("assertions", "actions"), setup_calls=SETUP,
                          env_assertions=ASSERTIONS, actions=ACTIONS)


def test_a_dual_control_contract_round_trips_through_json() -> None:
    task = _dual()
    stored = json.loads(json.dumps(task.contract()))  # what tasks.verification_json holds
    assert [c["side"] for c in stored["setup_calls"]] == ["setup", "setup"]
    back = VerifiableTask("telecom", 0, GOLD).with_contract(stored)
    assert back == task
    as_dict: dict[str, Any] = {"domain": "telecom", "gold_calls": [c.to_dict() for c in GOLD], **stored}
    assert VerifiableTask.from_dict(as_dict) == task
    assert as_dict["gold_calls"][0]["side"] == "user" and "side" not in as_dict["gold_calls"][1]


def test_a_task_without_them_keeps_the_old_contract_and_hash() -> None:
    plain = VerifiableTask("weather", 3, GOLD[1:], ("sunny",), ("stations", "WS1"), ("get_station",))
    assert plain.contract() == {"criteria": list(plain.criteria), "user": ["stations", "WS1"],
                                "identify_tools": ["get_station"]}
    assert plain.with_contract(plain.contract()) == plain
    request = Request("lookup", "look up my station", GOLD[1:], communicate=("sunny",))
    task = Task("weather", 3, [request], style=0)
    old = json.dumps([task.domain, task.seed, task.canonical_gold(), task.communicate_info, task.instruction_text()],
                     ensure_ascii=False, default=str)
    assert task.content_hash() == hashlib.sha256(old.encode()).hexdigest()  # the formula every snapshot used
    assert task.tau2()["initial_state"] is None and "env_assertions" not in task.tau2()["evaluation_criteria"]


def test_the_synthesis_task_carries_the_fields_to_the_verifier_and_its_identity() -> None:
    request = Request("device", "my mobile data is off", GOLD)
    plain = Task("telecom", 0, [request], style=0, criteria=("assertions", "actions"))
    dual = Task("telecom", 0, [request], style=0, criteria=("assertions", "actions"), setup_calls=SETUP,
                env_assertions=ASSERTIONS, actions=ACTIONS)
    assert dual.verifiable() == _dual()
    assert dual.content_hash() != plain.content_hash()  # another start is another task
    criteria = dual.tau2()["evaluation_criteria"]
    assert criteria["reward_basis"] == ["ENV_ASSERTION", "ACTION"] and criteria["env_assertions"] == list(ASSERTIONS)
    assert [a["requestor"] for a in criteria["actions"]] == ["user", "assistant"]


def _record(task_id: str, contract: dict[str, Any]) -> dict[str, Any]:
    return {"task_id": task_id, "domain": "telecom", "accepted": True, "canonical_gold": "[]", "instruction": "same",
            "evolved_from": None, "verification": contract, "reason": "ok", "reason_detail": "ok"}


def test_dedup_tells_apart_tasks_that_differ_only_in_their_start() -> None:
    one = _record("a", _dual().contract())
    other = _record("b", {**_dual().contract(), "setup_calls": [SETUP[0].to_dict()]})
    again = _record("c", _dual().contract())
    counts = dedup([one, other, again], embed=lambda texts: np.ones((len(texts), 2)) / 2 ** 0.5)
    assert counts["exact_duplicate"] == 1 and one["accepted"] and other["accepted"] and not again["accepted"]
    plain = _record("d", {"criteria": ["execution"], "user": None, "identify_tools": []})
    assert exact_key(plain) == hashlib.sha256("telecom\x00[]\x00same".encode()).hexdigest()  # unchanged key
