"""Episodes per second of the orchestration environment with the scripted user and the oracle policy.

    python bench/episodes.py --warehouse /tmp/wh.duckdb [--seconds 10] [--domains weather,railway]

Each episode is the whole loop: instance draw (tool subset, training pricing schedule), a fresh database, the
system prompt, the oracle's gold calls one per turn through the ToolCatalog, the scripted user's stop, and the
verifier's replay. Prints one line per domain and a final JSON line. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

from inference.pricing import synthetic_schedules
from train.environment.env import EnvConfig, Environment
from train.environment.policies import OraclePolicy
from train.environment.tasks import load_training_set
from train.environment.user_sim import ScriptedUser


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True, help="DuckDB file with a published snapshot")
    parser.add_argument("--snapshot", default="latest")
    parser.add_argument("--domains", default=None, help="comma-separated (default: all in the snapshot)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to run episodes")
    args = parser.parse_args(argv)
    data = load_training_set(args.warehouse, args.snapshot, args.domains.split(",") if args.domains else None)
    env = Environment(EnvConfig(), synthetic_schedules())
    counts: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    turns = solved = n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        task = data.tasks[n % len(data.tasks)]
        began = time.perf_counter()
        result = env.run(task, OraclePolicy(task), ScriptedUser(task))
        seconds[task.domain] += time.perf_counter() - began
        counts[task.domain] += 1
        turns += result.turns
        solved += result.solved
        n += 1
    elapsed = time.perf_counter() - start
    for domain in sorted(counts):
        print(f"{domain:14s} {counts[domain]:6d} episodes  {counts[domain] / seconds[domain]:8.1f} episodes/s")
    print(json.dumps({"episodes": n, "seconds": round(elapsed, 2), "episodes_per_s": round(n / elapsed, 1),
                      "turns_per_s": round(turns / elapsed, 1), "solved_rate": round(solved / max(1, n), 4),
                      "tasks": len(data.tasks), "snapshot_id": data.snapshot_id}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
