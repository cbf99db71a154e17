"""The LLM evolution stage: the answer parser refuses what is not a menu choice, every menu child is a real harder
task, and end to end against the real llama.cpp server with the acceptance rate printed and stored."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from inference.client import LLMClient
from synthesis.llm_evolve import MENU_OPERATORS, REALISTIC_OPERATORS, evolve_tasks, menu, parse_choice
from synthesis.llm_evolve import Rejection as EvolveRejection
from synthesis.task import Task
from tests.inference.conftest import Local
from tests.inference.test_paraphrase import _weather_tasks
from verifiers.verify import check_task

REASONS = {"llm_error", "budget_exceeded", "no_options", "invalid_json", "bad_shape", "unknown_operator",
           "operator_not_offered", "bad_value", "not_verified"}


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return _weather_tasks(2, seed=11)


def test_menu_children_are_longer_verified_tasks_that_keep_the_parents_words(tasks: list[Task]) -> None:
    options = menu(tasks[0])
    assert options and {o.operator for o in options} <= {*MENU_OPERATORS, *REALISTIC_OPERATORS}
    for o in options:
        child = o.child
        assert child.reason_for_call().startswith(tasks[0].reason_for_call())
        assert child.evolved_from == tasks[0].task_id and child.operator == f"llm:{o.operator}"
        assert child.gold_calls[:len(tasks[0].gold_calls)] == tasks[0].gold_calls
        # a forbidden request adds no gold call (the gold leaves it undone), so count requests
        assert len(child.requests) > len(tasks[0].requests) or child.distractors
        assert check_task(child.verifiable()).admissible(0.9)[0]


def test_answers_that_are_not_a_menu_choice_are_refused_by_reason(tasks: list[Task]) -> None:
    options = menu(tasks[0])
    first = options[0]
    offered = {o.operator for o in options}
    not_offered = next(n for n in ("add_constraint", *MENU_OPERATORS) if n not in offered)
    cases = {
        "invalid_json": "I choose the second one",
        "bad_shape": '{"operator": "add_entity", "option": 1, "code": "import os"}',
        "unknown_operator": '{"operator": "__import__(\'os\').system(\'true\')", "option": 1}',
        "operator_not_offered": json.dumps({"operator": not_offered, "option": 1}),
        "bad_value": json.dumps({"operator": first.operator, "option": 99}),
    }
    for reason, text in cases.items():
        got = parse_choice(text, options)
        assert isinstance(got, EvolveRejection) and got.reason == reason, (reason, got)
    assert parse_choice(json.dumps({"operator": first.operator, "option": True}), options).reason == "bad_value"
    chosen = parse_choice(f'Sure! ```json\n{{"operator": "{first.operator}", "option": 1}}\n```', options)
    assert chosen == first


@pytest.mark.llm
def test_evolve_end_to_end_on_the_local_model(local: Local, tasks: list[Task], tmp_path: Path) -> None:
    warehouse = tmp_path / "wh.duckdb"
    with LLMClient(local.endpoint, cache_dir=tmp_path / "cache", stage="unused-default") as llm:
        result = evolve_tasks(tasks, llm)
        llm.flush_records(warehouse, [result.outcome(llm)])
    summary = result.summary()
    print("evolve acceptance:", json.dumps(summary))
    assert result.attempted == len(tasks)
    assert all(r.reason in REASONS and r.detail for r in result.rejections)
    parents = {t.task_id: t for t in tasks}
    for child in result.accepted:  # an accepted child is harder than its parent and verifies
        parent = parents[child.evolved_from]
        assert child.depth == parent.depth + 1 and child.operator.startswith("llm:")
        assert check_task(child.verifiable()).admissible(0.9)[0]
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        runs = con.execute("SELECT stage, attempted, accepted FROM llm_stage_runs").fetchall()
        calls = con.execute("SELECT COUNT(*) FROM llm_calls WHERE stage = 'evolve'").fetchone()[0]
    finally:
        con.close()
    assert runs == [("evolve", len(tasks), len(result.accepted))]
    assert calls == sum(r.reason != "no_options" for r in result.rejections) + len(result.accepted)
