"""SQL DDL for a domain: tables with keys, enums and foreign keys, plus the audit triggers.

Identifiers come from a validated spec (``^[a-z][a-z0-9_]*$``); literal enum values are quoted by doubling.
Values supplied by callers never reach this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from domains.spec import DomainSpec, Table

SQL_TYPES = {"text": "TEXT", "integer": "INTEGER", "real": "REAL", "boolean": "INTEGER",
             "date": "TEXT", "datetime": "TEXT"}
AUDIT_TABLE = "_audit"


def quote_literal(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def table_statement(table: Table) -> str:
    lines = []
    for c in table.columns:
        parts = [c.name, SQL_TYPES[c.type]]
        if c.name == table.primary_key:
            parts.append("PRIMARY KEY")
        elif not c.nullable:
            parts.append("NOT NULL")
        if c.unique and c.name != table.primary_key:
            parts.append("UNIQUE")
        if c.enum is not None:
            parts.append(f"CHECK ({c.name} IN ({', '.join(quote_literal(v) for v in c.enum)}))")
        if c.type == "boolean":
            parts.append(f"CHECK ({c.name} IN (0, 1))")
        if c.references:
            parts.append(f"REFERENCES {c.references[0]}({c.references[1]})")
        lines.append(" ".join(parts))
    return f"CREATE TABLE {table.name} (\n  " + ",\n  ".join(lines) + "\n)"


def audit_statements(table: Table) -> list[str]:
    """Triggers that record every written row's key in the audit table."""
    t, pk = table.name, table.primary_key
    return [
        f"CREATE TRIGGER _aud_{t}_ins AFTER INSERT ON {t} BEGIN "
        f"INSERT INTO {AUDIT_TABLE}(tbl, pk, op) VALUES ('{t}', NEW.{pk}, 'insert'); END",
        f"CREATE TRIGGER _aud_{t}_upd AFTER UPDATE ON {t} BEGIN "
        f"INSERT INTO {AUDIT_TABLE}(tbl, pk, op) VALUES ('{t}', NEW.{pk}, 'update'); END",
        f"CREATE TRIGGER _aud_{t}_del AFTER DELETE ON {t} BEGIN "
        f"INSERT INTO {AUDIT_TABLE}(tbl, pk, op) VALUES ('{t}', OLD.{pk}, 'delete'); END",
    ]


def schema_statements(spec: DomainSpec) -> list[str]:
    """Tables in dependency order, then an index per foreign-key column (joins and FK checks use them)."""
    stmts = [table_statement(t) for t in spec.seed_order()]
    stmts += [f"CREATE INDEX ix_{t.name}_{c.name} ON {t.name}({c.name})"
              for t in spec.tables for c in t.columns if c.references]
    return stmts


def audit_schema(spec: DomainSpec) -> list[str]:
    """The audit table and its triggers; created after seeding so seed rows are not recorded."""
    stmts = [f"CREATE TABLE {AUDIT_TABLE} (tbl TEXT NOT NULL, pk, op TEXT NOT NULL)"]
    for t in spec.tables:
        stmts += audit_statements(t)
    return stmts
