"""Agreement between tau2's implementation of a domain and ours: the same gold calls must end in the same
database, and our verifier must give tau2's evaluator's verdict on the gold, an empty and an altered trajectory.
Our verdict judges an imported task by its own criteria (tau2's reward basis); the report also gives the
agreement of our strictest reading (every check), which differs on read-only tasks by design.

The tau2 side runs in its own venv (``interop/tau2_bridge.Tau2Worker``); ours runs in-process.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from domains.engine import DomainEngine, ToolCall
from domains.registry import get_engine, get_spec
from interop.tau2_bridge import Tau2Worker, calls_json, initial_differences, our_records, state_differences
from interop.tau2_tasks import ImportedTask, imported_tasks
from verifiers.mutation import _NONE, alternative_value
from verifiers.replay import replay
from verifiers.types import Trajectory
from verifiers.verify import verify

KINDS = ("gold", "empty", "altered")


@dataclass
class TaskAgreement:
    task_id: str
    tau2_errors: list[str]  # "call i (name): error" for each gold call that raises in tau2
    our_errors: list[str]
    state_differences: list[str]
    verdicts: dict[str, tuple[bool, bool]] = field(default_factory=dict)  # kind -> (ours solved, tau2 reward 1)
    altered: str = ""
    our_reasons: dict[str, str] = field(default_factory=dict)
    # kind -> our verdict with every check (completeness and identification too), whatever the task's criteria
    strict: dict[str, bool] = field(default_factory=dict)

    @property
    def known_bad(self) -> bool:
        return bool(self.tau2_errors)


@dataclass
class AgreementReport:
    domain: str
    initial_differences: list[str]
    tasks: list[TaskAgreement]

    def figures(self) -> dict[str, object]:
        good = [t for t in self.tasks if not t.known_bad]
        per_kind = {k: (sum(t.verdicts[k][0] == t.verdicts[k][1] for t in good if k in t.verdicts),
                        sum(k in t.verdicts for t in good)) for k in KINDS}
        agree = sum(a for a, _ in per_kind.values())
        total = sum(n for _, n in per_kind.values())
        strict = sum(t.strict[k] == t.verdicts[k][1] for t in good for k in t.strict)
        return {
            "tasks": len(self.tasks),
            "identical_final_db": sum(not t.state_differences for t in self.tasks),
            "identical_final_db_outside_known_bad": sum(not t.state_differences for t in good),
            "known_bad": len(self.tasks) - len(good),
            "same_call_errors": sum(_error_positions(t.tau2_errors) == _error_positions(t.our_errors)
                                    for t in self.tasks),
            "verdicts_agree": agree, "verdicts_total": total,
            "agreement": round(agree / total, 4) if total else None,
            "per_kind": {k: f"{a}/{n}" for k, (a, n) in per_kind.items()},
            "strict_agree": strict,
            "strict_agreement": round(strict / total, 4) if total else None,
        }

    def disagreements(self) -> list[tuple[TaskAgreement, str]]:
        return [(t, k) for t in self.tasks if not t.known_bad for k in KINDS
                if k in t.verdicts and t.verdicts[k][0] != t.verdicts[k][1]]


def _error_positions(errors: list[str]) -> list[str]:
    return [e.split(":", 1)[0] for e in errors]


def altered_calls(engine: DomainEngine, task: ImportedTask) -> tuple[tuple[ToolCall, ...], str]:
    """The gold with one argument of its last write call (else of its last call that has one) changed to another
    valid value."""
    calls = task.task.gold_calls
    writes = [i for i, c in enumerate(calls) if engine.tools.get(c.name) and engine.tools[c.name].kind == "write"]
    if not calls:
        return calls, "no calls to alter"
    rng = random.Random(task.task_id)
    # the last write first; a call whose arguments have no other valid value (free text) passes to the one before
    for index in [*reversed(writes), *(i for i in reversed(range(len(calls))) if i not in writes)]:
        call = calls[index]
        names = sorted(call.arguments)
        rng.shuffle(names)
        for name in names:
            alt = alternative_value(engine, call, name, rng)
            if alt is not _NONE:
                changed = ToolCall(call.name, {**call.arguments, name: alt})
                return calls[:index] + (changed,) + calls[index + 1:], f"call {index} ({call.name}): {name} -> {alt!r}"
    return calls, "no argument of any call has another valid value"


def compare_task(engine: DomainEngine, worker: Tau2Worker, task: ImportedTask, tau2_initial: dict[str, object],
                 verdicts: bool = True) -> TaskAgreement:
    gold = task.task.gold_calls
    answer = worker.request(op="replay", domain=task.domain, calls=calls_json(gold))
    run = replay(engine, gold)
    try:
        diffs = state_differences(run.db, run.writes, tau2_initial, answer["changed"])  # type: ignore[arg-type]
        ours_err = [f"call {i} ({c.name}): {r.error}" for i, (c, r) in enumerate(zip(gold, run.results)) if not r.ok]
    finally:
        run.close()
    tau2_err = [f"call {i} ({c.name}): {e}" for i, (c, e) in enumerate(zip(gold, answer["errors"])) if e]
    result = TaskAgreement(task.tau2_id, tau2_err, ours_err, diffs)
    if not verdicts:
        return result
    said = " ".join(task.task.communicate_info)
    altered, result.altered = altered_calls(engine, task)
    for kind, calls, text in (("gold", gold, said), ("empty", (), ""), ("altered", altered, said)):
        ours = verify(task.task, Trajectory(tuple(calls), text), engine)
        theirs = worker.request(op="evaluate", domain=task.domain, task_id=task.tau2_id, calls=calls_json(calls),
                                text=text)
        result.verdicts[kind] = (ours.solved, theirs["reward"] == 1.0)
        result.strict[kind] = ours.strict_solved
        if not ours.solved:
            result.our_reasons[kind] = "; ".join(f"{n}: {getattr(ours, n).reason}" for n in ours.failed_checks())
    return result


def measure(domain: str, worker: Tau2Worker, limit: int | None = None, verdicts: bool = True,
            task_ids: list[str] | None = None) -> AgreementReport:
    """Compare every imported task of ``domain`` (or the first ``limit``, or those named)."""
    spec, engine = get_spec(domain), get_engine(domain)
    tasks = imported_tasks(spec)
    if task_ids is not None:
        tasks = [t for t in tasks if t.tau2_id in set(task_ids)]
    tasks = tasks[:limit] if limit is not None else tasks
    tau2_initial = worker.request(op="initial", domain=domain)["db"]
    with engine.fresh() as db:
        ours_initial = our_records(db)
    initial = initial_differences(ours_initial, tau2_initial)
    return AgreementReport(domain, initial, [compare_task(engine, worker, t, tau2_initial, verdicts)
                                             for t in tasks])


def disagreement_kinds(report: AgreementReport) -> Counter[str]:
    return Counter(k for _, k in report.disagreements())
