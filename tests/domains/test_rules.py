"""The written rules tell the truth: a call breaking a rule the policy says the tools check fails, and a call
breaking a rule the policy says the agent must apply itself goes through (so an agent that ignores it is wrong)."""

from __future__ import annotations

import dataclasses

import pytest

from domains.check import breakable_rules, rule_example_result, rule_shortfalls
from domains.policy import AGENT_RULES_HEADING, TOOL_RULES_HEADING, rule_line
from domains.registry import DOMAIN_NAMES, get_engine, get_spec

DOMAINS = sorted(set(DOMAIN_NAMES) | {"airline", "retail"})


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_rule_is_broken_by_its_example_as_its_policy_section_says(domain: str) -> None:
    """Every rule of the domain is covered: its example call (after its set-up calls) fails when the policy lists
    the rule among the tools' checks, and goes through, writing, when it lists it among the agent's own rules. A
    rule without an example says why, and a rule a precondition checks or a refusal cites may not claim that no
    call breaks it."""
    spec, engine = get_spec(domain), get_engine(domain, 0)
    breakable = breakable_rules(spec)
    for rule in spec.rules:
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
