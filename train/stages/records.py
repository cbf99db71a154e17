"""A training run's record: what the caller chose, the run's identity (its id from the snapshot, the profile and a
hash of the config), and the recorder that keeps its ``training_runs`` row and steps in the warehouse.

Every stage of a run (train/stages/grpo_job.py, train/stages/sequence.py) records itself through this one module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from train.models.checkpoints import complete_checkpoints
from train.stages.profiles import Profile
from train.stages.world import is_main
from train.stages.trainset import BuiltSet, build_training_set
from warehouse.location import default_warehouse
from warehouse.train_store import read_training_run, store_training

ROOT = Path(__file__).resolve().parents[2]


ENDED = "episode/ended/"  # the reward's per-step count of rollouts by ending (train/environment/rewards.py)


@dataclass
class TrainRunConfig:
    """What a caller chooses; everything else comes from the profile."""

    profile: str = "cpu-smoke"  # a profile name (train/profiles/) or a YAML path
    warehouse: str = field(default_factory=default_warehouse)
    snapshot: str = "latest"  # a snapshot id or latest (published only)
    output_root: str = "work/train"
    work_dir: str = "work"  # cache of converted models
    pricing_seed: int = 0
    preference_run: str | None = None  # a preference run id, "none", or None for the latest run if any


@dataclass
class TrainRunResult:
    run: dict[str, Any]  # the final training_runs row
    steps: list[dict[str, Any]]  # every training_steps row of the run
    steps_this_attempt: int
    markdown: str


def train_code_version() -> str:
    """A hash of the training code and profiles, recorded with each run (not part of its id)."""
    h = hashlib.sha256()
    for path in sorted((ROOT / "train").rglob("*")):
        if path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def run_config(profile: Profile, built: BuiltSet) -> dict[str, Any]:
    """Everything that decides what the run trains on: its hash names the run."""
    return {"snapshot_id": built.data.snapshot_id, "profile": dataclasses.asdict(profile),
            "pricing_seed": built.pricing_seed, "preference_run_id": built.preference_run_id,
            "splits": built.data.splits, "draws": [d.to_dict() for d in built.draws]}


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_identity(profile: Profile, built: BuiltSet) -> tuple[str, dict[str, Any], str]:
    """The run id that ``profile`` on ``built`` names, with its config and that config's hash."""
    config = run_config(profile, built)
    digest = config_hash(config)
    return f"train-{profile.name}-{built.data.snapshot_id}-{digest}", config, digest


def now() -> datetime:
    """The time a run's rows are stamped with: UTC, without a zone (the warehouse's TIMESTAMP)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def steps_from_log(log_history: list[dict[str, Any]], run_id: str, completions_per_step: int,
                   seconds: dict[int, float], stage: str = "grpo") -> list[dict[str, Any]]:
    """``training_steps`` rows from the trainer's log (one entry per step with logging_steps 1): GRPO's entries carry
    a reward, SFTTrainer's (the sft and rft stages) only a loss."""
    rows = []
    for entry in log_history:
        if "step" not in entry or "train_runtime" in entry or ("reward" not in entry and "loss" not in entry):
            continue  # the end-of-training summary and other non-step entries
        step = int(entry["step"])
        length = _num(entry.get("completions/mean_length"))
        rows.append({
            "run_id": run_id, "step": step, "reward_mean": _num(entry.get("reward")),
            "reward_std": _num(entry.get("reward_std")), "outcome_rate": _num(entry.get("episode/solved_rate")),
            "cost_mean": _num(entry.get("episode/cost")),
            "completion_tokens": None if length is None else length * completions_per_step,
            "tokens_seen": _num(entry.get("num_tokens")),
            "drop_format_error": int(entry.get("filter/format_error", 0)),
            "drop_no_final_output": int(entry.get("filter/no_final_output", 0)),
            "drop_low_std_group": int(entry.get("filter/low_std_group", 0)),
            "groups_dropped": int(entry.get("filter/groups_dropped", 0)),
            "rollouts": None if entry.get("episode/rollouts") is None else round(entry["episode/rollouts"]),
            "endings_json": json.dumps({k.removeprefix(ENDED): round(v) for k, v in sorted(entry.items())
                                        if k.startswith(ENDED)}),
            "loss": _num(entry.get("loss")), "learning_rate": _num(entry.get("learning_rate")),
            "seconds": seconds.get(step), "recorded_at": now(), "stage": stage})
    return rows


