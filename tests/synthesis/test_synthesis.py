"""Task synthesis works for any valid spec: every request kind, every evolution operator, dedup."""

from __future__ import annotations

import random
from typing import Any

import pytest

from domains.registry import DOMAIN_NAMES, get_engine
from synthesis import requests as rq
from synthesis.dedup import dedup
from synthesis.evolve import OPERATORS
from synthesis.generate import ShardConfig, generate_shard
from synthesis.task import Task
from synthesis.toolgraph import ToolGraph
from verifiers.verify import check_task, verify
from verifiers.types import Trajectory


def _sample(domain: str, kind: str, tries: int = 40) -> Task:
    graph = ToolGraph(get_engine(domain))
    rng = random.Random(f"test:{domain}:{kind}")
    for _ in range(tries):
        with graph.engine.fresh() as db:
            req = rq.BASE_KINDS[kind](graph, db, rng)
        if req is not None:
            return Task(domain, 0, [req], style=0)
    raise AssertionError(f"no {kind} request in {domain} after {tries} tries")


@pytest.mark.parametrize("domain", DOMAIN_NAMES)
@pytest.mark.parametrize("kind", sorted(rq.BASE_KINDS))
def test_every_request_kind_yields_a_valid_task_in_every_domain(domain: str, kind: str) -> None:
    task = _sample(domain, kind)
    report = check_task(task.verifiable())
    assert report.gold_validity.passed, report.gold_validity.reason
    assert report.no_action.passed
    said = " ".join(task.communicate_info)
    assert verify(task.verifiable(), Trajectory(task.gold_calls, said)).solved
    text = task.instruction_text()
    assert "{" not in text and "}" not in text  # every slot filled
    tau2 = task.tau2()
    assert tau2["evaluation_criteria"]["actions"][0]["name"] == task.gold_calls[0].name
    assert tau2["user_scenario"]["instructions"]["domain"] == domain


def test_lookup_write_names_the_row_by_natural_attributes_not_its_key() -> None:
    task = _sample("railway", "lookup_write")
    lookup, write = task.gold_calls
    key = next(v for k, v in write.arguments.items() if k.endswith("_id"))
    assert str(key) not in task.instructions()["reason_for_call"]
    assert task.instructions()["unknown_info"].startswith("You do not know the")


def test_conditional_gold_follows_the_data() -> None:
    for attempt in range(6):
        task = Task("weather", 0, [], style=0)
        graph = ToolGraph(get_engine("weather"))
        rng = random.Random(f"conditional:{attempt}")
        with graph.engine.fresh() as db:
            req = rq.conditional(graph, db, rng)
        assert req is not None
        task.requests.append(req)
        getter, action = task.gold_calls
        row = get_engine("weather").fresh().call(getter.name, getter.arguments).output
        column, asked = req.notes[0].removeprefix("condition ").split(" == ")
        branch = req.notes[1].removeprefix("branch ")
        assert (branch == "then") == (repr(row[column]) == asked)
        then_part, else_part = req.clause.split(", ", 1)[1].split("; otherwise, ")
        taken = then_part if branch == "then" else else_part
        assert all(rq.show(v) in taken for v in action.arguments.values())
        assert check_task(task.verifiable()).gold_validity.passed


def test_question_answer_is_computed_from_the_rows() -> None:
    task = _sample("finance", "question")
    (call,) = task.gold_calls
    rows = get_engine("finance").fresh().call(call.name, call.arguments).output
    assert len(rows) >= 2
    answer = task.communicate_info[0]
    numbers = {str(len(rows))}
    for key in rows[0]:
        values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        if len(values) == len(rows):
            numbers |= {rq.show(round(sum(values), 2)), rq.show(max(values)), rq.show(min(values))}
    assert answer in numbers


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_each_evolution_operator_makes_a_verified_harder_child(operator: str) -> None:
    for domain in ("weather", "medicine", "railway", "finance"):
        graph = ToolGraph(get_engine(domain))
        rng = random.Random(f"evolve:{operator}:{domain}")
        for _ in range(30):
            parent = _sample(domain, rng.choice(["single_write", "lookup_write", "chain"]))
            parent_report = check_task(parent.verifiable())
            if not parent_report.admissible(0.9)[0]:
                continue
            child = OPERATORS[operator](graph, parent, rng)
            if child is None:
                continue
            assert child.evolved_from == parent.task_id and child.operator == operator and child.depth == 1
            assert child.task_id != parent.task_id
            report = check_task(child.verifiable())
            assert report.gold_validity.passed, report.gold_validity.reason
            harder = (child.features()["calls"] > parent.features()["calls"] or len(child.requests) > len(parent.requests)
                      or child.distractors or child.requests[-1].kind == "constraint")
            assert harder
            return
    pytest.fail(f"{operator} produced no child")


def test_shards_are_deterministic_and_keep_every_candidate() -> None:
    a = generate_shard(ShardConfig("sport", 0, 3, base_candidates=12))
    b = generate_shard(ShardConfig("sport", 0, 3, base_candidates=12))
    assert [r["content_hash"] for r in a["records"]] == [r["content_hash"] for r in b["records"]]
    c = generate_shard(ShardConfig("sport", 0, 4, base_candidates=12))
    assert {r["content_hash"] for r in a["records"]}.isdisjoint({r["content_hash"] for r in c["records"]})
    assert all(r["reason"] == "ok" or not r["accepted"] for r in a["records"])
    assert any(r["evolved_from"] for r in a["records"])


def _rec(task_id: str, gold: str, instruction: str, parent: str | None = None) -> dict[str, Any]:
    return {"task_id": task_id, "domain": "weather", "canonical_gold": gold, "instruction": instruction,
            "accepted": True, "reason": "ok", "reason_detail": "ok", "evolved_from": parent}


def test_dedup_drops_exact_and_near_duplicates_but_keeps_different_work_and_lineage() -> None:
    records = [
        _rec("a", "G1", "Please cancel alert AL0002 for me."),
        _rec("b", "G1", "Please cancel alert AL0002 for me."),          # exact duplicate of a
        _rec("c", "G1", "Could you please cancel alert AL0002 for me?"),  # near duplicate of a
        _rec("d", "G2", "Please cancel alert AL0003 for me."),          # similar words, different work
        _rec("e", "G1", "Please cancel alert AL0002 for me. Do not touch alert AL0005.", parent="a"),  # a's child
        _rec("f", "G1", "My region is flooding and the station log looks wrong; sort it out."),  # same work, new words
    ]
    counts = dedup(records, threshold=0.9)
    status = {r["task_id"]: (r["accepted"], r["reason"]) for r in records}
    assert status["b"] == (False, "exact_duplicate") and status["c"] == (False, "near_duplicate")
    assert status["a"][0] and status["d"][0] and status["e"][0] and status["f"][0]
    assert counts["exact_duplicate"] == 1 and counts["near_duplicate"] == 1
    assert counts["compared"] == 4  # a, c, e, f share gold G1 (b was already dropped); d is alone
    assert "to a" in next(r for r in records if r["task_id"] == "c")["reason_detail"]
