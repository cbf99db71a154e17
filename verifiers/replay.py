"""Replay a sequence of tool calls on a fresh copy of a seeded domain database."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

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
    return Replay(db, _run_calls(db, calls if isinstance(calls, (tuple, list)) else ()), setup_results)


def _run_calls(db: Database, calls: tuple[Any, ...] | list[Any]) -> list[ToolResult]:
    return [db.call(c.name, c.arguments, c.side) if isinstance(c, ToolCall)
            else ToolResult(False, error=f"not a tool call: {type(c).__name__}") for c in calls]


def _same_call(a: Any, b: ToolCall) -> bool:
    """The same call to the letter: JSON equal, so 1, 1.0 and True are three values (Python's == says one)."""
    if a is b:  # a mutant keeps the gold's own call objects where it does not change them
        return True
    return isinstance(a, ToolCall) and a.side == b.side and a.name == b.name and (
        json.dumps(a.arguments, sort_keys=True, default=repr) == json.dumps(b.arguments, sort_keys=True, default=repr))


def shared_prefix(calls: tuple[ToolCall, ...] | list[ToolCall], gold: tuple[ToolCall, ...]) -> int:
    """How many of ``calls``' first calls are ``gold``'s first calls."""
    k = 0
    while k < min(len(calls), len(gold)) and _same_call(calls[k], gold[k]):
        k += 1
    return k


class SharedPrefix:
    """Replays of call sequences that begin like the gold's (its mutants), on one database: the state after each of
    the gold's first ``upto`` calls is a savepoint, and a sequence resumes from the state after the longest gold
    prefix it shares; its calls from there run as ``replay`` runs them, so its ``Replay`` is the one ``replay``
    gives. A mutant that changes call 3 of 5 then runs 3 calls, not 5.

    Sequences must come in descending order of the prefix they share (``shared_prefix``): going back to a savepoint
    discards the later ones. Each ``run``'s replay lives until the next ``run`` or ``close``; it is never closed
    itself."""

    def __init__(self, engine: DomainEngine, gold_calls: tuple[ToolCall, ...], setup: tuple[ToolCall, ...] = (),
                 upto: int | None = None):
        self.gold = tuple(gold_calls)
        self.resumable = len(self.gold) if upto is None else min(upto, len(self.gold))
        self.db = engine.fresh()
        try:
            self.setup_results = [self.db.call(c.name, c.arguments, "setup") for c in setup]
            self.prefix_results: list[ToolResult] = []
            for k, c in enumerate(self.gold[:self.resumable]):
                self.db.conn.execute(f"SAVEPOINT gold_prefix_{k}")
                self.prefix_results.append(self.db.call(c.name, c.arguments, c.side))
            self.db.conn.execute(f"SAVEPOINT gold_prefix_{self.resumable}")
        except BaseException:
            self.db.close()
            raise

    def shared(self, calls: tuple[ToolCall, ...] | list[ToolCall]) -> int:
        """How many gold calls ``calls`` shares and this replay can resume after (at most ``upto``)."""
        return min(shared_prefix(calls, self.gold), len(self.prefix_results))

    def run(self, calls: tuple[ToolCall, ...] | list[ToolCall]) -> Replay:
        k = self.shared(calls)
        if k > self.resumable:
            raise ValueError(f"a sequence sharing {k} gold calls after one sharing {self.resumable}: run them in "
                             "descending order of the prefix they share")
        self.db.conn.execute(f"ROLLBACK TO gold_prefix_{k}")  # the state after gold calls 0..k-1, nothing else
        self.resumable = k
        return Replay(self.db, self.prefix_results[:k] + _run_calls(self.db, calls[k:]), self.setup_results)

    def close(self) -> None:
        self.db.close()
