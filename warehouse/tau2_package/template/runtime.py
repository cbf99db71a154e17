"""Generic runtime of an exported ToolScale domain inside tau2-bench: DB model, toolkit, environment, tasks.

Shipped verbatim into every exported package; it needs only tau2 (with its pydantic), sqlite3 and jsonschema.
Everything domain-specific is data in ``data/domain.json``: the SQL schema, the tables and the tools (parameters,
preconditions, effects, returns), read by ``register`` at import time. A tool call has the semantics of
ToolScale's own engine: arguments validated with JSON Schema (integers and numbers strict), preconditions checked
in order with their messages (those marked ``enforced_by: policy`` are the agent's to apply and let through,
as the engine does), effects applied in one savepoint, values reaching SQL only as bound parameters. A dual-control
domain (the user's own tables and tools, tau2's telecom) gets a user toolkit too, on the same database.
"""

from __future__ import annotations

import inspect
import json
import re
import sqlite3
from pathlib import Path
from typing import Any, Callable, Literal, Optional

import jsonschema
from pydantic import ConfigDict, Field, PrivateAttr, create_model

from tau2.data_model.tasks import Task
from tau2.environment.db import DB
from tau2.environment.environment import Environment
from tau2.environment.tool import Tool
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool
from tau2.registry import registry

MAX_STRING_CHARS = 2_000
SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
COLUMN_TYPES: dict[str, type] = {"text": str, "integer": int, "real": float, "boolean": bool, "date": str,
                                 "datetime": str}
JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                              "object": dict}


def _strict_integer(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _strict_number(checker: Any, instance: Any) -> bool:
    return isinstance(instance, (int, float)) and not isinstance(instance, bool)


ArgumentValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _strict_integer, "number": _strict_number}))


