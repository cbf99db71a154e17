"""The written rules tell the truth: a call breaking a rule the policy says the tools check fails, and a call
breaking a rule the policy says the agent must apply itself goes through (so an agent that ignores it is wrong)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from domains.check import (breakable_rules, choice_shortfalls, delegated_choices, invariant_breaking_writes,
                           rule_example_result, rule_shortfalls)
from domains.engine import DomainEngine
from domains.policy import AGENT_RULES_HEADING, TOOL_RULES_HEADING, rule_line
from domains.registry import DOMAIN_NAMES, get_engine, get_spec
from domains.spec import DomainSpec
from synthesis.realistic import render
from synthesis.realistic_tasks import realism_for
from synthesis.toolgraph import ToolGraph

DOMAINS = sorted(set(DOMAIN_NAMES) | {"airline", "retail"})


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_rule_is_broken_by_its_example_as_its_policy_section_says(domain: str) -> None:
    """Every rule of the domain is covered: its example call (after its set-up calls) fails when the policy lists
    the rule among the tools' checks, and goes through, writing, when it lists it among the agent's own rules. A
    rule without an example says why, and a rule a precondition checks or a refusal cites may not claim that no
    call breaks it. A tell rule ("always tell the user ...") is about what the agent says: no call breaks it."""
    spec, engine = get_spec(domain), get_engine(domain, 0)
    breakable = breakable_rules(spec)
    for rule in spec.rules:
        if rule.tell and rule.example is None:
            assert not rule.no_example and rule.id not in breakable, rule.id
            continue
        if rule.example is None:
            assert rule.no_example, f"{domain}: rule {rule.id} has no example call and no no_example reason"
            assert not (rule.id in breakable and "no call breaks it" in rule.no_example), rule.id
            continue
        result = rule_example_result(engine, rule)
        assert not isinstance(result, str), f"{domain}: {rule.id}: {result}"
        if rule.checked_by == "tool":
            assert not result.ok, f"{domain}: {rule.id} is listed as checked by the tools, yet its breach succeeded"
            assert "not found" not in str(result.error).lower(), f"{domain}: {rule.id}: {result.error}"
        else:
            assert result.ok, f"{domain}: {rule.id} is listed as the agent's to apply, yet the tool refused: " \
                              f"{result.error}"
            assert result.writes or spec.tool(rule.example.tool).kind == "read"
    examples = [r for r in spec.rules if r.example is not None]
    assert {"tool", "agent"} <= {r.checked_by for r in examples}, f"{domain}: both kinds of rule need a breach shown"
    assert rule_shortfalls(spec, engine) == []


def test_a_rule_with_neither_example_nor_reason_is_a_shortfall() -> None:
    """The check itself catches a rule that lost its example, and one that hides a breakable rule's example."""
    spec, engine = get_spec("travel"), get_engine("travel", 0)
    voucher = spec.rule("pay_towards_trip_voucher_limit")
    bare = dataclasses.replace(spec, rules=tuple(dataclasses.replace(r, example=None) if r is voucher else r
                                                 for r in spec.rules))
    assert any("pay_towards_trip_voucher_limit: no example" in p for p in rule_shortfalls(bare, engine))
    hidden = dataclasses.replace(spec, rules=tuple(
        dataclasses.replace(r, example=None, no_example="an answer; no call breaks it") if r is voucher else r
        for r in spec.rules))
    assert any("pay_towards_trip_voucher_limit: a precondition" in p for p in rule_shortfalls(hidden, engine))


