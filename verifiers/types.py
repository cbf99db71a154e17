"""What the verifier consumes and produces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domains.engine import ToolCall


@dataclass(frozen=True)
class VerifiableTask:
    """The parts of a task the verifier needs: where it starts, the gold calls, what must be said."""

    domain: str
    seed: int
    gold_calls: tuple[ToolCall, ...]
    communicate_info: tuple[str, ...] = ()
    # the task's user (table, key) and the tools that identify them; None: the task names no user
    user: tuple[str, Any] | None = None
    identify_tools: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifiableTask:
        calls = tuple(ToolCall(c["name"], dict(c.get("arguments", {}))) for c in data["gold_calls"])
        user = tuple(data["user"]) if data.get("user") else None
        return cls(data["domain"], int(data.get("seed", 0)), calls, tuple(data.get("communicate_info", ())),
                   user, tuple(data.get("identify_tools", ())))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Trajectory:
    """What an agent did: its tool calls in order, and everything it said to the user."""

    calls: tuple[ToolCall, ...] = ()
    assistant_text: str = ""


@dataclass(frozen=True)
class Check:
    passed: bool
    reason: str


@dataclass(frozen=True)
class Verdict:
    execution: Check
    fidelity: Check
    completeness: Check
    identification: Check = Check(True, "the task names no user to identify")

    @property
    def solved(self) -> bool:
        return (self.execution.passed and self.fidelity.passed and self.completeness.passed
                and self.identification.passed)

    def failed_checks(self) -> list[str]:
        return [n for n in ("execution", "fidelity", "completeness", "identification") if not getattr(self, n).passed]


@dataclass(frozen=True)
class Mutant:
    kind: str  # "drop" | "change_argument" | "reorder"
    description: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class MutationReport:
    total: int
    killed: int
    survivors: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kill_rate(self) -> float:
        return 1.0 if self.total == 0 else self.killed / self.total


@dataclass(frozen=True)
class TaskReport:
    """Task-level checks: is the task itself fit to publish?"""

    gold_validity: Check
    no_action: Check
    mutation: MutationReport
    writes: int

    def admissible(self, kill_threshold: float) -> tuple[bool, str]:
        if not self.gold_validity.passed:
            return False, f"gold_invalid: {self.gold_validity.reason}"
        if not self.no_action.passed:
            return False, f"noop_passes: {self.no_action.reason}"
        if self.mutation.kill_rate < kill_threshold:
            return False, (f"low_kill_rate: {self.mutation.kill_rate:.2f} < {kill_threshold:.2f} "
                           f"(survivors: {'; '.join(self.mutation.survivors[:3])})")
        return True, "ok"
