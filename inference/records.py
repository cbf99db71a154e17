"""One record per LLM call, and the batched write of a run's records into the warehouse table ``llm_calls``.

The warehouse has one writer: records are kept in memory and written in one transaction per flush, under the
warehouse's writer lock, into a copy of the file that replaces it atomically (as warehouse/writer.py does), so
readers never see a half-written batch and a failed flush changes nothing.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import pandas as pd

from warehouse.schema import ensure_schema
from warehouse.writer import writer_lock

# what went wrong, in a few fixed words (the `error_kind` column)
ERROR_KINDS = ("rate_limited", "server_error", "client_error", "timeout", "connection", "malformed_json",
               "truncated", "budget_exceeded")


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


def write_llm_calls(path: str | Path, records: list[CallRecord]) -> int:
    """Write ``records`` into ``llm_calls`` in one transaction; rewriting a call_id replaces its row. Returns the
    number of rows written."""
    if not records:
        return 0
    path = Path(path)
    with writer_lock(path):
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        tmp.unlink(missing_ok=True)
        try:
            if path.exists():
                shutil.copyfile(path, tmp)
            ensure_schema(tmp)
            con = duckdb.connect(str(tmp))
            try:
                frame = pd.DataFrame([asdict(r) for r in records])
                cols = ", ".join(frame.columns)
                con.register("_incoming_calls", frame)
                con.execute("BEGIN")
                con.execute(f"INSERT OR REPLACE INTO llm_calls ({cols}) SELECT {cols} FROM _incoming_calls")
                con.execute("COMMIT")
                con.execute("CHECKPOINT")
            finally:
                con.close()
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return len(records)
