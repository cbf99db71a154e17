"""One engine for every domain: materialise a seeded SQLite database and execute tool calls on it.

A ``DomainEngine`` holds the serialised image of the seeded database; ``fresh()`` deserialises it into a new
in-memory connection (microseconds, no re-seeding). ``Database.call`` validates arguments, checks
preconditions, applies effects in one transaction and returns a ``ToolResult``; it never raises for a bad call.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from domains.fastcheck import compile_check
from domains.ddl import AUDIT_TABLE, audit_schema, schema_statements
from domains.seeding import Formula, draw, sequence_value
from domains.spec import SLOT, DomainSpec, Table, Tool

MAX_STRING_CHARS = 2_000
POOL_SIZE = 16
RowKey = tuple[str, Any]  # (table, primary key value)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    output: Any = None
    error: str | None = None
    reads: frozenset[RowKey] = frozenset()
    writes: frozenset[RowKey] = frozenset()

    def to_json(self) -> str:
        """What an agent sees as the observation."""
        return json.dumps(self.output if self.ok else {"error": self.error}, ensure_ascii=False, default=str)


def _strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _strict_number(checker: Any, instance: Any) -> bool:
    return isinstance(instance, (int, float)) and not isinstance(instance, bool)


_type_checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
    {"integer": _strict_integer, "number": _strict_number})
ArgumentValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_type_checker)


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _too_long(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > MAX_STRING_CHARS
    if isinstance(value, dict):
        return any(_too_long(v) for v in value.values()) or len(value) > 100
    if isinstance(value, list):
        return len(value) > 100 or any(_too_long(v) for v in value)
    return False


class CallError(Exception):
    """Raised inside the engine and turned into an error result; never escapes ``Database.call``."""


class DomainEngine:
    """A materialised domain: spec + seed -> an immutable database image and its fingerprint."""

    def __init__(self, spec: DomainSpec, seed: int = 0):
        self.spec = spec
        self.seed = seed
        self.tools: dict[str, Tool] = {t.name: t for t in spec.tools}
        self.validators = {t.name: ArgumentValidator(t.parameters) for t in spec.tools}
        self.fast_checks = {t.name: compile_check(t.parameters) for t in spec.tools}
        self.pk_tables = spec.primary_keys
        self._arg_cache: dict[tuple[str, str], str | None] = {}
        self._pool: list[sqlite3.Connection] = []
        self._seeded: dict[tuple[str, str], list[Any]] = {}
        self._lock = threading.Lock()
        conn = sqlite3.connect(":memory:", isolation_level=None)
        for stmt in schema_statements(spec):
            conn.execute(stmt)
        _seed_tables(conn, spec, seed)
        if spec.invariants:
            from domains.invariants import repair_invariants  # local: invariants imports this module's helpers
            repair_invariants(conn, spec, seed)
        for stmt in audit_schema(spec):
            conn.execute(stmt)
        self.image: bytes = conn.serialize()
        self.fingerprint = state_fingerprint(conn, spec)
        conn.close()

    def argument_problem(self, tool: str, arguments: dict[str, Any]) -> str | None:
        """The first schema violation of a call's arguments, or None; memoised (replays repeat calls)."""
        try:
            key = (tool, json.dumps(arguments, sort_keys=True))
        except (TypeError, ValueError):
            key = None
        if key is not None and key in self._arg_cache:
            return self._arg_cache[key]
        fast = self.fast_checks.get(tool)
        if fast is not None and fast(arguments):
            return None
        errors = sorted(self.validators[tool].iter_errors(arguments), key=lambda e: list(e.path))
        problem = None
        if errors:
            e = errors[0]
            where = f"argument {'.'.join(map(str, e.path))!r}" if e.path else "arguments"
            problem = f"{tool}: invalid {where}: {_short(e.message)}"
        if key is not None and len(self._arg_cache) < 200_000:
            self._arg_cache[key] = problem
        return problem

    def seeded_values(self, entity: str, column: str) -> list[Any]:
        """Seeded values (in key order, repeats kept) of a column named ``column``: the table it is the key
        of, else ``entity``, else the first table that has it. Cached; callers must not mutate the list."""
        key = (entity, column)
        if key not in self._seeded:
            spec = self.spec
            owner = spec.primary_keys.get(column)
            order = [owner] if owner else [entity] + [t.name for t in spec.tables if t.name != entity]
            table = next((spec.table(n) for n in order if spec.table(n).column(column) is not None), None)
            values: list[Any] = []
            if table is not None:
                with self.fresh() as db:
                    values = [r[0] for r in db.query(f"SELECT {column} FROM {table.name} WHERE {column} IS NOT NULL "
                                                     f"ORDER BY {table.primary_key}")]
            self._seeded[key] = values
        return self._seeded[key]

    def fresh(self) -> Database:
        """A copy of the seeded state. Connections are pooled: each copy is an open transaction on a
        connection holding the image, rolled back on close, so prepared statements stay warm."""
        with self._lock:
            conn = self._pool.pop() if self._pool else None
        if conn is None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.deserialize(self.image)
            conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN")
        return Database(self, conn)

    def _release(self, conn: sqlite3.Connection) -> None:
        conn.execute("ROLLBACK")
        with self._lock:
            if len(self._pool) < POOL_SIZE:
                self._pool.append(conn)
                return
        conn.close()


