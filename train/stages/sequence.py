"""The stages a profile names (``stages: [sft, rft, grpo, evaluate]``), run in order as one resumable job.

    python -m train.stages.run --profile cpu-learn --warehouse warehouse/toolscale.duckdb

The whole run is named as a GRPO run is (``train-<profile>-<snapshot>-<hash>``, train/stages/records.py); each stage is its
own ``training_runs`` row ``<run>-<stage>`` with its ``stage`` column, and its own folder beside it under
``--output-root``. Each training stage starts from the previous stage's final model (the first from the profile's
model) and records that as ``start_model`` in its ``config_json``:

- ``sft``: oracle demonstrations of the training split, SFTTrainer (train/stages/sft.py); final model ``<folder>/final``.
- ``rft``: ``rft.rounds`` rounds of sampling, verifying and fine-tuning (train/stages/rft.py), in ``<folder>/round-N``;
  its steps are numbered on across rounds. A run in which no round kept an episode leaves the model as it was.
- ``grpo``: the GRPO run of train/stages/grpo_job.py from that model; final model its last checkpoint. With
  ``grpo.task_pool: rft_solved`` it draws only the training tasks an rft round solved (``grpo_pool``).
- ``evaluate``: the start model (``base``) and each earlier stage's final model on the snapshot's test split under
  held-out pricing, each prompt with the whole catalog of the task's user role (``data.max_tools`` shapes training
  prompts only) and the profile's limits (train/evaluation/evaluate.py, ``eval_runs``); one ``training_steps`` row per model evaluated (its held-out
  success as ``outcome_rate``, episodes with a format error as ``drop_format_error``), the details in
  ``<folder>/evaluations.json``.

A stage whose row is finished and whose final model is on disk is not run again (one line says so); a stage killed
half-way resumes from its newest complete checkpoint (an rft round from its kept episodes, an evaluation from the
models already scored). ``<output-root>/<run>/stages.png`` is the one plot (per stage: held-out success with a 95%
Wilson interval, training reward, held-out format-error rate) with what went wrong in words when nothing learned;
``summary.md`` beside it is the flow's artifact.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from train.evaluation.diagnose import diagnose_steps
from train.evaluation.evaluate import EvalConfig
from train.stages.profiles import Profile, load_profile
from train.evaluation.report import plot_stages, stages_markdown, wilson_interval
from train.stages.rft import Acceptance, read_acceptance, read_solved, round_done, run_round
from train.stages.grpo_job import train_grpo
from train.stages.records import Recorder, TrainRunConfig, TrainRunResult, load_built, now, run_identity
from train.stages.run_files import RunFileError, read_json, record_of
from train.stages.trainset import BuiltSet
from warehouse.train_store import read_training_run, read_training_steps, store_training

STAGES_PNG = "stages.png"
EVALUATIONS = "evaluations.json"


@dataclass
class Evaluation:
    """One model on the held-out split (an ``eval_runs`` row and what the stages plot reads of it)."""

    label: str  # base, or the stage whose final model it is
    model: str
    eval_run_id: str
    episodes: int
    solved: int
    format_error_episodes: int  # episodes with at least one format error
    mean_cost_usd: float
    calls_per_tool: dict[str, int]
    diagnosis: list[str]
    seconds: float

    @property
    def success(self) -> float:
        return self.solved / self.episodes if self.episodes else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.solved, self.episodes)


@dataclass
class StageRecord:
    """What one stage did (``ran`` False: it had finished before and nothing was done)."""

    stage: str
    run_id: str
    start_model: str
    final_model: str
    ran: bool
    steps_this_attempt: int
    seconds: float  # wall time of this attempt
    run: dict[str, Any]
    steps: list[dict[str, Any]]
    acceptance: list[Acceptance] = field(default_factory=list)  # rft: one per round
    evaluations: list[Evaluation] = field(default_factory=list)  # evaluate: one per model

    @property
    def reward(self) -> float | None:
        """The stage's training reward: GRPO's mean kept reward; rft's share of sampled episodes verified."""
        if self.stage == "grpo":
            kept = [s["reward_mean"] for s in self.steps if s.get("reward_mean") is not None]
            return sum(kept) / len(kept) if kept else None
        if self.stage == "rft" and self.acceptance:
            return sum(a.accepted for a in self.acceptance) / max(1, sum(a.sampled for a in self.acceptance))
        return None