def fill_message(template: str, shown: dict[str, str]) -> str:
    """A precondition's message with each ``{parameter}`` replaced by the argument; every other brace is kept as
    written (never ``str.format``: a message is spec text, and a spec may come from an LLM)."""
    return SLOT.sub(lambda m: shown.get(m.group(1), m.group(0)), template)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _too_long(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > MAX_STRING_CHARS
    if isinstance(value, dict):
        return len(value) > 100 or any(_too_long(v) for v in value.values())
    if isinstance(value, list):
        return len(value) > 100 or any(_too_long(v) for v in value)
    return False


class CallError(ValueError):
    """A call the tool refused (bad arguments, a failed precondition); tau2 shows the agent its message."""


class DomainData:
    """The parsed ``data/`` folder of one exported domain.

    A dual-control domain (tables of ``side: user``, the user's device) gets two toolkits over one sqlite3
    database, as tau2's telecom has: the assistant's (operator tables) and the user's (device tables), each with
    its own DB model and hash; a call of either side may write the other's tables (a payment marks a bill).
    """

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.spec: dict[str, Any] = json.loads((data_dir / "domain.json").read_text(encoding="utf-8"))
        self.name: str = self.spec["tau2_domain"]
        self.tables: list[dict[str, Any]] = self.spec["tables"]
        self.tools: dict[str, dict[str, Any]] = {t["name"]: t for t in self.spec["tools"]}
        self.assertions: dict[str, dict[str, Any]] = {a["name"]: a for a in self.spec.get("assertions", [])}
        self.validators = {name: ArgumentValidator(t["parameters"]) for name, t in self.tools.items()}
        self.validators.update({name: ArgumentValidator({"type": "object", "properties": a["parameters"],
                                                         "additionalProperties": False})
                                for name, a in self.assertions.items()})
        self.policy = (data_dir / "policy.md").read_text(encoding="utf-8")
        self.sides = ["assistant"] + (["user"] if any(t.get("side") == "user" for t in self.tables) else [])
        self.db_models = {side: _db_model(self, side) for side in self.sides}
        self.db_model = self.db_models["assistant"]
        self.toolkits = {side: _toolkit_class(self, side) for side in self.sides}
        self.toolkit = self.toolkits["assistant"]
        self._seeded_image: bytes | None = None
        self._seeded_models: dict[str, DB] = {}
        self.seeded_hashes: dict[str, str] = {}

    def side_tables(self, side: str) -> list[dict[str, Any]]:
        return [t for t in self.tables if _side(t.get("side")) == side]

    def load_db(self, side: str = "assistant") -> DB:
        """The seeded database of one side, validated once: environments share it until their first write replaces
        it (the toolkit never changes a DB model in place; tau2's ``update_db`` builds a new one too)."""
        if side not in self._seeded_models:
            raw = json.loads((self.data_dir / "db.json").read_text(encoding="utf-8"))
            names = {t["name"] for t in self.side_tables(side)}
            self._seeded_models[side] = self.db_models[side].model_validate(
                {k: v for k, v in raw.items() if k in names})
        return self._seeded_models[side]

    def get_environment(self, db: Optional[DB] = None, solo_mode: bool = False) -> Environment:
        """A fresh environment on ``db``, by default the seeded database (tau2's environment constructor); in a
        dual-control domain, with the user's toolkit on the seeded device."""
        dbs = {side: self.load_db(side) for side in self.sides}
        if db is not None:
            dbs["assistant"] = db
        shared = SharedDatabase(self, dbs, seeded=db is None)
        tools = self.toolkit(dbs["assistant"], shared=shared)
        user_tools = self.toolkits["user"](dbs["user"], shared=shared) if "user" in self.sides else None
        return Environment(domain_name=self.name, policy=self.policy, tools=tools, user_tools=user_tools,
                           solo_mode=solo_mode)

    def get_tasks_split(self) -> dict[str, list[str]]:
        return json.loads((self.data_dir / "split_tasks.json").read_text(encoding="utf-8"))

    def get_tasks(self, task_split_name: Optional[str] = None) -> list[Task]:
        """Every task, or those of one split (``base``, ``train``, ``test``)."""
        raw = json.loads((self.data_dir / "tasks.json").read_text(encoding="utf-8"))
        tasks = [Task.model_validate(t) for t in raw]
        if task_split_name is None:
            return tasks
        splits = self.get_tasks_split()
        if task_split_name not in splits:
            raise ValueError(f"no task split {task_split_name!r} in {self.name}; splits: {', '.join(splits)}")
        wanted = set(splits[task_split_name])
        return [t for t in tasks if t.id in wanted]

    def connect(self, dbs: dict[str, DB], seeded: bool) -> sqlite3.Connection:
        """A sqlite3 database holding every side's ``dbs``; the seeded one is built once and then copied (fast)."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        if seeded and self._seeded_image is not None:
            conn.deserialize(self._seeded_image)
        else:
            _fill(conn, self, dbs)
            if seeded:
                self._seeded_image = conn.serialize()
        conn.execute("PRAGMA foreign_keys = ON")
        return conn


def _side(side: Optional[str]) -> str:
    """A spec side as tau2 names the toolkit: "agent" is tau2's "assistant"."""
    return "user" if side == "user" else "assistant"


class SharedDatabase:
    """The one sqlite3 database both toolkits of an environment run on, and a count of the writes to it (a
    toolkit rebuilds its DB model from sqlite when the count moved since it last did)."""

    def __init__(self, data: DomainData, dbs: dict[str, DB], seeded: bool):
        self.data, self.writes = data, 0
        self.conn = data.connect(dbs, seeded)

    def replace(self, dbs: dict[str, DB]) -> None:
        self.conn.close()
        self.conn = self.data.connect(dbs, seeded=False)
        self.writes += 1


def _db_model(data: DomainData, side: str) -> type[DB]:
    """A pydantic DB with one field per table of ``side``: rows keyed by primary key (as text), typed columns."""
    fields: dict[str, Any] = {}
    for table in data.side_tables(side):
        columns: dict[str, Any] = {}
        for col in table["columns"]:
            py = COLUMN_TYPES[col["type"]]
            columns[col["name"]] = (Optional[py], None) if col["nullable"] else (py, ...)
        row = create_model(_camel(table["name"]) + "Row", __config__=ConfigDict(extra="forbid"), **columns)
        if hasattr(DB, table["name"]):
            raise ValueError(f"table name {table['name']!r} clashes with an attribute of tau2's DB model")
        fields[table["name"]] = (dict[str, row], Field(default_factory=dict, description=table["description"]))
    suffix = "UserDB" if side == "user" else "DB"
    return create_model(_camel(data.spec["name"]) + suffix, __base__=DB, **fields)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name))


