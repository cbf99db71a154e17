"""Generate one shard of tasks for one domain: sample base candidates, verify, evolve, verify again.

A shard is identified by (domain, db seed, shard index, config); its output depends on nothing else, so
shards can run in any order, on any worker, and a finished shard never needs recomputing.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from typing import Any

from domains.registry import get_engine
from synthesis import requests as rq
from synthesis.evolve import evolve
from synthesis.realism_audit import TaskFacts, publishable, task_figures
from synthesis.realistic_tasks import (OutcomeBalance, base_candidate, evolve_realistic, is_converted, offered_kinds,
                                       realism_for)
from synthesis.task import Task, style_for
from synthesis.toolgraph import ToolGraph
from verifiers.derivability import Derivation, derive, evidence_for
from verifiers.types import TaskReport
from verifiers.values import typed_values
from verifiers.verify import check_task_memo

BASE_WEIGHTS = {"single_write": 2, "lookup_write": 3, "chain": 2, "conditional": 3, "question": 2,
                "multi_entity": 2}


@dataclass(frozen=True)
class ShardConfig:
    domain: str
    seed: int
    shard: int
    base_candidates: int = 48
    evolution_rounds: int = 2
    evolve_probability: float = 0.7
    kill_threshold: float = 0.9
    imported: bool = False  # this shard verifies the domain's imported tasks (e.g. tau2's) instead of sampling
    imported_limit: int | None = None  # an import shard verifies only the first N (None: all)
    # "reject": a value with no source rejects the task (and planning skips such goals); "report": only recorded
    derivability: str = "reject"

    @property
    def shard_id(self) -> str:
        return f"{self.domain}-s{self.seed}-{'tau2' if self.imported else f'{self.shard:04d}'}"


def _base_candidate(graph: ToolGraph, rng: random.Random, seed: int) -> Task | None:
    if is_converted(graph):
        return base_candidate(graph, rng, seed)
    kinds = list(BASE_WEIGHTS)
    kind = rng.choices(kinds, weights=[BASE_WEIGHTS[k] for k in kinds])[0]
    with graph.engine.fresh() as db:
        if kind == "multi_entity":
            first = rng.choice([rq.single_write, rq.lookup_write])(graph, db, rng)
            second = rq.single_write(graph, db, rng) if first else None
            if not first or not second or set(first.entities) & set(second.entities):
                return None
            reqs = [first, second]
        else:
            req = rq.BASE_KINDS[kind](graph, db, rng)
            if req is None:
                return None
            reqs = [req]
    return Task(graph.spec.name, seed, reqs, style_for(rng))


@dataclass(frozen=True)
class Admission:
    """A candidate's verdict: the verification report, admitted or not and why, realism figures, value sources."""

    report: TaskReport
    ok: bool
    reason: str
    figures: dict[str, Any] | None
    derivation: Derivation


def admission(task: Task, graph: ToolGraph, threshold: float) -> tuple[TaskReport, bool, str, dict[str, Any] | None]:
    """The verdict a candidate gets: verification, derivability, then (where the domain declares intents) the
    realism gate."""
    judged = admit_task(task, graph, threshold)
    return judged.report, judged.ok, judged.reason, judged.figures


def admit_task(task: Task, graph: ToolGraph, threshold: float, derivability: str = "reject") -> Admission:
    """``admission`` with the sources of every value; ``derivability="report"`` records them without rejecting."""
    report = check_task_memo(task.verifiable(), graph.engine)
    ok, reason = report.admissible(threshold)
    derivation = derivation_of(task, graph, report)
    if ok and not derivation.derivable and derivability == "reject":
        ok, reason = False, derivation.reason()
    figures = None
    if ok:  # realism figures for every accepted task; a gate only where the domain declares intents
        figures = task_figures(graph.engine, facts_of(task), derivation)
        if figures["converted"]:
            ok, reason = publishable(figures)
    return Admission(report, ok, reason, figures, derivation)


def derivation_of(task: Task, graph: ToolGraph, report: TaskReport) -> Derivation:
    """Where each gold argument and each value to say comes from, read off the gold replay ``report`` already ran."""
    return derive(task.gold_calls, report.outputs, task.communicate_info,
                  evidence_for(graph.spec, task.instruction_text()))


