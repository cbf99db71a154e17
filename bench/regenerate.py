"""Wall time and tasks/s of a whole regeneration, at the default size and at 20,000 tasks.

    python bench/regenerate.py [--sizes default 20000] [--workers N] [--flow]

Each size runs from scratch (empty work dir and warehouse in a temporary folder): shards, dedup, quality
suite, publish. ``--flow`` goes through the Prefect flow (temporary local server) instead of the plain job.
Prints one line per size and a final JSON line. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from domains.registry import DOMAIN_NAMES
from pipeline.regenerate import RegenerateConfig, regenerate


def run(size: str, workers: int, use_flow: bool) -> dict[str, Any]:
    per_domain = None if size == "default" else max(1, int(size) // len(DOMAIN_NAMES))
    with tempfile.TemporaryDirectory(prefix="toolscale-bench-") as tmp:
        warehouse, work = os.path.join(tmp, "wh.duckdb"), os.path.join(tmp, "work")
        started = time.perf_counter()
        if use_flow:
            from flows.regenerate import run_regenerate

            outcome = run_regenerate(tasks_per_domain=per_domain, warehouse=warehouse, work_dir=work,
                                     task_runner="processes")
            tasks, timings = outcome["tasks"], {}
        else:
            cfg = RegenerateConfig(tasks_per_domain=per_domain, warehouse=warehouse, work_dir=work, workers=workers)
            _, summary = regenerate(cfg, progress=lambda m: None)
            tasks, timings = summary["tasks"], summary["timings"]
        seconds = time.perf_counter() - started
    return {"size": size, "tasks": tasks, "seconds": round(seconds, 1), "tasks_per_s": round(tasks / seconds, 1),
            "workers": workers, "flow": use_flow, **timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["default", "20000"])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--flow", action="store_true")
    args = parser.parse_args()
    results = []
    for size in args.sizes:
        r = run(size, args.workers, args.flow)
        results.append(r)
        print(f"{size:>8}: {r['tasks']} tasks in {r['seconds']}s = {r['tasks_per_s']} tasks/s "
              f"({', '.join(f'{k} {v}' for k, v in r.items() if k.endswith('_s') and k != 'tasks_per_s')})",
              flush=True)
    print(json.dumps({"bench": "regenerate", "cpus": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
