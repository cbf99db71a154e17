"""Deterministic seed values: providers, distributions, references, lookups and formulas.

Every column draws from its own ``random.Random`` keyed by (seed, table, column), so adding a column never
shifts the values of another, and the same (spec, seed) gives the same rows on every machine.
"""

from __future__ import annotations

import ast
import math
import random
import re
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from domains.arguments import iso_problem

if TYPE_CHECKING:
    from domains.spec import Column, DomainSpec, Table

MAX_SEED_TEXT = 2_000  # characters in one seeded text value; the shipped domains stay under 200
MAX_FORMULA_ITEMS = 100_000  # characters or items a formula's '*' may build before the value check sees it
INT64 = (-(2**63), 2**63 - 1)

FIRST = ("Ada Alan Amara Anna Arjun Ben Bianca Carlos Chen Chloe Dana David Diego Elena Emil Fatima Felix Grace "
         "Hana Hugo Ines Ivan Jade Jonas Julia Kai Karim Laila Leo Lucia Maya Mateo Mei Nadia Noah Olga Omar "
         "Paula Priya Quinn Rafael Rosa Sami Sara Tariq Tess Uma Victor Wen Yara Yusuf Zoe Liam Nora Theo Iris "
         "Pablo Lena Marco Sofia Aiden Freya").split()
# the first names above that are women's names, so that a row can say a person's gender from their name (a girls'
# team holds girls); every other name in FIRST is a man's
FEMALE_FIRST = frozenset(("Ada Amara Anna Bianca Chloe Dana Elena Fatima Grace Hana Ines Jade Julia Laila Lucia Maya Mei "
                          "Nadia Olga Paula Priya Quinn Rosa Sara Tess Uma Wen Yara Zoe Nora Iris Lena Sofia Freya").split())
LAST = ("Smith Garcia Chen Novak Okafor Rossi Silva Kim Nguyen Patel Müller Dubois Jensen Kowalski Tanaka Haddad "
        "Costa Ivanova Brown Moreau Larsen Schmidt Santos Ali Cohen Fischer Lopez Murphy Sato Yilmaz Weber Rahman "
        "Bauer Ortiz Berg Hughes Petrov Mendes Quinn Abara Lindqvist Park Russo Varga Walsh Zhou Evans Keller "
        "Horvat Nakamura").split()
CITIES = ("Lisbon Porto Madrid Lyon Turin Vienna Prague Krakow Berlin Hamburg Munich Zurich Geneva Milan Naples "
          "Seville Valencia Bordeaux Marseille Brussels Antwerp Utrecht Rotterdam Copenhagen Oslo Stockholm "
          "Helsinki Tallinn Riga Vilnius Warsaw Budapest Ljubljana Zagreb Athens Dublin Cork Edinburgh Glasgow "
          "Leeds Bristol Nantes Toulouse Bologna Florence Bilbao Graz Salzburg Gdansk Bergen").split()
COUNTRIES = ("Portugal Spain France Italy Austria Czechia Poland Germany Switzerland Belgium Netherlands Denmark "
             "Norway Sweden Finland Estonia Latvia Lithuania Hungary Slovenia Croatia Greece Ireland").split()
STREETS = "Oak Maple Harbor Mill Station Church River Park Market Garden Hill Bridge Castle Elm Cedar".split()
STREET_KINDS = "Street Avenue Road Lane Way Square".split()
ADJECTIVES = ("Silver Golden Quiet Bright Northern Hidden Royal Little Blue Green Red Wild Ancient Modern Lucky "
              "Swift Grand Urban Crystal Iron Coastal Misty Sunny Velvet Bold").split()
NOUNS = ("River Harbor Garden Falcon Lantern Meadow Summit Orchard Anchor Comet Forest Bridge Atlas Harvest "
         "Compass Beacon Canyon Island Spark Willow Tiger Pine Stone Echo Horizon").split()
COMPANY_SUFFIX = "Ltd Group Partners Labs Works Holdings Co Systems".split()
WORDS = ("account update service quality schedule delivery support request review balance ticket booking "
         "change refund payment order visit record report notice plan").split()
COLORS = "red blue green black white silver grey yellow orange purple navy beige".split()
JOBS = ("engineer teacher nurse accountant designer chef analyst pharmacist driver architect lawyer "
        "technician consultant writer manager").split()


def _full_name(r: random.Random) -> str:
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def _email(r: random.Random) -> str:
    return f"{r.choice(FIRST).lower()}.{r.choice(LAST).lower()}{r.randint(1, 999)}@example.com".replace("ü", "u")


