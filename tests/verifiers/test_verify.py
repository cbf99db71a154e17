"""The verifier's verdicts on hand-built weather tasks: one definition of solved."""

from __future__ import annotations

from domains.engine import ToolCall as Call
from verifiers.checks import fidelity_check
from verifiers.verify import check_task, outcome_reward, verify
from verifiers.types import Trajectory, VerifiableTask

ESCALATE_AND_REPORT = VerifiableTask(
    "weather", 0,
    (Call("get_alert", {"alert_id": "AL0004"}), Call("escalate_alert", {"alert_id": "AL0004", "severity": "warning"})),
    ("warning",),
)


def test_gold_trajectory_solves_its_task() -> None:
    verdict = verify(ESCALATE_AND_REPORT, Trajectory(ESCALATE_AND_REPORT.gold_calls, "AL0004 is now a Warning."))
    assert verdict.solved, verdict
    assert outcome_reward(ESCALATE_AND_REPORT, Trajectory(ESCALATE_AND_REPORT.gold_calls, "warning")) == 1.0


def test_another_route_to_the_same_end_state_passes_execution() -> None:
    detour = (Call("get_alert", {"alert_id": "AL0004"}),
              Call("escalate_alert", {"alert_id": "AL0004", "severity": "watch"}),
              Call("escalate_alert", {"alert_id": "AL0004", "severity": "warning"}))
    verdict = verify(ESCALATE_AND_REPORT, Trajectory(detour, "it is a warning now"))
    assert verdict.execution.passed and verdict.solved


def test_a_different_end_state_fails_execution_with_the_row_named() -> None:
    wrong = (Call("get_alert", {"alert_id": "AL0004"}), Call("cancel_alert", {"alert_id": "AL0004"}))
    verdict = verify(ESCALATE_AND_REPORT, Trajectory(wrong, "warning"))
    assert not verdict.execution.passed
    assert "alerts:AL0004" in verdict.execution.reason


def test_missing_communicate_info_fails_fidelity() -> None:
    verdict = verify(ESCALATE_AND_REPORT, Trajectory(ESCALATE_AND_REPORT.gold_calls, "Done, it has been raised."))
    assert verdict.execution.passed and verdict.completeness.passed
    assert not verdict.fidelity.passed and "'warning'" in verdict.fidelity.reason


def test_skipping_an_entity_the_gold_read_fails_completeness() -> None:
    only_write = (Call("escalate_alert", {"alert_id": "AL0004", "severity": "warning"}),)
    verdict = verify(ESCALATE_AND_REPORT, Trajectory(only_write, "warning"))
    assert verdict.execution.passed
    assert not verdict.completeness.passed and "read alerts:AL0004" in verdict.completeness.reason


def test_fidelity_normalises_case_commas_and_numbers() -> None:
    assert fidelity_check(("1,234.50",), "The total is 1234.5 EUR").passed
    assert fidelity_check(("Total 12.0",), "total 12").passed
    assert not fidelity_check(("12",), "it was 120 or 12.5").passed
    assert fidelity_check(("WS0001",), "station ws0001.").passed


def test_a_gold_call_that_raises_makes_the_task_invalid() -> None:
    task = VerifiableTask("weather", 0, (Call("cancel_alert", {"alert_id": "AL0001"}),))
    report = check_task(task)
    assert not report.gold_validity.passed and "AL0001 is not active" in report.gold_validity.reason
    ok, reason = report.admissible(0.9)
    assert not ok and reason.startswith("gold_invalid")


def test_do_nothing_fails_a_write_task() -> None:
    task = VerifiableTask("weather", 0, (Call("cancel_alert", {"alert_id": "AL0004"}),))
    assert not verify(task, Trajectory()).solved
    assert check_task(task).no_action.passed


def test_a_task_a_do_nothing_agent_passes_is_rejected() -> None:
    # a failing call writes nothing: replaying it equals doing nothing
    task = VerifiableTask("weather", 0, ())
    report = check_task(task)
    assert not report.no_action.passed
    assert not report.admissible(0.9)[0]


def test_mutants_of_a_real_task_are_killed() -> None:
    task = VerifiableTask("weather", 0, (
        Call("find_station_by_name", {"name": "Urban Harbor"}),
        Call("open_maintenance_ticket", {"station_id": "WS0001", "issue": "power_failure", "priority": "urgent"}),
        Call("close_maintenance_ticket", {"ticket_id": "MT0041"}),
    ))
    report = check_task(task)
    assert report.gold_validity.passed, report.gold_validity.reason
    kinds = {"drop", "change_argument", "reorder"}
    assert report.mutation.total >= 8
    assert report.mutation.kill_rate == 1.0, report.mutation.survivors
    assert all(s.split(":")[0] in kinds for s in report.mutation.survivors)


def test_surviving_mutants_are_reported() -> None:
    # the same read twice: dropping either copy changes nothing the checks can see
    task = VerifiableTask("weather", 0, (
        Call("get_station", {"station_id": "WS0001"}),
        Call("get_station", {"station_id": "WS0001"}),
        Call("cancel_alert", {"alert_id": "AL0004"}),
    ))
    report = check_task(task)
    assert report.mutation.kill_rate < 1.0
    assert any(s.startswith("drop: drop call") for s in report.mutation.survivors)


def test_a_task_is_solved_by_its_own_criteria_and_the_strict_reading_stays_available() -> None:
    import dataclasses

    import pytest

    state_and_said = dataclasses.replace(ESCALATE_AND_REPORT, criteria=("fidelity", "execution"))
    assert state_and_said.criteria == ("execution", "fidelity")  # kept in one order
    no_read = Trajectory(ESCALATE_AND_REPORT.gold_calls[1:], "warning")  # the escalation without looking it up
    assert verify(state_and_said, no_read).solved and not verify(state_and_said, no_read).strict_solved
    assert verify(ESCALATE_AND_REPORT, no_read).failed_checks() == ["completeness"]
    for bad in ((), "execution", ("execution", "speed")):
        with pytest.raises(ValueError, match="criteria"):
            dataclasses.replace(ESCALATE_AND_REPORT, criteria=bad)


def test_mutants_of_read_calls_are_not_counted_for_a_task_that_does_not_judge_reads() -> None:
    import dataclasses

    strict = check_task(ESCALATE_AND_REPORT).mutation
    state_and_said = check_task(dataclasses.replace(ESCALATE_AND_REPORT, criteria=("execution", "fidelity"))).mutation
    assert strict.unjudged == 0 and state_and_said.unjudged > 0
    assert state_and_said.total + state_and_said.unjudged == strict.total
    assert state_and_said.kill_rate == 1.0  # every mutant of the write still fails
    contract = ESCALATE_AND_REPORT.contract()
    rebuilt = VerifiableTask("weather", 0, ESCALATE_AND_REPORT.gold_calls, ("warning",)).with_contract(contract)
    assert rebuilt == ESCALATE_AND_REPORT
