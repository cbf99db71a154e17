"""What the regeneration itself costs: CPU seconds per stage, and the CPU price that turns them into dollars.

Stages (``STAGES``): ``synthesis`` (sampling and evolving candidates), ``verification`` (replay, mutation,
derivability and realism checks of every candidate), ``dedup``, ``gate`` (the audit and the quality suite) and
``publish`` (writing the snapshot's rows). Shards time themselves per thread (``time.thread_time``), so shards
sharing a process in a thread pool are not counted twice; the stages that run in the job's own process after the
shards (dedup, gate, publish) use ``time.process_time``, which includes the threads they start (the embedding
model's). A resumed shard brings the CPU time it cost when it ran. The warehouse keeps them in ``stage_costs``;
the ``snapshot_cost`` view adds LLM tokens and dollars and gives the cost per verified task (docs/warehouse.md).

The price of a CPU hour is ``$TOOLSCALE_CPU_USD_PER_HOUR`` when set; otherwise ``DEFAULT_CPU_USD_PER_HOUR``, an
assumption (not a measurement), and every row priced with it says so.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

STAGES = ("synthesis", "verification", "dedup", "gate", "publish")
CPU_PRICE_ENV = "TOOLSCALE_CPU_USD_PER_HOUR"
# ASSUMPTION: about the on-demand price of one vCPU-hour of a general-purpose cloud VM in 2026 (a 4-vCPU machine
# at about $0.20 an hour). Not measured; set $TOOLSCALE_CPU_USD_PER_HOUR to your own price.
DEFAULT_CPU_USD_PER_HOUR = 0.05
DEFAULT_PRICE_NOTE = f"assumption: default {DEFAULT_CPU_USD_PER_HOUR} USD per CPU hour (set ${CPU_PRICE_ENV})"


@dataclass(frozen=True)
class CpuPrice:
    usd_per_hour: float
    note: str  # where the price came from; the default says it is an assumption


def cpu_price() -> CpuPrice:
    """The CPU price in force; a ``$TOOLSCALE_CPU_USD_PER_HOUR`` that is not a price is a one-line ValueError."""
    raw = os.environ.get(CPU_PRICE_ENV, "").strip()
    if not raw:
        return CpuPrice(DEFAULT_CPU_USD_PER_HOUR, DEFAULT_PRICE_NOTE)
    try:
        price = float(raw)
    except ValueError:
        price = math.nan
    if not math.isfinite(price) or price < 0:
        raise ValueError(f"${CPU_PRICE_ENV}={raw!r} is not a price; give US dollars per CPU hour, e.g. 0.05")
    return CpuPrice(price, f"${CPU_PRICE_ENV}")


def add_shard_cpu(totals: dict[str, float], summaries: Iterable[dict[str, Any]]) -> None:
    """Add each shard summary's ``cpu_s`` into ``totals`` (a shard file written before CPU was kept adds 0)."""
    for summary in summaries:
        for stage, seconds in (summary.get("cpu_s") or {}).items():
            totals[stage] = totals.get(stage, 0.0) + float(seconds)


def stage_rows(snapshot_id: str, cpu_s: dict[str, float], wall_s: dict[str, float | None], items: dict[str, int],
               price: CpuPrice) -> list[dict[str, Any]]:
    """The ``stage_costs`` rows of one snapshot, one per stage in ``STAGES`` order."""
    return [{"snapshot_id": snapshot_id, "stage": stage, "position": i, "cpu_s": round(cpu_s.get(stage, 0.0), 4),
             "wall_s": None if wall_s.get(stage) is None else round(float(wall_s[stage] or 0.0), 4),
             "items": items.get(stage, 0), "cpu_usd_per_hour": price.usd_per_hour, "price_note": price.note}
            for i, stage in enumerate(STAGES)]
