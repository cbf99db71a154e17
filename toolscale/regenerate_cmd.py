"""``toolscale regenerate``: check everything, stop early when the configuration is already published, else run
the Prefect flow on a run-owned temporary server and report the snapshot (exit 1 when its gate failed)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from toolscale.failures import in_user_terms
from toolscale.options import (RunFailed, check_domains, check_task_runner, check_warehouse_target,
                               check_work_dir)
from warehouse.errors import WarehouseError


def _fmt(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    check_domains(args.domains)
    check_task_runner(args.task_runner)
    check_work_dir(args.work_dir)
    check_warehouse_target(args.warehouse)
    from toolscale.prefect_local import prefect_api, quiet_prefect_logs

    made = next((p for p in reversed([Path(args.work_dir), *Path(args.work_dir).parents]) if not p.exists()), None)
    log = quiet_prefect_logs(Path(args.work_dir))  # the server logs there from its first second
    where = Path(args.warehouse).absolute()
    done: list[str] = []
    refused: list[BaseException] = []

    def while_server_boots() -> bool:
        """Everything before the flow, beside the server's boot (its own process): the imports of the pipeline
        and the flow (seconds), the price check, the config hash and whether it is published already. The
        embedding model is not loaded here: on a busy machine a third CPU-bound thread slowed the boot more than
        it saved; the flow loads it while the shards run. False: nothing to run, the server is not waited for."""
        try:
            return _prepare()
        except BaseException as exc:
            refused.append(exc)
            raise

    def _prepare() -> bool:
        from pipeline.regenerate import RegenerateConfig, published_snapshot
        from pipeline.stage_cost import cpu_price

        cpu_price()  # the price stage costs are valued at: a bad one is a ValueError (exit 2) before any work
        cfg = RegenerateConfig(tasks_per_domain=args.tasks_per_domain, seed=args.seed,
                               evolution_rounds=args.evolution_rounds, kill_threshold=args.kill_threshold,
                               near_dup_threshold=args.near_dup_threshold, warehouse=args.warehouse,
                               work_dir=args.work_dir)
        if args.tasks_per_database is not None:
            cfg.tasks_per_database = args.tasks_per_database
        if args.domains:
            cfg.domains = list(args.domains)
        published = published_snapshot(cfg)  # decided by the config hash alone: no server, no shard work
        if published is not None:
            print(f"already published, unchanged: {published} (config {cfg.config_hash()}, "
                  f"{time.perf_counter() - started:.1f}s)")
            print(f"warehouse: {where}")
            done.append(published)
            return False
        print(f"config {cfg.config_hash()}: regenerating {', '.join(cfg.domains)} into {where} "
              f"(Prefect log: {log})", flush=True)
        import flows.regenerate  # noqa: F401
        return True

    try:
        with prefect_api(log, while_starting=while_server_boots) as url:
            if url is None:
                return 0
            return _run_flow(args, log)
    finally:
        if made is not None and (done or refused):
            # already published, or refused before any work: leave no work folder that only held the server's log
            shutil.rmtree(made, ignore_errors=True)


def _run_flow(args: argparse.Namespace, log: Path) -> int:
    from flows.regenerate import run_regenerate

    params: dict[str, Any] = {"tasks_per_domain": args.tasks_per_domain, "seed": args.seed,
                              "evolution_rounds": args.evolution_rounds,
                              "kill_threshold": args.kill_threshold,
                              "near_dup_threshold": args.near_dup_threshold, "warehouse": args.warehouse,
                              "work_dir": args.work_dir, "task_runner": args.task_runner}
    if args.tasks_per_database is not None:
        params["tasks_per_database"] = args.tasks_per_database
    if args.domains:
        params["domains"] = args.domains
    try:
        outcome = run_regenerate(**params)
    except WarehouseError as exc:  # the checks passed, so the run itself failed (a full disk, ...): exit 3
        raise RunFailed(f"{in_user_terms(exc)}; details in {log}") from None
    return report(args.warehouse, outcome["snapshot_id"], outcome["seconds"])


def report(warehouse: str, snapshot_id: str, seconds: float) -> int:
    """Print the snapshot's figures and where it is; 0 when published, 1 (with the failed expectations) if not."""
    from warehouse.reader import connect_readonly, list_snapshots

    con = connect_readonly(warehouse)
    try:
        snap = next(s for s in list_snapshots(con) if s["snapshot_id"] == snapshot_id)
        row = con.execute("SELECT quality_json FROM snapshots WHERE snapshot_id = ?", [snapshot_id]).fetchone()
    finally:
        con.close()
    quality = json.loads(row[0] or "{}") if row else {}
    print(f"snapshot {snap['snapshot_id']} {snap['status']}: {snap['tasks']} tasks from {snap['candidates']} "
          f"candidates (yield {_fmt(snap['yield'], '.1%')}), evolved {_fmt(snap['evolved_fraction'], '.1%')}, "
          f"median kill rate {_fmt(snap['median_kill_rate'], '.3f')}, gold errors {snap['gold_errors']}, "
          f"no-op passes {snap['noop_passes']}, {seconds}s")
    for domain, n in sorted(snap["per_domain"].items()):
        print(f"  {domain:<15}{n:>6}")
    if snap["rejection_reasons"]:
        print("  rejected: " + ", ".join(f"{k} {v}" for k, v in snap["rejection_reasons"].items()))
    print(f"warehouse: {Path(warehouse).absolute()}")
    if snap["status"] == "published":
        return 0
    failures = quality.get("failures") or ["(no failure recorded)"]
    print(f"error: snapshot {snapshot_id} failed the quality gate ({len(failures)} expectation(s)): "
          + "; ".join(failures), file=sys.stderr)
    return 1

