"""An ``after`` recipe reads a parent's column that is itself filled late (a query), so it waits for it instead of
reading the placeholder; ``evenly`` draws up to the tightest bound instead of piling the overflow on it; and a late
column keeps its ``today_share``. This is how finance's payees are added after their account was opened."""

from __future__ import annotations

import copy
import sqlite3
from collections import Counter
from typing import Any

from domains.seeding import late_columns

from tests.domains.seeded import seeded_raw

# Accounts opened on a day a query reads from the account's own number (late: filled after every table), and payees
# added to them from the opening day on, never after today.
BANK: dict[str, Any] = {
    "domain": "bank", "description": "A bank whose payees are added to open accounts.", "now": "2025-09-15T10:00:00",
    "tables": [
        {"name": "accounts", "noun": "account", "rows": 20, "primary_key": "account_id", "columns": [
            {"name": "account_id", "type": "text", "seed": {"kind": "sequence", "prefix": "AC", "width": 2}},
            {"name": "opened_on", "type": "date", "seed": {"kind": "query", "sql":
                "SELECT date('2025-09-01', '-' || (CAST(substr(:account_id, 3) AS INTEGER) * 20) || ' days')"}}]},
        {"name": "payees", "noun": "payee", "rows": 400, "primary_key": "payee_id", "columns": [
            {"name": "payee_id", "type": "text", "seed": {"kind": "sequence", "prefix": "PY", "width": 3}},
            {"name": "account_id", "type": "text", "references": "accounts.account_id", "seed": {"kind": "reference"}},
            {"name": "added_on", "type": "date", "seed": {"kind": "after", "of": "account_id.opened_on", "min": 0,
                                                           "max": 900, "until": "now"}}]},
    ],
    "tools": [{"name": "get_payee", "description": "Return one payee with its account and the day it was added.",
               "kind": "read", "entity": "payees",
               "parameters": {"type": "object", "properties": {"payee_id": {"type": "string"}}, "required": ["payee_id"]},
               "returns": {"sql": "SELECT * FROM payees WHERE payee_id = :payee_id"}}],
    "utterances": {"get_payee": ["look up {payee_id}"]},
}


def _bank(**added_on: Any) -> tuple[sqlite3.Connection, Any]:
    raw = copy.deepcopy(BANK)
    raw["tables"][1]["columns"][2]["seed"].update(added_on)
    return seeded_raw(raw, "bank.yaml")


def _added(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute("SELECT p.added_on, a.opened_on FROM payees p JOIN accounts a USING (account_id)").fetchall()


def test_a_path_to_a_parents_late_column_is_late_and_reads_the_filled_value() -> None:
    conn, spec = _bank()
    assert late_columns(spec, spec.table("payees")) == {"added_on"}
    rows = _added(conn)
    # the placeholder (2000-01-01) would put every payee 25 years before its account opened and clamp none to today
    assert all(opened <= added <= "2025-09-15" for added, opened in rows)
    assert min(opened for _, opened in rows) < "2025-01-01"


def test_evenly_draws_up_to_the_bound_where_a_clamp_piles_rows_on_it() -> None:
    clamped = Counter(added for added, _ in _added(_bank()[0]))
    even = Counter(added for added, _ in _added(_bank(evenly=True)[0]))
    # min..900 days after accounts opened 20-400 days ago: most draws pass today, and the clamp sets them all to it
    assert clamped["2025-09-15"] > 200
    assert even["2025-09-15"] < 20
    assert len(even) > 3 * len(clamped) / 2


def test_a_late_column_keeps_its_share_on_the_clocks_day() -> None:
    conn, _ = _bank(evenly=True, today_share=0.25)
    today = sum(added == "2025-09-15" for added, _ in _added(conn))
    assert 70 <= today <= 130  # a quarter of 400, give or take
