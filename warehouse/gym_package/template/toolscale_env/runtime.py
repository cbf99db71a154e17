"""The environment of one exported ToolScale domain, outside the project: sessions on private copies of the seeded
database, tool calls with the engine's semantics, and the verifier's checks.

Shipped verbatim into every NeMo Gym export (and read by ``toolscale serve-env``'s tests); it needs only the
standard library and ``jsonschema``. Everything domain-specific is data under ``data/``: ``domain.json`` (tools with
their SQL, tables, keys, assertions), ``db_<seed>.sqlite`` (the seeded database the snapshot was verified against,
with its audit triggers) and ``tasks.json`` (each task's verification contract). ``arguments.py``, ``sqlguard.py``,
``words.py`` and ``values.py`` beside this file are the project's own modules, copied at export time, so argument
checks, SQL guards and the fidelity judgement (values on meaning) are the engine's and the verifier's to the letter.

A call: arguments checked (shape, JSON Schema with strict numbers, formats, no blank text), preconditions in order
(policy-only ones let through), effects in one savepoint under the effect authorizer, the ``returns`` query; every
failure is an error result, never an exception. Reads are the key columns a read tool returned (also inside JSON
text) and the keys its arguments name; writes are what the audit triggers recorded. ``verify`` replays the gold on a
fresh copy and compares with what the session did: execution, fidelity, completeness, identification, assertions,
actions, each with its reason; the task's criteria decide the reward.
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from .arguments import blank_problem, format_problem, shape_problem
from .sqlguard import EFFECT, READ, StatementGuard
from .values import judge as judge_values

AUDIT_TABLE = "_audit"
SIDES = ("agent", "user", "setup")
CHECKS = ("execution", "fidelity", "completeness", "identification")
EXTRA_CHECKS = ("assertions", "actions")
SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Limits:
    """Per-session caps: the bounds the project's environment has (calls, wall-clock time), plus how many sessions
    may be open at once and how long an idle one lives before it is reaped."""

    max_calls: int = 800  # the project's episode: 50 turns of at most 16 calls
    max_session_s: float = 300.0  # the project's episode wall clock (EnvConfig.max_episode_s)
    max_idle_s: float = 300.0
    max_sessions: int = 256


@dataclass(frozen=True)
class Result:
    ok: bool
    output: Any = None
    error: str | None = None
    reads: frozenset[tuple[str, Any]] = frozenset()
    writes: frozenset[tuple[str, Any]] = frozenset()

    def observation(self) -> Any:
        """What the agent sees: the output, or ``{"error": message}`` (the engine's observation)."""
        return self.output if self.ok else {"error": self.error}


def _strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _strict_number(checker: Any, instance: Any) -> bool:
    return isinstance(instance, (int, float)) and not isinstance(instance, bool)


_draft_type = jsonschema.Draft202012Validator.VALIDATORS["type"]


def _type_not_blank(validator: Any, types: Any, instance: Any, schema: dict[str, Any]) -> Any:
    yield from _draft_type(validator, types, instance, schema)
    problem = blank_problem(schema, instance)
    if problem:
        yield jsonschema.ValidationError(problem)


def _strict_format(validator: Any, fmt: Any, instance: Any, schema: dict[str, Any]) -> Any:
    if isinstance(instance, str) and isinstance(fmt, str):
        problem = format_problem(fmt, instance)
        if problem:
            yield jsonschema.ValidationError(problem)


ArgumentValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"type": _type_not_blank, "format": _strict_format},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _strict_integer, "number": _strict_number}))


def _short(value: Any) -> str:
    text = str(value)
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 60 else text[:57] + "..."


class CallError(Exception):
    """A refused call inside ``Database.call``; turned into an error result, never raised to the caller."""


class EnvironmentError_(Exception):
    """A request the environment refuses (unknown session or task, a cap reached): the message says which."""


def evaluate_arithmetic(text: str) -> float:
    """``+ - * /``, signs and parentheses over decimal numbers (the engine's ``computed: arithmetic``)."""
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


