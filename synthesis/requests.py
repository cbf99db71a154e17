"""Request samplers: one user request = a clause the user says + the gold calls that fulfil it.

Every sampler works on a live ``Database`` (the state the previous requests of the task left behind), runs
its gold calls there, and returns a ``Request`` only if every call succeeded, so a composed task is valid
by construction. Samplers return None when the domain or the current data offers nothing suitable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from domains.engine import Database, ToolCall
from domains.spec import SLOT, Tool
from synthesis.toolgraph import ToolGraph

TRIES = 12


@dataclass(frozen=True)
class Request:
    kind: str
    clause: str
    calls: tuple[ToolCall, ...]
    communicate: tuple[str, ...] = ()
    known: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    entities: tuple[tuple[str, Any], ...] = ()  # (table, key) the request is about
    notes: tuple[str, ...] = field(default_factory=tuple)
    says: tuple[str, ...] = ()  # the record values the clause spells out (what a rewrite of it must keep)
    # dual control: the calls that set up the start this goal is about (a phone in airplane mode) and the
    # assertions its final state must pass (the phone has service again); the task runs them as tau2 does
    setup: tuple[ToolCall, ...] = ()
    asserts: tuple[dict[str, Any], ...] = ()
    # a goal's intent and the candidate row its outcome was decided on, as (column, value) pairs: synthesis checks
    # with them that two goals of one task do not change each other's outcome; never stored
    decided_on: tuple[str, tuple[tuple[str, Any], ...]] | None = field(default=None, compare=False)


def show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e15 else str(value)
    text = str(value)
    return text.replace("_", " ") if text.replace("_", "").isalpha() else text


def fill(graph: ToolGraph, template: str, args: dict[str, Any], overrides: dict[str, str] | None = None) -> str:
    """Fill a template's slots: key parameters as '<noun> <id>', others by value."""
    overrides = overrides or {}
    pks = graph.spec.primary_keys

    def slot(match: Any) -> str:
        name = match.group(1)
        if name in overrides:
            return overrides[name]
        if name in pks and name in args:
            return f"{graph.spec.table(pks[name]).noun} {args[name]}"
        return show(args.get(name, name))

    return SLOT.sub(slot, template)


def clause_for(graph: ToolGraph, tool: Tool, args: dict[str, Any], rng: random.Random,
               overrides: dict[str, str] | None = None) -> str:
    templates = [t for t in graph.spec.utterances[tool.name]
                 if all(s in args or s in (overrides or {}) for s in SLOT.findall(t))]
    if not templates:
        templates = list(graph.spec.utterances[tool.name])
    text = fill(graph, rng.choice(templates), args, overrides)
    extras = [p for p in args if p not in tool.required and f"{{{p}}}" not in "".join(templates)]
    if extras:
        text += " (" + ", ".join(f"{p.replace('_', ' ')}: {show(args[p])}" for p in extras) + ")"
    return text


def _try_write(graph: ToolGraph, db: Database, tool: Tool, rng: random.Random,
               fixed: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any] | None:
    for _ in range(TRIES):
        args = graph.sample_arguments(db, tool, rng, fixed)
        if args is None:
            return None
        result = db.call(tool.name, args)
        if result.ok:
            return args, result
    return None


def _entities_written(result: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(result.writes, key=repr))


def single_write(graph: ToolGraph, db: Database, rng: random.Random, tool: Tool | None = None,
                 fixed: dict[str, Any] | None = None) -> Request | None:
    tool = tool or rng.choice(graph.writes)
    hit = _try_write(graph, db, tool, rng, fixed)
    if hit is None:
        return None
    args, result = hit
    known = tuple(f"{graph.spec.table(graph.spec.primary_keys[p]).noun} id: {v}"
                  for p, v in args.items() if p in graph.spec.primary_keys)
    return Request("single_write", clause_for(graph, tool, args, rng), (ToolCall(tool.name, args),),
                   known=known, entities=_entities_written(result))


def lookup_write(graph: ToolGraph, db: Database, rng: random.Random) -> Request | None:
    """The user names a row by natural attributes; its key must be looked up before the write."""
    options = [(w, kp) for w in graph.writes if (kp := graph.key_param(w)) and kp[1] in graph.lookups]
    if not options:
        return None
    write, (param, table) = rng.choice(options)
    lookup = rng.choice(graph.lookups[table])
    pk = graph.spec.table(table).primary_key
    for _ in range(TRIES):
        largs = graph.sample_arguments(db, lookup, rng)
        if largs is None:
            return None
        found = db.call(lookup.name, largs)
        rows = found.output if isinstance(found.output, list) else [found.output]
        if not found.ok or len(rows) != 1 or not rows[0] or pk not in rows[0]:
            continue
        key = rows[0][pk]
        hit = _try_write(graph, db, write, rng, {param: key})
        if hit is None:
            continue
        args, result = hit
        mention = fill(graph, lookup.mention or "", largs)
        clause = clause_for(graph, write, args, rng, {param: mention})
        known = tuple(f"{p.replace('_', ' ')}: {show(v)}" for p, v in largs.items())
        return Request("lookup_write", clause,
                       (ToolCall(lookup.name, largs), ToolCall(write.name, args)), known=known,
                       unknown=(f"the {graph.spec.table(table).noun} id",), entities=_entities_written(result))
    return None


