"""The tau2 side of the comparison: run inside a Python that has tau2 installed (never this project's venv).

It reads one JSON request per line on stdin and answers one JSON line on stdout, so that one process serves a
whole run (tau2's import costs seconds). It imports only the standard library and tau2. Requests:

- ``{"op": "replay", "domain": d, "calls": [...]}``: a fresh environment, the calls in order (each call's error
  recorded, as tau2's evaluator does for gold actions), then the changed top-level records against the
  initial database: ``{"errors": [...], "changed": {collection: {key: record}}}``.
- ``{"op": "evaluate", "domain": d, "task_id": id, "calls": [...], "text": s}``: tau2's ``evaluate_simulation``
  (EvaluationType.ALL) on a trajectory of those calls followed by one assistant message ``text``.
- ``{"op": "time", "domain": d, "calls": [...], "repeat": n}``: seconds for n x (fresh environment, replay,
  DB hashes), tau2's own gold replay, measured here so that process start and pipes are not counted. A call may
  carry ``side`` ("user"; "setup" with ``env``, "user" or "assistant": an initialization action).
- ``{"op": "initial", "domain": d}``: the initial database as JSON (``model_dump``).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from typing import Any

from tau2.data_model.message import AssistantMessage, ToolCall
from tau2.data_model.simulation import SimulationRun, TerminationReason
from tau2.data_model.tasks import EnvFunctionCall
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.registry import registry

_TASKS: dict[str, dict[str, Any]] = {}
_INITIAL: dict[str, dict[str, Any]] = {}


def _env(domain: str) -> Any:
    return registry.get_env_constructor(domain)()


def _dump(env: Any) -> dict[str, Any]:
    return env.tools.db.model_dump(mode="json")


def _tasks(domain: str) -> dict[str, Any]:
    if domain not in _TASKS:
        _TASKS[domain] = {t.id: t for t in registry.get_tasks_loader(domain)(None)}
    return _TASKS[domain]


def _initial(domain: str) -> dict[str, Any]:
    if domain not in _INITIAL:
        _INITIAL[domain] = _dump(_env(domain))
    return _INITIAL[domain]


def _run(env: Any, calls: list[dict[str, Any]]) -> list[str | None]:
    """Each call as tau2's evaluator replays a gold: by the assistant, or by the user (``side: "user"``); a setup call
    (``side: "setup"``, a task's initialization action) runs on the toolkit its ``env`` names, as ``set_state`` does."""
    errors: list[str | None] = []
    for call in calls:
        try:
            side = call.get("side", "agent")
            if side == "setup":
                env.run_env_function_call(EnvFunctionCall(env_type=call.get("env", "user"), func_name=call["name"],
                                                          arguments=call["arguments"]))
            else:
                env.make_tool_call(call["name"], requestor="user" if side == "user" else "assistant",
                                   **call["arguments"])
            errors.append(None)
        except Exception as exc:  # noqa: BLE001 - any failure of a tool is data to report
            errors.append(f"{type(exc).__name__}: {exc}")
    return errors


def replay(req: dict[str, Any]) -> dict[str, Any]:
    env = _env(req["domain"])
    errors = _run(env, req["calls"])
    before, after = _initial(req["domain"]), _dump(env)
    changed = {name: {k: v for k, v in records.items() if before.get(name, {}).get(k) != v}
               for name, records in after.items() if isinstance(records, dict)}
    return {"errors": errors, "changed": {k: v for k, v in changed.items() if v}}


def evaluate(req: dict[str, Any]) -> dict[str, Any]:
    task = _tasks(req["domain"])[req["task_id"]]
    scratch = _env(req["domain"])
    messages: list[Any] = []
    for i, call in enumerate(req["calls"]):
        tool_call = ToolCall(id=f"call_{i}", name=call["name"], arguments=call["arguments"], requestor="assistant")
        messages.append(AssistantMessage(role="assistant", content=None, tool_calls=[tool_call]))
        messages.append(scratch.get_response(tool_call))
    messages.append(AssistantMessage(role="assistant", content=req.get("text") or "Done."))
    now = datetime.now().isoformat()
    sim = SimulationRun(id="replay", task_id=task.id, timestamp=now, start_time=now, end_time=now, duration=0.0,
                        termination_reason=TerminationReason.AGENT_STOP, messages=messages)
    info = evaluate_simulation(simulation=sim, task=task, evaluation_type=EvaluationType.ALL, solo_mode=False,
                               domain=req["domain"])
    return {"reward": info.reward, "db_match": info.db_check.db_match if info.db_check else None}


def timed(req: dict[str, Any]) -> dict[str, Any]:
    seconds = []
    for _ in range(int(req.get("repeat", 1))):
        tick = time.perf_counter()
        env = _env(req["domain"])
        _run(env, req["calls"])
        env.get_db_hash()
        env.get_user_db_hash()  # None without a user's state; tau2's evaluator hashes both for every domain
        seconds.append(time.perf_counter() - tick)
    return {"seconds": seconds}


OPS = {"replay": replay, "evaluate": evaluate, "time": timed,
       "initial": lambda req: {"db": _initial(req["domain"])}}


def main() -> None:
    import logging

    logging.disable(logging.WARNING)  # tau2 logs every failing gold action; the answers carry them instead
    try:
        from loguru import logger
        logger.remove()
    except ImportError:
        pass
    out = sys.stdout
    sys.stdout = sys.stderr  # anything tau2 prints must not corrupt the answer stream
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            answer = OPS[req["op"]](req)
        except Exception as exc:  # noqa: BLE001 - the caller gets the failure as data, the worker lives on
            answer = {"failure": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer, default=str) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
