"""Load a domain spec (YAML) into typed objects, reporting every problem with file and path.

Two layers of checking: the JSON Schema in ``schemas/domain.schema.json`` (shape), then semantic checks the
schema cannot express (references resolve, SQL compiles against the tables, SQL parameters are declared,
utterance slots exist). All problems are collected and raised together as one ``SpecError``.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from domains.external import Source, TableSource, spec_path_problem
from domains.geography import install_geography_function
from domains.safeyaml import MAX_SPEC_BYTES, YamlLimitError, load_yaml

MAX_TOTAL_ROWS = 100_000  # seeded rows over all tables; the shipped domains seed about 1,000 each
from domains.sqlguard import EFFECT, READ, StatementGuard, StatementRefused

from domains.realism_spec import (Intent, Invariant, Rule, Users, build_intents, build_invariants, build_rules,
                                  build_users, raw_template_problems, realism_problems, states_why_stopped)

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "domain.schema.json"
SQL_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")
SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
BRACED = re.compile(r"\{[^{}]*\}|[{}]")  # every use of a brace: a whole {...} field, or a lone brace
RESERVED_PARAMS = {"now"}
DATABASE_FOLDER = re.compile(r"\w+_db\d+")  # warehouse/exports.py: a domain's database k > 0 is <domain>_db<k>
KNOWN_FORMATS = {"date", "date-time", "email"}


class SpecError(ValueError):
    """A domain spec failed to load; ``problems`` lists every ``file: path: message``."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    seed: dict[str, Any]
    label: str
    nullable: bool = False
    unique: bool = False
    enum: tuple[Any, ...] | None = None
    references: tuple[str, str] | None = None