def _compute(how: str, value: Any) -> Any:
    if how == "arithmetic":
        try:
            return round(evaluate_arithmetic(str(value)), 2)
        except ZeroDivisionError:
            raise CallError("Division by zero in expression") from None
        except (ValueError, SyntaxError, RecursionError, OverflowError) as exc:
            raise CallError(f"Invalid expression: {_short(exc)}") from None
    raise CallError(f"unknown computation {how!r}")


class Domain:
    """The parsed ``data/`` folder: tools, tables, seeded images (one per database seed) and task contracts."""

    def __init__(self, data_dir: str | Path):
        self.data_dir = Path(data_dir)
        self.spec: dict[str, Any] = json.loads((self.data_dir / "domain.json").read_text(encoding="utf-8"))
        self.name: str = self.spec["name"]
        self.tools: dict[str, dict[str, Any]] = {t["name"]: t for t in self.spec["tools"]}
        self.tables: dict[str, dict[str, Any]] = {t["name"]: t for t in self.spec["tables"]}
        self.pk_tables: dict[str, str] = {t["primary_key"]: t["name"] for t in self.spec["tables"]}
        self.assertions: dict[str, dict[str, Any]] = {a["name"]: a for a in self.spec.get("assertions", [])}
        self.validators = {name: ArgumentValidator(t["parameters"]) for name, t in self.tools.items()}
        self.images: dict[int, bytes] = {int(seed): (self.data_dir / f"db_{seed}.sqlite").read_bytes()
                                         for seed in self.spec["seeds"]}
        tasks_file = self.data_dir / "tasks.json"
        raw = json.loads(tasks_file.read_text(encoding="utf-8")) if tasks_file.exists() else []
        self.tasks: dict[str, dict[str, Any]] = {t["task_id"]: t for t in raw}
        self._arg_cache: dict[tuple[str, str], str | None] = {}
        self._lock = threading.Lock()

    def offered(self, side: str = "agent") -> list[dict[str, Any]]:
        """The tools one side is offered (setup tools to nobody)."""
        return [t for t in self.spec["tools"] if t["side"] == side and not t["setup"]]

    def fresh(self, seed: int | None = None) -> Database:
        """A private copy of the seeded database of ``seed`` (the domain's first when None)."""
        seed = self.spec["seeds"][0] if seed is None else int(seed)
        if seed not in self.images:
            raise EnvironmentError_(f"no database with seed {seed} in {self.name}; seeds: {sorted(self.images)}")
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.deserialize(self.images[seed])
        conn.execute("PRAGMA foreign_keys = ON")
        return Database(self, conn, StatementGuard(conn, list(self.tables), AUDIT_TABLE))

    def argument_problem(self, tool: str, arguments: dict[str, Any]) -> str | None:
        try:
            key: tuple[str, str] | None = (tool, json.dumps(arguments, sort_keys=True))
        except (TypeError, ValueError):
            key = None
        if key is not None and key in self._arg_cache:
            return self._arg_cache[key]
        errors = sorted(self.validators[tool].iter_errors(arguments), key=lambda e: list(e.path))
        problem = None
        if errors:
            e = errors[0]
            where = f"argument {'.'.join(map(str, e.path))!r}" if e.path else "arguments"
            problem = f"{tool}: invalid {where}: {_short(e.message)}"
        if key is not None and len(self._arg_cache) < 200_000:
            with self._lock:
                self._arg_cache[key] = problem
        return problem


