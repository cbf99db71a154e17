"""Cross-row invariants: count the rows that break them, and repair seeded data by resampling those rows.

An invariant is SQL returning the primary keys of the violating rows of one table. Seeding keeps them by
redrawing the columns the invariant names in ``resample`` (and every later formula or lookup column of the
row, which may depend on them) until the row complies; no per-domain code.
"""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from domains.seeding import CONTEXT_KINDS, FILTERS, Formula, SeedContext, draw
from domains.geography import install_geography_function
from domains.spec import DomainSpec, SpecError, Table

ROUNDS = 60  # redraws per violating row before giving up (the audit then reports what is left)
MAX_REPAIR_ROWS = 1_000  # seeded rows one invariant may need redrawn; more means the recipe ignores the rule
PASSES = 3  # a repair for one invariant may break another; sweep them all again


def violations(conn: sqlite3.Connection, spec: DomainSpec) -> dict[str, list[Any]]:
    """invariant name -> keys of the rows violating it (empty lists included)."""
    install_geography_function(conn)
    return {inv.name: [r[0] for r in conn.execute(inv.sql, {"now": spec.now}).fetchall()] for inv in spec.invariants}


def violation_counts(conn: sqlite3.Connection, spec: DomainSpec) -> dict[str, int]:
    return {name: len(keys) for name, keys in violations(conn, spec).items()}


def repair_invariants(conn: sqlite3.Connection, spec: DomainSpec, seed: int) -> dict[str, int]:
    """Resample violating rows in place; returns what is still violated (name -> rows). A redraw is kept
    only once the row breaks no invariant of its table, so two rules on one column cannot undo each other."""
    install_geography_function(conn)
    for _ in range(PASSES):
        clean = True
        for inv in spec.invariants:
            if not inv.resample:
                continue
            table = spec.table(inv.table)
            siblings = [i for i in spec.invariants if i.table == inv.table]
            broken = [r[0] for r in conn.execute(inv.sql, {"now": spec.now}).fetchall()]
            if len(broken) > MAX_REPAIR_ROWS:  # each redraw re-runs the table's invariants: bound the work
                raise SpecError([f"{spec.name}: invariants: {inv.name} is broken by {len(broken):,} seeded rows of {inv.table}; "
                                 f"at most {MAX_REPAIR_ROWS:,} may need a redraw (make the seed recipes keep "
                                 "the rule)"])
            for key in broken:
                clean = False
                for attempt in range(ROUNDS):
                    rng = random.Random(f"{seed}:repair:{inv.name}:{key}:{attempt}")
                    _redraw(conn, spec, table, key, inv.resample, rng)
                    if not any(key in {r[0] for r in conn.execute(i.sql, {"now": spec.now})} for i in siblings):
                        break
        if clean:
            break
    return {k: v for k, v in violation_counts(conn, spec).items() if v}


def _redraw(conn: sqlite3.Connection, spec: DomainSpec, table: Table, key: Any, resample: tuple[str, ...],
            rng: random.Random) -> None:
    cur = conn.execute(f"SELECT * FROM {table.name} WHERE {table.primary_key} = ?", (key,))
    names = [d[0] for d in cur.description]
    found = cur.fetchone()
    if found is None:
        return
    row: dict[str, Any] = dict(zip(names, found))
    first = min(i for i, c in enumerate(table.columns) if c.name in resample)
    changed: list[str] = []
    for col in table.columns[first:]:
        kind = col.seed["kind"]
        if col.name not in resample and kind not in ("formula", "lookup", *CONTEXT_KINDS):
            continue
        if kind == "sequence" or (kind == "reference" and (col.name not in resample or col.seed.get("unique"))):
            continue
        context = SeedContext(conn, spec, table, [row])
        if kind == "reference" and FILTERS & col.seed.keys():
            # a filtered foreign key is redrawn among the parents its recipe admits, counting the other rows' uses
            used = dict(conn.execute(f"SELECT {col.name}, COUNT(*) FROM {table.name} WHERE {table.primary_key} != ? "
                                     f"GROUP BY {col.name}", (key,)).fetchall())
            options = context.reference_options(col, row, used)
            value = rng.choice(options) if options else row[col.name]
        elif kind == "reference":
            # a named foreign key is redrawn from its parent table's keys, as seeding draws it
            assert col.references is not None
            parents = [r[0] for r in conn.execute(
                f"SELECT {col.references[1]} FROM {col.references[0]} ORDER BY {col.references[1]}")]
            value = rng.choice(parents) if parents else row[col.name]
        elif kind == "place" and col.seed.get("same"):
            value = row[col.name]  # one place for the whole table: a redraw would leave it
        elif kind in CONTEXT_KINDS:
            value = context.value(col, row, rng)
        elif kind == "formula":
            value = Formula(col.seed["expr"])(row, rng, spec.now)
        elif kind == "lookup":
            via = table.column(col.seed["via"])
            assert via is not None and via.references is not None
            parent = spec.table(via.references[0])
            got = conn.execute(f"SELECT {col.seed['column']} FROM {parent.name} WHERE {parent.primary_key} = ?",
                               (row[via.name],)).fetchone()
            value = got[0] if got else None
        else:
            value = draw(col.seed, rng)
        if col.type == "boolean" and value is not None:
            value = 1 if value in (True, 1, "true", "yes") else 0
        row[col.name] = value
        changed.append(col.name)
    if not changed:
        return
    assignments = ", ".join(f"{c} = :{c}" for c in changed)
    try:
        conn.execute(f"UPDATE {table.name} SET {assignments} WHERE {table.primary_key} = :__key",
                     {**{c: row[c] for c in changed}, "__key": key})
    except sqlite3.IntegrityError:
        pass  # e.g. a unique column drew a taken value; the next round draws again
