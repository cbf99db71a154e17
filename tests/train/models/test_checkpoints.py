"""Resuming after a kill mid-checkpoint: real checkpoints from a real Trainer (tests/train/tiny_trainer.py), damaged
the way a kill leaves them (files missing, files cut short), then listed, set aside, resumed from and evaluated.
One test kills a real save with SIGKILL halfway through writing optimizer.pt and resumes for real."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train.conftest import REPO
from train.models.checkpoint_policy import CheckpointPolicy
from train.models.checkpoints import (checkpoint_problems, complete_checkpoints, evaluation_problems, resume_point,
                               safetensors_problem, torch_file_problem)
from train.evaluation.evaluate import EvalConfig
from train.stages.grpo import checkpoints


@pytest.fixture
def run_dir(trained: Path, tmp_path: Path) -> Path:
    """A private copy of the real run, free to damage."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def _cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_a_real_trainer_checkpoint_is_complete(trained: Path) -> None:
    assert checkpoint_problems(trained / "checkpoint-1") == [] == checkpoint_problems(trained / "checkpoint-2")
    expected = [str(trained / "checkpoint-1"), str(trained / "checkpoint-2")]
    assert complete_checkpoints(trained) == checkpoints(trained) == expected
    assert evaluation_problems(trained / "checkpoint-2") == []


