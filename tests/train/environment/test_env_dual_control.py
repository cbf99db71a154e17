"""Episodes in a dual-control domain (tau2's telecom, read back from a published snapshot): the task's setup calls
set up the phone before the first turn, the agent is offered only the operator's tools, and the scripted user acts
on its own device when the agent asks it to (and only with its own tools). The oracle scores 1.0, the empty agent 0."""

from __future__ import annotations

from dataclasses import replace

import pytest

from domains import external
from domains.registry import get_spec
from interop.tau2_tasks import imported_tasks
from train.environment.env import EnvConfig, Environment
from train.environment.policies import DialogueOracle, EmptyPolicy, OraclePolicy, ScriptedPolicy, tool_call_text
from train.environment.tasks import TrainingTask
from train.environment.user_sim import ScriptedUser
from verifiers.assertions import assertion_value

pytestmark = pytest.mark.skipif(not all(external.available(s) for s in get_spec("telecom").sources.values()),
                                reason="tau2's telecom data is not installed (scripts/setup_tau2.sh)")
ENV = Environment(EnvConfig(subset_tools=False))


@pytest.fixture(scope="module")
def published(telecom_tasks: list[TrainingTask]) -> list[TrainingTask]:
    """Every task of a telecom snapshot (tests/train/conftest.py)."""
    return telecom_tasks


@pytest.fixture(scope="module")
def tasks(published: list[TrainingTask]) -> list[TrainingTask]:
    stored = [t for t in published if "-tau2-" in t.task_id]
    action = next(t for t in imported_tasks(get_spec("telecom")) if t.task.actions)  # an ACTION task too
    return stored + [TrainingTask(action.task_id, "telecom", 0, action.instruction_text(), action.task.gold_calls,
                                  user_scenario=action.raw["user_scenario"], contract=action.task.contract())]


def test_the_oracle_scores_one_and_the_empty_agent_zero(tasks: list[TrainingTask]) -> None:
    assert len(tasks) == 13 and sum(any(c.side == "user" for c in t.gold_calls) for t in tasks) >= 10
    for task in tasks:
        for oracle in (OraclePolicy(task), DialogueOracle(task)):
            result = ENV.run(task, oracle, ScriptedUser(task))
            assert result.solved and result.ended_by == "user_stop", (task.task_id, result.failed_checks)
        empty = ENV.run(task, EmptyPolicy(), ScriptedUser(task))
        assert not empty.solved and empty.failed_checks, task.task_id


def test_synthesised_tasks_play_as_imported_ones_do(published: list[TrainingTask]) -> None:
    """A synthesised telecom task (a phone broken by its setup, fixed with the user) read back from the warehouse:
    its setup runs before the first turn, the oracle guides the scripted user through the fix and scores 1.0, and
    the empty agent, or one that stops before the user's last step, scores 0."""
    synthesised = [t for t in published if "-tau2-" not in t.task_id]
    assert len(synthesised) >= 5
    for task in synthesised:
        verifiable = task.verifiable()
        assert verifiable.setup_calls and "assertions" in verifiable.criteria, task.task_id
        assert any(c.side == "user" for c in task.gold_calls), task.task_id
        for oracle in (OraclePolicy(task), DialogueOracle(task)):
            result = ENV.run(task, oracle, ScriptedUser(task))
            assert result.solved and result.ended_by == "user_stop", (task.task_id, result.failed_checks)
        empty = ENV.run(task, EmptyPolicy(), ScriptedUser(task))
        assert not empty.solved and "assertions" in empty.failed_checks, (task.task_id, empty.failed_checks)
        last_user = max(i for i, c in enumerate(task.gold_calls) if c.side == "user")
        short = replace(task, gold_calls=task.gold_calls[:last_user])
        stopped = ENV.run(task, OraclePolicy(short), ScriptedUser(task))
        assert not stopped.solved, task.task_id


def test_setup_runs_first_and_the_agent_sees_only_the_operators_tools(tasks: list[TrainingTask]) -> None:
    task = next(t for t in tasks if any(c.name == "turn_airplane_mode_on" for c in t.verifiable().setup_calls))
    session = ENV.start(task, ScriptedUser(task))
    try:
        assert assertion_value(session.db, "assert_airplane_mode_status", {"expected_status": True}) == (1, None)
        offered = set(session.catalog.names)
        assert "get_customer_by_phone" in offered
        assert not offered & {t.name for t in get_spec("telecom").tools if t.side == "user" or t.setup}
    finally:
        session.close()
    # the agent calling the user's tool itself is a format error: nothing runs on the phone
    result = ENV.run(task, ScriptedPolicy([tool_call_text("toggle_airplane_mode", {}), "Done."]), ScriptedUser(task))
    assert result.format_errors == 1 and not result.solved


def test_the_user_acts_only_with_its_own_tools(tasks: list[TrainingTask]) -> None:
    task = tasks[0]
    session = ENV.start(task, ScriptedUser(task))
    try:
        session.open()
        session.agent_turn("Please do this on your phone: toggle_airplane_mode {}, and also suspend_line "
                           '{"customer_id": "C1001", "line_id": "L1001", "reason": "x"}.')
        session.user_turn()
        assert [(c.name, c.side) for c in session.domain_calls] == [("toggle_airplane_mode", "user")]
        assert "I did toggle_airplane_mode on my phone" in session.messages[-1]["content"]
        session.agent_turn('Now please run set_network_mode_preference {"mode": "2g_only"} and tell me.')
        session.user_turn()
        assert session.domain_calls[-1].arguments == {"mode": "2g_only"}
        assert session.db.table_rows("phone")[0]["network_mode_preference"] == "2g_only"
    finally:
        session.close()
