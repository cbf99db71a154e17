"""Runs inside tau2's venv (.venv-tau2): tau2's own evaluator (``evaluate_simulation``) on trajectories of its
telecom tasks. Reads a JSON list of {"task_id", "calls": [{"name", "arguments", "side"}]} on stdin and prints the
list of rewards. Each call is made, in order, by the agent (an assistant message) or the user (a user message),
in an environment set up with the task's initialization actions, as a simulation would make it.

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv-tau2/bin/python tests/interop/tau2_telecom_verdicts.py < runs.json
"""

from __future__ import annotations

import json
import sys
from datetime import datetime

from loguru import logger

logger.remove()

from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage  # noqa: E402
from tau2.data_model.simulation import SimulationRun, TerminationReason  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.registry import registry  # noqa: E402


def reward(task, calls: list[dict]) -> float:
    env = registry.get_env_constructor("telecom")()
    init = task.initial_state
    env.set_state(init.initialization_data if init else None, init.initialization_actions if init else None, [])
    messages = []
    for i, call in enumerate(calls):
        requestor = "user" if call["side"] == "user" else "assistant"
        tool_call = ToolCall(id=f"c{i}", name=call["name"], arguments=call["arguments"], requestor=requestor)
        kind = UserMessage if requestor == "user" else AssistantMessage
        messages.append(kind(role=requestor, content=None, tool_calls=[tool_call]))
        messages.append(env.get_response(tool_call))
    messages.append(AssistantMessage(role="assistant", content="Done."))
    now = datetime.now().isoformat()
    sim = SimulationRun(id="replay", task_id=task.id, timestamp=now, start_time=now, end_time=now, duration=0.0,
                        termination_reason=TerminationReason.AGENT_STOP, messages=messages)
    return evaluate_simulation(simulation=sim, task=task, evaluation_type=EvaluationType.ALL, solo_mode=False,
                               domain="telecom").reward


if __name__ == "__main__":
    tasks = {t.id: t for t in registry.get_tasks_loader("telecom")(None)}
    print(json.dumps([reward(tasks[r["task_id"]], r["calls"]) for r in json.load(sys.stdin)]))
