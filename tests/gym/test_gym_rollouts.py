"""Gym runs the exported environment end to end: Gym's launcher (``ng_run``) starts the exported resources servers,
Gym's simple agent and Gym's model adapter for OpenAI-compatible chat endpoints (``vllm_model``) in front of the
local llama.cpp server (SmolLM2-135M; tests/gym/chat_shapes.py reshapes two message forms its schema refuses);
Gym's rollout command (``ng_collect_rollouts``) collects rollouts; each
rollout's reward must be the project's verifier's verdict on the calls and words of that rollout.

SmolLM2 on two shared CPU cores reads about 50 prompt tokens a second, so the rows sent here are the exported rows
with a short system prompt and only the gold's tools, at most 32 output tokens and 2 model calls per rollout, one
rollout per domain: to show the pieces work together, not a score.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from domains.engine import ToolCall
from inference.endpoints import load_endpoints
from inference.server import ManagedServer
from tests.gym.chat_shapes import ChatShapesProxy
from tests.gym.servers import free_port, neutral_env
from tests.gym_venv import ensure_gym_venv
from tests.snapshots import published_warehouse
from train.environment.tasks import load_training_set
from verifiers.types import Trajectory
from verifiers.verify import verify
from warehouse.gym_export import export_gym

DOMAINS = ["weather", "finance"]
ROLLOUTS_PER_DOMAIN = 1
pytestmark = pytest.mark.llm


def short_row(row: dict[str, Any], gold_tools: set[str]) -> dict[str, Any]:
    """The row with a one-line system prompt and only the gold's tools (the user's opening is kept)."""
    params = dict(row["responses_create_params"])
    system, user = params["input"]
    params["input"] = [{**system, "content": "You are a customer-service agent. Use the tools, then answer."}, user]
    params["tools"] = [t for t in params["tools"] if t["name"] in gold_tools]
    params["max_output_tokens"] = 32
    return {**row, "responses_create_params": params}


def ng(python: Path, command: str) -> str:
    return str(python.parent / command)


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python[server] is not installed (pip install -e .[llm])")
    root = tmp_path_factory.mktemp("gym-rollouts")
    warehouse = published_warehouse(root, DOMAINS, tasks_per_domain=12)
    return collect(root, warehouse, DOMAINS, ROLLOUTS_PER_DOMAIN)


def collect(root: Path, warehouse: str, domains: list[str], per_domain: int) -> dict[str, Any]:
    """Export ``warehouse`` for Gym under ``root``, start ng_run on ``domains`` with the local llama.cpp server, and
    collect ``per_domain`` rollouts of each with ng_collect_rollouts: the results, the tasks and the seconds taken."""
    python = ensure_gym_venv()
    out = root / "gym"
    export_gym(warehouse, "latest", out)
    tasks = {t.task_id: t for t in load_training_set(warehouse).tasks}
    rows = []
    for domain in domains:
        lines = (out / "resources_servers" / f"toolscale_{domain}" / "data" / "train.jsonl").read_text().splitlines()
        for line in lines[:per_domain]:
            row = json.loads(line)
            rows.append(short_row(row, {c.name for c in tasks[row["task_id"]].gold_calls}))
    (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # Gym makes a venv per server unless one is there: each is Gym's own venv (.venv-gym), nothing installed
    for server in [*(f"resources_servers/toolscale_{d}" for d in domains), "responses_api_agents/simple_agent",
                   "responses_api_models/vllm_model"]:
        (out / server).mkdir(parents=True, exist_ok=True)
        (out / server / ".venv").symlink_to(python.parent.parent)
    configs = [f"resources_servers/toolscale_{d}/configs/toolscale_{d}.yaml" for d in domains]
    configs.append("responses_api_models/vllm_model/configs/vllm_model.yaml")
    endpoint = load_endpoints().get("local-smollm2")
    port = free_port()
    env = {**neutral_env(), "PATH": f"{python.parent}:{os.environ.get('PATH', '')}"}
    with ManagedServer(endpoint, port=port, startup_timeout_s=180) as server, ChatShapesProxy(port) as proxy:
        agents = " ".join(f"++toolscale_{d}_simple_agent.responses_api_agents.simple_agent.max_steps=2"
                          for d in domains).split()
        log = root / "ng_run.log"
        launcher = subprocess.Popen(
            [ng(python, "ng_run"), f"+config_paths=[{','.join(configs)}]",
             f"+policy_base_url=http://127.0.0.1:{proxy.port}/v1",
             "+policy_api_key=none", f"+policy_model_name={endpoint.model}", "+skip_venv_if_present=true",
             *agents],
            cwd=out, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)
        try:
            wait_for_launcher(launcher, log)
            started = time.monotonic()
            collected = run_while_alive(
                [ng(python, "ng_collect_rollouts"), f"+input_jsonl_fpath={root / 'rows.jsonl'}",
                 f"+output_jsonl_fpath={root / 'rollouts.jsonl'}",
                 "+num_samples_in_parallel=1"],  # one at a time: llama.cpp keeps the last prompt's cache
                server, cwd=out, env=env, timeout_s=600 + 300 * len(rows))
            seconds = time.monotonic() - started
        finally:
            launcher.send_signal(signal.SIGINT)  # ng_run shuts its servers down on an interrupt
            try:
                launcher.wait(timeout=60)
            except subprocess.TimeoutExpired:
                launcher.kill()
    assert collected.returncode == 0, collected.stderr[-1500:] + log.read_text()[-6000:]
    results = [json.loads(line) for line in (root / "rollouts.jsonl").read_text().splitlines()]
    return {"results": results, "tasks": tasks, "seconds": seconds}


def run_while_alive(argv: list[str], server: ManagedServer, cwd: Path, env: dict[str, str],
                    timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end, failing at once if the llama.cpp server dies meanwhile: Gym's model adapter retries
    a refused connection without end, so a dead server would otherwise hold the test until the timeout."""
    out, err = cwd / "collect.out", cwd / "collect.err"  # files, not pipes: nobody reads a pipe while we poll
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, text=True)
        deadline = time.monotonic() + timeout_s
        while process.poll() is None:
            if server.process is not None and server.process.poll() is not None:
                process.kill()
                process.wait()
                pytest.fail(f"the llama.cpp server died (rc {server.process.returncode}) during the rollouts; "
                            f"last log lines:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                process.kill()
                process.wait()
                pytest.fail(f"ng_collect_rollouts did not end within {timeout_s:g}s")
            time.sleep(1.0)
    return subprocess.CompletedProcess(argv, process.returncode, out.read_text(), err.read_text())


def wait_for_launcher(launcher: subprocess.Popen[str], log: Path, timeout_s: float = 400.0) -> None:
    """Until ng_run says every server is up ("All N / N servers ready!" in its log)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and launcher.poll() is None:
        if "servers ready!" in log.read_text(errors="replace"):
            return
        time.sleep(2)
    raise RuntimeError("ng_run's servers did not come up:\n" + log.read_text(errors="replace")[-4000:])


def trajectory(response: dict[str, Any]) -> Trajectory:
    """The calls and the words of a rollout, as the verifier reads a trajectory."""
    calls, said = [], []
    for item in response.get("output") or []:
        if item.get("type") == "function_call":
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                continue  # the agent never sent it: unparseable arguments are answered without a call
            calls.append(ToolCall(item["name"], arguments if isinstance(arguments, dict) else {}))
        elif item.get("type") == "message" and item.get("role") == "assistant":
            said += [p.get("text", "") for p in item.get("content") or [] if isinstance(p, dict)]
    return Trajectory(tuple(calls), "\n".join(said))


def test_rollouts_collected_by_gym_score_as_the_verifier_scores(rollouts: dict[str, Any]) -> None:
    results, tasks = rollouts["results"], rollouts["tasks"]
    assert len(results) == ROLLOUTS_PER_DOMAIN * len(DOMAINS)
    per_domain: dict[str, list[float]] = {}
    for result in results:
        task = tasks[result["task_id"]]
        ours = 1.0 if verify(task.verifiable(), trajectory(result["response"])).solved else 0.0
        assert result["reward"] == ours, (result["task_id"], result.get("failed"), trajectory(result["response"]))
        assert set(result["checks"]) >= {"execution", "fidelity", "completeness", "identification"}
        per_domain.setdefault(task.domain, []).append(result["reward"])
    print(json.dumps({"seconds": round(rollouts["seconds"], 1), **{
        d: {"rollouts": len(r), "mean_reward": sum(r) / len(r), "agree": len(r)} for d, r in per_domain.items()}}))