PROVIDERS: dict[str, Callable[[random.Random], Any]] = {
    "first_name": lambda r: r.choice(FIRST),
    "last_name": lambda r: r.choice(LAST),
    "full_name": _full_name,
    "email": _email,
    "phone": lambda r: f"+1-{r.randint(200, 989)}-{r.randint(200, 989)}-{r.randint(1000, 9999)}",
    "city": lambda r: r.choice(CITIES),
    "country": lambda r: r.choice(COUNTRIES),
    "street_address": lambda r: f"{r.randint(1, 250)} {r.choice(STREETS)} {r.choice(STREET_KINDS)}",
    "company": lambda r: f"{r.choice(ADJECTIVES)} {r.choice(NOUNS)} {r.choice(COMPANY_SUFFIX)}",
    "title": lambda r: f"The {r.choice(ADJECTIVES)} {r.choice(NOUNS)}",
    "two_words": lambda r: f"{r.choice(ADJECTIVES)} {r.choice(NOUNS)}",
    "word": lambda r: r.choice(WORDS),
    "sentence": lambda r: " ".join(r.choice(WORDS) for _ in range(r.randint(4, 8))).capitalize() + ".",
    "color": lambda r: r.choice(COLORS),
    "job_title": lambda r: r.choice(JOBS),
    "license_plate": lambda r: f"{r.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}{r.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}-{r.randint(100, 999)}",
    "iban": lambda r: f"PT50{r.randint(10**16, 10**17 - 1)}",
    "code": lambda r: "".join(r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6)),
}


def _date_add(value: str, days: float) -> str:
    return (date.fromisoformat(value[:10]) + timedelta(days=int(days))).isoformat()


def _datetime_add(value: str, minutes: float) -> str:
    return (datetime.fromisoformat(value) + timedelta(minutes=int(minutes))).isoformat(timespec="seconds")


def _date_of(value: str) -> str:
    return value[:10]


def _weekday(value: str) -> int:
    """0 for Monday .. 6 for Sunday: fixtures and lessons keep to the week's rhythm."""
    return date.fromisoformat(value[:10]).weekday()


def gender_of(first_name: str) -> str:
    """'female' or 'male' for a first name of FIRST (a name outside it is refused, not guessed)."""
    if first_name not in FIRST:
        raise ValueError(f"gender_of: {first_name!r} is not one of the seeding first names")
    return "female" if first_name in FEMALE_FIRST else "male"


def email_from(full_name: str, number: int) -> str:
    """An e-mail address that matches its owner's name: 'Ana Müller', 7 -> 'ana.muller7@example.com'."""
    local = ".".join(full_name.lower().split()).replace("ü", "u").replace("ö", "o").replace("é", "e")
    return f"{local}{number}@example.com"


_SAFE_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Call, ast.Compare,
               ast.IfExp, ast.BoolOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod, ast.FloorDiv, ast.USub,
               ast.UAdd, ast.Not, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
               ast.In, ast.NotIn, ast.Tuple, ast.List)
FORMULA_FUNCS = {"round", "min", "max", "abs", "int", "float", "str", "lower", "upper", "date_add",
                 "datetime_add", "date_of", "randint", "uniform", "choice", "email_from", "geography",
                 "great_circle_km", "phone_for", "iban_for", "weekday", "gender_of"}


def _parse_formula(expr: str) -> ast.Expression:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"formula {expr!r} is not a valid expression: {exc.msg}") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _SAFE_NODES):
            raise ValueError(f"formula {expr!r} uses {type(node).__name__}, which formulas do not allow")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FORMULA_FUNCS):
            raise ValueError(f"formula {expr!r} calls an unknown function; allowed: {', '.join(sorted(FORMULA_FUNCS))}")
    return tree


def formula_names(expr: str) -> set[str]:
    """Column names a formula reads (raises ValueError if the formula is not allowed); ``now``, the domain's
    clock, is not a column."""
    tree = _parse_formula(expr)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called - {"now"}


def _bounded_mul(a: Any, b: Any) -> Any:
    """'*' in a formula: refuse products that would build a huge string, list or number before they exist."""
    for seq, n in ((a, b), (b, a)):
        if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * max(n, 0) > MAX_FORMULA_ITEMS:
            raise ValueError(f"the formula builds a value of {len(seq) * n:,} items (limit {MAX_FORMULA_ITEMS:,})")
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > 256:
        raise ValueError("the formula builds a number far outside the 64-bit range")
    return a * b


class _MulToCall(ast.NodeTransformer):
    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult):
            return ast.copy_location(ast.Call(ast.Name("_mul", ast.Load()), [node.left, node.right], []), node)
        return node


class Formula:
    """A compiled, sandboxed formula over the columns of one row."""

    def __init__(self, expr: str):
        tree = ast.fix_missing_locations(_MulToCall().visit(_parse_formula(expr)))
        self.code = compile(tree, "<formula>", "eval")

    def __call__(self, row: dict[str, Any], rng: random.Random, now: str | None = None) -> Any:
        from domains import geography

        env: dict[str, Any] = {"now": now,
            "round": round, "min": min, "max": max, "abs": abs, "int": int, "float": float, "str": str,
            "lower": str.lower, "upper": str.upper, "date_add": _date_add, "datetime_add": _datetime_add,
            "date_of": _date_of, "weekday": _weekday, "email_from": email_from, "gender_of": gender_of, "randint": rng.randint,
            "choice": lambda *xs: rng.choice(xs), "uniform": lambda a, b: round(rng.uniform(a, b), 2),
            "_mul": _bounded_mul, "geography": geography.field_of, "great_circle_km": geography.great_circle_km,
            "phone_for": lambda key: geography.phone_for(key, rng), "iban_for": lambda key: geography.iban_for(key, rng),
        }
        env.update(row)
        return eval(self.code, {"__builtins__": {}}, env)  # noqa: S307 - AST whitelisted above


