"""The training set of a run: a snapshot's tasks, each with a preference vector P and a drawn pricing schedule.

P comes from a preference pair of the warehouse's latest preference run (its ``train`` split) when there is one,
drawn per instance with the run's pricing seed; otherwise it is the accuracy-first default. Each instance also
draws one of the TRAINING pricing schedules (never a held-out one): the pair's own schedule when that is a
training schedule, else a seeded draw. The schedule scales the tool costs and latencies the episode charges.
Every draw is recorded (``Draw``) so that a run's config says exactly what it trained on.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from inference.pricing import PricingSchedule, nominal_schedule, synthetic_schedules
from train.environment.splits import TRAIN
from train.environment.tasks import TrainingSet, load_training_set
from warehouse.pricing_store import read_pairs
from warehouse.reader import WarehouseError, connect_readonly


@dataclass(frozen=True)
class Draw:
    """What one instance drew: its preference pair (None: accuracy-first) and its pricing schedule."""

    task_id: str
    pair_id: str | None
    schedule_id: str
    cost_scale: float
    latency_scale: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BuiltSet:
    data: TrainingSet
    draws: list[Draw]
    preference_run_id: str | None
    pricing_seed: int


def schedule_scales(schedule: PricingSchedule, base: PricingSchedule) -> tuple[float, float]:
    """(cost, latency) of ``schedule`` relative to ``base``: mean ratios over the models and roles both price."""
    costs, latencies = [], []
    for price in schedule.prices:
        ref = next((p for p in base.prices if p.model == price.model), None)
        if ref is None:
            continue
        if ref.input_usd_per_1m + ref.output_usd_per_1m > 0:
            costs.append((price.input_usd_per_1m + price.output_usd_per_1m)
                         / (ref.input_usd_per_1m + ref.output_usd_per_1m))
        ref_lat = {lat.alias: lat.seconds for lat in ref.latencies}
        latencies += [lat.seconds / ref_lat[lat.alias] for lat in price.latencies if ref_lat.get(lat.alias)]
    return (statistics.fmean(costs) if costs else 1.0, statistics.fmean(latencies) if latencies else 1.0)


def preference_from_pair(pair: dict[str, Any]) -> dict[str, Any]:
    """A pair's vector [p_tool_1..p_tool_n, p_accuracy, p_cost, p_latency] as ``train.environment.rewards.Preference`` data."""
    vector, tools = pair["vector"], pair["tools"]
    if len(vector) != len(tools) + 3:
        raise ValueError(f"preference pair {pair['pair_id']}: vector has {len(vector)} entries for "
                         f"{len(tools)} tools (expected tools + 3)")
    return {"tools": dict(zip(tools, vector[: len(tools)])), "outcome": vector[-3], "cost": vector[-2],
            "latency": vector[-1]}


def _latest_preference_run(warehouse: str | Path) -> str | None:
    con = connect_readonly(warehouse)
    try:
        if con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'preference_runs'").fetchone() \
                is None:
            return None
        row = con.execute("SELECT run_id FROM preference_runs ORDER BY created_at DESC, run_id DESC LIMIT 1").fetchone()
        return str(row[0]) if row else None
    finally:
        con.close()


def build_training_set(warehouse: str | Path, snapshot: str, domains: list[str] | None, max_tasks: int | None,
                       pricing_seed: int = 0, preference_run: str | None = None) -> BuiltSet:
    """The ``train`` split's tasks of ``snapshot`` with per-instance preferences and training-schedule prices drawn with ``pricing_seed``.

    ``preference_run``: a run id, ``none`` for accuracy-first everywhere, or None for the latest run if any."""
    data = load_training_set(warehouse, snapshot, domains, max_tasks, split=TRAIN)  # never the test split
    run_id = None if preference_run == "none" else (preference_run or _latest_preference_run(warehouse))
    pairs = read_pairs(warehouse, run_id, split="train") if run_id else []
    if run_id and not pairs:
        raise WarehouseError(f"preference run {run_id} has no train-split pairs")
    schedules = synthetic_schedules(seed=pricing_seed).training
    by_id = {s.schedule_id: s for s in schedules}
    base = nominal_schedule()
    rng = random.Random(pricing_seed)
    tasks, draws = [], []
    for task in data.tasks:
        pair = rng.choice(pairs) if pairs else None
        schedule = by_id.get(pair["schedule_id"]) if pair else None
        schedule = schedule or rng.choice(schedules)
        cost_scale, latency_scale = schedule_scales(schedule, base)
        changes: dict[str, Any] = {"schedule_id": schedule.schedule_id, "cost_scale": cost_scale,
                                   "latency_scale": latency_scale}
        if pair is not None:
            # the paper gives the orchestrator the user's preference instruction along with the task: the
            # environment puts it in the system prompt (train/environment/env.py), for training and evaluation alike
            changes["preference"] = preference_from_pair(pair)
            changes["preference_instruction"] = str(pair["instruction"])
        tasks.append(replace(task, **changes))
        draws.append(Draw(task.task_id, pair["pair_id"] if pair else None, schedule.schedule_id, cost_scale,
                          latency_scale))
    return BuiltSet(replace(data, tasks=tasks), draws, run_id, pricing_seed)
