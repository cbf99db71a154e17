"""Warehouse table of what the regeneration itself costs: CPU seconds per stage of each snapshot, with the CPU
price they are valued at (pipeline/stage_cost.py). The ``cost_per_verified_task`` view adds LLM spend."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Double
from sqlmodel import Field, SQLModel


class StageCost(SQLModel, table=True):
    __tablename__ = "stage_costs"
    snapshot_id: str = Field(primary_key=True)
    stage: str = Field(primary_key=True)  # synthesis | verification | dedup | gate | publish
    position: int  # the stage's place in the pipeline
    cpu_s: float = Field(sa_type=Double)
    wall_s: float | None = Field(default=None, sa_type=Double)  # NULL where shards run the stage with another
    items: int  # what the stage handled: candidates (synthesis, verification, dedup) or tasks (gate, publish)
    cpu_usd_per_hour: float = Field(sa_type=Double)
    price_note: str  # where the price came from; the default is marked as an assumption


def write_stage_costs(con: Any, snapshot_id: str, rows: list[dict[str, Any]]) -> None:
    """Replace the snapshot's ``stage_costs`` rows (inside the writer's transaction or working copy)."""
    con.execute("DELETE FROM stage_costs WHERE snapshot_id = ?", [snapshot_id])
    for r in rows:
        con.execute("INSERT INTO stage_costs (snapshot_id, stage, position, cpu_s, wall_s, items, cpu_usd_per_hour,"
                    " price_note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [snapshot_id, r["stage"], r["position"], r["cpu_s"], r["wall_s"], r["items"],
                     r["cpu_usd_per_hour"], r["price_note"]])
