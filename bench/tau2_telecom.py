"""tau2's telecom against ours: every task's initial state and gold (agent and user calls) replayed in both, the
final operator and device states compared; our verdicts against tau2's evaluator on the gold, the empty and a
one-argument-altered trajectory (the last call's first argument changed).

    PYTHONPATH=. python bench/tau2_telecom.py             # all 2,285 tasks (about 20 minutes on 2 cores)
    PYTHONPATH=. python bench/tau2_telecom.py --every 50  # every 50th task

Needs .venv-tau2 (scripts/setup_tau2.sh). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import time

from domains import external
from domains.engine import ToolCall
from domains.registry import get_engine
from interop.tau2_bridge import normalise, tau2_python
from interop.tau2_tasks import convert, dual_control_calls
from tests.interop.test_tau2_telecom import SCRIPT, _by_id, _ours, _tau2
from verifiers.types import Trajectory
from verifiers.verify import verify


def altered(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...] | None:
    """The gold with the first argument of its last call that has one changed to another value, or None."""
    for i in range(len(calls) - 1, -1, -1):
        c = calls[i]
        if c.arguments:
            k = sorted(c.arguments)[0]
            v = c.arguments[k]
            new = (not v) if isinstance(v, bool) else (v + 1 if isinstance(v, (int, float)) else f"{v}x")
            return (*calls[:i], ToolCall(c.name, {**c.arguments, k: new}, c.side), *calls[i + 1:])
    return None


def states(tasks: list[dict]) -> dict:
    scenarios, envs = [], []
    for t in tasks:
        setup, gold = dual_control_calls(t)
        scenarios.append([*setup, *gold])
        envs.append([a["env_type"] for a in t["initial_state"]["initialization_actions"]] + ["user"] * len(gold))
    theirs = _tau2(scenarios, envs)
    differ = []
    for t, calls, tau2 in zip(tasks, scenarios, theirs):
        ours = _ours(calls)
        if (ours["failed"] != tau2["failed"] or normalise(ours["operator"]) != normalise(_by_id(tau2["operator"]))
                or normalise(ours["user"]) != normalise(tau2["user"])):
            differ.append(t["id"])
    raising = [t["id"] for t, r in zip(tasks, theirs) if any(r["failed"])]
    return {"tasks": len(tasks), "identical_states": len(tasks) - len(differ), "differ": differ,
            "gold_raises_in_tau2": raising}


def verdicts(tasks: list[dict]) -> dict:
    engine = get_engine("telecom")
    runs, ours = [], []
    for t in tasks:
        task = convert("telecom", t).task
        for kind, calls in (("gold", task.gold_calls), ("empty", ()), ("altered", altered(task.gold_calls))):
            if calls is None:
                continue
            runs.append({"task_id": t["id"], "kind": kind, "calls": [c.to_dict() | {"side": c.side} for c in calls]})
            ours.append(verify(task, Trajectory(calls), engine).solved)
    done = subprocess.run([str(tau2_python()), str(SCRIPT.with_name("tau2_telecom_verdicts.py"))],
                          input=json.dumps(runs), capture_output=True, text=True, check=True,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    disagree = []
    for run, o, reward in zip(runs, ours, json.loads(done.stdout)):
        same = o == (reward == 1.0)
        counts[run["kind"]]["agree" if same else "disagree"] += 1
        counts[run["kind"]]["solved_ours"] += o
        if not same:
            disagree.append([run["kind"], run["task_id"], o, reward])
    return {"verdicts": {k: dict(v) for k, v in counts.items()}, "disagreements": disagree}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=1, help="only every Nth task")
    args = ap.parse_args()
    tasks = external.load(external.Source("tasks", "tau2", "data/tau2/domains/telecom/tasks.json"))[::args.every]
    tick = time.time()
    out = states(tasks)
    out["states_seconds"] = round(time.time() - tick, 1)
    tick = time.time()
    out |= verdicts(tasks)
    out["verdicts_seconds"] = round(time.time() - tick, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
