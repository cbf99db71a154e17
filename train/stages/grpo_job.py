"""The GRPO stage as a recorded job: a run of train/stages/grpo.py on a built training set, its row and steps in
the warehouse (train/stages/records.py), resumed from its newest complete checkpoint, finished with curves, the
diagnosis in words and ``summary.md``; a rerun of a finished run trains nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from train.evaluation.diagnose import diagnose_steps
from train.evaluation.report import plot_reward_curves, run_markdown
from train.stages.grpo import checkpoints, train
from train.stages.profiles import Profile
from train.stages.run_files import RunFileError, read_json
from train.stages.world import is_main
from train.stages.records import Recorder, TrainRunConfig, TrainRunResult, now, steps_from_log
from train.stages.trainset import BuiltSet
from warehouse.train_store import read_training_run, read_training_steps

CURVES_PNG = "reward_curves.png"


def train_grpo(cfg: TrainRunConfig, profile: Profile, built: BuiltSet, progress: Callable[[str], None],
               run_id: str | None = None, stage: str = "grpo") -> TrainRunResult:
    """The GRPO run of ``profile`` on ``built`` (from ``profile.model.name``), recorded as ``run_id`` (default: the
    id the profile and data name) with ``stage``; resumed from its newest complete checkpoint."""
    recorder = Recorder(cfg, profile, built, Path(cfg.output_root), progress, run_id, stage)
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


def _finish(recorder: Recorder, log_history: list[dict[str, Any]], global_step: int, final: str | None,
            dropped: dict[str, int], tasks: int) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """The end of a run: curves with what went wrong in words, the final record, ``summary.md`` and the log."""
    steps = steps_from_log(log_history, recorder.run_id, recorder.completions, recorder.seconds)
    diagnosis = diagnose_steps(steps, recorder.profile.grpo.min_group_std)
    png = recorder.output_dir / CURVES_PNG
    if is_main():  # one writer: rank 0 draws the curves and writes summary.md
        plot_reward_curves(steps, png, f"{recorder.run_id} ({recorder.profile.name})", diagnosis)
    recorder.write(log_history, status="finished", finished_at=now(), global_step=global_step,
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


def _already_finished(recorder: Recorder, progress: Callable[[str], None]) -> TrainRunResult:
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
    state = read_json(Path(last) / "trainer_state.json")
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise RunFileError(f"{Path(last) / 'trainer_state.json'}: no log_history list")
    dropped = json.loads(previous["dropped_json"]) if previous else {}
    run, stored, markdown = _finish(recorder, state["log_history"], step, last, dropped, recorder.run["instances"])
    return TrainRunResult(run, stored, 0, markdown)