class Database:
    """One live copy; calls run on it one at a time (a session holds a lock around each)."""

    def __init__(self, domain: Domain, conn: sqlite3.Connection, guard: StatementGuard):
        self.domain, self.conn, self.guard = domain, conn, guard

    def close(self) -> None:
        self.conn.close()

    def call(self, name: Any, arguments: Any, side: str = "agent") -> Result:
        tool = self.domain.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            offered = sorted(t["name"] for t in self.domain.offered(side))
            return Result(False, error=f"Unknown tool {_short(name)!r}. Available tools: "
                                       f"{', '.join(offered or sorted(self.domain.tools))}")
        problem = _side_problem(tool, side)
        if problem:
            return Result(False, error=problem)
        try:
            params = self._bind(tool, arguments)
        except CallError as exc:
            return Result(False, error=str(exc))
        changes = bool(tool["effects"])
        if changes:
            self.conn.execute("SAVEPOINT call")
        try:
            output, reads = self._run(tool, params)
            writes = self._drain_audit() if changes else set()
            if changes:
                self.conn.execute("RELEASE call")
        except CallError as exc:
            self._undo(changes)
            return Result(False, error=str(exc))
        except sqlite3.IntegrityError as exc:
            self._undo(changes)
            return Result(False, error=f"{name} was refused: constraint violated ({exc})")
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            self._undo(changes)
            return Result(False, error=f"{name} failed: {exc}")
        if tool["kind"] == "write":
            return Result(True, output=output, writes=frozenset(writes))
        return Result(True, output=output, reads=frozenset(reads | self._arg_keys(params)))

    def _undo(self, changes: bool) -> None:
        if changes:
            self.conn.execute("ROLLBACK TO call")
            self.conn.execute("RELEASE call")

    def _bind(self, tool: dict[str, Any], arguments: Any) -> dict[str, Any]:
        shape = shape_problem(arguments)
        if shape:
            raise CallError(f"{tool['name']}: {shape}")
        problem = self.domain.argument_problem(tool["name"], arguments)
        if problem:
            raise CallError(problem)
        params: dict[str, Any] = {}
        for pname, pschema in tool["parameters"].get("properties", {}).items():
            value = arguments.get(pname, pschema.get("default"))
            params[pname] = json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else value
        params["now"] = self.domain.spec["now"]
        for cname, (how, source) in tool.get("computed", {}).items():
            params[cname] = _compute(how, params.get(source))
        for gname, table in tool["generated"].items():
            params[gname] = self._next_key(self.domain.tables[table])
        return params

    def _next_key(self, table: dict[str, Any]) -> Any:
        pk, key = table["primary_key"], table["key"]
        if key["type"] == "integer":
            (top,) = self.conn.execute(f"SELECT COALESCE(MAX({pk}), 0) FROM {table['name']}").fetchone()
            return top + 1
        prefix = key["prefix"]
        (top,) = self.conn.execute(
            f"SELECT COALESCE(MAX(CAST(substr({pk}, ?) AS INTEGER)), 0) FROM {table['name']} "
            f"WHERE substr({pk}, 1, ?) = ?", (len(prefix) + 1, len(prefix), prefix)).fetchone()
        return f"{prefix}{top + 1:0{key['width']}d}"

    def _run(self, tool: dict[str, Any], params: dict[str, Any]) -> tuple[Any, set[tuple[str, Any]]]:
        guard, conn = self.guard, self.conn
        stage: tuple[str, int] = ("returns.sql", -1)
        try:
            for k, pre in enumerate(tool["preconditions"]):
                if pre.get("enforced_by") == "policy":  # the policy states it; the tool lets it through by design
                    continue
                stage = ("preconditions", k)
                guard.enter(READ)
                row = conn.execute(pre["sql"], params).fetchone()
                if (row is None) == (pre["expect"] == "exists"):
                    shown = {n: _short(v) for n, v in params.items()}
                    raise CallError(SLOT.sub(lambda m: shown.get(m.group(1), m.group(0)), pre["error"]))
            for k, effect in enumerate(tool["effects"]):
                stage = ("effects", k)
                guard.enter(EFFECT)
                conn.execute(effect, params)
            stage = ("returns.sql", -1)
            guard.enter(READ)
            cur = conn.execute(tool["returns"]["sql"], params)
            description, fetched = cur.description, cur.fetchall()
        except sqlite3.DatabaseError as exc:
            refusal = guard.refusal(exc)
            if refusal is None:
                raise
            where = stage[0] if stage[1] < 0 else f"{stage[0]}[{stage[1]}]"
            raise CallError(f"{tool['name']} failed: {where}: {refusal}") from None
        finally:
            guard.leave()
        names = [d[0] for d in description]
        rows = [dict(zip(names, r)) for r in fetched]
        reads = self._row_keys(rows)
        if tool["returns"]["mode"] == "one":
            return (rows[0] if rows else None), reads
        return rows, reads

    def _drain_audit(self) -> set[tuple[str, Any]]:
        writes = {(t, pk) for t, pk in self.conn.execute(f"SELECT tbl, pk FROM {AUDIT_TABLE}")}
        self.conn.execute(f"DELETE FROM {AUDIT_TABLE}")
        return writes

    def _row_keys(self, rows: list[Any]) -> set[tuple[str, Any]]:
        keys: set[tuple[str, Any]] = set()
        pending: list[Any] = list(rows)
        while pending:
            item = pending.pop()
            if isinstance(item, list):
                pending += item
            elif isinstance(item, dict):
                for k, v in item.items():
                    nested = _json_text(v)
                    if nested is not None:
                        pending.append(nested)
                    elif isinstance(v, (dict, list)):
                        pending.append(v)
                    elif k in self.domain.pk_tables and v is not None and not isinstance(v, bool):
                        keys.add((self.domain.pk_tables[k], v))
        return keys

    def _arg_keys(self, params: dict[str, Any]) -> set[tuple[str, Any]]:
        pk = self.domain.pk_tables
        return {(pk[k], v) for k, v in params.items()
                if k in pk and isinstance(v, (str, int)) and not isinstance(v, bool)}

    def row(self, key: tuple[str, Any]) -> tuple[Any, ...] | None:
        table = self.domain.tables[key[0]]
        return self.conn.execute(f"SELECT * FROM {table['name']} WHERE {table['primary_key']} = ?",
                                 (key[1],)).fetchone()

    def assertion_value(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str | None]:
        assertion = self.domain.assertions.get(name)
        if assertion is None:
            return None, f"unknown assertion {name!r}"
        schema = {"type": "object", "properties": assertion["parameters"], "additionalProperties": False}
        problem = next(iter(ArgumentValidator(schema).iter_errors(arguments)), None)
        if problem is not None:
            return None, f"{name}: invalid arguments: {problem.message}"
        params = {p: arguments.get(p, s.get("default")) for p, s in assertion["parameters"].items()}
        rows = self.guard.run(READ, assertion["sql"], params)
        if not rows:
            return None, f"{name}: no row to judge (a record it names does not exist)"
        return rows[0][0], None


