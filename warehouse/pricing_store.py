"""Write pricing schedules and preference-pair runs into the warehouse, and read them back.

Writes go through ``warehouse.writer.atomic_edit``: the writer's preflight and lock, a private copy of the file,
one transaction, then one atomic ``os.replace``. A reader never sees half a run; a failed write loses nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from warehouse.reader import WarehouseError, connect_readonly
from warehouse.writer import _insert, atomic_edit

PRICING_TABLES = ("pricing_schedules", "model_prices", "model_latencies")


@dataclass
class PricingRows:
    """Rows of ``pricing_schedules``, ``model_prices`` and ``model_latencies`` for one or more schedules."""

    schedules: list[dict[str, Any]] = field(default_factory=list)
    prices: list[dict[str, Any]] = field(default_factory=list)
    latencies: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PreferenceBundle:
    """One preference-pair run: its ``preference_runs`` row, its pairs, and the schedules they refer to."""

    run: dict[str, Any]
    pairs: list[dict[str, Any]]
    pricing: PricingRows


def _write_pricing(con: duckdb.DuckDBPyConnection, rows: PricingRows) -> None:
    # schedule ids are content hashes, so an id already present holds the same figures: replace, never duplicate
    ids = [s["schedule_id"] for s in rows.schedules]
    for table in PRICING_TABLES:
        con.execute(f"DELETE FROM {table} WHERE schedule_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
    _insert(con, "pricing_schedules", rows.schedules)
    _insert(con, "model_prices", rows.prices)
    _insert(con, "model_latencies", rows.latencies)


def store_pricing(path: str | Path, rows: PricingRows) -> int:
    """Store schedules (nominal, provider or synthetic); returns how many."""
    with atomic_edit(path) as con:
        _write_pricing(con, rows)
    return len(rows.schedules)


def store_preferences(path: str | Path, bundle: PreferenceBundle) -> None:
    """Store a run, its pairs and their schedules; a rerun with the same ``run_id`` replaces it."""
    run_id = bundle.run["run_id"]
    with atomic_edit(path) as con:
        _write_pricing(con, bundle.pricing)
        con.execute("DELETE FROM preference_pairs WHERE run_id = ?", [run_id])
        con.execute("DELETE FROM preference_runs WHERE run_id = ?", [run_id])
        _insert(con, "preference_runs", [bundle.run])
        _insert(con, "preference_pairs", bundle.pairs)


def _has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    return con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [table]).fetchone() is not None


def latest_run_id(con: duckdb.DuckDBPyConnection) -> str:
    if not _has_table(con, "preference_runs"):
        raise WarehouseError("the warehouse has no preference pairs yet; run `toolscale preferences` first")
    row = con.execute("SELECT run_id FROM preference_runs ORDER BY created_at DESC, run_id DESC LIMIT 1").fetchone()
    if row is None:
        raise WarehouseError("the warehouse has no preference pairs yet; run `toolscale preferences` first")
    return str(row[0])


def read_pairs(path: str | Path, run_id: str | None = None, split: str | None = None,
               family: str | None = None, limit: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """Pairs of a run (default: the latest), optionally one split or family; ``limit`` draws a seeded sample."""
    con = connect_readonly(path)
    try:
        run_id = run_id or latest_run_id(con)
        rows = con.execute(
            "SELECT pair_id, split, family, template_ids, instruction, tools_json, vector_json, schedule_id,"
            " schedule_synthetic, judge_verdict FROM preference_pairs WHERE run_id = ?"
            " AND (? IS NULL OR split = ?) AND (? IS NULL OR family = ?)"
            " ORDER BY hash(pair_id || ?::VARCHAR), pair_id LIMIT ?",
            [run_id, split, split, family, family, seed, limit if limit is not None else 2**62]).fetchall()
    finally:
        con.close()
    return [{"pair_id": pid, "split": sp, "family": fam, "template_ids": tids, "instruction": text,
             "tools": json.loads(tools), "vector": json.loads(vector), "schedule_id": sched,
             "schedule_synthetic": synth, "judge_verdict": judge}
            for pid, sp, fam, tids, text, tools, vector, sched, synth, judge in rows]


def read_schedule_prices(path: str | Path, schedule_id: str) -> list[dict[str, Any]]:
    con = connect_readonly(path)
    try:
        rows = con.execute("SELECT model, input_usd_per_1m, output_usd_per_1m, synthetic, source FROM model_prices"
                           " WHERE schedule_id = ? ORDER BY model", [schedule_id]).fetchall()
    finally:
        con.close()
    return [{"model": m, "input_usd_per_1m": i, "output_usd_per_1m": o, "synthetic": s, "source": src}
            for m, i, o, s, src in rows]


def list_schedules(path: str | Path) -> list[dict[str, Any]]:
    con = connect_readonly(path)
    try:
        if not _has_table(con, "pricing_schedules"):
            return []
        rows = con.execute(
            "SELECT s.schedule_id, s.name, s.kind, s.split, s.synthetic, s.source, count(p.model)"
            " FROM pricing_schedules s LEFT JOIN model_prices p USING (schedule_id) GROUP BY ALL"
            " ORDER BY s.kind, s.name").fetchall()
    finally:
        con.close()
    return [{"schedule_id": i, "name": n, "kind": k, "split": sp, "synthetic": sy, "source": src, "models": m}
            for i, n, k, sp, sy, src, m in rows]
