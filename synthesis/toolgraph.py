"""What the synthesiser knows about a domain's tools, read off the spec alone (no per-domain code).

Roles: write tools; lookups (read tools with a ``mention`` that find a row from natural attributes); getters
(read tools whose only parameter is their entity's key); lists (read tools returning many rows). Argument
values are drawn from the data: a key parameter from its table, a column-named parameter from that column,
otherwise from the parameter's enum, examples or numeric range. A tool may declare ``candidates``: queries
run in order on the live state, each bound to the arguments chosen so far, whose rows propose values for the
parameters their columns name (how list-of-object arguments such as a booking's flights are built).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from domains.engine import Database, DomainEngine
from domains.spec import Tool


@dataclass
class ToolGraph:
    engine: DomainEngine
    _rows: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = field(default_factory=dict)
    _proposed: dict[str, set[str]] = field(default_factory=dict)

    @property
    def spec(self):  # noqa: ANN201 - DomainSpec
        return self.engine.spec

    @cached_property
    def writes(self) -> list[Tool]:
        return [t for t in self.spec.tools if t.kind == "write"]

    @cached_property
    def lookups(self) -> dict[str, list[Tool]]:
        """entity table -> read tools that find one of its rows from natural attributes."""
        out: dict[str, list[Tool]] = {}
        for t in self.spec.tools:
            if t.kind == "read" and t.mention:
                out.setdefault(t.entity, []).append(t)
        return out

    @cached_property
    def getters(self) -> dict[str, Tool]:
        out: dict[str, Tool] = {}
        for t in self.spec.tools:
            pk = self.spec.table(t.entity).primary_key
            if t.kind == "read" and t.returns_mode == "one" and t.param_names == [pk] and t.entity not in out:
                out[t.entity] = t
        return out

    @cached_property
    def lists(self) -> list[Tool]:
        return [t for t in self.spec.tools if t.kind == "read" and t.returns_mode == "many"]

    def key_param(self, tool: Tool) -> tuple[str, str] | None:
        """(parameter, table) of the first required parameter that names a row by key, preferring the entity."""
        pks = self.spec.primary_keys
        keyed = [(p, pks[p]) for p in tool.required if p in pks]
        keyed.sort(key=lambda pt: pt[1] != tool.entity)
        return keyed[0] if keyed else None

    def generated_key(self, tool: Tool) -> tuple[str, str] | None:
        """(table, key column) of the row a write tool creates, if it creates one."""
        for _, table in tool.generated.items():
            return table, self.spec.table(table).primary_key
        return None

    def column_pool(self, entity: str, column: str) -> list[Any]:
        """Seeded values of a column named ``column`` (see ``DomainEngine.seeded_values``). Sampling only
        proposes values; the engine decides on the live state whether a call with them succeeds."""
        return self.engine.seeded_values(entity, column)

    def anchor_rows(self, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        if table not in self._rows:
            t = self.spec.table(table)
            with self.engine.fresh() as db:
                self._rows[table] = ([c.name for c in t.columns],
                                     db.query(f"SELECT * FROM {t.name} ORDER BY {t.primary_key}"))
        return self._rows[table]

    def sample_value(self, db: Database, tool: Tool, param: str, rng: random.Random,
                     anchor: dict[str, Any] | None = None) -> Any:
        schema = tool.parameters["properties"][param]
        if anchor is not None and param in anchor and anchor[param] is not None and "enum" not in schema:
            return anchor[param]
        if "enum" in schema:
            return rng.choice(schema["enum"])
        pool = self.column_pool(tool.entity, param)
        if pool:
            return rng.choice(pool)
        if "examples" in schema:
            return rng.choice(schema["examples"])
        kind = schema.get("type")
        if kind in ("integer", "number"):
            lo = schema.get("minimum", 1)
            hi = schema.get("maximum", max(lo + 10, 100))
            if kind == "integer":
                return rng.randint(int(lo), int(min(hi, lo + 1000)))
            return round(rng.uniform(lo, min(hi, lo + 1000)), 2)
        if kind == "boolean":
            return rng.random() < 0.5
        return None

    def sample_arguments(self, db: Database, tool: Tool, rng: random.Random,
                         fixed: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Arguments for every required parameter (and some optional ones), or None if one has no source."""
        fixed = fixed or {}
        anchor = None
        if rng.random() < 0.5:
            names, rows = self.anchor_rows(tool.entity)
            if rows:
                anchor = dict(zip(names, rng.choice(rows)))
        args: dict[str, Any] = {}
        proposed = self.proposed_params(db, tool)
        for param in tool.param_names:
            if param in fixed:
                args[param] = fixed[param]
                continue
            if param in proposed:
                continue
            if param not in tool.required and rng.random() < 0.6:
                continue
            value = self.sample_value(db, tool, param, rng, anchor)
            if value is None:
                if param in tool.required:
                    return None
                continue
            args[param] = value
        if tool.candidates and not self._propose(db, tool, rng, args, set(fixed)):
            return None
        return args

    def proposed_params(self, db: Database, tool: Tool) -> set[str]:
        """The parameters that the tool's candidates queries fill (the columns they return)."""
        if tool.name not in self._proposed:
            blank = {p: None for p in tool.param_names} | {"now": self.spec.now}
            names = {n for sql in tool.candidates for n in db.columns(sql, blank)}
            self._proposed[tool.name] = names & set(tool.param_names)
        return self._proposed[tool.name]

    def _propose(self, db: Database, tool: Tool, rng: random.Random, args: dict[str, Any], fixed: set[str]) -> bool:
        """Run the candidates queries in order, each filling ``args`` from one random row; a fixed argument keeps
        its value and only rows agreeing with it are drawn. False when a query offers no row."""
        properties = tool.parameters["properties"]
        for sql in tool.candidates:
            bound = {p: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v
                     for p, v in ((p, args.get(p)) for p in tool.param_names)} | {"now": self.spec.now}
            rows = []
            for row in db.records(sql, bound):
                values = {c: _decoded(properties[c], v) for c, v in row.items() if c in properties}
                if all(values[c] == args[c] for c in values if c in fixed):
                    rows.append(values)
            if not rows:
                return False
            args.update({c: v for c, v in rng.choice(rows).items() if c not in fixed and v is not None})
        return True


def _decoded(schema: dict[str, Any], value: Any) -> Any:
    """A candidates column's value for a parameter: JSON text becomes the list or object the schema wants."""
    if schema.get("type") in ("array", "object") and isinstance(value, str):
        return json.loads(value)
    return value