def _json_text(value: Any) -> Any:
    if not isinstance(value, str) or not value.startswith(("[", "{")):
        return None
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # text nested deeper than the parser goes is text, not a value
        return None


def _side_problem(tool: dict[str, Any], side: Any) -> str | None:
    if side not in SIDES:
        return f"{tool['name']}: unknown side {_short(side)!r}; a call comes from one of {', '.join(SIDES)}"
    if tool["setup"]:
        return None if side == "setup" else f"{tool['name']} sets up a task's initial state; no {side} may call it"
    if side == "setup" or side == tool["side"]:
        return None
    whose = "the user's (on their own device)" if tool["side"] == "user" else "the agent's (on the operator's records)"
    return f"{tool['name']} is {whose} tool; the {side} cannot call it"


@dataclass
class Call:
    name: str
    arguments: Any
    side: str = "agent"


@dataclass
class Replay:
    db: Database
    calls: list[Call]
    results: list[Result]

    @property
    def writes(self) -> set[tuple[str, Any]]:
        return {k for r in self.results for k in r.writes}

    @property
    def reads(self) -> set[tuple[str, Any]]:
        return {k for r in self.results for k in r.reads}


def _calls(raw: Any) -> list[Call]:
    return [Call(c["name"], dict(c.get("arguments") or {}), c.get("side", "agent")) for c in raw or ()]


def start(domain: Domain, task: dict[str, Any] | None) -> Database:
    """A fresh copy of the task's database, its setup calls run (a dual-control task's initial state)."""
    db = domain.fresh(task.get("seed") if task else None)
    for c in _calls((task or {}).get("setup_calls")):
        db.call(c.name, c.arguments, "setup")
    return db


def replay(domain: Domain, task: dict[str, Any], calls: list[Call]) -> Replay:
    db = start(domain, task)
    return Replay(db, calls, [db.call(c.name, c.arguments, c.side) for c in calls])


def _check(passed: bool, reason: str) -> dict[str, Any]:
    return {"passed": passed, "reason": reason}


