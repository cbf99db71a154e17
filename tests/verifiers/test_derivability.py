"""Derivability: every gold value has a source, each matching rule reads what a person would say, and a gold with
an invented id is rejected as underivable_argument."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest

from domains.engine import ToolCall
from domains.registry import get_engine
from synthesis.generate import ShardConfig, admit_task, generate_shard
from synthesis.realistic_tasks import base_candidate
from synthesis.toolgraph import ToolGraph
from verifiers.derivability import Evidence, Sources, coincidental, dates_in_words, derive, referenced_calls

CLOCK = "2025-05-20T12:00:00"
POLICY = "Cancellations are free until 24 hours before departure. The current date is Tuesday 20 May 2025."


def source(value, words: str = "", outputs: tuple = (), schema: dict | None = None):
    known = Sources(Evidence(words, POLICY, CLOCK))
    for i, out in enumerate(outputs):
        known.returned(f"call[{i}]", out)
    return known.source(value, schema)


def test_exact_words_of_the_user_and_the_policy() -> None:
    assert source("Edinburgh Waverley", "from Edinburgh Waverley, please") == "user"
    assert source("24 hours") == "policy"
    assert source("Edinburgh", "Edinburgh Waverley") == "user"  # whole words
    assert source("Edin", "Edinburgh Waverley") is None  # never part of a word


def test_case_and_spaced_words() -> None:
    assert source("edinburgh waverley", "Edinburgh Waverley") == "case(user)"
    assert source("non_refundable", "on the non refundable rate") == "spaced(user)"


def test_date_read_in_words_with_the_clocks_year() -> None:
    assert source("2025-09-16", "on Tuesday 16 September") == "date_in_words(user)"
    assert source("2025-09-16", "September 16th") == "date_in_words(user)"
    assert source("2025-05-21", "tomorrow morning") == "date_in_words(user)"
    assert source("2026-09-16", "on 16 September") is None  # no year said: the clock's year


def test_a_day_written_in_figures_is_read_day_first_and_never_as_a_sum() -> None:
    # a date of birth as people write it here: read as the day it names, not as the arithmetic 2006 - 01 - 24
    assert source("2006-01-24", "born 24/01/2006") == "date_in_words(user)"
    assert source("2006-01-24", "born 2006 and 1 and 24") is None
    assert dates_in_words("31/02/2006", date(2025, 5, 20)) == set()  # no such day


def test_a_weekday_that_does_not_fit_the_clocks_year_picks_the_next() -> None:
    assert dates_in_words("Wednesday 14 January", date(2025, 12, 20)) == {"2026-01-14"}
    assert dates_in_words("16 September 2027", date(2025, 5, 20)) == {"2027-09-16"}


def test_numbers_and_number_words() -> None:
    assert source(2, "two seats, please") == "number_words(user)"
    assert source(12.5, "I'll pay 12.50 now") == "number(user)"
    assert source("3", "3 nights") == "user"
    assert source(7, "two seats") is None


def test_values_from_earlier_outputs_by_field_path() -> None:
    rows = [{"trip_id": "TP0107", "title": "Work"}, {"trip_id": "TP0108", "title": "Summer holiday"}]
    assert source("TP0108", "my trip 'Summer holiday'", (rows,)) == "call[0][1].trip_id"
    assert source("16.7", "", ({"temperature_c": 16.7},)) == "number(call[0].temperature_c)"
    assert source("09:00", "", ({"starts_at": "2025-06-19T09:00:00"},)) == "time_part(call[0].starts_at)"
    assert source("2025-06-19", "", ({"starts_at": "2025-06-19T09:00:00"},)) == "date_part(call[0].starts_at)"
    assert source("crystal harbor", "", ({"name": "Crystal Harbor"},)) == "case(call[0].name)"


def test_amount_sum_and_count() -> None:
    assert source("12.50 EUR", "", ({"total_price": 12.5},)) == "amount(call[0].total_price)"
    lines = [{"amount": 10.25}, {"amount": 4.5}]
    assert source(14.75, "", (lines,)) == "sum(call[0][*].amount)"
    assert source(2, "", (lines,)) == "count(call[0])"
    assert source("99.00 EUR", "", (lines,)) is None


def test_fields_inside_json_text_refunds_and_float_noise() -> None:
    """A column of JSON text (a user's payment methods, an order's items) is read like any other field."""
    user = {"user_id": "ana_1", "payment_methods": '[{"payment_method_id": "paypal_7", "balance": null}, '
                                                   '{"payment_method_id": "gift_card_9", "balance": 71.0}]'}
    assert source("gift_card_9", "", (user,)) == "call[0].payment_methods[1].payment_method_id"
    assert source("71.00", "", (user,)) == "number(call[0].payment_methods[1].balance)"
    history = {"payment_history": '[{"amount": 120.0}, {"amount": -18.57}]'}
    assert source("18.57", "", (history,)) == "number(abs(call[0].payment_history[1].amount))"
    assert source(101.43, "", (history,)) == "sum(call[0].payment_history[*].amount)"
    assert source("3.30", "", ({"amount": 3.2999999999998},)) == "number(call[0].amount)"
    assert source("not json [", "", ({"note": "[not json"},)) is None


def test_an_expression_for_the_calculator_needs_every_number_sourced() -> None:
    fare = [{"flight_number": "HAT1", "prices": '{"economy": 121}'}]
    assert source("121 + 50 * 1", "one bag at 50 each", (fare,)) == \
        "expression(call[0][0].prices.economy, user, number_words(user))"
    assert source("121 + 75 * 1", "one bag at 50 each", (fare,)) is None
    assert source("(121 + 50) / 2", "50 each", (fare,)) is None  # 2: said nowhere


def test_schema_values_booleans_and_composites() -> None:
    assert source("premium", "", schema={"type": "string", "enum": ["economy", "premium"]}) == "schema"
    assert source(1, "", schema={"type": "integer", "default": 1}) == "schema"
    assert source(True) == "schema"
    assert source(["TP0001", "ghost"], "", ({"trip_id": "TP0001"},)) == ["call[0].trip_id", None]


def test_derive_names_the_call_argument_and_value_and_uses_only_earlier_outputs() -> None:
    calls = (ToolCall("find_trip", {"title": "Summer holiday"}), ToolCall("get_trip", {"trip_id": "TP0108"}),
             ToolCall("get_trip", {"trip_id": "TP0999"}))
    outputs = ({"trip_id": "TP0108"}, {"trip_id": "TP0108", "total": 12.5}, {"trip_id": "TP0999"})
    got = derive(calls, outputs, ("12.50 EUR",), Evidence("my trip 'Summer holiday'", POLICY, CLOCK))
    assert got.sources["calls"][1]["arguments"] == {"trip_id": "call[0].trip_id"}
    assert got.sources["communicate_info"] == {"12.50 EUR": "amount(call[1].total)"}
    assert got.missing == ("call 2 (get_trip) argument trip_id = 'TP0999'",)  # its own output does not count
    assert got.reason().startswith("underivable_argument: call 2 (get_trip) argument trip_id = 'TP0999'")
    assert referenced_calls(got.sources) == {0, 1}


@pytest.fixture(scope="module")
def weather_task():
    graph = ToolGraph(get_engine("weather", 0))
    import random

    rng = random.Random(3)
    for _ in range(50):
        task = base_candidate(graph, rng, 0)
        if task is not None and admit_task(task, graph, 0.9).ok and len(task.gold_calls) >= 2:
            return graph, task
    pytest.fail("no admitted weather task in 50 draws")


def test_a_gold_with_an_invented_id_is_rejected_as_underivable(weather_task) -> None:
    graph, task = weather_task
    last = len(task.requests) - 1
    goal = task.requests[last]
    # the same look-up, on a real station id the user never said and no earlier call returned
    stations = graph.engine.seeded_values("stations", "station_id")
    said = {str(v) for c in task.gold_calls for v in c.arguments.values()}
    invented = next(s for s in stations if s not in said and s not in task.instruction_text())
    forged = replace(goal, calls=(*goal.calls, ToolCall("get_station", {"station_id": invented})))
    bad = replace(task, requests=[*task.requests[:last], forged])
    judged = admit_task(bad, graph, 0.0)
    assert not judged.ok and judged.reason.startswith("underivable_argument:")
    assert f"argument station_id = {invented!r}" in judged.reason


def test_a_real_weather_task_has_every_value_sourced(weather_task) -> None:
    graph, task = weather_task
    judged = admit_task(task, graph, 0.9)
    sources = judged.derivation.sources
    assert judged.derivation.missing == ()
    assert [c["name"] for c in sources["calls"]] == [c.name for c in task.gold_calls]
    assert all(s for c in sources["calls"] for s in c["arguments"].values())
    assert set(sources["communicate_info"]) == set(task.communicate_info)


def test_admitted_finance_records_carry_their_sources_and_report_mode_only_records() -> None:
    shipped = generate_shard(ShardConfig("finance", 0, 0, base_candidates=8, evolution_rounds=0))["records"]
    accepted = [r for r in shipped if r["accepted"]]
    assert accepted and all(r["underivable"] == [] and r["argument_sources"]["calls"] for r in accepted)
    assert all(r["tau2"]["evaluation_criteria"]["argument_sources"] == r["argument_sources"] for r in accepted)
    assert all(r["realism"]["underivable_arguments"] == 0 for r in accepted)


def test_a_count_is_read_from_the_field_named_for_its_noun_not_an_equal_average() -> None:
    # entertainment's "already rated": the member's own stars (list_watchlist's my_stars), never the title's average
    # that happens to equal it, nor a runtime or flag that holds the same number
    calls = (ToolCall("get_title", {"title_id": "TT0001"}), ToolCall("list_watchlist", {"user_id": "US0001"}))
    outputs = ({"title_id": "TT0001", "avg_stars": 4.0, "rating_count": 1},
               [{"title_id": "TT0002", "watched": 4, "my_stars": None}, {"title_id": "TT0001", "my_stars": 4}])
    got = derive(calls, outputs, ("4 stars",), Evidence("I watched it", POLICY, CLOCK))
    assert got.sources["communicate_info"] == {"4 stars": "amount(call[1][1].my_stars)"}
    alone = derive(calls[:1], outputs[:1], ("4 stars",), Evidence("I watched it", POLICY, CLOCK))
    assert alone.sources["communicate_info"]["4 stars"] != "amount(call[0].avg_stars)"


SQUAD = [{"player_id": "PL0001", "shirt_number": 2, "goals": 2, "status": "injured"},
         {"player_id": "PL0002", "shirt_number": 7, "goals": 0, "status": "active"},
         {"player_id": "PL0003", "shirt_number": 9, "goals": 1, "status": "injured"}]


def test_a_count_of_a_status_is_the_rows_in_that_status_not_a_field_that_holds_the_number() -> None:
    # sport's "how many injured players": the squad's rows whose status is 'injured', never a shirt number or goals
    assert source("2 injured", outputs=(SQUAD,)) == "amount(count(call[0][*].status = injured))"
    assert source("3 players", outputs=(SQUAD,)) == "amount(count(call[0][*].player_id))"
    assert source("1 active", outputs=(SQUAD,)) == "amount(count(call[0][*].status = active))"
    subscriptions = [{"sub_id": "AS1", "active": 1}, {"sub_id": "AS2", "active": 0}, {"sub_id": "AS3", "active": 1}]
    assert source("2 active subscriptions", outputs=(subscriptions,)) == "amount(count(call[0][*].active = true))"
    assert source("1 active subscription", outputs=(subscriptions[:2],)) == "amount(count(call[0][*].active = true))"


def test_a_count_whose_only_equal_figure_means_something_else_has_no_source() -> None:
    # "2 injured" from a squad without statuses: only a shirt number and a goal tally hold 2, and neither is a count
    # of injured players; "0 units" from a store credit or a discount of 0 is no stock figure
    squad = [{k: v for k, v in row.items() if k != "status"} for row in SQUAD[:1]]
    assert source("2 injured", outputs=(squad,)) is None
    assert source("0 units", outputs=({"customer_id": "CU1", "store_credit": 0, "percent_off": 0},)) is None
    assert source("0 units", outputs=({"sku": "DX7EUD", "stock": 0},)) == "amount(call[0].stock)"
    assert source("6 students", outputs=([{"section_id": "S1", "capacity": 6, "enrolled_count": 4}],)) is None
    assert source("4 students", outputs=([{"section_id": "S1", "capacity": 6, "enrolled_count": 4}],)) \
        == "amount(call[0][0].enrolled_count)"
    assert source("2 players", "shirt two, please") is None  # the user's bare figure says nothing it counts
    assert source("2 players", "I have two players") == "count_words(user)"
    assert source("2 players", "I have 2 players") == "user"  # the user says the count itself


@pytest.mark.parametrize(("value", "found", "meant"), [
    ("1 injured", "amount(call[1][5].goals)", False),
    ("2 injured", "amount(count(call[1][*].status = injured))", True),
    ("2 injured", "amount(count(call[1][*].status = active))", False),
    ("2 active subscriptions", "amount(count(call[1][*].active = true))", True),
    ("2 injured", "amount(count(call[1][*].active = true))", False),
    ("3 active subscriptions", "amount(count(call[3][*].subscription_id))", True),
    ("6 students", "amount(call[1][0].capacity)", False),
    ("6 students", "amount(call[1][0].enrolled_count)", True),
    ("4 stars", "amount(call[0].avg_stars)", False),
    ("16 players", "amount(call[4].max_squad_size)", True),  # a full squad's players: its cap
    ("3 players", "amount(call[3][2].appearances)", False),
    ("1 student", "amount(number_words(user))", False),
    ("3 active trips", "policy", True),
    ("247.33 EUR", "amount(call[0].goals)", False),  # not a count: its source is an exact figure
])
def test_coincidental_reads_a_recorded_source(value: str, found: str, meant: bool) -> None:
    assert coincidental(value, found) is (not meant and "EUR" not in value)
