"""SQLite-level guards for spec SQL: what each statement's role may touch, and a budget for every statement.

The authorizer is installed once per connection and consults the current role, because SQLite asks it only
while a statement is prepared (changing the authorizer would expire every cached statement). A statement text
has one role (reads start with SELECT/WITH, effects with INSERT/UPDATE/DELETE), so a cached statement was
authorised under the role it runs in. The budget counts virtual-machine steps with a progress handler, so a
runaway ``WITH RECURSIVE`` becomes an error instead of a hang; the count is deterministic, unlike a clock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

ENGINE, READ, EFFECT = "engine", "read", "effect"  # ENGINE: the engine's own statements, unrestricted
TICK_STEPS = 1_000  # VM steps between two progress-handler calls
STATEMENT_BUDGET_TICKS = 10_000  # 10 million steps (~0.3 s); the shipped domains' largest tool statement uses
# under 2,000 steps, and a full scan of a 100,000-row table about 3 million
MAX_VALUE_BYTES = 1_000_000  # SQLITE_LIMIT_LENGTH: no string or blob (e.g. zeroblob(1e9)) larger than this
# table-valued JSON functions spec SQL may read (array parameters arrive as JSON text); registered once per
# connection by the engine itself, so their use never touches sqlite_master under a spec role
JSON_TABLES = ("json_each", "json_tree")
DENIED_FUNCTIONS = {"random", "randomblob", "load_extension", "changes", "total_changes", "last_insert_rowid"}
_WRITES = {sqlite3.SQLITE_INSERT: "INSERT", sqlite3.SQLITE_UPDATE: "UPDATE", sqlite3.SQLITE_DELETE: "DELETE"}
_ACTION_NAMES = {getattr(sqlite3, n): n.removeprefix("SQLITE_").replace("_", " ")
                 for n in dir(sqlite3) if n.startswith("SQLITE_") and n.isupper()
                 and isinstance(getattr(sqlite3, n), int) and n not in ("SQLITE_OK", "SQLITE_DENY", "SQLITE_IGNORE")
                 and not n.startswith("SQLITE_LIMIT") and not n.startswith("SQLITE_DBCONFIG")}


class StatementRefused(Exception):
    """A spec statement was refused by the authorizer or ran past its budget; the message says which."""


class StatementGuard:
    """Installs the role authorizer, the step budget and the value-size limit on one connection."""

    def __init__(self, conn: sqlite3.Connection, tables: Iterable[str], audit_table: str = "_audit",
                 budget_ticks: int = STATEMENT_BUDGET_TICKS):
        self.conn = conn
        self.tables = frozenset(tables)
        self.audit_table = audit_table
        self.budget_ticks = budget_ticks
        self.role = ENGINE
        self.ticks = 0
        self.denied: str | None = None
        for name in JSON_TABLES:
            conn.execute(f"SELECT * FROM {name}('[]')").fetchall()
        conn.set_authorizer(self._authorize)
        conn.set_progress_handler(self._tick, TICK_STEPS)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, db_name: str | None,
                   inner: str | None) -> int:
        if self.role == ENGINE:
            return sqlite3.SQLITE_OK
        problem = self._problem(action, arg1, arg2, db_name, inner)
        if problem is None:
            return sqlite3.SQLITE_OK
        self.denied = problem
        return sqlite3.SQLITE_DENY

    def _problem(self, action: int, arg1: str | None, arg2: str | None, db_name: str | None,
                 inner: str | None) -> str | None:
        """Why the action is refused under the current role, or None. ``inner`` is the trigger or CTE the
        action comes from; ``db_name`` is None for a CTE or subquery, which are not schema tables."""
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
            return None
        if (arg1 or "").lower().startswith("sqlite_") and action in (sqlite3.SQLITE_READ, *_WRITES):
            # a pragma_* function first registers itself in sqlite_master, so it is refused here
            return (f"it uses SQLite's own table {arg1} (PRAGMA functions and the schema tables are not "
                    f"allowed in spec SQL)")
        if action == sqlite3.SQLITE_READ:
            name = (arg1 or "").lower()
            if arg1 in self.tables or arg1 in JSON_TABLES or (db_name is None and name != self.audit_table
                                       and not name.startswith(("sqlite_", "pragma_"))):
                return None
            return f"it reads {arg1!r}, which is not a table of the domain"
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() in DENIED_FUNCTIONS:
                return f"it calls {arg2}(), which spec SQL may not use (not deterministic or not safe)"
            return None
        if action == sqlite3.SQLITE_PRAGMA:
            return f"it uses PRAGMA {arg1} (PRAGMA statements and pragma_* functions are not allowed in spec SQL)"
        if action in _WRITES:
            if self.role == READ:
                return f"a read statement may not write ({_WRITES[action]} on {arg1})"
            if arg1 in self.tables or (arg1 == self.audit_table and (inner or "").startswith("_aud_")):
                return None
            return f"it writes {arg1!r}, which is not a table of the domain"
        return f"{_ACTION_NAMES.get(action, f'action {action}')} is not allowed in spec SQL"

    def _tick(self) -> int:
        if self.role == ENGINE:
            return 0
        self.ticks += 1
        return 1 if self.ticks > self.budget_ticks else 0

    def enter(self, role: str) -> None:
        """The next statement runs under ``role`` with a fresh budget (call ``leave`` when done)."""
        self.role, self.ticks, self.denied = role, 0, None

    def leave(self) -> None:
        self.role = ENGINE

    def run(self, role: str, sql: str, params: dict[str, Any] | tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Execute one statement under ``role`` and fetch every row; raises ``StatementRefused`` with a
        readable reason, other sqlite3 errors unchanged."""
        self.enter(role)
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self.refusal(exc) or exc
        finally:
            self.leave()

    def prepare(self, role: str, sql: str, params: dict[str, Any]) -> None:
        """Compile ``sql`` under ``role`` without running it (the static check at spec load)."""
        self.role, self.denied = role, None
        try:
            self.conn.execute("EXPLAIN " + sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self.refusal(exc) or exc
        finally:
            self.role = ENGINE

    def refusal(self, exc: sqlite3.DatabaseError) -> StatementRefused | None:
        """The readable reason for an error this guard caused (authorizer, budget, size), else None."""
        message = str(exc)
        if self.denied is not None and ("not authorized" in message or "prohibited" in message):
            return StatementRefused(f"refused: {self.denied or exc}")
        if self.ticks > self.budget_ticks and "interrupted" in message:
            return StatementRefused(f"statement exceeded its budget of {self.budget_ticks * TICK_STEPS:,} "
                                    f"SQLite steps (a runaway WITH RECURSIVE or a join that is far too large?)")
        if "string or blob too big" in message:
            return StatementRefused(f"a value exceeded the limit of {MAX_VALUE_BYTES:,} bytes")
        return None
