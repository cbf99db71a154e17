"""Mutants of a gold call sequence: drop a call, change one argument to another valid value, reorder
dependent calls. A good task's checks kill (fail) every mutant."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from domains.engine import DomainEngine, ToolCall
from verifiers.memo import remembered
from verifiers.replay import Replay
from verifiers.types import Mutant

MAX_VALUE_CHANGES_PER_CALL = 4


def mutants(engine: DomainEngine, gold_calls: tuple[ToolCall, ...], gold: Replay) -> list[Mutant]:
    """Every mutant, in a fixed order for a given gold sequence."""
    rng = random.Random(hashlib.sha256(json.dumps([c.to_dict() for c in gold_calls], sort_keys=True,
                                                  default=str).encode()).hexdigest())
    out: list[Mutant] = []
    for i, call in enumerate(gold_calls):
        out.append(Mutant("drop", f"drop call {i} ({call.name})", gold_calls[:i] + gold_calls[i + 1:], (i,)))
    for i, call in enumerate(gold_calls):
        names = sorted(call.arguments)
        rng.shuffle(names)
        for name in names[:MAX_VALUE_CHANGES_PER_CALL]:
            alt = alternative_value(engine, call, name, rng)
            if alt is _NONE:
                continue
            changed = ToolCall(call.name, {**call.arguments, name: alt}, call.side)
            out.append(Mutant("change_argument",
                              f"call {i} ({call.name}): {name}={_show(call.arguments[name])} -> {_show(alt)}",
                              gold_calls[:i] + (changed,) + gold_calls[i + 1:], (i,)))
    for i in range(len(gold_calls) - 1):
        if _dependent(gold, gold_calls, i):
            swapped = gold_calls[:i] + (gold_calls[i + 1], gold_calls[i]) + gold_calls[i + 2:]
            out.append(Mutant("reorder", f"swap calls {i} and {i + 1} ({gold_calls[i].name}, {gold_calls[i + 1].name})",
                              swapped, (i, i + 1)))
    return out


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) < 40 else text[:37] + "..."


def _dependent(gold: Replay, calls: tuple[ToolCall, ...], i: int) -> bool:
    """Call i+1 needs state call i wrote: both write the same row, or i+1 uses a key that i created."""
    first, second = gold.results[i], gold.results[i + 1]
    if first.writes & second.writes:
        return True
    named = {v for v in calls[i].arguments.values() if isinstance(v, (str, int))}  # lists (item ids) are not keys
    created = {pk for (_, pk) in first.writes} - named
    return any(v in created for v in calls[i + 1].arguments.values() if isinstance(v, (str, int)))


class _NoneType:
    pass


_NONE: Any = _NoneType()


def alternative_value(engine: DomainEngine, call: ToolCall, name: str, rng: random.Random) -> Any:
    """Another value for one argument that passes the tool's argument schema, or _NONE."""
    tool = engine.tools.get(call.name)
    if tool is None:
        return _NONE
    schema = tool.parameters.get("properties", {}).get(name, {})
    current = call.arguments[name]
    candidates: list[Any] = []
    if "enum" in schema:
        candidates = [v for v in schema["enum"] if v != current]
    else:
        candidates = [v for v in column_values(engine, tool.entity, name) if v != current]
        if not candidates and isinstance(current, (int, float)) and not isinstance(current, bool):
            candidates = _numeric_neighbours(current, schema)
        if not candidates and "examples" in schema:
            candidates = [v for v in schema["examples"] if v != current]
    validator = engine.validators[tool.name]
    rng.shuffle(candidates)
    for value in candidates[:20]:
        if validator.is_valid({**call.arguments, name: value}):
            return value
    return _NONE


def _numeric_neighbours(current: float, schema: dict[str, Any]) -> list[Any]:
    step = 1 if isinstance(current, int) else max(1.0, abs(current) * 0.25)
    values = [current + step, current - step, current * 2 if current else step]
    return [int(v) if isinstance(current, int) else round(float(v), 2) for v in values]


def column_values(engine: DomainEngine, entity: str, column: str) -> list[Any]:
    """Distinct seeded values of a column named ``column``, in a fixed order (remembered per engine: every mutant
    of every task asks again). Callers must not change the list."""
    return remembered(engine, "column_values", f"{entity}\x00{column}", lambda: sorted(
        set(engine.seeded_values(entity, column)), key=lambda v: (isinstance(v, str), v)))  # SQLite's order: numbers, then text
