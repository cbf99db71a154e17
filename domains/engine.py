"""One engine for every domain: materialise a seeded SQLite database and execute tool calls on it.

A ``DomainEngine`` holds the serialised image of the seeded database; ``fresh()`` deserialises it into a new
in-memory connection (microseconds, no re-seeding). ``Database.call`` validates arguments, checks
preconditions, applies effects in one transaction and returns a ``ToolResult``; it never raises for a bad call.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

import jsonschema

from domains.arguments import blank_problem, format_problem, shape_problem
from domains.fastcheck import compile_check
from domains.ddl import AUDIT_TABLE, audit_schema, schema_statements
from domains.seeding import seed_tables, sequence_value
from domains.spec import SLOT, DomainSpec, Precondition, Table, Tool
from domains.sqlguard import EFFECT, READ, StatementGuard

POOL_SIZE = 16
RowKey = tuple[str, Any]  # (table, primary key value)


SIDES = ("agent", "user", "setup")  # who calls: the assistant, the user on their own device, a task's initialisation


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    side: str = "agent"  # "user": the user calls it on their device (tau2's requestor "user")

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "arguments": self.arguments}
        if self.side != "agent":  # an agent call keeps its old shape (and its hash)
            out["side"] = self.side
        return out


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
_draft_type = jsonschema.Draft202012Validator.VALIDATORS["type"]


def _type_not_blank(validator: Any, types: Any, instance: Any, schema: dict[str, Any]) -> Any:
    """The draft's ``type`` keyword, plus: text must not be empty or blank unless ``minLength: 0``."""
    yield from _draft_type(validator, types, instance, schema)
    problem = blank_problem(schema, instance)
    if problem:
        yield jsonschema.ValidationError(problem)


def _strict_format(validator: Any, fmt: Any, instance: Any, schema: dict[str, Any]) -> Any:
    """``format`` asserted, not only annotated: date, date-time and email values must be real."""
    if isinstance(instance, str) and isinstance(fmt, str):
        problem = format_problem(fmt, instance)
        if problem:
            yield jsonschema.ValidationError(problem)


ArgumentValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"type": _type_not_blank, "format": _strict_format},
    type_checker=_type_checker)


def fill_message(template: str, shown: dict[str, str]) -> str:
    """A precondition's message with each ``{parameter}`` replaced by the argument; every other brace is kept as
    written (never ``str.format``: a message is spec text, and a spec may come from an LLM)."""
    return SLOT.sub(lambda m: shown.get(m.group(1), m.group(0)), template)


def _short(value: Any) -> str:
    """An argument as an error message quotes it: one line (control characters escaped), at most 60 chars."""
    text = str(value)
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 60 else text[:57] + "..."


class CallError(Exception):
    """Raised inside the engine and turned into an error result; never escapes ``Database.call``."""


def compute(how: str, value: Any) -> Any:
    """A computed parameter (spec ``computed:``). ``arithmetic``: the value is an expression of numbers,
    + - * / and parentheses, evaluated without eval(), rounded to 2 decimals (tau2's ``calculate``)."""
    if how == "arithmetic":
        try:
            return round(evaluate_arithmetic(str(value)), 2)
        except ZeroDivisionError:
            raise CallError("Division by zero in expression") from None
        except (ValueError, SyntaxError, RecursionError, OverflowError) as exc:
            raise CallError(f"Invalid expression: {_short(exc)}") from None
    raise CallError(f"unknown computation {how!r}")


def evaluate_arithmetic(text: str) -> float:
    """Evaluate ``+ - * /``, unary signs and parentheses over decimal numbers; anything else is a ValueError."""
    import ast

    if not all(ch in "0123456789+-*/(). " for ch in text):
        raise ValueError("Invalid characters in expression")
    if len(text) > 1000:
        raise ValueError("expression too long")
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b}

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            return walk(node.operand) * (-1 if isinstance(node.op, ast.USub) else 1)
        raise ValueError("not an arithmetic expression")

    return float(walk(ast.parse(text.strip(), mode="eval")))


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
        self._pool: list[tuple[sqlite3.Connection, StatementGuard]] = []
        self._seeded: dict[tuple[str, str], list[Any]] = {}
        self._lock = threading.Lock()
        conn = sqlite3.connect(":memory:", isolation_level=None)
        for stmt in schema_statements(spec):
            conn.execute(stmt)
        seed_tables(conn, spec, seed)
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
            pooled = self._pool.pop() if self._pool else None
        if pooled is None:
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.deserialize(self.image)
            conn.execute("PRAGMA foreign_keys = ON")
            pooled = (conn, StatementGuard(conn, [t.name for t in self.spec.tables], AUDIT_TABLE))
        pooled[0].execute("BEGIN")
        return Database(self, *pooled)

    def _release(self, conn: sqlite3.Connection, guard: StatementGuard) -> None:
        conn.execute("ROLLBACK")
        with self._lock:
            if len(self._pool) < POOL_SIZE:
                self._pool.append((conn, guard))
                return
        conn.close()


