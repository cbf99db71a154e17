"""Gold-replay verifications per second, per domain (fresh copy + replay + compare).

    python bench/verify_throughput.py [--seconds 2]

For each domain it builds tasks from every tool's passing examples (one single-call task per example),
then verifies the gold trajectory against itself in a loop for a fixed time. Prints a table and a final
JSON line. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import time

from domains.engine import ToolCall
from domains.registry import DOMAIN_NAMES, get_engine
from verifiers.replay import replay
from verifiers.types import Trajectory, VerifiableTask
from verifiers.verify import check_task, verify


def _tasks(domain: str) -> list[VerifiableTask]:
    engine = get_engine(domain)
    return [VerifiableTask(domain, 0, (ToolCall(t.name, ex["arguments"]),))
            for t in engine.spec.tools for ex in t.examples if ex["expect"] == "ok"]


def measure(domain: str, seconds: float) -> dict[str, float]:
    engine = get_engine(domain)
    tasks = _tasks(domain)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        task = tasks[n % len(tasks)]
        gold = replay(engine, task.gold_calls)
        assert verify(task, Trajectory(task.gold_calls), engine, gold).execution.passed
        gold.close()
        n += 1
    verifies = n / (time.perf_counter() - start)
    m, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        check_task(tasks[m % len(tasks)], engine)
        m += 1
    return {"verifications_per_s": round(verifies, 1), "task_checks_per_s": round(m / (time.perf_counter() - start), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--domains", nargs="*", default=None, help="default: every shipped domain")
    args = parser.parse_args()
    results = {}
    print(f"{'domain':<15}{'verify/s':>10}{'task checks/s':>15}")
    for domain in args.domains or DOMAIN_NAMES:
        results[domain] = measure(domain, args.seconds)
        print(f"{domain:<15}{results[domain]['verifications_per_s']:>10}{results[domain]['task_checks_per_s']:>15}")
    print(json.dumps({"bench": "verify_throughput", "per_domain": results}))


if __name__ == "__main__":
    main()
