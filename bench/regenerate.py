"""Wall time, CPU time, peak RSS and the per-stage split of a whole regeneration, per size.

    python bench/regenerate.py [--sizes default 20000] [--workers N] [--flow | --cli]

Each size runs from scratch (empty work dir and warehouse in a temporary folder): shards, dedup, quality
suite, publish. By default the plain job runs in this process; ``--flow`` goes through the Prefect flow
(temporary local server) in this process; ``--cli`` runs ``toolscale regenerate`` as a user does (its own
process, its own temporary server: the figure issue 19 bounds), and times it from outside.

Per size it prints wall seconds, tasks/s, CPU seconds (this process and its children), peak RSS, the stages
(``shards_s`` wall, ``shard_compute_s`` the shards' own seconds summed (their CPU seconds when the machine is
idle; with waits for a core when it is not), ``dedup_s``/``dedup_cpu_s``,
``publish_s``/``publish_cpu_s``; the quality gate runs inside publish) and the load average before and after
(the machine is shared: read ratios within one run, not absolute times, when the load is above the core
count). A final JSON line holds everything. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from domains.registry import DOMAIN_NAMES

REPO = Path(__file__).resolve().parents[1]
STAGES = re.compile(r"^(?:published|failed) \S+ in [0-9.]+s \((?P<stages>[^)]*)\)", re.M)


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (pool workers, the server, a CLI run)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _peak_rss_mb() -> float:
    """The largest resident set of this process or of any one finished child, in MB (Linux reports KiB)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(max(own.ru_maxrss, kids.ru_maxrss) / 1024, 1)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cli(per_domain: int | None, warehouse: str, work: str) -> tuple[int, dict[str, float]]:
    """``toolscale regenerate`` in its own process; returns its task count and the stages it printed."""
    command = [sys.executable, "-m", "toolscale.cli", "regenerate", "--warehouse", warehouse, "--work-dir", work]
    if per_domain is not None:
        command += ["--tasks-per-domain", str(per_domain)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
    if proc.returncode not in (0, 1):  # 1: published nothing because the gate failed; still a timed run
        raise SystemExit(f"toolscale regenerate failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    match = STAGES.search(proc.stdout)
    stages = {k: float(v) for k, v in (part.split() for part in match["stages"].split(", "))} if match else {}
    tasks = re.search(r"^snapshot \S+ \w+: (\d+) tasks", proc.stdout, re.M)
    return int(tasks[1]) if tasks else 0, stages


def run(size: str, workers: int, mode: str) -> dict[str, Any]:
    per_domain = None if size == "default" else max(1, int(size) // len(DOMAIN_NAMES))
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="toolscale-bench-") as tmp:
        warehouse, work = os.path.join(tmp, "wh.duckdb"), os.path.join(tmp, "work")
        started, cpu = time.perf_counter(), _cpu_seconds()
        if mode == "cli":
            tasks, timings = _cli(per_domain, warehouse, work)
        elif mode == "flow":
            from flows.regenerate import run_regenerate

            outcome = run_regenerate(tasks_per_domain=per_domain, warehouse=warehouse, work_dir=work,
                                     task_runner="processes")
            tasks, timings = outcome["tasks"], {}
        else:
            from pipeline.regenerate import RegenerateConfig, regenerate

            cfg = RegenerateConfig(tasks_per_domain=per_domain, warehouse=warehouse, work_dir=work, workers=workers)
            _, summary = regenerate(cfg, progress=lambda m: None)
            tasks, timings = summary["tasks"], summary["timings"]
        seconds = time.perf_counter() - started
        cpu_seconds = _cpu_seconds() - cpu
    return {"size": size, "mode": mode, "tasks": tasks, "seconds": round(seconds, 1),
            "tasks_per_s": round(tasks / seconds, 1), "cpu_s": round(cpu_seconds, 1), "peak_rss_mb": _peak_rss_mb(),
            "workers": workers, "load_before": load_before, "load_after": _load(),
            **{k: round(v, 2) for k, v in timings.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["default", "20000"])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--flow", action="store_true", help="through the Prefect flow, in this process")
    how.add_argument("--cli", action="store_true", help="`toolscale regenerate` in its own process")
    args = parser.parse_args()
    mode = "cli" if args.cli else "flow" if args.flow else "job"
    results = []
    for size in args.sizes:
        r = run(size, args.workers, mode)
        results.append(r)
        stages = ", ".join(f"{k} {v}" for k, v in r.items() if k.endswith("_s") and k not in ("tasks_per_s", "cpu_s"))
        print(f"{size:>8} ({mode}): {r['tasks']} tasks in {r['seconds']}s = {r['tasks_per_s']} tasks/s, "
              f"CPU {r['cpu_s']}s, peak RSS {r['peak_rss_mb']} MB, load {r['load_before']} -> {r['load_after']}"
              + (f"; {stages}" if stages else ""), flush=True)
    print(json.dumps({"bench": "regenerate", "cpus": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
