"""Write training runs and their steps into the warehouse (through the single writer), and read them back.

Every write copies the warehouse file (``writer.atomic_edit``), so callers batch: one write when a run
starts, one per checkpoint and one at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from warehouse.writer import atomic_edit
from warehouse.reader import connect_readonly
from warehouse.writer import _insert


def _has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [table]).fetchone() is not None


def store_training(path: str | Path, run: dict[str, Any], steps: list[dict[str, Any]]) -> None:
    """Replace the ``training_runs`` row of ``run['run_id']`` and upsert ``steps``.

    A step already stored keeps its row unless the new one knows its seconds (a step recorded by an attempt that
    was killed is not measured again after a resume)."""
    run_id = run["run_id"]
    with atomic_edit(path) as con:
        timed = {s: sec for s, sec in con.execute(
            "SELECT step, seconds FROM training_steps WHERE run_id = ?", [run_id]).fetchall()}
        fresh = [s for s in steps if s["step"] not in timed or (timed[s["step"]] is None and s["seconds"] is not None)]
        con.execute("DELETE FROM training_runs WHERE run_id = ?", [run_id])
        _insert(con, "training_runs", [run])
        if fresh:
            con.execute("DELETE FROM training_steps WHERE run_id = ? AND step IN (SELECT unnest(?::INTEGER[]))",
                        [run_id, [s["step"] for s in fresh]])
            _insert(con, "training_steps", fresh)


def read_training_run(path: str | Path, run_id: str) -> dict[str, Any] | None:
    con = connect_readonly(path)
    try:
        if not _has_table(con, "training_runs"):
            return None
        cur = con.execute("SELECT * FROM training_runs WHERE run_id = ?", [run_id])
        row = cur.fetchone()
        return dict(zip([d[0] for d in cur.description], row)) if row else None
    finally:
        con.close()


def read_training_steps(path: str | Path, run_id: str) -> list[dict[str, Any]]:
    con = connect_readonly(path)
    try:
        if not _has_table(con, "training_steps"):
            return []
        cur = con.execute("SELECT * FROM training_steps WHERE run_id = ? ORDER BY step", [run_id])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        con.close()
