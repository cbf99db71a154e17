"""Run a model as the agent on published tasks and measure it: the shared core of ``describe-llm-tools`` and
``evaluate-orchestrator`` (task sampling, the task kinds, one measured episode)."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from train.environment.env import Environment, EpisodeResult
from train.environment.policies import LLMPolicy, Policy
from train.environment.tasks import TrainingTask
from train.environment.user_sim import ScriptedUser
from warehouse.reader import connect_readonly


@dataclass
class MeasuredEpisode:
    """An episode plus what the agent itself spent (its tokens, its priced cost, its wall time)."""

    result: EpisodeResult
    prompt_tokens: int
    completion_tokens: int
    agent_cost_usd: float
    agent_latency_s: float

    @property
    def cost_usd(self) -> float:
        return self.agent_cost_usd + self.result.cost_usd

    @property
    def latency_s(self) -> float:
        return self.agent_latency_s + self.result.latency_s


def sample_across_domains(tasks: Sequence[TrainingTask], n: int, seed: int) -> list[TrainingTask]:
    """``n`` tasks taken in turn from each domain (each domain's order shuffled by ``seed``), so every domain the
    snapshot holds is represented before any gets a second task."""
    rng = random.Random(seed)
    by_domain: dict[str, list[TrainingTask]] = {}
    for task in tasks:
        by_domain.setdefault(task.domain, []).append(task)
    queues = []
    for domain in sorted(by_domain):
        items = list(by_domain[domain])
        rng.shuffle(items)
        queues.append(items)
    out: list[TrainingTask] = []
    while len(out) < n and any(queues):
        for queue in queues:
            if queue and len(out) < n:
                out.append(queue.pop(0))
    return out


def task_kinds(warehouse: str | Path, snapshot_id: str) -> dict[str, str]:
    """Task id -> its "+"-joined request kinds in the snapshot."""
    con = connect_readonly(warehouse)
    try:
        rows = con.execute("SELECT task_id, kinds FROM tasks WHERE snapshot_id = ?", [snapshot_id]).fetchall()
    finally:
        con.close()
    return {task_id: kinds for task_id, kinds in rows}


def run_measured(env: Environment, task: TrainingTask, policy: Policy) -> MeasuredEpisode:
    """One episode with the scripted user. For an ``LLMPolicy`` the agent's priced cost and measured latency come
    from the client's call records made during this episode; tokens from any policy that counts them."""
    client = policy.client if isinstance(policy, LLMPolicy) else None
    first = len(client.records) if client is not None else 0
    before = (getattr(policy, "prompt_tokens", 0), getattr(policy, "completion_tokens", 0))
    start = time.perf_counter()
    result = env.run(task, policy, ScriptedUser(task))
    wall = time.perf_counter() - start
    used = (getattr(policy, "prompt_tokens", 0) - before[0], getattr(policy, "completion_tokens", 0) - before[1])
    if client is None:  # a local checkpoint: no price per token, its time is the wall time of the episode
        return MeasuredEpisode(result, used[0], used[1], 0.0, wall)
    records = client.records[first:]
    cost = sum(r.cost_usd or 0.0 for r in records)  # an unpriced endpoint's calls count as 0 here
    latency = sum(r.latency_s for r in records)
    return MeasuredEpisode(result, used[0], used[1], cost, latency)
