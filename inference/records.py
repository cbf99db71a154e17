"""One record per LLM call, and the batched write of a run's records into the warehouse table ``llm_calls``.

The warehouse has one writer: records are kept in memory and written in one transaction per flush through
``warehouse.writer.atomic_edit`` (preflight, lock, a copy of the file that replaces it atomically), so readers
never see a half-written batch and a failed flush changes nothing.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from warehouse.writer import atomic_edit

# what went wrong, in a few fixed words (the `error_kind` column)
ERROR_KINDS = ("rate_limited", "server_error", "client_error", "timeout", "connection", "malformed_json",
               "truncated", "budget_exceeded",
               # the answer broke a limit or a type (inference/replies.py); never retried, never cached
               "too_large", "too_deep", "too_long", "bad_usage", "bad_finish_reason", "bad_text", "bad_tool_call",
               "bad_encoding",
               # the request itself could not be sent (text that is not Unicode, a value JSON cannot hold)
               "invalid_request",
               # anything else that went wrong inside the client: a bug, recorded rather than raised
               "unexpected")
MAX_STORED_INT = 2**53  # larger counts are no real figure, and a BIGINT overflow would fail the whole flush


@dataclass(frozen=True)
class CallRecord:
    call_id: str
    run_id: str
    created_at: datetime
    endpoint: str
    model: str
    provider: str
    stage: str
    request_hash: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float
    cache_hit: bool
    attempts: int
    error_kind: str | None = None
    error_detail: str | None = None
    finish_reason: str | None = None
    snapshot_id: str | None = None
    task_id: str | None = None


@dataclass(frozen=True)
class StageOutcome:
    """What one run of an LLM stage produced: counts for ``llm_stage_runs``, refusals for ``llm_stage_rejections``."""

    run_id: str
    stage: str
    endpoint: str
    attempted: int
    accepted: int
    rejections: list[dict[str, str | None]]  # subject_id, reason, detail, output
    snapshot_id: str | None = None


def write_llm_calls(path: str | Path, records: list[CallRecord], outcomes: list[StageOutcome] | None = None) -> int:
    """Write ``records`` into ``llm_calls`` (and stage outcomes into their tables) in one transaction; rewriting a
    call_id (or a run's stage) replaces its rows. Returns the number of call rows written."""
    outcomes = outcomes or []
    if not records and not outcomes:
        return 0
    with atomic_edit(path) as con:
        _insert(con, "llm_calls", [_storable(asdict(r)) for r in records])
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        for o in outcomes:
            con.execute("DELETE FROM llm_stage_rejections WHERE run_id = ? AND stage = ?", [o.run_id, o.stage])
        _insert(con, "llm_stage_runs", [{
            "run_id": o.run_id, "stage": o.stage, "created_at": now, "endpoint": o.endpoint,
            "snapshot_id": o.snapshot_id, "attempted": o.attempted, "accepted": o.accepted,
            "acceptance_rate": o.accepted / o.attempted if o.attempted else 0.0,
            "rejection_reasons_json": json.dumps(Counter(r["reason"] for r in o.rejections), sort_keys=True)}
            for o in outcomes])
        _insert(con, "llm_stage_rejections", [_storable({"run_id": o.run_id, "stage": o.stage, **r})
                                              for o in outcomes for r in o.rejections])
    return len(records)


def _storable(row: dict[str, Any]) -> dict[str, Any]:
    """The row with every value the warehouse can hold, so that one odd value cannot fail the batch and lose the
    other rows: text as valid Unicode, counts within range (else 0, said in error_detail), costs finite or NULL."""
    out: dict[str, Any] = {}
    notes = []
    for name, value in row.items():
        if isinstance(value, str):
            value = value.encode("utf-8", "replace").decode("utf-8")
        elif isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int) and not -MAX_STORED_INT <= value <= MAX_STORED_INT:
            notes.append(f"{name} {str(value)[:24]} out of range, stored as 0")
            value = 0
        elif isinstance(value, float) and not math.isfinite(value):
            notes.append(f"{name} {value} not finite, stored as NULL")
            value = None
        out[name] = value
    if notes and "error_detail" in out:
        out["error_detail"] = "; ".join([*([out["error_detail"]] if out["error_detail"] else []), *notes])[:500]
    return out


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    """Bulk upsert through a DataFrame (table names are ours, never input)."""
    if not rows:
        return
    frame = pd.DataFrame(rows)
    cols = ", ".join(frame.columns)
    con.register("_incoming_rows", frame)
    try:
        con.execute(f"INSERT OR REPLACE INTO {table} ({cols}) SELECT {cols} FROM _incoming_rows")
    finally:
        con.unregister("_incoming_rows")
