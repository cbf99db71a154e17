"""Requests per second one exported NeMo Gym server answers with 8 concurrent sessions: tool calls and /verify.

    PYTHONPATH=. python bench/gym_server.py --warehouse warehouse/toolscale.duckdb --domain weather

Exports the snapshot's Gym servers to a scratch folder, starts the domain's server in .venv-gym
(scripts/gym_serve.py), then runs 8 client threads, each looping over the domain's tasks: seed a session, make the
gold calls, verify. Prints tool calls/s and verifies/s over the whole run (wall clock, all threads together).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from interop.gym_agreement import GymClient
from tests.gym.servers import gym_servers
from train.environment.tasks import load_training_set
from warehouse.gym_export import export_gym


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", default="warehouse/toolscale.duckdb")
    parser.add_argument("--domain", default="weather")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    tasks = [t for t in load_training_set(args.warehouse, domains=[args.domain]).tasks]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        export_gym(args.warehouse, "latest", root / "gym")
        with gym_servers(root / "gym", [args.domain], root) as urls:
            counts = {"calls": 0, "verifies": 0, "call_s": 0.0, "verify_s": 0.0}
            lock = threading.Lock()
            stop = time.monotonic() + args.seconds

            def worker(k: int) -> None:
                client = GymClient(urls[args.domain])
                i = k
                while time.monotonic() < stop:
                    task = tasks[i % len(tasks)]
                    i += args.sessions
                    client.seed({"responses_create_params": {"input": []}, "task_id": task.task_id})
                    started = time.perf_counter()
                    for call in task.gold_calls:
                        client.call(call.name, call.arguments)
                    between = time.perf_counter()
                    client.verify("Done. " + " ".join(task.communicate_info)).raise_for_status()
                    ended = time.perf_counter()
                    with lock:
                        counts["calls"] += len(task.gold_calls)
                        counts["verifies"] += 1
                        counts["call_s"] += between - started
                        counts["verify_s"] += ended - between
                client.close()

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.sessions)]
            began = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.monotonic() - began
    print(json.dumps({"domain": args.domain, "sessions": args.sessions, "wall_s": round(wall, 1),
                      "tool_calls": counts["calls"], "verifies": counts["verifies"],
                      "requests_per_s": round((counts["calls"] + 2 * counts["verifies"]) / wall, 1),
                      "tool_calls_per_s": round(counts["calls"] / counts["call_s"] * args.sessions, 1),
                      "verifies_per_s": round(counts["verifies"] / counts["verify_s"] * args.sessions, 1)}))


if __name__ == "__main__":
    main()