def _fill(conn: sqlite3.Connection, data: DomainData, dbs: dict[str, DB]) -> None:
    """Create the schema and insert every side's rows (foreign keys are checked from then on, as in the engine)."""
    for stmt in data.spec["schema_sql"]:
        conn.execute(stmt)
    conn.execute("BEGIN")
    for table in data.tables:  # in dependency order
        rows = getattr(dbs[_side(table.get("side"))], table["name"])
        cols = [c["name"] for c in table["columns"]]
        conn.executemany(
            f"INSERT INTO {table['name']} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [tuple(getattr(r, c) for c in cols) for r in rows.values()])
    conn.execute("COMMIT")


def _dump(conn: sqlite3.Connection, data: DomainData, side: str) -> dict[str, Any]:
    """One side's tables as its DB model's content: rows keyed by primary key, in key order, booleans as bools."""
    out: dict[str, Any] = {}
    for table in data.side_tables(side):
        pk = table["primary_key"]
        bools = [c["name"] for c in table["columns"] if c["type"] == "boolean"]
        cur = conn.execute(f"SELECT * FROM {table['name']} ORDER BY {pk}")
        names = [d[0] for d in cur.description]
        rows: dict[str, Any] = {}
        for values in cur.fetchall():
            row = dict(zip(names, values))
            for b in bools:
                if row[b] is not None:
                    row[b] = bool(row[b])
            rows[str(row[pk])] = row
        out[table["name"]] = rows
    return out


class SpecTool(Tool):
    """A tau2 Tool whose schema is the spec's own JSON Schema (not one re-derived from a Python signature)."""

    _spec_parameters: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self._get_description(), "parameters": self._spec_parameters}}


