"""The GRPO entry point without training: the h100 dry run and a bad profile. Real GRPO steps (checkpoints, resume
after kill -9, loading) run once in the suite, in tests/train/stages/test_train_flow.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.train.conftest import MODEL_CACHE
from train.stages.grpo import main
from train.environment.tasks import load_training_set


def test_h100_dry_run_builds_the_datasets_and_trainer(snapshot_warehouse: str, smollm2_path: str,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--profile", "h100", "--dry-run", "--warehouse", snapshot_warehouse,
                 "--work-dir", str(MODEL_CACHE), "--output-dir", str(tmp_path / "h100")])
    assert code == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["profile"] == "h100" and report["instances"] >= 10  # the 20-task weather snapshot's train split
    # the snapshot's train split only: its test split is held out for evaluation
    train_split = load_training_set(snapshot_warehouse, split="train").tasks
    assert report["instances"] + sum(report["dropped"].values()) == len(train_split)
    assert len(train_split) < len(load_training_set(snapshot_warehouse).tasks)
    assert (report["per_device_batch"], report["num_generations"], report["processes"]) == (8, 8, 16)
    # the paper's environment: search and code always; experts and the LLM user when their endpoints are usable
    assert report["local_search"] and report["code_interpreter"]
    assert report["user"] in ("llm", "scripted") and (report["user"] == "llm") == (not any(
        "user endpoint" in n for n in report["notes"]))


def test_a_bad_profile_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--profile", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no profile 'nope'") and "\n" not in err