class Database:
    """A live copy of a domain database; tool calls run against it one at a time."""

    def __init__(self, engine: DomainEngine, conn: sqlite3.Connection):
        self.engine = engine
        self.conn = conn
        self._open = True

    def close(self) -> None:
        """Discard every change and hand the connection back to the engine's pool."""
        if self._open:
            self._open = False
            self.engine._release(self.conn)

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, name: str, arguments: Any) -> ToolResult:
        """Execute one tool call; every failure is an error result and leaves the database unchanged."""
        tool = self.engine.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return ToolResult(False, error=f"Unknown tool {_short(name)!r}. Available tools: "
                                           f"{', '.join(sorted(self.engine.tools))}")
        try:
            params = self._bind(tool, arguments)
        except CallError as exc:
            return ToolResult(False, error=str(exc))
        self.conn.execute("SAVEPOINT call")
        try:
            output, reads = self._run(tool, params)
            writes = self._drain_audit()
            self.conn.execute("RELEASE call")
        except CallError as exc:
            self._undo()
            return ToolResult(False, error=str(exc))
        except sqlite3.IntegrityError as exc:
            self._undo()
            return ToolResult(False, error=f"{tool.name} was refused: constraint violated ({exc})")
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            self._undo()
            return ToolResult(False, error=f"{tool.name} failed: {exc}")
        if tool.kind == "write":  # a write's own rows count as written, not read
            return ToolResult(True, output=output, writes=frozenset(writes))
        return ToolResult(True, output=output, reads=frozenset(reads | _arg_keys(self.engine, params)))

    def dry_run(self, name: str, arguments: Any) -> ToolResult:
        """What ``call`` would return now, with every change rolled back afterwards."""
        self.conn.execute("SAVEPOINT dry_run")
        try:
            return self.call(name, arguments)
        finally:
            self.conn.execute("ROLLBACK TO dry_run")
            self.conn.execute("RELEASE dry_run")

    def _undo(self) -> None:
        self.conn.execute("ROLLBACK TO call")
        self.conn.execute("RELEASE call")

    def _bind(self, tool: Tool, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise CallError(f"{tool.name}: arguments must be a JSON object, got {type(arguments).__name__}")
        if _too_long(arguments):
            raise CallError(f"{tool.name}: an argument is too long (limit {MAX_STRING_CHARS} characters)")
        problem = self.engine.argument_problem(tool.name, arguments)
        if problem:
            raise CallError(problem)
        params: dict[str, Any] = {}
        for pname, pschema in tool.parameters.get("properties", {}).items():
            params[pname] = arguments.get(pname, pschema.get("default"))
        params["now"] = self.engine.spec.now
        for gname, table in tool.generated.items():
            params[gname] = self._next_key(self.engine.spec.table(table))
        return params

    def _next_key(self, table: Table) -> Any:
        col = table.column(table.primary_key)
        assert col is not None
        pk = table.primary_key
        if col.type == "integer":
            (top,) = self.conn.execute(f"SELECT COALESCE(MAX({pk}), 0) FROM {table.name}").fetchone()
            return top + 1
        prefix = col.seed.get("prefix", "")
        (top,) = self.conn.execute(
            f"SELECT COALESCE(MAX(CAST(substr({pk}, ?) AS INTEGER)), 0) FROM {table.name} "
            f"WHERE substr({pk}, 1, ?) = ?", (len(prefix) + 1, len(prefix), prefix)).fetchone()
        return sequence_value({**col.seed, "start": 0}, col.type, top + 1)

    def _run(self, tool: Tool, params: dict[str, Any]) -> tuple[Any, set[RowKey]]:
        for pre in tool.preconditions:
            if pre.enforced_by == "policy":  # the policy states it; the tool lets it through by design
                continue
            row = self.conn.execute(pre.sql, params).fetchone()
            if (row is None) == (pre.expect == "exists"):
                shown = _Missing({k: _short(v) for k, v in params.items()})
                raise CallError(SLOT.sub(lambda m: "{" + m.group(1) + "}", pre.error).format_map(shown))
        for effect in tool.effects:
            self.conn.execute(effect, params)
        cur = self.conn.execute(tool.returns_sql, params)
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
        reads = {(self.engine.pk_tables[k], v) for row in rows for k, v in row.items()
                 if k in self.engine.pk_tables and v is not None}
        if tool.returns_mode == "one":
            return (rows[0] if rows else None), reads
        return rows, reads

    def _drain_audit(self) -> set[RowKey]:
        writes = {(t, pk) for t, pk in self.conn.execute(f"SELECT tbl, pk FROM {AUDIT_TABLE}")}
        self.conn.execute(f"DELETE FROM {AUDIT_TABLE}")
        return writes

    def row(self, key: RowKey) -> tuple[Any, ...] | None:
        table = self.engine.spec.table(key[0])
        return self.conn.execute(f"SELECT * FROM {table.name} WHERE {table.primary_key} = ?", (key[1],)).fetchone()

    def fingerprint(self) -> str:
        return state_fingerprint(self.conn, self.engine.spec)

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        t = self.engine.spec.table(table)
        cur = self.conn.execute(f"SELECT * FROM {t.name} ORDER BY {t.primary_key}")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def query(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A read query for the engine's own callers (synthesis, tests); values are always bound."""
        return self.conn.execute(sql, params).fetchall()


def _arg_keys(engine: DomainEngine, params: dict[str, Any]) -> set[RowKey]:
    """Rows a call names by key in its arguments count as read by it."""
    return {(engine.pk_tables[k], v) for k, v in params.items()
            if k in engine.pk_tables and isinstance(v, (str, int)) and not isinstance(v, bool)}


def state_fingerprint(conn: sqlite3.Connection, spec: DomainSpec) -> str:
    """sha256 over every table's rows in key order; identical states give identical fingerprints."""
    h = hashlib.sha256()
    for t in sorted(spec.tables, key=lambda t: t.name):
        h.update(t.name.encode())
        for row in conn.execute(f"SELECT * FROM {t.name} ORDER BY {t.primary_key}"):
            h.update(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode())
    return h.hexdigest()


def _seed_tables(conn: sqlite3.Connection, spec: DomainSpec, seed: int) -> None:
    values: dict[str, list[dict[str, Any]]] = {}
    conn.execute("BEGIN")
    for table in spec.seed_order():
        rows = _seed_rows(table, values, seed, spec)
        values[table.name] = rows
        cols = [c.name for c in table.columns]
        conn.executemany(f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         [tuple(r[c] for c in cols) for r in rows])
    conn.execute("COMMIT")


def _seed_rows(table: Table, done: dict[str, list[dict[str, Any]]], seed: int,
               spec: DomainSpec) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{} for _ in range(table.rows)]
    by_key = {name: {r[spec.table(name).primary_key]: r for r in rs} for name, rs in done.items()}
    for col in table.columns:
        rng = random.Random(f"{seed}:{table.name}:{col.name}")
        recipe = col.seed
        kind = recipe["kind"]
        if kind == "reference":
            assert col.references is not None
            parents = [r[col.references[1]] for r in done.get(col.references[0], rows)]
            if recipe.get("unique"):
                picks = rng.sample(parents, k=min(len(parents), table.rows)) + [None] * max(0, table.rows - len(parents))
            else:
                picks = [None if rng.random() < recipe.get("null_rate", 0.0) else rng.choice(parents)
                         for _ in rows]
            for r, v in zip(rows, picks):
                r[col.name] = v
            continue
        formula = Formula(recipe["expr"]) if kind == "formula" else None
        seen: set[Any] = set()
        for i, r in enumerate(rows):
            if kind == "sequence":
                v = sequence_value(recipe, col.type, i)
            elif kind == "lookup":
                via = table.column(recipe["via"])
                assert via is not None and via.references is not None
                parent = by_key.get(via.references[0], {}).get(r[via.name])
                v = None if parent is None else parent[recipe["column"]]
            elif formula is not None:
                v = formula(r, rng)
                for _ in range(50):  # a formula that draws (randint, choice) may be drawn again
                    if not col.unique or v not in seen:
                        break
                    v = formula(r, rng)
            else:
                v = draw(recipe, rng)
                for attempt in range(50):
                    if not col.unique or v not in seen:
                        break
                    v = draw(recipe, rng) if attempt < 40 else f"{v} {i}"
            if col.type == "boolean" and v is not None:
                v = 1 if v in (True, 1, "true", "yes") else 0
            seen.add(v)
            r[col.name] = v
    return rows