class SpecToolKit(ToolKitBase):
    """Runs the spec's tools of one side on the environment's sqlite3 database; ``db`` (what tau2 hashes) holds
    that side's tables and follows every write, whichever side made it."""

    domain: DomainData  # set on each generated subclass
    side: str  # "assistant" or "user", set on each generated subclass
    shared: SharedDatabase  # set per instance; a tool may not take these names either

    def __init__(self, db: DB, seeded: bool = False, shared: Optional[SharedDatabase] = None):
        self._db, self._hash, self._seen = db, None, 0
        super().__init__(db)
        if shared is None:  # a toolkit on its own: the other side (if any) on its seeded rows
            dbs = {side: self.domain.load_db(side) for side in self.domain.sides}
            shared = SharedDatabase(self.domain, {**dbs, self.side: db}, seeded)
        self.shared, self._seen = shared, shared.writes

    @property
    def conn(self) -> sqlite3.Connection:
        return self.shared.conn

    @property
    def db(self) -> DB:
        """The DB model tau2 hashes; rebuilt from sqlite only when read after a write (writes stay cheap)."""
        shared = getattr(self, "shared", None)
        if shared is not None and self._seen != shared.writes:
            self._db = self.domain.db_models[self.side].model_validate(_dump(self.conn, self.domain, self.side))
            self._seen, self._hash = shared.writes, None
        return self._db

    @db.setter
    def db(self, value: DB) -> None:
        shared = getattr(self, "shared", None)
        self._db, self._hash, self._seen = value, None, shared.writes if shared is not None else 0

    def get_db_hash(self) -> str:
        """tau2's hash of ``db``, memoised per state (the seeded state's once per process)."""
        db = self.db
        if self._hash is None:
            seeded = db is self.domain.load_db(self.side)
            if seeded and self.side in self.domain.seeded_hashes:
                self._hash = self.domain.seeded_hashes[self.side]
            else:
                self._hash = super().get_db_hash()
                if seeded:
                    self.domain.seeded_hashes[self.side] = self._hash
        return self._hash

    def get_tools(self) -> dict[str, Tool]:
        tools: dict[str, Tool] = {}
        for name, method in self.tools.items():
            tool = SpecTool(method)
            tool._spec_parameters = self.domain.tools[name]["parameters"]
            tools[name] = tool
        return tools

    def update_db(self, update_data: Optional[dict[str, Any]] = None) -> None:
        current = {side: self.domain.db_models[side].model_validate(_dump(self.conn, self.domain, side))
                   for side in self.domain.sides}
        super().update_db(update_data)
        self.shared.replace({**current, self.side: self._db})
        self._seen = self.shared.writes

    def run_assertion(self, name: str, arguments: dict[str, Any]) -> bool:
        """The value of one of the spec's assertions on the current state (tau2's assertion functions)."""
        assertion = self.domain.assertions[name]
        errors = list(self.domain.validators[name].iter_errors(arguments))
        if errors:
            raise ValueError(f"{name}: invalid arguments: {_short(errors[0].message)}")
        params = {p: arguments.get(p, schema.get("default")) for p, schema in assertion["parameters"].items()}
        params["now"] = self.domain.spec["now"]
        row = self.conn.execute(assertion["sql"], params).fetchone()
        if row is None:
            raise ValueError(f"{name}: no row to judge (a record it names does not exist)")
        return bool(row[0])

    def run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Execute one call; a refused call raises CallError with the message the agent sees."""
        tool = self.domain.tools[name]
        params = self._bind(tool, arguments)
        before = self.conn.total_changes
        self.conn.execute("SAVEPOINT call")
        try:
            output = self._execute(tool, params)
            self.conn.execute("RELEASE call")
        except CallError:
            self._undo()
            raise
        except sqlite3.IntegrityError as exc:
            self._undo()
            raise CallError(f"{name} was refused: constraint violated ({exc})") from None
        except (sqlite3.Error, OverflowError, ValueError) as exc:
            self._undo()
            raise CallError(f"{name} failed: {exc}") from None
        if self.conn.total_changes != before:
            self.shared.writes += 1
        return json.dumps(output, ensure_ascii=False, default=str)

    def _undo(self) -> None:
        self.conn.execute("ROLLBACK TO call")
        self.conn.execute("RELEASE call")

    def _bind(self, tool: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
        name = tool["name"]
        if _too_long(arguments):
            raise CallError(f"{name}: an argument is too long (limit {MAX_STRING_CHARS} characters)")
        errors = sorted(self.domain.validators[name].iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            where = f"argument {'.'.join(map(str, e.path))!r}" if e.path else "arguments"
            raise CallError(f"{name}: invalid {where}: {_short(e.message)}")
        params = {p: arguments.get(p, schema.get("default"))
                  for p, schema in tool["parameters"].get("properties", {}).items()}
        params["now"] = self.domain.spec["now"]
        for generated, table in tool["generated"].items():
            params[generated] = self._next_key(next(t for t in self.domain.tables if t["name"] == table))
        return params

    def _next_key(self, table: dict[str, Any]) -> Any:
        """The next key of ``table``: max + 1, formatted like the seeded keys (prefix, zero-padded width)."""
        pk, key = table["primary_key"], table["key"]
        if key["type"] == "integer":
            (top,) = self.conn.execute(f"SELECT COALESCE(MAX({pk}), 0) FROM {table['name']}").fetchone()
            return top + 1
        prefix = key["prefix"]
        (top,) = self.conn.execute(
            f"SELECT COALESCE(MAX(CAST(substr({pk}, ?) AS INTEGER)), 0) FROM {table['name']} "
            f"WHERE substr({pk}, 1, ?) = ?", (len(prefix) + 1, len(prefix), prefix)).fetchone()
        return f"{prefix}{top + 1:0{key['width']}d}"

    def _execute(self, tool: dict[str, Any], params: dict[str, Any]) -> Any:
        for pre in tool["preconditions"]:
            if pre.get("enforced_by") == "policy":  # the policy states it, the tool lets it through (as the engine)
                continue
            row = self.conn.execute(pre["sql"], params).fetchone()
            if (row is None) == (pre["expect"] == "exists"):
                shown = {k: _short(v) for k, v in params.items()}
                raise CallError(fill_message(pre["error"], shown))
        for effect in tool["effects"]:
            self.conn.execute(effect, params)
        cur = self.conn.execute(tool["returns"]["sql"], params)
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
        if tool["returns"]["mode"] == "one":
            return rows[0] if rows else None
        return rows


def _annotation(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    return JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _method(tool: dict[str, Any]) -> Callable[..., str]:
    """A toolkit method for one spec tool: its signature and docstring come from the spec's parameters. A setup
    tool (a task's initialization action only) is a plain method, not a tool: neither side is offered it."""
    name = tool["name"]
    properties: dict[str, Any] = tool["parameters"].get("properties", {})
    required = set(tool["parameters"].get("required", []))

    def call(self: SpecToolKit, **arguments: Any) -> str:
        return self.run_tool(name, arguments)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for pname, pschema in properties.items():
        default = inspect.Parameter.empty if pname in required else pschema.get("default")
        params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=_annotation(pschema)))
    call.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    call.__name__ = call.__qualname__ = name
    args = [f"    {p}: {' '.join(str(s.get('description', p)).split())}" for p, s in properties.items()]
    call.__doc__ = tool["description"] + ("\n\nArgs:\n" + "\n".join(args) if args else "") + \
        "\n\nReturns:\n    The result as JSON."
    if tool.get("setup"):
        return call
    return is_tool(ToolType.WRITE if tool["kind"] == "write" else ToolType.READ)(call)