class Recorder:
    """Keeps the run row and writes it, with the steps so far, through the single writer."""

    def __init__(self, cfg: TrainRunConfig, profile: Profile, built: BuiltSet, output_dir: Path,
                 progress: Callable[[str], None], run_id: str | None = None, stage: str = "grpo",
                 max_steps: int | None = None) -> None:
        self.cfg, self.profile, self.progress, self.stage = cfg, profile, progress, stage
        self.run_id, config, digest = run_identity(profile, built)
        self.run_id = run_id or self.run_id  # a stage of a staged run is named after the whole run (train/stages/sequence.py)
        self.output_dir = output_dir / self.run_id
        if self.output_dir.resolve().parent != output_dir.resolve():  # a run folder never leaves --output-root
            raise ValueError(f"run id {self.run_id!r} does not name a folder directly under {output_dir}")
        self.completions = profile.grpo.tasks_per_step * profile.grpo.num_generations
        self.seconds: dict[int, float] = {}
        self.step_offset = 0  # added to the trainer's step numbers (a later rft round)
        previous = read_training_run(cfg.warehouse, self.run_id)
        earlier = complete_checkpoints(self.output_dir)
        self.run: dict[str, Any] = {
            "run_id": self.run_id, "snapshot_id": built.data.snapshot_id, "profile": profile.name,
            "config_hash": digest, "config_json": json.dumps(config, sort_keys=True, default=str),
            "code_version": train_code_version(), "status": "running", "output_dir": str(self.output_dir),
            "started_at": previous["started_at"] if previous else now(), "updated_at": now(),
            "finished_at": None, "global_step": _step_of(earlier[-1]) if earlier else 0,
            "max_steps": profile.grpo.max_steps if max_steps is None else max_steps,
            "resumes": (previous["resumes"] if previous else 0) + (1 if earlier else 0),
            "resumed_from": earlier[-1] if earlier else None, "checkpoints_json": json.dumps(earlier),
            "final_checkpoint": None, "instances": len(built.data.tasks), "dropped_json": "{}",
            "preference_run_id": built.preference_run_id, "pricing_seed": built.pricing_seed,
            "reward_curve_png": None, "error": None, "stage": stage}

    def write(self, log_history: list[dict[str, Any]], **changes: Any) -> list[dict[str, Any]]:
        self.run.update(changes, updated_at=now(), checkpoints_json=json.dumps(complete_checkpoints(self.output_dir)))
        steps = steps_from_log(log_history, self.run_id, self.completions, self.seconds, self.stage)
        for step in steps:  # rft rounds: each round's trainer counts from 1, the run's steps go on
            step["step"] += self.step_offset
        if is_main():  # under accelerate only the main process writes: one writer
            store_training(self.cfg.warehouse, self.run, steps)
        return steps

    def callback(self) -> Any:
        from transformers import TrainerCallback

        recorder = self

        class WarehouseCallback(TrainerCallback):  # type: ignore[misc]
            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                self.started = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                recorder.seconds[state.global_step] = round(time.perf_counter() - self.started, 3)

            def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                # one warehouse write per checkpoint: each write copies the whole file
                recorder.write(state.log_history, global_step=state.global_step)
                recorder.progress(f"step {state.global_step}: checkpoint saved and recorded")

        return WarehouseCallback()


def _step_of(checkpoint: str) -> int:
    return int(Path(checkpoint).name.split("-")[-1])


def load_built(cfg: TrainRunConfig, profile: Profile) -> BuiltSet:
    """The training set ``cfg`` and ``profile`` name: the snapshot's train split with its per-instance draws."""
    return build_training_set(cfg.warehouse, cfg.snapshot if cfg.snapshot != "latest" else profile.data.snapshot,
                              profile.data.domains, profile.data.max_tasks, cfg.pricing_seed, cfg.preference_run)