def _random_date(r: random.Random, start: str, end: str) -> str:
    a, b = date.fromisoformat(start), date.fromisoformat(end)
    return (a + timedelta(days=r.randint(0, (b - a).days))).isoformat()


def _random_datetime(r: random.Random, start: str, end: str, step: int) -> str:
    a, b = datetime.fromisoformat(start), datetime.fromisoformat(end)
    steps = int((b - a).total_seconds() // 60 // step)
    return (a + timedelta(minutes=step * r.randint(0, steps))).isoformat(timespec="seconds")


def sequence_value(recipe: dict[str, Any], col_type: str, index: int) -> Any:
    n = recipe.get("start", 1) + index
    if col_type == "integer":
        return n
    return f"{recipe.get('prefix', '')}{n:0{recipe.get('width', 4)}d}"


def draw(recipe: dict[str, Any], r: random.Random) -> Any:
    """One value for the distribution-like recipes (provider, choice, uniform, randint, normal, date, ...)."""
    kind = recipe["kind"]
    if kind == "provider":
        if r.random() < recipe.get("null_rate", 0.0):
            return None
        return PROVIDERS[recipe["provider"]](r)
    if kind == "choice":
        return r.choices(recipe["values"], weights=recipe.get("weights"))[0]
    if kind == "uniform":
        return round(r.uniform(recipe["min"], recipe["max"]), recipe.get("decimals", 2))
    if kind == "randint":
        return r.randint(recipe["min"], recipe["max"])
    if kind == "normal":
        v = r.gauss(recipe["mean"], recipe["std"])
        v = max(recipe.get("min", v), min(recipe.get("max", v), v))
        return round(v, recipe.get("decimals", 2))
    if kind == "date":
        return _random_date(r, recipe["start"], recipe["end"])
    if kind == "datetime":
        return _random_datetime(r, recipe["start"], recipe["end"], recipe.get("step_minutes", 15))
    if kind == "constant":
        return recipe["value"]
    raise ValueError(f"recipe kind {kind!r} is not a plain draw")


def value_problem(col: Column, value: Any) -> str | None:
    """Why ``value`` cannot be stored in ``col`` (type, range, size, enum), or None. Nulls are judged by the
    caller, which knows whether the column may hold them."""
    if value is None:
        return None
    kind = col.type
    if kind == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        return f"{_show(value)} is not an integer"
    if kind == "integer" and not INT64[0] <= value <= INT64[1]:
        return f"{_show(value)} is outside SQLite's 64-bit integer range"
    if kind == "real" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        return f"{_show(value)} is not a number"
    if kind == "real" and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if kind == "boolean" and value not in (True, False) or kind == "boolean" and isinstance(value, float):
        return f"{_show(value)} is not a boolean (true/false)"
    if kind in ("text", "date", "datetime") and not isinstance(value, str):
        return f"{_show(value)} is not text"
    if isinstance(value, str) and len(value) > MAX_SEED_TEXT:
        return f"a text value of {len(value):,} characters (limit {MAX_SEED_TEXT:,})"
    if kind in ("date", "datetime"):
        return iso_problem(value, kind)
    if col.enum is not None and value not in col.enum:
        return f"{_show(value)} is not one of the column's enum values"
    return None


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) or len(value) < 40 else repr(value[:37]) + "..."
    return f"{text} ({type(value).__name__})" if not isinstance(value, str) else text


SEED_ERRORS = (ArithmeticError, ValueError, TypeError, KeyError, IndexError, AttributeError, NameError,
               RecursionError, MemoryError, sqlite3.Error)


