"""Like-for-like speed against tau2: the same imported tasks through tau2's gold replay (fresh environment,
replay the gold calls, hash the database) and through ours (fresh copy of the seeded image, replay, hash),
interleaved task by task in one run so that both see the same machine load.

    PYTHONPATH=. python bench/tau2_speed.py retail --rounds 3
    PYTHONPATH=. python bench/tau2_speed.py telecom --rounds 3 --limit 200

A dual-control task (telecom) starts from its initialization actions and replays agent and user calls in both:
tau2 runs them as its evaluator does (``set_state``'s actions, then each gold action by its requestor) and hashes
the operator's and the user's databases; ours runs the setup calls, then the gold, and hashes both sides.

Ours hashes the rows the replay wrote (what our execution check compares); ``--full-hash`` hashes every table
instead, as tau2 does. tau2's time is measured inside its own process, so process start and pipes are not
counted against it. Prints the median time per task of both and their ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time

from domains.engine import DomainEngine
from domains.registry import get_engine, get_spec
from interop.tau2_bridge import Tau2Worker, calls_json, missing_reason, tau2_python
from interop.tau2_tasks import ImportedTask, imported_tasks
from verifiers.replay import replay
from verifiers.types import VerifiableTask


def tau2_calls(task: ImportedTask) -> list[dict]:
    """The calls tau2 times: a dual-control task's initialization actions (each on its own toolkit) and its gold,
    every call with its side; a single-control task's gold as before."""
    init = (task.raw.get("initial_state") or {}).get("initialization_actions") or []
    setup = [{"name": a["func_name"], "arguments": a.get("arguments") or {}, "side": "setup", "env": a["env_type"]}
             for a in init] if task.task.setup_calls else []
    return setup + calls_json(task.task.gold_calls)


def ours_once(engine: DomainEngine, task: VerifiableTask, full_hash: bool) -> float:
    tick = time.perf_counter()
    run = replay(engine, task.gold_calls, task.setup_calls)
    if full_hash:
        run.db.fingerprint()
    else:
        digest = hashlib.sha256()
        for key in sorted(run.writes, key=repr):
            digest.update(json.dumps([key, run.db.row(key)], default=str).encode())
        digest.hexdigest()
    run.close()
    return time.perf_counter() - tick


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("domain", nargs="?", default="retail")
    ap.add_argument("--rounds", type=int, default=3, help="timed passes over the tasks (default 3)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    ap.add_argument("--full-hash", action="store_true", help="ours hashes the whole database, like tau2")
    args = ap.parse_args(argv)
    if tau2_python() is None:
        print(f"error: {missing_reason()}", file=sys.stderr)
        return 2
    engine = get_engine(args.domain)
    tasks = imported_tasks(get_spec(args.domain))[: args.limit]
    tau2_times: dict[str, list[float]] = {t.tau2_id: [] for t in tasks}
    our_times: dict[str, list[float]] = {t.tau2_id: [] for t in tasks}
    with Tau2Worker() as worker:
        for t in tasks[:3]:  # warm both sides (imports, caches, pooled connections) before timing
            worker.request(op="time", domain=args.domain, calls=tau2_calls(t), repeat=1)
            ours_once(engine, t.task, args.full_hash)
        for _ in range(args.rounds):
            for t in tasks:
                tau2_times[t.tau2_id] += worker.request(op="time", domain=args.domain, calls=tau2_calls(t),
                                                        repeat=1)["seconds"]
                our_times[t.tau2_id].append(ours_once(engine, t.task, args.full_hash))
    tau2_med = statistics.median(statistics.median(v) for v in tau2_times.values())
    ours_med = statistics.median(statistics.median(v) for v in our_times.values())
    calls = sum(len(t.task.gold_calls) for t in tasks)
    setup = sum(len(t.task.setup_calls) for t in tasks)
    print(f"{args.domain}: {len(tasks)} tasks ({calls} gold calls{f', {setup} setup calls' if setup else ''}), "
          f"{args.rounds} interleaved round(s), "
          f"ours hashing {'every table' if args.full_hash else 'the written rows'}")
    print(f"  tau2 median per task: {tau2_med * 1000:9.3f} ms  (fresh environment + replay + DB hash)")
    print(f"  ours median per task: {ours_med * 1000:9.3f} ms  (fresh copy + replay + hash)")
    ratio = tau2_med / ours_med
    print(f"  ratio: {ratio:,.{1 if ratio < 10 else 0}f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
