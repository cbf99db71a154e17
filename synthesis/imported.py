"""Tasks written elsewhere (tau2's ``tasks.json``), verified like synthesised ones and stored next to them.

An import shard gives one record per imported task, in the same shape as ``synthesis.generate.record`` with
``source: "tau2"`` and tau2's own task JSON kept as it is. The same gate applies: a task whose gold calls raise,
or that a do-nothing agent passes, is recorded as rejected with its reason, never published. Each task is
judged by its own tau2 reward basis (see ``interop.tau2_tasks.convert``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from domains.registry import get_engine, get_spec
from interop.tau2_tasks import BASIS_CHECKS, SOURCE_NAME, ImportedTask, imported_tasks
from verifiers.derivability import derive, evidence_for
from verifiers.verify import check_task

if TYPE_CHECKING:
    from synthesis.generate import ShardConfig


def imported_record(task: ImportedTask, cfg: ShardConfig) -> dict[str, Any]:
    engine = get_engine(cfg.domain, cfg.seed)
    report = check_task(task.task, engine)
    ok, reason = report.admissible(cfg.kill_threshold)
    if task.unsupported:  # a basis we would not check: publishing it would reward what tau2 would not
        ok, reason = False, (f"unsupported_criteria: tau2 reward basis {', '.join(task.unsupported)} is not checked "
                             f"by this verifier (supported: {', '.join(BASIS_CHECKS)})")
    calls = task.task.gold_calls
    # measured, not gated: tau2's golds list the writes alone and leave the reads to the agent (docs/verification.md)
    derivation = derive(calls, report.outputs, task.task.communicate_info,
                        evidence_for(engine.spec, task.instruction_text()))
    canonical = [c.to_dict() for c in calls]
    return {
        "task_id": task.task_id, "content_hash": task.content_hash(), "domain": task.domain, "seed": cfg.seed,
        "shard_id": cfg.shard_id, "accepted": ok, "reason": "ok" if ok else reason.split(":")[0],
        "reason_detail": reason, "kinds": ["imported"], "evolved_from": None, "operator": None, "depth": 0,
        "instruction": task.instruction_text(),
        "canonical_gold": json.dumps(canonical, sort_keys=True, ensure_ascii=False, default=str),
        "gold_calls": canonical, "communicate_info": list(task.task.communicate_info),
        "calls": len(calls), "distinct_tools": len({c.name for c in calls}),
        "write_calls": sum(engine.tools[c.name].kind == "write" for c in calls if c.name in engine.tools),
        "gold_valid": report.gold_validity.passed, "gold_reason": report.gold_validity.reason,
        "noop_fails": report.no_action.passed, "noop_reason": report.no_action.reason,
        "mutants": report.mutation.total, "mutants_killed": report.mutation.killed,
        "kill_rate": report.mutation.kill_rate, "survivors": list(report.mutation.survivors),
        "tau2": task.raw, "source": SOURCE_NAME, "verification": task.task.contract(),
        "argument_sources": derivation.sources, "underivable": list(derivation.missing),
    }


def import_shard(cfg: ShardConfig) -> dict[str, Any]:
    """Every imported task of ``cfg.domain``, verified, as one shard result."""
    started, cpu = time.perf_counter(), time.thread_time()
    tasks = imported_tasks(get_spec(cfg.domain), cfg.seed)[: cfg.imported_limit]
    records = [imported_record(t, cfg) for t in tasks]
    return {"shard": asdict(cfg), "shard_id": cfg.shard_id, "records": records, "sampling_failures": 0,
            "seconds": round(time.perf_counter() - started, 3),
            "cpu_s": {"verification": round(time.thread_time() - cpu, 4)}}  # importing is checking tau2's tasks
