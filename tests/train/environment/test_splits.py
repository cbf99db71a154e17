"""Held out means held out: training draws only ``train`` tasks, ``toolscale evaluate`` only ``test`` ones, with
one rule (train/environment/splits.py) for a snapshot's derived split and for one it stores, and the run records both sizes."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from train.evaluation.evaluate import EvalConfig, evaluation_set
from train.stages.profiles import load_profile
from train.stages.records import run_config
from train.environment.tasks import load_training_set
from train.stages.trainset import build_training_set
from warehouse.errors import WarehouseError


def _sides(warehouse: str) -> tuple[set[str], set[str], dict[str, object]]:
    built = build_training_set(warehouse, "latest", None, None)
    evaluated = evaluation_set(EvalConfig(warehouse=warehouse, model="unused"))
    return {t.task_id for t in built.data.tasks}, {t.task_id for t in evaluated.tasks}, run_config(
        load_profile("cpu-smoke"), built)


def test_no_task_is_trained_on_and_evaluated(snapshot_warehouse: str) -> None:
    trained, evaluated, config = _sides(snapshot_warehouse)
    every = {t.task_id for t in load_training_set(snapshot_warehouse).tasks}
    assert trained and evaluated and not trained & evaluated, sorted(trained & evaluated)
    assert trained | evaluated == every
    # the run's config (hence its config_json and id) says which split it trained on and how big each is
    assert config["splits"] == {"split": "train", "rule": "derived", "train": len(trained), "test": len(evaluated)}
    assert {d["task_id"] for d in config["draws"]} == trained
    # a limit counts within the split: the first training tasks by id are still training tasks
    assert {t.task_id for t in load_training_set(snapshot_warehouse, limit=3, split="train").tasks} <= trained


def test_a_stored_split_is_the_one_both_sides_use(snapshot_warehouse: str, tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    shutil.copyfile(snapshot_warehouse, path)
    every = sorted(t.task_id for t in load_training_set(snapshot_warehouse).tasks)
    chosen = every[:2]  # not the hash rule's pick: the stored column decides
    con = duckdb.connect(str(path))
    try:
        con.execute("ALTER TABLE tasks ADD COLUMN split VARCHAR DEFAULT 'train'")
        con.execute("UPDATE tasks SET split = 'test' WHERE task_id IN (?, ?)", chosen)
    finally:
        con.close()
    trained, evaluated, config = _sides(str(path))
    assert evaluated == set(chosen) and trained == set(every) - set(chosen)
    assert config["splits"]["rule"] == "stored"


def test_an_unknown_split_is_one_clear_error(snapshot_warehouse: str) -> None:
    with pytest.raises(ValueError, match="unknown split 'dev'; expected one of train, test"):
        load_training_set(snapshot_warehouse, split="dev")
    with pytest.raises(WarehouseError, match="has no tasks in nope in its test split"):
        load_training_set(snapshot_warehouse, domains=["nope"], split="test")