def seed_tables(conn: sqlite3.Connection, spec: DomainSpec, seed: int) -> None:
    """Insert every table's seed rows; any failure is a ``SpecError`` naming the table and column.

    Tables are seeded parents first. Columns that read rows seeded later (``query``, ``after``/``before`` of a
    back-reference, and formulas over them) are stored as placeholders and filled in a second pass, once every
    table holds its rows."""
    from domains.geography import install_geography_function
    from domains.spec import SpecError

    install_geography_function(conn)  # filtered references and queries may read the map (great_circle_km)
    values: dict[str, list[dict[str, Any]]] = {}
    conn.execute("BEGIN")
    try:
        for table in spec.seed_order():
            ti = spec.tables.index(table)
            rows = _seed_rows(conn, table, ti, values, seed, spec)
            values[table.name] = rows
            cols = [c.name for c in table.columns]
            try:
                conn.executemany(f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                 [tuple(r[c] for c in cols) for r in rows])
            except SEED_ERRORS as exc:
                raise SpecError([f"{spec.path}: {_insert_where(table, ti, exc)}: the seed rows cannot be stored: "
                                 f"{type(exc).__name__}: {_clip(str(exc))}"]) from None
        for table in spec.seed_order():
            _seed_late_columns(conn, spec, table, values[table.name], seed)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _insert_where(table: Table, ti: int, exc: BaseException) -> str:
    """The column an insert error names ("UNIQUE constraint failed: t.c"), else the table."""
    for ci, col in enumerate(table.columns):
        if re.search(rf"\b{table.name}\.{col.name}\b|\({col.name} IN\b|\b{col.name} IN \(", str(exc)):
            return f"tables[{ti}].columns[{ci}] ({col.name})"
    return f"tables[{ti}] ({table.name})"


def _clip(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."


def _seed_rows(conn: sqlite3.Connection, table: Table, ti: int, done: dict[str, list[dict[str, Any]]], seed: int,
               spec: DomainSpec) -> list[dict[str, Any]]:
    from domains.spec import SpecError

    rows: list[dict[str, Any]] = [{} for _ in range(table.rows)]
    if table.source is not None:
        rows = _external_rows(table, ti, spec)
    by_key = {name: {r[spec.table(name).primary_key]: r for r in rs} for name, rs in done.items()}
    late = late_columns(spec, table)
    for ci, col in enumerate(table.columns):
        where = f"{spec.path}: tables[{ti}].columns[{ci}] ({col.name})"
        if col.seed["kind"] == "field":
            continue  # filled from the external records above
        if col.name in late:
            for r in rows:
                r[col.name] = placeholder(col)
            continue
        try:
            context = SeedContext(conn, spec, table, rows)
            problem = _seed_column(table, col, rows, done, by_key, seed, context)
        except SEED_ERRORS as exc:
            raise SpecError([f"{where}: seeding failed: {type(exc).__name__}: {_clip(str(exc))}"]) from None
        if problem:
            raise SpecError([f"{where}: {problem}"])
    return rows


def _external_rows(table: Table, ti: int, spec: DomainSpec) -> list[dict[str, Any]]:
    """Rows of a ``from:`` table: its ``field`` columns read from the external records, checked like any value."""
    from domains import external
    from domains.spec import SpecError

    assert table.source is not None
    try:
        data = external.load(spec.sources[table.source.source])
        found = external.records(data, table.source)
    except (ValueError, OSError) as exc:
        if isinstance(exc, external.ExternalDataMissing):
            raise
        raise SpecError([f"{spec.path}: tables[{ti}] ({table.name}): external records unreadable: {_clip(str(exc))}"]) from None
    rows: list[dict[str, Any]] = []
    for i, record in enumerate(found):
        row: dict[str, Any] = {}
        for ci, col in enumerate(table.columns):
            if col.seed["kind"] != "field":
                continue
            v = external.field_value(record, col.seed)
            problem = value_problem(col, v) or (None if v is not None or col.nullable else "no value (null)")
            if problem:
                raise SpecError([f"{spec.path}: tables[{ti}].columns[{ci}] ({col.name}): record {i} "
                                 f"({_show(record.key)}): {problem} (column type {col.type})"])
            row[col.name] = (1 if v else 0) if col.type == "boolean" and v is not None else v
        rows.append(row)
    return rows


def _seed_column(table: Table, col: Column, rows: list[dict[str, Any]], done: dict[str, list[dict[str, Any]]],
                 by_key: dict[str, dict[Any, dict[str, Any]]], seed: int, context: SeedContext) -> str | None:
    """Fill one column of every row; return the first problem with a produced value, or None."""
    rng = random.Random(f"{seed}:{table.name}:{col.name}")
    recipe = col.seed
    kind = recipe["kind"]
    if kind == "reference" and FILTERS & recipe.keys():
        picks = context.filtered_references(col, rows, rng)
        for r, v in zip(rows, picks):
            r[col.name] = v
        return _null_problem(table, col, picks)
    if kind == "reference":
        assert col.references is not None
        parents = [r[col.references[1]] for r in done.get(col.references[0], rows)]
        if recipe.get("unique"):
            picks = rng.sample(parents, k=min(len(parents), table.rows)) + [None] * max(0, table.rows - len(parents))
        else:
            picks = [None if rng.random() < recipe.get("null_rate", 0.0) else rng.choice(parents) for _ in rows]
        for r, v in zip(rows, picks):
            r[col.name] = v
        return _null_problem(table, col, picks)
    formula = Formula(recipe["expr"]) if kind == "formula" else None
    seen: set[Any] = set()
    once = context.value(col, rows[0], rng) if kind == "place" and recipe.get("same") and rows else None
    # a share moved to the clock's day draws from its own stream, so the other values stay as they were
    today = random.Random(f"{seed}:{table.name}:{col.name}:today") if recipe.get("today_share") else None
    for i, r in enumerate(rows):
        if kind in CONTEXT_KINDS:
            v = once if once is not None else context.value(col, r, rng)
            for _ in range(50):
                if once is not None or not col.unique or v not in seen:
                    break
                v = context.value(col, r, rng)
        elif kind == "sequence":
            v = sequence_value(recipe, col.type, i)
        elif kind == "lookup":
            via = table.column(recipe["via"])
            assert via is not None and via.references is not None
            parent = by_key.get(via.references[0], {}).get(r[via.name])
            v = None if parent is None else parent[recipe["column"]]
        elif formula is not None:
            v = formula(r, rng, context.spec.now)
            for _ in range(50):  # a formula that draws (randint, choice) may be drawn again
                if not col.unique or v not in seen:
                    break
                v = formula(r, rng, context.spec.now)
        else:
            v = draw(recipe, rng)
            for attempt in range(50):
                if not col.unique or v not in seen:
                    break
                v = draw(recipe, rng) if attempt < 40 else f"{v} {i}"
        v = _on_today(v, today, recipe, context.spec.now)
        problem = value_problem(col, v)
        if problem:
            return f"row {i}: {problem} (column type {col.type})"
        if col.type == "boolean" and v is not None:
            v = 1 if v else 0
        if col.unique and v is not None and v in seen:
            return f"row {i}: the value {_show(v)} repeats in a unique column (the recipe has too few distinct values)"
        seen.add(v)
        r[col.name] = v
    return _null_problem(table, col, [r[col.name] for r in rows])


def _null_problem(table: Table, col: Column, values: list[Any]) -> str | None:
    if col.nullable and col.name != table.primary_key:
        return None
    nulls = [i for i, v in enumerate(values) if v is None]
    if nulls:
        return f"row {nulls[0]}: no value (null) in a column that is not nullable ({len(nulls)} row(s))"
    return None


# Recipes that read other rows or the geography table: a path names a value reachable from the row being seeded.
# "placed_at" is a column of the row, "trip_id.created_on" a column of the row its foreign key references (hops
# chain), and "orders(payment_id).placed_at" a column of the first row of orders whose payment_id is this row.
CONTEXT_KINDS = {"after", "before", "place", "query", "distance"}
UNIT_MINUTES = {"minutes": 1, "hours": 60, "days": 1440}
DATE_LITERAL = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2})?$")  # a bound may be a fixed date
PATH_STEP = re.compile(r"^([a-z][a-z0-9_]*)(?:\(([a-z][a-z0-9_]*)\))?$")
FILTERS = {"where", "at_most", "spread"}  # the keys that make a reference a filtered one
QUERY_BUDGET_STEPS = 10_000_000  # SQLite steps one seed query may take (as for tool statements)