def judge(domain: Domain, task: dict[str, Any], candidate: Replay, said: str) -> dict[str, Any]:
    """Every check of one trajectory (the calls ``candidate`` ran, the text ``said``) with its reason, and the
    reward the task's criteria give: 1.0 when each of them passes, else 0.0."""
    gold = replay(domain, task, _calls(task["gold_calls"]))
    try:
        checks = {"execution": _execution(gold, candidate), "fidelity": _fidelity(task, said, domain.spec["now"]),
                  "completeness": _completeness(gold, candidate), "identification": _identification(task, candidate),
                  "assertions": _assertions(candidate.db, task), "actions": _actions(task, candidate.calls)}
    finally:
        gold.db.close()
    criteria = [c for c in CHECKS + EXTRA_CHECKS if c in (task.get("criteria") or CHECKS)]
    solved = all(checks[c]["passed"] for c in criteria)
    return {"reward": 1.0 if solved else 0.0, "solved": solved, "criteria": criteria, "checks": checks,
            "failed": [c for c in criteria if not checks[c]["passed"]]}


def _execution(gold: Replay, candidate: Replay) -> dict[str, Any]:
    touched = gold.writes | candidate.writes
    differing = sorted((k for k in touched if gold.db.row(k) != candidate.db.row(k)), key=repr)
    if differing:
        shown = ", ".join(f"{t}:{pk}" for t, pk in differing[:5])
        return _check(False, f"{len(differing)} row(s) differ from the gold end state: {shown}")
    return _check(True, f"same end state over {len(touched)} written row(s)")


def _fidelity(task: dict[str, Any], said: str, clock: str) -> dict[str, Any]:
    """Every value to communicate told in ``said``, judged on meaning (the verifier's ``verifiers.values``)."""
    infos = tuple(task.get("communicate_info") or ())
    judgement = judge_values(infos, said if isinstance(said, str) else "", clock)
    return _check(judgement.passed, judgement.reason(len(infos)))


def _completeness(gold: Replay, candidate: Replay) -> dict[str, Any]:
    missing = sorted({("read", *k) for k in gold.reads - candidate.reads}
                     | {("wrote", *k) for k in gold.writes - candidate.writes}, key=repr)
    if missing:
        shown = ", ".join(f"{op} {t}:{pk}" for op, t, pk in missing[:5])
        return _check(False, f"{len(missing)} operation(s) of the gold were not done: {shown}")
    return _check(True, f"all {len(gold.reads)} read and {len(gold.writes)} written gold row(s) covered")


def _identification(task: dict[str, Any], candidate: Replay) -> dict[str, Any]:
    user = tuple(task["user"]) if task.get("user") else None
    if user is None:
        return _check(True, "the task names no user to identify")
    identify = tuple(task.get("identify_tools") or ())
    writes = {n for n, t in candidate.db.domain.tools.items() if t["kind"] == "write"}
    for call, result in zip(candidate.calls, candidate.results):
        if call.name in writes:
            break
        if call.name in identify and result.ok and user in result.reads:
            return _check(True, f"{user[0]}:{user[1]} identified by {call.name}")
    return _check(False, f"{user[0]}:{user[1]} was not identified (with {', '.join(identify)}) before the first write")


def _assertions(db: Database, task: dict[str, Any]) -> dict[str, Any]:
    asserted = list(task.get("env_assertions") or ())
    if not asserted:
        return _check(True, "the task asserts nothing on the final state")
    failed = []
    for a in asserted:
        value, error = db.assertion_value(a["func_name"], dict(a.get("arguments") or {}))
        if error is not None or bool(value) != bool(a.get("assert_value", True)):
            failed.append(error or f"{a['func_name']}({a.get('arguments')}) is {bool(value)}")
    if failed:
        return _check(False, f"{len(failed)} assertion(s) fail on the final state: {'; '.join(failed[:3])}")
    return _check(True, f"all {len(asserted)} assertion(s) hold on the final state")


def _actions(task: dict[str, Any], calls: list[Call]) -> dict[str, Any]:
    actions = list(task.get("actions") or ())
    if not actions:
        return _check(True, "the task names no gold action to look for")

    def matches(action: dict[str, Any], call: Call) -> bool:
        if action["name"] != call.name or not isinstance(call.arguments, dict):
            return False
        compared = action.get("compare_args")
        keys = call.arguments.keys() if compared is None else compared
        gold = action.get("arguments") or {}
        return {k: v for k, v in call.arguments.items() if k in keys} == {k: v for k, v in gold.items() if k in keys}

    missing = [a["name"] for a in actions if not any(matches(a, c) for c in calls)]
    if missing:
        return _check(False, f"{len(missing)} gold action(s) never called: {', '.join(missing[:5])}")
    return _check(True, f"all {len(actions)} gold action(s) called")


