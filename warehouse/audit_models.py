"""The ``snapshot_audit`` table: per snapshot and domain, the realism figures of the published tasks.

Written inside the publish step (before the quality gate reads it) by ``write_audit``; ``toolscale audit``
and the gate read it back. Defined as a SQLModel model like the rest of the schema.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pandas as pd
from sqlalchemy import Double
from sqlmodel import Field, SQLModel

from synthesis.realism_audit import AUDIT_COLUMNS, aggregate


class SnapshotAudit(SQLModel, table=True):
    __tablename__ = "snapshot_audit"
    snapshot_id: str = Field(primary_key=True)
    domain: str = Field(primary_key=True)
    converted: bool  # the domain's spec declares users and intents: its figures are gated, else reported
    tasks: int
    identified_share: float = Field(sa_type=Double)
    policy_hinged_share: float = Field(sa_type=Double)
    forbidden_share: float = Field(sa_type=Double)
    staff_only_calls: int
    requests_naming_internal_ids: int
    invariants: int = 0  # invariants the domain's spec declares (facts its seeded data and gold end states keep)
    invariant_violations: int
    noop_writes: int
    empty_passes: int
    parrot_passes: int
    short_communicate: int
    communicate_in_request: int
    underivable_arguments: int = 0  # tasks with a gold value that has no source (verifiers/derivability.py)
    top_opening_share: float = Field(sa_type=Double)
    top_opening: str
    distinct_bigrams: int
    distinct_personas: int
    # wording slips in the requests (gate: each 0)
    greeting_clock_contradictions: int
    doubled_words: int
    doubled_joiners: int
    plural_slips: int
    lowercased_names: int
    # request clauses as said, record values replaced by '{}': distinct patterns of all clauses, and the top one's share
    clause_skeletons: int
    request_clauses: int
    top_skeleton_share: float = Field(sa_type=Double)
    top_skeleton: str
    write_share: float = Field(sa_type=Double)  # share whose gold writes something (gate: at least 70%)
    refuse_all_share: float = Field(sa_type=Double)  # share refusing everything asked (gate: at most 10%)
    unwritten_rule_decisions: int = 0  # decisions citing no rule of the written policy; the gate wants 0


# columns added after warehouses were created (``create_all`` adds tables, never columns): name -> DuckDB type
ADDED_COLUMNS = {"greeting_clock_contradictions": "INTEGER", "doubled_words": "INTEGER",
                 "doubled_joiners": "INTEGER", "plural_slips": "INTEGER", "lowercased_names": "INTEGER",
                 "clause_skeletons": "INTEGER", "request_clauses": "INTEGER", "top_skeleton_share": "DOUBLE",
                 "top_skeleton": "VARCHAR", "write_share": "DOUBLE", "refuse_all_share": "DOUBLE",
                 "unwritten_rule_decisions": "INTEGER DEFAULT 0",
                 "underivable_arguments": "INTEGER DEFAULT 0", "invariants": "INTEGER DEFAULT 0"}


def add_missing_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Bring an older warehouse's ``snapshot_audit`` up to the model (older snapshots' rows read NULL there)."""
    for name, sql_type in ADDED_COLUMNS.items():
        con.execute(f"ALTER TABLE snapshot_audit ADD COLUMN IF NOT EXISTS {name} {sql_type}")


def audit_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One audit row per domain from a snapshot's accepted records (those carry per-task figures)."""
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["accepted"] and r.get("realism"):
            by_domain.setdefault(r["domain"], []).append(r)
    return [aggregate(d, [r["realism"] for r in rs], [r.get("request") or "" for r in rs])
            for d, rs in sorted(by_domain.items())]


def write_audit(con: duckdb.DuckDBPyConnection, snapshot_id: str, rows: list[dict[str, Any]]) -> None:
    """Replace the snapshot's audit rows (a retried publish may have written some)."""
    con.execute("DELETE FROM snapshot_audit WHERE snapshot_id = ?", [snapshot_id])
    if not rows:
        return
    frame = pd.DataFrame([{"snapshot_id": snapshot_id, **{c: r[c] for c in AUDIT_COLUMNS}} for r in rows])
    con.register("_audit_rows", frame)
    try:
        cols = ", ".join(frame.columns)
        con.execute(f"INSERT INTO snapshot_audit ({cols}) SELECT {cols} FROM _audit_rows")
    finally:
        con.unregister("_audit_rows")


def read_audit(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> list[dict[str, Any]]:
    """The stored audit rows of a snapshot (empty when it predates the table)."""
    if not con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'snapshot_audit'").fetchone():
        return []
    frame = con.execute("SELECT * FROM snapshot_audit WHERE snapshot_id = ? ORDER BY domain", [snapshot_id]).df()
    # a figure added after the snapshot was written (or a file never migrated) reads as None
    return [{c: _plain(row.get(c)) for c in AUDIT_COLUMNS} for _, row in frame.iterrows()]


def _plain(value: Any) -> Any:
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value
