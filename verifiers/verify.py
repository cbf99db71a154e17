"""The one definition of "solved", used as the data gate and as the RL outcome reward.

``verify`` scores a trajectory against a task; ``check_task`` decides whether a task is fit to publish
(gold validity, no-action, mutation kill rate).
"""

from __future__ import annotations

from domains.engine import DomainEngine
from domains.registry import get_engine
from verifiers.assertions import actions_check, assertions_check
from verifiers.checks import completeness_check, execution_check, fidelity_check, identification_check
from verifiers.memo import remembered, task_key
from verifiers.mutation import mutants
from verifiers.replay import Replay, SharedPrefix, replay, shared_prefix
from verifiers.types import CHECKS, Check, Mutant, MutationReport, TaskReport, Trajectory, Verdict, VerifiableTask


def engine_for(task: VerifiableTask) -> DomainEngine:
    return get_engine(task.domain, task.seed)


def verify(task: VerifiableTask, trajectory: Trajectory, engine: DomainEngine | None = None,
           gold: Replay | None = None, replayed: Replay | None = None) -> Verdict:
    """Execution, fidelity and completeness of one trajectory, each with its reason. ``replayed``: the trajectory's
    calls already replayed (``SharedPrefix.run``), left open."""
    engine = engine or engine_for(task)
    own_gold = gold is None
    gold = gold or replay(engine, task.gold_calls, task.setup_calls)
    candidate = replayed or replay(engine, trajectory.calls, task.setup_calls)
    try:
        writes = {t.name for t in engine.spec.tools if t.kind == "write"}
        return Verdict(execution=execution_check(gold, candidate),
                       fidelity=fidelity_check(task.communicate_info, trajectory.assistant_text, engine.spec.now),
                       completeness=completeness_check(gold, candidate),
                       identification=identification_check(task.user, task.identify_tools, trajectory.calls,
                                                           candidate, writes),
                       criteria=task.criteria,
                       assertions=assertions_check(candidate.db, task.env_assertions),
                       actions=actions_check(task.actions, trajectory.calls))
    finally:
        if replayed is None:
            candidate.close()
        if own_gold:
            gold.close()


def _judged_by(task: VerifiableTask) -> str:
    return "" if task.criteria == CHECKS else f" (judged by its criteria: {', '.join(task.criteria)})"


def outcome_reward(task: VerifiableTask, trajectory: Trajectory) -> float:
    """1.0 when the trajectory solves the task, else 0.0 (the outcome term of the RL reward)."""
    return 1.0 if verify(task, trajectory).solved else 0.0


def _computation(gold: Replay, i: int) -> bool:
    """Whether gold call i is a pure computation (``calculate``): it succeeded, read no row and wrote none."""
    result = gold.results[i]
    return result.ok and not result.reads and not result.writes


def _commutes(engine: DomainEngine, task: VerifiableTask, mutant: Mutant, gold: Replay) -> bool:
    """Whether a reorder mutant ends in exactly the gold's final state, both sides (its swapped calls commute)."""
    swapped = replay(engine, mutant.calls, task.setup_calls)
    try:
        return swapped.all_ok and swapped.db.fingerprint() == gold.db.fingerprint()
    finally:
        swapped.close()


def _survivors(task: VerifiableTask, engine: DomainEngine, gold: Replay, judged: list[Mutant], said: str,
               share_prefixes: bool) -> list[bool]:
    """Whether each mutant survives (the agent's words being right). Shared prefixes: each mutant resumes from the
    gold's state after the calls it shares with it (``SharedPrefix``), the longest shared first; the verdicts are
    those of replaying every mutant from the start."""
    shares = [shared_prefix(m.calls, task.gold_calls) for m in judged]
    if not share_prefixes or max(shares, default=0) == 0:  # nothing to resume after (a one-call gold)
        return [verify(task, Trajectory(m.calls, said), engine, gold).solved for m in judged]
    shared = SharedPrefix(engine, task.gold_calls, task.setup_calls, upto=max(shares))
    try:
        alive = [False] * len(judged)
        for i in sorted(range(len(judged)), key=lambda i: -shares[i]):  # the longest shared prefix first
            calls = judged[i].calls
            alive[i] = verify(task, Trajectory(calls, said), engine, gold, shared.run(calls)).solved
        return alive
    finally:
        shared.close()


