"""tau2 tasks as ToolScale tasks: gold calls from a task's actions, what must be said from its communicate_info.

The tasks are read where the installed tau2 package keeps them (the spec's ``imported_tasks`` source), never
copied into this repository.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from domains import external
from domains.engine import ToolCall
from domains.spec import DomainSpec
from verifiers.types import VerifiableTask

SOURCE_NAME = "tau2"
# tau2's reward bases that our checks implement, and which check each becomes. A task's basis defaults, as in
# tau2, to the final database and what was said.
BASIS_CHECKS = {"DB": "execution", "COMMUNICATE": "fidelity", "ENV_ASSERTION": "assertions", "ACTION": "actions"}
DEFAULT_BASIS = ("DB", "COMMUNICATE")


@dataclass(frozen=True)
class ImportedTask:
    """One tau2 task: its id in tau2, the verifiable part, and the tau2 JSON it came from."""

    domain: str
    tau2_id: str
    task: VerifiableTask
    raw: dict[str, Any]
    unsupported: tuple[str, ...] = ()  # reward bases of the task that no check of ours implements

    @property
    def basis(self) -> tuple[str, ...]:
        return tuple((self.raw.get("evaluation_criteria") or {}).get("reward_basis") or DEFAULT_BASIS)

    @property
    def task_id(self) -> str:
        return f"{self.domain}-tau2-{self.tau2_id}"

    def content_hash(self) -> str:
        blob = json.dumps([self.domain, self.tau2_id, [c.to_dict() for c in self.task.gold_calls],
                           list(self.task.communicate_info)], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def instruction_text(self) -> str:
        ins = (self.raw.get("user_scenario") or {}).get("instructions") or {}
        if isinstance(ins, str):
            return ins
        return " ".join(str(ins[k]) for k in ("reason_for_call", "known_info", "unknown_info", "task_instructions")
                        if ins.get(k))


def convert(domain: str, raw: dict[str, Any], seed: int = 0) -> ImportedTask:
    """One tau2 Task dict to an ``ImportedTask``; only the assistant's actions are gold calls. The task is judged
    by its own reward basis, as tau2 judges it: DB -> execution, COMMUNICATE -> fidelity."""
    criteria = raw.get("evaluation_criteria") or {}
    setup, calls = dual_control_calls(raw)
    if not setup:  # a single-control domain: only the assistant's actions are gold calls
        calls = tuple(c for c, a in zip(calls, criteria.get("actions") or [])
                      if a.get("requestor", "assistant") == "assistant")
    info = tuple(str(i) for i in criteria.get("communicate_info") or [])
    basis = [str(b) for b in criteria.get("reward_basis") or DEFAULT_BASIS]
    checks = [BASIS_CHECKS[b] for b in basis if b in BASIS_CHECKS]
    unsupported = tuple(b for b in basis if b not in BASIS_CHECKS)
    task = VerifiableTask(domain, seed, calls, info, criteria=tuple(checks) or ("execution", "fidelity"),
                          setup_calls=setup, env_assertions=tuple(criteria.get("env_assertions") or ()),
                          actions=tuple(criteria.get("actions") or ()) if "ACTION" in basis else ())
    return ImportedTask(domain, str(raw["id"]), task, raw, unsupported)


def imported_tasks(spec: DomainSpec, seed: int = 0) -> list[ImportedTask]:
    """Every task of the spec's ``imported_tasks`` source, in file order; [] when the spec imports none.
    Raises ``external.ExternalDataMissing`` (one line on how to install the data) when it cannot be found."""
    if spec.imported_tasks is None:
        return []
    data = external.load(spec.sources[spec.imported_tasks])
    if not isinstance(data, list):
        raise ValueError(f"{spec.name}: imported tasks must be a JSON list of tau2 tasks")
    return [convert(spec.name, raw, seed) for raw in data]


def dual_control_calls(raw: dict[str, Any]) -> tuple[tuple[ToolCall, ...], tuple[ToolCall, ...]]:
    """A dual-control (telecom) task's calls: its ``initial_state.initialization_actions`` as setup calls (each a
    setup tool of the spec, whichever side tau2 runs it on), and its gold actions, the user's with side "user"."""
    init = (raw.get("initial_state") or {}).get("initialization_actions") or []
    setup = tuple(ToolCall(a["func_name"], dict(a.get("arguments") or {}), "setup") for a in init)
    actions = (raw.get("evaluation_criteria") or {}).get("actions") or []
    gold = tuple(ToolCall(a["name"], dict(a.get("arguments") or {}),
                          "user" if a.get("requestor") == "user" else "agent") for a in actions)
    return setup, gold
