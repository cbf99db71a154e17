"""A value asked for by nobody is not required: each say value is asked for by the request (the intent's ``asks``
words, in the phrasing the task uses) or told by a tell rule the policy states; the loader refuses any other."""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from domains.policy import AGENT_RULES_HEADING, TELL_RULES_HEADING, rule_line
from domains.realism_spec import TELL_WHY_STOPPED
from domains.registry import get_engine, get_spec
from domains.spec import SpecError, parse_spec
from synthesis.realistic_tasks import realism_for
from synthesis.toolgraph import ToolGraph

DOMAINS = Path(__file__).resolve().parents[2] / "domains"


def _raw(domain: str) -> dict[str, Any]:
    return yaml.safe_load((DOMAINS / domain / f"{domain}.yaml").read_text())


def _intent(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in raw["intents"] if i["name"] == name)


def _drop_asks(raw: dict[str, Any]) -> None:
    del _intent(raw, "rain_on_a_day")["asks"]


def _told_by_plain_rule(raw: dict[str, Any]) -> None:
    _intent(raw, "go_free")["outcomes"]["too_many"]["say"] = [
        {"value": "{active_count} active subscriptions", "told_by": "go_free_too_many"}]


def _words_no_phrasing_uses(raw: dict[str, Any]) -> None:
    _intent(raw, "rain_on_a_day")["asks"] = {"{total_mm:.1f} mm": ["snowfall"]}


def _why_on_the_granted_outcome(raw: dict[str, Any]) -> None:
    _intent(raw, "rain_on_a_day")["outcomes"]["answer"]["say"] = [
        {"value": "{total_mm:.1f} mm", "told_by": TELL_WHY_STOPPED.id}]
    del _intent(raw, "rain_on_a_day")["asks"]


def _question_a_phrasing_does_not_ask(raw: dict[str, Any]) -> None:
    _intent(raw, "my_subscriptions")["phrasings"].append("I'd like a word about my alert subscriptions, please")


@pytest.mark.parametrize(("edit", "message"), [
    (_drop_asks, "intents[6] (rain_on_a_day).outcomes.answer.say[0]: '{total_mm:.1f} mm' is asked for by nobody"),
    (_told_by_plain_rule, "(go_free).outcomes.too_many.say[0].told_by: rule 'go_free_too_many' is no tell rule"),
    (_words_no_phrasing_uses, "(rain_on_a_day).asks: no phrasing asks for '{total_mm:.1f} mm'"),
    (_why_on_the_granted_outcome, "(rain_on_a_day).outcomes.answer.say[0].told_by: the first outcome is the request "
                                  "granted as asked"),
    (_question_a_phrasing_does_not_ask, "(my_subscriptions).phrasings[3]: asks for none of what outcome answer says"),
], ids=["no link", "told by a rule that is no tell rule", "asks words no phrasing uses", "why on the granted outcome",
        "a question phrasing that asks nothing"])
def test_a_say_value_nobody_asked_for_is_a_load_error(edit: Callable[[dict[str, Any]], None], message: str) -> None:
    raw = copy.deepcopy(_raw("weather"))
    edit(raw)
    with pytest.raises(SpecError) as err:
        parse_spec(raw, label="weather.yaml")
    lines = str(err.value).splitlines()
    assert any(line.startswith("weather.yaml: ") and message in line for line in lines), lines


def test_the_policy_states_the_tell_rules_under_their_own_heading() -> None:
    spec = get_spec("ecommerce")
    tells = spec.policy.split(TELL_RULES_HEADING, 1)[1]
    for rule_id in ("tell_amount_moved", "tell_return_id", TELL_WHY_STOPPED.id):
        rule = spec.rule(rule_id)
        assert rule is not None and rule.tell
        assert f"- {rule_line(rule)}" in tells
        assert f"- {rule_line(rule)}" not in spec.policy.split(AGENT_RULES_HEADING, 1)[1].split(TELL_RULES_HEADING)[0]
    assert "always tell the customer the amount charged or refunded" in tells
    assert TELL_RULES_HEADING not in get_spec("telecom").policy  # no outcome there cites a tell rule


def _goal(domain: str, intent_name: str, outcome: str, phrasing: int) -> tuple[Any, Any]:
    """A goal of ``intent_name`` ending in ``outcome``, asked in its phrasing number ``phrasing`` only."""
    spec = get_spec(domain)
    graph = ToolGraph(get_engine(domain, 0))
    realism = realism_for(graph)
    intent = next(i for i in spec.intents if i.name == intent_name)
    only = dataclasses.replace(intent, phrasings=(intent.phrasings[phrasing],))
    for person, row in realism.pairs(intent):
        if row.get("outcome") == outcome:
            with graph.engine.fresh() as db:
                made = realism.intent_request(db, only, person, row, random.Random(0))
            if made is not None:
                return made, only
    raise AssertionError(f"{domain}: no {intent_name}/{outcome} goal could be made")


def test_a_generated_goal_requires_only_what_its_words_ask_for_or_a_tell_rule_tells() -> None:
    # 'does code X work on my order Y? Use it if it does' asks nothing about the new total
    quiet, intent = _goal("ecommerce", "use_a_coupon", "apply", 2)
    assert not intent.asked_in("{result[total]:.2f} EUR", intent.phrasings[0])
    assert quiet.communicate == () and quiet.calls
    # '... apply it to Y and tell me the new total' asks for it
    asked, intent = _goal("ecommerce", "use_a_coupon", "apply", 1)
    assert intent.asked_in("{result[total]:.2f} EUR", intent.phrasings[0])
    assert len(asked.communicate) == 1 and asked.communicate[0].endswith(" EUR")
    # a payment's amount is told by rule tell_amount_moved, whatever the words
    paid, intent = _goal("ecommerce", "pay_for_order", "pay", 0)
    assert "how much" not in intent.phrasings[0].lower() and len(paid.communicate) == 1
    # a refusal's reason is told by tell_why_stopped
    stopped, _ = _goal("ecommerce", "cancel_order", "shipped", 0)
    assert stopped.communicate == ("shipped",)