@dataclass(frozen=True)
class Hop:
    table: str  # the table the hop reaches
    column: str  # forward: the foreign key of the current row; back: the key column of ``table`` naming it
    back: bool


def parse_path(spec: DomainSpec, table: Table, path: str) -> tuple[tuple[Hop, ...], str]:
    """The hops and final column of a path from a row of ``table``; ValueError names what does not resolve."""
    steps = path.split(".")
    hops: list[Hop] = []
    current = table
    for step in steps[:-1]:
        m = PATH_STEP.match(step)
        if m is None:
            raise ValueError(f"path {path!r}: {step!r} is neither a column nor table(column)")
        name, back_key = m.groups()
        if back_key is not None:
            other = next((t for t in spec.tables if t.name == name), None)
            col = other.column(back_key) if other else None
            if other is None or col is None or col.references != (current.name, current.primary_key):
                raise ValueError(f"path {path!r}: {step!r} needs a table {name} whose {back_key} references "
                                 f"{current.name}.{current.primary_key}")
            hops.append(Hop(other.name, back_key, True))
            current = other
        else:
            col = current.column(name)
            if col is None or col.references is None:
                raise ValueError(f"path {path!r}: {name!r} is not a foreign-key column of {current.name}")
            target = next((t for t in spec.tables if t.name == col.references[0]), None)
            if target is None:  # the spec names a missing table; its own check reports that
                raise ValueError(f"path {path!r}: {name!r} references {col.references[0]}, which is not a table")
            hops.append(Hop(col.references[0], name, False))
            current = target
    if current.column(steps[-1]) is None:
        raise ValueError(f"path {path!r}: {current.name} has no column {steps[-1]!r}")
    return tuple(hops), steps[-1]