@pytest.mark.parametrize("domain", DOMAINS)
def test_policy_lists_each_rule_once_under_the_section_that_is_true(domain: str) -> None:
    spec = get_spec(domain)
    tool_part, agent_part = spec.policy.split(TOOL_RULES_HEADING, 1)[1].split(AGENT_RULES_HEADING, 1)
    for rule in spec.all_rules:
        line = f"- {rule_line(rule)}"
        assert spec.policy.count(line) == 1
        assert line in (tool_part if rule.checked_by == "tool" else agent_part), rule.id
    for tool in spec.tools:  # a policy-only precondition is the agent's rule, a checked one the tools'
        for p in tool.preconditions:
            if p.rule:
                assert spec.rule(p.rule).checked_by == ("agent" if p.enforced_by == "policy" else "tool")
    # no sentence claims every rule is checked before the operation runs
    assert "checked before the operation runs" not in spec.policy


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_outcome_and_policy_only_precondition_cites_a_written_rule(domain: str) -> None:
    spec = get_spec(domain)
    for intent in spec.intents:
        for outcome in intent.outcomes:
            assert spec.rule(outcome.rule) is not None, (intent.name, outcome.name)
    for tool in spec.tools:
        for p in tool.preconditions:
            if p.enforced_by == "policy":
                assert spec.rule(p.rule) is not None and spec.rule(p.rule).checked_by == "agent"


def test_a_refund_23_hours_before_departure_goes_through_and_the_policy_says_so() -> None:
    """The issue's example: railway's refund rule is the agent's to apply, and the policy says the tools let it by."""
    spec, engine = get_spec("railway"), get_engine("railway", 0)
    rule = spec.rule("refund_trip_too_late")
    assert rule is not None and rule.checked_by == "agent" and "48 hours" in rule.text
    assert f"- {rule_line(rule)}" in spec.policy.split(AGENT_RULES_HEADING, 1)[1]
    with engine.fresh() as db:
        (ticket,) = db.query("SELECT ticket_id FROM tickets t JOIN services s USING (service_id) WHERE t.status = "
                             "'booked' AND s.status != 'cancelled' AND t.departure_at > :now AND t.departure_at <= "
                             "strftime('%Y-%m-%dT%H:%M:%S', :now, '+47 hours') LIMIT 1", {"now": spec.now})[0]
        assert db.call("refund_ticket", {"ticket_id": ticket}).ok


@pytest.mark.parametrize("domain", DOMAINS)
def test_no_write_the_tools_let_through_breaks_a_declared_invariant(domain: str) -> None:
    """Each write tool's passing examples and each rule's breach, run on seed 0, keep every invariant, unless a
    rule the agent must apply forbids the call (then the state check is what catches the agent's mistake)."""
    assert invariant_breaking_writes(get_spec(domain), get_engine(domain, 0)) == []


@pytest.mark.parametrize(("domain", "tool", "rule_id", "invariant"), [
    ("railway", "report_delay", "report_delay_on_the_day", "delay_has_happened"),
    ("education", "assign_instructor", "section_taught_in_its_department", "section_taught_in_its_department"),
    ("education", "create_section", "section_taught_in_its_department", "section_taught_in_its_department"),
])
def test_the_engine_refuses_a_write_that_would_break_an_invariant(domain: str, tool: str, rule_id: str,
                                                                  invariant: str) -> None:
    """A delay on a service that does not run today, and a section taught outside the course's department, are
    refused by the tools, the policy says so among the tools' checks; without that precondition the scan finds the
    write that breaks the invariant."""
    spec, engine = get_spec(domain), get_engine(domain, 0)
    rule = spec.rule(rule_id)
    assert rule is not None and rule.checked_by == "tool"
    assert f"- {rule_line(rule)}" in spec.policy.split(TOOL_RULES_HEADING, 1)[1].split(AGENT_RULES_HEADING, 1)[0]
    assert any(p.rule == rule_id for p in spec.tool(tool).preconditions)
    without = tuple(p for p in spec.tool(tool).preconditions if p.rule != rule_id)
    loose_spec = dataclasses.replace(spec, tools=tuple(
        dataclasses.replace(t, preconditions=without) if t.name == tool else t for t in spec.tools))
    loose = DomainEngine(loose_spec, 0)
    breaches = []
    for ex in (e for e in spec.tool(tool).examples if e["expect"] == "error"):
        with engine.fresh() as db, loose.fresh() as db_loose:
            if not db.call(tool, ex["arguments"]).ok and db_loose.call(tool, ex["arguments"]).ok:
                breaches.append({"arguments": ex["arguments"], "expect": "ok"})
    assert breaches, f"no failing example of {tool} is refused by {rule_id} alone"
    # without the precondition, the breach is a passing call: the scan sees it leave the invariant broken
    loose_spec = dataclasses.replace(loose_spec, tools=tuple(
        dataclasses.replace(t, examples=t.examples + tuple(breaches)) if t.name == tool else t
        for t in loose_spec.tools))
    found = invariant_breaking_writes(loose_spec, DomainEngine(loose_spec, 0))
    assert any(f"breaks invariant {invariant}" in f for f in found), found