def chain(graph: ToolGraph, db: Database, rng: random.Random) -> Request | None:
    """A write that creates a row, then a call that needs the new row's key."""
    creators = [w for w in graph.writes if graph.generated_key(w)]
    rng.shuffle(creators)
    for first in creators[:4]:
        table, pk = graph.generated_key(first)  # type: ignore[misc]
        followers = [t for t in graph.writes if t is not first and pk in t.required]
        followers += [g for e, g in graph.getters.items() if e == table]
        if not followers:
            continue
        hit = _try_write(graph, db, first, rng)
        if hit is None:
            continue
        args1, result1 = hit
        new_key = (result1.output or {}).get(pk)
        if new_key is None:
            continue
        follower = rng.choice(followers)
        noun = graph.spec.table(table).noun
        if follower.kind == "write":
            hit2 = _try_write(graph, db, follower, rng, {pk: new_key})
            if hit2 is None:
                continue
            args2, result2 = hit2
            clause2 = clause_for(graph, follower, args2, rng, {pk: f"the new {noun}"})
            return Request("chain", f"{clause_for(graph, first, args1, rng)}, and then {clause2}",
                           (ToolCall(first.name, args1), ToolCall(follower.name, args2)),
                           unknown=(f"the id of the new {noun}",),
                           entities=_entities_written(result1) + _entities_written(result2))
        got = db.call(follower.name, {pk: new_key})
        if not got.ok:
            continue
        column = _reportable_column(graph, table, got.output, rng, exclude={pk})
        if column is None:
            continue
        return Request("chain", f"{clause_for(graph, first, args1, rng)}, and then tell me the new {noun}'s "
                                f"id and its {graph.spec.table(table).column(column).label}",  # type: ignore[union-attr]
                       (ToolCall(first.name, args1), ToolCall(follower.name, {pk: new_key})),
                       communicate=(str(new_key), show(got.output[column])),
                       unknown=(f"the id of the new {noun}",), entities=_entities_written(result1))
    return None


def _reportable_column(graph: ToolGraph, table: str, row: dict[str, Any] | None, rng: random.Random,
                       exclude: set[str]) -> str | None:
    if not row:
        return None
    t = graph.spec.table(table)
    names = [c.name for c in t.columns if c.name in row and c.name not in exclude and row[c.name] is not None
             and c.references is None and c.type in ("text", "integer", "real", "date", "datetime")
             and c.name not in graph.spec.primary_keys]
    return rng.choice(names) if names else None


def _plausible_arguments(graph: ToolGraph, db: Database, tool: Tool, rng: random.Random,
                         fixed: dict[str, Any]) -> dict[str, Any]:
    """Arguments for the branch not taken: ones that would succeed on the current state (a dry run), so
    both branches read as sensible requests."""
    fallback = None
    for _ in range(TRIES):
        args = graph.sample_arguments(db, tool, rng, fixed)
        if args is None:
            break
        fallback = fallback or args
        if db.dry_run(tool.name, args).ok:
            return args
    return fallback or dict(fixed)


