"""Replay a sequence of tool calls on a fresh copy of a seeded domain database."""

from __future__ import annotations

from dataclasses import dataclass, field

from domains.engine import Database, DomainEngine, RowKey, ToolCall, ToolResult


@dataclass
class Replay:
    db: Database
    results: list[ToolResult]
    setup_results: list[ToolResult] = field(default_factory=list)  # the task's setup calls (its initial state)

    @property
    def writes(self) -> set[RowKey]:
        return {k for r in self.results for k in r.writes}

    @property
    def reads(self) -> set[RowKey]:
        """Rows read tools returned or were pointed at by key."""
        return {k for r in self.results for k in r.reads}

    @property
    def all_ok(self) -> bool:
        return all(r.ok for r in self.results)

    def close(self) -> None:
        self.db.close()


def replay(engine: DomainEngine, calls: tuple[ToolCall, ...] | list[ToolCall],
           setup: tuple[ToolCall, ...] = ()) -> Replay:
    """Run ``calls`` in order, after the task's ``setup`` calls (its initial state; not part of the result); a
    call that is not a ``ToolCall`` (an agent's malformed output) is an error result like any other bad call,
    never an exception."""
    db = engine.fresh()
    setup_results = [db.call(c.name, c.arguments, "setup") for c in setup]
    results = []
    for c in calls if isinstance(calls, (tuple, list)) else ():
        if isinstance(c, ToolCall):
            results.append(db.call(c.name, c.arguments, c.side))
        else:
            results.append(ToolResult(False, error=f"not a tool call: {type(c).__name__}"))
    return Replay(db, results, setup_results)
