"""Per-instance randomisation: which tools an episode offers and which pricing schedule prices them, from one seed.

The tools the gold needs always stay; the others are kept as a random subset. Training draws a schedule from the
training schedules only; evaluation draws from the held-out ones. The per-instance seed is derived from the run's
seed and the task id, so the same run seed always gives the same instance, and it is recorded in the result.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from inference.pricing import PricingSchedule, ScheduleSet

MODES = ("train", "eval")


@dataclass(frozen=True)
class InstanceDraw:
    seed: int  # the per-instance seed everything below was drawn from
    mode: str  # train | eval
    tool_names: tuple[str, ...]  # the tools offered, in catalog order
    schedule: PricingSchedule | None


def instance_seed(run_seed: int, task_id: str) -> int:
    digest = hashlib.sha256(f"{run_seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def draw_instance(task_id: str, candidates: Sequence[str], needed: set[str], schedules: ScheduleSet | None,
                  run_seed: int = 0, mode: str = "train", subset: bool = True) -> InstanceDraw:
    """Draw one instance. ``candidates``: every tool the episode could offer (catalog order); ``needed``: the tools
    the gold calls, always kept. ``subset=False`` keeps every candidate (evaluation of a full catalog)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    missing = sorted(needed - set(candidates))
    if missing:
        raise ValueError(f"task {task_id}: its gold calls tools the instance cannot offer: {', '.join(missing)}")
    seed = instance_seed(run_seed, task_id)
    rng = random.Random(seed)
    others = [name for name in candidates if name not in needed]
    kept = set(rng.sample(others, rng.randint(0, len(others)))) if subset else set(others)
    tools = tuple(name for name in candidates if name in needed or name in kept)
    schedule = None
    if schedules is not None:
        # evaluation may only ever see held-out schedules, training only training ones
        schedule = schedules.draw_training(rng) if mode == "train" else schedules.draw_heldout(rng)
    return InstanceDraw(seed, mode, tools, schedule)
