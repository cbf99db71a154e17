"""Tasks read back from a published snapshot keep what admission judged them by (user, identification tools,
criteria) and who asked (persona), so the LLM stages can grow them like freshly synthesised ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from synthesis.llm_evolve import menu
from synthesis.persona import Persona, stored_persona
from synthesis.stored import sample_snapshot
from tests.snapshots import published_warehouse
from verifiers.types import CHECKS
from verifiers.verify import check_task


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    return published_warehouse(tmp_path_factory.mktemp("stored"), ["medicine"])


def test_a_stored_task_keeps_its_user_criteria_and_persona(warehouse: str) -> None:
    sample = sample_snapshot(Path(warehouse), 12, seed=1)
    assert sample.tasks and all(t.user and t.identify_tools and t.criteria == CHECKS for t in sample.tasks)
    assert all(t.persona is not None and t.persona.name for t in sample.tasks)
    staff = [t for t in sample.tasks if t.persona and t.persona.role == "staff"]
    assert all(t.persona.noun == "doctor" for t in staff)  # type: ignore[union-attr]
    for task in sample.tasks[:3]:  # the stored gold still passes the gate it was admitted by
        assert check_task(task.verifiable()).admissible(0.9)[0], task.task_id


def test_llm_evolution_offers_a_menu_for_a_stored_realistic_task(warehouse: str) -> None:
    task = sample_snapshot(Path(warehouse), 4, seed=2).tasks[0]
    options = menu(task)
    assert options, "a stored task with its user restored gets menu options"
    for option in options:
        assert option.child.user == task.user and option.child.evolved_from == task.task_id
        assert option.child.reason_for_call().startswith(task.reason_for_call())


def test_persona_text_round_trip_and_what_is_not_ours() -> None:
    doctor = Persona("Ann Lee", "staff", "brisk and precise", "doctor")
    assert stored_persona({"persona": doctor.describe(), "role": "staff"}) == doctor
    customer = Persona("Bo Yu", "customer", "calm")
    assert stored_persona({"persona": customer.describe(), "role": "customer"}) == customer
    assert stored_persona({"persona": "someone else's words", "role": "customer"}) is None
    assert stored_persona({"persona": doctor.describe()}) is None  # no role, and "doctor" is not a role name
    assert stored_persona(None) is None