@dataclass
class StagesResult:
    run_id: str
    output_dir: str  # <output-root>/<run>: the plot and the summary
    stages: list[StageRecord]
    png: str
    markdown: str
    diagnosis: list[str]

    @property
    def evaluations(self) -> list[Evaluation]:
        return [e for s in self.stages for e in s.evaluations]

    def as_run_result(self) -> TrainRunResult:
        """The shape ``python -m train.stages.run`` and the flow report: the whole run as one row."""
        trained = [s for s in self.stages if s.stage != "evaluate"]
        run = {"run_id": self.run_id, "status": "finished", "stage": ",".join(s.stage for s in self.stages),
               "global_step": sum(int(s.run["global_step"]) for s in trained),
               "final_checkpoint": self.stages[-1].final_model, "reward_curve_png": self.png,
               "output_dir": self.output_dir, "resumed_from": None,
               "stage_runs": [s.run_id for s in self.stages]}
        return TrainRunResult(run, [r for s in self.stages for r in s.steps],
                              sum(s.steps_this_attempt for s in self.stages), self.markdown)


@dataclass
class _Context:
    cfg: TrainRunConfig
    profile: Profile
    built: BuiltSet
    run_id: str
    tokenizer: Any
    progress: Callable[[str], None]
    world: Any = None  # the rollout world of sft and rft, built once when first needed

    def environment(self) -> Any:
        if self.world is None:
            from train.stages.rollout_env import build_world

            self.world = build_world(self.profile, self.tokenizer, self.built.pricing_seed, self.progress)
        return self.world


def run_stages(cfg: TrainRunConfig, progress: Callable[[str], None] = print,
               profile: Profile | None = None, built: BuiltSet | None = None) -> StagesResult:
    """Run (or resume) the stages of ``profile`` (default: ``cfg.profile`` loaded) in order, each recorded;
    ``built``: the training set, when the caller has read it already."""
    from train.models.model import load_tokenizer, resolve_model

    profile = profile or load_profile(cfg.profile)
    if not profile.stages:
        raise ValueError(f"profile {profile.name!r} names no stages; run it with train.stages.run as one GRPO run")
    if profile.processes > 1:
        raise ValueError(f"profile {profile.name!r}: stages run in one process; launch.processes must be 1")
    built = built or load_built(cfg, profile)
    run_id = run_identity(profile, built)[0]
    base = resolve_model(profile.model.name, cfg.work_dir)
    ctx = _Context(cfg, profile, built, run_id, load_tokenizer(base), progress)
    progress(f"run {run_id}: stages {', '.join(profile.stages)} on {len(built.data.tasks)} train-split tasks of "
             f"snapshot {built.data.snapshot_id} (the {built.data.splits['test']} test-split tasks are held out)")
    records: list[StageRecord] = []
    chain = [("base", base)]  # every model so far, in order: what the evaluate stage scores
    try:
        for stage in profile.stages:
            record = _run_stage(ctx, stage, chain)
            records.append(record)
            if stage != "evaluate":
                chain.append((stage, record.final_model))
    finally:
        if ctx.world is not None:
            ctx.world.close()
    return _summarise(ctx, records)