@dataclass
class Session:
    """One episode's private database, the calls made on it and their results, and its clocks."""

    session_id: str
    task: dict[str, Any] | None
    db: Database
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Sessions:
    """Every open session of one domain, with the per-session caps; thread-safe."""

    def __init__(self, domain: Domain, limits: Limits = Limits()):
        self.domain, self.limits = domain, limits
        self._open: dict[str, Session] = {}
        self._lock = threading.Lock()
        self.reaped = 0

    def __len__(self) -> int:
        return len(self._open)

    def open(self, task_id: str | None, session_id: str | None = None) -> Session:
        """A new session on ``task_id``'s start (None: the domain's seeded database, which cannot be verified)."""
        task = None
        if task_id is not None:
            task = self.domain.tasks.get(task_id) if isinstance(task_id, str) else None
            if task is None:
                raise EnvironmentError_(f"unknown task {_short(task_id)!r} in {self.domain.name}")
        self.reap()
        with self._lock:
            if len(self._open) >= self.limits.max_sessions:
                raise EnvironmentError_(f"{len(self._open)} sessions are open, the limit is "
                                        f"{self.limits.max_sessions}; close one first")
            session_id = session_id or uuid.uuid4().hex
            old = self._open.pop(session_id, None)
        if old is not None:
            old.db.close()
        session = Session(session_id, task, start(self.domain, task))
        with self._lock:
            self._open[session_id] = session
        return session

    def get(self, session_id: str) -> Session:
        with self._lock:
            session = self._open.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise EnvironmentError_(f"unknown session {_short(session_id)!r} (never opened, closed or reaped)")
        return session

    def call(self, session_id: str, name: str, arguments: Any, side: str | None = None) -> Result:
        """One tool call in a session; past the session's call or time cap the call is refused and not run."""
        session = self.get(session_id)
        tool = self.domain.tools.get(name) if isinstance(name, str) else None
        side = side or (tool["side"] if tool is not None and not tool["setup"] else "agent")
        with session.lock:
            session.last_used = time.monotonic()
            if len(session.calls) >= self.limits.max_calls:
                return Result(False, error=f"call limit reached: this session has made {len(session.calls)} calls, "
                                           f"the limit is {self.limits.max_calls}; the call was not run")
            if time.monotonic() - session.started > self.limits.max_session_s:
                return Result(False, error=f"time limit reached: the session is older than "
                                           f"{self.limits.max_session_s:g} s; the call was not run")
            result = session.db.call(name, arguments, side)
            session.calls.append(Call(name if isinstance(name, str) else repr(name), arguments, side))
            session.results.append(result)
            return result

    def verify(self, session_id: str, said: str) -> dict[str, Any]:
        """The verdict on what the session did and ``said``; an unknown session or one without a task is an error."""
        session = self.get(session_id)
        if session.task is None:
            raise EnvironmentError_(f"session {session_id} was opened without a task; there is nothing to verify")
        with session.lock:
            session.last_used = time.monotonic()
            verdict = judge(self.domain, session.task, Replay(session.db, session.calls, session.results), said)
        return {"task_id": session.task["task_id"], "calls": len(session.calls), **verdict}

    def close(self, session_id: str) -> bool:
        with self._lock:
            session = self._open.pop(session_id, None)
        if session is None:
            return False
        with session.lock:
            session.db.close()
        return True

    def reap(self) -> int:
        """Close every session idle longer than ``max_idle_s`` or older than twice ``max_session_s``."""
        now = time.monotonic()
        with self._lock:
            stale = [s for s in self._open.values() if now - s.last_used > self.limits.max_idle_s
                     or now - s.started > 2 * self.limits.max_session_s]
        gone = sum(self.close(s.session_id) for s in stale)
        self.reaped += gone
        return gone
