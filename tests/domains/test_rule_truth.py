"""A policy that tells the truth (issue 39): the "Rules the tools check" list is exactly the rules a checked
precondition cites, every listed sentence is broken by calls generated from the domain's data and the tool refuses
each, rules that decide one request differently name their precedence, and the audit's known cases stay fixed."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

from domains.policy import AGENT_RULES_HEADING, TERMS_HEADING, TOOL_RULES_HEADING, rule_line
from domains.registry import available_domains, get_engine, get_spec, spec_path
from domains.spec import SpecError, parse_spec
from synthesis.rule_cases import rule_cases, rule_conflicts

DOMAINS = sorted(d for d in available_domains() if get_spec(d).users is not None)


def _sections(domain: str) -> tuple[str, str, str]:
    policy = get_spec(domain).policy
    head, agent = policy.split(AGENT_RULES_HEADING, 1)
    tools, _, terms = head.split(TOOL_RULES_HEADING, 1)[-1].partition(TERMS_HEADING)
    return tools, terms, agent


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_sentence_listed_as_checked_is_refused_on_calls_generated_from_the_data(domain: str) -> None:
    """Each rule under "Rules the tools check" is the rule of a precondition the tools enforce; calls generated from
    the intents' candidate rows (or recombined from examples) that break it are refused, every one; only a rule that
    no reachable state breaks, and says so, goes without a case."""
    spec, engine = get_spec(domain), get_engine(domain, 0)
    tools, _, _ = _sections(domain)
    listed = {r.id for r in spec.all_rules if f"- {rule_line(r)}" in tools}
    assert listed == spec.checked_rules
    for rule_id, cases in rule_cases(spec, engine).items():
        if not cases:
            assert spec.rule(rule_id).no_example, f"{domain}: no generated call breaks {rule_id}"
            continue
        accepted = [c for c in cases if not c.refused]
        assert not accepted, f"{domain}: {rule_id} is listed as checked, yet {accepted[0].call} went through"
        assert any(c.source.startswith("intent") for c in cases) or len(cases) == 1


@pytest.mark.parametrize("domain", DOMAINS)
def test_rules_that_decide_one_request_differently_name_their_precedence(domain: str) -> None:
    assert rule_conflicts(get_spec(domain), get_engine(domain, 0)) == []


def test_a_pair_without_precedence_or_against_the_gold_is_found() -> None:
    """travel: a 250.00 voucher payment breaks the voucher limit and the trip balance; without ``before:`` the check
    finds the pair, and with the precedence turned round it finds that the intent decides by the balance."""
    spec, engine = get_spec("travel"), get_engine("travel", 0)
    pay, voucher = spec.rule("pay_towards_trip_pay"), spec.rule("pay_towards_trip_voucher_limit")
    assert "Where [pay_towards_trip_voucher_limit] also applies, this rule decides." in rule_line(pay)
    bare = dataclasses.replace(spec, rules=tuple(dataclasses.replace(r, before=()) if r is pay else r
                                                 for r in spec.rules))
    found = rule_conflicts(bare, engine)
    assert [(c.first, c.second, c.problem) for c in found] == [
        ("pay_towards_trip_pay", "pay_towards_trip_voucher_limit", "no rule names its precedence")]
    assert found[0].call.name == "pay_trip" and found[0].call.arguments["method"] == "voucher"
    turned = dataclasses.replace(bare, rules=tuple(dataclasses.replace(r, before=(pay.id,)) if r is voucher else r
                                                   for r in bare.rules))
    assert "decides by pay_towards_trip_pay" in rule_conflicts(turned, engine)[0].problem


def test_a_rule_said_to_be_checked_that_no_check_cites_is_refused_by_the_loader() -> None:
    raw = yaml.safe_load(spec_path("railway").read_text())
    broken = copy.deepcopy(raw)
    for tool in broken["tools"]:
        for pre in tool.get("preconditions", []):
            if pre.get("rule") == "buy_railcard_disabled":
                del pre["rule"]
    with pytest.raises(SpecError, match="rule 'buy_railcard_disabled' says checked_by: tool, yet no precondition"):
        parse_spec(broken, label="railway.yaml")


def test_the_audits_contradictions_are_gone() -> None:
    """Each sentence the solver audit found the tools contradicting now says what the tools do, and the rule they
    do not check is the agent's."""
    def section(domain: str, rule_id: str) -> str:
        tools, terms, agent = _sections(domain)
        line = f"- {rule_line(get_spec(domain).rule(rule_id))}"
        return "tool" if line in tools else "term" if line in terms else "agent" if line in agent else "missing"

    finance = get_spec("finance")
    assert "overdraft" not in finance.rule("move_money_transfer").text
    assert section("finance", "move_money_no_overdraft") == "agent"
    with get_engine("finance", 0).fresh() as db:  # the call: the tool lets it through, as the policy says
        assert db.call("transfer_between_accounts", {"account_id": "AC00009", "to_account_id": "AC00093",
                                                     "amount": 4100}).ok
    assert "14 days" not in get_spec("ecommerce").rule("return_an_item_return").text
    assert section("ecommerce", "return_an_item_changed_mind_late") == "agent"
    assert "30 days" not in get_spec("medicine").rule("order_test_order").text
    assert section("medicine", "order_test_recent") == "agent"
    assert "home region" not in get_spec("weather").rule("follow_hazard_subscribe").text
    assert section("weather", "follow_hazard_not_home") == "agent"
    education = get_spec("education")
    assert "instructor" not in education.rule("record_final_grade_record").text
    assert "teach" not in education.rule("more_seats_raise").text
    assert section("education", "own_sections_only") == "agent"
    assert "14 days" in education.rule("refund_a_payment_transfer_too_old").text
    assert "bank-transfer" not in education.rule("refund_a_payment_refund").text.lower()
    railway = get_spec("railway")
    assert section("railway", "buy_railcard_disabled") == "tool"
    with get_engine("railway", 0).fresh() as db:
        refused = db.call("purchase_railcard", {"passenger_id": "PA0007", "card_type": "disabled"})
        assert not refused.ok and "station" in str(refused.error)
    assert "senior, then youth, then family" in railway.rule("buy_railcard_disabled").text
