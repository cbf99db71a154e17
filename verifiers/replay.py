"""Replay a sequence of tool calls on a fresh copy of a seeded domain database."""

from __future__ import annotations

from dataclasses import dataclass

from domains.engine import Database, DomainEngine, RowKey, ToolCall, ToolResult


@dataclass
class Replay:
    db: Database
    results: list[ToolResult]

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


def replay(engine: DomainEngine, calls: tuple[ToolCall, ...] | list[ToolCall]) -> Replay:
    db = engine.fresh()
    return Replay(db, [db.call(c.name, c.arguments) for c in calls])
