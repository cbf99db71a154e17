"""Checks that make a task count: it fails a do-nothing agent and a parrot (no calls, the request repeated
back) under this project's verifier and under tau2-bench's rule, and none of its gold writes is a no-op."""

from __future__ import annotations

from dataclasses import dataclass

from domains.engine import DomainEngine, ToolCall
from verifiers.checks import fidelity_check
from verifiers.replay import Replay, replay
from verifiers.types import Trajectory, VerifiableTask, Verdict
from verifiers.verify import verify


def tau2_text(text: str) -> str:
    """tau2's COMMUNICATE normalisation: lowercase, commas removed."""
    return text.lower().replace(",", "")


def tau2_solved(engine: DomainEngine, task: VerifiableTask, trajectory: Trajectory) -> bool:
    """tau2-bench's rule for exported tasks: the whole database ends in the same state (hash), and every
    communicate_info string is a case-insensitive substring of what the assistant said, commas removed."""
    gold = replay(engine, task.gold_calls)
    candidate = replay(engine, trajectory.calls)
    try:
        same_state = gold.db.fingerprint() == candidate.db.fingerprint()
    finally:
        gold.close()
        candidate.close()
    said = tau2_text(trajectory.assistant_text)
    return same_state and all(tau2_text(info) in said for info in task.communicate_info)


@dataclass(frozen=True)
class LazyPasses:
    """Which lazy agents a task lets through (each must be False for a publishable task)."""

    empty_ours: bool
    parrot_ours: bool
    empty_tau2: bool
    parrot_tau2: bool

    @property
    def any(self) -> bool:
        return self.empty_ours or self.parrot_ours or self.empty_tau2 or self.parrot_tau2


def lazy_passes(engine: DomainEngine, task: VerifiableTask, request: str, gold: Replay | None = None) -> LazyPasses:
    """All four from one gold replay: both lazy agents make no calls, so they share the state checks, and a
    trajectory without calls leaves the database at S0, whose hash equals the gold's exactly when no row the
    gold wrote differs (what the execution check compares); only what is said differs."""
    own = gold is None
    gold = gold or replay(engine, task.gold_calls)
    try:
        empty = verify(task, Trajectory(), engine, gold)
    finally:
        if own:
            gold.close()
    return lazy_from(empty, task, request)


def lazy_from(empty: Verdict, task: VerifiableTask, request: str) -> LazyPasses:
    """``lazy_passes`` from the empty trajectory's verdict (which depends on the task, not on its request)."""
    state_kept = empty.execution.passed
    calls_pass = state_kept and empty.completeness.passed and empty.identification.passed
    said = tau2_text(request)
    return LazyPasses(empty_ours=empty.solved,
                      parrot_ours=calls_pass and fidelity_check(task.communicate_info, request).passed,
                      empty_tau2=state_kept and all(not tau2_text(i) for i in task.communicate_info),
                      parrot_tau2=state_kept and all(tau2_text(i) in said for i in task.communicate_info))


def noop_writes(engine: DomainEngine, calls: tuple[ToolCall, ...], setup: tuple[ToolCall, ...] = ()) -> int:
    """Gold write calls that leave every row they touch as it was (or touch none), each from its own side, after
    the task's ``setup`` calls (a dual-control task's start)."""
    writes = {t.name for t in engine.spec.tools if t.kind == "write"}
    count = 0
    with engine.fresh() as db:
        for call in setup:
            db.call(call.name, call.arguments, call.side)
        for call in calls:
            if call.name not in writes:
                db.call(call.name, call.arguments, call.side)
                continue
            probe = db.dry_run(call.name, call.arguments, call.side)
            before = {k: db.row(k) for k in probe.writes}
            result = db.call(call.name, call.arguments, call.side)
            if not result.ok:
                continue
            if not result.writes or all(db.row(k) == before.get(k) for k in result.writes):
                count += 1
    return count


def end_state_violations(engine: DomainEngine, calls: tuple[ToolCall, ...], gold: Replay | None = None) -> int:
    """Rows breaking the domain's invariants after the gold calls."""
    if not engine.spec.invariants:
        return 0
    from domains.invariants import violation_counts

    own = gold is None
    gold = gold or replay(engine, calls)
    try:
        return sum(violation_counts(gold.db.conn, engine.spec).values())
    finally:
        if own:
            gold.close()
