"""Hostile agent arguments: every call is an ok or an error result, never an exception, and a failed call
leaves the database exactly as it was. The fast argument path never accepts what jsonschema refuses."""

from __future__ import annotations

import random
from typing import Any

import pytest

from domains.arguments import parse_arguments, shape_problem
from domains.engine import ToolCall
from domains.registry import available_domains, data_available, get_engine
from toolscale.cli import main as cli_main
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import outcome_reward, verify
from tests.hostile.conftest import weather_engine


def _nested(depth: int, leaf: Any = "x", kind: str = "dict") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


def _refused(tool: str, arguments: Any, expected: str) -> None:
    """The call is one error line containing ``expected`` and the database is unchanged."""
    engine = weather_engine()
    with engine.fresh() as db:
        result = db.call(tool, arguments)
        assert not result.ok, result
        assert result.error is not None and "\n" not in result.error and expected in result.error, result.error
        assert db.fingerprint() == engine.fingerprint


HOSTILE: list[tuple[str, str, Any, str]] = [
    ("400-level nested object", "get_alert", {"alert_id": _nested(400)}, "nested deeper than 8 levels"),
    ("400-level nested list", "get_alert", {"alert_id": _nested(400, kind="list")}, "nested deeper than 8 levels"),
    ("100,000-level nesting", "issue_alert", {"region_id": _nested(100_000)}, "nested deeper than 8 levels"),
    ("nesting as the whole arguments", "get_alert", _nested(400), "nested deeper than 8 levels"),
    ("a wide object", "get_alert", {"alert_id": "AL0001", **{f"k{i}": i for i in range(500)}}, "more than 100"),
    ("non-text argument name", "get_alert", {1: "AL0001"}, "argument names must be text"),
    ("lone surrogate", "find_station_by_name", {"name": "\ud800"}, "invalid Unicode"),
    ("bytes value", "find_station_by_name", {"name": b"Ancient Falcon"}, "bytes is not JSON"),
    ("a set value", "get_alert", {"alert_id": {"AL0001"}}, "set is not JSON"),
    ("NaN number", "record_observation", {"station_id": "WS0001", "observed_at": "2025-06-15T09:00:00",
                                          "temperature_c": float("nan"), "precipitation_mm": 0, "wind_kph": 1},
     "numbers must be finite"),
    ("infinite number", "record_observation", {"station_id": "WS0001", "observed_at": "2025-06-15T09:00:00",
                                               "temperature_c": 1.0, "precipitation_mm": 0,
                                               "wind_kph": float("inf")}, "numbers must be finite"),
    ("a list instead of an object", "get_alert", ["AL0001"], "arguments must be a JSON object, got list"),
    ("null arguments", "get_alert", None, "arguments must be a JSON object, got NoneType"),
    ("a 3,000-character id", "get_alert", {"alert_id": "A" * 3000}, "too long (limit 2000 characters)"),
    # dates: real calendar dates, ISO shape, ASCII digits, nothing around them
    ("month and day zero", "list_observations", {"station_id": "WS0002", "date": "2025-00-00"}, "not a real date"),
    ("30 February", "list_observations", {"station_id": "WS0002", "date": "2025-02-30"}, "not a real date"),
    ("year zero", "list_observations", {"station_id": "WS0002", "date": "0000-00-00"}, "not a real date"),
    ("trailing newline", "list_observations", {"station_id": "WS0002", "date": "2025-06-03\n"}, "not an ISO date"),
    ("leading space", "list_observations", {"station_id": "WS0002", "date": " 2025-06-03"}, "not an ISO date"),
    ("Arabic-Indic digits", "list_observations", {"station_id": "WS0002", "date": "\u0662\u0660\u0662\u0665-"
                                                  "\u0660\u0666-\u0660\u0663"}, "not an ISO date"),
    ("a datetime for a date", "list_observations", {"station_id": "WS0002", "date": "2025-06-03T00:00:00"},
     "not an ISO date"),
    ("impossible datetime", "issue_alert", {"region_id": "RG001", "hazard": "heat", "severity": "watch",
                                            "starts_at": "2025-00-00T99:99:99", "ends_at": "2025-06-17T06:00:00"},
     "not a real datetime"),
    ("hour 24", "issue_alert", {"region_id": "RG001", "hazard": "heat", "severity": "watch",
                                "starts_at": "2025-06-15T24:00:00", "ends_at": "2025-06-17T06:00:00"},
     "not a real datetime"),
    ("29 February of a common year", "issue_alert", {"region_id": "RG001", "hazard": "heat", "severity": "watch",
                                                     "starts_at": "2025-02-29T10:00:00",
                                                     "ends_at": "2025-06-17T06:00:00"}, "not a real datetime"),
    ("datetime with a newline", "issue_alert", {"region_id": "RG001", "hazard": "heat", "severity": "watch",
                                                "starts_at": "2025-06-15T18:00:00\n",
                                                "ends_at": "2025-06-17T06:00:00"}, "not an ISO datetime"),
    ("datetime with a space", "record_observation", {"station_id": "WS0001", "observed_at": "2025-06-15 09:00:00",
                                                     "temperature_c": 1.0, "precipitation_mm": 0, "wind_kph": 1},
     "not an ISO datetime"),
    # blank text and e-mails
    ("empty name", "find_station_by_name", {"name": ""}, "must not be empty or blank"),
    ("blank name", "find_station_by_name", {"name": "   "}, "must not be empty or blank"),
    ("newline name", "find_station_by_name", {"name": "\n\t"}, "must not be empty or blank"),
    ("empty e-mail", "find_subscriber_by_email", {"email": ""}, "must not be empty or blank"),
    ("e-mail without @", "find_subscriber_by_email", {"email": "aiden.bauer598"}, "is not an e-mail address"),
    ("e-mail without a domain dot", "find_subscriber_by_email", {"email": "a@b"}, "is not an e-mail address"),
    ("e-mail with a space", "find_subscriber_by_email", {"email": "aiden bauer@example.com"},
     "is not an e-mail address"),
    ("e-mail with a newline", "find_subscriber_by_email", {"email": "aiden.bauer598@example.com\n"},
     "is not an e-mail address"),
]