def recipe_paths(recipe: dict[str, Any]) -> list[str]:
    """The paths a context recipe reads (``now`` is the clock, not a path)."""
    keys = {"after": ("of", "until"), "before": ("of", "since"), "place": ("of", "in"),
            "distance": ("from", "to")}.get(recipe["kind"], ())
    paths = [p for k in keys if k in recipe for p in ([recipe[k]] if isinstance(recipe[k], str) else recipe[k])]
    return [p for p in paths if p != "now" and not DATE_LITERAL.match(p)]


def late_columns(spec: DomainSpec, table: Table, _seen: frozenset[str] = frozenset()) -> set[str]:
    """Columns filled after every table is seeded: queries, paths through a back-reference or to a late column
    of the row a foreign key names (filled first, as parents are), and the formulas that read such columns."""
    late: set[str] = set()
    for col in table.columns:
        kind = col.seed["kind"]
        if kind == "query":
            late.add(col.name)
        elif kind in CONTEXT_KINDS:
            for path in recipe_paths(col.seed):
                hops, last = parse_path(spec, table, path)
                if any(h.back for h in hops) or (not hops and last in late) or (
                        hops and hops[-1].table not in _seen | {table.name}
                        and last in late_columns(spec, spec.table(hops[-1].table), _seen | {table.name})):
                    late.add(col.name)
        elif kind == "formula" and formula_names(col.seed["expr"]) & late:
            late.add(col.name)
    return late


def placeholder(col: Column) -> Any:
    """A value a late column holds until the second pass fills it (it satisfies the column's constraints)."""
    if col.enum is not None:
        return col.enum[0]
    return {"integer": 0, "real": 0.0, "boolean": 0, "date": "2000-01-01",
            "datetime": "2000-01-01T00:00:00"}.get(col.type, "")


def _as_datetime(value: Any) -> datetime:
    return datetime.fromisoformat(str(value)) if "T" in str(value) else datetime.fromisoformat(str(value)[:10])


def _formatted(col: Column, moment: datetime) -> str:
    return moment.date().isoformat() if col.type == "date" else moment.isoformat(timespec="seconds")