def _run_stage(ctx: _Context, stage: str, chain: list[tuple[str, str]]) -> StageRecord:
    stage_id, start = f"{ctx.run_id}-{stage}", chain[-1][1]
    previous = read_training_run(ctx.cfg.warehouse, stage_id)
    if previous is not None and previous["status"] == "finished" and _model_exists(previous["final_checkpoint"]):
        ctx.progress(f"stage {stage}: finished earlier ({stage_id}, step {previous['global_step']}); nothing to do")
        folder = Path(previous["output_dir"])
        return StageRecord(stage, stage_id, start, previous["final_checkpoint"], False, 0, 0.0, previous,
                           read_training_steps(ctx.cfg.warehouse, stage_id), _acceptances(folder),
                           _read_evaluations(folder))
    ctx.progress(f"stage {stage}: {stage_id} from {start}")
    started = time.perf_counter()
    record = {"sft": _sft, "rft": _rft, "grpo": _grpo, "evaluate": _evaluate}[stage](ctx, stage_id, start, chain)
    record.seconds = round(time.perf_counter() - started, 1)
    ctx.progress(f"stage {stage}: finished in {record.seconds:.0f} s; final model {record.final_model}")
    return record


def _model_exists(path: str | None) -> bool:
    return bool(path) and (Path(str(path)) / "config.json").exists()


def _recorder(ctx: _Context, stage_id: str, stage: str, start: str, max_steps: int) -> Recorder:
    recorder = Recorder(ctx.cfg, ctx.profile, ctx.built, Path(ctx.cfg.output_root), ctx.progress, stage_id, stage,
                         max_steps)
    config = json.loads(recorder.run["config_json"]) | {"stage": stage, "start_model": start}
    recorder.run["config_json"] = json.dumps(config, sort_keys=True, default=str)
    recorder.write([])
    return recorder


def _failed(recorder: Recorder, exc: BaseException) -> None:
    first = str(exc).splitlines()[0] if str(exc) else ""
    recorder.write([], status="failed", error=f"{type(exc).__name__}: {first}")


def _finished(ctx: _Context, recorder: Recorder, stage: str, start: str, final: str, steps_this_attempt: int,
              log: list[dict[str, Any]], **changes: Any) -> StageRecord:
    recorder.write(log, status="finished", finished_at=now(), final_checkpoint=final, **changes)
    run = read_training_run(ctx.cfg.warehouse, recorder.run_id) or recorder.run
    return StageRecord(stage, recorder.run_id, start, final, True, steps_this_attempt, 0.0, run,
                       read_training_steps(ctx.cfg.warehouse, recorder.run_id))


def _sft(ctx: _Context, stage_id: str, start: str, chain: list[tuple[str, str]]) -> StageRecord:
    from train.stages.sft import run_sft

    recorder = _recorder(ctx, stage_id, "sft", start, ctx.profile.sft.max_steps or 0)
    before = int(recorder.run["global_step"])
    world = ctx.environment()
    try:
        result = run_sft(ctx.profile, ctx.built.data.tasks, world.env, world.user, start, ctx.tokenizer,
                         str(recorder.output_dir), [recorder.callback()], ctx.progress)
    except BaseException as exc:
        _failed(recorder, exc)
        raise
    return _finished(ctx, recorder, "sft", start, str(result.final_checkpoint), result.global_step - before,
                     result.log_history, global_step=result.global_step,
                     max_steps=max(result.global_step, recorder.run["max_steps"]),
                     dropped_json=json.dumps(result.dropped), instances=result.examples)


def _last_step(folder: Path) -> int:
    """The step a finished round's trainer ended at (its newest complete checkpoint's)."""
    from train.models.checkpoints import complete_checkpoints

    saved = complete_checkpoints(folder)
    return int(Path(saved[-1]).name.split("-")[-1]) if saved else 0


def _acceptances(folder: Path) -> list[Acceptance]:
    found = [read_acceptance(p) for p in sorted(folder.glob("round-*"), key=lambda p: int(p.name.split("-")[-1]))]
    return [a for a in found if a is not None]


