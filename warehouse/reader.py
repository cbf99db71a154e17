"""Read-only access to the warehouse: what data scientists, exports and the CLI use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from domains.engine import ToolCall
from warehouse.checks import check_readable, first_line
from warehouse.errors import WarehouseError

__all__ = ["WarehouseError", "connect_readonly", "gold_calls", "list_snapshots", "published_meta", "resolve_snapshot",
           "task_contracts"]


def connect_readonly(path: str | Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection to a healthy warehouse; a missing, truncated or foreign file is a ``WarehouseError``."""
    target = check_readable(path)
    try:
        return duckdb.connect(str(target), read_only=True)
    except duckdb.Error as exc:
        raise WarehouseError(f"warehouse {path} cannot be opened: {first_line(exc)}") from exc


def resolve_snapshot(con: duckdb.DuckDBPyConnection, snapshot: str) -> str:
    """A snapshot id, or ``latest`` for the latest published snapshot."""
    if snapshot == "latest":
        row = con.execute("SELECT snapshot_id FROM snapshots WHERE status = 'published' "
                          "ORDER BY created_at DESC, snapshot_id DESC LIMIT 1").fetchone()
        if row is None:
            raise WarehouseError("the warehouse has no published snapshot yet")
        return str(row[0])
    row = con.execute("SELECT snapshot_id, status FROM snapshots WHERE snapshot_id = ?", [snapshot]).fetchone()
    if row is None:
        raise WarehouseError(f"no snapshot {snapshot!r} in the warehouse")
    return str(row[0])


def published_meta(con: duckdb.DuckDBPyConnection, snapshot: str) -> dict[str, Any]:
    """The ``snapshots`` row of a published snapshot (id or ``latest``); any other status is a ``WarehouseError``."""
    sid = resolve_snapshot(con, snapshot)
    cur = con.execute("SELECT * FROM snapshots WHERE snapshot_id = ?", [sid])
    meta = dict(zip([d[0] for d in cur.description], cur.fetchone() or ()))
    if meta["status"] != "published":
        raise WarehouseError(f"snapshot {sid} is {meta['status']}, not published; only published snapshots export")
    return meta


def check_domains_known(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> None:
    """Refuse a snapshot holding a domain this process cannot load (a user's own, without ``--domains-dir``)."""
    from domains.registry import available_domains  # local: the reader is used where no domain is loaded

    held = [str(d) for (d,) in con.execute("SELECT DISTINCT domain FROM domains WHERE snapshot_id = ? ORDER BY 1",
                                           [snapshot_id]).fetchall()]
    unknown = [d for d in held if d not in set(available_domains())]
    if unknown:
        raise WarehouseError(f"snapshot {snapshot_id} holds domain {unknown[0]!r}, whose spec is not known here; "
                             "pass --domains-dir with the folder that holds it (or set $TOOLSCALE_DOMAINS_DIR)")


def list_snapshots(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every snapshot, newest first, with its headline figures."""
    rows = con.execute(
        "SELECT snapshot_id, parent_id, created_at, status, tasks, candidates, gold_errors, noop_passes,"
        " median_kill_rate, evolved_fraction, yield_rate, seconds, code_version, config_hash, summary_json"
        " FROM snapshots ORDER BY created_at DESC, snapshot_id DESC").fetchall()
    out = []
    for (sid, parent, created, status, tasks, candidates, gold_errors, noop, kill, evolved, yield_rate, seconds,
         code, config_hash, summary) in rows:
        s = json.loads(summary or "{}")
        out.append({"snapshot_id": sid, "parent_id": parent, "created_at": str(created), "status": status,
                    "tasks": tasks, "candidates": candidates, "per_domain": s.get("per_domain", {}),
                    "gold_errors": gold_errors, "noop_passes": noop, "median_kill_rate": kill,
                    "evolved_fraction": evolved, "yield": yield_rate, "seconds": seconds,
                    "rejection_reasons": s.get("rejection_reasons", {}), "code_version": code,
                    "config_hash": config_hash})
    return out


def gold_calls(con: duckdb.DuckDBPyConnection, snapshot_id: str,
               task_id: str | None = None) -> dict[str, list[ToolCall]]:
    """Each task's gold calls in order (one task's with ``task_id``), each with its side: a user call of a
    dual-control task has side "user"; a warehouse written before sides were stored has agent calls only."""
    columns = {r[0] for r in con.execute("DESCRIBE gold_calls").fetchall()}
    side = "side" if "side" in columns else "NULL AS side"
    where, params = "snapshot_id = ?", [snapshot_id]
    if task_id is not None:
        where, params = where + " AND task_id = ?", params + [task_id]
    out: dict[str, list[ToolCall]] = {}
    for tid, name, args, who in con.execute(f"SELECT task_id, name, arguments_json, {side} FROM gold_calls "
                                            f"WHERE {where} ORDER BY task_id, position", params).fetchall():
        out.setdefault(tid, []).append(ToolCall(name, json.loads(args), who or "agent"))
    return out


def task_contracts(con: duckdb.DuckDBPyConnection, snapshot_id: str) -> dict[str, dict[str, Any]]:
    """Each task's stored verification contract (``VerifiableTask.contract``); {} for a warehouse or snapshot
    written before contracts were stored (its tasks are judged with every check and no user)."""
    columns = {r[0] for r in con.execute("DESCRIBE tasks").fetchall()}
    if "verification_json" not in columns:
        return {}
    return {task_id: json.loads(text) for task_id, text in con.execute(
        "SELECT task_id, verification_json FROM tasks WHERE snapshot_id = ? AND verification_json IS NOT NULL",
        [snapshot_id]).fetchall()}
