"""The LLM user acts on its own phone in a dual-control episode: told its own tools (and no other), it writes
``<tool_call>`` blocks, each runs on the episode's device as the user's call, it sees what the phone shows, and then
answers the agent. A synthesised telecom task, its agent the dialogue oracle (which asks the user to act), is solved
with the LLM user as with the scripted one. A call of a tool that is not the user's runs nothing.

The model behind the client is a stand-in on loopback (a few lines of policy over the chat messages: act on the tools
the agent names, then report; answer a question with what the prompt says the user knows), because SmolLM2-135M
does not follow the protocol reliably enough for a test; the client, the HTTP exchange, the prompt, the parsing,
the device and the verdict are the real ones."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from domains import external
from domains.registry import get_spec
from inference.client import LLMClient
from inference.endpoints import Endpoint
from train.environment.env import EnvConfig, Environment
from train.environment.policies import DialogueOracle, EmptyPolicy
from train.environment.tasks import TrainingTask
from train.environment.user_sim import STOP, LLMUser

pytestmark = pytest.mark.skipif(not all(external.available(s) for s in get_spec("telecom").sources.values()),
                                reason="tau2's telecom data is not installed (scripts/setup_tau2.sh)")
ENV = Environment(EnvConfig(subset_tools=False))
USER_TOOLS = sorted((t.name for t in get_spec("telecom").side_tools("user")), key=len, reverse=True)


def _stand_in_user(messages: list[dict[str, str]], rogue: str | None) -> str:
    """The stand-in model's next message as the user (its own messages are 'assistant', the agent's 'user')."""
    last = messages[-1]["content"]
    if last.startswith("<tool_response>"):
        return f"I did that; my phone now shows {last[15:120]}"
    if rogue is not None and "tool_call" not in str(messages[1:-1]):
        return f'<tool_call>{{"name": "{rogue}", "arguments": {{}}}}</tool_call>'
    named = [n for n in USER_TOOLS if re.search(rf"(?<!\w){n}(?!\w)", last)]
    if named:
        return "".join(f'<tool_call>{{"name": "{n}", "arguments": {{}}}}</tool_call>' for n in named[:1])
    if "?" in last:
        known = re.search(r"What you know: (.*)", messages[0]["content"])
        return known.group(1) if known else "I do not know."
    return STOP


@pytest.fixture(scope="module")
def client() -> Iterator[tuple[LLMClient, dict[str, Any]]]:
    state: dict[str, Any] = {"rogue": None, "systems": []}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            state["systems"].append(request["messages"][0]["content"])
            text = _stand_in_user(request["messages"], state["rogue"])
            body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": text}}],
                               "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = Endpoint("user-stand-in", f"http://127.0.0.1:{server.server_port}/v1", "m", "local", "hostile")
    llm = LLMClient(endpoint, max_retries=0, timeout_s=10)  # no cache: the stand-in answers each time
    try:
        yield llm, state
    finally:
        llm.close()
        server.shutdown()


@pytest.fixture(scope="module")
def synthesised(telecom_tasks: list[TrainingTask]) -> list[TrainingTask]:
    """The synthesised tasks of the session's telecom snapshot (tests/train/conftest.py)."""
    return [t for t in telecom_tasks if "-tau2-" not in t.task_id]


def test_the_llm_user_fixes_its_phone_when_the_agent_asks(client: tuple[LLMClient, dict[str, Any]],
                                                          synthesised: list[TrainingTask]) -> None:
    llm, state = client
    state["rogue"] = None
    assert len(synthesised) >= 5
    for task in synthesised:
        user = LLMUser(task, llm)
        result = ENV.run(task, DialogueOracle(task), user)
        assert result.solved, (task.task_id, result.failed_checks, user.history[-4:])
        assert not user.errors
        empty = ENV.run(task, EmptyPolicy(), LLMUser(task, llm))
        assert not empty.solved
    # the user was shown its own tools, and none of the agent's or the setup's
    prompt = state["systems"][-1]
    assert "toggle_airplane_mode:" in prompt and "turn_airplane_mode_on" not in prompt
    assert "get_customer_by_name:" not in prompt


@pytest.mark.parametrize("rogue", ["turn_airplane_mode_on", "enable_roaming", "no_such_tool"])
def test_a_tool_that_is_not_the_users_runs_nothing(client: tuple[LLMClient, dict[str, Any]],
                                                   synthesised: list[TrainingTask], rogue: str) -> None:
    llm, state = client
    state["rogue"] = rogue
    try:
        task = synthesised[0]
        session = ENV.start(task, LLMUser(task, llm))
        try:
            before = session.db.fingerprint()
            user = session.user
            reply = user.reply("Hello, how can I help?")
            assert session.db.fingerprint() == before and not session.domain_calls
            assert any(f"'{rogue}' is not a tool on your phone" in m["content"] for m in user.history), user.history
            assert reply and "tool_call" not in reply
        finally:
            session.close()
    finally:
        state["rogue"] = None
