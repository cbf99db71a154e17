"""Write and read the evaluation tables (``warehouse/eval_models.py``): LLM-tool trials and descriptions, and
orchestrator evaluation runs with their episodes.

Writes go through ``atomic_edit`` (the writer lock, a private copy, one transaction, one atomic replace), so a
reader never sees half a run and a failed write loses nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.eval_models import ADDED_DESCRIPTION_COLUMNS
from warehouse.writer import atomic_edit
from warehouse.errors import WarehouseError
from warehouse.reader import connect_readonly
from warehouse.writer import _insert


@dataclass
class DescribeRows:
    trials: list[dict[str, Any]] = field(default_factory=list)
    descriptions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EvalRows:
    run: dict[str, Any]
    episodes: list[dict[str, Any]]


def store_describe(path: str | Path, rows: DescribeRows) -> None:
    with atomic_edit(path) as con:
        for name, sql_type in ADDED_DESCRIPTION_COLUMNS.items():
            con.execute(f"ALTER TABLE llm_tool_descriptions ADD COLUMN IF NOT EXISTS {name} {sql_type}")
        _insert(con, "llm_tool_trials", rows.trials)
        _insert(con, "llm_tool_descriptions", rows.descriptions)


def store_eval(path: str | Path, rows: EvalRows) -> None:
    with atomic_edit(path) as con:
        _insert(con, "eval_runs", [rows.run])
        _insert(con, "eval_episodes", rows.episodes)


def _has_table(con: Any, name: str) -> bool:
    return con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [name]).fetchone() is not None


def current_descriptions(path: str | Path) -> dict[str, dict[str, Any]]:
    """Per endpoint, its latest *described* row (an unreachable or failed attempt never replaces it)."""
    if not Path(path).exists():
        return {}
    con = connect_readonly(path)
    try:
        if not _has_table(con, "llm_tool_descriptions"):
            return {}
        cur = con.execute(
            "SELECT * EXCLUDE (n) FROM ("
            " SELECT *, row_number() OVER (PARTITION BY endpoint ORDER BY created_at DESC, run_id DESC) AS n"
            " FROM llm_tool_descriptions WHERE status = 'described') WHERE n = 1 ORDER BY endpoint")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()
    # a warehouse written before evidence_json existed has no such column: its descriptions have no evidence
    return {r["endpoint"]: {"endpoint": r["endpoint"], "run_id": r["run_id"], "created_at": r["created_at"],
                            "model": r["model"], "description": r["description"],
                            "evidence_trial_ids": json.loads(r["evidence_trial_ids_json"]),
                            "evidence": json.loads(r["evidence_json"]) if r.get("evidence_json") else None}
            for r in rows}


def eval_run_episodes(path: str | Path, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One stored evaluation run and its episodes (features decoded); ``WarehouseError`` naming the run when absent."""
    con = connect_readonly(path)
    try:
        if not _has_table(con, "eval_runs"):
            raise WarehouseError(f"no evaluation run {run_id!r}: {path} has no eval_runs table")
        cur = con.execute("SELECT * FROM eval_runs WHERE run_id = ?", [run_id])
        row = cur.fetchone()
        if row is None:
            raise WarehouseError(f"no evaluation run {run_id!r} in {path}")
        run = dict(zip([d[0] for d in cur.description], row))
        cur = con.execute("SELECT * FROM eval_episodes WHERE run_id = ? ORDER BY task_id", [run_id])
        names = [d[0] for d in cur.description]
        episodes = [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()
    for e in episodes:
        e["features"] = json.loads(e["features_json"])
        e["tool_calls"] = json.loads(e["tool_calls_json"])
    return run, episodes
