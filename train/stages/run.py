"""The plain training job: a GRPO run from a published snapshot, recorded in the warehouse, resumable after a kill.

    python -m train.stages.run --profile cpu-smoke --warehouse warehouse/toolscale.duckdb

The run id and output dir come from the snapshot, the profile and a hash of the config
(``<output-root>/train-<profile>-<snapshot>-<hash>``): a rerun of the same command after a kill finds the same
folder and resumes from its last checkpoint; a rerun of a finished run does no step and says so. It trains on the
snapshot's ``train`` split only (train/environment/splits.py) and records both splits' sizes. The ``training_runs`` row is
written when the run starts, at each checkpoint (with the steps logged so far) and at the end; what went wrong
when nothing learned is put in words (train/evaluation/diagnose.py) on the curves, in the summary and in the log.
``flows/train_orchestrator.py`` wraps this job for Prefect.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from train.evaluation.diagnose import diagnose_steps
from train.stages.grpo import checkpoints, train
from train.stages.profiles import Profile, load_profile
from train.stages.ranks import is_main
from train.evaluation.report import plot_reward_curves, run_markdown
from train.stages.trainset import BuiltSet, build_training_set
from warehouse.errors import WarehouseError
from warehouse.location import default_warehouse
from warehouse.train_store import read_training_run, read_training_steps, store_training

ROOT = Path(__file__).resolve().parents[2]
CURVES_PNG = "reward_curves.png"
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


def _now() -> datetime:
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
            "seconds": seconds.get(step), "recorded_at": _now(), "stage": stage})
    return rows


class _Recorder:
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
        earlier = checkpoints(self.output_dir)
        self.run: dict[str, Any] = {
            "run_id": self.run_id, "snapshot_id": built.data.snapshot_id, "profile": profile.name,
            "config_hash": digest, "config_json": json.dumps(config, sort_keys=True, default=str),
            "code_version": train_code_version(), "status": "running", "output_dir": str(self.output_dir),
            "started_at": previous["started_at"] if previous else _now(), "updated_at": _now(),
            "finished_at": None, "global_step": _step_of(earlier[-1]) if earlier else 0,
            "max_steps": profile.grpo.max_steps if max_steps is None else max_steps,
            "resumes": (previous["resumes"] if previous else 0) + (1 if earlier else 0),
            "resumed_from": earlier[-1] if earlier else None, "checkpoints_json": json.dumps(earlier),
            "final_checkpoint": None, "instances": len(built.data.tasks), "dropped_json": "{}",
            "preference_run_id": built.preference_run_id, "pricing_seed": built.pricing_seed,
            "reward_curve_png": None, "error": None, "stage": stage}

    def write(self, log_history: list[dict[str, Any]], **changes: Any) -> list[dict[str, Any]]:
        self.run.update(changes, updated_at=_now(), checkpoints_json=json.dumps(checkpoints(self.output_dir)))
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


def run_training(cfg: TrainRunConfig, progress: Callable[[str], None] = print) -> TrainRunResult:
    """Train (or resume) the run that ``cfg`` names, recording it in the warehouse; the final row and steps.

    A profile with ``stages:`` runs them all in order (train/stages/sequence.py); without, it is one GRPO run."""
    profile = load_profile(cfg.profile)
    if profile.stages is not None:
        from train.stages.sequence import run_stages

        return run_stages(cfg, progress, profile).as_run_result()
    return train_grpo(cfg, profile, load_built(cfg, profile), progress)


def train_grpo(cfg: TrainRunConfig, profile: Profile, built: BuiltSet, progress: Callable[[str], None],
               run_id: str | None = None, stage: str = "grpo") -> TrainRunResult:
    """The GRPO run of ``profile`` on ``built`` (from ``profile.model.name``), recorded as ``run_id`` (default: the
    id the profile and data name) with ``stage``; resumed from its newest complete checkpoint."""
    recorder = _Recorder(cfg, profile, built, Path(cfg.output_root), progress, run_id, stage)
    if recorder.run["global_step"] >= profile.grpo.max_steps:
        return _already_finished(recorder, progress)
    splits = built.data.splits
    progress(f"run {recorder.run_id}: {len(built.data.tasks)} train-split tasks of snapshot {built.data.snapshot_id}"
             f" (the {splits['test']} test-split tasks are left out for evaluation)"
             + (f", resuming from {recorder.run['resumed_from']}" if recorder.run["resumed_from"] else ""))
    recorder.write([])
    try:
        result = train(profile, cfg.warehouse, str(recorder.output_dir), cfg.work_dir, data=built.data,
                       callbacks=[recorder.callback()], progress=progress, pricing_seed=built.pricing_seed)
    except BaseException as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        recorder.write([], status="failed", error=f"{type(exc).__name__}: {first}")
        raise
    final = result.checkpoints[-1] if result.checkpoints else None
    run, stored, markdown = _finish(recorder, result.log_history, result.global_step, final, result.dropped,
                                    len(built.data.tasks))
    return TrainRunResult(run, stored, len(result.step_seconds), markdown)


def _finish(recorder: _Recorder, log_history: list[dict[str, Any]], global_step: int, final: str | None,
            dropped: dict[str, int], tasks: int) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """The end of a run: curves with what went wrong in words, the final record, ``summary.md`` and the log."""
    steps = steps_from_log(log_history, recorder.run_id, recorder.completions, recorder.seconds)
    diagnosis = diagnose_steps(steps, recorder.profile.grpo.min_group_std)
    png = recorder.output_dir / CURVES_PNG
    if is_main():  # one writer: rank 0 draws the curves and writes summary.md
        plot_reward_curves(steps, png, f"{recorder.run_id} ({recorder.profile.name})", diagnosis)
    recorder.write(log_history, status="finished", finished_at=_now(), global_step=global_step,
                   final_checkpoint=final, reward_curve_png=str(png), dropped_json=json.dumps(dropped),
                   instances=tasks - sum(dropped.values()))
    stored = read_training_steps(recorder.cfg.warehouse, recorder.run_id)
    run = read_training_run(recorder.cfg.warehouse, recorder.run_id) or recorder.run
    markdown = run_markdown(run, stored, diagnosis)
    if is_main():
        (recorder.output_dir / "summary.md").write_text(markdown)
    recorder.progress(f"run {recorder.run_id} finished at step {global_step}; curves in {png}")
    for line in diagnosis:
        recorder.progress(f"diagnosis: {line}")
    return run, stored, markdown


def _already_finished(recorder: _Recorder, progress: Callable[[str], None]) -> TrainRunResult:
    """A rerun of a run whose newest checkpoint is its last step trains nothing; if a kill came between that
    checkpoint and the final record, the record is finished from the checkpoint's own log."""
    step, last = recorder.run["global_step"], checkpoints(recorder.output_dir)[-1]
    progress(f"run {recorder.run_id} already finished at step {step} of {recorder.profile.grpo.max_steps}; "
             "nothing to do")
    previous = read_training_run(recorder.cfg.warehouse, recorder.run_id)
    if previous is not None and previous["status"] == "finished":
        stored = read_training_steps(recorder.cfg.warehouse, recorder.run_id)
        diagnosis = diagnose_steps(stored, recorder.profile.grpo.min_group_std)
        for line in diagnosis:
            progress(f"diagnosis: {line}")
        return TrainRunResult(previous, stored, 0, run_markdown(previous, stored, diagnosis))
    # no training in this attempt: the resume count and origin stay those of the attempts that trained
    recorder.run.update(resumes=previous["resumes"] if previous else 0,
                        resumed_from=previous["resumed_from"] if previous else None)
    state = json.loads((Path(last) / "trainer_state.json").read_text())
    dropped = json.loads(previous["dropped_json"]) if previous else {}
    run, stored, markdown = _finish(recorder, state["log_history"], step, last, dropped, recorder.run["instances"])
    return TrainRunResult(run, stored, 0, markdown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.stages.run", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu-smoke", help="profile name (train/profiles/) or YAML path")
    parser.add_argument("--warehouse", default=default_warehouse())
    parser.add_argument("--snapshot", default="latest", help="a published snapshot id, or latest")
    parser.add_argument("--output-root", default="work/train", help="each run gets a folder under it")
    parser.add_argument("--work-dir", default="work", help="cache for converted models")
    parser.add_argument("--pricing-seed", type=int, default=0)
    parser.add_argument("--preference-run", default=None, help="a preference run id, none, or (default) the latest")
    args = parser.parse_args(argv)
    cfg = TrainRunConfig(args.profile, args.warehouse, args.snapshot, args.output_root, args.work_dir,
                         args.pricing_seed, args.preference_run)
    try:
        result = run_training(cfg, progress=lambda m: print(m, file=sys.stderr))
    except (ValueError, OSError, WarehouseError) as exc:  # a bad profile, snapshot, warehouse or pair
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    run = result.run
    print(json.dumps({"run_id": run["run_id"], "status": run["status"], "global_step": run["global_step"],
                      "steps_this_attempt": result.steps_this_attempt, "resumed_from": run["resumed_from"],
                      "final_checkpoint": run["final_checkpoint"], "reward_curve_png": run["reward_curve_png"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
