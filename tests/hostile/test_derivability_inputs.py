"""Hostile values for the derivability check: a value built to make a pattern backtrack, a value nested 100,000
deep, a call output holding 5,000-deep JSON text, and policy text that says a value only by coincidence (an
example, a number word, the clock). Each case returns at once, raises nothing, and finds no source where a person
would find none."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

from domains.engine import ToolCall
from verifiers.derivability import EXPRESSION, MAX_DEPTH, Evidence, Sources, derive, referenced_calls

CLOCK = "2025-06-15T12:00:00"
WEATHER_LIKE = ("Free-plan subscribers may follow at most two active alert subscriptions. Alerts expire after "
                "48 hours. Cancelling costs 5 EUR. A refund is paid within 14 days. Ids look like ST0001, for "
                "example ST0042 or ST0077. At most 3 tickets per member.\n"
                "The current date and time is Sunday 15 June 2025, 12:00 (2025-06-15T12:00:00); every rule about "
                "dates and times is judged against it.")
HANG_LIMIT_S = 5.0  # a hang detector, not a speed target (bench/expression_regex.py prints the times)


def within(limit_s: float, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a forked child; fails when it has not returned within ``limit_s`` (the old pattern never
    did, and a pattern match holds the interpreter: only another process can see it hang). Nothing is left
    running: the child is killed and reaped either way."""
    reader, writer = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_answer, args=(writer, fn, args), daemon=True)
    child.start()
    writer.close()
    try:
        assert reader.poll(limit_s), f"{fn.__name__} did not return within {limit_s} s"
        kind, value = reader.recv()
    finally:
        child.kill()
        child.join()
        reader.close()
    if kind == "error":
        raise AssertionError(f"{fn.__name__} raised {value}")
    return value


def _answer(writer: Any, fn: Any, args: tuple[Any, ...]) -> None:
    try:
        writer.send(("value", fn(*args)))
    except BaseException as exc:  # noqa: BLE001 - reported to the test in words
        writer.send(("error", f"{type(exc).__name__}: {str(exc)[:200]}"))


def backtracking(terms: int, spaces: int = 10, tail: str = "x") -> str:
    return "1" + " " * spaces + ("+ 1" + " " * spaces) * terms + tail