SHARE_PREFIXES = True  # check_task's default (a test turns it off to compare the two ways, record for record)


def check_task(task: VerifiableTask, engine: DomainEngine | None = None,
               share_prefixes: bool | None = None) -> TaskReport:
    """Task-level checks. Mutants are scored as if the agent also said the right answer, so only the
    state and completeness checks can kill them: the strict reading of 'the gold calls matter'.

    A task whose criteria leave out completeness (tau2's: final state and what was said) does not judge how
    the agent found things out, so mutants that only drop, change or move read calls are not counted for it
    (``MutationReport.unjudged``): they end in the gold state by construction. Neither are mutants that only
    drop or change a calculation (a call that reads and writes no row): no state or read check can see it. Nor,
    for a task judged by assertions on the final state (tau2's telecom), reorders that end in exactly the gold's
    state on both sides: the phone has one row, so any two settings "write the same row", yet most commute.

    ``share_prefixes`` (default ``SHARE_PREFIXES``): each mutant resumes from the gold's state after the calls it shares with the
    gold, instead of replaying from the start; the report is the same (``tests/verifiers/test_shared_prefix.py``)."""
    engine = engine or engine_for(task)
    gold = replay(engine, task.gold_calls, task.setup_calls)
    try:
        failures = [f"setup call {i} ({c.name}): {r.error}" for i, (c, r)
                    in enumerate(zip(task.setup_calls, gold.setup_results)) if not r.ok]
        failures += [f"call {i} ({c.name}): {r.error}" for i, (c, r) in enumerate(zip(task.gold_calls, gold.results))
                     if not r.ok]
        if not task.gold_calls:
            validity = Check(False, "the task has no gold calls")
        elif failures:
            validity = Check(False, "; ".join(failures))
        else:
            validity = Check(True, f"all {len(task.gold_calls)} gold call(s) succeed")
        empty = verify(task, Trajectory(), engine, gold)
        no_action = (Check(True, f"the empty trajectory fails {', '.join(empty.failed_checks())}")
                     if not empty.solved else Check(False, "the empty trajectory solves the task" + _judged_by(task)))
        said = " ".join(task.communicate_info)
        unjudged = 0
        judges_reads = "completeness" in task.criteria
        writes = {t.name for t in engine.spec.tools if t.kind == "write"}
        judged: list[Mutant] = []
        if validity.passed:
            for mutant in mutants(engine, task.gold_calls, gold):
                if not judges_reads and not any(task.gold_calls[i].name in writes for i in mutant.touched):
                    unjudged += 1
                    continue
                if all(_computation(gold, i) for i in mutant.touched):
                    unjudged += 1  # a calculation reads and writes no row: only what is said from it is judged
                    continue
                if mutant.kind == "reorder" and "assertions" in task.criteria and _commutes(engine, task, mutant, gold):
                    unjudged += 1  # two device settings changed in either order: the same phone, not a wrong one
                    continue
                judged.append(mutant)
        survived = _survivors(task, engine, gold, judged, said,
                              SHARE_PREFIXES if share_prefixes is None else share_prefixes)
        survivors = [f"{m.kind}: {m.description}" for m, alive in zip(judged, survived) if alive]
        total, killed = len(judged), len(judged) - len(survivors)
        return TaskReport(gold_validity=validity, no_action=no_action,
                          mutation=MutationReport(total, killed, tuple(survivors), unjudged), writes=len(gold.writes),
                          outputs=tuple(r.output for r in gold.results))
    finally:
        gold.close()


def check_task_memo(task: VerifiableTask, engine: DomainEngine) -> TaskReport:
    """``check_task``, remembered per engine (``verifiers.memo``): a shard batch's candidates often repeat a gold with
    its checks (at 100,000 tasks most golds recur), and the report depends on nothing else. Reports are frozen and
    shared; their ``outputs`` must be read, never changed."""
    return remembered(engine, "check_task", task_key(task), lambda: check_task(task, engine))
