"""What the verifier consumes and produces."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domains.engine import ToolCall

# Every check a trajectory gets, in the order reasons are reported. A task declares which of them decide
# "solved" (its criteria); a synthesised task declares all four.
CHECKS = ("execution", "fidelity", "completeness", "identification")
# checks only a task that asks for them gets (tau2's ENV_ASSERTION and ACTION criteria: verifiers/assertions.py)
EXTRA_CHECKS = ("assertions", "actions")


def checked_criteria(criteria: Any) -> tuple[str, ...]:
    """The criteria as a tuple in CHECKS order; ValueError naming what is wrong otherwise."""
    if isinstance(criteria, str) or not isinstance(criteria, (list, tuple)) or not criteria:
        raise ValueError(f"criteria must be a non-empty list of {', '.join(CHECKS)}; got {criteria!r}")
    unknown = [c for c in criteria if c not in CHECKS + EXTRA_CHECKS]
    if unknown:
        raise ValueError(f"unknown criteria {unknown!r}; known: {', '.join(CHECKS + EXTRA_CHECKS)}")
    return tuple(c for c in CHECKS + EXTRA_CHECKS if c in criteria)


@dataclass(frozen=True)
class VerifiableTask:
    """The parts of a task the verifier needs: where it starts, the gold calls, what must be said, who the
    user is, and which checks decide "solved" (the task's criteria)."""

    domain: str
    seed: int
    gold_calls: tuple[ToolCall, ...]
    communicate_info: tuple[str, ...] = ()
    # the task's user (table, key) and the tools that identify them; None: the task names no user
    user: tuple[str, Any] | None = None
    identify_tools: tuple[str, ...] = ()
    # tau2's tasks declare a reward basis (final state and what was said); ours declare every check
    criteria: tuple[str, ...] = CHECKS
    # a dual-control task's start (tau2's initialization_actions, as setup calls), its final-state assertions and
    # the gold actions its ACTION criterion looks for (tau2's dicts: func_name/arguments/assert_value, and
    # name/arguments/compare_args)
    setup_calls: tuple[ToolCall, ...] = ()
    env_assertions: tuple[dict[str, Any], ...] = ()
    actions: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "criteria", checked_criteria(self.criteria))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifiableTask:
        calls = tuple(ToolCall(c["name"], dict(c.get("arguments", {})), c.get("side", "agent")) for c in data["gold_calls"])
        user = tuple(data["user"]) if data.get("user") else None
        return cls(data["domain"], int(data.get("seed", 0)), calls, tuple(data.get("communicate_info", ())),
                   user, tuple(data.get("identify_tools", ())),  # type: ignore[arg-type]
                   tuple(data.get("criteria") or CHECKS), *_dual_control(data))

    def contract(self) -> dict[str, Any]:
        """What the verifier needs beyond the gold calls and communicate_info, as stored with a published task
        (warehouse ``tasks.verification_json``) so that the RL reward judges exactly as admission did. A
        dual-control task adds its setup calls, assertions and actions; a task without them keeps the old shape
        (and the bytes every snapshot already stored)."""
        out: dict[str, Any] = {"criteria": list(self.criteria), "user": list(self.user) if self.user else None,
                               "identify_tools": list(self.identify_tools)}
        if self.setup_calls:
            out["setup_calls"] = [c.to_dict() for c in self.setup_calls]
        if self.env_assertions:
            out["env_assertions"] = [dict(a) for a in self.env_assertions]
        if self.actions:
            out["actions"] = [dict(a) for a in self.actions]
        return out

    def with_contract(self, contract: dict[str, Any] | None) -> VerifiableTask:
        """This task with a stored contract applied; ``None`` (a snapshot written before contracts): unchanged."""
        if not contract:
            return self
        user = tuple(contract["user"]) if contract.get("user") else None
        return VerifiableTask(self.domain, self.seed, self.gold_calls, self.communicate_info, user,  # type: ignore[arg-type]
                              tuple(contract.get("identify_tools") or ()), tuple(contract.get("criteria") or CHECKS),
                              *_dual_control(contract))


def _dual_control(data: dict[str, Any]) -> tuple[tuple[ToolCall, ...], tuple[dict[str, Any], ...],
                                                  tuple[dict[str, Any], ...]]:
    """The setup calls, env assertions and actions a task dict or stored contract holds (none: all empty)."""
    setup = tuple(ToolCall(c["name"], dict(c.get("arguments") or {}), c.get("side", "setup"))
                  for c in data.get("setup_calls") or ())
    assertions = tuple(dict(a) for a in data.get("env_assertions") or ())
    return setup, assertions, tuple(dict(a) for a in data.get("actions") or ())


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
    criteria: tuple[str, ...] = CHECKS  # the checks that decide "solved" (the task's own)
    assertions: Check = Check(True, "the task asserts nothing on the final state")
    actions: Check = Check(True, "the task names no gold action to look for")

    @property
    def solved(self) -> bool:
        return all(getattr(self, n).passed for n in self.criteria)

    @property
    def strict_solved(self) -> bool:
        """Every check passes, whatever the task's criteria: our strictest reading."""
        return all(getattr(self, n).passed for n in CHECKS)

    def failed_checks(self) -> list[str]:
        """The task's criteria that failed (what makes ``solved`` false)."""
        return [n for n in self.criteria if not getattr(self, n).passed]


@dataclass(frozen=True)
class Mutant:
    kind: str  # "drop" | "change_argument" | "reorder"
    description: str
    calls: tuple[ToolCall, ...]
    touched: tuple[int, ...] = ()  # the positions in the gold sequence that this mutant dropped, changed or moved


@dataclass(frozen=True)
class MutationReport:
    total: int
    killed: int
    survivors: tuple[str, ...] = field(default_factory=tuple)
    unjudged: int = 0  # mutants of read calls only, left out for a task whose criteria do not judge reads

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
    outputs: tuple[Any, ...] = ()  # what each gold call returned on replay (derivability reads them)

    def admissible(self, kill_threshold: float) -> tuple[bool, str]:
        if not self.gold_validity.passed:
            return False, f"gold_invalid: {self.gold_validity.reason}"
        if not self.no_action.passed:
            return False, f"noop_passes: {self.no_action.reason}"
        if self.mutation.kill_rate < kill_threshold:
            return False, (f"low_kill_rate: {self.mutation.kill_rate:.2f} < {kill_threshold:.2f} "
                           f"(survivors: {'; '.join(self.mutation.survivors[:3])})")
        return True, "ok"
