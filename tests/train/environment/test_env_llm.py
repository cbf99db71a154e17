"""LLM experts and the LLM user simulator against the REAL local llama.cpp server (SmolLM2-135M GGUF, port 5800),
and an expert whose endpoint does not answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (pip install -e .[llm])")

from inference.client import LLMClient  # noqa: E402
from inference.endpoints import Endpoint, load_endpoints  # noqa: E402
from inference.pricing import synthetic_schedules  # noqa: E402
from inference.server import ManagedServer  # noqa: E402
from train.environment.env import ENDINGS, EnvConfig, Environment  # noqa: E402
from train.environment.experts import ExpertPool, ExpertSpec  # noqa: E402
from train.environment.policies import LLMPolicy, ScriptedPolicy, tool_call_text  # noqa: E402
from train.environment.tasks import TrainingSet, load_training_set  # noqa: E402
from train.environment.user_sim import LLMUser, ScriptedUser  # noqa: E402

pytestmark = pytest.mark.llm
SERVER_PORT = 5800
DEAD_PORT = 5803  # nothing listens here
SCHEDULES = synthetic_schedules(seed=0)


@pytest.fixture(scope="module")
def served() -> Iterator[Endpoint]:
    endpoint = load_endpoints().get("local-smollm2")
    with ManagedServer(endpoint, port=SERVER_PORT, startup_timeout_s=120) as server:
        yield server.endpoint


@pytest.fixture(scope="module")
def data(snapshot_warehouse: str) -> TrainingSet:
    return load_training_set(snapshot_warehouse, domains=["weather"], limit=3)


def test_an_expert_answers_through_the_client_priced_from_the_instance_schedule(served: Endpoint, data: TrainingSet,
                                                                               tmp_path: Path) -> None:
    task = data.tasks[0]
    experts = ExpertPool([ExpertSpec(served, priced_as="Qwen/Qwen3-32B", max_tokens=24),
                          ExpertSpec(served.with_port(DEAD_PORT), max_tokens=24)], cache_dir=tmp_path, timeout_s=20)
    ask = tool_call_text("expert-1", {"question": "What is 2 + 2? Answer briefly."})
    dead = tool_call_text("expert-2", {"question": "Are you there?"})
    with experts:
        env = Environment(EnvConfig(subset_tools=False, run_seed=1), SCHEDULES, experts)
        result = env.run(task, ScriptedPolicy([ask, dead, "Done."]), ScriptedUser(task))
        records = experts.records()
    prompt = result.messages[0]["content"]
    assert "SmolLM2" not in prompt and "Qwen" not in prompt  # model names stay hidden behind the aliases
    tools = {t["name"]: t for t in json.loads(prompt.split("# Tools\n", 1)[1].split("\n\n", 1)[0])}
    schedule = SCHEDULES.training[[s.name for s in SCHEDULES.training].index(result.schedule)]
    price = schedule.price("Qwen/Qwen3-32B")
    assert tools["expert-1"]["usd_per_1m_input_tokens"] == price.input_usd_per_1m
    answer = json.loads(result.messages[3]["content"].split("\n")[1])[0]
    assert answer["name"] == "expert-1" and answer["result"]["answer"].strip()
    ok = [r for r in records if r.error_kind is None]
    assert len(ok) == 1 and ok[0].model == "SmolLM2-135M-Instruct" and ok[0].stage == "expert"
    expected = price.cost_usd(ok[0].prompt_tokens, ok[0].completion_tokens)
    assert expected > 0 and result.usage["expert-1"].calls == 1
    assert result.usage["expert-1"].cost_usd == pytest.approx(expected)
    assert result.usage["expert-1"].latency_s > 0
    # the unreachable endpoint is an error observation; the episode went on to its end
    failure = json.loads(result.messages[5]["content"].split("\n")[1])[0]
    assert failure["name"] == "expert-2" and "did not answer (connection)" in failure["result"]["error"]
    assert result.usage["expert-2"].errors == 1 and result.usage["expert-2"].cost_usd == 0
    assert result.format_errors == 0 and result.ended_by == "user_stop"


def test_the_llm_user_plays_the_scenario_and_the_episode_ends(served: Endpoint, data: TrainingSet,
                                                             tmp_path: Path) -> None:
    task = data.tasks[1]
    with LLMClient(served, cache_dir=tmp_path, stage="user-simulator") as client:
        user = LLMUser(task, client, params={"temperature": 0.0, "max_tokens": 16})
        result = Environment(EnvConfig(max_turns=1)).run(
            task, ScriptedPolicy(["Could you tell me your station id?"]), user)
        assert len(client.records) == 1 and client.records[0].error_kind is None
    assert result.ended_by in ("user_stop", "turn_limit") and not user.errors
    assert task.user_scenario["instructions"]["reason_for_call"] in user.history[0]["content"]
    assert any(m["role"] == "user" for m in result.messages[2:])  # the model's replies reached the agent


def test_smollm2_as_the_agent_runs_an_episode_that_ends_and_is_counted(served: Endpoint, data: TrainingSet,
                                                                       tmp_path: Path) -> None:
    task = data.tasks[2]
    with LLMClient(served, cache_dir=tmp_path, stage="orchestrator") as client:
        policy = LLMPolicy(client, task.task_id, params={"temperature": 0.0, "max_tokens": 48})
        result = Environment(EnvConfig(max_turns=1), SCHEDULES).run(task, policy, ScriptedUser(task))
        assert len(client.records) == result.turns and policy.completion_tokens > 0
    assert result.ended_by in ENDINGS and result.turns == 1 and result.error is None
    said = [m for m in result.messages if m["role"] == "assistant"]
    assert len(said) == result.turns  # every model turn is in the transcript and was read one way or another
    assert result.format_errors == len(result.format_error_reasons)
