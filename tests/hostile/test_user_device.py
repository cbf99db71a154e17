"""Hostile agent messages to a dual-control user (telecom): the scripted user and the LLM user act on their phone
under the agent's own caps and parser. More than 16 calls in one message, duplicate keys, arguments nested 50,000
deep, NaN, an object never closed: each is said back as a format error, nothing runs on the phone, nothing raises.
And the episode's wall budget ends a run of sleeping code-interpreter calls, in one turn or in eight."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest

from domains import external
from domains.engine import ToolCall
from domains.registry import get_engine, get_spec
from train.environment.env import EnvConfig, Environment
from train.environment.policies import ScriptedPolicy
from train.environment.tasks import TrainingTask
from train.environment.turns import MAX_CALLS_PER_TURN
from train.environment.user_sim import MAX_DEVICE_CALLS, MAX_DEVICE_ROUNDS, STOP, Device, LLMUser, ScriptedUser

pytestmark = pytest.mark.skipif(not all(external.available(s) for s in get_spec("telecom").sources.values()),
                                reason="tau2's telecom data is not installed (scripts/setup_tau2.sh)")
TASK = TrainingTask("hostile-device", "telecom", 0, "My phone has no service.", ["your phone number is 555-0100"])
DEEP = '{"a": ' * 50_000 + "1" + "}" * 50_000


@pytest.fixture()
def device() -> Any:
    db = get_engine("telecom").fresh()
    calls: list[ToolCall] = []
    yield Device(db, calls.append), calls, db
    db.close()


def _scripted(device: Any) -> tuple[ScriptedUser, list[ToolCall], Any]:
    dev, calls, db = device
    user = ScriptedUser(TASK)
    user.bind_device(dev)
    return user, calls, db


SCRIPTED_REFUSED = [
    ("2,000 names in one message", "toggle_airplane_mode " * 2_000, f"more than {MAX_CALLS_PER_TURN}"),
    ("one name over the cap", "check_status_bar " * (MAX_CALLS_PER_TURN + 1), f"more than {MAX_CALLS_PER_TURN}"),
    ("duplicate keys", 'toggle_roaming {"on": true, "on": false}', "appears twice"),
    ("50,000-deep arguments", f"toggle_airplane_mode {DEEP}", "cannot be read"),
    ("20-deep arguments", "toggle_airplane_mode " + '{"a": ' * 20 + "1" + "}" * 20, "nested deeper"),
    ("NaN", 'toggle_airplane_mode {"x": NaN}', "NaN"),
    ("an object never closed", 'toggle_airplane_mode {"x": "', "not closed"),
    ("70 KB of arguments", 'toggle_airplane_mode {"x": "' + "y" * 70_000 + '"}', "not closed"),
    ("a huge integer", 'toggle_airplane_mode {"x": ' + "9" * 5_000 + "}", "cannot be read"),
    ("two names, the second bad", 'check_status_bar {} then toggle_roaming {"a": 1, "a": 1}', "appears twice"),
]


@pytest.mark.parametrize(("label", "message", "needle"), SCRIPTED_REFUSED, ids=[c[0] for c in SCRIPTED_REFUSED])
def test_the_scripted_user_refuses_what_the_agent_parser_refuses_and_runs_nothing(label: str, message: str,
                                                                                  needle: str, device: Any) -> None:
    user, calls, db = _scripted(device)
    before = db.fingerprint()
    reply = user.reply(f"Please run {message} on your phone.")
    assert reply.startswith("I could not do that on my phone:") and needle in reply, reply[:300]
    assert calls == [] and db.fingerprint() == before
    assert "\n" not in reply and len(reply) < 500


def test_the_scripted_user_runs_up_to_the_cap(device: Any) -> None:
    user, calls, _ = _scripted(device)
    reply = user.reply("Please run " + "check_status_bar " * MAX_CALLS_PER_TURN)
    assert len(calls) == MAX_CALLS_PER_TURN and reply.count("I did check_status_bar") == MAX_CALLS_PER_TURN


def test_braces_inside_strings_do_not_end_the_arguments(device: Any) -> None:
    user, calls, _ = _scripted(device)
    user.reply('Please run check_app_status {"app_name": "a}{b\\"}"} and tell me.')
    assert [c.arguments for c in calls] == [{"app_name": 'a}{b"}'}]


@dataclass
class _Reply:
    ok: bool
    text: str | None
    error_kind: str | None = None
    error_detail: str | None = None


class _Model:
    """The model behind the LLM user: writes the given texts in turn (the last one again when they run out)."""

    def __init__(self, *texts: str) -> None:
        self.texts, self.asked = list(texts), 0

    def chat(self, messages: list[dict[str, str]], **_: Any) -> _Reply:
        self.asked += 1
        return _Reply(True, self.texts[min(self.asked, len(self.texts)) - 1])


def _block(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


LLM_REFUSED = [
    ("duplicate name keys", _block('{"name": "toggle_wifi", "name": "toggle_airplane_mode", "arguments": {}}'),
     "appears twice"),
    ("duplicate argument keys", _block('{"name": "toggle_roaming", "arguments": {"on": 1, "on": 2}}'), "appears twice"),
    ("50,000-deep arguments", _block('{"name": "toggle_wifi", "arguments": ' + DEEP + "}"), "not valid JSON"),
    ("an extra key", _block('{"name": "toggle_wifi", "arguments": {}, "also": "reboot_device"}'),
     '{"name": <string>, "arguments": <object>}'),
    ("a name that is a list", _block('{"name": ["toggle_wifi"], "arguments": {}}'), '"name": <string>'),
    ("NaN", _block('{"name": "toggle_wifi", "arguments": {"x": NaN}}'), "NaN"),
    ("one block over the cap", _block('{"name": "check_status_bar", "arguments": {}}') * (MAX_DEVICE_CALLS + 1),
     f"more than {MAX_DEVICE_CALLS} tool calls"),
    ("not JSON", _block("toggle_wifi please"), "not valid JSON"),
]


@pytest.mark.parametrize(("label", "text", "needle"), LLM_REFUSED, ids=[c[0] for c in LLM_REFUSED])
def test_the_llm_user_parses_its_calls_as_strictly_as_the_agent(label: str, text: str, needle: str,
                                                                device: Any) -> None:
    dev, calls, db = device
    before = db.fingerprint()
    user = LLMUser(TASK, _Model(text, "My phone shows nothing new."))  # type: ignore[arg-type]
    user.bind_device(dev)
    reply = user.reply("Could you check your status bar?")
    assert reply == "My phone shows nothing new."
    assert calls == [] and db.fingerprint() == before
    shown = next(m["content"] for m in user.history if m["content"].startswith("<tool_response>"))
    assert "Error:" in shown and needle in shown, shown[:300]


def test_the_llm_user_acting_for_ever_stops_at_the_agents_cap(device: Any) -> None:
    dev, calls, _ = device
    model = _Model(_block('{"name": "check_status_bar", "arguments": {}}') * MAX_DEVICE_CALLS)
    user = LLMUser(TASK, model)  # type: ignore[arg-type]
    user.bind_device(dev)
    assert user.reply("Could you check your status bar?") == STOP
    assert len(calls) == MAX_DEVICE_ROUNDS * MAX_DEVICE_CALLS == MAX_CALLS_PER_TURN
    assert user.errors and "rounds of tool calls" in user.errors[0]


WEATHER = TrainingTask("hostile-budget", "weather", 0, "What is the status of station WS0001?", [])
SLEEPER = '<tool_call>{"name": "code_interpreter", "arguments": {"code": "import time\\ntime.sleep(9)"}}</tool_call>'


@pytest.mark.parametrize(("label", "turns"), [("8 calls in one turn", [SLEEPER * 8]),
                                              ("8 turns of one call", [SLEEPER] * 8)])
def test_sleeping_code_calls_end_at_the_episode_budget(label: str, turns: list[str]) -> None:
    env = Environment(EnvConfig(subset_tools=False, show_prices=False, code_interpreter=True, max_episode_s=2.0))
    started = time.monotonic()
    result = env.run(WEATHER, ScriptedPolicy([*turns, "Thanks, done."]), ScriptedUser(WEATHER))
    assert time.monotonic() - started < 15  # 8 x 9 s = 72 s without the budget (loose for a busy machine)
    assert result.ended_by == "time_limit" and result.usage["code_interpreter"].calls <= 1
    assert "wall-clock budget" in (result.error or "")


def test_a_deep_agent_message_is_a_format_error_not_a_user_error(device: Any) -> None:
    user, calls, _ = _scripted(device)
    reply = user.reply("toggle_airplane_mode " + DEEP)
    assert json.dumps(reply) and reply.startswith("I could not do that") and calls == []
