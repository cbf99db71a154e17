"""Gym rollouts against the local model, per domain: Gym's launcher and rollout command with the local llama.cpp
server (SmolLM2-135M), as tests/gym/test_gym_rollouts.py runs them (its shortened rows), for every domain.

    PYTHONPATH=. python bench/gym_rollouts.py --warehouse warehouse/toolscale.duckdb [--per-domain 1]

Prints per domain: rollouts, the mean reward, and how many rewards equal the project's verifier's on the same calls
and words.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.gym.test_gym_rollouts import collect, trajectory
from train.environment.tasks import load_training_set
from verifiers.verify import verify


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default="warehouse/toolscale.duckdb")
    parser.add_argument("--per-domain", type=int, default=1)
    args = parser.parse_args()
    domains = sorted({t.domain for t in load_training_set(args.warehouse).tasks})
    with tempfile.TemporaryDirectory() as scratch:
        run = collect(Path(scratch), args.warehouse, domains, args.per_domain)
    per_domain: dict[str, dict[str, float]] = {}
    for result in run["results"]:
        task = run["tasks"][result["task_id"]]
        ours = 1.0 if verify(task.verifiable(), trajectory(result["response"])).solved else 0.0
        row = per_domain.setdefault(task.domain, {"rollouts": 0, "reward_sum": 0.0, "agree": 0})
        row["rollouts"] += 1
        row["reward_sum"] += result["reward"]
        row["agree"] += int(result["reward"] == ours)
    print(json.dumps({"seconds": round(run["seconds"], 1), "domains": {
        d: {"rollouts": r["rollouts"], "mean_reward": r["reward_sum"] / r["rollouts"], "agree": r["agree"]}
        for d, r in sorted(per_domain.items())}}))


if __name__ == "__main__":
    main()
