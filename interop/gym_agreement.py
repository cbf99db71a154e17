"""The exported NeMo Gym server against the project's verifier: the same trajectories (the gold, an empty one, the
gold with one argument of its last write changed) scored by both, through the server's own HTTP endpoints.

``trajectories`` builds the three; ``GymClient`` plays one through a running server (``/seed_session``, each tool
endpoint, ``/verify``) with its own session cookie, as Gym's simple agent does; ``agreement`` compares the rewards
with ``verifiers.verify.verify`` task by task.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import httpx

from domains.engine import DomainEngine, ToolCall
from domains.registry import get_engine
from verifiers.mutation import _NONE, alternative_value
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import verify

KINDS = ("gold", "empty", "altered")
EMPTY_ANSWER = "I'm sorry, I cannot help with that."


def altered(engine: DomainEngine, task_id: str, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...] | None:
    """The gold with one argument of its last write (else of its last call that has one) changed to another valid
    value; None when no argument has another value."""
    writes = [i for i, c in enumerate(calls) if engine.tools.get(c.name) and engine.tools[c.name].kind == "write"]
    rng = random.Random(task_id)
    for index in [*reversed(writes), *(i for i in reversed(range(len(calls))) if i not in writes)]:
        call = calls[index]
        names = sorted(call.arguments)
        rng.shuffle(names)
        for name in names:
            alt = alternative_value(engine, call, name, rng)
            if alt is not _NONE:
                return calls[:index] + (ToolCall(call.name, {**call.arguments, name: alt}, call.side),) + \
                    calls[index + 1:]
    return None


def trajectories(task_id: str, task: VerifiableTask) -> dict[str, Trajectory]:
    """The three trajectories of one task (an altered one only where some argument has another valid value)."""
    said = "Done. " + " ".join(task.communicate_info)
    out = {"gold": Trajectory(task.gold_calls, said), "empty": Trajectory((), EMPTY_ANSWER)}
    changed = altered(get_engine(task.domain, task.seed), task_id, task.gold_calls)
    if changed is not None:
        out["altered"] = Trajectory(changed, said)
    return out


def response_with(text: str) -> dict[str, Any]:
    """A minimal Responses API response whose output is one assistant message saying ``text``."""
    return {"id": "resp", "created_at": 0, "model": "replay", "object": "response", "parallel_tool_calls": False,
            "tool_choice": "auto", "tools": [], "output": [
                {"id": "msg", "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": text, "annotations": []}]}]}


@dataclass
class GymClient:
    """One Gym-style session on a running server: its own cookie jar, as the simple agent keeps one per rollout."""

    base_url: str
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.base_url, timeout=60)

    def seed(self, row: dict[str, Any]) -> httpx.Response:
        return self.client.post("/seed_session", json=row)

    def call(self, name: str, arguments: Any) -> httpx.Response:
        return self.client.post(f"/{name}", json=arguments)

    def verify(self, said: str) -> httpx.Response:
        return self.client.post("/verify", json={"responses_create_params": {"input": []},
                                                 "response": response_with(said)})

    def play(self, task_id: str, trajectory: Trajectory) -> dict[str, Any]:
        """Seed the session on ``task_id``, make the trajectory's calls, verify: the server's verdict."""
        answer = self.seed({"responses_create_params": {"input": []}, "task_id": task_id})
        answer.raise_for_status()
        for call in trajectory.calls:
            self.call(call.name, call.arguments)
        verdict = self.verify(trajectory.assistant_text)
        verdict.raise_for_status()
        return verdict.json()

    def close(self) -> None:
        self.client.close()


def agreement(base_url: str, tasks: dict[str, VerifiableTask]) -> dict[str, Any]:
    """Per kind: how many trajectories were scored, how many rewards equal the verifier's, the server's mean reward;
    and the first disagreements with both verdicts' failed checks."""
    per_kind = {k: {"scored": 0, "agree": 0, "reward_sum": 0.0} for k in KINDS}
    disagreements: list[str] = []
    client = GymClient(base_url)
    try:
        for task_id, task in tasks.items():
            for kind, trajectory in trajectories(task_id, task).items():
                ours = verify(task, trajectory)
                theirs = client.play(task_id, trajectory)
                row = per_kind[kind]
                row["scored"] += 1
                row["reward_sum"] += theirs["reward"]
                if theirs["reward"] == (1.0 if ours.solved else 0.0):
                    row["agree"] += 1
                elif len(disagreements) < 10:
                    disagreements.append(f"{task_id} {kind}: server {theirs['reward']} {theirs.get('failed')}, "
                                         f"verifier {ours.solved} {ours.failed_checks()}")
    finally:
        client.close()
    return {"kinds": {k: {**v, "mean_reward": round(v["reward_sum"] / v["scored"], 4) if v["scored"] else None}
                      for k, v in per_kind.items()}, "disagreements": disagreements}
