"""Runs inside tau2's venv (.venv-tau2), never the project's: each scenario (a list of calls, each with its side:
"agent", "user" or "setup") in a fresh tau2 telecom environment, then prints one JSON list: per scenario the
operator's database, the user's database (device and surroundings) and which calls failed. A setup call names
the toolkit it runs on (``env``: "user" or "assistant", as a task's initialization action does).

    .venv-tau2/bin/python tests/interop/tau2_telecom_states.py < scenarios.json
"""

from __future__ import annotations

import json
import sys

from loguru import logger

logger.remove()  # tau2 logs every tool call

from tau2.data_model.message import ToolCall  # noqa: E402
from tau2.registry import registry  # noqa: E402


def run(calls: list[dict]) -> dict:
    env = registry.get_env_constructor("telecom")()
    failed = []
    for i, call in enumerate(calls):
        if call["side"] == "setup":  # an initialization action: a toolkit's function, then a sync
            toolkit = env.user_tools if call.get("env", "user") == "user" else env.tools
            try:
                getattr(toolkit, call["name"])(**call["arguments"])
                failed.append(False)
            except Exception:  # noqa: BLE001 - a failing action is data to compare
                failed.append(True)
            env.sync_tools()
            continue
        requestor = "user" if call["side"] == "user" else "assistant"
        answer = env.get_response(ToolCall(id=f"c{i}", name=call["name"], arguments=call["arguments"],
                                           requestor=requestor))
        failed.append(bool(answer.error))
    return {"operator": env.tools.db.model_dump(mode="json"), "user": env.user_tools.db.model_dump(mode="json"),
            "failed": failed}


if __name__ == "__main__":
    print(json.dumps([run(s) for s in json.load(sys.stdin)]))
