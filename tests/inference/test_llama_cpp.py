"""The client against a REAL llama.cpp server with the SmolLM2-135M GGUF (started by the project on port 8310):
a completion, a forced tool call, a cache hit that sends nothing to the server, token and cost accounting, and
the call records in a real DuckDB warehouse. Requests pass through a counting proxy on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (pip install -e .[llm])")

from inference.budget import Budget  # noqa: E402
from inference.client import LLMClient, force_tool  # noqa: E402
from inference.endpoints import Endpoint, check_health, load_endpoints  # noqa: E402
from inference.serving import SERVING_DIR_ENV  # noqa: E402
from inference.cost import Price, table_lookup  # noqa: E402
from tests.inference.conftest import Local  # noqa: E402

pytestmark = pytest.mark.llm
SERVE_CLI_PORT = 8311
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def test_completion(local: Local, tmp_path: Path) -> None:
    with LLMClient(local.endpoint, cache_dir=tmp_path, stage="test") as llm:
        reply = llm.chat([{"role": "user", "content": "Name one colour."}], max_tokens=16, temperature=0)
    assert reply.ok, reply.error_detail
    assert reply.text and reply.text.strip()
    assert reply.prompt_tokens > 0 and 0 < reply.completion_tokens <= 16
    assert reply.cost_usd == 0.0  # the local model: no price in the lookup, so 0
    assert reply.finish_reason in ("stop", "length")


def forced_call(llm: LLMClient, question: list[dict[str, str]], tool: dict[str, Any]) -> tuple[Any, Any]:
    """The one tool call the server makes when forced to call ``tool``, and the reply that carries it."""
    name = tool["function"]["name"]
    reply = llm.chat(question, tools=[tool], tool_choice=force_tool(name), max_tokens=48, temperature=0)
    assert reply.ok, reply.error_detail
    assert [c.name for c in reply.tool_calls] == [name]
    return reply.tool_calls[0], reply


def test_forced_tool_call_has_valid_json_arguments_and_the_conversation_continues(local: Local,
                                                                                  tmp_path: Path) -> None:
    question = [{"role": "user", "content": "What is the weather in Paris right now?"}]
    with LLMClient(local.endpoint, cache_dir=tmp_path) as llm:
        call, reply = forced_call(llm, question, WEATHER_TOOL)
        assert isinstance(call.arguments, dict) and isinstance(call.arguments.get("city"), str), call.arguments_json
        assert reply.message()["content"] == ""
        follow_up = llm.chat([*question, reply.message(),
                              {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}],
                             tools=[WEATHER_TOOL], max_tokens=24, temperature=0)
    assert follow_up.ok, follow_up.error_detail  # llama.cpp answers 500 here if content were null


def test_a_tool_with_a_pattern_is_answered_and_the_server_lives_on(local: Local, tmp_path: Path) -> None:
    """The domains' date parameters carry ``pattern: ^\\d{4}-\\d{2}-\\d{2}$``; llama-cpp-python's grammar converter
    cannot read ``\\d`` and its server segfaulted on such a tool. Ours leaves patterns out of the grammar."""
    tool = {"type": "function", "function": {
        "name": "find_customer", "description": "Find a customer by name and date of birth",
        "parameters": {"type": "object", "required": ["full_name", "date_of_birth"], "properties": {
            "full_name": {"type": "string"},
            "date_of_birth": {"type": "string", "format": "date", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}}}}}
    question = [{"role": "user", "content": "I am Ana Silva, born 1990-04-02. Find my record."}]
    with LLMClient(local.endpoint, cache_dir=tmp_path) as llm:
        forced_call(llm, question, tool)
        assert local.server.process is None or local.server.process.poll() is None, local.server.log_tail()
        after = llm.chat([{"role": "user", "content": "Name one colour."}], max_tokens=8, temperature=0)
    assert after.ok, after.error_detail


def test_a_repeat_is_a_cache_hit_and_reaches_no_server(local: Local, tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "Say the word 'cache'."}]
    with LLMClient(local.endpoint, cache_dir=tmp_path / "cache") as llm:
        first = llm.chat(messages, max_tokens=12, temperature=0)
        sent = local.proxy.chat_requests
        second = llm.chat(messages, max_tokens=12, temperature=0)
    with LLMClient(local.endpoint, cache_dir=tmp_path / "cache") as rerun:  # a new run resumes from the cache
        third = rerun.chat(messages, max_tokens=12, temperature=0)
    assert first.ok and not first.cache_hit
    assert second.cache_hit and third.cache_hit
    assert local.proxy.chat_requests == sent
    assert second.text == third.text == first.text
    assert second.prompt_tokens == first.prompt_tokens and second.cost_usd == 0.0


def test_tokens_and_cost_are_accounted_and_recorded_in_the_warehouse(local: Local, tmp_path: Path) -> None:
    price = Price(150.0, 600.0, "test figures, not a real price")  # the lookup wins over the local default of 0
    budget = Budget(10.0)
    warehouse = tmp_path / "wh.duckdb"
    questions = ["Count to three.", "Name a fruit.", "Name a planet."]
    usages_before = len(local.proxy.usages)
    with LLMClient(local.endpoint, cache_dir=tmp_path / "cache", stage="accounting", budget=budget,
                   pricing=table_lookup({"local-smollm2": price}), max_concurrency=2) as llm:
        replies = [llm.chat([{"role": "user", "content": q}], max_tokens=12, temperature=0, task_id=f"t{i}")
                   for i, q in enumerate(questions)]
        replies.append(llm.chat([{"role": "user", "content": questions[0]}], max_tokens=12, temperature=0))
        totals = llm.totals()
        assert llm.flush_records(warehouse) == 4
    served = local.proxy.usages[usages_before:]
    assert len(served) == 3  # the fourth was a cache hit
    assert [(r.prompt_tokens, r.completion_tokens) for r in replies[:3]] == \
        [(u["prompt_tokens"], u["completion_tokens"]) for u in served]
    for reply in replies[:3]:
        assert reply.cost_usd == pytest.approx((reply.prompt_tokens * 150 + reply.completion_tokens * 600) / 1e6)
    assert budget.spent_usd == pytest.approx(sum(r.cost_usd for r in replies[:3]))
    assert totals["cost_usd"] == pytest.approx(budget.spent_usd) and totals["cache_hits"] == 1

    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute("SELECT endpoint, model, provider, stage, task_id, prompt_tokens, completion_tokens, "
                           "cost_usd, cache_hit, attempts, error_kind, latency_s FROM llm_calls ORDER BY call_id"
                           ).fetchall()
    finally:
        con.close()
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == \
        [("local-smollm2", "SmolLM2-135M-Instruct", "local", "accounting")] * 4
    assert [r[4] for r in rows] == ["t0", "t1", "t2", None]
    assert [(r[5], r[6]) for r in rows] == [(r.prompt_tokens, r.completion_tokens) for r in replies]
    assert [r[7] for r in rows] == pytest.approx([r.cost_usd for r in replies])
    assert [(r[8], r[9], r[10]) for r in rows] == [(False, 1, None)] * 3 + [(True, 0, None)]
    assert all(r[11] > 0 for r in rows)


def test_toolscale_serve_runs_until_interrupted_and_leaves_nothing_behind(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --port N`: the registry points at N while it runs (and back after), a taken port is one line and
    exit 2, and tau2's own LLM agent gets tool calls from the server."""
    env = {**os.environ, "PYTHONPATH": os.getcwd(), SERVING_DIR_ENV: str(tmp_path / "serving")}
    monkeypatch.setenv(SERVING_DIR_ENV, env[SERVING_DIR_ENV])  # for this process's registry reads; undone after
    serve = subprocess.Popen([sys.executable, "-m", "toolscale.cli", "serve", "local-smollm2", "--port",
                              str(SERVE_CLI_PORT)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env)
    endpoint = load_endpoints().get("local-smollm2").with_port(SERVE_CLI_PORT)
    try:
        banner = serve.stdout.readline()
        assert f"at {endpoint.base_url}" in banner, banner
        server_pid = int(banner.split("(pid ")[1].split(")")[0])
        assert check_health(endpoint).ok
        assert load_endpoints().get("local-smollm2").base_url == endpoint.base_url  # the --port given
        listed = subprocess.run([sys.executable, "-m", "toolscale.cli", "endpoints", "--json"], env=env,
                                capture_output=True, text=True, timeout=60)
        [row] = [r for r in json.loads(listed.stdout) if r["name"] == "local-smollm2"]
        assert (row["base_url"], row["ok"]) == (endpoint.base_url, True)

        again = subprocess.run([sys.executable, "-m", "toolscale.cli", "serve", "--port", str(SERVE_CLI_PORT)],
                               env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stderr
        assert f"port {SERVE_CLI_PORT} is taken" in again.stderr

        calls = tau2_agent_calls(endpoint)
        assert calls and {c["name"] for c in calls} <= {"create_task", "get_users", "update_task_status",
                                                         "transfer_to_human_agents"}, calls

        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) == 0
        assert "stopped" in serve.stdout.read()
    finally:
        serve.kill()
        os.environ.pop(SERVING_DIR_ENV, None)
    assert not check_health(endpoint, timeout=1).ok
    assert load_endpoints().get("local-smollm2").port == 8089  # back to the registry's own port
    deadline = time.monotonic() + 10
    while Path(f"/proc/{server_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{server_pid}").exists()


def test_a_port_taken_by_another_program_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        taken = subprocess.run([sys.executable, "-m", "toolscale.cli", "serve", "--port", str(port)],
                               env={**os.environ, "PYTHONPATH": os.getcwd(),
                                    SERVING_DIR_ENV: str(tmp_path / "serving")},
                               capture_output=True, text=True, timeout=60)
    assert taken.returncode == 2
    assert taken.stderr == f"error: port {port} on 127.0.0.1 is taken by another program; pick another port " \
                           f"(--port N)\n"


def tau2_agent_calls(endpoint: Endpoint) -> list[dict[str, Any]]:
    """The tool calls tau2's LLMAgent (in .venv-tau2) makes in one turn against ``endpoint``."""
    from tests.tau2_venv import ensure_tau2_venv

    python = ensure_tau2_venv()
    script = Path(__file__).resolve().parents[1] / "interop" / "tau2_agent_calls.py"
    done = subprocess.run([str(python), str(script), endpoint.base_url, endpoint.model, "1"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["tool_calls"]
