"""The growth curve of a whole regeneration: per size, wall time, tasks/s, CPU time, peak RSS and each stage.

    python bench/regenerate.py --sizes 1000 5000 20000 100000 [--png growth.png] [--workers N] [--flow | --cli]
    python bench/regenerate.py --cli --sizes default       # the default run, timed as a user runs it

A size is a total task count (spread evenly over the ten domains: ``--tasks-per-domain size/10``) or
``default`` (ToolScale's Table 5 counts). Each size runs from scratch (empty work dir and warehouse in a
temporary folder, or ``--keep DIR``/<size>, left in place) in a process of its own, so its peak memory is its own: by default the plain job
(``pipeline.regenerate``, one process per core for the shards); ``--flow`` the Prefect flow on a temporary
server; ``--cli`` ``toolscale regenerate`` exactly as a user runs it (process start, its own server: the figure
issue 19 bounds).

Per size it prints wall seconds, tasks/s, CPU seconds (the run's processes together), peak RSS (the largest
single process, and the whole process tree sampled twice a second, as RSS and as PSS: forked workers share pages
with the flow's process, which RSS counts once per process), the stages (``shards_s`` wall,
``dedup_s``, ``gate_s`` the quality suite, ``publish_s`` the warehouse write without the gate; ``shard_compute_s``
the shards' own seconds summed) and the load average before and after (the machine may be shared: compare
ratios within one run when the load is above the core count). Then, per stage, the growth exponent between
consecutive sizes (seconds ~ tasks^k: k near 1 is linear, above about 1.15 grows faster than linearly), and a
PNG of the curve (``--png``). A final JSON line holds everything. Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from domains.registry import DOMAIN_NAMES  # noqa: E402

STAGE_NAMES = ("shards_s", "dedup_s", "gate_s", "publish_s")
STAGES = re.compile(r"^(?:published|failed) \S+ in [0-9.]+s \((?P<stages>[^)]*)\)", re.M)
PAGE = os.sysconf("SC_PAGE_SIZE")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _tree_memory(root: int) -> tuple[int, int]:
    """Resident bytes of ``root`` and every process below it (read from /proc; 0 where it cannot be read), as
    (RSS summed, PSS summed). A forked worker's RSS counts every page it shares with its parent again; PSS
    splits a shared page between the processes that map it, so its sum is the memory the tree really holds."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(proc.name))
            rss[int(proc.name)] = int(fields[21]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
    total, pss, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        pss += _pss(pid)
        todo += children.get(pid, [])
    return total, pss


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _child_command(mode: str, per_domain: int | None, warehouse: str, work: str, workers: int) -> list[str]:
    if mode == "cli":
        command = [sys.executable, "-m", "toolscale.cli", "regenerate", "--warehouse", warehouse, "--work-dir", work]
        return command + (["--tasks-per-domain", str(per_domain)] if per_domain is not None else [])
    return [sys.executable, __file__, "--child", mode, "--child-args",
            json.dumps({"per_domain": per_domain, "warehouse": warehouse, "work": work, "workers": workers})]


def child(mode: str, args: dict[str, Any]) -> None:
    """One run in this process (the parent measures it); prints its stages as a JSON line."""
    if mode == "flow":
        from flows.regenerate import run_regenerate

        outcome = run_regenerate(tasks_per_domain=args["per_domain"], warehouse=args["warehouse"],
                                 work_dir=args["work"], task_runner="processes")
        print(json.dumps({"tasks": outcome["tasks"], "status": outcome["status"],
                          "timings": outcome.get("timings", {})}))
        return
    from pipeline.regenerate import RegenerateConfig, regenerate

    cfg = RegenerateConfig(tasks_per_domain=args["per_domain"], warehouse=args["warehouse"], work_dir=args["work"],
                           workers=args["workers"])
    result, summary = regenerate(cfg, progress=lambda m: None)
    print(json.dumps({"tasks": summary["tasks"], "status": result.status, "timings": summary["timings"],
                      "quality": result.quality, "per_domain": summary["per_domain"]}, default=str))


@contextmanager
def _run_dir(keep: Path | None, size: str) -> Iterator[str]:
    """A temporary folder, or ``keep/size`` emptied first and left in place (its shards can be reused)."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="toolscale-bench-") as tmp:
            yield tmp
        return
    folder = keep / size
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    yield str(folder)


def run(size: str, workers: int, mode: str, keep: Path | None = None) -> dict[str, Any]:
    per_domain = None if size == "default" else max(1, int(size) // len(DOMAIN_NAMES))
    load_before = _load()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    with _run_dir(keep, size) as tmp:
        warehouse, work = os.path.join(tmp, "wh.duckdb"), os.path.join(tmp, "work")
        out, err = open(os.path.join(tmp, "out"), "w+"), open(os.path.join(tmp, "err"), "w+")
        started = time.perf_counter()
        proc = subprocess.Popen(_child_command(mode, per_domain, warehouse, work, workers), stdout=out, stderr=err,
                                env=env, cwd=REPO)
        peak_tree, done = [0, 0], threading.Event()

        def sample() -> None:  # never polls the child itself: wait4 below must be the one to reap it
            while not done.wait(0.5):
                peak_tree[:] = map(max, peak_tree, _tree_memory(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own usage plus that of its reaped children
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        done.set()
        sampler.join()
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode not in (0, 1):  # 1: the gate failed; still a timed run
        raise SystemExit(f"size {size} failed ({proc.returncode}): {stderr.strip()[-2000:]}")
    result: dict[str, Any] = {}
    if mode == "cli":
        match = STAGES.search(stdout)
        timings = {k: float(v) for k, v in (p.split() for p in match["stages"].split(", "))} if match else {}
        tasks = re.search(r"^snapshot \S+ (\w+): (\d+) tasks", stdout, re.M)
        result = {"tasks": int(tasks[2]) if tasks else 0, "status": tasks[1] if tasks else "?", "timings": timings}
    else:
        result = json.loads(stdout.strip().splitlines()[-1])
    timings = {k: round(float(v), 2) for k, v in result.get("timings", {}).items()}
    return {"size": size, "mode": mode, "tasks": result["tasks"], "status": result["status"],
            "seconds": round(seconds, 1), "tasks_per_s": round(result["tasks"] / seconds, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "peak_tree_rss_mb": round(peak_tree[0] / 2**20, 1), "peak_tree_pss_mb": round(peak_tree[1] / 2**20, 1),
            "workers": workers, "load_before": load_before,
            "load_after": _load(), **timings,
            **({"quality_failures": result["quality"].get("failures", [])} if result.get("quality") else {})}


def growth(results: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """Per stage (and the whole run), the exponent k in seconds ~ tasks^k between consecutive sizes."""
    out: dict[str, list[float | None]] = {}
    for stage in ("seconds", *STAGE_NAMES):
        ks: list[float | None] = []
        for a, b in zip(results, results[1:]):
            ta, tb, sa, sb = a["tasks"], b["tasks"], a.get(stage), b.get(stage)
            ok = ta and tb and tb != ta and sa and sb and sa > 0.05 and sb > 0.05
            ks.append(round(math.log(sb / sa) / math.log(tb / ta), 2) if ok else None)
        out[stage] = ks
    return out


def plot(results: list[dict[str, Any]], png: Path) -> None:
    """Seconds per stage against tasks (log-log, with a linear reference through the smallest size), and
    peak RSS."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [r["tasks"] for r in results]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for stage in ("seconds", *STAGE_NAMES):
        ys = [max(r.get(stage, 0.0), 0.01) for r in results]
        left.plot(tasks, ys, marker="o", label="whole run" if stage == "seconds" else stage.removesuffix("_s"))
    base = results[0]
    left.plot(tasks, [base["seconds"] * t / base["tasks"] for t in tasks], "k:", label="linear from smallest")
    left.set(xscale="log", yscale="log", xlabel="published tasks", ylabel="seconds", title="time per stage")
    left.legend(fontsize=8)
    right.plot(tasks, [r["peak_rss_mb"] for r in results], marker="o", label="largest process")
    right.plot(tasks, [r["peak_tree_rss_mb"] for r in results], marker="o", label="process tree, RSS (sampled)")
    right.plot(tasks, [r["peak_tree_pss_mb"] for r in results], marker="o", label="process tree, PSS (sampled)")
    right.set(xscale="log", xlabel="published tasks", ylabel="MB", title="peak resident memory")
    right.legend(fontsize=8)
    fig.suptitle(f"toolscale regenerate ({results[0]['mode']}, {os.cpu_count()} cores)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1000", "5000", "20000", "100000"])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--png", type=Path, default=Path("regenerate-growth.png"))
    parser.add_argument("--keep", type=Path, help="run each size in KEEP/<size> and leave it there")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--flow", action="store_true", help="through the Prefect flow, in its own process")
    how.add_argument("--cli", action="store_true", help="`toolscale regenerate` in its own process")
    parser.add_argument("--child", choices=["job", "flow"], help=argparse.SUPPRESS)
    parser.add_argument("--child-args", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, json.loads(args.child_args))
        return
    mode = "cli" if args.cli else "flow" if args.flow else "job"
    results = []
    for size in args.sizes:
        r = run(size, args.workers, mode, args.keep)
        results.append(r)
        stages = ", ".join(f"{k} {r[k]}" for k in (*STAGE_NAMES, "shard_compute_s") if k in r)
        print(f"{size:>8} ({mode}): {r['tasks']} tasks {r['status']} in {r['seconds']}s = {r['tasks_per_s']} "
              f"tasks/s, CPU {r['cpu_s']}s, peak RSS {r['peak_rss_mb']} MB (tree {r['peak_tree_rss_mb']} MB, PSS "
              f"{r['peak_tree_pss_mb']} MB), "
              f"load {r['load_before']} -> {r['load_after']}; {stages}", flush=True)
        if len(results) > 1:  # after every size: a long series that is stopped still leaves its curve
            plot(results, args.png)
    exponents = growth(results) if len(results) > 1 else {}
    for stage, ks in exponents.items():
        print(f"growth exponent {stage:<10} " + "  ".join("n/a" if k is None else f"{k:.2f}" for k in ks))
    if len(results) > 1:
        print(f"plot: {args.png.resolve()}")
    print(json.dumps({"bench": "regenerate", "cpus": os.cpu_count(), "results": results, "growth": exponents}))


if __name__ == "__main__":
    main()