def record(task: Task, shard: ShardConfig, threshold: float, graph: ToolGraph) -> dict[str, Any]:
    """Verify a candidate and describe it, verdicts included, as one flat record."""
    judged = admit_task(task, graph, threshold, shard.derivability)
    report, ok, reason, figures = judged.report, judged.ok, judged.reason, judged.figures
    contract = task.verifiable().contract()
    write_tools = {t.name for t in graph.writes}
    calls = task.gold_calls
    tau2 = task.tau2()
    tau2["evaluation_criteria"]["argument_sources"] = judged.derivation.sources  # ToolScale's addition; tau2 ignores it
    tau2["evaluation_criteria"]["communicate_values"] = typed_values(task.communicate_info,
                                                                     judged.derivation.sources.get("communicate_info"))
    return {
        "task_id": task.task_id, "content_hash": task.content_hash(), "domain": task.domain, "seed": task.seed,
        "shard_id": shard.shard_id, "accepted": ok, "reason": "ok" if ok else reason.split(":")[0],
        "reason_detail": reason, "kinds": task.kinds, "evolved_from": task.evolved_from,
        "operator": task.operator, "depth": task.depth, "instruction": task.instruction_text(),
        "canonical_gold": task.canonical_gold(),
        "gold_calls": [c.to_dict() for c in calls], "communicate_info": list(task.communicate_info),
        "calls": len(calls), "distinct_tools": len({c.name for c in calls}),
        "write_calls": sum(c.name in write_tools for c in calls),
        "gold_valid": report.gold_validity.passed, "gold_reason": report.gold_validity.reason,
        "noop_fails": report.no_action.passed, "noop_reason": report.no_action.reason,
        "mutants": report.mutation.total, "mutants_killed": report.mutation.killed,
        "kill_rate": report.mutation.kill_rate, "survivors": list(report.mutation.survivors),
        "tau2": tau2, "source": "synthesised", "verification": contract,
        "realism": figures, "notes": task.notes,
        "persona": task.persona.describe() if task.persona else None,
        "role": task.persona.role if task.persona else None,
        "request": task.reason_for_call(),
        "argument_sources": judged.derivation.sources, "underivable": list(judged.derivation.missing),
    }


def facts_of(task: Task) -> TaskFacts:
    return TaskFacts(task.domain, task.gold_calls, task.communicate_info, task.reason_for_call(),
                     task.instruction_text(), tuple(task.notes), task.persona.name if task.persona else None,
                     task.persona.role if task.persona else None, task.user, task.identify_tools, task.seed,
                     task.clause_skeletons(), task.said_values(),
                     task.verifiable().contract() if task.setup_calls or task.env_assertions or task.actions else None)


def generate_shard(cfg: ShardConfig) -> dict[str, Any]:
    """All candidates of one shard, accepted and rejected, with timings: ``seconds`` (wall) and ``cpu_s`` (CPU
    seconds of ``verification``, i.e. admitting each candidate, and of ``synthesis``, everything else)."""
    if cfg.imported:
        from synthesis.imported import import_shard

        return import_shard(cfg)
    started = time.perf_counter()
    cpu_started, verify_cpu = time.thread_time(), 0.0  # this thread's CPU: shards in a thread pool are not mixed
    graph = ToolGraph(get_engine(cfg.domain, cfg.seed))
    if is_converted(graph):
        realism_for(graph).plan_derivable = cfg.derivability == "reject"
    rng = random.Random(f"{cfg.seed}:{cfg.domain}:{cfg.shard}")
    records: list[dict[str, Any]] = []
    sampling_failures = 0

    # converted domains: each candidate is drawn after the previous one's verdict, steered by what was accepted
    balance = OutcomeBalance(graph.spec, offered_kinds(graph)) if is_converted(graph) else None

    def admit(task: Task | None) -> Task | None:
        """Verify one sampled candidate and keep its record; the task if it was accepted."""
        nonlocal sampling_failures, verify_cpu
        if task is None:
            sampling_failures += 1
            return None
        tick = time.thread_time()
        rec = record(task, cfg, cfg.kill_threshold, graph)
        verify_cpu += time.thread_time() - tick
        records.append(rec)
        if not rec["accepted"]:
            return None
        if balance is not None:
            balance.accept(task)
        return task

    generation: list[Task] = []
    for _ in range(cfg.base_candidates):
        task = (_base_candidate(graph, rng, cfg.seed) if balance is None else
                base_candidate(graph, rng, cfg.seed, balance.next_base_kinds(), balance.base_wants_forbidden(),
                               balance.intent_draws))
        if (kept := admit(task)) is not None:
            generation.append(kept)
    for _ in range(cfg.evolution_rounds):
        parents = [p for p in generation if rng.random() < cfg.evolve_probability]
        generation = []
        for parent in parents:
            child = evolve(graph, parent, rng) if balance is None else evolve_realistic(graph, parent, rng, balance)
            if (kept := admit(child)) is not None:
                generation.append(kept)
    return {"shard": asdict(cfg), "shard_id": cfg.shard_id, "records": records,
            "db_fingerprint": graph.engine.fingerprint,  # the database it ran on: the run lists it without a rebuild
            "sampling_failures": sampling_failures, "seconds": round(time.perf_counter() - started, 3),
            "cpu_s": {"synthesis": round(time.thread_time() - cpu_started - verify_cpu, 4),
                      "verification": round(verify_cpu, 4)}}
