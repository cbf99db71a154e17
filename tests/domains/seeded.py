"""What the invariant tests share: a private copy of a domain's seeded database, and an invariant broken by hand."""

from __future__ import annotations

import sqlite3
from typing import Any

from domains.ddl import schema_statements
from domains.geography import install_geography_function
from domains.invariants import violations
from domains.registry import get_engine
from domains.seeding import seed_tables
from domains.spec import DomainSpec, parse_spec


def seeded(domain: str, seed: int = 0) -> tuple[sqlite3.Connection, DomainSpec]:
    """A copy of the domain's database on ``seed``, with the geography functions its invariants may call."""
    engine = get_engine(domain, seed)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.deserialize(engine.image)
    install_geography_function(conn)
    return conn, engine.spec


def broken_by_hand(domain: str, invariant: str, key_sql: str, breaking: str) -> tuple[Any, list[Any]]:
    """On seed 0, where ``invariant`` holds: the key ``key_sql`` picks, and what the invariant reports once the
    ``breaking`` statement (``:key`` bound to it) has changed that row."""
    conn, spec = seeded(domain)
    assert violations(conn, spec)[invariant] == []
    row = conn.execute(key_sql).fetchone()
    assert row is not None and row[0] is not None, f"seed 0 of {domain} has no row to break for {invariant}"
    conn.execute(breaking, {"key": row[0]})
    return row[0], violations(conn, spec)[invariant]


def violated(domain: str, seed: int = 0) -> dict[str, list[Any]]:
    """The invariants the domain's seeded database breaks on ``seed``, with the keys of the rows that break them."""
    conn, spec = seeded(domain, seed)
    return {name: keys for name, keys in violations(conn, spec).items() if keys}


def seeded_raw(raw: dict[str, Any], label: str, seed: int = 0) -> tuple[sqlite3.Connection, DomainSpec]:
    """A small spec given as a dict, parsed and seeded (no invariant repair) into a database of its own."""
    spec = parse_spec(raw, label=label)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for stmt in schema_statements(spec):
        conn.execute(stmt)
    seed_tables(conn, spec, seed)
    return conn, spec