def _rft(ctx: _Context, stage_id: str, start: str, chain: list[tuple[str, str]]) -> StageRecord:
    recorder = _recorder(ctx, stage_id, "rft", start, 0)
    world, current, trained = ctx.environment(), start, 0
    try:
        for n in range(1, ctx.profile.rft.rounds + 1):
            folder = recorder.output_dir / f"round-{n}"
            if round_done(folder):
                ctx.progress(f"rft round {n}: finished earlier, kept")
            else:
                recorder.seconds.clear()
                result, _ = run_round(ctx.profile, ctx.built.data.tasks, world.env, world.user, current,
                                      ctx.tokenizer, folder, n, [recorder.callback()], ctx.progress)
                if result is not None:  # the round's steps, numbered on from the earlier rounds'
                    recorder.write(result.log_history)
                    trained += result.global_step
            if (folder / "final" / "config.json").exists():
                current = str(folder / "final")
            recorder.step_offset += _last_step(folder)
    except BaseException as exc:
        _failed(recorder, exc)
        raise
    recorder.step_offset = 0
    rounds = _acceptances(recorder.output_dir)
    steps = sum(_last_step(recorder.output_dir / f"round-{a.round}") for a in rounds)
    record = _finished(ctx, recorder, "rft", start, current, trained, [], global_step=steps, max_steps=steps,
                       instances=sum(a.accepted for a in rounds),
                       dropped_json=json.dumps({"unverified_samples": sum(a.sampled - a.accepted for a in rounds)}))
    record.acceptance = rounds
    return record


def grpo_pool(ctx: _Context) -> BuiltSet:
    """The training set GRPO draws from: every train-split task, or (``grpo.task_pool: rft_solved``) those an rft
    round of this run solved at least once; all of them, said in one line, when no round solved any."""
    if ctx.profile.grpo.task_pool != "rft_solved":
        return ctx.built
    rft_dir = Path(ctx.cfg.output_root) / f"{ctx.run_id}-rft"
    solved: set[str] = set()
    for folder in sorted(rft_dir.glob("round-*")):
        solved |= set(read_solved(folder) or {})
    tasks = [t for t in ctx.built.data.tasks if t.task_id in solved]
    if not tasks:
        ctx.progress("grpo: no rft round solved a training task; GRPO draws from all "
                     f"{len(ctx.built.data.tasks)} of them")
        return ctx.built
    ctx.progress(f"grpo: drawing from the {len(tasks)} of {len(ctx.built.data.tasks)} training tasks an rft round "
                 "solved at least once (grpo.task_pool rft_solved)")
    return replace(ctx.built, data=replace(ctx.built.data, tasks=tasks),
                   draws=[d for d in ctx.built.draws if d.task_id in solved])


def _grpo(ctx: _Context, stage_id: str, start: str, chain: list[tuple[str, str]]) -> StageRecord:
    profile = replace(ctx.profile, model=replace(ctx.profile.model, name=start))  # GRPO from the previous model
    result = train_grpo(ctx.cfg, profile, grpo_pool(ctx), ctx.progress, stage_id, "grpo")
    run = result.run
    if json.loads(run["config_json"]).get("start_model") != start:
        run["config_json"] = json.dumps(json.loads(run["config_json"]) | {"stage": "grpo", "start_model": start},
                                        sort_keys=True, default=str)
        store_training(ctx.cfg.warehouse, run, [])
    final = run["final_checkpoint"] or start
    return StageRecord("grpo", stage_id, start, final, True, result.steps_this_attempt, 0.0, run, result.steps)


def _read_evaluations(folder: Path) -> list[Evaluation]:
    path = folder / EVALUATIONS
    if not path.exists():
        return []
    stored = read_json(path)
    if not isinstance(stored, list):
        raise RunFileError(f"{path}: expected a JSON list of evaluations, got {type(stored).__name__}")
    return [record_of(path, Evaluation, e) for e in stored]


