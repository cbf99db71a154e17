"""Balanced outcomes: what "writes something" and "refuses everything" mean, and a shard's draws that keep the
published shares on target (most golds write, few refuse everything, a minority carry a forbidden request) while
refusals, forbidden requests and every write outcome stay present."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from domains.engine import ToolCall
from domains.registry import get_engine, get_spec
from synthesis.generate import ShardConfig, generate_shard
from synthesis.realism_audit import aggregate, outcome_figures, question_intents
from synthesis.realistic_tasks import (ANSWER, BASE_MIX, REFUSAL, WRITE, OutcomeBalance, add_goal, base_candidate, flags,
                                       goal_kind, outcome_kind)
from synthesis.toolgraph import ToolGraph

DOMAINS = ("sport", "finance", "ecommerce", "weather")  # the most refusing domains before, and one with staff


def _sport_names() -> tuple[str, str, str, str]:
    """A write intent with one of its write outcomes and one of its refusals, and a question intent (sport)."""
    spec = get_spec("sport")
    change = next(i for i in spec.intents if {outcome_kind(spec, i, o.name) for o in i.outcomes} == {WRITE, REFUSAL})
    wrote = next(o.name for o in change.outcomes if outcome_kind(spec, change, o.name) == WRITE)
    refused = next(o.name for o in change.outcomes if outcome_kind(spec, change, o.name) == REFUSAL)
    return change.name, wrote, refused, sorted(question_intents(spec))[0]


def test_writes_and_refuses_all_follow_the_gold_and_the_requests() -> None:
    spec = get_spec("sport")
    change, _, refused, question = _sport_names()
    write_tool = next(t.name for t in spec.tools if t.kind == "write")
    read_tool = next(t.name for t in spec.tools if t.kind == "read")
    ident = ToolCall(read_tool, {})
    wrote = (ident, ToolCall(write_tool, {}))
    assert outcome_figures(spec, wrote, (f"intent={change}", "outcome=x")) == {"writes": True, "refuses_all": False}
    # a refused change alone, or with a forbidden request: everything asked was turned down
    assert outcome_figures(spec, (ident,), (f"intent={change}", f"outcome={refused}"))["refuses_all"]
    assert outcome_figures(spec, (ident,), (f"intent={change}", f"outcome={refused}", "forbidden=other_owner",
                                            f"intent={change}"))["refuses_all"]
    # an answered question is not a refusal, and a write beside a refusal is not refusing everything
    assert not outcome_figures(spec, (ident,), (f"intent={change}", f"outcome={refused}", f"intent={question}",
                                                "outcome=answer"))["refuses_all"]
    assert not outcome_figures(spec, wrote, (f"intent={change}", f"outcome={refused}"))["refuses_all"]
    # a task that names no intent (an unconverted domain's) refuses nothing
    assert outcome_figures(spec, (ident,), ()) == {"writes": False, "refuses_all": False}


def test_a_base_draws_the_goal_kind_it_is_asked_for() -> None:
    graph = ToolGraph(get_engine("sport"))
    spec = graph.spec
    for kind in (WRITE, REFUSAL, ANSWER):
        rng = random.Random(kind)
        drawn = [t for t in (base_candidate(graph, rng, 0, [kind], with_forbidden=False) for _ in range(12)) if t]
        assert len(drawn) >= 8, kind
        assert {goal_kind(spec, t.requests[1]) for t in drawn} == {kind}
        assert not any(n.startswith("forbidden=") for t in drawn for n in t.notes)
    rng = random.Random(1)
    forbidding = [t for t in (base_candidate(graph, rng, 0, [WRITE], with_forbidden=True) for _ in range(12)) if t]
    assert sum(any(n.startswith("forbidden=") for n in t.notes) for t in forbidding) >= len(forbidding) // 2


def test_a_goal_added_to_a_task_that_refuses_everything_is_a_write_or_an_answer() -> None:
    graph = ToolGraph(get_engine("sport"))
    balance = OutcomeBalance(graph.spec)
    rng = random.Random(5)
    grown = 0
    for _ in range(30):
        parent = base_candidate(graph, rng, 0, [REFUSAL], with_forbidden=False)
        if parent is None or not flags(graph.spec, parent)["refuses_all"]:
            continue
        assert balance.operators_for(parent) == ["add_goal"]
        child = add_goal(graph, parent, rng, balance.goal_kinds_for(parent))
        if child is None:
            continue
        grown += 1
        assert goal_kind(graph.spec, child.requests[-1]) in (WRITE, ANSWER)
        assert not flags(graph.spec, child)["refuses_all"]
    assert grown >= 5


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_domains_published_outcomes_meet_the_targets(domain: str) -> None:
    # two shards of 24 bases: what `toolscale regenerate --tasks-per-domain 80` runs per domain
    records = [r for i in range(2) for r in generate_shard(ShardConfig(domain, 0, i, base_candidates=24))["records"]]
    accepted = [r for r in records if r["accepted"]]
    row = aggregate(domain, [r["realism"] for r in accepted], [r["request"] for r in accepted])
    assert row["tasks"] >= 50  # derivability skips goals with no lookup path, so fewer than 24 bases x 2 survive
    assert row["write_share"] >= 0.72 and row["refuse_all_share"] <= 0.08
    assert 0.15 <= row["forbidden_share"] <= 0.30 and row["policy_hinged_share"] >= 0.4
    # refusals are still taught: some tasks refuse everything, many pair a refusal with a write or an answer
    assert row["refuse_all_share"] > 0
    spec = get_spec(domain)
    intents = {i.name: i for i in spec.intents}
    refusing = sum(any(outcome_kind(spec, intents[i], o) == REFUSAL for i, o in _outcomes(r["notes"]))
                   for r in accepted)
    assert refusing / len(accepted) >= 0.15
    assert any("forbidden=other_owner" in r["notes"] for r in accepted)
    assert any("forbidden=role" in r["notes"] for r in accepted)
    # most of the domain's write outcomes appear, the rarer ones included
    writes = {(i.name, o.name) for i in spec.intents for o in i.outcomes if outcome_kind(spec, i, o.name) == WRITE}
    seen = Counter(pair for r in accepted for pair in _outcomes(r["notes"]) if pair in writes)
    assert len(seen) >= 0.6 * len(writes)


def _outcomes(notes: list[str]) -> list[tuple[str, str]]:
    return [(notes[k][len("intent="):], notes[k + 1][len("outcome="):]) for k in range(len(notes) - 1)
            if notes[k].startswith("intent=") and notes[k + 1].startswith("outcome=")]


def test_a_base_with_a_forbidden_add_on_counts_the_goal_it_was_drawn_for() -> None:
    # a role's forbidden request is an intent too; counting it as the base's goal made every such base a "refusal"
    # and starved the refusal goals the mix asks for
    graph = ToolGraph(get_engine("sport"))
    rng = random.Random(2)
    drawn = [base_candidate(graph, rng, 0, [WRITE], with_forbidden=True) for _ in range(40)]
    task = next(t for t in drawn if t and "forbidden=role" in t.notes)
    assert goal_kind(graph.spec, task.requests[-1]) == REFUSAL  # the add-on, last
    balance = OutcomeBalance(graph.spec)
    balance.accept(task)
    assert balance.base_kinds == Counter({WRITE: 1})


def test_a_shard_publishes_the_refusal_bases_the_mix_asks_for() -> None:
    spec = get_spec("sport")
    records = [r for i in range(2) for r in generate_shard(ShardConfig("sport", 0, i, base_candidates=24))["records"]]
    bases = [r for r in records if r["accepted"] and r["depth"] == 0]
    intents = {i.name: i for i in spec.intents}
    first = [_outcomes(r["notes"])[0] for r in bases if _outcomes(r["notes"])]
    refused = sum(outcome_kind(spec, intents[i], o) == REFUSAL for i, o in first)
    assert refused >= max(1, 0.5 * BASE_MIX[REFUSAL] * len(bases)), (refused, len(bases))