REGEX_INPUTS = [
    ("issue 38's 6 terms", backtracking(6)),
    ("20 terms", backtracking(20)),
    ("200 terms", backtracking(200)),
    ("10,000 characters", backtracking(10_000 // 13)),
    ("30 spaces a run", backtracking(12, spaces=30)),
    ("brackets and spaces", "(" * 40 + " 1 " + ") " * 40 + "x"),
    ("signs and spaces", "1" + " - -1  " * 300 + "?"),
    ("digits and dots", "1" + "." * 5000 + "+"),
    ("operators only", "1 " + "+ " * 3000),
]


@pytest.mark.parametrize(("label", "text"), REGEX_INPUTS, ids=[label for label, _ in REGEX_INPUTS])
def test_the_expression_pattern_returns_at_once_on_a_backtracking_input(label: str, text: str) -> None:
    assert within(HANG_LIMIT_S, EXPRESSION.fullmatch, text) is None


@pytest.mark.parametrize(("label", "text"), REGEX_INPUTS, ids=[label for label, _ in REGEX_INPUTS])
def test_a_communicate_value_that_backtracks_has_no_source(label: str, text: str) -> None:
    got = within(HANG_LIMIT_S, derive, (), (), (text,), Evidence("1 more", "", CLOCK))
    assert got.sources["communicate_info"] == {text: None} and len(got.missing) == 1


def test_a_real_expression_still_reads() -> None:
    known = Sources(Evidence("one bag at 50 each, 121 for the fare", "", CLOCK))
    assert known.source("(121 + 50) * 1") == "expression(user, user, number_words(user))"
    assert known.source("121 +  50") == "expression(user, user)"


def nested(depth: int, leaf: Any, kind: str) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if kind == "list" or (kind == "mixed" and i % 2) else {"k": value}
    return value


@pytest.mark.parametrize("kind", ["list", "object", "mixed"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 100_000])
def test_a_deeply_nested_argument_has_no_source_and_raises_nothing(kind: str, depth: int) -> None:
    call = ToolCall("get_station", {"station_id": nested(depth, "ST0001", kind)})
    got = within(HANG_LIMIT_S, derive, (call,), (None,), (), Evidence("station ST0001", "", CLOCK))
    assert len(got.missing) == 1 and "nested deeper than" in got.missing[0]
    assert len(got.missing[0]) < 400
    assert referenced_calls(got.sources) == set()


def test_an_argument_within_the_depth_limit_is_derived_element_by_element() -> None:
    call = ToolCall("f", {"a": nested(MAX_DEPTH - 1, "ST0001", "list")})
    assert derive((call,), (None,), (), Evidence("station ST0001", "", CLOCK)).missing == ()


@pytest.mark.parametrize("depth", [1_000, 5_000, 50_000])
@pytest.mark.parametrize("bracket", ["[]", "{}"])
def test_deep_json_text_in_a_call_output_is_read_as_text(depth: int, bracket: str) -> None:
    open_, close = bracket
    inner = '"k": ' if open_ == "{" else ""
    text = (open_ + inner) * depth + "1" + close * depth
    calls = (ToolCall("list_trips", {}), ToolCall("get_trip", {"trip_id": "TP0108"}))
    got = within(HANG_LIMIT_S, derive, calls, ({"notes": text}, None), (), Evidence("", "", CLOCK))
    assert got.missing == ("call 1 (get_trip) argument trip_id = 'TP0108'",)


def test_a_deep_python_output_is_walked_without_recursion() -> None:
    output = nested(100_000, "TP0108", "mixed")
    calls = (ToolCall("list_trips", {}), ToolCall("get_trip", {"trip_id": "TP0108"}))
    got = within(HANG_LIMIT_S, derive, calls, (output, None), (), Evidence("", "", CLOCK))
    assert got.missing == ("call 1 (get_trip) argument trip_id = 'TP0108'",)  # deeper than any field an agent reads


def test_a_very_long_value_is_matched_only_as_itself() -> None:
    long_value = "12 + " * 5_000 + "12"
    known = Sources(Evidence("12 each", "", CLOCK))
    assert within(HANG_LIMIT_S, known.source, long_value) is None
    assert known.source("x" * 100_000) is None


POLICY_COINCIDENCES = [
    (2, "a number word ('at most two')"),
    ("2", "a number word, as text"),
    ("ST0042", "an id only in the policy's example"),
    ("ST0077", "another example id"),
    (15, "the clock's day"),
    (2025, "the clock's year"),
    (12, "the clock's hour"),
    ("2 subscriptions", "a number word with a noun"),
    (6, "the clock's month"),
]


@pytest.mark.parametrize(("value", "why"), POLICY_COINCIDENCES, ids=[w for _, w in POLICY_COINCIDENCES])
def test_the_policy_is_no_source_for_a_value_it_says_only_by_coincidence(value: Any, why: str) -> None:
    assert Sources(Evidence("", WEATHER_LIKE, CLOCK)).source(value) is None


POLICY_FACTS = [
    ("48 hours", "policy"),
    (48, "policy"),
    (5, "policy"),  # a fee: 5 EUR
    ("5.00 EUR", "amount(policy)"),
    (14, "policy"),  # a period: 14 days
    (3, "policy"),  # a limit: at most 3
    ("2025-06-16", "date_in_words(policy)"),  # the clock still says what tomorrow is
]


@pytest.mark.parametrize(("value", "source"), POLICY_FACTS, ids=[str(v) for v, _ in POLICY_FACTS])
def test_the_policy_is_a_source_for_what_it_states_as_a_fact(value: Any, source: str) -> None:
    words = "tomorrow" if source.startswith("date") else ""
    got = Sources(Evidence(words, WEATHER_LIKE, CLOCK)).source(value)
    assert got == ("date_in_words(user)" if words else source)


def test_the_user_saying_two_is_still_a_source() -> None:
    assert Sources(Evidence("two seats", WEATHER_LIKE, CLOCK)).source(2) == "number_words(user)"


def test_the_same_call_many_times_takes_linear_time() -> None:
    calls = tuple(ToolCall("get_station", {"station_id": f"ST{i:04d}"}) for i in range(2_000))
    outputs = tuple({"station_id": f"ST{i + 1:04d}"} for i in range(2_000))
    started = time.perf_counter()
    got = within(HANG_LIMIT_S * 4, derive, calls, outputs, (), Evidence("ST0000", "", CLOCK))
    assert got.missing == () and time.perf_counter() - started < HANG_LIMIT_S * 4