def conditional(graph: ToolGraph, db: Database, rng: random.Random) -> Request | None:
    """'If <row>'s <column> is <value>, do A; otherwise do B', with the branch computed from the data."""
    options = [(w, kp) for w in graph.writes if (kp := graph.key_param(w)) and kp[1] in graph.getters]
    if not options:
        return None
    for _ in range(TRIES):
        write_a, (param, table) = rng.choice(options)
        peers = [w for w, kp in options if kp == (param, table)]
        write_b = rng.choice(peers)
        getter = graph.getters[table]
        t = graph.spec.table(table)
        keys = graph.column_pool(table, t.primary_key)
        if not keys:
            return None
        key = rng.choice(keys)
        got = db.call(getter.name, {t.primary_key: key})
        if not got.ok or not got.output:
            continue
        cols = [c for c in t.columns if c.enum and c.name in got.output]
        if not cols:
            continue
        col = rng.choice(cols)
        actual = got.output[col.name]
        others = [v for v in col.enum if v != actual]  # type: ignore[union-attr]
        asked = actual if (rng.random() < 0.5 or not others) else rng.choice(others)
        chosen = write_a if asked == actual else write_b
        other = write_b if chosen is write_a else write_a
        other_args = _plausible_arguments(graph, db, other, rng, {param: key})
        hit = _try_write(graph, db, chosen, rng, {param: key})
        if hit is None:
            continue
        args, result = hit
        if other is chosen and other_args == args:
            continue
        branch_taken = clause_for(graph, chosen, args, rng)
        branch_other = clause_for(graph, other, other_args, rng)
        noun_key = f"{t.noun} {key}"
        if asked == actual:
            then_clause, else_clause = branch_taken, branch_other
        else:
            then_clause, else_clause = branch_other, branch_taken
        clause = (f"check {noun_key}: if its {col.label} is {show(asked)}, {then_clause}; "
                  f"otherwise, {else_clause}")
        return Request("conditional", clause, (ToolCall(getter.name, {t.primary_key: key}), ToolCall(chosen.name, args)),
                       known=(f"{t.noun} id: {key}",), unknown=(f"the current {col.label} of {noun_key}",),
                       entities=_entities_written(result),
                       notes=(f"condition {col.name} == {asked!r}", f"branch {'then' if asked == actual else 'else'}"))
    return None


def question(graph: ToolGraph, db: Database, rng: random.Random) -> Request | None:
    """A figure the agent must compute from a list of rows (count, total, highest) and say."""
    lists = list(graph.lists)
    rng.shuffle(lists)
    for tool in lists[:4]:
        for _ in range(TRIES // 2):
            args = graph.sample_arguments(db, tool, rng)
            if args is None:
                break
            res = db.call(tool.name, args)
            if not res.ok or not isinstance(res.output, list) or len(res.output) < 2:
                continue
            rows = res.output
            numeric = [k for k, v in rows[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                       and k not in graph.spec.primary_keys and all(isinstance(r.get(k), (int, float)) for r in rows)]
            base = clause_for(graph, tool, args, rng)
            table = graph.spec.table(tool.entity)
            measure = rng.choice(["count"] + ["sum", "max", "min"] * (1 if numeric else 0))
            if measure == "count":
                answer: Any = len(rows)
                ask = f"{base}, and tell me how many there are"
            else:
                col = rng.choice(numeric)
                values = [r[col] for r in rows]
                column = table.column(col)
                label = column.label if column else col.replace("_", " ")
                answer = {"sum": round(sum(values), 2), "max": max(values), "min": min(values)}[measure]
                word = {"sum": "total", "max": "highest", "min": "lowest"}[measure]
                ask = f"{base}, and tell me the {word} {label}"
            return Request("question", ask, (ToolCall(tool.name, args),), communicate=(show(answer),),
                           known=tuple(f"{p.replace('_', ' ')}: {show(v)}" for p, v in args.items()),
                           unknown=("the figure asked for",))
    return None


def follow_up(graph: ToolGraph, db: Database, rng: random.Random, entities: tuple[tuple[str, Any], ...]) -> Request | None:
    """A second request about a row an earlier request wrote: another write on it, or its new value.
    A row the task itself created is called 'the new <noun>': the user never learned its key."""
    pks = {t.name: t.primary_key for t in graph.spec.tables}
    targets = [(t, k) for t, k in entities if t in pks]
    rng.shuffle(targets)
    for table, key in targets:
        pk = pks[table]
        t = graph.spec.table(table)
        created = key not in graph.column_pool(table, pk)
        name = f"the new {t.noun}" if created else f"{t.noun} {key}"
        writers = [w for w in graph.writes if pk in w.required]
        rng.shuffle(writers)
        for w in writers[:3]:
            hit = _try_write(graph, db, w, rng, {pk: key})
            if hit is not None:
                args, result = hit
                return Request("follow_up", clause_for(graph, w, args, rng, {pk: name}), (ToolCall(w.name, args),),
                               entities=_entities_written(result))
        getter = graph.getters.get(table)
        if getter is not None:
            got = db.call(getter.name, {pk: key})
            column = _reportable_column(graph, table, got.output if got.ok else None, rng, exclude={pk})
            if column is not None:
                return Request("follow_up", f"tell me the current {t.column(column).label} of {name}",  # type: ignore[union-attr]
                               (ToolCall(getter.name, {pk: key}),), communicate=(show(got.output[column]),))
    return None


BASE_KINDS = {"single_write": single_write, "lookup_write": lookup_write, "chain": chain,
              "conditional": conditional, "question": question}