ALTERNATIVES = [("travel", "pay_towards_trip_voucher_limit", "voucher_limit", False),
                ("travel", "book_seats_group", "group", False),
                ("travel", "pay_towards_trip_pay", "too_much", True),
                ("education", "pay_tuition_card_limit", "card_limit", True),
                ("education", "more_seats_lab_limit", "lab_limit", False),
                ("medicine", "pay_towards_balance_pay", "over", True)]


@pytest.mark.parametrize(("domain", "rule_id", "outcome_name", "offer"), ALTERNATIVES)
def test_a_limit_says_whether_the_agent_offers_the_allowed_alternative_and_the_gold_follows(
        domain: str, rule_id: str, outcome_name: str, offer: bool) -> None:
    """The policy states, beside the limit, whether the agent offers the smaller change. The gold of a refusal by
    it says the limit and writes nothing; where the agent offers, the task's user declines the offer (a known
    fact the scripted user gives when asked), so refusing is still the whole of the right answer."""
    spec = get_spec(domain)
    rule = spec.rule(rule_id)
    assert rule is not None and rule.alternative is not None and rule.alternative.offer is offer
    line = f"- {rule_line(rule)}"
    assert line in spec.policy and rule.alternative.what in line
    assert ("and offer" in line) is offer and ("do not offer" in line) is (not offer)
    graph = ToolGraph(get_engine(domain, 0))
    realism = realism_for(graph)
    (intent,) = [i for i in spec.intents if i.outcome(outcome_name) and i.outcome(outcome_name).rule == rule_id]
    made = None
    for person, row in realism.pairs(intent):
        if row.get("outcome") == outcome_name:
            with graph.engine.fresh() as db:
                made = realism.intent_request(db, intent, person, row, random.Random(0))
            if made is not None:
                break
    assert made is not None, f"{domain}: no {outcome_name} task could be made"
    assert not [c for c in made.calls if spec.tool(c.name).kind == "write"]
    limit = render(rule.alternative.say, {**person, **row})
    assert limit and limit in made.communicate
    assert (rule.alternative.declined() in made.known) is offer


def test_an_alternative_whose_refusal_does_not_say_the_limit_is_refused() -> None:
    from domains.realism_spec import Alternative, _rules_problems  # the loader's own check
    spec = get_spec("travel")
    wrong = dataclasses.replace(spec, rules=tuple(
        dataclasses.replace(r, alternative=Alternative("a smaller voucher payment", False, "150.00 EUR"))
        if r.id == "pay_towards_trip_voucher_limit" else r for r in spec.rules))
    problems = _rules_problems(wrong, {t.name: t for t in wrong.tools})
    assert any("alternative.say" in p and "150.00 EUR" in p for p in problems), problems


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_choice_a_user_may_delegate_has_its_order_written(domain: str) -> None:
    """Issue 39: "the best card I'm allowed" is answerable from the policy: a rule its outcomes cite orders it."""
    assert choice_shortfalls(get_spec(domain)) == []


def test_a_delegated_choice_with_no_written_order_is_a_shortfall() -> None:
    spec = get_spec("railway")
    assert delegated_choices(spec) == ["buy_railcard"]  # "whichever one gives me the best discount I'm allowed"
    unordered = tuple(dataclasses.replace(r, text="The family railcard gives 25% off.")
                      if r.id in ("buy_railcard_family", "buy_railcard_disabled") else r for r in spec.rules)
    assert choice_shortfalls(dataclasses.replace(spec, rules=unordered)) == [
        "railway: intent buy_railcard lets the user delegate a choice, but no rule its outcomes cite writes the order "
        "(best, cheapest, earliest, first ... then)"]
