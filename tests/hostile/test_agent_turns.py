"""Hostile agent turns: a turn over the caps is refused before any of its calls runs, the episode's wall clock
covers the tools, the turn reader is linear, and duplicate keys are refused wherever a tool call is parsed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from domains.engine import ToolCall
from inference.client import LLMClient
from inference.endpoints import Endpoint
from train.environment.env import EnvConfig, Environment, EpisodeResult
from train.environment.policies import LLMPolicy, ScriptedPolicy
from train.environment.tasks import TrainingTask
from train.environment.turns import MAX_CALLS_PER_TURN, parse_turn
from train.environment.user_sim import ScriptedUser
from tests.hostile.fake_llm import FakeLLM

TASK = TrainingTask("hostile-turns", "weather", 0, "What is the status of station WS0001?",
                    (ToolCall("get_station", {"station_id": "WS0001"}),), ("active",))
WEATHER_TOOLS = {"get_station", "record_observation", "drop_all"}


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _observation(i: int) -> dict[str, Any]:
    return {"station_id": "WS0001", "observed_at": f"2025-06-14T{i % 24:02d}:00:00", "temperature_c": 20.0,
            "precipitation_mm": 0.0, "wind_kph": 5.0}


def _play(turns: list[Any], **config: Any) -> EpisodeResult:
    env = Environment(EnvConfig(subset_tools=False, show_prices=False, **config))
    return env.run(TASK, ScriptedPolicy(turns + ["Thanks, done."]), ScriptedUser(TASK))


def _ran(result: EpisodeResult) -> int:
    return sum(u.calls for u in result.usage.values())


def test_ten_thousand_calls_in_one_turn_run_none() -> None:
    turn = "".join(_call("get_station", {"station_id": "WS0001"}) for _ in range(10_000))
    start = time.perf_counter()
    result = _play([turn])
    assert time.perf_counter() - start < 30
    assert _ran(result) == 0 and result.cost_usd == 0
    assert result.format_errors == 1 and f"more than {MAX_CALLS_PER_TURN} tool calls" in result.format_error_reasons[0]


def test_one_call_over_the_cap_runs_none_and_the_cap_itself_runs_all() -> None:
    over = "".join(_call("get_station", {"station_id": "WS0001"}) for _ in range(MAX_CALLS_PER_TURN + 1))
    at = "".join(_call("get_station", {"station_id": "WS0001"}) for _ in range(MAX_CALLS_PER_TURN))
    refused, allowed = _play([over]), _play([at])
    assert _ran(refused) == 0 and refused.format_errors == 1
    assert _ran(allowed) == MAX_CALLS_PER_TURN and allowed.format_errors == 0


def test_a_smaller_configured_cap_is_what_counts() -> None:
    turn = "".join(_call("get_station", {"station_id": "WS0001"}) for _ in range(3))
    result = _play([turn], max_calls_per_turn=2)
    assert _ran(result) == 0 and "more than 2 tool calls" in result.format_error_reasons[0]


def test_480_writes_in_one_turn_run_none() -> None:
    turn = "".join(_call("record_observation", _observation(i)) for i in range(480))
    result = _play([turn])
    assert _ran(result) == 0 and result.format_errors == 1


def test_writes_over_the_write_cap_run_none_and_leave_the_database_alone() -> None:
    turn = "".join(_call("record_observation", _observation(i)) for i in range(5))
    result = _play([turn], max_writes_per_turn=4)
    assert _ran(result) == 0
    assert result.format_error_reasons == ["5 writes in one turn; none of them ran. Make at most 4 writes per turn"]
    ok = _play(["".join(_call("record_observation", _observation(i)) for i in range(4))], max_writes_per_turn=4)
    assert ok.usage["record_observation"].calls == 4 and ok.format_errors == 0


@pytest.mark.parametrize("block", [
    '{"name": "drop_all", "name": "get_station", "arguments": {"station_id": "WS0001"}}',
    '{"name": "get_station", "arguments": {"station_id": "WS0001", "station_id": "WS0002"}}',
    '{"name": "get_station", "arguments": {"station_id": "WS0001"}, "arguments": {"station_id": "WS0002"}}',
    '{"name": "get_station", "arguments": {"station_id": {"a": 1, "a": 2}}}',
])
def test_duplicate_keys_in_a_tool_call_are_refused(block: str) -> None:
    turn = parse_turn(f"<tool_call>{block}</tool_call>", WEATHER_TOOLS)
    assert turn.error is not None and "appears twice" in turn.error and not turn.calls
    result = _play([f"<tool_call>{block}</tool_call>"])
    assert _ran(result) == 0 and "appears twice" in result.format_error_reasons[0]


def test_nan_and_deep_nesting_in_a_tool_call_are_refused() -> None:
    nan = parse_turn('<tool_call>{"name": "get_station", "arguments": {"station_id": NaN}}</tool_call>', WEATHER_TOOLS)
    deep = parse_turn('<tool_call>{"name": "get_station", "arguments": ' + "[" * 20_000 + "]" * 20_000
                      + "}</tool_call>", WEATHER_TOOLS)
    assert nan.error and "NaN" in nan.error
    assert deep.error and "nested deeper" in deep.error


@pytest.mark.parametrize("turn, expected", [
    ("<tool_call>" * 40_000, "unbalanced"),
    ("<tool_call>{}</tool_call>" * 40_000, "more than 16 tool calls"),
    ("</tool_call>" * 40_000, "unbalanced"),
    ("<tool_call><tool_call>{}</tool_call></tool_call>", "unbalanced"),
    ("<think>" * 40_000 + "hello", None),
    ("<think>" + "x" * 400_000 + "</think>" + "<tool_call>" * 20_000, "unbalanced"),
])
def test_the_turn_reader_is_linear_on_pathological_tags(turn: str, expected: str | None) -> None:
    start = time.perf_counter()
    parsed = parse_turn(turn, WEATHER_TOOLS)
    elapsed = time.perf_counter() - start
    assert elapsed < 10, elapsed  # the quadratic reader took 141 s on 440 KB; bench/turns.py times this one
    if expected is None:
        assert parsed.error is None and parsed.final
    else:
        assert parsed.error is not None and expected in parsed.error


def test_thinking_is_dropped_and_a_closed_call_still_reads() -> None:
    turn = parse_turn("<think>plan</think>Checking.<think>more</think>" + _call("get_station", {"station_id": "W"}),
                      WEATHER_TOOLS)
    assert turn.error is None and turn.message == "Checking." and turn.calls[0].arguments == {"station_id": "W"}


def test_sleeping_code_calls_are_held_to_the_episode_budget() -> None:
    sleeper = _call("code_interpreter", {"code": "import time\ntime.sleep(9)\nprint('late')"})
    start = time.monotonic()
    result = _play([sleeper * 8], code_interpreter=True, max_episode_s=2.0)
    elapsed = time.monotonic() - start
    assert elapsed < 20, elapsed  # 8 x 9 s held one episode for 73 s before (loose for a busy machine)
    assert result.ended_by == "time_limit" and result.usage["code_interpreter"].calls <= 1


def test_a_slow_agent_is_stopped_by_the_episode_budget() -> None:
    class Slow:
        def act(self, messages: list[dict[str, str]]) -> str:
            time.sleep(0.4)
            return "Could you tell me more?"

    class Patient:
        def opening(self) -> str:
            return TASK.instruction

        def reply(self, agent_message: str) -> str:
            return "Please go on."

    env = Environment(EnvConfig(subset_tools=False, max_episode_s=1.0, max_turns=50))
    start = time.monotonic()
    result = env.run(TASK, Slow(), Patient())  # type: ignore[arg-type]
    assert result.ended_by == "time_limit" and time.monotonic() - start < 10  # 50 turns x 0.4 s without it
    assert result.error and "wall-clock budget" in result.error


def test_an_agent_endpoint_that_trickles_ends_the_episode_by_its_timeout(tmp_path: Path) -> None:
    with FakeLLM() as server:
        endpoint = Endpoint("trickle", server.base_url, "m", "local", "trickle")
        with LLMClient(endpoint, cache_dir=tmp_path / "c", timeout_s=1.0, max_retries=1, backoff_s=0.01) as client:
            policy = LLMPolicy(client)
            start = time.monotonic()
            real_act = policy.act
            policy.act = lambda messages: real_act([*messages[:-1], {"role": "user",  # type: ignore[method-assign]
                                                                     "content": "fault:trickle_body"}])
            result = Environment(EnvConfig(subset_tools=False)).run(TASK, policy, ScriptedUser(TASK))
    assert result.ended_by == "policy_error" and "timeout" in (result.error or "")
    assert time.monotonic() - start < 15  # two attempts of 1 s each, not a byte a second for minutes


def test_toolscale_evaluate_on_a_trickling_server_ends_by_its_timeout(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from tests.snapshots import published_warehouse
    from toolscale.cli import main

    warehouse = published_warehouse(tmp_path, ["weather"], tasks_per_domain=6)
    with FakeLLM(default="trickle_body") as server:
        registry = tmp_path / "endpoints.yaml"
        registry.write_text(yaml.safe_dump({"default": "slow", "endpoints": {"slow": {
            "base_url": server.base_url, "model": "m", "provider": "local", "pricing_key": "slow"}}}))
        start = time.monotonic()
        code = main(["evaluate", "slow", "--registry", str(registry), "--warehouse", warehouse, "--limit", "1",
                     "--max-turns", "2", "--timeout", "1", "--out", str(tmp_path / "plots"), "--quiet", "--json"])
        elapsed = time.monotonic() - start
    out = capsys.readouterr().out
    assert elapsed < 60, elapsed  # a byte a second used to hold it for ever
    assert code == 0, out
    report = json.loads(out[out.index("{"):])
    assert report["episodes"] == 1 and report["accuracy"] == 0
