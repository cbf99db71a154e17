"""The one rule that splits a snapshot's tasks into ``train`` and ``test``, for every stage that reads tasks.

Training (``train/stages/trainset.py``, ``train/stages/grpo.py``) takes only ``train``; ``toolscale evaluate`` only ``test``.
The split is the snapshot's own when its ``tasks`` table carries a ``split`` column with test rows, else the tau2
and HF exports' rule (``warehouse.tau2_package.build.task_splits``: ``test`` is the fifth of task ids with the
lowest hashes), so a task is in the same split in every snapshot and no task is ever on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from warehouse.tau2_package.build import task_splits

TRAIN, TEST = "train", "test"
SPLITS = (TRAIN, TEST)


@dataclass(frozen=True)
class SnapshotSplits:
    """Which of a snapshot's tasks are ``test`` (every other one is ``train``) and where that came from."""

    rule: str  # stored (the snapshot's split column) | derived (the export's hash rule)
    test_ids: frozenset[str]

    def of(self, task_id: str) -> str:
        return TEST if task_id in self.test_ids else TRAIN

    def sizes(self, task_ids: Sequence[str]) -> dict[str, int]:
        """How many of ``task_ids`` fall in each split."""
        test = sum(1 for t in task_ids if t in self.test_ids)
        return {TRAIN: len(task_ids) - test, TEST: test}


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    return split


def snapshot_splits(con: duckdb.DuckDBPyConnection, snapshot_id: str, task_ids: Sequence[str]) -> SnapshotSplits:
    """The split of ``task_ids`` (tasks of ``snapshot_id``), read through an open connection to the warehouse."""
    columns = {r[0] for r in con.execute("DESCRIBE tasks").fetchall()}
    if "split" in columns:
        stored = {r[0] for r in con.execute("SELECT task_id FROM tasks WHERE snapshot_id = ? AND split = ?",
                                            [snapshot_id, TEST]).fetchall()}
        if stored:
            return SnapshotSplits("stored", frozenset(stored))
    return SnapshotSplits("derived", frozenset(task_splits([{"id": t} for t in task_ids])[TEST]))
