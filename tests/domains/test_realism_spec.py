"""The realism sections of a spec (users, invariants, intents, policy-only rules): malformed sections fail with
file and path; seeding keeps every invariant; the policy states the clock and the identification rule."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from domains.engine import DomainEngine
from domains.invariants import violation_counts
from domains.policy import AGENT_RULES_HEADING, rule_line
from domains.registry import DOMAIN_NAMES, get_engine, get_spec, spec_path
from domains.spec import SpecError, parse_spec

RAILWAY: dict[str, Any] = yaml.safe_load(spec_path("railway").read_text())
CONVERTED = tuple(d for d in DOMAIN_NAMES if get_spec(d).intents)  # specs with users and intents


def _intent(s: dict[str, Any], name: str) -> dict[str, Any]:
    return next(i for i in s["intents"] if i["name"] == name)


def _tool(s: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in s["tools"] if t["name"] == name)


MISTAKES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("role on an unknown table", lambda s: s["users"]["roles"][0].__setitem__("table", "riders"),
     "users.roles[0].table: unknown table 'riders'"),
    ("identification by an unknown tool", lambda s: s["users"]["roles"][0]["identify"][0].__setitem__("tool", "whoami"),
     "users.roles[0].identify[0].tool: unknown tool 'whoami'"),
    ("identification fact naming no column",
     lambda s: s["users"]["roles"][0]["identify"][0]["facts"].__setitem__(0, "your card is {card}"),
     "users.roles[0].identify[0].facts[0]: passengers has no column 'card'"),
    ("may_call naming an unknown tool", lambda s: s["users"]["roles"][0]["may_call"].append("teleport"),
     f"users.roles[0].may_call[{len(RAILWAY['users']['roles'][0]['may_call'])}]: unknown tool 'teleport'"),
    ("ownership path through a plain column", lambda s: s["users"]["owns"].__setitem__("tickets", "seat_number"),
     "users.owns.tickets: 'seat_number' is not a foreign-key column of tickets"),
    ("ownership path ending at no role's table", lambda s: s["users"]["owns"].__setitem__("tickets", "service_id"),
     "users.owns.tickets: the path ends at services, which is no role's table"),
    ("held references of an unknown table", lambda s: s["users"]["held"].append("boardings"),
     "users.held[1]: unknown table 'boardings'"),
    ("role noun that is not lowercase words", lambda s: s["users"]["roles"][0].__setitem__("noun", "Passenger!"),
     "users.roles[0].noun: 'Passenger!' is not how a person is described: use lowercase words without"),
    ("role noun that is not text", lambda s: s["users"]["roles"][0].__setitem__("noun", 3),
     "users.roles[0].noun: 3 is not of type 'string'"),
    ("role noun with its article", lambda s: s["users"]["roles"][0].__setitem__("noun", "a passenger"),
     "users.roles[0].noun: 'a passenger' is not how a person is described: use lowercase words without an article"),
    ("persona name that is no column", lambda s: s["users"]["persona"].__setitem__("name", "nickname"),
     "users.persona.name: passengers has no column 'nickname'"),
    ("invariant SQL that does not compile", lambda s: s["invariants"][0].__setitem__("sql", "SELECT nope FROM railcards"),
     "invariants[0].sql: SQL does not compile: no such column: nope"),
    ("invariant resampling an unknown column", lambda s: s["invariants"][0].__setitem__("resample", ["colour"]),
     "invariants[0].resample: railcards has no column 'colour'"),
    ("invariant without its rule", lambda s: s["invariants"][0].pop("rule"),
     "invariants[0]: 'rule' is a required property"),
    ("intent candidates without an outcome column",
     lambda s: _intent(s, "buy_railcard").__setitem__("candidates", "SELECT passenger_id FROM passengers WHERE passenger_id = :user"),
     "intents[4].candidates: the query must return an 'outcome' column"),
    ("intent phrasing with an unknown slot", lambda s: _intent(s, "refund_trip")["phrasings"].append("refund my {trip_name} please"),
     "intents[0].phrasings[4]: slot {trip_name} is neither a column"),
    ("intent outcome calling a tool the role may not ask for",
     lambda s: _intent(s, "refund_trip")["outcomes"]["refund"]["calls"].__setitem__(0, {"tool": "cancel_service", "arguments": {"service_id": "{ticket_id}"}}),
     "intents[0].outcomes.refund.calls[0].tool: role 'customer' may not call cancel_service"),
    ("intent outcome call missing a required argument",
     lambda s: _intent(s, "refund_trip")["outcomes"]["refund"]["calls"][0].__setitem__("arguments", {}),
     "intents[0].outcomes.refund.calls[0].arguments: missing required parameter(s) ticket_id of refund_ticket"),
    ("intent of an undeclared role", lambda s: _intent(s, "refund_trip").__setitem__("role", "staff"),
     "intents[0].role: no users.roles entry for role 'staff'"),
    ("policy-only precondition without its rule id",
     lambda s: _tool(s, "refund_ticket")["preconditions"][-1].pop("rule"),
     "preconditions[3].rule: a policy-only precondition needs the id of the rule it checks"),
    ("outcome citing a rule id the policy does not write",
     lambda s: _intent(s, "refund_trip")["outcomes"]["too_late"].__setitem__("rule", "no_such_rule"),
     "intents[0].outcomes.too_late.rule: unknown rule 'no_such_rule'; declare it under rules:"),
    ("outcome without a rule",
     lambda s: _intent(s, "refund_trip")["outcomes"]["too_late"].pop("rule"),
     "intents[0].outcomes.too_late.rule: every outcome is a decision and needs the id of the written rule"),
    ("policy-only precondition citing a rule the tools check",
     lambda s: _tool(s, "refund_ticket")["preconditions"][-1].__setitem__("rule", "refund_trip_refund"),
     "the tool lets this precondition through (enforced_by: policy), so rule 'refund_trip_refund' must say "
     "checked_by: agent"),
    ("rule declared twice",
     lambda s: s["rules"].append(dict(s["rules"][0])),
     "is declared twice"),
    ("rule with neither an example nor a no_example reason",
     lambda s: s["rules"][0].pop("no_example"),
     "rules[0]: "),
    ("rule example with an unknown tool",
     lambda s: (s["rules"][0].pop("no_example", None),
                s["rules"][0].__setitem__("example", {"tool": "teleport", "arguments": {}})),
     "rules[0].example.tool: unknown tool 'teleport'"),
    ("enforced_by with an unknown value",
     lambda s: _tool(s, "refund_ticket")["preconditions"][0].__setitem__("enforced_by", "hope"),
     "enforced_by: 'hope' is not one of ['tool', 'policy']"),
]


@pytest.mark.parametrize(("case", "mutate", "expected"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_malformed_realism_section_names_file_and_path(case: str, mutate: Callable[[dict[str, Any]], None],
                                                         expected: str) -> None:
    raw = copy.deepcopy(RAILWAY)
    mutate(raw)
    with pytest.raises(SpecError) as err:
        parse_spec(raw, label="railway.yaml")
    assert any(p.startswith("railway.yaml: ") and expected in p for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("noun", ["Passenger!", "", "a passenger", "season ticket holder of the line", 3, None])
def test_a_bad_role_noun_is_one_clear_error(noun: Any) -> None:
    raw = copy.deepcopy(RAILWAY)
    raw["users"]["roles"][0]["noun"] = noun
    with pytest.raises(SpecError) as err:
        parse_spec(raw, label="railway.yaml")
    assert len(err.value.problems) == 1 and err.value.problems[0].startswith("railway.yaml: users.roles[0].noun: ")


def test_a_role_noun_is_optional_and_loaded_when_given() -> None:
    raw = copy.deepcopy(RAILWAY)
    raw["users"]["roles"][0]["noun"] = "season ticket holder"
    assert parse_spec(raw).users.role("customer").noun == "season ticket holder"  # type: ignore[union-attr]
    assert get_spec("railway").users.role("customer").noun == "passenger"  # type: ignore[union-attr]
    assert get_spec("finance").users.role("customer").noun is None  # type: ignore[union-attr]


def test_the_staff_roles_say_who_they_are() -> None:
    nouns = {d: get_spec(d).users.role("staff").noun  # type: ignore[union-attr]
             for d in CONVERTED if get_spec(d).users.role("staff")}  # type: ignore[union-attr]
    assert nouns == {"medicine": "doctor", "weather": "forecaster", "education": "instructor", "sport": "coach"}


def _invariants() -> list[tuple[str, str]]:
    return [(d, inv.name) for d in CONVERTED for inv in get_spec(d).invariants]


@pytest.mark.parametrize(("domain", "invariant"), _invariants(), ids=[f"{d}-{i}" for d, i in _invariants()])
def test_seeding_keeps_each_invariant(domain: str, invariant: str) -> None:
    engine = get_engine(domain)
    with engine.fresh() as db:
        assert violation_counts(db.conn, engine.spec)[invariant] == 0


def test_without_resampling_the_seeded_data_breaks_the_rule() -> None:
    """The repair is what keeps the invariant: the same spec without ``resample`` seeds youth cards for adults."""
    raw = copy.deepcopy(RAILWAY)
    for inv in raw["invariants"]:
        if inv["name"] in ("youth_railcard_age", "senior_railcard_age"):
            inv.pop("resample")
    engine = DomainEngine(parse_spec(raw, label="railway.yaml"), 0)
    with engine.fresh() as db:
        assert violation_counts(db.conn, engine.spec)["youth_railcard_age"] > 0


def test_emails_match_names_and_specs_without_realism_still_load() -> None:
    with get_engine("restaurant").fresh() as db:
        for name, email in db.query("SELECT full_name, email FROM guests"):
            assert email.startswith(".".join(name.lower().split()).replace("ü", "u"))
    # the realism sections are optional: the same spec without them still loads, with none of them set
    raw = yaml.safe_load(spec_path("railway").read_text(encoding="utf-8"))
    for section in ("users", "intents", "invariants", "rules"):  # a rule said to be checked needs its check's citation
        raw.pop(section, None)
    for tool in raw["tools"]:
        for pre in tool.get("preconditions", []):
            pre.pop("enforced_by", None)
            pre.pop("rule", None)
    plain = parse_spec(raw, "railway-plain.yaml")
    assert plain.users is None and plain.intents == () and plain.invariants == ()


@pytest.mark.parametrize("domain", CONVERTED)
def test_policy_states_clock_identification_and_policy_only_rules(domain: str) -> None:
    spec = get_spec(domain)
    assert f"({spec.now})" in spec.policy and "The current date and time is" in spec.policy
    assert "identify the caller" in spec.policy
    policy_only = [p for t in spec.tools for p in t.preconditions if p.enforced_by == "policy"]
    assert len(policy_only) >= 3
    for p in policy_only:  # each is written, by id, among the rules the agent must apply itself
        rule = spec.rule(p.rule)
        assert rule is not None and rule.checked_by == "agent"
        assert f"- {rule_line(rule)}" in spec.policy.split(AGENT_RULES_HEADING, 1)[1]
    assert len([i for i in spec.intents if i.role == "customer"]) >= 8


def test_a_policy_only_rule_is_not_checked_by_the_tool() -> None:
    """Refunding a ticket that leaves within 48 hours breaks the policy, yet the tool lets it through."""
    engine = get_engine("railway")
    with engine.fresh() as db:
        rows = db.query("SELECT t.ticket_id FROM tickets t JOIN services s USING (service_id) WHERE t.status = 'booked' "
                        "AND s.status != 'cancelled' AND t.departure_at > :now AND t.departure_at <= "
                        "strftime('%Y-%m-%dT%H:%M:%S', :now, '+48 hours')", {"now": engine.spec.now})
        assert rows, "seed 0 should hold a ticket departing within 48 hours"
        assert db.call("refund_ticket", {"ticket_id": rows[0][0]}).ok


def test_a_persona_name_may_be_made_of_columns() -> None:
    raw = copy.deepcopy(RAILWAY)
    raw["users"]["persona"] = {"name": "{full_name} ({email})"}
    users = parse_spec(raw).users
    assert users is not None and users.name_columns() == ["full_name", "email"]
    assert users.person_name({"full_name": "Ann Lee", "email": "a@x.org"}) == "Ann Lee (a@x.org)"
    assert users.person_name({"full_name": "Ann Lee", "email": None}) is None  # a missing part: no name
    raw["users"]["persona"] = {"name": "{full_name} {surname}"}
    with pytest.raises(SpecError) as err:
        parse_spec(raw, label="railway.yaml")
    assert any("users.persona.name" in p and "'surname'" in p for p in err.value.problems)


TELECOM: dict[str, Any] = yaml.safe_load(spec_path("telecom").read_text())


def _outcome(s: dict[str, Any], intent: str, outcome: str) -> dict[str, Any]:
    return _intent(s, intent)["outcomes"][outcome]


START_MISTAKES: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None], str]] = [
    ("setup with an unknown tool", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode")["setup"][1].__setitem__("tool", "break_phone"),
     "intents[0].outcomes.airplane_mode.setup[1].tool: unknown tool 'break_phone'"),
    ("setup argument that is no parameter", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode")["setup"][1].__setitem__("arguments", {"how": "fully"}),
     "intents[0].outcomes.airplane_mode.setup[1].arguments.how: not a parameter of turn_airplane_mode_on"),
    ("setup slot that nothing fills", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode")["setup"][0]["arguments"].__setitem__("name", "{nickname}"),
     "intents[0].outcomes.airplane_mode.setup[0].arguments.name: slot {nickname} is neither a column"),
    ("setup missing a required argument", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode")["setup"][0]["arguments"].pop("phone_number"),
     "intents[0].outcomes.airplane_mode.setup[0].arguments: missing required parameter(s) phone_number of set_user_info"),
    ("assertion that the spec does not declare", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode")["asserts"][0].__setitem__("assert", "assert_happy"),
     "intents[0].outcomes.airplane_mode.asserts[0].assert: unknown assertion 'assert_happy'"),
    ("assertion argument that is no parameter", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode")["asserts"][0].__setitem__("arguments", {"status": "up"}),
     "intents[0].outcomes.airplane_mode.asserts[0].arguments.status: not a parameter of assert_service_status"),
    ("assertion entry without its name", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode")["asserts"][0].pop("assert"),
     "'assert' is a required property"),
    ("assertions without a setup that breaks the state", TELECOM,
     lambda s: _outcome(s, "no_service", "airplane_mode").pop("setup"),
     "intents[0].outcomes.airplane_mode.asserts: an outcome judged on the final state starts from a setup"),
    ("setup in a spec without a user's side", RAILWAY,
     lambda s: _outcome(s, "refund_trip", "refund").__setitem__("setup", [{"tool": "refund_ticket", "arguments": {}}]),
     "intents[0].outcomes.refund: setup and asserts describe a user's own state; this spec declares no user tables"),
]


@pytest.mark.parametrize(("case", "base", "mutate", "expected"), START_MISTAKES, ids=[m[0] for m in START_MISTAKES])
def test_a_malformed_setup_or_assertion_names_its_path(case: str, base: dict[str, Any],
                                                       mutate: Callable[[dict[str, Any]], None], expected: str) -> None:
    raw = copy.deepcopy(base)
    mutate(raw)
    with pytest.raises(SpecError) as err:
        parse_spec(raw, label="spec.yaml")
    assert any(p.startswith("spec.yaml: ") and expected in p for p in err.value.problems), err.value.problems


def test_the_shipped_telecom_outcomes_each_start_from_a_setup_and_end_in_assertions() -> None:
    spec = parse_spec(copy.deepcopy(TELECOM), label="telecom.yaml")
    outcomes = [o for i in spec.intents for o in i.outcomes]
    assert len(outcomes) == 6 and all(o.setup and o.asserts for o in outcomes)
    assert all(o.setup[0].tool == "set_user_info" for o in outcomes)  # whose phone it is comes first
