"""Prefect flow ``regenerate-toolscale``: the plain job in ``pipeline.regenerate``, with shards as Prefect tasks.

Run it once from Python (the CLI does the same)::

    from flows.regenerate import run_regenerate
    run_regenerate(domains=["weather"], tasks_per_domain=20, task_runner="dask")

or as a deployment (``prefect.yaml``: ``weekly`` on a cron schedule, ``smoke`` for quick checks), against a
server that stays up::

    prefect server start --port 4200 &
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    prefect work-pool create toolscale-process --type process
    prefect --no-prompt deploy --name smoke
    prefect worker start --pool toolscale-process
    prefect deployment run 'regenerate-toolscale/smoke' --watch

How the task runner is chosen: by the ``task_runner`` parameter, inside the flow body. A decorator's task
runner is fixed when the module is imported, and a deployment can only pass parameters, so the flow itself
builds the runner the parameter names (``make_task_runner``), starts it for the length of the run, and
submits every shard of every batch through it. One mechanism serves the CLI, a deployment and a test alike;
``run_regenerate`` only checks the parameter before a flow run is created. The decorator's own runner
(threads) is never used for shards.

- ``threads`` (the flow's default): a thread pool in the flow-run process (shards are GIL-bound Python plus
  SQLite, so this mostly overlaps SQLite work; fine for one domain or a smoke run).
- ``processes`` (the CLI's default): Prefect's process pool, one process per core on this machine.
- ``dask``: a temporary ``distributed.LocalCluster`` with one process per core, torn down after the run.
- ``dask:<scheduler address>``: an existing Dask cluster, e.g. ``dask:tcp://10.0.0.5:8786``. Its workers
  need this project installed (``pip install -e .``) and must see ``work_dir`` (shard files are written
  by the workers and read by the flow), so on more than one machine ``work_dir`` is a shared path.

Dask workers need no Prefect server of their own: each task carries the flow's Prefect settings (its API URL
included), so its task runs are recorded with the flow run (``tests/flows/test_dask_cluster.py`` runs workers
that may not start one).
A shard task refuses to run when its worker's code version differs from the flow's (its shard file would land
under another config hash).

Shards run in batches, one Prefect task (``shard-batch``) per batch of one domain's shards, about six batches
per worker (``pipeline.regenerate.shard_batches``): a shard takes under a second, and each task run costs API
calls, states and logs on the server, which shares the machine. Batch tasks take the config and the shards
(plain dataclasses), never connections, and have no Prefect cache: ``run_shard`` resumes from its own shard
files, keyed by the config hash and code version, so a run killed mid-batch keeps the shards it finished.
Dedup, the quality gate and the single warehouse write run in the flow process (one writer).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.futures import wait
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner

from synthesis.generate import ShardConfig
from pipeline.lifecycle import exit_when_orphaned
from pipeline.regenerate import TASKS_PER_DATABASE, RegenerateConfig, regenerate, run_batch, shard_batches
from warehouse.location import default_warehouse
from toolscale.version import code_version
from warehouse.writer import PublishResult

ARTIFACT_KEY = "toolscale-snapshot"
TASK_RUNNERS = ("processes", "threads", "dask", "dask:<scheduler address>")


@task(name="shard-batch", task_run_name="{batch_name}", cache_policy=NONE, persist_result=False)
def shard_batch_task(cfg: RegenerateConfig, shards: list[ShardConfig], flow_code_version: str,
                     batch_name: str = "shards") -> list[dict[str, Any]]:
    """Generate (or resume) a batch of shards of one domain; returns their small summaries, the records stay in
    the shard files."""
    exit_when_orphaned()  # in a pool or Dask worker: do not outlive a killed run
    if code_version() != flow_code_version:
        # shard files live under the config hash, which includes the code version: they would be lost
        raise RuntimeError(f"this worker runs code {code_version()} but the flow runs {flow_code_version}; "
                           "run workers from the same checkout as the flow")
    return run_batch(cfg, shards)


def batch_name(shards: list[ShardConfig]) -> str:
    """``railway-s0-0000..0004`` for shards 0 to 4 of railway (a batch is one domain's consecutive shards)."""
    first, last = shards[0], shards[-1]
    name = first.shard_id if first.imported or len(shards) == 1 else f"{first.shard_id}..{last.shard:04d}"
    return name if len(shards) == 1 else f"{name} ({len(shards)} shards)"


def make_task_runner(spec: str) -> TaskRunner[Any]:
    """``processes`` | ``threads`` | ``dask`` | ``dask:<scheduler address>`` -> an unstarted task runner."""
    if spec == "processes":
        # one process per core in the flow-run's machine: the shard work holds the GIL
        return ProcessPoolTaskRunner(max_workers=os.cpu_count() or 1)
    if spec == "threads":
        # bounded: shards are mostly GIL-bound Python, more threads than cores only add memory
        return ThreadPoolTaskRunner(max_workers=min(32, (os.cpu_count() or 1) + 4))
    if spec == "dask" or spec.startswith("dask:"):
        from prefect_dask import DaskTaskRunner

        address = spec.partition(":")[2]
        if address:
            return DaskTaskRunner(address=address)
        # one single-threaded worker process per core: the shard work holds the GIL
        return DaskTaskRunner(cluster_kwargs={"n_workers": os.cpu_count() or 1, "threads_per_worker": 1,
                                              "dashboard_address": ":0"})
    raise ValueError(f"unknown task_runner {spec!r}; use one of: {', '.join(TASK_RUNNERS)}")


def runner_workers(runner: TaskRunner[Any]) -> int:
    """How many tasks the runner runs at once, for sizing shard batches: a process or thread pool's size; for
    Dask, the cluster's worker threads when it can say, else this machine's cores."""
    size = getattr(runner, "_max_workers", None)
    if isinstance(size, int) and size > 0:
        return min(size, os.cpu_count() or 1)  # threads beyond the cores only wait for the GIL
    client = getattr(runner, "_client", None)
    try:
        threads = sum(client.nthreads().values()) if client is not None else 0
    except Exception:  # a scheduler that cannot say: size for this machine
        threads = 0
    return threads or os.cpu_count() or 1


@contextmanager
def _api_url_for_children() -> Iterator[None]:
    """Point worker processes (process pool, local Dask cluster) at this flow's Prefect API.

    Without a configured server the flow talks to a temporary one; child processes started with no
    ``PREFECT_API_URL`` would each start a temporary server of their own (seconds each) and record their
    task runs there instead of with the flow."""
    if os.environ.get("PREFECT_API_URL"):
        yield
        return
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        os.environ["PREFECT_API_URL"] = str(client.api_url).rstrip("/")
    try:
        yield
    finally:
        os.environ.pop("PREFECT_API_URL", None)


def _submittable_batch_task() -> Any:
    # A deployment loads this file under a made-up module name; Dask workers unpickle the task by module
    # path, so submit the copy that lives at the importable name.
    from flows import regenerate as importable

    return importable.shard_batch_task


class _ShardDispatcher:
    """``run(batch)`` for ``regenerate``: submit the shards in batches (``shard_batches``), one task each, wait
    for all, keep timings."""

    def __init__(self, runner: TaskRunner[Any], cfg: RegenerateConfig, workers: int) -> None:
        self.runner, self.cfg, self.workers, self.task = runner, cfg, workers, _submittable_batch_task()
        self.summaries: list[dict[str, Any]] = []
        self.tasks = 0
        self.seconds = 0.0

    def __call__(self, shards: list[ShardConfig]) -> list[dict[str, Any]]:
        started = time.perf_counter()
        batches = shard_batches(shards, self.workers)
        futures = [self.runner.submit(self.task, {"cfg": self.cfg, "shards": batch,
                                                  "flow_code_version": code_version(),
                                                  "batch_name": batch_name(batch)}) for batch in batches]
        wait(futures)  # every shard that can finish writes its file before a failure is raised
        summaries = [s for f in futures for s in f.result()]
        self.seconds += time.perf_counter() - started
        self.summaries += summaries
        self.tasks += len(batches)
        return summaries


@flow(name="regenerate-toolscale", log_prints=True)
def regenerate_flow(
    domains: list[str] | None = None,
    tasks_per_domain: int | None = None,
    seed: int = 0,
    evolution_rounds: int = 2,
    kill_threshold: float = 0.9,
    near_dup_threshold: float = 0.9,
    warehouse: str | None = None,
    work_dir: str = "work",
    task_runner: str = "threads",
    tasks_per_database: int = TASKS_PER_DATABASE,
) -> dict[str, Any]:
    """Regenerate a ToolScale snapshot into the DuckDB ``warehouse`` and publish it if its quality suite passes.

    ``domains``: default all ten; ``tasks_per_domain``: default ToolScale's Table 5 counts; ``warehouse``:
    default ``$TOOLSCALE_WAREHOUSE`` or ``warehouse/toolscale.duckdb``; ``task_runner``: ``threads``,
    ``processes``, ``dask`` or ``dask:<scheduler address>``; ``tasks_per_database``: a domain asked for more tasks
    gets another database (seed + k * 1,000,000) per this many.
    """
    logger = get_run_logger()
    started = time.perf_counter()
    cfg = RegenerateConfig(tasks_per_domain=tasks_per_domain, seed=seed, evolution_rounds=evolution_rounds,
                           kill_threshold=kill_threshold, near_dup_threshold=near_dup_threshold,
                           warehouse=warehouse or default_warehouse(), work_dir=work_dir,
                           tasks_per_database=tasks_per_database)
    if domains:
        cfg.domains = list(domains)
    cfg.requested()  # unknown domains fail here, before any runner starts
    with _api_url_for_children(), make_task_runner(task_runner) as runner:
        dispatch = _ShardDispatcher(runner, cfg, runner_workers(runner))
        result, summary = regenerate(cfg, progress=logger.info, run=dispatch)
    seconds = round(time.perf_counter() - started, 2)
    timings = {"total_s": seconds, "shards_s": round(dispatch.seconds, 2), **summary.get("timings", {}),
               "shard_compute_s": round(sum(s["seconds"] for s in dispatch.summaries if not s["resumed"]), 2)}
    create_markdown_artifact(markdown=snapshot_markdown(cfg, task_runner, result, summary, dispatch.summaries,
                                                        timings, dispatch.tasks),
                             key=ARTIFACT_KEY, description=f"ToolScale snapshot {result.snapshot_id}: {result.status}")
    logger.info(f"snapshot {result.snapshot_id} {result.status}: {summary['tasks']} tasks in {seconds}s")
    # timings: wall seconds per stage (shards_s, dedup_s, gate_s, publish_s, total_s) and CPU seconds where
    # measured (*_cpu_s, shard_compute_s), the same dict the artifact shows
    return {"snapshot_id": result.snapshot_id, "status": result.status, "tasks": summary["tasks"],
            "seconds": seconds, "timings": timings}


def run_regenerate(**params: Any) -> dict[str, Any]:
    """Run ``regenerate-toolscale`` once in this process with ``regenerate_flow``'s parameters."""
    make_task_runner(params.get("task_runner", "threads"))  # a bad spec fails before a flow run exists
    return regenerate_flow(**params)


def snapshot_markdown(cfg: RegenerateConfig, task_runner: str, result: PublishResult, summary: dict[str, Any],
                      shards: list[dict[str, Any]], timings: dict[str, float], shard_tasks: int = 0) -> str:
    """The artifact: what a reviewer checks before training on the snapshot."""
    kill = summary["median_kill_rate"]
    requested = cfg.requested()
    lines = [
        f"# ToolScale snapshot `{result.snapshot_id}`",
        "",
        f"- **status:** {result.status}" + (" (published earlier; left as it was)" if result.already_existed else ""),
        f"- **warehouse:** `{cfg.warehouse}`; **config** `{cfg.config_hash()}`; **task runner** `{task_runner}`",
        "",
        "| domain | requested | accepted tasks |",
        "|---|---:|---:|",
        *(f"| {d} | {requested[d]} | {summary['per_domain'].get(d, 0)} |" for d in cfg.domains),
        f"| **total** | {sum(requested.values())} | {summary['tasks']} |",
        "",
        "| check | value |",
        "|---|---:|",
        f"| gold errors | {summary['gold_errors']} |",
        f"| no-op passes | {summary['noop_passes']} |",
        f"| median kill rate | {'n/a' if kill is None else f'{kill:.3f}'} |",
        f"| evolved fraction | {summary['evolved_fraction']:.3f} |",
        f"| yield (accepted / candidates) | {summary['yield']:.3f} "
        f"({summary['tasks']} / {summary['candidates']}) |",
        "",
        "**Rejection reasons:** " + (", ".join(f"{reason} {n}" for reason, n in summary["rejection_reasons"].items())
                                     or "none"),
        "",
        f"**Shards:** {len(shards)} run in {shard_tasks} batch tasks, {sum(s['resumed'] for s in shards)} of them "
        "resumed from their files",
        "",
        "**Timings:** " + ", ".join(f"{name.removesuffix('_s').replace('_', ' ')} {value:.1f}s"
                                    for name, value in timings.items()),
    ]
    if result.quality:
        lines.insert(4, f"- **quality suite:** {result.quality.get('evaluated', 0)} expectations evaluated, "
                        f"{len(result.quality.get('failures', []))} failed")
    if result.quality.get("failures"):
        lines += ["", "**Failed expectations:**", *(f"- `{f}`" for f in result.quality["failures"])]
    return "\n".join(lines) + "\n"