@pytest.mark.parametrize("case,tool,arguments,expected", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_arguments_are_one_error_line_and_change_nothing(case: str, tool: str, arguments: Any,
                                                                  expected: str) -> None:
    _refused(tool, arguments, expected)


def test_a_huge_integer_is_an_error_result_not_an_overflow() -> None:
    engine = weather_engine()
    with engine.fresh() as db:
        result = db.call("record_observation", {"station_id": "WS0001", "observed_at": "2025-06-15T09:00:00",
                                                "temperature_c": 1.0, "precipitation_mm": 0, "wind_kph": 10**30})
        assert not result.ok and "\n" not in str(result.error)
        assert db.fingerprint() == engine.fingerprint


def _cancellable_alert() -> str:
    """An alert that ``cancel_alert`` accepts on the seeded weather database (taken from the data, not pinned)."""
    engine = weather_engine()
    with engine.fresh() as db:
        alert_ids = [row[0] for row in db.query("SELECT alert_id FROM alerts ORDER BY alert_id")]
    for alert_id in alert_ids:
        with engine.fresh() as db:
            if db.call("cancel_alert", {"alert_id": alert_id}).ok:
                return str(alert_id)
    raise AssertionError("no cancellable alert in the seeded weather data")


def test_the_valid_forms_still_work() -> None:
    engine = weather_engine()
    with engine.fresh() as db:
        (email,) = db.query("SELECT email FROM subscribers ORDER BY subscriber_id LIMIT 1")[0]
        assert db.call("list_observations", {"station_id": "WS0002", "date": "2025-06-03"}).ok
        assert db.call("find_subscriber_by_email", {"email": email}).ok


@pytest.mark.parametrize("text,expected", [
    ('{"alert_id": "AL0001", "alert_id": "AL0002"}', "the key 'alert_id' appears twice in one object"),
    ("[" * 400 + "]" * 400, "nested deeper than 8 levels"),
    ('{"a": ' * 400 + "1" + "}" * 400, "nested deeper than 8 levels"),
    ('{"x": NaN}', "NaN is not a JSON number"),
    ('{"x": -Infinity}', "-Infinity is not a JSON number"),
    ('{"x": 1e999}', "numbers must be finite"),
    ('{"x": "' + "a" * 70_000 + '"}', "over 64,000 bytes"),
    ('["AL0001"]', "arguments must be a JSON object, got list"),
    ('{"alert_id": "AL0001"', "Expecting ',' delimiter at line 1, column 22"),
    ("", "Expecting value at line 1, column 1"),
])
def test_parse_arguments_refuses_with_one_line(text: str, expected: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_arguments(text)
    assert expected in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_parse_arguments_ignores_brackets_inside_strings() -> None:
    assert parse_arguments('{"note": "[[[[[[[[[[[[{{{{{{{{{{", "n": 1}') == {"note": "[[[[[[[[[[[[{{{{{{{{{{", "n": 1}


def test_cli_call_refuses_duplicate_keys_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["call", "weather", "get_alert", "--args", '{"alert_id": "AL0001", "alert_id": "AL0002"}'])
    err = capsys.readouterr().err
    assert code == 2 and "appears twice" in err and len(err.strip().splitlines()) == 1, err


def test_outcome_reward_is_zero_not_an_exception_for_hostile_trajectories() -> None:
    task = VerifiableTask("weather", 0, (ToolCall("cancel_alert", {"alert_id": _cancellable_alert()}),), ("cancelled",))
    hostile = [
        Trajectory((ToolCall("cancel_alert", {"alert_id": _nested(400)}),), "cancelled"),
        Trajectory((ToolCall("cancel_alert", _nested(1000, kind="list")),), "cancelled"),  # type: ignore[arg-type]
        Trajectory(({"name": "cancel_alert"},), "cancelled"),  # type: ignore[arg-type]
        Trajectory((ToolCall(None, None),), None),  # type: ignore[arg-type]
        Trajectory(None, "cancelled"),  # type: ignore[arg-type]
    ]
    for trajectory in hostile:
        assert outcome_reward(task, trajectory) == 0.0
    assert outcome_reward(task, Trajectory(task.gold_calls, "It is cancelled.")) == 1.0


# ---- seeded fuzzing: random argument trees against every weather and railway tool

_ODD_TEXT = ["", " ", "\n", "\x00", "\ud800", "٣", "2025-02-30", "2025-06-03\n", "'; DROP TABLE alerts; --",
             '" OR 1=1 --', "a" * 2001, "ＷＳ０００１", "WS0001 ", "null", "{}", "🙂"]


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.25:
        return rng.choice(_ODD_TEXT)
    if roll < 0.4:
        return rng.choice([0, -1, 1, 2**63, -(2**63) - 1, 10**40, 0.5, -0.0, float("nan"), float("inf"), 1e308])
    if roll < 0.5:
        return rng.choice([True, False, None])
    if roll < 0.6 and depth < 12:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.7 and depth < 12:
        return {rng.choice(["a", "", "alert_id", "x" * 50]): _random_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    if roll < 0.75:
        return _nested(rng.randint(5, 600), kind=rng.choice(["dict", "list"]))
    return "".join(rng.choice("AZaz09-_ :T.@\u0660\u00e9") for _ in range(rng.randint(0, 12)))


def _fuzzed_arguments(rng: random.Random, engine: Any, tool_name: str) -> Any:
    tool = engine.tools[tool_name]
    good = [ex["arguments"] for ex in tool.examples if ex["expect"] == "ok"]
    base = dict(rng.choice(good)) if good else {}
    if rng.random() < 0.1:
        return _random_value(rng)
    names = list(tool.param_names) + ["unexpected"]
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(names)
        if rng.random() < 0.15:
            base.pop(name, None)
        else:
            base[name] = _random_value(rng)
    return base


@pytest.mark.parametrize("domain", ["weather", "railway"])
def test_fuzzed_arguments_never_raise_and_failures_change_nothing(domain: str) -> None:
    engine = get_engine(domain)
    rng = random.Random(f"hostile-{domain}")
    names = sorted(engine.tools)
    failures = 0
    with engine.fresh() as db:
        state = db.fingerprint()
        for _ in range(250):
            name = rng.choice(names)
            arguments = _fuzzed_arguments(rng, engine, name)
            result = db.call(name, arguments)  # must not raise, whatever the arguments
            if not result.ok:
                failures += 1
                assert result.error and "\n" not in result.error and "Traceback" not in result.error, result.error
                assert db.fingerprint() == state, (name, arguments, result)
            elif result.writes:
                state = db.fingerprint()
    assert failures > 125  # the generator mostly produces bad calls; a generator that does not is no test


def test_the_fast_path_never_accepts_what_jsonschema_refuses() -> None:
    rng = random.Random("fast-vs-jsonschema")
    checked = accepted = 0
    for domain in filter(data_available, available_domains()):  # an imported domain needs its data installed
        engine = get_engine(domain)
        for name in sorted(engine.tools):
            fast = engine.fast_checks[name]
            if fast is None:
                continue
            validator = engine.validators[name]
            for _ in range(40):
                arguments = _fuzzed_arguments(rng, engine, name)
                if not isinstance(arguments, dict) or shape_problem(arguments) is not None:
                    continue  # refused before either path looks at it
                checked += 1
                if fast(arguments):
                    accepted += 1
                    assert validator.is_valid(arguments), (domain, name, arguments)
    assert checked > 500 and accepted > 50, (checked, accepted)


def test_verify_reports_reasons_for_a_hostile_trajectory() -> None:
    alert = _cancellable_alert()
    task = VerifiableTask("weather", 0, (ToolCall("cancel_alert", {"alert_id": alert}),), ("cancelled",))
    verdict = verify(task, Trajectory((ToolCall("cancel_alert", {"alert_id": alert + "\n"}),), ""))
    assert not verdict.solved and verdict.failed_checks() == ["execution", "fidelity", "completeness"]