def _assertion_method(assertion: dict[str, Any]) -> Callable[..., bool]:
    """A toolkit function for one of the spec's assertions (what a task's ``env_assertions`` name), not a tool."""
    name = assertion["name"]

    def check(self: SpecToolKit, **arguments: Any) -> bool:
        return self.run_assertion(name, arguments)

    check.__name__ = check.__qualname__ = name
    return check


def _toolkit_class(data: DomainData, side: str = "assistant") -> type[SpecToolKit]:
    """The toolkit of one side: its tools (and setup functions), by their ``env_type``, and its assertions."""
    tools = {n: t for n, t in data.tools.items() if t.get("env_type", "assistant") == side}
    assertions = {n: a for n, a in data.assertions.items() if _side(a.get("side")) == side}
    reserved = set(dir(SpecToolKit)) | set(SpecToolKit.__annotations__)
    clashes = sorted((set(tools) | set(assertions)) & reserved)
    if clashes:
        raise ValueError(f"tool names {clashes} clash with tau2 toolkit methods")
    attrs: dict[str, Any] = {name: _method(tool) for name, tool in tools.items()}
    attrs.update({name: _assertion_method(a) for name, a in assertions.items()})
    attrs["domain"], attrs["side"] = data, side
    whose = "the user's own tools (on their device)" if side == "user" else "the tools"
    attrs["__doc__"] = f"{whose.capitalize()} of the ToolScale domain {data.spec['name']!r}."
    return type(_camel(data.spec["name"]) + ("UserTools" if side == "user" else "Tools"), (SpecToolKit,), attrs)


def register(data_dir: Path) -> DomainData:
    """Register the domain (environment, tasks, splits) with tau2's registry; a second call does nothing."""
    data = DomainData(data_dir)
    if data.name not in registry.get_domains():
        registry.register_domain(data.get_environment, data.name)
    if data.name not in registry.get_task_sets():
        registry.register_tasks(data.get_tasks, data.name, get_task_splits=data.get_tasks_split)
    return data
