"""Evolution operators: each turns a verified task into a harder one, which is verified again.

An operator replays the parent's gold calls on a fresh database (so the child starts where the parent
ended), then adds or changes one request. Lineage (parent id, operator, depth) travels with the child.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from domains.engine import Database, ToolCall
from synthesis import requests as rq
from synthesis.requests import Request
from synthesis.task import Task
from synthesis.toolgraph import ToolGraph

Operator = Callable[[ToolGraph, Task, random.Random], Task | None]


def _replayed(graph: ToolGraph, calls: tuple[ToolCall, ...]) -> Database | None:
    db = graph.engine.fresh()
    if all(db.call(c.name, c.arguments).ok for c in calls):
        return db
    db.close()
    return None


def _child(parent: Task, requests: list[Request], operator: str, distractors: list[str] | None = None) -> Task:
    return Task(parent.domain, parent.seed, requests, parent.style, evolved_from=parent.task_id,
                operator=operator, depth=parent.depth + 1,
                distractors=list(parent.distractors) + list(distractors or []))


def _append(sampler: Callable[[ToolGraph, Database, random.Random], Request | None], name: str) -> Operator:
    def operator(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
        db = _replayed(graph, parent.gold_calls)
        if db is None:
            return None
        try:
            extra = sampler(graph, db, rng)
        finally:
            db.close()
        return None if extra is None else _child(parent, [*parent.requests, extra], name)
    return operator


def _written(parent: Task) -> tuple[tuple[str, object], ...]:
    return tuple(e for r in parent.requests for e in r.entities)


def add_entity(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """One more request about a different row."""
    db = _replayed(graph, parent.gold_calls)
    if db is None:
        return None
    try:
        taken = set(_written(parent))
        for _ in range(4):
            sampler = rng.choice([rq.single_write, rq.lookup_write])
            extra = sampler(graph, db, rng)
            if extra is not None and not (set(extra.entities) & taken):
                return _child(parent, [*parent.requests, extra], "add_entity")
        return None
    finally:
        db.close()


def add_follow_up(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """A follow-up on a row the task already changed: change it again, or report its new value."""
    db = _replayed(graph, parent.gold_calls)
    if db is None:
        return None
    try:
        extra = rq.follow_up(graph, db, rng, _written(parent))
        return None if extra is None else _child(parent, [*parent.requests, extra], "add_follow_up")
    finally:
        db.close()


def add_constraint(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """Make the last single write conditional on the row's current state ('only if ...'); when the
    condition does not hold, the right action is to leave the row alone."""
    last = parent.requests[-1]
    if last.kind not in ("single_write", "follow_up") or len(last.calls) != 1:
        return None
    call = last.calls[0]
    tool = graph.spec.tool(call.name)
    key = graph.key_param(tool) if tool else None
    if key is None or key[1] not in graph.getters:
        return None
    param, table = key
    db = _replayed(graph, tuple(c for r in parent.requests[:-1] for c in r.calls))
    if db is None:
        return None
    try:
        getter = graph.getters[table]
        t = graph.spec.table(table)
        got = db.call(getter.name, {t.primary_key: call.arguments[param]})
        cols = [c for c in t.columns if c.enum and got.ok and got.output and c.name in got.output]
        if not cols:
            return None
        col = rng.choice(cols)
        actual = got.output[col.name]
        others = [v for v in col.enum if v != actual]  # type: ignore[union-attr]
        holds = rng.random() < 0.6 or not others
        asked = actual if holds else rng.choice(others)
        calls: tuple[ToolCall, ...] = (ToolCall(getter.name, {t.primary_key: call.arguments[param]}),)
        if holds:
            if not db.call(call.name, call.arguments).ok:
                return None
            calls += (call,)
        key = call.arguments[param]
        name = f"the new {t.noun}" if key not in graph.column_pool(table, t.primary_key) else f"{t.noun} {key}"
        clause = f"{last.clause}, but only if {name}'s {col.label} is {rq.show(asked)}; if it is not, leave it as it is"
        constrained = Request("constraint", clause, calls, known=last.known,
                              unknown=(f"the current {col.label} of {name}",),
                              entities=last.entities if holds else ())
        return _child(parent, [*parent.requests[:-1], constrained], "add_constraint")
    finally:
        db.close()


def add_distractor(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """Mention another row of the same kind that must be left untouched."""
    written = [(t, k) for t, k in _written(parent) if t in {x.name for x in graph.spec.tables}]
    if not written:
        return None
    table, key = rng.choice(written)
    t = graph.spec.table(table)
    others = [k for k in graph.column_pool(table, t.primary_key) if k != key]
    if not others:
        return None
    other = rng.choice(others)
    line = rng.choice([f"You also have {t.noun} {other}; it is fine as it is and must not be changed.",
                       f"Do not touch {t.noun} {other}, even if the agent suggests it."])
    return _child(parent, list(parent.requests), "add_distractor", [line])


OPERATORS: dict[str, Operator] = {
    "add_entity": add_entity,
    "add_conditional": _append(rq.conditional, "add_conditional"),
    "add_follow_up": add_follow_up,
    "require_computed_figure": _append(rq.question, "require_computed_figure"),
    "add_constraint": add_constraint,
    "add_distractor": add_distractor,
}


def evolve(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """Apply operators in a random order until one yields a child."""
    names = list(OPERATORS)
    rng.shuffle(names)
    for name in names:
        child = OPERATORS[name](graph, parent, rng)
        if child is not None:
            return child
    return None
