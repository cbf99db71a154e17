"""Checks that count: no-op gold writes, tau2's rule for lazy agents, specific communicate_info."""

from __future__ import annotations

from domains.engine import ToolCall
from domains.registry import get_engine
from synthesis.realism_audit import TaskFacts, publishable, task_figures
from verifiers.realism import lazy_passes, noop_writes, tau2_solved
from verifiers.types import Trajectory, VerifiableTask


def _scheduled_service() -> str:
    """A service running today that has not arrived: the only kind a delay may be reported for."""
    engine = get_engine("railway")
    with engine.fresh() as db:
        return str(db.query("SELECT service_id FROM services WHERE status = 'scheduled' AND delay_minutes = 0 "
                            "AND date(departure_at) = date(:now) AND arrival_at > :now ORDER BY service_id LIMIT 1",
                            {"now": engine.spec.now})[0][0])


def test_a_write_that_changes_nothing_is_counted() -> None:
    engine = get_engine("railway")
    sid = _scheduled_service()
    assert noop_writes(engine, (ToolCall("report_delay", {"service_id": sid, "delay_minutes": 0}),)) == 1
    assert noop_writes(engine, (ToolCall("report_delay", {"service_id": sid, "delay_minutes": 20}),)) == 0


def test_tau2_rule_db_hash_and_substring() -> None:
    engine = get_engine("railway")
    sid = _scheduled_service()
    write = VerifiableTask("railway", 0, (ToolCall("report_delay", {"service_id": sid, "delay_minutes": 20}),))
    assert not tau2_solved(engine, write, Trajectory())
    assert tau2_solved(engine, write, Trajectory(write.gold_calls))
    read = VerifiableTask("railway", 0, (ToolCall("get_service", {"service_id": sid}),), ("1,250.00 EUR",))
    assert tau2_solved(engine, read, Trajectory((), "That comes to 1250.00 eur."))
    assert not tau2_solved(engine, read, Trajectory((), "That comes to 1250 EUR."))


def test_a_parrot_passes_when_the_answer_is_already_in_the_request() -> None:
    engine = get_engine("railway")
    sid = _scheduled_service()
    task = VerifiableTask("railway", 0, (ToolCall("get_service", {"service_id": sid}),), (sid,))
    lazy = lazy_passes(engine, task, f"What is the status of {sid}?")
    assert lazy.parrot_tau2 and not lazy.parrot_ours and not lazy.empty_tau2


def test_publishable_rejects_bare_numbers_and_answers_given_away() -> None:
    engine = get_engine("railway")
    sid = _scheduled_service()
    facts = TaskFacts("railway", (ToolCall("get_service", {"service_id": sid}),), ("0", sid),
                      f"Is {sid} on time?", f"Is {sid} on time?")
    figures = task_figures(engine, facts)
    assert figures["short_communicate"] == 1 and figures["communicate_in_request"] == 1
    assert figures["internal_ids"] == 1 and not figures["identified"]
    ok, reason = publishable(figures)
    assert not ok and reason.startswith("realism_")


def test_the_one_replay_shortcut_agrees_with_the_full_tau2_rule() -> None:
    """``lazy_passes`` derives tau2's verdicts from one gold replay; the full whole-database-hash rule agrees."""
    engine = get_engine("railway")
    sid = _scheduled_service()
    tasks = [VerifiableTask("railway", 0, (ToolCall("report_delay", {"service_id": sid, "delay_minutes": d}),), info)
             for d in (0, 20) for info in ((), ("20 minutes",))]
    request = "Please report a delay of 20 minutes."
    for task in tasks:
        lazy = lazy_passes(engine, task, request)
        assert lazy.empty_tau2 == tau2_solved(engine, task, Trajectory())
        assert lazy.parrot_tau2 == tau2_solved(engine, task, Trajectory((), request))
