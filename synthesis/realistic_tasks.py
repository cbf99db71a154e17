"""Sampling and evolving realistic tasks (domains whose spec declares users and intents).

Base: one user, identified first, with one goal whose outcome the policy decides; outcomes are drawn evenly
so refusals and the less common writes are as present as the usual one. Some bases, and the ``add_forbidden``
operator, add a request the policy forbids. ``add_goal`` gives the same user a second goal about another
row (never one the task itself created, so nothing is made and then undone).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from domains.engine import Database
from domains.realism_spec import Intent
from synthesis.realistic import Realism
from synthesis.requests import Request
from synthesis.task import Task, style_for
from synthesis.toolgraph import ToolGraph

FORBIDDEN_IN_BASE = 0.3


_REALISM: dict[int, tuple[Any, Realism]] = {}


def realism_for(graph: ToolGraph) -> Realism:
    """One ``Realism`` per materialised engine (its user and candidate caches are worth keeping)."""
    held = _REALISM.get(id(graph.engine))
    if held is None or held[0] is not graph.engine:
        held = (graph.engine, Realism(graph))
        _REALISM[id(graph.engine)] = held
    return held[1]


def is_converted(graph: ToolGraph) -> bool:
    """A domain whose spec declares users and intents gets realistic tasks; others keep the old sampler."""
    return graph.spec.users is not None and bool(graph.spec.intents)


def _goal_intents(realism: Realism, role: str = "customer") -> list[Intent]:
    return [i for i in realism.spec.intents if i.role == role and any(o.calls or o.say for o in i.outcomes)]


def _role_forbidden(realism: Realism, role: str = "customer") -> list[Intent]:
    return [i for i in realism.spec.intents if i.role == role and not any(o.calls or o.say for o in i.outcomes)]


def _replayed(graph: ToolGraph, task: Task, seen: set[tuple[str, Any]] | None = None) -> Database | None:
    """A database where the task's gold has run; ``seen`` collects the rows its calls read."""
    db = graph.engine.fresh()
    for c in task.gold_calls:
        got = db.call(c.name, c.arguments)
        if not got.ok:
            db.close()
            return None
        if seen is not None:
            seen |= set(got.reads)
    return db


def base_candidate(graph: ToolGraph, rng: random.Random, seed: int) -> Task | None:
    realism = realism_for(graph)
    roles = [r.name for r in realism.users.roles if _goal_intents(realism, r.name)]
    if not roles:
        return None
    role = rng.choice(roles)
    intent = rng.choice(_goal_intents(realism, role))
    by_outcome: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for person, row in realism.pairs(intent):
        by_outcome[str(row["outcome"])].append((person, row))
    if not by_outcome:
        return None
    person, row = rng.choice(by_outcome[rng.choice(sorted(by_outcome))])
    with graph.engine.fresh() as db:
        ident = realism.identification(role, person, rng)
        got = db.call(ident.calls[0].name, ident.calls[0].arguments) if ident else None
        if ident is None or got is None or not got.ok:
            return None
        goal = realism.intent_request(db, intent, person, row, rng, set(got.reads))
        if goal is None:
            return None
        requests = [ident, goal]
        if rng.random() < FORBIDDEN_IN_BASE:
            extra = _forbidden(realism, db, person, role, rng)
            if extra is not None:
                requests.append(extra)  # after the goal: forbidden phrasings read as an add-on
    r = realism.role(role)
    return Task(graph.spec.name, seed, requests, style_for(rng), persona=realism.persona(role, person, rng),
                user=realism.user_key(role, person), identify_tools=tuple(i.tool for i in r.identify), now=graph.spec.now)


def _forbidden(realism: Realism, db: Database, person: dict[str, Any], role: str, rng: random.Random) -> Request | None:
    choices = ["other", "role"]
    rng.shuffle(choices)
    for kind in choices:
        if kind == "other":
            req = realism.forbidden_for_other(db, person, rng, _goal_intents(realism, role))
        else:
            pool = _role_forbidden(realism, role)
            req = None
            if pool:
                intent = rng.choice(pool)
                # drawn from the state after the task's own calls: never a record the task itself created
                rows = [r for r in realism.candidates(db, intent, person) if not realism.created_by_task(r)]
                req = realism.intent_request(db, intent, person, rng.choice(rows), rng) if rows else None
        if req is not None:
            return req
    return None


def _person(realism: Realism, task: Task) -> tuple[str, dict[str, Any]] | None:
    assert task.persona is not None and task.user is not None
    role = task.persona.role
    people = realism.people(role)
    key = realism.spec.table(realism.role(role).table).primary_key
    found = next((p for p in people if p[key] == task.user[1]), None)
    return (role, found) if found else None


def _child(parent: Task, requests: list[Request], operator: str, rng: random.Random) -> Task:
    # a fresh speaking style: a child that opened like its parent would crowd the common openings
    return Task(parent.domain, parent.seed, requests, style_for(rng), evolved_from=parent.task_id, operator=operator,
                depth=parent.depth + 1, persona=parent.persona, user=parent.user, identify_tools=parent.identify_tools,
                now=parent.now)


def add_goal(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """The same user wants one more thing, about a row the task has not created or changed."""
    realism = realism_for(graph)
    found = _person(realism, parent)
    if found is None:
        return None
    role, person = found
    done = {n for n in parent.notes if n.startswith("intent=")}
    touched = {key for r in parent.requests for _, key in r.entities}
    seen: set[tuple[str, Any]] = set()
    db = _replayed(graph, parent, seen)
    if db is None:
        return None
    try:
        intents = [i for i in _goal_intents(realism, role) if f"intent={i.name}" not in done]
        rng.shuffle(intents)
        for intent in intents[:4]:
            rows = [r for r in realism.candidates(db, intent, person)
                    if not touched & set(r.values()) and not realism.created_by_task(r)]
            if not rows:
                continue
            goal = realism.intent_request(db, intent, person, rng.choice(rows), rng, seen)
            if goal is not None:
                return _child(parent, [*parent.requests, goal], "add_goal", rng)
        return None
    finally:
        db.close()


def add_forbidden(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    """Pair the allowed requests with one the policy forbids, so doing everything fails as doing nothing does."""
    if any(n.startswith("forbidden=") for n in parent.notes):
        return None
    realism = realism_for(graph)
    found = _person(realism, parent)
    if found is None:
        return None
    role, person = found
    db = _replayed(graph, parent)
    if db is None:
        return None
    try:
        extra = _forbidden(realism, db, person, role, rng)
        return None if extra is None else _child(parent, [*parent.requests, extra], "add_forbidden", rng)
    finally:
        db.close()


def evolve_realistic(graph: ToolGraph, parent: Task, rng: random.Random) -> Task | None:
    if parent.persona is None:
        return None
    operators = [add_goal, add_forbidden]
    rng.shuffle(operators)
    for op in operators:
        child = op(graph, parent, rng)
        if child is not None:
            return child
    return None