def _evaluate(ctx: _Context, stage_id: str, start: str, chain: list[tuple[str, str]]) -> StageRecord:
    recorder = _recorder(ctx, stage_id, "evaluate", start, len(chain))
    done = {e.label: e for e in _read_evaluations(recorder.output_dir)}
    evaluations: list[Evaluation] = []
    try:
        for label, model in chain:
            same = next((e for e in evaluations if e.model == model), None)
            if label in done and done[label].model == model:
                ctx.progress(f"evaluate {label}: scored earlier ({done[label].eval_run_id}), kept")
                evaluations.append(done[label])
            elif same is not None:  # a stage that left the model as it was (an rft that kept nothing)
                ctx.progress(f"evaluate {label}: the same model as {same.label}, scored once")
                evaluations.append(replace(same, label=label))
            else:
                evaluations.append(_evaluate_model(ctx, label, model, recorder.output_dir))
            _write_json(recorder.output_dir / EVALUATIONS, [asdict(e) for e in evaluations])
            store_training(ctx.cfg.warehouse, recorder.run, _eval_steps(stage_id, evaluations))
    except BaseException as exc:
        _failed(recorder, exc)
        raise
    record = _finished(ctx, recorder, "evaluate", start, start, len(evaluations), [], global_step=len(evaluations),
                       instances=evaluations[0].episodes if evaluations else 0)
    record.evaluations = evaluations
    return record


def _evaluate_model(ctx: _Context, label: str, model: str, folder: Path) -> Evaluation:
    from train.evaluation.evaluate import evaluate_orchestrator
    from warehouse.eval_store import eval_run_episodes

    started = time.perf_counter()
    cfg = stage_eval_config(ctx.profile, ctx.cfg.warehouse, ctx.built.data.snapshot_id, model, folder,
                            ctx.cfg.pricing_seed)
    report = evaluate_orchestrator(cfg, progress=lambda m: None)
    _, episodes = eval_run_episodes(ctx.cfg.warehouse, report.run_id)
    evaluation = Evaluation(label, model, report.run_id, report.episodes, sum(1 for e in episodes if e["solved"]),
                            sum(1 for e in episodes if e["format_errors"]), report.mean_cost_usd,
                            report.calls_per_tool, report.diagnosis, round(time.perf_counter() - started, 1))
    low, high = evaluation.interval
    ctx.progress(f"evaluate {label}: {evaluation.solved} of {evaluation.episodes} held-out tasks solved "
                 f"({evaluation.success:.1%}, 95% CI {low:.1%}-{high:.1%}); {report.run_id}")
    return evaluation


def stage_eval_config(p: Profile, warehouse: str, snapshot_id: str, model: str, folder: Path,
                      pricing_seed: int) -> EvalConfig:
    """How the evaluate stage scores a model: the profile's domains, turns and tools (search and code when its
    environment enables them), each prompt with the role's whole catalog; ``data.max_tools`` shapes training
    prompts only, since a cap at evaluation could only keep the gold's tools."""
    return EvalConfig(warehouse=warehouse, model=model, snapshot=snapshot_id, domains=p.data.domains,
                      limit=p.evaluate.max_tasks, seed=p.data.seed, pricing_seed=pricing_seed,
                      max_turns=p.episode.max_turns, agent_max_tokens=p.episode.max_turn_tokens,
                      local_search=p.environment.local_search, code_interpreter=p.environment.code_interpreter,
                      tool_format=p.environment.tool_format, out_dir=str(folder / "eval"), bf16=p.model.sample_bf16)