@dataclass(frozen=True)
class Table:
    name: str
    noun: str
    rows: int
    primary_key: str
    columns: tuple[Column, ...]
    description: str = ""
    source: TableSource | None = None  # rows come from external JSON records instead of seed recipes
    side: str = "agent"  # "user": the user's own state (their device), which only user tools see

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True)
class Precondition:
    sql: str
    error: str
    expect: str = "exists"
    enforced_by: str = "tool"  # "policy": the tool lets it through; only the agent (and the state check) enforces it
    rule: str = ""  # the id of the rules: entry this precondition checks (the first, where it checks several)
    also: tuple[str, ...] = ()  # further rules the same check decides (a permission beside its refusal)

    @property
    def rules(self) -> tuple[str, ...]:
        """Every rule id this precondition checks."""
        return ((self.rule,) if self.rule else ()) + self.also


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    kind: str  # "read" | "write"
    entity: str
    parameters: dict[str, Any]
    returns_sql: str
    returns_mode: str
    preconditions: tuple[Precondition, ...] = ()
    effects: tuple[str, ...] = ()
    generated: dict[str, str] = field(default_factory=dict)
    computed: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (how, source parameter)
    mention: str | None = None
    examples: tuple[dict[str, Any], ...] = ()
    candidates: tuple[str, ...] = ()  # queries proposing argument values to the synthesiser, in order
    side: str = "agent"  # who may call it: "agent" (the assistant) or "user" (the person, on their own state)
    crosses: tuple[str, ...] = ()  # tables of the other side its SQL touches (a payment the user makes marks the bill)
    setup: bool = False  # only a task's initialisation calls it (side "setup"); no agent or user is offered it

    @property
    def param_names(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    def openai_schema(self) -> dict[str, Any]:
        """The function schema an agent sees (OpenAI tools format)."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class Assertion:
    """A named check of a final state (tau2's assertion functions): a read over one side's tables, with
    parameters (JSON Schema per name), returning one value."""

    name: str
    sql: str
    side: str = "agent"
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DomainSpec:
    name: str
    description: str
    now: str
    policy: str
    tables: tuple[Table, ...]
    tools: tuple[Tool, ...]
    utterances: dict[str, tuple[str, ...]]
    path: str
    spec_hash: str
    users: Users | None = None
    invariants: tuple[Invariant, ...] = ()
    intents: tuple[Intent, ...] = ()
    rules: tuple[Rule, ...] = ()  # the spec's own rules; ``all_rules`` adds those every domain with users states
    default: bool = True  # part of a plain ``toolscale regenerate``; false for imported (external) domains
    sources: dict[str, Source] = field(default_factory=dict)
    imported_tasks: str | None = None  # a source holding tasks in tau2's Task format (see interop/tau2_tasks.py)
    assertions: dict[str, Assertion] = field(default_factory=dict)  # named final-state checks (tau2's ENV_ASSERTION)
    policy_sources: tuple[str, ...] = ()  # sources whose text joins the policy at export (domains.external.policy_text)
    states_why_stopped: bool = False  # some outcome cites the built-in tell rule tell_why_stopped: the policy states it

    @property
    def external(self) -> bool:
        """Whether some table is seeded from external data (which may be absent on this machine)."""
        return any(t.source is not None for t in self.tables)

    @property
    def all_rules(self) -> tuple[Rule, ...]:
        """Every written rule the policy states: the spec's, then the built-in ones (when it declares users)."""
        from domains.realism_spec import BUILTIN_RULES, TELL_WHY_STOPPED

        return (self.rules + (BUILTIN_RULES if self.users is not None else ())
                + ((TELL_WHY_STOPPED,) if self.states_why_stopped else ()))

    @property
    def checked_rules(self) -> frozenset[str]:
        """The ids of the rules a precondition the tools enforce cites: the policy's "Rules the tools check"."""
        return checked_rule_ids(self.tools)

    def rule(self, rule_id: str) -> Rule | None:
        return next((r for r in self.all_rules if r.id == rule_id), None)

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)

    @property
    def dual(self) -> bool:
        """Whether the user has state and tools of their own (tau2's dual control: telecom)."""
        return any(t.side == "user" for t in self.tables) or any(t.side == "user" for t in self.tools)

    def side_tables(self, side: str) -> tuple[Table, ...]:
        """The tables of one side: "agent" (the operator's records) or "user" (the user's device)."""
        return tuple(t for t in self.tables if t.side == side)

    def side_tools(self, side: str) -> tuple[Tool, ...]:
        """The tools one side is offered (setup tools are offered to neither)."""
        return tuple(t for t in self.tools if t.side == side and not t.setup)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    @property
    def primary_keys(self) -> dict[str, str]:
        """primary-key column name -> table (names are unique across a domain)."""
        return {t.primary_key: t.name for t in self.tables}

    def seed_order(self) -> list[Table]:
        """Tables in an order where every referenced table comes first."""
        done: list[Table] = []
        pending = list(self.tables)
        known = {t.name for t in self.tables}
        while pending:
            finished = {d.name for d in done}
            ready = [t for t in pending if all(
                c.references is None or c.references[0] in finished or c.references[0] == t.name
                or c.references[0] not in known for c in t.columns)]
            if not ready:
                raise SpecError([f"{self.path}: tables: foreign keys form a cycle among "
                                 f"{', '.join(t.name for t in pending)}"])
            done.extend(ready)
            pending = [t for t in pending if t not in ready]
        return done


@cache
def _schema_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    return jsonschema.Draft202012Validator(schema)


def _json_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(root)"


def load_spec(path: str | Path) -> DomainSpec:
    """Read, validate and check a domain spec file; raise ``SpecError`` listing every problem."""
    path = Path(path)
    label = path.name
    try:
        if not path.is_file():
            raise SpecError([f"{label}: cannot read: not a regular file"])
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError([f"{label}: the file is {size:,} bytes; a spec may be at most {MAX_SPEC_BYTES:,}"])
        with path.open("rb") as fh:  # read at most the limit: the file may grow after the stat
            data = fh.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise SpecError([f"{label}: the file is over {MAX_SPEC_BYTES:,} bytes, the limit for a spec"])
        text = data.decode("utf-8")
    except OSError as exc:
        raise SpecError([f"{label}: cannot read: {exc.strerror or exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise SpecError([f"{label}: not UTF-8 text (byte {exc.start})"]) from exc
    try:
        raw = load_yaml(text)
    except YamlLimitError as exc:
        raise SpecError([f"{label}: {exc}"]) from exc
    except Exception as exc:  # noqa: BLE001 - the YAML library raises several unrelated types on bad input
        raise SpecError([f"{label}: not valid YAML: {_one_line(str(exc))}"]) from exc
    return parse_spec(raw, label=label, source=text)


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def parse_spec(raw: Any, label: str = "<spec>", source: str | None = None) -> DomainSpec:
    """Validate an already-parsed spec mapping (for specs that do not come from a file)."""
    if not isinstance(raw, dict):
        raise SpecError([f"{label}: (root): expected a mapping, got {type(raw).__name__}"])
    problems = [f"{label}: {_json_path(e.absolute_path)}: {_schema_message(e)}"
                for e in sorted(_schema_validator().iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))]
    if problems:
        raise SpecError(problems)
    spec_hash = hashlib.sha256((source or json.dumps(raw, sort_keys=True)).encode()).hexdigest()[:16]
    spec = _build(raw, label, spec_hash)
    problems = semantic_problems(spec, raw)
    if problems:
        raise SpecError([f"{label}: {p}" for p in problems])
    return spec


def _schema_message(error: jsonschema.ValidationError) -> str:
    if error.validator == "oneOf" and isinstance(error.instance, dict) and "kind" in error.instance:
        return f"invalid seed recipe of kind {error.instance['kind']!r} (check its required and allowed keys)"
    return error.message if len(error.message) < 300 else error.message[:300] + "..."


def _build(raw: dict[str, Any], label: str, spec_hash: str) -> DomainSpec:
    tables = []
    for t in raw["tables"]:
        cols = tuple(Column(
            name=c["name"], type=c["type"], seed=c["seed"], label=c.get("label", c["name"].replace("_", " ")),
            nullable=c.get("nullable", False), unique=c.get("unique", False),
            enum=tuple(c["enum"]) if "enum" in c else None,
            references=tuple(c["references"].split(".", 1)) if "references" in c else None,
        ) for c in t["columns"])
        src = t.get("from")
        tables.append(Table(name=t["name"], noun=t["noun"], rows=t.get("rows", 0), primary_key=t["primary_key"],
                            columns=cols, description=t.get("description", ""),
                            source=TableSource(src["source"], src["records"], src.get("each")) if src else None,
                            side=t.get("side", "agent")))
    tools = []
    for t in raw["tools"]:
        params = dict(t["parameters"])
        params.setdefault("additionalProperties", False)
        params.setdefault("required", [])
        tools.append(Tool(
            name=t["name"], description=t["description"].strip(), kind=t["kind"], entity=t["entity"],
            parameters=params, returns_sql=t["returns"]["sql"], returns_mode=t["returns"].get("mode", "one"),
            preconditions=tuple(Precondition(p["sql"], p["error"], p.get("expect", "exists"),
                                             p.get("enforced_by", "tool"), *_rule_ids(p.get("rule", "")))
                                for p in t.get("preconditions", [])),
            effects=tuple(t.get("effects", [])), generated=dict(t.get("generated", {})),
            computed={k: (v["how"], v["from"]) for k, v in t.get("computed", {}).items()},
            mention=t.get("mention"), examples=tuple(t.get("examples", [])), candidates=tuple(t.get("candidates", [])),
            side=t.get("side", "agent"), crosses=tuple(t.get("crosses", [])), setup=t.get("setup", False),
        ))
    from domains.policy import policy_text  # local: policy reads this module's types

    users = build_users(raw.get("users"))
    rules = build_rules(raw.get("rules"))
    intents = build_intents(raw.get("intents"))
    why_stopped = states_why_stopped(intents)
    return DomainSpec(name=raw["domain"], description=raw["description"].strip(), now=raw["now"],
                      policy=policy_text(raw.get("policy", "").strip(), raw["now"], users, rules,
                                         checked_rule_ids(tools), why_stopped),
                      rules=rules,
                      tables=tuple(tables), tools=tuple(tools),
                      utterances={k: tuple(v) for k, v in raw["utterances"].items()}, path=label,
                      spec_hash=spec_hash, users=users, invariants=build_invariants(raw.get("invariants")),
                      intents=intents, default=raw.get("default", True), states_why_stopped=why_stopped,
                      sources={name: Source(name, s.get("package"), s.get("resource"), s.get("path"),
                                            s.get("hint", "")) for name, s in raw.get("sources", {}).items()},
                      imported_tasks=raw.get("imported_tasks", {}).get("source"),
                      policy_sources=tuple(raw.get("policy_sources", [])),
                      assertions={n: Assertion(n, a["sql"], a.get("side", "agent"), dict(a.get("parameters", {})))
                                  for n, a in raw.get("assertions", {}).items()})


def semantic_problems(spec: DomainSpec, raw: dict[str, Any]) -> list[str]:
    """Checks the JSON Schema cannot express; each problem is ``path: message``."""
    from domains.ddl import schema_statements  # local: ddl imports this module's types

    from domains.arguments import iso_problem

    problems: list[str] = []
    if iso_problem(spec.now, "date-time"):
        problems.append(f"now: {iso_problem(spec.now, 'date-time')}")
    if DATABASE_FOLDER.fullmatch(spec.name):  # the tau2 export names a domain's second database <domain>_db1
        problems.append(f"domain: {spec.name!r} is written like a database folder (<domain>_db<N>), which the tau2 "
                        "export gives a domain's further databases; choose another name")
    tables = {t.name: t for t in spec.tables}
    if len(tables) != len(spec.tables):
        problems.append("tables: duplicate table names")
    total_rows = sum(t.rows for t in spec.tables if t.source is None)
    if total_rows > MAX_TOTAL_ROWS:
        problems.append(f"tables: {total_rows:,} seeded rows in all; a spec may seed at most {MAX_TOTAL_ROWS:,} "
                        "(seeding and checking stay within seconds)")
    pk_owner: dict[str, str] = {}
    for ti, t in enumerate(spec.tables):
        names = [c.name for c in t.columns]
        if len(set(names)) != len(names):
            problems.append(f"tables[{ti}].columns: duplicate column names in {t.name}")
        if t.primary_key not in names:
            problems.append(f"tables[{ti}].primary_key: {t.name} has no column {t.primary_key!r}")
        if t.primary_key in pk_owner:
            problems.append(f"tables[{ti}].primary_key: {t.primary_key!r} is already the key of {pk_owner[t.primary_key]}")
        pk_owner[t.primary_key] = t.name
        if t.source is None and t.rows < 1:
            problems.append(f"tables[{ti}].rows: a table needs rows (or from: to take its rows from a source)")
        if t.source is not None and t.source.source not in spec.sources:
            problems.append(f"tables[{ti}].from.source: unknown source {t.source.source!r}; declare it under sources:")
        for ci, c in enumerate(t.columns):
            if c.seed["kind"] == "field" and t.source is None:
                problems.append(f"tables[{ti}].columns[{ci}].seed: a field recipe needs the table to have from:")
    for ti, t in enumerate(spec.tables):
        for ci, c in enumerate(t.columns):
            where = f"tables[{ti}].columns[{ci}]"
            problems += [f"{where}.{m}" for m in _column_problems(spec, t, c, tables, pk_owner)]
    db = sqlite3.connect(":memory:")
    install_geography_function(db)
    guard = StatementGuard(db, tables)
    try:
        for stmt in schema_statements(spec):
            db.execute(stmt)
    except SpecError as exc:
        problems.append(exc.problems[0].split(": ", 1)[1])
    except sqlite3.Error as exc:
        problems.append(f"tables: the tables do not compile to SQL: {exc}")
    for name, src in spec.sources.items():
        for key in ("path", "resource"):
            written = getattr(src, key)
            problem = spec_path_problem(written) if written else None
            if problem:
                problems.append(f"sources.{name}.{key}: refused: it {problem}")
    problems += _reserved_name_problems(spec)
    for section in ("users", "intents"):
        problems += raw_template_problems(section, raw.get(section))
    for name, assertion in spec.assertions.items():
        allowed = [t.name for t in spec.tables if t.side == assertion.side]
        used = set(SQL_PARAM.findall(assertion.sql))
        if used - set(assertion.parameters):
            problems.append(f"assertions.{name}.sql: parameter {', '.join(sorted(used - set(assertion.parameters)))} "
                            "is not declared")
            continue
        try:
            StatementGuard(db, allowed).prepare(READ, assertion.sql, {u: None for u in used})
        except StatementRefused as exc:
            problems.append(f"assertions.{name}.sql: {exc} (an assertion reads its own side's tables)")
        except sqlite3.Error as exc:
            problems.append(f"assertions.{name}.sql: {_sql_message(str(exc))}")
    for k, name in enumerate(spec.policy_sources):
        if name not in spec.sources:
            problems.append(f"policy_sources[{k}]: unknown source {name!r}; declare it under sources:")
    if spec.imported_tasks is not None and spec.imported_tasks not in spec.sources:
        problems.append(f"imported_tasks.source: unknown source {spec.imported_tasks!r}; declare it under sources:")
    tool_names = [t.name for t in spec.tools]
    for dup in sorted({n for n in tool_names if tool_names.count(n) > 1}):
        problems.append(f"tools: duplicate tool name {dup!r}")
    for i, tool in enumerate(spec.tools):
        problems += [f"tools[{i}]{m}" for m in _tool_problems(spec, tool, tables, guard)]
    for name in (t.name for t in spec.tools if t.side == "agent" and not t.setup):  # users act, they do not ask
        if name not in spec.utterances:
            problems.append(f"utterances: no utterances for tool {name!r}")
    for name, templates in spec.utterances.items():
        tool = spec.tool(name)
        if tool is None:
            problems.append(f"utterances.{name}: no tool named {name!r}")
            continue
        for k, tpl in enumerate(templates):
            for slot in SLOT.findall(tpl):
                if slot not in tool.param_names:
                    problems.append(f"utterances.{name}[{k}]: slot {{{slot}}} is not a parameter of {name}")
    problems += _seed_sql_problems(spec, guard)
    problems += realism_problems(spec, db)
    return problems


def _column_problems(spec: DomainSpec, t: Table, c: Column, tables: dict[str, Table],
                     pk_owner: dict[str, str]) -> list[str]:
    out = []
    if c.references:
        rt, rc = c.references
        if rt not in tables:
            out.append(f"references: unknown table {rt!r}")
        elif rc != tables[rt].primary_key:
            out.append(f"references: {rt}.{rc} is not the primary key of {rt}")
    elif c.name in pk_owner and pk_owner[c.name] != t.name:
        out.append(f"name: {c.name!r} is the key of {pk_owner[c.name]}; add references: "
                   f"{pk_owner[c.name]}.{c.name} or rename it")
    kind = c.seed["kind"]
    if kind == "reference" and not c.references:
        out.append("seed: a reference recipe needs the column to declare references")
    if kind == "reference" and "spread" in c.seed and c.references and c.references[0] in tables:
        spread = tables[c.references[0]].column(c.seed["spread"])
        if spread is None or spread.type != "integer":
            out.append(f"seed.spread: {c.seed['spread']!r} is not an integer column of {c.references[0]}")
    if kind == "reference" and "counts_if" in c.seed:
        out += _counts_if_problems(t, c)
    if kind == "sequence" and c.name != t.primary_key:
        out.append("seed: a sequence recipe is only for the primary key")
    if kind == "lookup":
        via = t.column(c.seed["via"])
        if via is None or via.references is None:
            out.append(f"seed.via: {c.seed['via']!r} is not a foreign-key column of {t.name}")
        elif via.references[0] in tables and tables[via.references[0]].column(c.seed["column"]) is None:
            out.append(f"seed.column: unknown column {via.references[0]}.{c.seed['column']}")
    if kind == "formula":
        from domains.seeding import formula_names
        try:
            earlier = {x.name for x in t.columns[: t.columns.index(c)]}
            unknown = formula_names(c.seed["expr"]) - earlier
            if unknown:
                out.append(f"seed.expr: unknown column {', '.join(sorted(unknown))} "
                           f"(a formula may use columns defined before it)")
        except ValueError as exc:
            out.append(f"seed.expr: {exc}")
    if kind == "provider":
        from domains.seeding import PROVIDERS
        if c.seed["provider"] not in PROVIDERS:
            out.append(f"seed.provider: unknown provider {c.seed['provider']!r}; known: {', '.join(sorted(PROVIDERS))}")
    if kind in ("choice", "constant"):
        from domains.seeding import value_problem
        for v in (c.seed["values"] if kind == "choice" else [c.seed["value"]]):
            problem = value_problem(c, v)
            if problem:
                out.append(f"seed.{'values' if kind == 'choice' else 'value'}: {problem} (column type {c.type})")
                break
    if kind == "choice" and c.enum is not None:
        extra = [v for v in c.seed["values"] if v not in c.enum]
        if extra:
            out.append(f"seed.values: {extra} are not in the column's enum")
    if kind == "choice" and "weights" in c.seed and len(c.seed["weights"]) != len(c.seed["values"]):
        out.append("seed.weights: needs one weight per value")
    if kind in ("uniform", "randint") and c.seed["min"] > c.seed["max"]:
        out.append("seed: min is greater than max")
    out += _context_recipe_problems(spec, t, c)
    return out


def _context_recipe_problems(spec: DomainSpec, t: Table, c: Column) -> list[str]:
    """Recipes that read other rows (after, before, place, distance, query): paths resolve, types fit, order
    holds."""
    from domains.seeding import CONTEXT_KINDS, parse_path, recipe_paths

    recipe = c.seed
    kind = recipe["kind"]
    out: list[str] = []
    if kind == "lookup":
        via = t.column(recipe["via"])
        parent = next((x for x in spec.tables if via and via.references and x.name == via.references[0]), None)
        if parent is not None and _late(spec, parent, recipe["column"]):
            out.append(f"seed.column: {parent.name}.{recipe['column']} is filled after every table is seeded; "
                       f"a lookup cannot copy it")
    if "today_share" in recipe and c.type not in ("date", "datetime"):
        out.append(f"seed.today_share: moves dates to the clock's day; the column is {c.type}")
    if kind not in CONTEXT_KINDS:
        return out
    earlier = {x.name for x in t.columns[: t.columns.index(c)]}
    for path in recipe_paths(recipe):
        try:
            hops, last = parse_path(spec, t, path)
        except ValueError as exc:
            out.append(f"seed: {exc}")
            continue
        if not hops and last not in earlier and kind != "query":
            out.append(f"seed: path {path!r} names a column of this row that is not defined before {c.name}")
    if out:
        return out
    if kind in ("after", "before"):
        if c.type not in ("date", "datetime"):
            out.append(f"seed: an {kind} recipe makes dates; the column is {c.type}")
        if recipe.get("min", 0) > recipe["max"]:
            out.append("seed: min is greater than max")
        if kind == "after" and "since" in recipe or kind == "before" and "until" in recipe:
            out.append(f"seed: an {kind} recipe is bounded by {'until' if kind == 'after' else 'since'}")
    if kind == "distance" and c.type not in ("integer", "real"):
        out.append(f"seed: a distance recipe makes km; the column is {c.type}")
    if kind == "place":
        from domains import geography
        numeric = recipe["field"] in geography.NUMBER_FIELDS or recipe["field"] == "iban_length"
        if c.type != "text" and not (numeric and c.type in ("integer", "real")):
            out.append(f"seed: a place recipe's {recipe['field']} is {'a number' if numeric else 'text'}; "
                       f"the column is {c.type}")
        if "plus" in recipe and recipe["field"] not in geography.NUMBER_FIELDS:
            out.append(f"seed.plus: adds to a number (elevation_m, lat, lon); {recipe['field']} is not one")
        if "where" in recipe and not geography.matching(recipe["where"]):
            out.append(f"seed.where: no place in {geography.GEOGRAPHY_PATH.name} matches {recipe['where']}")
        if c.enum is not None and "of" not in recipe and "in" not in recipe:
            bad = sorted({p.get(recipe["field"]) for p in geography.matching(recipe.get("where", {}))} - set(c.enum))
            if bad:
                out.append(f"seed: the geography table holds {', '.join(bad[:5])}, not in the column's enum")
    if c.unique and _late(spec, t, c.name):
        out.append("unique: a column filled after every table is seeded cannot be unique")
    return out


def _late(spec: DomainSpec, t: Table, name: str) -> bool:
    from domains.seeding import late_columns
    try:
        return name in late_columns(spec, t)
    except ValueError:
        return False  # a bad path, reported where it is written


def _counts_if_problems(t: Table, c: Column) -> list[str]:
    """A spread reference's ``counts_if``: a formula over the columns before it."""
    from domains.seeding import formula_names

    if "spread" not in c.seed:
        return ["seed.counts_if: only a spread reference counts its rows"]
    try:
        unknown = formula_names(c.seed["counts_if"]) - {x.name for x in t.columns[: t.columns.index(c)]}
    except ValueError as exc:
        return [f"seed.counts_if: {exc}"]
    return [f"seed.counts_if: unknown column {', '.join(sorted(unknown))} (it may use columns defined before "
            f"this one)"] if unknown else []


def _seed_sql_problem(where: str, sql: str, known: set[str], kind: str, guard: StatementGuard) -> list[str]:
    """What is wrong with one seed recipe's SQL: a parameter that is no column of the row, or a read that does
    not compile."""
    used = set(SQL_PARAM.findall(sql))
    if used - known - RESERVED_PARAMS:
        return [f"{where}: parameter {', '.join(':' + u for u in sorted(used - known - RESERVED_PARAMS))} "
                f"is not a column of this row{' defined before it' if kind == 'reference' else ''}"]
    try:
        guard.prepare(READ, sql, {u: None for u in used})
    except StatementRefused as exc:
        return [f"{where}: {exc}"]
    except sqlite3.Error as exc:
        return [f"{where}: {_sql_message(str(exc))}"]
    return []


def _seed_sql_problems(spec: DomainSpec, guard: StatementGuard) -> list[str]:
    """The SQL inside seed recipes (reference where, query) compiles as a read with known parameters."""
    out: list[str] = []
    for ti, t in enumerate(spec.tables):
        for ci, c in enumerate(t.columns):
            where = f"tables[{ti}].columns[{ci}].seed"
            kind = c.seed["kind"]
            if kind == "reference" and c.references:
                checks = [(f"{where}.{key}", f"SELECT 1 FROM {c.references[0]} WHERE ({c.seed[key]})",
                           {x.name for x in t.columns[: t.columns.index(c)]}) for key in ("where", "fallback")
                          if key in c.seed]
            elif kind == "query":
                checks = [(f"{where}.sql", c.seed["sql"], {x.name for x in t.columns})]
            else:
                continue
            for where, sql, known in checks:
                out += _seed_sql_problem(where, sql, known, kind, guard)
    for i, tool in enumerate(spec.tools):
        texts = [tool.returns_sql, *tool.effects, *(p.sql for p in tool.preconditions), *tool.candidates]
        if any(re.search(r"\b(geography|great_circle_km)\s*\(", x, re.IGNORECASE) for x in texts):
            out.append(f"tools[{i}]: geography() is for invariants and seeding only; tools read the domain's tables")
    return out


def _tool_problems(spec: DomainSpec, tool: Tool, tables: dict[str, Table], guard: StatementGuard) -> list[str]:
    out = []
    if tool.entity not in tables:
        out.append(f".entity: unknown table {tool.entity!r}")
    out += _side_problems(spec, tool, tables)
    try:
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
    except jsonschema.SchemaError as exc:
        out.append(f".parameters: not a valid JSON Schema: {exc.message}")
    declared = set(tool.param_names)
    for r in tool.required:
        if r not in declared:
            out.append(f".parameters.required: {r!r} is not a declared parameter")
    for gen, table in tool.generated.items():
        if gen in declared:
            out.append(f".generated.{gen}: the engine generates it; do not declare it as a parameter")
        if table not in tables:
            out.append(f".generated.{gen}: unknown table {table!r}")
    for cname, (_, source) in tool.computed.items():
        if cname in declared or cname in tool.generated:
            out.append(f".computed.{cname}: the engine computes it; do not declare it as a parameter")
        if source not in declared:
            out.append(f".computed.{cname}.from: {source!r} is not a declared parameter")
    known = declared | set(tool.generated) | set(tool.computed) | RESERVED_PARAMS
    if tool.kind == "write" and not tool.effects:
        out.append(".effects: a write tool needs at least one effect")
    if tool.kind == "read" and tool.effects:
        out.append(".effects: a read tool cannot have effects")
    statements = [(f".preconditions[{k}].sql", READ, p.sql) for k, p in enumerate(tool.preconditions)]
    statements += [(f".effects[{k}]", EFFECT, s) for k, s in enumerate(tool.effects)]
    statements.append((".returns.sql", READ, tool.returns_sql))
    statements += [(f".candidates[{k}]", READ, sql) for k, sql in enumerate(tool.candidates)]
    for where, role, sql in statements:
        used = set(SQL_PARAM.findall(sql))
        if used - known:
            out.append(f"{where}: parameter {', '.join(':' + u for u in sorted(used - known))} is not declared")
            continue
        # compiled under the role's authorizer: a read that writes, or any PRAGMA, is refused here
        try:
            guard.prepare(role, sql, {u: None for u in used})
        except StatementRefused as exc:
            out.append(f"{where}: {exc}")
            continue
        except sqlite3.Error as exc:
            out.append(f"{where}: {_sql_message(str(exc))}")
            continue
        quoted = double_quoted_problem(guard, role, sql, {u: None for u in used})
        if quoted:
            out.append(f"{where}: {quoted}")
    out += [f".parameters.properties.{m}" for m in _parameter_problems(tool, tables)]
    out += _candidates_problems(tool, guard, reported={o.split(":", 1)[0] for o in out})
    for k, p in enumerate(tool.preconditions):
        out += [f".preconditions[{k}].error: {m}" for m in placeholder_problems(p.error, known)]
    if tool.mention:
        out += [f".mention: {m}" for m in placeholder_problems(tool.mention, declared)]
    return out


def placeholder_problems(text: str, allowed: set[str]) -> list[str]:
    """A message may hold ``{parameter}`` placeholders and nothing else in braces: no attribute, index,
    conversion or format spec (a message is filled by substitution, never by ``str.format``). Its first fault."""
    out = []
    for match in BRACED.finditer(text):
        token = match.group(0)
        slot = SLOT.fullmatch(token)
        if slot is not None:
            if slot.group(1) not in allowed:
                out.append(f"slot {token} is not a parameter")
        elif len(token) == 1:
            out.append(f"a lone {token!r}: braces are only for {{parameter}} placeholders")
        else:
            shown = token if len(token) <= 40 else token[:37] + "...}"
            out.append(f"placeholder {shown} is refused: write {{parameter}} alone (no attributes, indexes, "
                       "conversions or format specs)")
    return out[:1]  # the first fault of a message: one line to act on


def _reserved_name_problems(spec: DomainSpec) -> list[str]:
    """Tools and tables may not take a name the exported tau2 runtime uses itself (its package would not import)."""
    from domains.reserved import reserved_table_names, reserved_tool_names

    tools, tables = reserved_tool_names(), reserved_table_names()
    out = [f"tools[{i}].name: {t.name!r} is a name the exported tau2 toolkit uses itself; choose another"
           for i, t in enumerate(spec.tools) if t.name in tools]
    return out + [f"tables[{i}].name: {t.name!r} is a name of the exported tau2 DB model itself; choose another"
                  for i, t in enumerate(spec.tables) if t.name in tables]


def _candidates_problems(tool: Tool, guard: StatementGuard, reported: set[str]) -> list[str]:
    """Each candidates query must name at least one parameter among its columns (a typo would otherwise make
    it silently propose nothing). ``reported``: places already reported (a query that does not compile)."""
    out = []
    for k, sql in enumerate(tool.candidates):
        where = f".candidates[{k}]"
        if where in reported:
            continue
        used = set(SQL_PARAM.findall(sql))
        guard.enter(READ)
        try:
            names = [d[0] for d in guard.conn.execute(sql, {u: None for u in used}).description]
        except sqlite3.Error as exc:
            out.append(f"{where}: {_sql_message(str(exc))}")
            continue
        finally:
            guard.leave()
        if not set(names) & set(tool.param_names):
            out.append(f"{where}: none of its columns ({', '.join(names)}) is a parameter of the tool")
    return out


def _parameter_problems(tool: Tool, tables: dict[str, Table]) -> list[str]:
    """Date, datetime and e-mail parameters must declare their format, so the engine checks values strictly."""
    types = {c.name: c.type for t in tables.values() for c in t.columns}
    wanted = {"date": "date", "datetime": "date-time"}
    out = []
    for name, schema in tool.parameters.get("properties", {}).items():
        if not isinstance(schema, dict) or schema.get("type") != "string":
            continue
        need = wanted.get(types.get(name, ""))
        if need is None and "email" in name:
            need = "email"
        if need is not None and schema.get("format") != need:
            article = "an" if need[0] in "aeiou" else "a"
            out.append(f"{name}: {article} {need} parameter must declare format: {need} "
                       f"(values are then checked strictly)")
        fmt = schema.get("format")
        if fmt is not None and fmt not in KNOWN_FORMATS:
            out.append(f"{name}.format: unknown format {fmt!r}; known: {', '.join(sorted(KNOWN_FORMATS))}")
    return out


def double_quoted_problem(guard: StatementGuard, role: str, sql: str, params: dict[str, Any]) -> str | None:
    """SQLite reads a double-quoted name that is no column as a string literal; compile the statement again
    with every double-quoted name as a strict identifier ([name]) to find such names."""
    strict, names = _strict_identifiers(sql)
    if not names:
        return None
    try:
        guard.prepare(role, strict, params)
    except (sqlite3.Error, StatementRefused) as exc:
        missing = re.match(r"no such column: (.+)", str(exc))
        shown = f'"{missing.group(1)}"' if missing else ", ".join(f'"{n}"' for n in names)
        return (f"double-quoted {shown} names no column (SQLite would silently read it as a string); "
                f"write text in single quotes")
    return None


def _strict_identifiers(sql: str) -> tuple[str, list[str]]:
    """``sql`` with each "name" outside strings and comments written [name], and the names found."""
    out: list[str] = []
    names: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'`\"":
            j, text = i + 1, []
            while j < n:  # a doubled quote inside the token stands for one quote
                if sql[j] == ch and sql.startswith(ch * 2, j):
                    text.append(ch)
                    j += 2
                elif sql[j] == ch:
                    break
                else:
                    text.append(sql[j])
                    j += 1
            ident = "".join(text)
            if ch == '"' and "]" not in ident:
                names.append(ident)
                out.append(f"[{ident}]")
            else:
                out.append(sql[i:j + 1])
            i = j + 1
            continue
        if ch == "[":
            j = sql.find("]", i)
        elif sql.startswith("--", i):
            j = sql.find("\n", i) - 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2) + 1
        else:
            out.append(ch)
            i += 1
            continue
        j = n - 1 if j < i else j
        out.append(sql[i:j + 1])
        i = j + 1
    return "".join(out), names


def _sql_message(msg: str) -> str:
    m = re.match(r"no such column: (.+)", msg)
    if m:
        return f"unknown column {m.group(1)}"
    m = re.match(r"no such table: (.+)", msg)
    if m:
        return f"unknown table {m.group(1)}"
    return f"SQL does not compile: {msg}"


def _side_problems(spec: DomainSpec, tool: Tool, tables: dict[str, Table]) -> list[str]:
    """A tool reads and writes its own side's tables, and the other side's only where ``crosses`` names them:
    every statement is compiled under a guard that knows only those tables."""
    out = []
    for k, name in enumerate(tool.crosses):
        if name not in tables:
            out.append(f".crosses[{k}]: unknown table {name!r}")
        elif tables[name].side == tool.side:
            out.append(f".crosses[{k}]: {name} is a {tool.side} table already; crosses names the other side's tables")
    if out or not spec.dual:
        return out
    allowed = [t.name for t in spec.tables if t.side == tool.side or t.name in tool.crosses]
    db = sqlite3.connect(":memory:")
    install_geography_function(db)
    try:
        for stmt in schema_statements_for(spec):
            db.execute(stmt)
        guard = StatementGuard(db, allowed)
        statements = [(f".preconditions[{k}].sql", READ, p.sql) for k, p in enumerate(tool.preconditions)]
        statements += [(f".effects[{k}]", EFFECT, s) for k, s in enumerate(tool.effects)]
        statements.append((".returns.sql", READ, tool.returns_sql))
        for where, role, sql in statements:
            used = set(SQL_PARAM.findall(sql))
            try:
                guard.prepare(role, sql, {u: None for u in used})
            except StatementRefused as exc:
                out.append(f"{where}: a {tool.side} tool touches a table of the other side that crosses does not "
                           f"name ({exc})")
            except sqlite3.Error:
                pass  # reported by the general statement check
    except (sqlite3.Error, SpecError):
        pass
    finally:
        db.close()
    return out


def schema_statements_for(spec: DomainSpec) -> list[str]:
    from domains.ddl import schema_statements  # local: ddl imports this module's types

    return schema_statements(spec)


def _rule_ids(raw: Any) -> tuple[str, tuple[str, ...]]:
    """A precondition's ``rule``: one id, or a list of ids (the first kept as ``rule``, the rest as ``also``)."""
    ids = [str(i).strip() for i in (raw if isinstance(raw, list) else [raw]) if str(i).strip()]
    return (ids[0] if ids else ""), tuple(ids[1:])


def checked_rule_ids(tools: Any) -> frozenset[str]:
    """The rules some tool really checks: cited by a precondition the tool enforces (not a policy-only one)."""
    return frozenset(r for t in tools for p in t.preconditions if p.enforced_by == "tool" for r in p.rules)

