"""Shards run in batches (one worker task each): every shard once, one domain a batch, few enough batches that a
task runner's cost per task stays small, and the same snapshot as shards run one by one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipeline.regenerate import BATCHES_PER_WORKER, RegenerateConfig, initial_plan, regenerate, shard_batches
from synthesis.generate import ShardConfig


def _plan(counts: dict[str, int]) -> list[ShardConfig]:
    return [ShardConfig(domain, 0, i, 24, 2) for domain, n in counts.items() for i in range(n)]


def test_every_shard_is_in_exactly_one_batch_of_one_domain() -> None:
    shards = _plan({"railway": 11, "weather": 12, "sport": 7, "travel": 1})
    batches = shard_batches(shards, workers=2)
    assert Counter(s.shard_id for b in batches for s in b) == Counter(s.shard_id for s in shards)
    assert all(len({s.domain for s in b}) == 1 for b in batches)
    for batch in batches:  # a batch is a run of one domain's consecutive shards, in plan order
        assert [s.shard for s in batch] == list(range(batch[0].shard, batch[0].shard + len(batch)))
    assert [len(b) for b in batches] == sorted((len(b) for b in batches), reverse=True)  # largest first


def test_the_default_plan_is_a_few_batches_per_worker_not_one_task_per_shard() -> None:
    shards = initial_plan(RegenerateConfig())
    assert len(shards) > 100
    batches = shard_batches(shards, workers=2)
    # about BATCHES_PER_WORKER per worker; one more per domain at most, from splitting domains evenly
    assert 2 * BATCHES_PER_WORKER <= len(batches) <= 2 * BATCHES_PER_WORKER + len({s.domain for s in shards})
    sizes = [len(b) for b in batches]
    assert max(sizes) - min(sizes) <= max(sizes) // 2 + 1  # even: no long batch left to run alone at the end
    assert shard_batches(shards, workers=2) == batches  # a plan gives the same batches every time


def test_a_batch_holds_one_database_of_a_domain_that_has_several() -> None:
    shards = initial_plan(RegenerateConfig(domains=["weather", "sport"], tasks_per_domain=400, tasks_per_database=100))
    batches = shard_batches(shards, workers=2)
    assert Counter(s.shard_id for b in batches for s in b) == Counter(s.shard_id for s in shards)
    assert all(len({(s.domain, s.seed) for s in b}) == 1 for b in batches)
    assert len({(s.domain, s.seed) for s in shards}) == 8  # four databases a domain, every one used


def test_one_shard_per_batch_when_there_are_few_shards() -> None:
    shards = _plan({"railway": 2, "weather": 1})
    assert shard_batches(shards, workers=2) == [[s] for s in shards]
    assert shard_batches([], workers=2) == []


def test_batched_pool_run_publishes_the_snapshot_of_a_one_by_one_run(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    workers = 2
    monkeypatch.setattr("pipeline.regenerate.BATCHES_PER_WORKER", 1)  # a small plan in batches of a few shards
    small: dict[str, Any] = {"domains": ["weather", "sport"], "tasks_per_domain": 40, "base_per_shard": 8}
    one_by_one = RegenerateConfig(**small, workers=1, warehouse=str(tmp_path / "a.duckdb"),
                                  work_dir=str(tmp_path / "a"))
    pooled = RegenerateConfig(**small, workers=workers, warehouse=str(tmp_path / "b.duckdb"),
                              work_dir=str(tmp_path / "b"))
    assert min(len(b) for b in shard_batches(initial_plan(pooled), workers)) > 1  # really batched
    first, _ = regenerate(one_by_one, progress=lambda m: None)
    second, _ = regenerate(pooled, progress=lambda m: None)
    assert first.status == second.status == "published"
    assert first.snapshot_id == second.snapshot_id
