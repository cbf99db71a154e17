"""Personas say who the user is ("Ann Lee, a doctor"), and the role travels as data in the task's tau2 scenario."""

from __future__ import annotations

import random

import pytest

from domains.registry import get_engine
from synthesis.persona import Persona, scenario_role, with_article
from synthesis.realistic_tasks import base_candidate
from synthesis.toolgraph import ToolGraph
from warehouse.exports import tau2_problems


@pytest.mark.parametrize(("noun", "said"), [("doctor", "a doctor"), ("instructor", "an instructor"),
                                            ("customer", "a customer"), ("engineer", "an engineer"),
                                            ("university lecturer", "a university lecturer"),
                                            ("hourly worker", "an hourly worker"), ("head coach", "a head coach")])
def test_the_article_follows_the_sound(noun: str, said: str) -> None:
    assert with_article(noun) == said


def test_a_staff_persona_renders_its_noun_and_falls_back_to_the_role() -> None:
    assert Persona("Ann Lee", "staff", "brisk", "instructor").describe() == "Ann Lee, an instructor: brisk"
    assert Persona("Bo Yu", "customer", "calm").describe() == "Bo Yu, a customer: calm"


@pytest.mark.parametrize(("scenario", "role"), [
    ({"persona": "Ann Lee, a doctor: brisk", "role": "staff"}, "staff"),
    ({"persona": "Ann Lee, a staff: brisk"}, "staff"),  # written before the role travelled as data
    ({"persona": "Ann Lee, a customer: brisk"}, "customer"),
    ({"persona": "Ann Lee, a doctor: brisk"}, None),  # a noun is no role: never guessed from the wording
    ({"persona": None}, None), (None, None)])
def test_the_role_is_read_as_data_with_the_old_persona_text_as_fallback(scenario: dict | None, role: str | None) -> None:
    assert scenario_role(scenario) == role


@pytest.mark.parametrize(("domain", "noun"), [("medicine", "a doctor"), ("education", "an instructor"),
                                              ("sport", "a coach"), ("weather", "a forecaster")])
def test_staff_tasks_of_a_real_domain_say_who_the_user_is(domain: str, noun: str) -> None:
    graph = ToolGraph(get_engine(domain))
    rng = random.Random(3)
    tasks = [t for t in (base_candidate(graph, rng, 0) for _ in range(40)) if t is not None and t.persona]
    staff = [t for t in tasks if t.persona.role == "staff"]  # type: ignore[union-attr]
    assert staff and any(t.persona.role == "customer" for t in tasks)  # type: ignore[union-attr]
    for task in staff:
        scenario = task.tau2()["user_scenario"]
        assert scenario["role"] == "staff" and f", {noun}: " in scenario["persona"]
        assert f", {noun} of the {domain} service" in scenario["instructions"]["task_instructions"]
        assert "a staff" not in task.instruction_text() and tau2_problems(task.tau2()) == []