class Database:
    """A live copy of a domain database; tool calls run against it one at a time."""

    def __init__(self, engine: DomainEngine, conn: sqlite3.Connection, guard: StatementGuard):
        self.engine = engine
        self.conn = conn
        self.guard = guard
        self._open = True

    def close(self) -> None:
        """Discard every change and hand the connection back to the engine's pool."""
        if self._open:
            self._open = False
            self.engine._release(self.conn, self.guard)

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, name: str, arguments: Any, side: str = "agent") -> ToolResult:
        """Execute one tool call for ``side`` ("agent", "user" or "setup"); every failure, a call from the wrong
        side included, is an error result and leaves the database unchanged."""
        tool = self.engine.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            offered = sorted(t.name for t in self.engine.spec.tools if t.side == side and not t.setup)
            return ToolResult(False, error=f"Unknown tool {_short(name)!r}. Available tools: "
                                           f"{', '.join(offered or sorted(self.engine.tools))}")
        problem = side_problem(tool, side)
        if problem:
            return ToolResult(False, error=problem)
        try:
            params = self._bind(tool, arguments)
        except CallError as exc:
            return ToolResult(False, error=str(exc))
        # a tool without effects runs only under the read-only authorizer: nothing to undo, no audit rows to drain
        changes = bool(tool.effects)
        if changes:
            self.conn.execute("SAVEPOINT call")
        try:
            output, reads = self._run(tool, params)
            writes = self._drain_audit() if changes else set()
            if changes:
                self.conn.execute("RELEASE call")
        except CallError as exc:
            self._undo(changes)
            return ToolResult(False, error=str(exc))
        except sqlite3.IntegrityError as exc:
            self._undo(changes)
            return ToolResult(False, error=f"{tool.name} was refused: constraint violated ({exc})")
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            self._undo(changes)
            return ToolResult(False, error=f"{tool.name} failed: {exc}")
        if tool.kind == "write":  # a write's own rows count as written, not read
            return ToolResult(True, output=output, writes=frozenset(writes))
        return ToolResult(True, output=output, reads=frozenset(reads | _arg_keys(self.engine, params)))

    def dry_run(self, name: str, arguments: Any, side: str = "agent") -> ToolResult:
        """What ``call`` would return now, with every change rolled back afterwards."""
        self.conn.execute("SAVEPOINT dry_run")
        try:
            return self.call(name, arguments, side)
        finally:
            self.conn.execute("ROLLBACK TO dry_run")
            self.conn.execute("RELEASE dry_run")

    def failed_checks(self, name: str, arguments: Any) -> list[Precondition] | str:
        """Every precondition of tool ``name`` that ``arguments`` break now, in order, the policy-only ones
        included (the engine skips those when it calls); nothing runs but the reads. A call that does not bind
        (unknown tool, bad arguments) is its error text."""
        tool = self.engine.tools.get(name)
        if tool is None:
            return f"Unknown tool {_short(name)!r}"
        self.conn.execute("SAVEPOINT checks")  # binding may draw a generated key; nothing is kept
        try:
            params = self._bind(tool, arguments)
            out = []
            for pre in tool.preconditions:
                self.guard.enter(READ)
                try:
                    row = self.conn.execute(pre.sql, params).fetchone()
                finally:
                    self.guard.leave()
                if (row is None) == (pre.expect == "exists"):
                    out.append(pre)
            return out
        except (CallError, sqlite3.Error) as exc:
            return str(exc)
        finally:
            self.conn.execute("ROLLBACK TO checks")
            self.conn.execute("RELEASE checks")

    def _undo(self, changes: bool = True) -> None:
        if changes:
            self.conn.execute("ROLLBACK TO call")
            self.conn.execute("RELEASE call")

    def _bind(self, tool: Tool, arguments: Any) -> dict[str, Any]:
        shape = shape_problem(arguments)  # iterative: depth and size are known before jsonschema recurses
        if shape:
            raise CallError(f"{tool.name}: {shape}")
        problem = self.engine.argument_problem(tool.name, arguments)
        if problem:
            raise CallError(problem)
        params: dict[str, Any] = {}
        for pname, pschema in tool.parameters.get("properties", {}).items():
            value = arguments.get(pname, pschema.get("default"))
            # a list or object reaches SQL as JSON text, read there with json_each()/json_extract()
            params[pname] = json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else value
        params["now"] = self.engine.spec.now
        for cname, (how, source) in tool.computed.items():
            params[cname] = compute(how, params.get(source))
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
        guard, conn = self.guard, self.conn
        stage: tuple[str, int] = ("returns.sql", -1)  # which statement runs, for the error message
        try:
            for k, pre in enumerate(tool.preconditions):
                if pre.enforced_by == "policy":  # the policy states it; the tool lets it through by design
                    continue
                stage = ("preconditions", k)
                guard.enter(READ)  # reads run under the read-only authorizer, every statement on a budget
                row = conn.execute(pre.sql, params).fetchone()
                if (row is None) == (pre.expect == "exists"):
                    shown = {k: _short(v) for k, v in params.items()}
                    raise CallError(fill_message(pre.error, shown))
            for k, effect in enumerate(tool.effects):
                stage = ("effects", k)
                guard.enter(EFFECT)
                conn.execute(effect, params)
            stage = ("returns.sql", -1)
            guard.enter(READ)
            cur = conn.execute(tool.returns_sql, params)
            description, fetched = cur.description, cur.fetchall()
        except sqlite3.DatabaseError as exc:
            refusal = guard.refusal(exc)
            if refusal is None:
                raise
            where = stage[0] if stage[1] < 0 else f"{stage[0]}[{stage[1]}]"
            raise CallError(f"{tool.name} failed: {where}: {refusal}") from None
        finally:
            guard.leave()
        names = [d[0] for d in description]
        rows = [dict(zip(names, r)) for r in fetched]
        reads = _row_keys(self.engine.pk_tables, rows)
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

    def fingerprint(self, side: str | None = None) -> str:
        """sha256 of the state: every table, or one side's ("agent": the operator's, "user": the device)."""
        return state_fingerprint(self.conn, self.engine.spec, side)

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        t = self.engine.spec.table(table)
        cur = self.conn.execute(f"SELECT * FROM {t.name} ORDER BY {t.primary_key}")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def query(self, sql: str, params: dict[str, Any] | tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A read query for the engine's own callers (synthesis, tests); values are always bound, and it runs
        under the same read-only authorizer and budget as a read tool."""
        return self.guard.run(READ, sql, params)

    def records(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Like ``query``, with each row as a dict keyed by the query's column names."""
        names, rows = self._named(sql, params)
        return [dict(zip(names, r)) for r in rows]

    def columns(self, sql: str, params: dict[str, Any]) -> list[str]:
        """The column names of a read query, without running it over the data."""
        return self._named(f"SELECT * FROM ({sql}) LIMIT 0", params)[0]

    def _named(self, sql: str, params: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
        self.guard.enter(READ)
        try:
            cur = self.conn.execute(sql, params)
            return [d[0] for d in cur.description], cur.fetchall()
        except sqlite3.DatabaseError as exc:
            raise self.guard.refusal(exc) or exc
        finally:
            self.guard.leave()


def json_text(value: Any) -> Any:
    """What a text value holding a JSON array or object (a ``json_group_array`` column) holds, else None."""
    if not isinstance(value, str) or not value.startswith(("[", "{")):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # text nested deeper than the parser goes is text, not a value
        return None


def _row_keys(pk_tables: dict[str, str], rows: list[Any]) -> set[RowKey]:
    """The keys of the rows an output holds: its key columns, also inside JSON text (a user's payment methods,
    an order's items), since a row listed in a returned column was read as much as a returned row."""
    keys: set[RowKey] = set()
    pending: list[Any] = list(rows)
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending += item
        elif isinstance(item, dict):
            for k, v in item.items():
                nested = json_text(v)
                if nested is not None:
                    pending.append(nested)
                elif isinstance(v, (dict, list)):
                    pending.append(v)
                elif k in pk_tables and v is not None and not isinstance(v, bool):
                    keys.add((pk_tables[k], v))
    return keys


def _arg_keys(engine: DomainEngine, params: dict[str, Any]) -> set[RowKey]:
    """Rows a call names by key in its arguments count as read by it."""
    return {(engine.pk_tables[k], v) for k, v in params.items()
            if k in engine.pk_tables and isinstance(v, (str, int)) and not isinstance(v, bool)}


def side_problem(tool: Tool, side: Any) -> str | None:
    """Why ``side`` may not call ``tool`` (the message a caller sees), or None."""
    if side not in SIDES:
        return f"{tool.name}: unknown side {_short(side)!r}; a call comes from one of {', '.join(SIDES)}"
    if tool.setup:
        return None if side == "setup" else f"{tool.name} sets up a task's initial state; no {side} may call it"
    if side == "setup" or side == tool.side:
        return None
    whose = "the user's (on their own device)" if tool.side == "user" else "the agent's (on the operator's records)"
    return f"{tool.name} is {whose} tool; the {side} cannot call it"


def state_fingerprint(conn: sqlite3.Connection, spec: DomainSpec, side: str | None = None) -> str:
    """sha256 over every table's rows in key order (or one side's tables); identical states give identical
    fingerprints."""
    h = hashlib.sha256()
    for t in sorted((t for t in spec.tables if side is None or t.side == side), key=lambda t: t.name):
        h.update(t.name.encode())
        for row in conn.execute(f"SELECT * FROM {t.name} ORDER BY {t.primary_key}"):
            h.update(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode())
    return h.hexdigest()