class SeedContext:
    """What context recipes read while one table is seeded: the database so far, the spec and the clock."""

    def __init__(self, conn: sqlite3.Connection, spec: DomainSpec, table: Table, rows: list[dict[str, Any]]):
        self.conn, self.spec, self.table, self.rows = conn, spec, table, rows
        self._capacities: dict[str, dict[Any, int]] = {}  # a spread column's parent sizes, read once per column

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
        cur = self.conn.execute(sql, params)
        found = cur.fetchone()
        return None if found is None else dict(zip([d[0] for d in cur.description], found))

    def resolve(self, path: str, row: dict[str, Any]) -> Any:
        """The value ``path`` names from ``row`` (None where a hop finds no row)."""
        if path == "now":
            return self.spec.now
        if DATE_LITERAL.match(path):
            return path
        hops, last = parse_path(self.spec, self.table, path)
        current: dict[str, Any] | None = row
        table = self.table
        for hop in hops:
            assert current is not None
            target = self.spec.table(hop.table)
            if hop.back:
                current = self._fetch(f"SELECT * FROM {target.name} WHERE {hop.column} = ? "
                                      f"ORDER BY {target.primary_key} LIMIT 1", (current[table.primary_key],))
            else:
                current = self._fetch(f"SELECT * FROM {target.name} WHERE {target.primary_key} = ?",
                                      (current[hop.column],))
            if current is None:
                return None
            table = target
        return current.get(last)

    def value(self, col: Column, row: dict[str, Any], rng: random.Random) -> Any:
        """One value of a context recipe (after, before, place, query) for ``row``."""
        recipe = col.seed
        kind = recipe["kind"]
        if kind in ("after", "before"):
            return self._shifted(col, row, rng)
        if kind == "place":
            return self._place(recipe, row, rng)
        if kind == "distance":
            return self._distance(recipe, row)
        return self._query(recipe["sql"], row)

    def _distance(self, recipe: dict[str, Any], row: dict[str, Any]) -> int | None:
        """The great-circle distance between the places two paths name, times ``factor`` (a route's detour),
        in whole km; the same both ways."""
        from domains import geography

        km = geography.great_circle_km(self.resolve(recipe["from"], row), self.resolve(recipe["to"], row))
        return None if km is None else int(round(km * recipe.get("factor", 1.0)))

    def _shifted(self, col: Column, row: dict[str, Any], rng: random.Random) -> Any:
        recipe = col.seed
        anchor = self.resolve(recipe["of"], row)
        if anchor is None:
            return draw(recipe["otherwise"], rng) if "otherwise" in recipe else None
        base = _as_datetime(anchor)
        step = timedelta(minutes=UNIT_MINUTES[recipe.get("unit", "days")])
        sign = 1 if recipe["kind"] == "after" else -1
        bound_paths = recipe.get("until" if sign > 0 else "since", [])
        bounds = [self.resolve(p, row) for p in ([bound_paths] if isinstance(bound_paths, str) else bound_paths)]
        limits = [_as_datetime(b) for b in bounds if b is not None]
        low, high = recipe.get("min", 0), recipe["max"]
        if limits and recipe.get("evenly"):  # drawn evenly up to the tightest bound: nothing piles up on it
            room = (min(limits) - base if sign > 0 else base - max(limits)) // step
            high = max(low, min(high, int(room)))
        moment = base + sign * rng.randint(low, high) * step
        if limits:  # the tightest bound wins; an anchor already past it is kept (the bound cannot be met)
            moment = max(base, min(moment, *limits)) if sign > 0 else min(base, max(moment, *limits))
        return _formatted(col, moment)

    def _place(self, recipe: dict[str, Any], row: dict[str, Any], rng: random.Random) -> Any:
        from domains import geography

        field = recipe["field"]
        place = geography.place_of(str(self.resolve(recipe["of"], row))) if "of" in recipe else None
        if place is None:  # no path, or one that finds no row: a place drawn like any other
            if "of" in recipe and field not in geography.GENERATED:
                return None
            where = dict(recipe.get("where", {}))
            if "in" in recipe:
                where["country"] = self.resolve(recipe["in"], row)
            options = geography.matching(where)
            if not options:
                raise ValueError(f"no place in the geography table has {where}")
            place = rng.choice(options)
        if field in geography.GENERATED:
            return geography.generated(field, place, rng)
        value = place.get(field)
        if "plus" in recipe:  # a site near the place: a station some metres above its town
            value = int(round(value)) + rng.randint(*recipe["plus"])
        return value

    def _bounded(self, sql: str, row: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Rows of a spec-written read, ``:name`` bound to the row's columns and ``:now``, within a step budget
        (an interrupted statement is a seeding error naming the column)."""
        names = set(re.findall(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)", sql))
        params = {n: self.spec.now if n == "now" else row.get(n) for n in names}
        steps = [0]

        def budget() -> int:
            steps[0] += 1000
            return 1 if steps[0] > QUERY_BUDGET_STEPS else 0

        self.conn.set_progress_handler(budget, 1000)
        try:
            return self.conn.execute(sql, params).fetchall()
        finally:
            self.conn.set_progress_handler(None, 1000)

    def _query(self, sql: str, row: dict[str, Any]) -> Any:
        found = self._bounded(sql, row)
        return found[0][0] if found else None

    def reference_options(self, col: Column, row: dict[str, Any], used: dict[Any, int],
                          where: str | None = None) -> list[Any]:
        """The parent keys a filtered reference may take for ``row``: those ``where`` admits (bound to the
        row's earlier columns and :now), less the parents already used ``at_most`` times; where none is left,
        those ``fallback`` admits. With ``spread``, the admitted parents used fewer times than their spread
        column, or every admitted parent where all are."""
        assert col.references is not None
        recipe = col.seed if where is None else {"where": where, **({"at_most": col.seed["at_most"]}
                                                                     if "at_most" in col.seed else {})}
        parent = self.spec.table(col.references[0])
        where = recipe.get("where") or "1"
        options = [r[0] for r in self._bounded(
            f"SELECT {parent.primary_key} FROM {parent.name} WHERE ({where}) ORDER BY {parent.primary_key}", row)]
        if "at_most" in recipe:
            options = [k for k in options if used.get(k, 0) < recipe["at_most"]]
        if not options and "fallback" in recipe:  # none the where admits is left: those the fallback admits
            options = self.reference_options(col, row, used, recipe["fallback"])
        if "spread" in recipe:
            room = self.capacities(col)
            options = [k for k in options if used.get(k, 0) < room.get(k, 0)] or options
        return options

    def capacities(self, col: Column) -> dict[Any, int]:
        """Each parent's value of the column a ``spread`` reference names (how many rows it takes)."""
        assert col.references is not None
        if col.name not in self._capacities:  # the parent table is complete before this one is seeded
            parent = self.spec.table(col.references[0])
            self._capacities[col.name] = {k: int(v or 0) for k, v in self.conn.execute(
                f"SELECT {parent.primary_key}, {col.seed['spread']} FROM {parent.name}")}
        return self._capacities[col.name]

    def filtered_references(self, col: Column, rows: list[dict[str, Any]], rng: random.Random) -> list[Any]:
        """A filtered reference for every row (``where``, ``at_most``, ``spread``); None where no parent fits.
        Each row draws as an unfiltered reference does and draws again among the admitted parents only when its
        first pick is not admitted, so adding a filter changes only the rows that broke it. A ``spread``
        reference instead draws among the admitted parents with room left against its spread column, weighted by
        that room (``counts_if``: only rows where that formula holds take room), so the rows fill the parents in
        proportion to it: players over teams by squad size."""
        assert col.references is not None
        parent = self.spec.table(col.references[0])
        every = [r[0] for r in self.conn.execute(f"SELECT {parent.primary_key} FROM {parent.name} ORDER BY rowid")]
        room = self.capacities(col) if "spread" in col.seed else {}
        counts = Formula(col.seed["counts_if"]) if "counts_if" in col.seed else None
        used: dict[Any, int] = {}
        picks: list[Any] = []
        for row in rows:
            if rng.random() < col.seed.get("null_rate", 0.0) or not every:
                picks.append(None)
                continue
            pick = rng.choice(every)
            counted = counts is None or bool(counts(row, rng, self.spec.now))
            if room and not counted:  # a row that takes no room falls anywhere, in proportion to the column
                options = self.reference_options(col, row, {})
                pick = rng.choices(options, weights=[room.get(k, 0) for k in options])[0] if options else None
                picks.append(pick)
                continue
            options = self.reference_options(col, row, used) or self._regroup(col, row, rows, used, rng)
            if room and options:
                pick = _spread_pick(options, room, used, rng)
            elif pick not in options:
                pick = rng.choice(options) if options else None
            if pick is not None:
                used[pick] = used.get(pick, 0) + 1
            picks.append(pick)
        return picks


    def _regroup(self, col: Column, row: dict[str, Any], rows: list[dict[str, Any]], used: dict[Any, int],
                 rng: random.Random) -> list[Any]:
        """Where no parent is left for ``row`` in the group an earlier ``spread`` reference chose (no member left
        whom the chosen team fits), move the row to the next group it finds a parent in, least full first; the
        options found, or none where no group has one."""
        index = self.table.columns.index(col)
        groups = [c for c in self.table.columns[:index] if c.seed["kind"] == "reference" and "spread" in c.seed]
        if not groups:
            return []
        group = groups[-1]
        room = self.capacities(group)
        counts = Formula(group.seed["counts_if"]) if "counts_if" in group.seed else None
        tried = {row[group.name]}
        while True:
            taken = Counter(r.get(group.name) for r in rows if counts is None or counts(r, rng, self.spec.now))
            candidates = [k for k in self.reference_options(group, row, {}) if k not in tried]  # full ones too
            if not candidates:
                return []
            row[group.name] = _spread_pick(candidates, room, taken, rng)
            tried.add(row[group.name])
            options = self.reference_options(col, row, used)
            if options:
                return options


def _spread_pick(options: list[Any], room: dict[Any, int], used: dict[Any, int], rng: random.Random) -> Any:
    """A ``spread`` reference's parent: one with room left, drawn by how much (so the rows fill the parents in
    proportion to their column, and by chance some fill up), or the least full where every one is full."""
    free = [max(room.get(k, 0) - used.get(k, 0), 0) for k in options]
    if any(free):
        return rng.choices(options, weights=free)[0]
    fill = {k: used.get(k, 0) / max(room.get(k, 0), 1) for k in options}
    return rng.choice([k for k in options if fill[k] == min(fill.values())])


def _on_today(value: Any, today: random.Random | None, recipe: dict[str, Any], now: str) -> Any:
    """The value moved to the clock's day (same time of day) for the recipe's ``today_share`` of rows."""
    if today is not None and isinstance(value, str) and today.random() < recipe["today_share"]:
        return now[:10] + value[10:]
    return value


def _seed_late_columns(conn: sqlite3.Connection, spec: DomainSpec, table: Table, rows: list[dict[str, Any]],
                       seed: int) -> None:
    """Fill the late columns of a stored table, in column order, and write them back."""
    from domains.spec import SpecError

    late = late_columns(spec, table)
    if not late:
        return
    ti = spec.tables.index(table)
    context = SeedContext(conn, spec, table, rows)
    for ci, col in enumerate(table.columns):
        if col.name not in late:
            continue
        rng = random.Random(f"{seed}:{table.name}:{col.name}")
        today = random.Random(f"{seed}:{table.name}:{col.name}:today") if col.seed.get("today_share") else None
        formula = Formula(col.seed["expr"]) if col.seed["kind"] == "formula" else None
        for i, r in enumerate(rows):
            try:
                v = formula(r, rng, spec.now) if formula is not None else context.value(col, r, rng)
                v = _on_today(v, today, col.seed, spec.now)
            except SEED_ERRORS as exc:
                raise SpecError([f"{spec.path}: tables[{ti}].columns[{ci}] ({col.name}): seeding failed: "
                                 f"{type(exc).__name__}: {_clip(str(exc))}"]) from None
            problem = value_problem(col, v) or (None if v is not None or col.nullable else "no value (null)")
            if problem:
                raise SpecError([f"{spec.path}: tables[{ti}].columns[{ci}] ({col.name}): row {i}: {problem} "
                                 f"(column type {col.type})"])
            r[col.name] = (1 if v else 0) if col.type == "boolean" and v is not None else v
    names = [c.name for c in table.columns if c.name in late]
    conn.executemany(f"UPDATE {table.name} SET {', '.join(f'{n} = ?' for n in names)} WHERE {table.primary_key} = ?",
                     [tuple(r[n] for n in names) + (r[table.primary_key],) for r in rows])
