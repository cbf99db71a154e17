"""Realistic tasks (every converted domain): one identified user with a persona, goals in their words, the
policy deciding, forbidden requests that make doing everything fail, and coherent evolution."""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from domains.engine import ToolCall
from domains.registry import DOMAIN_NAMES, get_engine, get_spec, spec_path
from synthesis.generate import ShardConfig, generate_shard
from synthesis.realism_audit import aggregate, identify_tools, staff_only_tools
from synthesis.realistic_tasks import add_goal, base_candidate, order_free, realism_for
from synthesis.task import Task
from synthesis.toolgraph import ToolGraph
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import verify
from warehouse.exports import tau2_problems

CONVERTED = tuple(d for d in DOMAIN_NAMES if get_spec(d).intents)  # specs with users and intents
@cache
def _accepted(domain: str) -> tuple[dict[str, Any], ...]:
    recs: list[dict[str, Any]] = []
    for shard in range(3):  # three shards: enough bases that each policy-hinged intent shows its outcomes
        recs += generate_shard(ShardConfig(domain, 0, shard, base_candidates=24))["records"]
    return tuple(r for r in recs if r["accepted"])


@pytest.mark.parametrize("domain", CONVERTED)
def test_audit_figures_of_a_converted_domain_meet_the_gate(domain: str) -> None:
    accepted = _accepted(domain)
    row = aggregate(domain, [r["realism"] for r in accepted], [r["request"] for r in accepted])
    assert row["converted"] and row["tasks"] >= 60
    assert row["identified_share"] == 1.0
    assert row["policy_hinged_share"] >= 0.2 and row["forbidden_share"] >= 0.1
    for zero in ("staff_only_calls", "requests_naming_internal_ids", "invariant_violations", "noop_writes",
                 "empty_passes", "parrot_passes", "short_communicate", "communicate_in_request"):
        assert row[zero] == 0, zero
    assert row["distinct_personas"] >= 15 and row["distinct_bigrams"] >= 300


@pytest.mark.parametrize("domain", CONVERTED)
def test_every_task_has_one_identified_user_who_knows_no_internal_ids(domain: str) -> None:
    spec = get_engine(domain).spec
    for rec in _accepted(domain):
        scenario = rec["tau2"]["user_scenario"]
        assert scenario["persona"] and rec["persona"]
        assert rec["gold_calls"][0]["name"] in identify_tools(spec)
        assert scenario["role"] == rec["role"] and rec["role"] in {r.name for r in spec.users.roles}  # type: ignore[union-attr]
        if rec["role"] == "customer":  # staff tasks use staff tools by design
            assert not {c["name"] for c in rec["gold_calls"]} & staff_only_tools(spec)
        assert "I need you to" not in scenario["instructions"]["reason_for_call"]
        keys = {spec.table(r.table).primary_key for r in spec.users.roles}  # type: ignore[union-attr]
        assert not any(k in str(scenario) for k in keys), keys
        assert tau2_problems(rec["tau2"]) == []


@pytest.mark.parametrize(("domain", "staff_tool"), [("weather", "find_forecaster_by_email"),
                                                   ("medicine", "find_doctor_by_name_and_licence")])
def test_staff_tasks_identify_the_clinician_or_forecaster_and_do_staff_work(domain: str, staff_tool: str) -> None:
    spec = get_engine(domain).spec
    staff = [r for r in _accepted(domain) if r["role"] == "staff"]
    assert staff, "no staff task was published"
    assert all(r["gold_calls"][0]["name"] == staff_tool for r in staff)
    assert any({c["name"] for c in r["gold_calls"]} & staff_only_tools(spec) for r in staff)
    customers = [r for r in _accepted(domain) if r["role"] == "customer"]
    assert customers and all(r["gold_calls"][0]["name"] != staff_tool for r in customers)


@pytest.mark.parametrize("domain", CONVERTED)
def test_the_same_request_leads_to_a_write_or_a_refusal_by_the_data(domain: str) -> None:
    outcomes: dict[str, set[str]] = {}
    for rec in _accepted(domain):
        notes = rec["notes"]
        for i, n in enumerate(notes):
            if n.startswith("intent=") and i + 1 < len(notes) and notes[i + 1].startswith("outcome="):
                outcomes.setdefault(n[7:], set()).add(notes[i + 1][8:])
    decided = [name for name, seen in outcomes.items() if len(seen) >= 2]
    assert len(decided) >= 3, outcomes


@pytest.mark.parametrize("domain", ["travel", "railway", "medicine", "education"])
def test_every_record_id_in_a_gold_call_was_returned_by_an_earlier_call(domain: str) -> None:
    """A person names trips, stations, courses and patients, not their ids: each id a gold call uses is in the
    user's words or was returned by an earlier gold call (a trip from the traveller's trip list, a patient from
    the doctor's own schedule), so an agent who knows only what it is told can find it."""
    engine = get_engine(domain)
    keys = set(engine.spec.primary_keys)
    for rec in _accepted(domain):
        said = json.dumps(rec["tau2"]["user_scenario"]["instructions"])
        returned = ""
        with engine.fresh() as db:
            for call in rec["gold_calls"]:
                for name, value in call["arguments"].items():
                    if name in keys:
                        assert str(value) in said or str(value) in returned, (call, rec["tau2"]["id"])
                returned += json.dumps(db.call(call["name"], call["arguments"]).output, default=str)


def _verifiable(rec: dict[str, Any], calls: tuple[ToolCall, ...]) -> VerifiableTask:
    engine = get_engine(rec["domain"])
    spec = engine.spec
    first = rec["gold_calls"][0]
    with engine.fresh() as db:
        user = next(iter(db.call(first["name"], first["arguments"]).reads))
    tools = tuple(i.tool for r in spec.users.roles for i in r.identify)  # type: ignore[union-attr]
    return VerifiableTask(rec["domain"], 0, calls, tuple(rec["communicate_info"]), user, tools)