# what a kill leaves, in the Trainer's save order: weights, optimizer, scheduler, RNG state, trainer_state.json last
DAMAGE = {
    "weights cut short": (lambda c: _cut(c / "model.safetensors"), "model.safetensors is truncated"),
    "killed before the optimizer": (lambda c: [(c / n).unlink() for n in ("optimizer.pt", "scheduler.pt",
                                                                         "rng_state.pth", "trainer_state.json")],
                                    "optimizer.pt missing"),
    "optimizer cut short": (lambda c: _cut(c / "optimizer.pt", 0.9), "optimizer.pt is truncated"),
    "scheduler empty": (lambda c: (c / "scheduler.pt").write_bytes(b""), "scheduler.pt is empty"),
    "rng state missing": (lambda c: (c / "rng_state.pth").unlink(), "rng_state.pth missing"),
    "no trainer state": (lambda c: (c / "trainer_state.json").unlink(), "trainer_state.json missing"),
    "trainer state cut short": (lambda c: _cut(c / "trainer_state.json"), "trainer_state.json is not valid JSON"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_an_incomplete_checkpoint_is_set_aside_and_the_previous_one_resumed(run_dir: Path, damage: str) -> None:
    damage_fn, problem = DAMAGE[damage]
    ckpt = run_dir / "checkpoint-2"
    damage_fn(ckpt)
    left = sorted(p.name for p in ckpt.iterdir())
    assert any(p.startswith(problem) for p in checkpoint_problems(ckpt)), checkpoint_problems(ckpt)
    assert checkpoints(run_dir) == [str(run_dir / "checkpoint-1")]  # listed nowhere, not even before the move

    lines: list[str] = []
    assert resume_point(run_dir, lines.append) == str(run_dir / "checkpoint-1")
    (line,) = lines
    (moved,) = (run_dir / "incomplete").iterdir()
    assert moved.name.startswith("checkpoint-2.incomplete-") and not ckpt.exists()
    assert str(ckpt) in line and problem in line and str(moved) in line and "\n" not in line
    assert sorted(p.name for p in moved.iterdir()) == left  # nothing deleted
    assert evaluation_problems(moved) == [f"{moved.name} was set aside as an incomplete checkpoint"]


def test_without_a_complete_checkpoint_training_starts_afresh_and_nothing_is_lost(run_dir: Path) -> None:
    (run_dir / "checkpoint-1" / "trainer_state.json").unlink()
    _cut(run_dir / "checkpoint-2" / "model.safetensors", 0.1)
    lines: list[str] = []
    assert resume_point(run_dir, lines.append) is None
    assert len(lines) == 3 and lines[-1] == f"no complete checkpoint left in {run_dir}: training starts from step 0"
    assert sorted(p.name.split(".")[0] for p in (run_dir / "incomplete").iterdir()) == ["checkpoint-1",
                                                                                        "checkpoint-2"]
    assert checkpoints(run_dir) == [] and resume_point(run_dir, lines.append) is None and len(lines) == 3


def test_other_processes_choose_the_same_checkpoint_without_moving_anything(run_dir: Path) -> None:
    (run_dir / "checkpoint-2" / "trainer_state.json").unlink()
    lines: list[str] = []
    assert resume_point(run_dir, lines.append, move=False) == str(run_dir / "checkpoint-1")
    assert lines == [] and (run_dir / "checkpoint-2").is_dir() and not (run_dir / "incomplete").exists()


def test_set_aside_folders_survive_the_trainers_checkpoint_rotation(run_dir: Path) -> None:
    from transformers.trainer_utils import rotate_checkpoints

    (run_dir / "checkpoint-2" / "trainer_state.json").unlink()
    resume_point(run_dir, lambda m: None)
    (moved,) = (run_dir / "incomplete").iterdir()
    shutil.copytree(run_dir / "checkpoint-1", run_dir / "checkpoint-3")
    rotate_checkpoints(str(run_dir), save_total_limit=1)  # what the Trainer runs after every save
    assert not (run_dir / "checkpoint-1").exists() and (run_dir / "checkpoint-3").exists()
    assert moved.is_dir() and (moved / "model.safetensors").exists()


def test_truncation_checks_agree_with_the_real_loaders(run_dir: Path) -> None:
    import torch
    from safetensors import safe_open

    weights, optimizer = run_dir / "checkpoint-2" / "model.safetensors", run_dir / "checkpoint-2" / "optimizer.pt"
    assert safetensors_problem(weights) is None and torch_file_problem(optimizer) is None
    for keep in (0.99, 0.5, 0.0001):
        _cut(weights, keep)
        _cut(optimizer, keep)
        assert safetensors_problem(weights) is not None and torch_file_problem(optimizer) is not None
        with pytest.raises(Exception):
            with safe_open(str(weights), "pt") as f:
                [f.get_tensor(k) for k in f.keys()]
        with pytest.raises(Exception):
            torch.load(optimizer, weights_only=True)


def test_evaluating_an_incomplete_checkpoint_is_one_error_line(run_dir: Path, smollm2_path: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from toolscale.cli import main

    ckpt = run_dir / "checkpoint-2"
    _cut(ckpt / "model.safetensors")
    with pytest.raises(ValueError, match=r"incomplete checkpoint \(model.safetensors is truncated"):
        EvalConfig(warehouse="unused.duckdb", model=str(ckpt)).validate()
    with pytest.raises(ValueError, match="model.safetensors is truncated"):
        CheckpointPolicy.load(str(ckpt))
    assert main(["evaluate", str(ckpt), "--warehouse", str(run_dir / "none.duckdb")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: cannot evaluate {ckpt}: incomplete checkpoint") and "\n" not in err
    # the complete one and a plain model folder (the converted SmolLM2) still load
    assert isinstance(CheckpointPolicy.load(str(run_dir / "checkpoint-1"), 4).act([{"role": "user", "content": "hi"}]),
                      str)
    assert evaluation_problems(smollm2_path) == []
    EvalConfig(warehouse="unused.duckdb", model=smollm2_path).validate()


def test_kill_9_while_writing_a_checkpoint_then_a_rerun_resumes_from_the_previous_one(tmp_path: Path,
                                                                                   smollm2_path: str) -> None:
    """A real SIGKILL halfway through the real write of checkpoint-2/optimizer.pt, then the real resume (~20 s)."""
    out = tmp_path / "run"
    script = [sys.executable, "-m", "tests.train.tiny_trainer", str(out), smollm2_path]
    killed = subprocess.run(script + ["--kill-in", "checkpoint-2/optimizer.pt"], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (out / "checkpoint-2" / "trainer_state.json").exists()
    assert (out / "checkpoint-2" / "optimizer.pt").stat().st_size > 0  # half of it

    rerun = subprocess.run(script, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert report == {"resumed_from": str(out / "checkpoint-1"), "global_step": 2}
    (line,) = [x for x in rerun.stderr.splitlines() if "is incomplete" in x]
    assert f"checkpoint {out / 'checkpoint-2'} is incomplete (optimizer.pt is truncated" in line
    assert "trainer_state.json missing" in line
    (moved,) = (out / "incomplete").iterdir()
    assert (moved / "optimizer.pt").stat().st_size > 0 and not (moved / "trainer_state.json").exists()
    assert checkpoints(out) == [str(out / "checkpoint-1"), str(out / "checkpoint-2")]
    assert json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())["global_step"] == 2