def _eval_steps(stage_id: str, evaluations: list[Evaluation]) -> list[dict[str, Any]]:
    """One ``training_steps`` row per model evaluated, in the chain's order."""
    return [{"run_id": stage_id, "step": n, "reward_mean": None, "reward_std": None, "outcome_rate": e.success,
             "cost_mean": e.mean_cost_usd, "completion_tokens": None, "tokens_seen": None,
             "drop_format_error": e.format_error_episodes, "drop_no_final_output": 0, "drop_low_std_group": 0,
             "groups_dropped": 0, "rollouts": e.episodes, "endings_json": "{}", "loss": None, "learning_rate": None,
             "seconds": e.seconds, "recorded_at": now(), "stage": "evaluate"}
            for n, e in enumerate(evaluations, 1)]


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=1))
    partial.replace(path)


def stages_diagnosis(records: list[StageRecord], min_std: float) -> list[str]:
    """What went wrong, in words, when no stage's model beat the base model on the held-out split (and what GRPO's
    steps say whenever they gave no gradient)."""
    lines: list[str] = []
    evaluations = [e for r in records for e in r.evaluations]
    base = next((e for e in evaluations if e.label == "base"), None)
    trained = [e for e in evaluations if e.label != "base"]
    if base is not None and trained and max(e.success for e in trained) <= base.success:
        lines.append(f"no stage beat the base model's held-out success ({base.success:.1%})")
        lines += [f"{e.label}: {line}" for e in trained[-1:] for line in e.diagnosis]
    for r in records:
        if r.stage == "grpo":
            lines += [f"grpo: {line}" for line in diagnose_steps(r.steps, min_std)]
        if r.stage == "rft" and r.acceptance and not any(a.accepted for a in r.acceptance):
            lines.append(f"rft: no sampled episode passed the verifier in {len(r.acceptance)} round(s): "
                         "the model was left as it was")
    return lines


def _summarise(ctx: _Context, records: list[StageRecord]) -> StagesResult:
    folder = Path(ctx.cfg.output_root) / ctx.run_id
    diagnosis = stages_diagnosis(records, ctx.profile.grpo.min_group_std)
    points = stage_points(records)
    png = plot_stages(points, folder / STAGES_PNG, f"{ctx.run_id} ({ctx.profile.name})", diagnosis)
    markdown = stages_markdown(ctx.run_id, [_row(r) for r in records], points, str(png), diagnosis)
    (folder / "summary.md").write_text(markdown)
    for line in diagnosis:
        ctx.progress(f"diagnosis: {line}")
    ctx.progress(f"run {ctx.run_id}: {len(records)} stages done; plot in {png}")
    return StagesResult(ctx.run_id, str(folder), records, str(png), markdown, diagnosis)


def stage_points(records: list[StageRecord]) -> list[dict[str, Any]]:
    """Per model of the chain (base, then each training stage): held-out success with its interval, held-out
    format-error rate, training reward, and GRPO's share of rollouts with a format error (None where there is none)."""
    evaluations = {e.label: e for r in records for e in r.evaluations}
    labels = ["base"] + [r.stage for r in records if r.stage != "evaluate"]
    reward = {r.stage: r.reward for r in records}
    rollouts = {r.stage: sum(int(s["rollouts"] or 0) for s in r.steps) for r in records if r.stage == "grpo"}
    dropped = {r.stage: sum(int(s["drop_format_error"] or 0) for s in r.steps) for r in records if r.stage == "grpo"}
    points = []
    for label in labels:
        e = evaluations.get(label)
        points.append({"label": label, "success": e.success if e else None,
                       "interval": e.interval if e else None, "episodes": e.episodes if e else 0,
                       "format_rate": e.format_error_episodes / e.episodes if e and e.episodes else None,
                       "reward": reward.get(label),
                       "train_format_rate": dropped[label] / rollouts[label] if rollouts.get(label) else None})
    return points


def _row(r: StageRecord) -> dict[str, Any]:
    return {"stage": r.stage, "run_id": r.run_id, "start_model": r.start_model, "final_model": r.final_model,
            "ran": r.ran, "steps": r.run.get("global_step"), "steps_this_attempt": r.steps_this_attempt,
            "seconds": r.seconds if r.ran else None}