def test_a_forbidden_request_fails_both_the_lazy_and_the_obliging_agent() -> None:
    engine = get_engine("railway")
    graph = ToolGraph(engine)
    rng = random.Random(7)
    for _ in range(200):
        task = base_candidate(graph, rng, 0)
        if task and any(n == "forbidden=other_owner" for n in task.notes) and task.communicate_info:
            break
    else:
        pytest.fail("no task with a forbidden request for another passenger was sampled")
    vt = task.verifiable()
    said = " ".join(task.communicate_info)
    assert verify(vt, Trajectory(task.gold_calls, said), engine).solved
    assert not verify(vt, Trajectory((), said), engine).solved
    # the obliging agent also refunds the other passenger's ticket named in the request
    other = next(r for r in task.requests if r.kind == "forbidden")
    ticket = next(w for w in other.clause.split() if w.startswith("TK")).strip(",.;?!")
    extra = ToolCall("refund_ticket", {"ticket_id": ticket})
    verdict = verify(vt, Trajectory((*task.gold_calls, extra), said), engine)
    assert not verdict.solved and not verdict.execution.passed


def test_skipping_identification_fails_even_with_the_right_writes() -> None:
    rec = next(r for r in _accepted("railway") if r["write_calls"] and len(r["gold_calls"]) >= 3)
    calls = tuple(ToolCall(c["name"], c["arguments"]) for c in rec["gold_calls"])
    vt = _verifiable(rec, calls)
    said = " ".join(rec["communicate_info"])
    assert verify(vt, Trajectory(calls, said)).solved
    verdict = verify(vt, Trajectory(calls[1:], said))
    assert not verdict.solved and not verdict.identification.passed


def test_a_second_goal_never_undoes_what_the_task_created() -> None:
    graph = ToolGraph(get_engine("railway"))
    rng = random.Random(3)
    grown = 0
    for _ in range(120):
        parent = base_candidate(graph, rng, 0)
        if parent is None:
            continue
        child = add_goal(graph, parent, rng)
        if child is None:
            continue
        grown += 1
        assert child.user == parent.user and child.persona == parent.persona
        created = {k for r in parent.requests for _, k in r.entities}
        later = child.requests[-1]
        assert not created & {v for c in later.calls for v in c.arguments.values()}
    assert grown >= 20


def _two_goals(first: tuple[str, str], second: tuple[str, str],
               who: Any) -> tuple[ToolGraph, Any, Task, Any, dict[str, Any]] | None:
    """A weather subscriber (the first ``who`` accepts) asking for two goals, (intent, outcome) each: the parent task
    with the first, and the second goal decided on the parent's end state."""
    graph = ToolGraph(get_engine("weather"))
    realism, rng = realism_for(graph), random.Random(0)
    intents = {i.name: i for i in realism.spec.intents}
    for person in realism.people("customer"):
        if not who(person):
            continue
        with graph.engine.fresh() as db:
            ident = realism.identification("customer", person, rng)
            assert ident is not None and all(db.call(c.name, c.arguments).ok for c in ident.calls)
            rows = [r for r in realism.candidates(db, intents[first[0]], person) if r["outcome"] == first[1]]
            goal_a = rows and realism.intent_request(db, intents[first[0]], person, rows[0], rng)
            if not goal_a:
                continue
            parent = Task("weather", 0, [ident, goal_a], 0)
            rows = [r for r in realism.candidates(db, intents[second[0]], person) if r["outcome"] == second[1]]
            goal_b = rows and realism.intent_request(db, intents[second[0]], person, rows[0], rng)
            if goal_b:
                return graph, realism, parent, goal_b, person
    return None


def test_two_goals_whose_order_changes_an_outcome_are_not_composed() -> None:
    """A free-plan subscriber at the plan's limit asks for one more alert, then gives another up: done the other way
    round the alert is allowed, so the task would have two right answers (issue 39, read aloud from a default run).
    The same two goals from a subscriber the limit does not bind are composed."""
    at_limit = _two_goals(("follow_hazard", "limit"), ("stop_following", "stop"), lambda p: p["plan"] == "free")
    assert at_limit is not None
    graph, realism, parent, goal, person = at_limit
    assert "outcome=limit" in parent.requests[1].notes
    assert not order_free(graph, realism, parent, person, goal)
    unbound = _two_goals(("follow_hazard", "subscribe"), ("stop_following", "stop"), lambda p: p["plan"] != "free")
    assert unbound is not None
    graph, realism, parent, goal, person = unbound
    assert order_free(graph, realism, parent, person, goal)


def test_unconverted_domains_keep_the_old_sampler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every shipped domain is converted: a user's own spec without the realism sections stands in for one
    raw = yaml.safe_load(spec_path("finance").read_text(encoding="utf-8"))
    for section in ("users", "intents", "invariants"):
        raw.pop(section, None)
    raw["domain"] = "plainfinance"
    for tool in raw["tools"]:
        tool["preconditions"] = [p for p in tool.get("preconditions", []) if p.get("enforced_by") != "policy"]
    (tmp_path / "plainfinance").mkdir()
    (tmp_path / "plainfinance" / "plainfinance.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    monkeypatch.setenv("TOOLSCALE_DOMAINS_DIR", str(tmp_path))
    recs = generate_shard(ShardConfig("plainfinance", 0, 0, base_candidates=8, evolution_rounds=1))["records"]
    assert recs and all(r["tau2"]["user_scenario"]["persona"] is None for r in recs)
    assert any(r["accepted"] and r["realism"] and not r["realism"]["converted"] for r in recs)
